#include <doctest/doctest.h>

#include <algorithm>
#include <utility>

#include "analyzer/drivers/analysis.h"
#include "analyzer/lower/optimizer_state.h"
#include "analyzer/lower/parallel/rank_step.h"
#include "analyzer/plan/planner.h"
#include "analyzer/plan/sac_policy.h"
#include "analyzer/sim/simulator.h"
#include "parallel_three.h"
#include "test_util.h"

namespace memplan::parallel {
namespace {

using testing_three::kThree;
using testing_three::U;

Graph Step(OptimizerKind optimizer = OptimizerKind::kNone) {
  Graph g = testing::MustLower(kThree);
  OptimizerOptions o;
  o.kind = optimizer;
  OptimizerStats stats;
  std::string err;
  REQUIRE(AddOptimizerState(o, &g, &stats, &err));
  return g;
}

SimResult Run(const Graph& g) { return testing::Baseline(g, AccumulationMode::kInplace); }

Graph Rank(const ParallelOptions& options, RankStats* stats,
           OptimizerKind optimizer = OptimizerKind::kNone) {
  Graph g = Step(optimizer);
  std::string err;
  INFO(err);
  REQUIRE(MakeRankStep(options, &g, stats, &err));
  return g;
}

std::vector<std::string> OpIds(const Graph& g) {
  std::vector<std::string> ids;
  for (const Op& op : g.ops) ids.push_back(op.id);
  return ids;
}

TEST_CASE("parallel: the single-device step, by hand") {
  // At f2.bw: x, w0, w1, w2 (4U) + a, y, z.grad, y.grad, w2.grad (5U) + loss.
  CHECK(Run(Step()).peak_bytes == 9 * U + 4);
}

TEST_CASE("parallel: ddp adds its gradient buckets for the whole step") {
  RankStats stats;
  ParallelOptions options;
  options.strategy = Strategy::kDdp;
  options.world_size = 4;
  Graph g = Rank(options, &stats);
  // Reverse order w2, w1, w0: 3 KiB never reaches the first bucket's 1 MiB.
  CHECK(stats.buckets == 1);
  CHECK(stats.bucket_bytes == 3 * U);
  SimResult r = Run(g);
  CHECK(r.peak_bytes == 9 * U + 4 + 3 * U);
  // At the end: resident 4U, buckets 3U, the gradients 3U, loss.
  CHECK(r.end_bytes == 10 * U + 4);
  // As views of the buckets, the gradients are copied in and freed.
  options.gradient_as_bucket_view = true;
  Graph v = Rank(options, &stats);
  CHECK(stats.gradient_as_bucket_view);
  SimResult rv = Run(v);
  CHECK(rv.peak_bytes == 9 * U + 4 + 3 * U);
  CHECK(rv.end_bytes == 7 * U + 4);
  CHECK(v.FindOp("ddp.copy_to_bucket.w2") == v.FindOp("f2.bw") + 1);
}

TEST_CASE("parallel: ddp closes the first bucket at 1 MiB, the rest at bucket_cap_mb") {
  // Parameters of 1 MiB: w2 fills the first bucket, w1 and w0 the next (cap
  // 25 MiB), or one each with a 1 MiB cap.
  std::string text = kThree;
  for (const char* w : {"w0", "w1", "w2"}) {
    const std::string from = std::string("{\"id\": \"") + w + "\", \"shape\": [256]";
    const std::string to = std::string("{\"id\": \"") + w + "\", \"shape\": [262144]";
    text.replace(text.find(from), from.size(), to);
  }
  text = std::string(text);
  // x, a, y, z must match w's shape for mul: make them [262144] too.
  for (const char* t : {"x", "a", "y", "z"}) {
    const std::string from = std::string("{\"id\": \"") + t + "\", \"shape\": [256]";
    const std::string to = std::string("{\"id\": \"") + t + "\", \"shape\": [262144]";
    text.replace(text.find(from), from.size(), to);
  }
  for (int64_t cap_mib : {25, 1}) {
    CAPTURE(cap_mib);
    Graph g = testing::MustLower(text);
    RankStats stats;
    std::string err;
    ParallelOptions options{.strategy = Strategy::kDdp, .world_size = 2};
    options.bucket_cap_bytes = cap_mib << 20;
    REQUIRE(MakeRankStep(options, &g, &stats, &err));
    CHECK(stats.buckets == (cap_mib == 25 ? 2 : 3));
    CHECK(stats.bucket_bytes == 3 * (int64_t{1} << 20));
    CHECK(g.tensors[g.FindTensor("ddp.bucket.0")].bytes == int64_t{1} << 20);
  }
}

TEST_CASE("parallel: zero1 keeps the optimizer state of its own parameters") {
  // Adam: 2 state tensors per parameter. Equal sizes, in order: w0 -> rank 0,
  // w1 -> rank 1, w2 -> rank 0 (ties go to the lowest rank).
  RankStats ddp_stats, r0, r1;
  Graph ddp = Rank({.strategy = Strategy::kDdp, .world_size = 2}, &ddp_stats, OptimizerKind::kAdam);
  Graph g0 = Rank({.strategy = Strategy::kZero1, .world_size = 2}, &r0, OptimizerKind::kAdam);
  Graph g1 =
      Rank({.strategy = Strategy::kZero1, .world_size = 2, .rank = 1}, &r1, OptimizerKind::kAdam);
  CHECK(ddp_stats.optimizer_state_bytes == 6 * U);
  CHECK(r0.rank == 0);  // the rank with the most state
  CHECK(r0.optimizer_state_bytes == 4 * U);
  CHECK(r1.optimizer_state_bytes == 2 * U);
  CHECK(g0.FindOp("w1.adam_step") < 0);
  CHECK(g0.FindOp("w2.adam_step") >= 0);
  CHECK(g1.FindOp("w1.adam_step") >= 0);
  CHECK(g1.FindTensor("w0.exp_avg") < 0);
  // The peak is in a single-tensor Adam update: its workspace is 2 b(p) plus
  // the previous update's denom on this rank. ddp and rank 0 peak at an
  // update that follows another (3U); rank 1 updates w1 alone (2U).
  CHECK(Run(ddp).peak_bytes - Run(g0).peak_bytes == 2 * U);
  CHECK(Run(g0).peak_bytes - Run(g1).peak_bytes == 2 * U + U);
  CHECK(g1.ops[g1.FindOp("w1.adam_step")].workspace_bytes == 2 * U);
  CHECK(g0.ops[g0.FindOp("w2.adam_step")].workspace_bytes == 3 * U);
}

TEST_CASE("parallel: fsdp gathers each module's shards before its forward and backward") {
  RankStats stats;
  Graph g = Rank({.strategy = Strategy::kFsdp, .world_size = 2, .shard_depth = 1}, &stats);
  CHECK(stats.units == std::vector<std::string>{"l0", "l1", "l2"});
  CHECK(stats.parameter_bytes == 3 * U / 2);
  // Each module is gathered again one module ahead, at the previous one's
  // pre-backward (l2's and l1's before l2's first backward op, l0's before
  // l1's), l0 too though its backward never reads w0. Each post-backward
  // frees the unsharded parameters, then reduce-scatters.
  CHECK(OpIds(g) == std::vector<std::string>{"fsdp.l0.all_gather",
                                             "fsdp.l0.all_gather_copy_out",
                                             "f0",
                                             "fsdp.l1.all_gather",
                                             "fsdp.l1.free_previous_all_gather",
                                             "fsdp.l1.all_gather_copy_out",
                                             "f1",
                                             "fsdp.l2.all_gather",
                                             "fsdp.l2.free_previous_all_gather",
                                             "fsdp.l2.all_gather_copy_out",
                                             "f2",
                                             "fsdp.root.post_forward",
                                             "l",
                                             "loss.grad.seed",
                                             "l.bw",
                                             "fsdp.l1.all_gather.bw",
                                             "fsdp.l2.all_gather.bw",
                                             "f2.bw",
                                             "fsdp.l2.reshard",
                                             "fsdp.l2.reduce_scatter",
                                             "fsdp.l0.all_gather.bw",
                                             "f1.bw",
                                             "fsdp.l1.reshard",
                                             "fsdp.l1.reduce_scatter_wait_previous",
                                             "fsdp.l1.reduce_scatter",
                                             "f0.bw",
                                             "fsdp.l0.reshard",
                                             "fsdp.l0.reduce_scatter_wait_previous",
                                             "fsdp.l0.reduce_scatter",
                                             "fsdp.root.post_backward"});
  // Each reduce-scatter's flat input (world x the padded gradient shards) is
  // held until the next unit's post-backward, the last to the backward's end.
  CHECK(testing::Names(g, g.ops[g.FindOp("fsdp.l1.reduce_scatter_wait_previous")].inputs) ==
        std::vector<std::string>{"fsdp.l2.reduce_scatter_input"});
  CHECK(testing::TensorNamed(g, "fsdp.l2.reduce_scatter_input").bytes == U);
  CHECK(testing::Names(g, g.ops[g.FindOp("fsdp.root.post_backward")].inputs) ==
        std::vector<std::string>{"fsdp.l0.reduce_scatter_input"});
  CHECK(testing::Names(g, g.ops[g.FindOp("fsdp.l0.reshard")].inputs) ==
        std::vector<std::string>{"w0.unsharded.bw"});
  SimResult r = Run(g);
  // At f1.bw: x (U) + 3 shards (1.5U) + a, y.grad, a.grad, w1.grad, w0 and w1
  // gathered again, l2's reduce-scatter input (7U) + w2's sharded gradient
  // (U/2) + loss. (At f2.bw: 2.5U + 7U + loss.)
  CHECK(r.peak_bytes == 10 * U + 4);
  CHECK(g.ops[BuildBaselineProgram(g, AccumulationMode::kInplace).steps[r.peak_step].op].id ==
        "f1.bw");
  // At the end: x, the shards, the sharded gradients (1.5U), loss.
  CHECK(r.end_bytes == U + 3 * U / 2 + 3 * U / 2 + 4);
}

TEST_CASE("parallel: fsdp's buffer frees leave a checkpointed module's buffers in it") {
  // The next unit's all-gather frees l0's flat buffer (an op of no module).
  // That free is no reader that makes the buffer l0's output: checkpoint(l0)
  // would otherwise keep every layer's flat buffer to the backward.
  RankStats stats;
  Graph g = Rank({.strategy = Strategy::kFsdp, .world_size = 2, .shard_depth = 1}, &stats);
  const ModuleRegions regions = FindModuleRegions(g, 1);
  for (const std::string unit : {"l0", "l1", "l2"}) {
    CAPTURE(unit);
    const int flat = g.FindTensor("fsdp." + unit + ".all_gather_output");
    REQUIRE(flat >= 0);
    CHECK(regions.module_of_op[g.tensors[flat].producer] == unit);
    CHECK_FALSE(regions.escapes[flat]);
  }
  // A reader in another module still makes a tensor escape: l1 reads a.
  CHECK(regions.escapes[g.FindTensor("a")]);
}

TEST_CASE("parallel: fsdp with every layer checkpointed holds one layer's gather at a time") {
  // gpt_tiny under FSDP (units h.0, h.1, root), each layer in checkpoint():
  // a forward flat buffer lives from its all-gather to the next unit's
  // (two overlap there), and a recomputation's re-gather to its copy-out.
  JointGraph jg;
  std::string err;
  REQUIRE(
      LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &jg, &err));
  RankStats stats;
  ParallelOptions fsdp{.strategy = Strategy::kFsdp, .world_size = 2};
  fsdp.shard_modules = {"h.0", "h.1"};
  REQUIRE(MakeRankStep(fsdp, &jg.graph, &stats, &err));
  CHECK(stats.units == std::vector<std::string>{"", "h.0", "h.1"});
  const Graph& g = jg.graph;
  PlannerOptions module;
  module.granularity = Granularity::kModule;
  PlanResult plan;
  REQUIRE(PlanCheckpoints(g, 1, module, &plan, &err));
  CHECK(plan.modules == std::vector<std::string>{"h.0", "h.1", "ln_f"});
  const SimResult& sim = plan.best.sim;
  std::vector<std::pair<int, int>> flats;  // (alloc, free) step
  for (const BufferInterval& b : sim.intervals) {
    if (g.tensors[b.owner].id.ends_with(".all_gather_output"))
      flats.emplace_back(b.alloc_step, b.free_step);
  }
  // root, h.0, h.1 in the forward; h.1 and h.0 again for their recomputation
  // (ln_f's recomputation reads the root's copy, which is not resharded).
  CHECK(flats.size() == 5);
  const int steps = static_cast<int>(plan.best.checkpoint.program.steps.size());
  for (int s = 0; s < steps; ++s) {
    int alive = 0;
    for (auto [alloc, free] : flats) alive += alloc <= s && (free < 0 || s < free);
    CHECK(alive <= 2);
  }
}

TEST_CASE("parallel: fsdp's default units are the first numbered modules") {
  // Scopes as a wrapped model has them: net.h.0.fc, net.h.1.fc, net.head.
  // Depths 1 and 2 name "net" and "net.h"; depth 3 the blocks net.h.0, net.h.1.
  std::string text = kThree;
  for (auto [from, to] : {std::pair{"\"scope\": \"l0\"", "\"scope\": \"net.h.0.fc\""},
                          std::pair{"\"scope\": \"l1\"", "\"scope\": \"net.h.1.fc\""},
                          std::pair{"\"scope\": \"l2\"", "\"scope\": \"net.head\""}})
    text.replace(text.find(from), std::string(from).size(), to);
  Graph g = testing::MustLower(text);
  RankStats stats;
  std::string err;
  REQUIRE(MakeRankStep({.strategy = Strategy::kFsdp, .world_size = 2}, &g, &stats, &err));
  // net.head (2 components) is no module at depth 3: the root's, as
  // fully_shard on the blocks and then the model leaves it.
  CHECK(stats.units == std::vector<std::string>{"net.h.0", "net.h.1", ""});
  // No numbered module: the shallowest depth whose modules each hold at most
  // half of the parameter bytes (l0, l1, l2 at depth 1: a third each).
  Graph three = testing::MustLower(kThree);
  REQUIRE(MakeRankStep({.strategy = Strategy::kFsdp, .world_size = 2}, &three, &stats, &err));
  CHECK(stats.units == std::vector<std::string>{"l0", "l1", "l2"});
}

TEST_CASE("parallel: fsdp's root holds an embedding and the model's own loss to the end") {
  // Issue 31. A Hugging Face causal LM as exported: net.embed (w0, which no
  // backward op reads), the blocks net.h.0 and net.h.1, and the model's own
  // loss inside the model (scope "net"). fully_shard on the blocks, then on
  // the model: the embedding is the root's, gathered when the model's forward
  // starts, not resharded (FSDP2's default for the root), and held to the
  // root's post-backward after its last gradient; the root's pre-backward
  // runs when the loss's gradient is made, before the loss's backward, and
  // prefetches the last block there.
  std::string text = kThree;
  for (auto [from, to] : {std::pair{"\"scope\": \"l0\"", "\"scope\": \"net.embed\""},
                          std::pair{"\"scope\": \"l1\"", "\"scope\": \"net.h.0.fc\""},
                          std::pair{"\"scope\": \"l2\"", "\"scope\": \"net.h.1.fc\""},
                          std::pair{"\"scope\": \"loss\"", "\"scope\": \"net\""}})
    text.replace(text.find(from), std::string(from).size(), to);
  Graph g = testing::MustLower(text);
  RankStats stats;
  std::string err;
  REQUIRE(MakeRankStep({.strategy = Strategy::kFsdp, .world_size = 2}, &g, &stats, &err));
  CHECK(stats.units == std::vector<std::string>{"", "net.h.0", "net.h.1"});
  CHECK(g.FindOp("fsdp.root.all_gather") == 0);
  CHECK(g.FindOp("fsdp.root.all_gather.bw") < 0);
  // (the lowered seed of the loss's gradient is the model's here)
  CHECK(g.FindOp("fsdp.net.h.1.all_gather.bw") == g.FindOp("loss.grad.seed") - 1);
  CHECK(g.FindOp("fsdp.net.h.0.all_gather.bw") == g.FindOp("f2.bw") - 1);
  CHECK(testing::Names(g, g.ops[g.FindOp("fsdp.root.reshard")].inputs) ==
        std::vector<std::string>{"w0.unsharded"});
  CHECK(g.FindOp("fsdp.root.reshard") == g.FindOp("f0.bw") + 1);
  SimResult r = Run(g);
  // At f2.bw: x (U) + 3 shards (1.5U) + w0 gathered since the forward, a, y,
  // z.grad, w2 and w1 gathered again, y.grad, w2.grad (8U) + loss.
  CHECK(r.peak_bytes == 10 * U + U / 2 + 4);
  CHECK(g.ops[BuildBaselineProgram(g, AccumulationMode::kInplace).steps[r.peak_step].op].id ==
        "f2.bw");
}

TEST_CASE("parallel: fsdp with a bfloat16 param_dtype halves what the step makes") {
  // Every floating tensor the step makes is bfloat16, the unsharded copies
  // too; x and the float32 shards stay. At f1.bw: x (U) + 3 shards (1.5U) +
  // a, y.grad, a.grad, w1.grad, w0 and w1 gathered again, l2's reduce-scatter
  // input (7 x U/2) + w2's float32 sharded gradient (U/2) + the 2-byte loss.
  RankStats stats;
  ParallelOptions o{.strategy = Strategy::kFsdp, .world_size = 2, .shard_depth = 1};
  o.param_dtype = DType::kBFloat16;
  Graph g = Rank(o, &stats);
  CHECK(stats.param_dtype == "bfloat16");
  SimResult r = Run(g);
  CHECK(r.peak_bytes == 6 * U + U / 2 + 2);
  CHECK(testing::TensorNamed(g, "w1.unsharded").bytes == U / 2);
  // The gather again: its flat buffer (2 ranks x 128 rows x 2 bytes) and the
  // shard cast to bfloat16 (128 x 2 bytes).
  CHECK(g.ops[g.FindOp("fsdp.l1.all_gather.bw")].workspace_bytes == U / 2 + U / 4);
  // Sharded gradients keep the parameter's float32; the reduce-scatter runs
  // in bfloat16 (the flat input U/2) and its output is cast (U/4).
  CHECK(testing::TensorNamed(g, "w1.grad.shard").dtype == DType::kFloat32);
  CHECK(testing::TensorNamed(g, "fsdp.l1.reduce_scatter_input").bytes == U / 2);
  CHECK(g.ops[g.FindOp("fsdp.l1.reduce_scatter")].workspace_bytes == U / 4);
  // reduce_dtype float32: a float32 flat input, nothing to cast.
  o.reduce_dtype = DType::kFloat32;
  Graph f = Rank(o, &stats);
  CHECK(testing::TensorNamed(f, "fsdp.l1.reduce_scatter_input").bytes == U);
  CHECK(f.ops[f.FindOp("fsdp.l1.reduce_scatter")].workspace_bytes == 0);
  CHECK(stats.reduce_dtype == "float32");
}

TEST_CASE("parallel: fsdp without resharding keeps the gathered parameters to the backward") {
  RankStats stats;
  Graph g = Rank({.strategy = Strategy::kFsdp,
                  .world_size = 2,
                  .reshard_after_forward = false,
                  .shard_depth = 1},
                 &stats);
  CHECK(g.FindOp("fsdp.l1.all_gather.bw") < 0);
  SimResult r = Run(g);
  // At f2.bw: x (U) + 3 shards (1.5U) + a, y, z.grad, y.grad, w2.grad and
  // w0, w1, w2 alive since their forward gathers (each module holds its
  // parameters to its post-backward, w0 too though no backward op reads it).
  CHECK(r.peak_bytes == 2 * U + U / 2 + 8 * U + 4);
  // Resharding lowers the forward: at l (the loss), x, shards, a, y, z
  // (+ w0, w1, w2 unsharded without resharding) + loss.
  RankStats resharded_stats;
  Graph resharded =
      Rank({.strategy = Strategy::kFsdp, .world_size = 2, .shard_depth = 1}, &resharded_stats);
  auto live_at = [](const Graph& graph, const std::string& op) {
    const Program p = BuildBaselineProgram(graph, AccumulationMode::kInplace);
    SimOptions options;
    options.collect_live_at_peak = false;
    SimResult sim;
    std::string err;
    REQUIRE(Simulate(graph, p, options, &sim, &err));
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (p.steps[i].IsRun() && graph.ops[p.steps[i].op].id == op) return sim.live_after[i];
    return int64_t{-1};
  };
  CHECK(live_at(resharded, "l") == U + 3 * U / 2 + 3 * U + 4);
  CHECK(live_at(g, "l") == U + 3 * U / 2 + 6 * U + 4);
}

// A parameter read through a view (as linear reads weight.t()): the forward
// makes wv, the backward reads it. Hand-written joint graph.
const char* kViewed = R"({"format": "memplan.graph/1", "name": "viewed", "tensors": [
    {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
    {"id": "w", "shape": [256], "dtype": "float32", "kind": "parameter"},
    {"id": "wv", "shape": [256], "dtype": "float32", "alias_of": "w"},
    {"id": "y", "shape": [256], "dtype": "float32"},
    {"id": "loss", "shape": [], "dtype": "float32"},
    {"id": "loss.grad", "shape": [], "dtype": "float32", "kind": "gradient"},
    {"id": "y.grad", "shape": [256], "dtype": "float32", "kind": "gradient"},
    {"id": "w.grad", "shape": [256], "dtype": "float32", "kind": "gradient", "grad_of": "w"}],
  "ops": [
    {"id": "fv", "type": "t", "inputs": ["w"], "outputs": ["wv"], "scope": "l0"},
    {"id": "f", "type": "mul", "inputs": ["x", "wv"], "outputs": ["y"], "scope": "l0"},
    {"id": "l", "type": "sum", "inputs": ["y"], "outputs": ["loss"], "scope": "loss"},
    {"id": "seed", "type": "ones_like", "inputs": ["loss"], "outputs": ["loss.grad"],
     "phase": "backward", "scope": "loss"},
    {"id": "l.bw", "type": "expand", "inputs": ["loss.grad"], "outputs": ["y.grad"],
     "phase": "backward", "scope": "loss"},
    {"id": "f.bw", "type": "mul", "inputs": ["y.grad", "x", "wv"], "outputs": ["w.grad"],
     "phase": "backward", "scope": "l0"}],
  "outputs": ["loss"]})";

