#include "analyzer/plan/planner.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

#include "analyzer/plan/baselines.h"
#include "analyzer/plan/sac_policy.h"
#include "exhaustive.h"
#include "order_graph.h"
#include "random_graph.h"
#include "test_util.h"

namespace memplan {
namespace {

using testing::Exhaustive;
using testing::Near;

TEST_CASE(
    "planner: the exact planner finds the exhaustive optimum over programs on random graphs") {
  int graphs = 0, budgets = 0, wider = 0, ordered = 0;
  for (uint32_t seed = 1; graphs < 40 && seed < 400; ++seed) {
    Graph g =
        testing::MustLower(testing::RandomForwardGraph(seed, 6 + static_cast<int>(seed % 13)));
    size_t n = CheckpointCandidates(g).size();
    if (n < 3 || n > 8) continue;
    ++graphs;
    CAPTURE(seed);
    PlannerOptions options;
    options.algorithm = PlanAlgorithm::kExact;
    Exhaustive sets(g, OpCosts(g, options.cost));
    Exhaustive programs(g, OpCosts(g, options.cost), testing::Space::kPrograms);
    Exhaustive all(g, OpCosts(g, options.cost), testing::Space::kOrders);
    int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
    double previous_cost = 0;
    // Budgets from the baseline down to just under the least peak of any set.
    std::vector<int64_t> sweep;
    for (int pct = 100; pct >= 40; pct -= 5) sweep.push_back(baseline * pct / 100);
    sweep.push_back(all.min_peak);
    sweep.push_back(all.min_peak - 1);
    sweep.push_back(sets.min_peak);
    sweep.push_back(sets.min_peak - 1);
    std::sort(sweep.rbegin(), sweep.rend());
    for (int64_t budget : sweep) {
      CAPTURE(budget);
      PlanResult result;
      std::string err;
      REQUIRE(PlanCheckpoints(g, budget, options, &result, &err));
      double optimum = all.Optimum(budget);
      const double set_optimum = sets.Optimum(budget);
      // Programs beyond sets: cheaper, or fitting where no set does.
      wider += optimum >= 0 && (set_optimum < 0 || optimum < set_optimum - 1e-9);
      // Orders beyond input order: cheaper, or fitting where no program in
      // input order does.
      const double fixed_order = programs.Optimum(budget);
      ordered += optimum >= 0 && (fixed_order < 0 || optimum < fixed_order - 1e-9);
      CHECK(result.feasible == (optimum >= 0));
      if (result.feasible) {
        CHECK(Near(result.best.recompute_cost, optimum));
        CHECK(result.best.sim.peak_bytes <= budget);
        // Monotone: a smaller budget never costs less.
        CHECK(result.best.recompute_cost >= previous_cost - 1e-9);
        previous_cost = result.best.recompute_cost;
      } else {
        CHECK(result.min_feasible_peak_bytes == all.min_peak);
        CHECK(result.best.sim.peak_bytes == all.min_peak);
      }
      CHECK(result.baseline_peak_bytes == baseline);
      ++budgets;
    }
  }
  CHECK(graphs == 40);
  CHECK(budgets >= 40 * 10);
  CAPTURE(wider);
  CAPTURE(ordered);
  CHECK(wider >= 3);  // 4 when written
  // Orders beat input order on none of these graphs (nor on 400 more): it
  // takes an op reading two dropped tensors whose chains' transient bytes
  // differ. The next test is such a graph.
}

TEST_CASE("planner: recomputing an op's last input first lowers the least peak") {
  Graph g = testing::MustLower(testing::kOrderGraph);
  std::vector<double> costs = OpCosts(g, CostModel());
  Exhaustive input_order(g, costs, testing::Space::kPrograms);
  Exhaustive all(g, costs, testing::Space::kOrders);
  CHECK(input_order.min_peak == 197124);     // fz.bw with q kept: 192.5 KiB
  CHECK(all.min_peak == 180740);             // 176.5 KiB: q first at fd.bw
  CHECK(all.min_peak >= PeakLowerBound(g));  // 4 bytes above it
  const int64_t budget = input_order.min_peak - 1;
  for (PlanAlgorithm algorithm : {PlanAlgorithm::kExact, PlanAlgorithm::kGreedy}) {
    CAPTURE(PlanAlgorithmName(algorithm));
    PlannerOptions options;
    options.algorithm = algorithm;
    PlanResult result;
    std::string err;
    REQUIRE(PlanCheckpoints(g, budget, options, &result, &err));
    REQUIRE(result.feasible);
    CHECK(result.best.sim.peak_bytes <= budget);
    if (algorithm == PlanAlgorithm::kExact)
      CHECK(Near(result.best.recompute_cost, all.Optimum(budget)));
    REQUIRE(result.best.reverse_order.size() == g.ops.size());
    for (size_t o = 0; o < g.ops.size(); ++o)
      CHECK(result.best.reverse_order[o] == (g.ops[o].id == "fd.bw"));
    // Asked for the floor: the least peak of the space with orders.
    REQUIRE(PlanCheckpoints(g, 1, options, &result, &err));
    CHECK(!result.feasible);
    CHECK(result.min_feasible_peak_bytes == all.min_peak);
    if (algorithm == PlanAlgorithm::kExact) CHECK(result.search_complete);
  }
}

// The case of issue 16: no checkpoint set fits the budget, a program that
// recomputes a tensor at each use does; the plan says which.
TEST_CASE("planner: a program fits where no checkpoint set does") {
  Graph g = testing::MustLower(testing::RandomForwardGraph(45, 6 + 45 % 13));
  std::vector<double> costs = OpCosts(g, CostModel());
  Exhaustive sets(g, costs);
  Exhaustive programs(g, costs, testing::Space::kPrograms);
  REQUIRE(programs.min_peak < sets.min_peak);
  PlannerOptions options;
  options.algorithm = PlanAlgorithm::kExact;
  PlanResult result;
  std::string err;
  REQUIRE(PlanCheckpoints(g, sets.min_peak - 1, options, &result, &err));
  REQUIRE(result.feasible);
  CHECK(result.best.sim.peak_bytes == programs.min_peak);
  CHECK(Near(result.best.recompute_cost, programs.Optimum(sets.min_peak - 1)));
  int each_use = 0;
  for (bool b : result.best.each_use) each_use += b;
  CHECK(each_use >= 1);
  // The program reruns a producer more than once.
  std::vector<int> reruns(g.ops.size(), 0);
  int most = 0;
  for (int o : result.best.checkpoint.recomputed_ops) most = std::max(most, ++reruns[o]);
  CHECK(most >= 2);
}

// The greedy is a heuristic: held to the exhaustive optimum over programs at
// budgets from the least peak to the baseline, with the bounds it meets
// (measured when written: 233 of 240 fits, 4 misses on one graph whose
// least peak is 8 bytes under its baseline; worst ratio 3.39, p90 1.49;
// 225 of the fits at the optimum. Since the keep-again scores every group
// on small graphs: 230 at the optimum, worst ratio 1.79).
TEST_CASE("planner: greedy plans fit where a program does and stay near the optimum") {
  int graphs = 0, budgets = 0, should_fit = 0, fits = 0, at_optimum = 0, compared = 0;
  double worst = 1;
  for (uint32_t seed = 1; graphs < 60 && seed < 400; ++seed) {
    Graph g = testing::MustLower(testing::RandomForwardGraph(seed, 6 + static_cast<int>(seed % 9)));
    if (CheckpointCandidates(g).size() > 8) continue;
    ++graphs;
    CAPTURE(seed);
    PlannerOptions options;
    options.algorithm = PlanAlgorithm::kGreedy;
    Exhaustive all(g, OpCosts(g, options.cost), testing::Space::kOrders);
    int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
    for (int pct : {0, 25, 50, 75}) {
      const int64_t budget = all.min_peak + (baseline - all.min_peak) * pct / 100;
      CAPTURE(budget);
      PlanResult result;
      std::string err;
      REQUIRE(PlanCheckpoints(g, budget, options, &result, &err));
      const double optimum = all.Optimum(budget);
      REQUIRE(optimum >= 0);
      ++budgets;
      ++should_fit;
      CHECK(result.min_feasible_peak_bytes >= all.min_peak);
      if (!result.feasible) continue;
      ++fits;
      CHECK(result.best.sim.peak_bytes <= budget);
      CHECK(result.best.recompute_cost >= optimum - 1e-9);
      if (optimum > 0) {
        ++compared;
        worst = std::max(worst, result.best.recompute_cost / optimum);
        at_optimum += Near(result.best.recompute_cost, optimum);
      } else {
        at_optimum += result.best.recompute_cost == 0;
      }
    }
  }
  CHECK(graphs == 60);
  CAPTURE(fits);
  CAPTURE(should_fit);
  CAPTURE(worst);
  CAPTURE(at_optimum);
  CHECK(budgets == 240);
  CHECK(fits * 100 >= should_fit * 97);  // 97%
  CHECK(compared >= 60);
  CHECK(worst <= 2.0);
  CHECK(at_optimum * 100 >= fits * 98);  // 98% of the fits cost the optimum (80% without Improve)
}

// Improve (the local search after the greedy) starts from the greedy's plan:
// never dearer, never over the budget, and cheaper on some random graphs of
// 40 ops (measured when written: 5 of 40 budgets; 3 since the greedy's
// keep-again scores every group on small graphs, which makes some of
// Improve's trades itself: the 40 plans' summed cost fell 11%).
TEST_CASE("planner: local search never costs more than the greedy alone") {
  int budgets = 0, cheaper = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    Graph g = testing::MustLower(testing::RandomForwardGraph(seed, 40));
    const int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
    const int64_t floor = PeakLowerBound(g);
    CAPTURE(seed);
    for (int pct : {30, 70}) {
      const int64_t budget = floor + (baseline - floor) * pct / 100;
      CAPTURE(budget);
      PlannerOptions options;
      options.algorithm = PlanAlgorithm::kGreedy;
      PlanResult greedy, improved;
      std::string err;
      options.local_search = false;
      REQUIRE(PlanCheckpoints(g, budget, options, &greedy, &err));
      options.local_search = true;
      REQUIRE(PlanCheckpoints(g, budget, options, &improved, &err));
      ++budgets;
      CHECK(improved.feasible == greedy.feasible);
      if (!greedy.feasible) continue;
      CHECK(improved.best.sim.peak_bytes <= budget);
      CHECK(improved.best.recompute_cost <= greedy.best.recompute_cost + 1e-9);
      cheaper += improved.best.recompute_cost < greedy.best.recompute_cost - 1e-9;
    }
  }
  CAPTURE(cheaper);
  CHECK(budgets == 40);
  CHECK(cheaper >= 3);
}

// Trials stopped past their bound (PlannerOptions::stop_trials) change
// nothing but the time: the same plan, figures and programs scored.
TEST_CASE("planner: stopping trials past their bound gives the same plans") {
  int budgets = 0, stopped = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Graph g = testing::MustLower(testing::RandomForwardGraph(seed, 40));
    const int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
    const int64_t floor = PeakLowerBound(g);
    CAPTURE(seed);
    for (int pct : {-10, 20, 50, 80}) {
      const int64_t budget = floor + (baseline - floor) * pct / 100;
      CAPTURE(budget);
      for (bool local_search : {false, true}) {  // the greedy's trials, then Improve's too
        PlannerOptions options;
        options.algorithm = PlanAlgorithm::kGreedy;
        options.local_search = local_search;
        PlanResult whole, stopping;
        std::string err;
        options.stop_trials = false;
        REQUIRE(PlanCheckpoints(g, budget, options, &whole, &err));
        options.stop_trials = true;
        REQUIRE(PlanCheckpoints(g, budget, options, &stopping, &err));
        ++budgets;
        CHECK(stopping.feasible == whole.feasible);
        CHECK(stopping.evaluations == whole.evaluations);
        CHECK(stopping.best.keep == whole.best.keep);
        CHECK(stopping.best.each_use == whole.best.each_use);
        CHECK(stopping.best.reverse_order == whole.best.reverse_order);
        CHECK(stopping.best.sim.peak_bytes == whole.best.sim.peak_bytes);
        CHECK(stopping.best.recompute_cost == whole.best.recompute_cost);
        CHECK(stopping.min_feasible_peak_bytes == whole.min_feasible_peak_bytes);
        CHECK(stopping.search_complete == whole.search_complete);
        CHECK(whole.stopped_trials == 0);
        stopped += stopping.stopped_trials;
      }
    }
  }
  CAPTURE(stopped);
  CHECK(budgets == 96);
  CHECK(stopped > 100);
}

