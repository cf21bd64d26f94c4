// The planner's public entry points (planner.h); the search itself is
// plan_search::Search (search.h).
#include "analyzer/plan/planner.h"

#include <string>
#include <vector>

#include "analyzer/base/enum_table.h"
#include "analyzer/plan/search.h"

namespace memplan {

namespace {

constexpr EnumName<PlanAlgorithm> kPlanAlgorithms[] = {
    {PlanAlgorithm::kAuto, "auto"},
    {PlanAlgorithm::kExact, "exact"},
    {PlanAlgorithm::kGreedy, "greedy"},
    {PlanAlgorithm::kChain, "chain"},
};

constexpr EnumName<Granularity> kGranularities[] = {
    {Granularity::kOp, "op"},
    {Granularity::kModule, "module"},
    {Granularity::kSac, "sac"},
};

}  // namespace

bool ParsePlanAlgorithm(std::string_view name, PlanAlgorithm* out) {
  return ParseEnum(kPlanAlgorithms, name, out);
}

bool ParseGranularity(std::string_view name, Granularity* out) {
  return ParseEnum(kGranularities, name, out);
}

const char* PlanAlgorithmName(PlanAlgorithm a) { return NameOf(kPlanAlgorithms, a, "?"); }

const char* GranularityName(Granularity g) { return NameOf(kGranularities, g, "?"); }

bool ScoreCheckpointSet(const Graph& g, const std::vector<bool>& keep,
                        const std::vector<double>& costs, const ScoreOptions& options,
                        ScoredPlan* out, std::string* err) {
  static const std::vector<bool> kNone;
  out->keep = keep;
  out->each_use = options.program.each_use ? *options.program.each_use : kNone;
  out->reverse_order = options.program.reverse_order ? *options.program.reverse_order : kNone;
  CheckpointProgramOptions program = options.program;
  program.each_use = &out->each_use;
  program.reverse_order = &out->reverse_order;
  SimOptions sim;
  sim.op_cost = costs;
  sim.collect_live_at_peak = options.detailed;
  sim.accumulating_gradients = options.accumulating_gradients;
  sim.peak_only = options.peak_only;
  sim.stop_above = options.stop_above;
  if (!options.peak_only) {
    out->checkpoint = BuildCheckpointProgram(g, keep, program);
    if (!Simulate(g, out->checkpoint.program, sim, &out->sim, err)) {
      *err = "checkpoint program is invalid: " + *err;
      return false;
    }
    out->recompute_cost = out->sim.recompute_cost;
    return true;
  }
  ScoreScratch own;
  ScoreScratch& scratch = options.scratch != nullptr ? *options.scratch : own;
  out->checkpoint = LayOutCheckpointProgram(g, keep, program, &scratch.layout);
  LeanReplay(g, scratch.layout, sim, &out->sim, &scratch.replay);
  out->recompute_cost = out->sim.recompute_cost;
  if (!out->sim.stopped && (options.detailed || out->sim.peak_bytes < options.collect_below))
    LeanLiveAt(g, scratch.layout, options.accumulating_gradients, out->sim.peak_step, &out->sim,
               &scratch.replay);
  return true;
}

bool PlanCheckpoints(const Graph& g, int64_t budget_bytes, const PlannerOptions& options,
                     PlanResult* result, std::string* err) {
  *result = PlanResult();
  plan_search::Search search(g, budget_bytes, options, result);
  return search.Run(err);
}

bool SweepBudgets(const Graph& g, const std::vector<int64_t>& budgets,
                  const PlannerOptions& options, std::vector<SweepPoint>* points,
                  std::string* err) {
  std::vector<SweepPoint> found(budgets.size());
  for (size_t i = 0; i < budgets.size(); ++i) {
    if (options.stage)
      options.stage("sweep", static_cast<int64_t>(i), static_cast<int64_t>(budgets.size()));
    PlanResult result;
    if (!PlanCheckpoints(g, budgets[i], options, &result, err)) return false;
    found[i] = {budgets[i], result.feasible, result.best.sim.peak_bytes,
                result.best.recompute_cost};
  }
  *points = found;
  for (SweepPoint& point : *points) {
    for (const SweepPoint& other : found) {
      if (other.peak_bytes > point.budget_bytes) continue;  // does not fit here
      bool better =
          !point.feasible || other.recompute_cost < point.recompute_cost ||
          (other.recompute_cost == point.recompute_cost && other.peak_bytes < point.peak_bytes);
      if (better) {
        point.feasible = true;
        point.peak_bytes = other.peak_bytes;
        point.recompute_cost = other.recompute_cost;
      }
    }
  }
  return true;
}

std::vector<int64_t> SweepRange(int64_t baseline_peak, int64_t floor, int n) {
  std::vector<int64_t> budgets;
  if (n < 1) return budgets;
  if (n == 1 || floor >= baseline_peak) return {baseline_peak};
  for (int i = 0; i < n; ++i) {
    // Exact for any int64 range: interpolate in long double.
    long double f = static_cast<long double>(i) / (n - 1);
    budgets.push_back(baseline_peak -
                      static_cast<int64_t>(f * static_cast<long double>(baseline_peak - floor)));
  }
  return budgets;
}

}  // namespace memplan