TEST_CASE("parallel: fsdp keeps a parameter's unsharded copy while views of it are alive") {
  // Without resharding, wv views the unsharded w: the copy lives to f.bw.
  // At f.bw: x (U) + the shard (U/2) + unsharded w, y.grad, w.grad (3U) +
  // loss, loss.grad's 4 bytes freed: 4.5U + 4.
  RankStats stats;
  for (bool reshard : {false, true}) {
    CAPTURE(reshard);
    Graph g = testing::MustParse(kViewed);
    std::string err;
    ParallelOptions o{.strategy = Strategy::kFsdp, .world_size = 2, .shard_depth = 1};
    o.reshard_after_forward = reshard;
    REQUIRE(MakeRankStep(o, &g, &stats, &err));
    SimResult r = Run(g);
    CHECK(r.peak_bytes == U + U / 2 + 3 * U + 4);
    // Resharded, the gather before f.bw ties it (its flat buffer in place of
    // w.grad) and comes first.
    CHECK(g.ops[BuildBaselineProgram(g, AccumulationMode::kInplace).steps[r.peak_step].op].id ==
          (reshard ? "fsdp.l0.all_gather.bw" : "f.bw"));
    if (!reshard) {
      CHECK(testing::AliasOf(g, "wv") == "w.unsharded");
      continue;
    }
    // Resharded: the forward copy goes after f; the backward gathers w again
    // (before f.bw, l0's first backward reader through wv) and reads a twin
    // of wv made from it.
    CHECK(testing::AliasOf(g, "wv.bw") == "w.unsharded.bw");
    CHECK(testing::Names(g, g.ops[g.FindOp("f.bw")].inputs) ==
          std::vector<std::string>{"y.grad", "x", "wv.bw"});
    CHECK(g.FindOp("fsdp.view.wv.bw") == g.FindOp("fsdp.l0.all_gather.bw") + 1);
  }
}