TEST_CASE("planner: capped drop rounds keep again from the cheapest hand-written set that fits") {
  int graphs = 0, fewer_programs = 0, improved = 0;
  for (uint32_t seed = 1; graphs < 10 && seed < 400; ++seed) {
    Graph g = testing::MustLower(testing::RandomForwardGraph(seed, 40));
    std::vector<double> costs = OpCosts(g, CostModel());
    std::vector<ScoredPlan> hand_written(4);
    int64_t least = std::numeric_limits<int64_t>::max();
    for (int depth = 0; depth <= 3; ++depth) {
      std::string err;
      REQUIRE(ScoreCheckpointSet(g, depth == 0 ? SqrtCheckpoints(g) : BlockCheckpoints(g, depth),
                                 costs, {.detailed = false}, &hand_written[depth], &err));
      least = std::min(least, hand_written[depth].sim.peak_bytes);
    }
    int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
    if (least >= baseline * 9 / 10) continue;  // no budget only a hand-written set reaches
    ++graphs;
    CAPTURE(seed);
    for (int64_t budget : {least, least + (baseline - least) / 20}) {
      CAPTURE(budget);
      double seed_cost = std::numeric_limits<double>::infinity();
      for (const ScoredPlan& set : hand_written)
        if (set.sim.peak_bytes <= budget) seed_cost = std::min(seed_cost, set.recompute_cost);
      PlannerOptions options;
      options.algorithm = PlanAlgorithm::kGreedy;
      options.local_search = false;  // the drop rounds' cap alone
      PlanResult full, capped;
      std::string err;
      REQUIRE(PlanCheckpoints(g, budget, options, &full, &err));
      options.greedy_drop_op_replays = 1;  // one drop round
      REQUIRE(PlanCheckpoints(g, budget, options, &capped, &err));
      REQUIRE(capped.feasible);
      CHECK(capped.best.sim.peak_bytes <= budget);
      CHECK(capped.best.recompute_cost <= seed_cost);
      fewer_programs += capped.evaluations < full.evaluations;
      improved += capped.best.recompute_cost < seed_cost - 1e-9;
    }
  }
  CHECK(graphs == 10);
  CAPTURE(fewer_programs);
  CAPTURE(improved);
  CHECK(fewer_programs >= 14);  // of 20 (15 before the keep-again's second pass, which scores
                                // more of the cheapest seed's many drops)
  CHECK(improved >= 3);
}

