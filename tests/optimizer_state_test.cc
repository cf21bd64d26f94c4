// Optimizer state: bytes per optimizer by hand, and the optimizer phase peak.
#include "analyzer/optimizer_state.h"

#include <doctest/doctest.h>

#include <string>

#include "analyzer/graph_json.h"
#include "analyzer/program.h"
#include "analyzer/simulator.h"

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
  CHECK(adam.stats.workspace_bytes == 64);
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
  CHECK(a.g.ops[op].workspace_bytes == 64);
  Program p = BuildBaselineProgram(a.g, AccumulationMode::kInplace);
  SimResult sim;
  std::string err;
  REQUIRE_MESSAGE(Simulate(a.g, p, SimOptions(), &sim, &err), err);
  // Resident x 16 + w 64 + frozen 32 + states 128 = 240. After fc.bw:
  // + loss 4 + w.grad 64 = 308; the update adds its 64-byte workspace.
  CHECK(sim.start_bytes == 240);
  CHECK(sim.peak_bytes == 372);
  CHECK(p.steps[sim.peak_step].op == op);
  CHECK(sim.peak_by_kind[static_cast<int>(TensorKind::kOptimizerState)] == 128);
  // Without: fc.bw's 16 + 64 + 32 + 4 + 64 = 180.
  Added none = Add("float32", OptimizerKind::kNone, false);
  Program p0 = BuildBaselineProgram(none.g, AccumulationMode::kInplace);
  REQUIRE(Simulate(none.g, p0, SimOptions(), &sim, &err));
  CHECK(sim.peak_bytes == 180);
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