TEST_CASE("parallel: fsdp shards by dim 0, padded, and shards the optimizer state with it") {
  RankStats stats;
  // 256 rows over 3 ranks: 86 rows each (the last padded).
  Graph g = Rank({.strategy = Strategy::kFsdp, .world_size = 3, .shard_depth = 1}, &stats,
                 OptimizerKind::kAdam);
  CHECK(stats.parameter_bytes == 3 * 86 * 4);
  CHECK(stats.optimizer_state_bytes == 6 * 86 * 4);
  CHECK(g.tensors[g.FindTensor("w1.grad.shard")].bytes == 86 * 4);
  // The flat buffer: world x padded shard, an output of the collective that
  // the copy-out splits; held to the next unit's all-gather.
  const Op& gather = g.ops[g.FindOp("fsdp.l1.all_gather")];
  CHECK(gather.workspace_bytes == 0);
  CHECK(g.tensors[gather.outputs[0]].id == "fsdp.l1.all_gather_output");
  CHECK(g.tensors[gather.outputs[0]].bytes == 86 * 3 * 4);
  // Freed after the next unit's collective, by an op of no module (a module
  // wrapped in checkpoint() must not save it).
  const Op& free = g.ops[g.FindOp("fsdp.l2.free_previous_all_gather")];
  CHECK(free.inputs == std::vector<int>{gather.outputs[0]});
  CHECK(free.scope.empty());
  CHECK(g.FindOp("fsdp.l2.free_previous_all_gather") == g.FindOp("fsdp.l2.all_gather") + 1);
  CHECK(g.ops[g.FindOp("fsdp.root.post_forward")].inputs ==
        std::vector<int>{g.FindTensor("fsdp.l2.all_gather_output")});
  const Op& step = g.ops[g.FindOp("w1.adam_step")];
  CHECK(g.tensors[step.inputs[1]].id == "w1.grad.shard");
}