TEST_CASE("planner: with no set that fits, the drop rounds stop at their cap") {
  int graphs = 0, fewer_programs = 0;
  for (uint32_t seed = 1; graphs < 10 && seed < 400; ++seed) {
    Graph g = testing::MustLower(testing::RandomForwardGraph(seed, 40));
    const int64_t budget = PeakLowerBound(g) - 1;  // below the floor: nothing fits
    PlannerOptions options;
    options.algorithm = PlanAlgorithm::kGreedy;
    options.local_search = false;
    PlanResult full, capped;
    std::string err;
    REQUIRE(PlanCheckpoints(g, budget, options, &full, &err));
    options.greedy_drop_op_replays = 1;  // one drop round
    REQUIRE(PlanCheckpoints(g, budget, options, &capped, &err));
    if (full.evaluations <= capped.evaluations + 1) continue;  // few rounds either way
    ++graphs;
    CAPTURE(seed);
    CHECK_FALSE(capped.feasible);
    CHECK_FALSE(capped.search_complete);
    // The lowest peak met is reported, never one below what the rounds met.
    CHECK(capped.min_feasible_peak_bytes >= full.min_feasible_peak_bytes);
    CHECK(capped.min_feasible_peak_bytes == capped.best.sim.peak_bytes);
    fewer_programs += capped.evaluations < full.evaluations;
  }
  CHECK(graphs == 10);
  CHECK(fewer_programs == 10);
}

