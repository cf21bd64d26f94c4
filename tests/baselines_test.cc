#include "analyzer/plan/baselines.h"

#include <doctest/doctest.h>

#include "analyzer/plan/cost_model.h"
#include "analyzer/plan/planner.h"
#include "analyzer/sim/checkpoint.h"
#include "random_graph.h"
#include "test_util.h"

namespace memplan {
namespace {

using testing::MustLower;
using Strings = std::vector<std::string>;

// x -> a1 = x * w -> a2 ... a8 through tanh (each saves its output) -> loss:
// 9 forward ops, all activations [256] float32.
std::string ChainGraph() {
  std::string tensors =
      R"({"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
         {"id": "w", "shape": [256], "dtype": "float32", "kind": "parameter"},
         {"id": "loss", "shape": [], "dtype": "float32"})";
  std::string ops = R"({"id": "f1", "type": "mul", "inputs": ["x", "w"], "outputs": ["a1"]})";
  for (int i = 1; i <= 8; ++i) {
    std::string a = "a" + std::to_string(i);
    tensors += R"(, {"id": ")" + a + R"(", "shape": [256], "dtype": "float32"})";
    if (i > 1)
      ops += R"(, {"id": "f)" + std::to_string(i) + R"(", "type": "tanh", "inputs": ["a)" +
             std::to_string(i - 1) + R"("], "outputs": [")" + a + R"("]})";
  }
  ops += R"(, {"id": "l", "type": "mean", "inputs": ["a8"], "outputs": ["loss"]})";
  return R"({"format": "memplan.graph/1", "tensors": [)" + tensors + R"(], "ops": [)" + ops +
         R"(], "outputs": ["loss"]})";
}

Strings Kept(const Graph& g, const std::vector<bool>& keep) {
  Strings out;
  REQUIRE(keep.size() == g.tensors.size());
  for (size_t t = 0; t < keep.size(); ++t)
    if (keep[t]) out.push_back(g.tensors[t].id);
  return out;
}

// Every kept tensor is a candidate.
void CheckSubsetOfCandidates(const Graph& g, const std::vector<bool>& keep) {
  std::vector<bool> candidate(g.tensors.size(), false);
  for (int t : CheckpointCandidates(g)) candidate[t] = true;
  for (size_t t = 0; t < keep.size(); ++t)
    if (keep[t]) CHECK_MESSAGE(candidate[t], g.tensors[t].id);
}

ScoredPlan MustScore(const Graph& g, const std::vector<bool>& keep) {
  ScoredPlan plan;
  std::string err;
  bool ok = ScoreCheckpointSet(g, keep, OpCosts(g, CostModel()), {}, &plan, &err);
  INFO(err);
  REQUIRE(ok);
  return plan;
}

TEST_CASE("baselines: ScopeBlock takes the first components of a scope") {
  CHECK(ScopeBlock("h.0.attn", 1) == "h");
  CHECK(ScopeBlock("h.0.attn", 2) == "h.0");
  CHECK(ScopeBlock("h.0.attn", 3) == "h.0.attn");
  CHECK(ScopeBlock("h.0.attn", 4) == "h.0.attn");
  CHECK(ScopeBlock("wte", 2) == "wte");
  CHECK(ScopeBlock("h.0", 0) == "h");
  CHECK(ScopeBlock("", 2) == "");
}

TEST_CASE("baselines: sqrt keeps the outputs of each segment's last op on a chain") {
  Graph g = MustLower(ChainGraph());
  CHECK(testing::Names(g, CheckpointCandidates(g)) ==
        Strings{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"});
  // n = 9 forward ops, k = 3: segments f1-f3, f4-f6, f7-l; the loss is no
  // candidate.
  CHECK(Kept(g, SqrtCheckpoints(g)) == Strings{"a3", "a6"});
  // k = 4: segments end at ops 1, 3, 5, 8 (0-based).
  CHECK(Kept(g, SqrtCheckpoints(g, 4)) == Strings{"a2", "a4", "a6"});
  // k = 1: nothing but the loss; k >= n: every op ends a segment.
  CHECK(Kept(g, SqrtCheckpoints(g, 1)).empty());
  CHECK(Kept(g, SqrtCheckpoints(g, 100)) == Kept(g, SaveAllCheckpoints(g)));
  CHECK(Kept(g, SaveAllCheckpoints(g)) == testing::Names(g, CheckpointCandidates(g)));

  ScoredPlan all = MustScore(g, SaveAllCheckpoints(g));
  ScoredPlan sqrt = MustScore(g, SqrtCheckpoints(g));
  CHECK(all.recompute_cost == 0);
  CHECK(all.sim.peak_bytes == testing::Baseline(g, AccumulationMode::kInplace).peak_bytes);
  CHECK(sqrt.sim.peak_bytes < all.sim.peak_bytes);
  CHECK(sqrt.recompute_cost > 0);
  // Each dropped tensor is recomputed exactly once.
  CHECK(testing::Names(g, sqrt.checkpoint.recomputed_tensors) ==
        Strings{"a1", "a2", "a4", "a5", "a7", "a8"});
}

TEST_CASE("baselines: a segment ending in a view keeps the view's base") {
  Graph g = MustLower(R"({"format": "memplan.graph/1", "tensors": [
      {"id": "x", "shape": [4, 64], "dtype": "float32", "kind": "input"},
      {"id": "w", "shape": [4, 64], "dtype": "float32", "kind": "parameter"},
      {"id": "a", "shape": [4, 64], "dtype": "float32"},
      {"id": "v", "shape": [256], "dtype": "float32", "alias_of": "a"},
      {"id": "b", "shape": [256], "dtype": "float32"},
      {"id": "loss", "shape": [], "dtype": "float32"}],
    "ops": [
      {"id": "fa", "type": "mul", "inputs": ["x", "w"], "outputs": ["a"]},
      {"id": "fv", "type": "view", "inputs": ["a"], "outputs": ["v"]},
      {"id": "fb", "type": "tanh", "inputs": ["v"], "outputs": ["b"]},
      {"id": "l", "type": "mean", "inputs": ["b"], "outputs": ["loss"]}],
    "outputs": ["loss"]})");
  // n = 4, k = 2: segments fa-fv and fb-l.
  CHECK(Kept(g, SqrtCheckpoints(g)) == Strings{"a"});
  MustScore(g, SqrtCheckpoints(g));
}

