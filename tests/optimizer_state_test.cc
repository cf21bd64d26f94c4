// Optimizer state: bytes per optimizer by hand, the update workspaces of
// torch.optim's single-tensor, foreach and fused paths, and the phase peak.
#include "analyzer/lower/optimizer_state.h"

#include <doctest/doctest.h>

#include <string>

#include "analyzer/import/graph_json.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan {
namespace {

// w [4,4] in DTYPE (16 elements); frozen [8] gets no gradient, so no state.
std::string Joint(const std::string& dtype) {
  return R"({"format": "memplan.graph/1", "name": "tiny",
  "tensors": [
    {"id": "x", "shape": [1, 4], "dtype": "float32", "kind": "input"},
    {"id": "w", "shape": [4, 4], "dtype": ")" +
         dtype + R"(", "kind": "parameter"},
    {"id": "frozen", "shape": [8], "dtype": "float32", "kind": "parameter"},
    {"id": "y", "shape": [1, 4], "dtype": "float32"},
    {"id": "loss", "shape": [], "dtype": "float32"},
    {"id": "w.grad", "shape": [4, 4], "dtype": ")" +
         dtype + R"(", "kind": "gradient", "grad_of": "w"}
  ],
  "ops": [
    {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["y"]},
    {"id": "sum", "type": "sum", "inputs": ["y"], "outputs": ["loss"]},
    {"id": "fc.bw", "type": "linear_backward", "inputs": ["x", "loss"], "outputs": ["w.grad"],
     "phase": "backward"}
  ],
  "outputs": ["loss"]})";
}

struct Added {
  OptimizerStats stats;
  Graph g;
};

Added Add(const std::string& dtype, OptimizerKind kind, bool master) {
  Added a;
  std::string err;
  REQUIRE_MESSAGE(ParseGraph(Joint(dtype), "t.json", GraphLoadOptions(), &a.g, &err), err);
  OptimizerOptions o;
  o.kind = kind;
  o.master_fp32 = master;
  REQUIRE_MESSAGE(AddOptimizerState(o, &a.g, &a.stats, &err), err);
  return a;
}

TEST_CASE("AddOptimizerState: bytes per optimizer") {
  using K = OptimizerKind;
  // bfloat16 w: 16 x 2 = 32 bytes.
  CHECK(Add("bfloat16", K::kNone, false).stats.state_bytes == 0);
  CHECK(Add("bfloat16", K::kSgd, false).stats.state_bytes == 0);
  CHECK(Add("bfloat16", K::kSgd, false).stats.parameters == 1);  // frozen: none
  CHECK(Add("bfloat16", K::kMomentum, false).stats.state_bytes == 32);
  CHECK(Add("bfloat16", K::kAdam, false).stats.state_bytes == 64);
  CHECK(Add("bfloat16", K::kAdamW, false).stats.state_bytes == 64);
  // fp32 master weights: master 64 + states in fp32.
  CHECK(Add("bfloat16", K::kSgd, true).stats.state_bytes == 64);
  CHECK(Add("bfloat16", K::kMomentum, true).stats.state_bytes == 64 + 64);
  Added adam = Add("bfloat16", K::kAdam, true);
  CHECK(adam.stats.state_bytes == 64 + 128);
  CHECK(adam.stats.master_bytes == 64);
  // Single-tensor (the graph names no target device): sqrt + div, 2 x 64.
  CHECK(adam.stats.workspace_bytes == 128);
  CHECK(adam.stats.impl == OptimizerImpl::kSingleTensor);
  CHECK(adam.g.FindTensor("w.master") >= 0);
  CHECK(adam.g.tensors[adam.g.FindTensor("w.exp_avg_sq")].dtype == DType::kFloat32);
  CHECK(adam.g.tensors[adam.g.FindTensor("w.exp_avg")].kind == TensorKind::kOptimizerState);
  CHECK(adam.g.FindTensor("frozen.exp_avg") < 0);
  // float32 w: 64 bytes; no master copy of a float32 parameter.
  CHECK(Add("float32", K::kAdam, false).stats.state_bytes == 128);
  CHECK(Add("float32", K::kAdam, true).stats.state_bytes == 128);
  CHECK(Add("float32", K::kAdam, true).stats.master_bytes == 0);
  CHECK(Add("float16", K::kMomentum, false).stats.state_bytes == 32);
}