TEST_CASE("planner: the examples fit at 70% of their baseline peak") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json", "mlp_torch.joint.graph.json"}) {
    CAPTURE(name);
    JointGraph jg;
    std::string err;
    REQUIRE(LoadJointGraph(testing::ExamplePath(name), GraphLoadOptions(), &jg, &err));
    int64_t baseline = testing::Baseline(jg.graph, AccumulationMode::kInplace).peak_bytes;
    int64_t floor = PeakLowerBound(jg.graph);
    int64_t budget = std::max(floor, baseline * 7 / 10);
    PlanResult result;
    REQUIRE(PlanCheckpoints(jg.graph, budget, PlannerOptions(), &result, &err));
    CAPTURE(result.min_feasible_peak_bytes);
    CAPTURE(budget);
    CHECK(result.min_feasible_peak_bytes >= floor);
    CHECK(result.min_feasible_peak_bytes <= baseline);
    const std::string graph = name;
    if (graph == "gpt_tiny.graph.json" || graph == "cnn_small.joint.graph.json") {
      REQUIRE(result.feasible);
      CHECK(result.best.sim.peak_bytes <= budget);
      CHECK(result.best.recompute_cost > 0);
    } else if (graph == "densenet_toy.graph.json") {
      // Greedy (over 22 candidates): its peak is the concatenation that
      // every later layer reads; recomputation saves 0.9% at most. Its
      // least peak is above the floor, so nothing proves it.
      CHECK_FALSE(result.feasible);
      CHECK(result.min_feasible_peak_bytes * 1000 >= baseline * 990);
      CHECK(result.min_feasible_peak_bytes > result.lower_bound_bytes);
      CHECK_FALSE(result.search_complete);
    } else {
      // mlp and mlp_torch: the exact search proves nothing lowers the peak
      // (the peak holds only what the step cannot drop).
      CHECK_FALSE(result.feasible);
      CHECK(result.algorithm == PlanAlgorithm::kExact);
      CHECK(result.search_complete);
      CHECK(result.min_feasible_peak_bytes == baseline);
    }
  }
}

