#include "analyzer/plan/chain_dp.h"

#include <doctest/doctest.h>

#include <random>

#include "analyzer/plan/cost_model.h"
#include "analyzer/plan/planner.h"
#include "exhaustive.h"
#include "random_graph.h"
#include "test_util.h"

namespace memplan {
namespace {

using testing::Near;

TEST_CASE("chain dp: an op chain has one stage per forward op") {
  Graph g = testing::MustLower(testing::RandomChainGraph(7, 9));
  ChainStages st = FindChainStages(g, AccumulationMode::kInplace);
  CHECK(st.num_stages == 10);  // 9 ops and the loss
  CHECK(st.stage_of_op[g.FindOp("op0")] == 1);
  CHECK(st.stage_of_op[g.FindOp("op8")] == 9);
  CHECK(st.stage_of_op[g.FindOp("loss_fn")] == 10);
  CHECK(st.stage_of_op[g.FindOp("loss_fn.bw")] == -1);
}

TEST_CASE("chain dp: a residual block is one stage") {
  // x -> a -> b -> c = add(a, b) -> d: a crosses b, so {b, c} share a stage.
  Graph g = testing::MustLower(R"({"format": "memplan.graph/1", "name": "res", "symbols": {},
    "tensors": [{"id": "x", "shape": [8], "dtype": "float32", "kind": "input"},
                {"id": "a", "shape": [8], "dtype": "float32"},
                {"id": "b", "shape": [8], "dtype": "float32"},
                {"id": "c", "shape": [8], "dtype": "float32"},
                {"id": "d", "shape": [8], "dtype": "float32"},
                {"id": "loss", "shape": [], "dtype": "float32"}],
    "ops": [{"id": "fa", "type": "tanh", "inputs": ["x"], "outputs": ["a"]},
            {"id": "fb", "type": "tanh", "inputs": ["a"], "outputs": ["b"]},
            {"id": "fc", "type": "add", "inputs": ["a", "b"], "outputs": ["c"]},
            {"id": "fd", "type": "tanh", "inputs": ["c"], "outputs": ["d"]},
            {"id": "l", "type": "mean", "inputs": ["d"], "outputs": ["loss"]}],
    "outputs": ["loss"]})");
  ChainStages st = FindChainStages(g, AccumulationMode::kInplace);
  CHECK(st.num_stages == 4);
  CHECK(st.stage_of_op[g.FindOp("fa")] == 1);
  CHECK(st.stage_of_op[g.FindOp("fb")] == 2);
  CHECK(st.stage_of_op[g.FindOp("fc")] == 2);
  CHECK(st.stage_of_op[g.FindOp("fd")] == 3);
}

// On op chains the DP is held to the exhaustive optimum over checkpoint sets,
// and its model to the simulator, at budgets from the baseline to below the
// least reachable peak.
TEST_CASE("chain dp: matches the exhaustive optimum on random op chains") {
  int chains = 0, budgets = 0, feasible = 0;
  for (uint32_t seed = 1; chains < 30; ++seed) {
    Graph g = testing::MustLower(testing::RandomChainGraph(seed, 5 + static_cast<int>(seed % 8)));
    if (CheckpointCandidates(g).size() > 13) continue;
    CAPTURE(seed);
    CostModel model;
    std::vector<double> costs = OpCosts(g, model);
    testing::Exhaustive all(g, costs);
    int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
    if (all.min_peak >= baseline) continue;  // recomputation cannot help
    ++chains;
    // Budgets from the baseline down to the least peak of any set, and under.
    std::vector<int64_t> sweep = SweepRange(baseline, all.min_peak, 12);
    sweep.push_back(all.min_peak - 1);
    for (int64_t budget : sweep) {
      CAPTURE(budget);
      ChainPlan plan;
      std::string err;
      REQUIRE(
          PlanChain(g, budget, costs, AccumulationMode::kInplace, ChainDpOptions(), &plan, &err));
      double optimum = all.Optimum(budget);
      CHECK(plan.found == (optimum >= 0));
      ++budgets;
      if (!plan.found) continue;
      ++feasible;
      ScoredPlan scored;
      REQUIRE(ScoreCheckpointSet(g, plan.keep, costs, {}, &scored, &err));
      CHECK(scored.sim.peak_bytes == plan.modeled_peak_bytes);
      CHECK(scored.sim.peak_bytes <= budget);
      CHECK(Near(scored.recompute_cost, plan.cost));
      CHECK(Near(plan.cost, optimum));
    }
  }
  CHECK(budgets == 30 * 13);
  CHECK(feasible >= 30 * 12);
}

// The model behind the DP, on random sets of longer op chains (no
// exhaustive search needed): its peak and cost are the simulator's.
TEST_CASE("chain dp: the model equals the simulator on random sets of op chains") {
  std::mt19937 rng(11);
  int sets = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Graph g = testing::MustLower(testing::RandomChainGraph(seed, 60 + static_cast<int>(seed) * 7));
    std::vector<double> costs = OpCosts(g, CostModel());
    std::vector<int> candidates = CheckpointCandidates(g);
    for (int trial = 0; trial < 20; ++trial) {
      CAPTURE(seed);
      CAPTURE(trial);
      // Whole stages (a dropout's mask goes with its output).
      ChainStages st = FindChainStages(g, AccumulationMode::kInplace);
      std::vector<bool> keep_stage(st.num_stages + 1), keep(g.tensors.size(), false);
      const uint32_t keep_per_8 = 1 + rng() % 7;
      for (size_t s = 0; s < keep_stage.size(); ++s) keep_stage[s] = rng() % 8 < keep_per_8;
      for (int t : candidates) keep[t] = keep_stage[st.stage_of_tensor[t]];
      int64_t peak = 0;
      double cost = 0;
      std::string err;
      REQUIRE(ChainModel(g, keep, costs, AccumulationMode::kInplace, &peak, &cost, &err));
      ScoredPlan scored;
      REQUIRE(ScoreCheckpointSet(g, keep, costs, {}, &scored, &err));
      CHECK(peak == scored.sim.peak_bytes);
      CHECK(Near(cost, scored.recompute_cost));
      ++sets;
    }
  }
  CHECK(sets == 240);
}

}  // namespace
}  // namespace memplan
