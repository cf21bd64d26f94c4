#include "analyzer/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace memplan {

bool ParsePlanAlgorithm(std::string_view name, PlanAlgorithm* out) {
  if (name == "auto")
    *out = PlanAlgorithm::kAuto;
  else if (name == "exact")
    *out = PlanAlgorithm::kExact;
  else if (name == "greedy")
    *out = PlanAlgorithm::kGreedy;
  else
    return false;
  return true;
}

const char* PlanAlgorithmName(PlanAlgorithm a) {
  switch (a) {
    case PlanAlgorithm::kAuto:
      return "auto";
    case PlanAlgorithm::kExact:
      return "exact";
    case PlanAlgorithm::kGreedy:
      return "greedy";
  }
  return "?";
}

bool ScoreCheckpointSet(const Graph& g, const std::vector<bool>& keep,
                        const std::vector<double>& costs, AccumulationMode mode, ScoredPlan* out,
                        std::string* err) {
  out->keep = keep;
  out->checkpoint = BuildCheckpointProgram(g, keep, mode);
  SimOptions options;
  options.op_cost = costs;
  if (!Simulate(g, out->checkpoint.program, options, &out->sim, err)) {
    *err = "checkpoint program is invalid: " + *err;
    return false;
  }
  out->recompute_cost = out->sim.recompute_cost;
  return true;
}

namespace {

// Lower peak first, then lower cost: what to report when nothing fits.
bool LowerPeak(const ScoredPlan& a, const ScoredPlan& b) {
  if (a.sim.peak_bytes != b.sim.peak_bytes) return a.sim.peak_bytes < b.sim.peak_bytes;
  return a.recompute_cost < b.recompute_cost;
}

class Search {
 public:
  Search(const Graph& g, int64_t budget, const PlannerOptions& options, PlanResult* result)
      : g_(g), budget_(budget), options_(options), result_(result) {
    costs_ = OpCosts(g, options.cost);
    candidates_ = CheckpointCandidates(g);
    is_candidate_.assign(g.tensors.size(), false);
    for (int t : candidates_) is_candidate_[t] = true;
  }

  bool Run(std::string* err) {
    err_ = err;
    for (const Op& op : g_.ops) result_->step_cost += costs_[&op - g_.ops.data()];
    PlanAlgorithm algorithm = options_.algorithm;
    if (algorithm == PlanAlgorithm::kAuto)
      algorithm = candidates_.size() <= kMaxExactCandidates ? PlanAlgorithm::kExact
                                                            : PlanAlgorithm::kGreedy;
    if (algorithm == PlanAlgorithm::kExact && candidates_.size() > kMaxExactCandidates) {
      *err = fmt::format(
          "the exact planner takes at most {} candidate tensors; this graph has {} "
          "(use --algorithm greedy or auto)",
          kMaxExactCandidates, candidates_.size());
      return false;
    }
    result_->algorithm = algorithm;
    if (!Greedy()) return false;
    if (algorithm == PlanAlgorithm::kExact && !Exact()) return false;
    result_->min_feasible_peak_bytes = lowest_.sim.peak_bytes;
    if (!result_->feasible) result_->best = lowest_;
    return true;
  }

 private:
  bool Score(const std::vector<bool>& keep, ScoredPlan* out) {
    ++result_->evaluations;
    if (!ScoreCheckpointSet(g_, keep, costs_, options_.accumulation, out, err_)) return false;
    if (result_->evaluations == 1 || LowerPeak(*out, lowest_)) lowest_ = *out;
    if (out->sim.peak_bytes <= budget_ &&
        (!result_->feasible || out->recompute_cost < result_->best.recompute_cost)) {
      result_->feasible = true;
      result_->best = *out;
    }
    return true;
  }

  double ProducerCost(int t) const { return costs_[g_.tensors[t].producer]; }