TEST_CASE("planner: the exact planner refuses graphs with too many candidates") {
  JointGraph jg;
  std::string err;
  REQUIRE(
      LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &jg, &err));
  PlannerOptions options;
  options.algorithm = PlanAlgorithm::kExact;
  PlanResult result;
  CHECK_FALSE(PlanCheckpoints(jg.graph, 1, options, &result, &err));
  CHECK(err.rfind("the exact planner takes at most 22 candidates; this graph has ", 0) == 0);
}

}  // namespace
}  // namespace memplan

namespace memplan {
namespace {

TEST_CASE("planner: module granularity recomputes whole modules and names them") {
  JointGraph jg;
  std::string err;
  REQUIRE(
      LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &jg, &err));
  const Graph& g = jg.graph;
  int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
  PlannerOptions module;
  module.granularity = Granularity::kModule;
  PlannerOptions op;
  for (int pct : {90, 70}) {
    CAPTURE(pct);
    int64_t budget = baseline * pct / 100;
    PlanResult by_module, by_op;
    REQUIRE(PlanCheckpoints(g, budget, module, &by_module, &err));
    REQUIRE(PlanCheckpoints(g, budget, op, &by_op, &err));
    REQUIRE(by_module.feasible);
    REQUIRE(by_op.feasible);
    CHECK(by_module.best.sim.peak_bytes <= budget);
    CHECK_FALSE(by_module.modules.empty());
    for (const std::string& m : by_module.modules) CHECK((m == "h.0" || m == "h.1"));
    // Every recomputed tensor is made inside a wrapped module.
    for (int t : by_module.best.checkpoint.recomputed_tensors) {
      const std::string scope = g.ops[g.tensors[t].producer].scope.str();
      bool inside = false;
      for (const std::string& m : by_module.modules)
        inside = inside || scope == m || scope.rfind(m + ".", 0) == 0;
      CHECK_MESSAGE(inside, g.tensors[t].id);
    }
    // The finer granularity is never dearer here.
    CHECK(by_op.best.recompute_cost <= by_module.best.recompute_cost + 1e-9);
  }
  // One module per layer at depth 2; depth 1 makes "h" a single module.
  module.module_depth = 1;
  PlanResult whole;
  REQUIRE(PlanCheckpoints(g, baseline * 70 / 100, module, &whole, &err));
  if (whole.feasible) CHECK(whole.modules == std::vector<std::string>{"h"});
}

}  // namespace
}  // namespace memplan