TEST_CASE("AddOptimizerState: the optimizer phase holds the peak") {
  Added a = Add("float32", OptimizerKind::kAdam, false);
  const int op = a.g.FindOp("w.adam_step");
  REQUIRE(op >= 0);
  CHECK(a.g.ops[op].phase == Phase::kOptimizer);
  CHECK(a.g.ops[op].type == "adam_step");
  CHECK(a.g.ops[op].workspace_bytes == 128);
  Program p = BuildBaselineProgram(a.g, AccumulationMode::kInplace);
  SimResult sim;
  std::string err;
  REQUIRE_MESSAGE(Simulate(a.g, p, SimOptions(), &sim, &err), err);
  // Resident x 16 + w 64 + frozen 32 + states 128 = 240. After fc.bw:
  // + loss 4 + w.grad 64 = 308; the update adds its workspace: sqrt(v) and
  // sqrt(v) / bias_correction2_sqrt, 64 bytes each.
  CHECK(sim.start_bytes == 240);
  CHECK(sim.peak_bytes == 436);
  CHECK(p.steps[sim.peak_step].op == op);
  CHECK(sim.peak_by_kind[static_cast<int>(TensorKind::kOptimizerState)] == 128);
  // Without: fc.bw's 16 + 64 + 32 + 4 + 64 = 180.
  Added none = Add("float32", OptimizerKind::kNone, false);
  Program p0 = BuildBaselineProgram(none.g, AccumulationMode::kInplace);
  REQUIRE(Simulate(none.g, p0, SimOptions(), &sim, &err));
  CHECK(sim.peak_bytes == 180);
}

// Parameters a [8] f32 (32 B), b [4,4] f32 (64 B), c [2] bf16 (4 B), d [6]
// f32 (24 B), in this order, each with a gradient of its own dtype.
constexpr const char* kFour = R"({"format": "memplan.graph/1", "name": "four",
  "tensors": [
    {"id": "x", "shape": [1, 4], "dtype": "float32", "kind": "input"},
    {"id": "a", "shape": [8], "dtype": "float32", "kind": "parameter"},
    {"id": "b", "shape": [4, 4], "dtype": "float32", "kind": "parameter"},
    {"id": "c", "shape": [2], "dtype": "bfloat16", "kind": "parameter"},
    {"id": "d", "shape": [6], "dtype": "float32", "kind": "parameter"},
    {"id": "y", "shape": [1, 4], "dtype": "float32"},
    {"id": "loss", "shape": [], "dtype": "float32"},
    {"id": "a.grad", "shape": [8], "dtype": "float32", "kind": "gradient", "grad_of": "a"},
    {"id": "b.grad", "shape": [4, 4], "dtype": "float32", "kind": "gradient", "grad_of": "b"},
    {"id": "c.grad", "shape": [2], "dtype": "bfloat16", "kind": "gradient", "grad_of": "c"},
    {"id": "d.grad", "shape": [6], "dtype": "float32", "kind": "gradient", "grad_of": "d"}
  ],
  "ops": [
    {"id": "f", "type": "custom", "inputs": ["x", "a", "b", "c", "d"], "outputs": ["y"]},
    {"id": "sum", "type": "sum", "inputs": ["y"], "outputs": ["loss"]},
    {"id": "f.bw", "type": "custom_backward", "inputs": ["x", "loss"],
     "outputs": ["a.grad", "b.grad", "c.grad", "d.grad"], "phase": "backward"}
  ],
  "outputs": ["loss"]})";

struct Four {
  Graph g;
  OptimizerStats stats;
  int64_t ws(const std::string& param, const std::string& type) const {
    const int o = g.FindOp(param + ".adam_step");
    REQUIRE(o >= 0);
    CHECK(g.ops[o].type == type);
    return g.ops[o].workspace_bytes;
  }
  int64_t Peak(std::string* at) const {
    Program p = BuildBaselineProgram(g, AccumulationMode::kInplace);
    SimResult sim;
    std::string err;
    REQUIRE_MESSAGE(Simulate(g, p, SimOptions(), &sim, &err), err);
    *at = g.ops[p.steps[sim.peak_step].op].id;
    return sim.peak_bytes;
  }
};

Four AddFour(const std::string& target_device, OptimizerImpl impl, bool master = false) {
  Four f;
  std::string err;
  REQUIRE_MESSAGE(ParseGraph(kFour, "four.json", GraphLoadOptions(), &f.g, &err), err);
  f.g.target_device = target_device;
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.master_fp32 = master;
  o.impl = impl;
  REQUIRE_MESSAGE(AddOptimizerState(o, &f.g, &f.stats, &err), err);
  return f;
}

// Resident x 16 + a 32 + b 64 + c 4 + d 24 + state 2 x 124 = 388; after
// f.bw: + loss 4 + gradients 124 = 516 live when the updates run.
TEST_CASE("AddOptimizerState: single-tensor Adam, the default off CUDA") {
  CHECK(ResolveOptimizerImpl(OptimizerImpl::kAuto, "cpu") == OptimizerImpl::kSingleTensor);
  CHECK(ResolveOptimizerImpl(OptimizerImpl::kAuto, "") == OptimizerImpl::kSingleTensor);
  CHECK(ResolveOptimizerImpl(OptimizerImpl::kAuto, "cuda") == OptimizerImpl::kForeach);
  CHECK(ResolveOptimizerImpl(OptimizerImpl::kFused, "cpu") == OptimizerImpl::kFused);
  for (const char* device : {"cpu", ""}) {
    Four f = AddFour(device, OptimizerImpl::kAuto);
    CHECK(f.stats.impl == OptimizerImpl::kSingleTensor);
    // 2 x own exp_avg_sq + the previous parameter's denom.
    CHECK(f.ws("a", "adam_step") == 2 * 32);
    CHECK(f.ws("b", "adam_step") == 2 * 64 + 32);
    CHECK(f.ws("c", "adam_step") == 2 * 4 + 64);
    CHECK(f.ws("d", "adam_step") == 2 * 24 + 4);
    CHECK(f.stats.workspace_bytes == 160);
    std::string at;
    CHECK(f.Peak(&at) == 516 + 160);
    CHECK(at == "b.adam_step");
  }
}