  bool Greedy() {
    std::vector<bool> keep(g_.tensors.size(), false);
    for (int t : candidates_) keep[t] = true;
    ScoredPlan current;
    if (!Score(keep, &current)) return false;
    result_->baseline_peak_bytes = current.sim.peak_bytes;
    const size_t batch_divisor = candidates_.size() < 2000 ? 0 : 50;  // one at a time, or 2%
    std::vector<int> dropped;
    double max_cost = 0;
    for (double c : costs_) max_cost = std::max(max_cost, c);
    const double epsilon = max_cost * 1e-9 + 1e-12;
    while (current.sim.peak_bytes > budget_) {
      std::vector<std::pair<double, int>> droppable;  // (bytes per cost, tensor)
      for (const LiveBuffer& lb : current.sim.live_at_peak) {
        int t = lb.owner;
        if (t < 0 || !is_candidate_[t] || !keep[t]) continue;
        droppable.emplace_back(static_cast<double>(lb.bytes) / (ProducerCost(t) + epsilon), t);
      }
      if (droppable.empty()) break;
      std::sort(droppable.begin(), droppable.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      size_t n = batch_divisor == 0 ? 1 : std::max<size_t>(1, droppable.size() / batch_divisor);
      for (size_t i = 0; i < n; ++i) {
        keep[droppable[i].second] = false;
        dropped.push_back(droppable[i].second);
      }
      if (!Score(keep, &current)) return false;
    }
    if (current.sim.peak_bytes > budget_) return true;  // infeasible for greedy
    // Keep again what fits, most expensive first (bounded on large graphs).
    std::stable_sort(dropped.begin(), dropped.end(),
                     [&](int a, int b) { return ProducerCost(a) > ProducerCost(b); });
    const size_t attempts = std::min<size_t>(dropped.size(), 400);
    for (size_t i = 0; i < attempts; ++i) {
      int t = dropped[i];
      keep[t] = true;
      ScoredPlan trial;
      if (!Score(keep, &trial)) return false;
      if (trial.sim.peak_bytes <= budget_ && trial.recompute_cost <= current.recompute_cost)
        current = std::move(trial);
      else
        keep[t] = false;
    }
    return true;
  }

  // Recompute cost of `keep`, without simulating.
  double Bound(const std::vector<bool>& keep) const {
    CheckpointProgram cp = BuildCheckpointProgram(g_, keep, options_.accumulation);
    double cost = 0;
    for (int o : cp.recomputed_ops) cost += costs_[o];
    return cost;
  }

  bool Exact() {
    order_ = candidates_;
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int a, int b) { return ProducerCost(a) > ProducerCost(b); });
    std::vector<bool> keep(g_.tensors.size(), false);
    for (int t : candidates_) keep[t] = true;  // undecided ones count as kept
    return Branch(0, &keep);
  }

  bool Branch(size_t i, std::vector<bool>* keep) {
    if (result_->feasible) {
      double bound = Bound(*keep);
      double best = result_->best.recompute_cost;
      if (bound >= best - 1e-9 * std::max(1.0, std::abs(best))) return true;
    }
    if (i == order_.size()) {
      ScoredPlan leaf;
      return Score(*keep, &leaf);
    }
    int t = order_[i];
    (*keep)[t] = true;
    if (!Branch(i + 1, keep)) return false;
    (*keep)[t] = false;
    bool ok = Branch(i + 1, keep);
    (*keep)[t] = true;
    return ok;
  }

  const Graph& g_;
  int64_t budget_;
  const PlannerOptions& options_;
  PlanResult* result_;
  std::string* err_ = nullptr;
  std::vector<double> costs_;
  std::vector<int> candidates_, order_;
  std::vector<bool> is_candidate_;
  ScoredPlan lowest_;
};

}  // namespace

bool PlanCheckpoints(const Graph& g, int64_t budget_bytes, const PlannerOptions& options,
                     PlanResult* result, std::string* err) {
  *result = PlanResult();
  Search search(g, budget_bytes, options, result);
  return search.Run(err);
}

}  // namespace memplan
