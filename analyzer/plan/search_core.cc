// The search's core: set-up, Run, groups and decisions, Score (search.h).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "analyzer/plan/search.h"

namespace memplan::plan_search {

namespace {

// Lower peak first, then lower cost: what to report when nothing fits.
bool LowerPeak(const ScoredPlan& a, int64_t peak_bytes, double recompute_cost) {
  if (a.sim.peak_bytes != peak_bytes) return a.sim.peak_bytes < peak_bytes;
  return a.recompute_cost < recompute_cost;
}

}  // namespace

Search::Search(const Graph& g, int64_t budget, const PlannerOptions& options, PlanResult* result)
    : g_(g), budget_(budget), options_(options), result_(result) {
  costs_ = OpCosts(g, options.cost);
  candidates_ = CheckpointCandidates(g);
  group_of_.assign(g.tensors.size(), -1);
  if (options.granularity == Granularity::kOp) {
    for (int t : candidates_) AddToGroup(g.tensors[t].id, t);
    const std::vector<bool> matters = EachUseMatters(g);
    each_use_matters_.assign(groups_.size(), false);
    for (int t : candidates_) each_use_matters_[group_of_[t]] = matters[t];
    order_matters_ = OrderMatters(g);
    for (bool m : order_matters_) order_search_ = order_search_ || m;
    reverse_.assign(g.ops.size(), false);
  } else {
    ModuleGroups();
    each_use_matters_.assign(groups_.size(), false);
  }
  each_use_.assign(groups_.size(), false);
}

bool Search::Run(std::string* err) {
  err_ = err;
  for (double c : costs_) result_->step_cost += c;
  PlanAlgorithm algorithm = options_.algorithm;
  if (algorithm == PlanAlgorithm::kAuto) {
    algorithm =
        groups_.size() <= kMaxExactCandidates ? PlanAlgorithm::kExact : PlanAlgorithm::kGreedy;
    // On a long op chain the DP's model is exact and the greedy's rounds
    // cost seconds each: the DP plans alone.
    if (algorithm == PlanAlgorithm::kGreedy && options_.granularity == Granularity::kOp &&
        Stages().num_stages > kChainAloneStages && IsOpChain())
      algorithm = PlanAlgorithm::kChain;
  }
  if (algorithm == PlanAlgorithm::kExact && groups_.size() > kMaxExactCandidates) {
    *err = fmt::format(
        "the exact planner takes at most {} candidates; this graph has {} {} (use --algorithm "
        "greedy or auto)",
        kMaxExactCandidates, groups_.size(),
        options_.granularity == Granularity::kOp    ? "candidate tensors"
        : options_.granularity == Granularity::kSac ? "candidate ops"
                                                    : "modules");
    return false;
  }
  result_->algorithm = algorithm;
  result_->lower_bound_bytes = PeakLowerBound(g_);
  kept_.assign(groups_.size(), true);
  if (algorithm == PlanAlgorithm::kChain) {
    if (options_.granularity != Granularity::kOp) {
      *err = "the chain planner works at op granularity (use --granularity op)";
      return false;
    }
    ScoredPlan baseline;
    if (!Score(&baseline, /*detailed=*/false)) return false;
    result_->baseline_peak_bytes = baseline.sim.peak_bytes;
    if (!ChainSeed()) return false;
    if (!HandWritten()) return false;
  } else {
    ScoredPlan baseline;
    if (!Score(&baseline)) return false;
    result_->baseline_peak_bytes = baseline.sim.peak_bytes;
    // The seeds first: when one fits, the greedy may stop its drop rounds
    // early and keep again from the cheapest seed instead.
    if (!HandWritten()) return false;
    if (!ChainSeed()) return false;
    if (!ModuleSeed()) return false;
    if (!EveryModuleSeed()) return false;
    if (!Greedy(std::move(baseline))) return false;
    if (!Improve()) return false;
    if (!PlainWraps()) return false;
  }
  // Below the floor nothing fits: no need to search for a cheap set. The
  // least peak is still reported exactly when the sets are few enough to
  // score them all; otherwise it is the least the other searches met.
  if (algorithm == PlanAlgorithm::kExact) {
    if (result_->lower_bound_bytes <= budget_) {
      if (!Exact()) return false;
    } else if (groups_.size() <= kMaxLeastPeakCandidates) {
      if (!LeastPeak()) return false;
      result_->search_complete =
          result_->search_complete && ProgramCount() <= kMaxLeastPeakPrograms;
    } else {
      result_->search_complete = false;
    }
  }
  result_->min_feasible_peak_bytes = lowest_.peak_bytes;
  // The heuristics prove a least peak only when it is the floor.
  if (algorithm != PlanAlgorithm::kExact && !result_->feasible &&
      lowest_.peak_bytes > result_->lower_bound_bytes)
    result_->search_complete = false;
  // The answer is scored again in full: the search's trials keep only their
  // figures (peak_only) and some their live set.
  const ScoredPlan* answer = result_->feasible ? &result_->best : nullptr;
  const std::vector<bool>& keep = answer ? answer->keep : lowest_.keep;
  const std::vector<bool>& each_use = answer ? answer->each_use : lowest_.each_use;
  const std::vector<bool>& reverse = answer ? answer->reverse_order : lowest_.reverse_order;
  ScoredPlan detailed;
  const ScoreOptions score{.program = ProgramOptions(&each_use, &reverse),
                           .detailed = true,
                           .accumulating_gradients = options_.accumulating_gradients};
  if (!ScoreCheckpointSet(g_, keep, costs_, score, &detailed, err_)) return false;
  detailed.recompute_cost += DispatchCharge(detailed.keep);
  result_->best = std::move(detailed);
  if (!result_->feasible) result_->modules = lowest_modules_;
  if (options_.granularity == Granularity::kSac) {
    result_->sac_dispatch_cost = DispatchCharge(result_->best.keep);
    const std::vector<bool> policy = ModulesWithPolicy(result_->best.keep);
    for (size_t m = 0; m < policy.size(); ++m)
      if (policy[m]) result_->policy_modules.push_back(sac_module_names_[m]);
    std::sort(result_->policy_modules.begin(), result_->policy_modules.end());
  }
  return true;
}

void Search::AddToGroup(const std::string& name, int t) {
  auto [it, inserted] = group_index_.emplace(name, static_cast<int>(groups_.size()));
  if (inserted) groups_.push_back(Group{name, {}, 0});
  Group& group = groups_[it->second];
  group.tensors.push_back(t);
  group.cost += costs_[g_.tensors[t].producer];
  group_of_[t] = it->second;
}

const std::vector<int>* Search::RecomputeGroups() const {
  return options_.granularity == Granularity::kOp ? nullptr : &region_of_;
}

CheckpointProgramOptions Search::ProgramOptions(const std::vector<bool>* each_use,
                                                const std::vector<bool>* reverse_order) const {
  return {.mode = options_.accumulation,
          .recompute_group = RecomputeGroups(),
          .each_use = each_use,
          .reverse_order = reverse_order};
}

std::vector<bool> Search::KeepVector() const {
  std::vector<bool> keep(g_.tensors.size(), false);
  for (int t : candidates_) keep[t] = group_of_[t] < 0 || kept_[group_of_[t]];
  return keep;
}

std::vector<bool> Search::EachUseVector() const {
  std::vector<bool> each_use;
  for (int t : candidates_) {
    const int grp = group_of_[t];
    if (grp < 0 || kept_[grp] || !each_use_[grp]) continue;
    if (each_use.empty()) each_use.assign(g_.tensors.size(), false);
    each_use[t] = true;
  }
  return each_use;
}

std::vector<std::string> Search::DroppedModules() const {
  std::vector<std::string> names;
  if (options_.granularity == Granularity::kOp) return names;
  for (size_t i = 0; i < groups_.size(); ++i)
    if (!kept_[i])
      names.push_back(options_.granularity == Granularity::kSac
                          ? sac_module_names_[sac_module_of_group_[i]]
                          : groups_[i].name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

bool Search::Score(ScoredPlan* out, bool detailed) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return ScoreTrial(out, detailed ? kMax : std::numeric_limits<int64_t>::min(), kMax);
}

bool Search::ScoreDetailedBelow(ScoredPlan* out, int64_t peak) {
  return ScoreTrial(out, peak, peak);
}

bool Search::ScoreUnder(ScoredPlan* out, int64_t bound) {
  return ScoreTrial(out, std::numeric_limits<int64_t>::min(), bound);
}

bool Search::ScoreTrial(ScoredPlan* out, int64_t collect_below, int64_t stop_above) {
  if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
    *err_ = kPlanCancelled;
    return false;
  }
  ++result_->evaluations;
  if (options_.progress) options_.progress(result_->evaluations);
  const bool first = result_->evaluations == 1;
  const std::vector<bool> each_use = EachUseVector();
  const ScoreOptions score{.program = ProgramOptions(&each_use, &reverse_),
                           .detailed = false,
                           .accumulating_gradients = options_.accumulating_gradients,
                           .peak_only = true,
                           .stop_above = first || !options_.stop_trials ||
                                                 stop_above == std::numeric_limits<int64_t>::max()
                                             ? std::numeric_limits<int64_t>::max()
                                             : std::max({stop_above, lowest_.peak_bytes, budget_}),
                           .collect_below = collect_below,
                           .scratch = &scratch_};
  if (!ScoreCheckpointSet(g_, KeepVector(), costs_, score, out, err_)) return false;
  out->recompute_cost += DispatchCharge(out->keep);
  if (out->sim.stopped) {  // over the lowest peak and the budget
    ++result_->stopped_trials;
    return true;
  }
  if (first || LowerPeak(*out, lowest_.peak_bytes, lowest_.recompute_cost)) {
    lowest_.peak_bytes = out->sim.peak_bytes;
    lowest_.recompute_cost = out->recompute_cost;
    lowest_.keep = out->keep;
    lowest_.each_use = out->each_use;
    lowest_.reverse_order = out->reverse_order;
    lowest_modules_ = DroppedModules();
  }
  if (out->sim.peak_bytes <= budget_ &&
      (!result_->feasible || out->recompute_cost < result_->best.recompute_cost)) {
    result_->feasible = true;
    result_->best = *out;
    result_->modules = DroppedModules();
  }
  return true;
}

void Search::SetDecisions(const ScoredPlan& plan) {
  kept_ = GroupsKept(plan.keep);
  each_use_ = GroupsEachUse(plan.each_use);
  std::fill(reverse_.begin(), reverse_.end(), false);
  for (size_t o = 0; o < plan.reverse_order.size() && o < reverse_.size(); ++o)
    reverse_[o] = plan.reverse_order[o];
}

std::vector<bool> Search::GroupsKept(const std::vector<bool>& keep) const {
  std::vector<bool> kept(groups_.size(), true);
  for (int t : candidates_)
    if (group_of_[t] >= 0 && !keep[t]) kept[group_of_[t]] = false;
  return kept;
}

std::vector<bool> Search::GroupsEachUse(const std::vector<bool>& each_use) const {
  std::vector<bool> out(groups_.size(), false);
  for (int t : candidates_)
    if (group_of_[t] >= 0 && static_cast<size_t>(t) < each_use.size() && each_use[t])
      out[group_of_[t]] = true;
  return out;
}

int64_t Search::GroupBytes(int grp) const {
  int64_t bytes = 0;
  for (int t : groups_[grp].tensors) bytes += g_.OwnedBytes(t);
  return bytes;
}

const ChainStages& Search::Stages() {
  if (!stages_computed_) stages_ = FindChainStages(g_, options_.accumulation);
  stages_computed_ = true;
  return stages_;
}

bool Search::IsOpChain() {
  int64_t forward = 0;
  for (const Op& op : g_.ops) forward += op.phase == Phase::kForward;
  return Stages().num_stages == forward;
}

}  // namespace memplan::plan_search