TEST_CASE("baselines: blocks keep exactly the tensors crossing gpt_tiny's blocks") {
  JointGraph jg;
  std::string err;
  bool ok =
      LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &jg, &err);
  INFO(err);
  REQUIRE(ok);
  const Graph& g = jg.graph;
  // Depth 2: wte, wpe, h.0, h.1, ln_f, lm_head, loss.
  CHECK(Kept(g, BlockCheckpoints(g, 2)) ==
        Strings{"wte.out", "wpe.out", "h.0.res_2.out", "h.1.res_2.out", "ln_f.out", "logits"});
  // Depth 1: both layers are one block "h".
  CHECK(Kept(g, BlockCheckpoints(g, 1)) ==
        Strings{"wte.out", "wpe.out", "h.1.res_2.out", "ln_f.out", "logits"});
  // Deep enough, every scope is a block: h.0.attn's internals (the split, the
  // views, the attention) stay dropped, the rest is kept.
  Strings deep = Kept(g, BlockCheckpoints(g, 9));
  CHECK(std::find(deep.begin(), deep.end(), "h.0.attn.qkv") != deep.end());  // read by h.0.attn
  CHECK(std::find(deep.begin(), deep.end(), "h.0.attn.sdpa.out") == deep.end());
  CHECK(std::find(deep.begin(), deep.end(), "h.0.attn.merge.out") != deep.end());
  for (int depth : {1, 2, 3, 9}) {
    CAPTURE(depth);
    ScoredPlan plan = MustScore(g, BlockCheckpoints(g, depth));
    CHECK(plan.sim.peak_bytes <= MustScore(g, SaveAllCheckpoints(g)).sim.peak_bytes);
  }
}

TEST_CASE("baselines: ops without scope are blocks of their own") {
  Graph g = MustLower(ChainGraph());  // no scopes: every op's output crosses
  CHECK(Kept(g, BlockCheckpoints(g, 1)) == Kept(g, SaveAllCheckpoints(g)));
}

TEST_CASE("baselines: every baseline is a valid program on the examples") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json", "mlp_torch.joint.graph.json"}) {
    CAPTURE(name);
    JointGraph jg;
    std::string err;
    bool ok = LoadJointGraph(testing::ExamplePath(name), GraphLoadOptions(), &jg, &err);
    INFO(err);
    REQUIRE(ok);
    const Graph& g = jg.graph;
    const int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
    for (const std::vector<bool>& keep :
         {SaveAllCheckpoints(g), SqrtCheckpoints(g), SqrtCheckpoints(g, 2), BlockCheckpoints(g, 1),
          BlockCheckpoints(g, 2)}) {
      CheckSubsetOfCandidates(g, keep);
      ScoredPlan plan = MustScore(g, keep);
      CHECK(plan.sim.peak_bytes >= PeakLowerBound(g));
    }
    CHECK(MustScore(g, SaveAllCheckpoints(g)).sim.peak_bytes == baseline);
  }
}

TEST_CASE("baselines: every baseline is a valid program on random graphs") {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    Graph g = MustLower(testing::RandomForwardGraph(seed, 5 + static_cast<int>(seed % 30)));
    for (const std::vector<bool>& keep :
         {SaveAllCheckpoints(g), SqrtCheckpoints(g), SqrtCheckpoints(g, 3), BlockCheckpoints(g, 1),
          BlockCheckpoints(g, 2)}) {
      CheckSubsetOfCandidates(g, keep);
      ScoredPlan plan = MustScore(g, keep);
      CHECK(plan.recompute_cost >= 0);
    }
    CHECK(MustScore(g, SaveAllCheckpoints(g)).recompute_cost == 0);
  }
}

}  // namespace
}  // namespace memplan