TEST_CASE("parallel: bad options and graphs are refused with what was expected") {
  std::string err;
  RankStats stats;
  auto refuse = [&](ParallelOptions options, OptimizerKind optimizer = OptimizerKind::kNone) {
    Graph g = Step(optimizer);
    err.clear();
    return !MakeRankStep(options, &g, &stats, &err);
  };
  CHECK(refuse({.strategy = Strategy::kDdp, .world_size = 0}));
  CHECK(err == "--world-size 0: expected at least 1");
  CHECK(refuse({.strategy = Strategy::kNone, .world_size = 2}));
  CHECK(err == "--world-size needs --parallel ddp, zero1, fsdp or pipeline");
  CHECK(refuse({.strategy = Strategy::kDdp, .world_size = 2, .rank = 2}));
  CHECK(err == "--rank 2: expected 0 to 1 (--world-size 2)");
  CHECK(refuse({.strategy = Strategy::kZero1, .world_size = 2}));
  CHECK(err == "it shards the optimizer state, and the step has none: give --optimizer");
  CHECK(refuse({.strategy = Strategy::kFsdp, .world_size = 2, .shard_modules = {"l1", "h.9"}}));
  CHECK(err == "--fsdp-modules: no op of the graph is scoped in module \"h.9\"");
}

}  // namespace
}  // namespace memplan::parallel