namespace memplan {
namespace {

TEST_CASE("planner: sac granularity decides per op inside modules, and its policies match") {
  JointGraph jg;
  std::string err;
  REQUIRE(
      LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &jg, &err));
  const Graph& g = jg.graph;
  int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
  PlannerOptions sac, module;
  sac.granularity = Granularity::kSac;
  module.granularity = Granularity::kModule;
  for (int pct : {90, 70}) {
    CAPTURE(pct);
    const int64_t budget = baseline * pct / 100;
    PlanResult by_sac, by_module;
    REQUIRE(PlanCheckpoints(g, budget, sac, &by_sac, &err));
    REQUIRE(PlanCheckpoints(g, budget, module, &by_module, &err));
    REQUIRE(by_sac.feasible);
    CHECK(by_sac.best.sim.peak_bytes <= budget);
    // Finer than whole modules: never dearer here.
    if (by_module.feasible)
      CHECK(by_sac.best.recompute_cost <= by_module.best.recompute_cost + 1e-9);
    REQUIRE_FALSE(by_sac.modules.empty());
    const std::vector<bool>& keep = by_sac.best.keep;
    std::vector<bool> recomputed(g.tensors.size(), false);
    for (int t : by_sac.best.checkpoint.recomputed_tensors) recomputed[t] = true;
    for (const std::string& m : by_sac.modules) CHECK((m == "h.0" || m == "h.1"));
    std::vector<SacRegion> regions =
        SacPolicies(g, keep, by_sac.best.checkpoint.recomputed_ops, by_sac.modules, 2);
    REQUIRE(regions.size() == by_sac.modules.size());
    for (const SacRegion& r : regions) {
      CAPTURE(r.module);
      REQUIRE_FALSE(r.ops.empty());
      for (const SacOp& op : r.ops) {
        const Op& o = g.ops[op.op];
        CAPTURE(o.id);
        CHECK(ScopePrefix(o.scope, 2) == r.module);
        REQUIRE(op.save_outputs.size() == o.outputs.size());
        for (size_t i = 0; i < o.outputs.size(); ++i) {
          const int t = o.outputs[i];
          // What the program recomputes, the policy never saves; one op's
          // candidates are kept or dropped together.
          if (recomputed[t] && !g.IsView(t)) CHECK_FALSE(op.save_outputs[i]);
          if (op.save_outputs[i] && !g.IsView(t)) CHECK(keep[t]);
        }
      }
    }
    std::vector<int> candidates = CheckpointCandidates(g);
    for (int t : candidates)
      for (int u : candidates)
        if (g.tensors[t].producer == g.tensors[u].producer) CHECK(keep[t] == keep[u]);
  }
}

TEST_CASE("planner: sac granularity charges SAC's dispatch to modules with a policy only") {
  JointGraph jg;
  std::string err;
  REQUIRE(
      LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &jg, &err));
  const Graph& g = jg.graph;
  const int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
  const ModuleRegions regions = FindModuleRegions(g, 2);
  auto forward_ops = [&](const std::string& module) {
    int n = 0;
    for (size_t o = 0; o < g.ops.size(); ++o)
      n += g.ops[o].phase == Phase::kForward && regions.module_of_op[o] == module;
    return n;
  };
  PlannerOptions module;
  module.granularity = Granularity::kModule;
  for (int pct : {90, 70}) {
    CAPTURE(pct);
    const int64_t budget = baseline * pct / 100;
    PlanResult by_module;
    REQUIRE(PlanCheckpoints(g, budget, module, &by_module, &err));
    REQUIRE(by_module.feasible);
    int policies_seen = 0;
    for (double per_op : {0.0, 1e-4, 1e-2, 1.0, 1e6}) {
      CAPTURE(per_op);
      PlannerOptions sac;
      sac.granularity = Granularity::kSac;
      sac.cost.sac_dispatch_us = per_op;
      PlanResult r;
      REQUIRE(PlanCheckpoints(g, budget, sac, &r, &err));
      REQUIRE(r.feasible);
      CHECK(r.best.sim.peak_bytes <= budget);
      // Policy modules are wrapped ones; the charge is two passes over each.
      double expected = 0;
      for (const std::string& m : r.policy_modules) {
        CHECK(std::find(r.modules.begin(), r.modules.end(), m) != r.modules.end());
        expected += 2 * per_op * forward_ops(m);
      }
      CHECK(r.sac_dispatch_cost == doctest::Approx(expected));
      CHECK(r.best.recompute_cost ==
            doctest::Approx(r.best.sim.recompute_cost + r.sac_dispatch_cost));
      // The module plan is a sac plan without policies: never beaten by more
      // than the charge allows, never dearer.
      CHECK(r.best.recompute_cost <= by_module.best.recompute_cost + 1e-9);
      if (per_op == 0.0) policies_seen = static_cast<int>(r.policy_modules.size());
      if (per_op == 1e6) {
        CHECK(r.policy_modules.empty());
        CHECK(r.sac_dispatch_cost == 0);
      }
    }
    // Free dispatch: op decisions inside modules are worth a policy here.
    CHECK(policies_seen > 0);
  }
  // Under objective flops the dispatch costs nothing.
  PlannerOptions flops;
  flops.granularity = Granularity::kSac;
  flops.cost.objective = Objective::kFlops;
  flops.cost.sac_dispatch_us = 1e6;
  PlanResult r;
  REQUIRE(PlanCheckpoints(g, baseline * 70 / 100, flops, &r, &err));
  CHECK(r.sac_dispatch_cost == 0);
  CHECK_FALSE(r.policy_modules.empty());
}