TEST_CASE("AddOptimizerState: foreach Adam, the default on CUDA, is list-wide") {
  Four f = AddFour("cuda", OptimizerImpl::kAuto);
  CHECK(f.stats.impl == OptimizerImpl::kForeach);
  // Groups by dtype in order of appearance: float32 {a, b, d} 120 bytes, then
  // bfloat16 {c} 4 bytes while the float32 list is still referenced.
  CHECK(f.ws("a", "adam_foreach_step") == 120);
  CHECK(f.ws("b", "adam_foreach_step") == 0);
  CHECK(f.ws("c", "adam_foreach_step") == 4 + 120);
  CHECK(f.ws("d", "adam_foreach_step") == 0);
  CHECK(f.stats.workspace_bytes == 124);
  std::string at;
  CHECK(f.Peak(&at) == 516 + 124);
  CHECK(at == "c.adam_step");
  // fp32 master weights: every state float32 (c's 8 bytes), one group of 128;
  // resident + c.master 8 + c's states 8 more.
  Four m = AddFour("cuda", OptimizerImpl::kAuto, /*master=*/true);
  CHECK(m.ws("a", "adam_foreach_step") == 128);
  CHECK(m.ws("c", "adam_foreach_step") == 0);
  CHECK(m.Peak(&at) == 516 + 16 + 128);
  CHECK(at == "a.adam_step");
  // An explicit single-tensor choice on CUDA, and fused: no workspace.
  CHECK(AddFour("cuda", OptimizerImpl::kSingleTensor).stats.workspace_bytes == 160);
  Four fused = AddFour("cpu", OptimizerImpl::kFused);
  CHECK(fused.ws("b", "adam_fused_step") == 0);
  CHECK(fused.stats.workspace_bytes == 0);
}

TEST_CASE("AddOptimizerState: SGD and momentum update in place") {
  for (const char* device : {"cpu", "cuda"})
    for (OptimizerKind k : {OptimizerKind::kSgd, OptimizerKind::kMomentum}) {
      Four f;
      std::string err;
      REQUIRE(ParseGraph(kFour, "four.json", GraphLoadOptions(), &f.g, &err));
      f.g.target_device = device;
      OptimizerOptions o;
      o.kind = k;
      REQUIRE_MESSAGE(AddOptimizerState(o, &f.g, &f.stats, &err), err);
      CHECK(f.stats.workspace_bytes == 0);
      const std::string type = std::string(OptimizerKindName(k)) +
                               (std::string(device) == "cuda" ? "_foreach_step" : "_step");
      CHECK(f.g.ops[f.g.FindOp(std::string("b.") + OptimizerKindName(k) + "_step")].type == type);
    }
}

TEST_CASE("SetOptimizerWorkspaces: recomputed over the ops that remain") {
  // As after ZeRO-1 dropped b's update: c's previous parameter is a.
  Four f = AddFour("cpu", OptimizerImpl::kAuto);
  std::vector<Op> kept;
  for (Op& op : f.g.ops)
    if (op.id != "b.adam_step") kept.push_back(std::move(op));
  f.g.ops = std::move(kept);
  f.g.op_index.Clear();
  std::string err;
  REQUIRE_MESSAGE(f.g.Finalize(&err), err);
  CHECK(SetOptimizerWorkspaces(&f.g) == 2 * 32);
  CHECK(f.ws("c", "adam_step") == 2 * 4 + 32);
  CHECK(f.ws("d", "adam_step") == 2 * 24 + 4);
  CHECK(f.ws("a", "adam_step") == 2 * 32);
}

TEST_CASE("AddOptimizerState: refuses a second optimizer phase") {
  Added a = Add("float32", OptimizerKind::kAdam, false);
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  OptimizerStats stats;
  std::string err;
  CHECK(!AddOptimizerState(o, &a.g, &stats, &err));
  CHECK(err == "--optimizer: the graph already has an optimizer phase (op \"w.adam_step\")");
  OptimizerKind k;
  CHECK(ParseOptimizerKind("adamw", &k));
  CHECK(k == OptimizerKind::kAdamW);
  CHECK(!ParseOptimizerKind("lion", &k));
  CHECK(OptimizerLabel({OptimizerKind::kAdam, true}) == "adam+master_fp32");
}

}  // namespace
}  // namespace memplan