TEST_CASE("planner: a budget sweep never costs less at a smaller budget") {
  CHECK(SweepRange(1000, 100, 4) == std::vector<int64_t>{1000, 700, 400, 100});
  CHECK(SweepRange(1000, 2000, 4) == std::vector<int64_t>{1000});
  CHECK(SweepRange(int64_t{1} << 61, 0, 3) ==
        std::vector<int64_t>{int64_t{1} << 61, int64_t{1} << 60, 0});
  int sweeps = 0;
  for (uint32_t seed = 1; sweeps < 20 && seed < 200; ++seed) {
    CAPTURE(seed);
    Graph g =
        testing::MustLower(testing::RandomForwardGraph(seed, 20 + static_cast<int>(seed % 25)));
    PlannerOptions options;
    options.algorithm = PlanAlgorithm::kGreedy;
    int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
    std::vector<int64_t> budgets = SweepRange(baseline, PeakLowerBound(g), 12);
    std::vector<SweepPoint> points;
    std::string err;
    REQUIRE(SweepBudgets(g, budgets, options, &points, &err));
    REQUIRE(points.size() == budgets.size());
    for (size_t i = 0; i < points.size(); ++i) {
      CHECK(points[i].budget_bytes == budgets[i]);
      if (points[i].feasible) CHECK(points[i].peak_bytes <= points[i].budget_bytes);
      if (i > 0 && points[i].feasible) {
        // budgets fall: a point that fits was fitting at every larger budget, for no more.
        CHECK(points[i - 1].feasible);
        CHECK(points[i].recompute_cost >= points[i - 1].recompute_cost - 1e-9);
      }
    }
    ++sweeps;
  }
  CHECK(sweeps == 20);
}

TEST_CASE("planner: the progress callback sees every program scored, in order") {
  Graph g = testing::MustLower(testing::RandomChainGraph(5, 40));
  PlannerOptions options;
  std::vector<int64_t> seen;
  options.progress = [&](int64_t programs) { seen.push_back(programs); };
  int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
  PlanResult result;
  std::string err;
  REQUIRE(PlanCheckpoints(g, baseline * 7 / 10, options, &result, &err));
  REQUIRE(result.evaluations > 1);
  REQUIRE(seen.size() == static_cast<size_t>(result.evaluations));
  for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == static_cast<int64_t>(i) + 1);
}

}  // namespace
}  // namespace memplan
