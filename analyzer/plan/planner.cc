#include "analyzer/plan/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "analyzer/plan/baselines.h"
#include "analyzer/plan/chain_dp.h"
#include "analyzer/plan/sac_policy.h"

namespace memplan {

bool ParsePlanAlgorithm(std::string_view name, PlanAlgorithm* out) {
  if (name == "auto")
    *out = PlanAlgorithm::kAuto;
  else if (name == "exact")
    *out = PlanAlgorithm::kExact;
  else if (name == "greedy")
    *out = PlanAlgorithm::kGreedy;
  else if (name == "chain")
    *out = PlanAlgorithm::kChain;
  else
    return false;
  return true;
}

bool ParseGranularity(std::string_view name, Granularity* out) {
  if (name == "op")
    *out = Granularity::kOp;
  else if (name == "module")
    *out = Granularity::kModule;
  else if (name == "sac")
    *out = Granularity::kSac;
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
    case PlanAlgorithm::kChain:
      return "chain";
  }
  return "?";
}

const char* GranularityName(Granularity g) {
  switch (g) {
    case Granularity::kOp:
      return "op";
    case Granularity::kModule:
      return "module";
    case Granularity::kSac:
      return "sac";
  }
  return "?";
}

namespace {

// No recompute groups: every dropped tensor is remade on demand.
const std::vector<int>& NoRecomputeGroups() {
  static const std::vector<int> none;
  return none;
}

}  // namespace

bool ScoreCheckpointSet(const Graph& g, const std::vector<bool>& keep,
                        const std::vector<double>& costs, AccumulationMode mode, ScoredPlan* out,
                        std::string* err, bool detailed, const std::vector<int>* recompute_group,
                        const std::vector<bool>* each_use, const std::vector<bool>* reverse_order) {
  static const std::vector<bool> kNone;
  out->keep = keep;
  out->each_use = each_use ? *each_use : kNone;
  out->reverse_order = reverse_order ? *reverse_order : kNone;
  out->checkpoint = BuildCheckpointProgram(g, keep, mode,
                                           recompute_group ? *recompute_group : NoRecomputeGroups(),
                                           out->each_use, out->reverse_order);
  SimOptions options;
  options.op_cost = costs;
  options.collect_live_at_peak = detailed;
  if (!Simulate(g, out->checkpoint.program, options, &out->sim, err)) {
    *err = "checkpoint program is invalid: " + *err;
    return false;
  }
  out->recompute_cost = out->sim.recompute_cost;
  return true;
}

namespace {

// Past this many stages the chain DP takes seconds: auto runs it only on op
// chains, and then alone.
constexpr int64_t kChainAloneStages = 20000;
// Up to this many stages the chain DP runs unbounded (exact on op chains):
// its fronts can hold every sum of stage bytes, so this stays small.
constexpr int64_t kChainExactStages = 64;
// Improve's reach and work bound: groups (its moves are quadratic in them),
// programs, op runs replayed, and drops per move.
constexpr size_t kImproveMaxGroups = 256;
constexpr int64_t kImproveEvaluations = 4000;
constexpr int64_t kImproveOpReplays = 1000000;
constexpr int kImproveRedrops = 6;
// The greedy's drop rounds stop once their plan costs this many times the
// cheapest seed that fits (the keep-again has cut a plan to 40% of its
// cost, on the 50-op resnet at 90%; the 1k chain at its tightest budget
// went on to 17x the seed, 2,681 programs where 769 do).
constexpr double kSeedCostFactor = 4;
// The exact searches try every recomputation order of up to this many ops
// per program (checkpoint.h: reverse_order).
constexpr size_t kMaxOrderOps = 8;

// Lower peak first, then lower cost: what to report when nothing fits.
bool LowerPeak(const ScoredPlan& a, const ScoredPlan& b) {
  if (a.sim.peak_bytes != b.sim.peak_bytes) return a.sim.peak_bytes < b.sim.peak_bytes;
  return a.recompute_cost < b.recompute_cost;
}

// One keep/drop decision: a candidate tensor (op granularity) or the tensors
// internal to a module (module granularity).
struct Group {
  std::string name;
  std::vector<int> tensors;
  double cost = 0;  // summed cost of the producers
};

class Search {
 public:
  Search(const Graph& g, int64_t budget, const PlannerOptions& options, PlanResult* result)
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

  bool Run(std::string* err) {
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
    result_->min_feasible_peak_bytes = lowest_.sim.peak_bytes;
    // The heuristics prove a least peak only when it is the floor.
    if (algorithm != PlanAlgorithm::kExact && !result_->feasible &&
        lowest_.sim.peak_bytes > result_->lower_bound_bytes)
      result_->search_complete = false;
    if (!result_->feasible) {
      result_->best = lowest_;
      result_->modules = lowest_modules_;
    }
    // The chosen plan may come from a trial scored without the live set.
    if (result_->best.sim.live_at_peak.empty()) {
      ScoredPlan detailed;
      if (!ScoreCheckpointSet(g_, result_->best.keep, costs_, options_.accumulation, &detailed,
                              err_, /*detailed=*/true, RecomputeGroups(), &result_->best.each_use,
                              &result_->best.reverse_order))
        return false;
      detailed.recompute_cost += DispatchCharge(detailed.keep);
      result_->best = std::move(detailed);
    }
    if (options_.granularity == Granularity::kSac) {
      result_->sac_dispatch_cost = DispatchCharge(result_->best.keep);
      const std::vector<bool> policy = ModulesWithPolicy(result_->best.keep);
      for (size_t m = 0; m < policy.size(); ++m)
        if (policy[m]) result_->policy_modules.push_back(sac_module_names_[m]);
      std::sort(result_->policy_modules.begin(), result_->policy_modules.end());
    }
    return true;
  }

 private:
  void AddToGroup(const std::string& name, int t) {
    auto [it, inserted] = group_index_.emplace(name, static_cast<int>(groups_.size()));
    if (inserted) groups_.push_back(Group{name, {}, 0});
    Group& group = groups_[it->second];
    group.tensors.push_back(t);
    group.cost += costs_[g_.tensors[t].producer];
    group_of_[t] = it->second;
  }

  // Module granularity: a module's group holds the candidates its ops make
  // that no forward op outside it reads (its outputs stay kept, as
  // torch.utils.checkpoint keeps them). Sac granularity: the same candidates,
  // one group per producer op. Both: region_of_ marks every tensor a
  // module's ops make with the module's index (its recompute group), and the
  // outputs of its backward ops too (checkpoint.h: they trigger it).
  void ModuleGroups() {
    const ModuleRegions regions = FindModuleRegions(g_, options_.module_depth);
    const bool per_op = options_.granularity == Granularity::kSac;
    std::vector<std::string> module_of_group;  // sac granularity
    for (int t : candidates_) {
      const int p = g_.tensors[t].producer;
      const std::string& module = regions.module_of_op[p];
      if (module.empty() || regions.escapes[t]) continue;
      AddToGroup(per_op ? g_.ops[p].id : module, t);
      if (per_op) module_of_group.resize(groups_.size(), module);
    }
    if (per_op) SacModules(regions, module_of_group);
    std::unordered_map<std::string, int> region_index;
    region_of_.assign(g_.tensors.size(), -1);
    for (size_t o = 0; o < g_.ops.size(); ++o) {
      const std::string& module = regions.module_of_op[o];
      if (g_.ops[o].phase != Phase::kForward || module.empty()) continue;
      int r = region_index.emplace(module, static_cast<int>(region_index.size())).first->second;
      for (int t : g_.ops[o].outputs) region_of_[t] = r;
    }
    // A module's backward ops (by scope) trigger its recomputation on their
    // first read of any of its tensors (checkpoint.h).
    for (const Op& op : g_.ops) {
      if (op.phase == Phase::kForward || op.scope.empty()) continue;
      auto it = region_index.find(ScopePrefix(op.scope, options_.module_depth));
      if (it == region_index.end()) continue;
      for (int t : op.outputs) region_of_[t] = it->second;
    }
  }

  // Sac granularity: each group's module (from module_of_group, by group),
  // and each module's forward ops (what SAC's dispatch mode runs through
  // twice when the module has a policy).
  void SacModules(const ModuleRegions& regions, const std::vector<std::string>& module_of_group) {
    std::unordered_map<std::string, int> index;
    for (const std::string& module : module_of_group) {
      if (index.emplace(module, static_cast<int>(index.size())).second) {
        sac_module_names_.push_back(module);
        sac_module_ops_.push_back(0);
      }
      sac_module_of_group_.push_back(index[module]);
    }
    for (size_t o = 0; o < g_.ops.size(); ++o) {
      if (g_.ops[o].phase != Phase::kForward) continue;
      auto it = index.find(regions.module_of_op[o]);
      if (it != index.end()) ++sac_module_ops_[it->second];
    }
  }

  // Sac granularity, by module: whether `keep` (by tensor) wraps it with a
  // policy: some of its groups dropped, some kept. A module with every
  // group dropped is wrapped without one (plain checkpoint()).
  std::vector<bool> ModulesWithPolicy(const std::vector<bool>& keep) const {
    std::vector<int> dropped(sac_module_names_.size(), 0), groups(sac_module_names_.size(), 0);
    for (size_t grp = 0; grp < sac_module_of_group_.size(); ++grp) {
      ++groups[sac_module_of_group_[grp]];
      dropped[sac_module_of_group_[grp]] += !keep[groups_[grp].tensors[0]];
    }
    std::vector<bool> policy(dropped.size());
    for (size_t m = 0; m < dropped.size(); ++m)
      policy[m] = dropped[m] > 0 && dropped[m] < groups[m];
    return policy;
  }

  // SAC's dispatch cost of `keep`: two passes over each module with a
  // policy (SacDispatchCost per op and pass).
  double DispatchCharge(const std::vector<bool>& keep) const {
    const double per_op = SacDispatchCost(options_.cost);
    if (per_op <= 0 || sac_module_names_.empty()) return 0;
    const std::vector<bool> policy = ModulesWithPolicy(keep);
    double charge = 0;
    for (size_t m = 0; m < policy.size(); ++m)
      if (policy[m]) charge += 2.0 * per_op * sac_module_ops_[m];
    return charge;
  }

  // Module and sac granularity: each module's tensors recompute together.
  const std::vector<int>* RecomputeGroups() const {
    return options_.granularity == Granularity::kOp ? nullptr : &region_of_;
  }

  std::vector<bool> KeepVector() const {
    std::vector<bool> keep(g_.tensors.size(), false);
    for (int t : candidates_) keep[t] = group_of_[t] < 0 || kept_[group_of_[t]];
    return keep;
  }

  // By tensor: dropped tensors recomputed at each use; empty when none.
  std::vector<bool> EachUseVector() const {
    std::vector<bool> each_use;
    for (int t : candidates_) {
      const int grp = group_of_[t];
      if (grp < 0 || kept_[grp] || !each_use_[grp]) continue;
      if (each_use.empty()) each_use.assign(g_.tensors.size(), false);
      each_use[t] = true;
    }
    return each_use;
  }

  // The modules to wrap: dropped ones, or at sac granularity those with a
  // dropped op.
  std::vector<std::string> DroppedModules() const {
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

  // detailed: with what is alive at the peak (the greedy's drop rounds need
  // it; trials that only ask "does it fit, for how much" do not).
  bool Score(ScoredPlan* out, bool detailed = true) {
    ++result_->evaluations;
    if (options_.progress) options_.progress(result_->evaluations);
    const std::vector<bool> each_use = EachUseVector();
    if (!ScoreCheckpointSet(g_, KeepVector(), costs_, options_.accumulation, out, err_, detailed,
                            RecomputeGroups(), &each_use, &reverse_))
      return false;
    out->recompute_cost += DispatchCharge(out->keep);
    if (result_->evaluations == 1 || LowerPeak(*out, lowest_)) {
      lowest_ = *out;
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

  // current: the baseline (every group kept), scored in detail.
  bool Greedy(ScoredPlan current) {
    const size_t batch_divisor = groups_.size() < 2000 ? 0 : 50;  // one at a time, or 2%
    std::vector<int> dropped;
    double max_cost = 0;
    for (double c : costs_) max_cost = std::max(max_cost, c);
    const double epsilon = max_cost * 1e-9 + 1e-12;
    std::vector<int64_t> bytes_at_peak(groups_.size(), 0);
    std::vector<bool> pinned(groups_.size(), false), each_use_tried(groups_.size(), false);
    // While a seed fits, drop rounds stop after about
    // options_.greedy_drop_op_replays op runs (tight budgets can take
    // thousands of rounds of a few groups each).
    const int64_t max_rounds =
        std::max<int64_t>(1, options_.greedy_drop_op_replays /
                                 std::max<int64_t>(1, static_cast<int64_t>(g_.ops.size())));
    int64_t rounds = 0;
    bool orders_tried = false;
    auto from_best_seed = [&] {
      SetDecisions(result_->best);
      current = result_->best;
      dropped.clear();
      for (size_t grp = 0; grp < groups_.size(); ++grp)
        if (!kept_[grp]) dropped.push_back(static_cast<int>(grp));
    };
    // The lowest peak met before each round (of any kind: drops, each-use
    // switches, order flips, pins), for the stall test below.
    std::vector<int64_t> lows;
    while (current.sim.peak_bytes > budget_) {
      ++rounds;
      lows.push_back(lows.empty() ? current.sim.peak_bytes
                                  : std::min(current.sim.peak_bytes, lows.back()));
      // While a seed fits, keep again from the cheapest one instead once the
      // rounds pass their cap, cost over kSeedCostFactor times it (they
      // seldom lower the cost: only pins do), or stall.
      if (result_->feasible &&
          (rounds > max_rounds ||
           current.recompute_cost > kSeedCostFactor * result_->best.recompute_cost ||
           (batch_divisor != 0 && Stalled(lows, max_rounds)))) {
        from_best_seed();
        break;
      }
      std::fill(bytes_at_peak.begin(), bytes_at_peak.end(), 0);
      std::vector<int> touched;
      for (const LiveBuffer& lb : current.sim.live_at_peak) {
        int grp = lb.owner >= 0 ? group_of_[lb.owner] : -1;
        if (grp < 0 || !kept_[grp] || pinned[grp]) continue;
        if (bytes_at_peak[grp] == 0) touched.push_back(grp);
        bytes_at_peak[grp] += lb.bytes;
      }
      std::vector<std::pair<double, int>> droppable;  // (bytes per cost, group)
      for (int grp : touched)
        droppable.emplace_back(
            static_cast<double>(bytes_at_peak[grp]) / (groups_[grp].cost + epsilon), grp);
      if (droppable.empty()) {
        // Nothing droppable is alive at the peak: it is made of recomputed
        // tensors. First recompute the largest of them at each use instead
        // of holding it, while that lowers the peak.
        const int switched = LargestHeldAtPeak(current, each_use_tried);
        if (switched >= 0) {
          each_use_tried[switched] = true;
          each_use_[switched] = true;
          ScoredPlan trial;
          if (!Score(&trial)) return false;
          if (trial.sim.peak_bytes < current.sim.peak_bytes)
            current = std::move(trial);
          else
            each_use_[switched] = false;
          continue;
        }
        // Else recompute some op's dead inputs in the other order, once,
        // where that lowers the peak.
        if (!orders_tried) {
          orders_tried = true;
          bool lower = false;
          if (!OrderFlips(&current, &lower)) return false;
          if (lower) continue;
        }
        // Else keep one of them again for good, the one made midway in
        // the forward, to split the recomputed stretch in two.
        int pin = MiddleRecomputedGroup(current, pinned);
        if (pin < 0) break;
        kept_[pin] = true;
        pinned[pin] = true;
        if (!Score(&current)) return false;
        continue;
      }
      std::sort(droppable.begin(), droppable.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      size_t n = batch_divisor == 0 ? 1 : std::max<size_t>(1, droppable.size() / batch_divisor);
      if (batch_divisor != 0) {
        // Far over the budget, more than 2%: the best groups whose bytes at
        // the peak cover half the excess (a drop frees at most its bytes).
        const int64_t half_excess = (current.sim.peak_bytes - budget_) / 2;
        int64_t covered = 0;
        size_t cover = 0;
        while (cover < droppable.size() && covered < half_excess)
          covered += bytes_at_peak[droppable[cover++].second];
        n = std::max(n, cover);
      }
      for (size_t i = 0; i < n; ++i) {
        kept_[droppable[i].second] = false;
        dropped.push_back(droppable[i].second);
      }
      if (!Score(&current)) return false;
    }
    if (current.sim.peak_bytes > budget_) {
      if (!result_->feasible) return true;  // infeasible for greedy and the seeds
      from_best_seed();                     // stuck above the budget where a seed fits
    }
    // Hold again, where it still fits, what is recomputed at each use.
    for (size_t grp = 0; grp < groups_.size(); ++grp) {
      if (kept_[grp] || !each_use_[grp]) continue;
      each_use_[grp] = false;
      ScoredPlan trial;
      if (!Score(&trial, /*detailed=*/false)) return false;
      if (trial.sim.peak_bytes <= budget_ && trial.recompute_cost <= current.recompute_cost)
        current = std::move(trial);
      else
        each_use_[grp] = true;
    }
    // Keep again what fits, most expensive first, within a work bound of
    // about 2e7 op replays (400 trials on a 50k-op graph, fewer above).
    std::stable_sort(dropped.begin(), dropped.end(),
                     [&](int a, int b) { return groups_[a].cost > groups_[b].cost; });
    const size_t work_bound = std::max<size_t>(20, 20000000 / std::max<size_t>(1, g_.ops.size()));
    const size_t max_trials = std::min(size_t{400}, work_bound);
    if (batch_divisor == 0)  // one at a time
      return KeepBack(dropped, max_trials, std::numeric_limits<int64_t>::max(),
                      &current.sim.peak_bytes, &current.recompute_cost);
    // Kept, a group would most likely be alive at the peak: skip it when its
    // bytes exceed the headroom (a filter, not a proof; saves a replay).
    auto eligible = [&](int grp) {
      return !kept_[grp] && GroupBytes(grp) <= budget_ - current.sim.peak_bytes;
    };
    // Large graphs: the 2% drop rounds overshoot and most groups fit back,
    // so try them in batches that double while they fit. After one fails,
    // binary-search how much of it fits (window: the eligible groups from
    // `next` known not to fit together), pass over the first group that does
    // not, then double again.
    size_t next = 0, batch = 1, window = 0;
    for (size_t trials = 0; trials < max_trials && next < dropped.size(); ++trials) {
      std::vector<int> taken;
      size_t end = next;
      for (; end < dropped.size() && taken.size() < batch; ++end)
        if (eligible(dropped[end])) taken.push_back(dropped[end]);
      if (taken.empty()) break;
      for (int grp : taken) kept_[grp] = true;
      ScoredPlan trial;
      if (!Score(&trial, /*detailed=*/false)) return false;
      if (trial.sim.peak_bytes <= budget_ && trial.recompute_cost <= current.recompute_cost) {
        current = std::move(trial);
        next = end;
        if (window == 0) {
          batch *= 2;
        } else {
          window = window > taken.size() ? window - taken.size() : 1;
          batch = std::max<size_t>(1, window / 2);
        }
        continue;
      }
      for (int grp : taken) kept_[grp] = false;
      if (taken.size() == 1) {
        next = end;
        window = 0;
        batch = 1;
      } else {
        window = taken.size();
        batch = window / 2;
      }
    }
    return true;
  }

  // While a seed fits, on graphs whose drop rounds take 2% of the groups
  // at the peak or more: whether the rounds, at the rate their lowest peak
  // fell over the last kStallWindow rounds (drops, each-use switches, order
  // flips and pins alike), would reach the budget only after max_rounds (or
  // never: no new low in that window). On the 10k transformer at its
  // tightest budget the 2% drops start raising the peak after 41 rounds,
  // and the cap alone stopped them at 472. (Rounds of one
  // group each plateau for longer before the peak moves: there the test
  // cut the resnet MILP rows' greedy 3-5% short.)
  bool Stalled(const std::vector<int64_t>& lows, int64_t max_rounds) const {
    constexpr size_t kStallWindow = 8;
    if (lows.size() <= kStallWindow) return false;
    const int64_t now = lows.back();
    const double rate =
        static_cast<double>(lows[lows.size() - 1 - kStallWindow] - now) / kStallWindow;
    if (rate <= 0) return true;
    const double needed = static_cast<double>(now - budget_) / rate;
    return static_cast<double>(lows.size()) + needed > static_cast<double>(max_rounds);
  }

  // Sac granularity, when SAC's dispatch costs something: each module the
  // best plan gives a policy, in turn, recomputed whole instead (no policy,
  // no charge), kept when that fits and costs less. At most one program per
  // module.
  bool PlainWraps() {
    if (options_.granularity != Granularity::kSac || !result_->feasible ||
        SacDispatchCost(options_.cost) <= 0)
      return true;
    for (size_t m = 0; m < sac_module_names_.size(); ++m) {
      if (!ModulesWithPolicy(result_->best.keep)[m]) continue;
      SetDecisions(result_->best);
      for (size_t grp = 0; grp < sac_module_of_group_.size(); ++grp)
        if (sac_module_of_group_[grp] == static_cast<int>(m)) kept_[grp] = false;
      ScoredPlan trial;
      if (!Score(&trial, /*detailed=*/false)) return false;  // keeps it when cheaper
    }
    SetDecisions(result_->best);
    return true;
  }

  // Local search from the cheapest plan that fits (see Improve in
  // planner.h). Each move starts from result_->best; Score keeps whichever
  // trial is cheaper and fits, so a move that fails costs only its replays.
  bool Improve() {
    // Op granularity only: a module plan's programs are whole models (the
    // Llama 13B's took twice as long for no gain).
    if (!options_.local_search || options_.granularity != Granularity::kOp || !result_->feasible ||
        groups_.empty() || groups_.size() > kImproveMaxGroups)
      return true;
    const int64_t ops = std::max<int64_t>(1, static_cast<int64_t>(g_.ops.size()));
    const int64_t limit =
        result_->evaluations + std::min<int64_t>(kImproveEvaluations, kImproveOpReplays / ops);
    auto restore_best = [&] { SetDecisions(result_->best); };
    // Keeps back the dropped groups (but `skip`) that fit, most expensive
    // first, or by_density: most cost per byte first (a knapsack's two
    // greedy orders). plan: the current decisions' score.
    auto keep_again = [&](int skip, ScoredPlan plan, bool by_density) -> bool {
      std::vector<int> dropped;
      for (size_t grp = 0; grp < groups_.size(); ++grp)
        if (!kept_[grp] && static_cast<int>(grp) != skip) dropped.push_back(static_cast<int>(grp));
      auto density = [&](int grp) {
        return groups_[grp].cost / static_cast<double>(std::max<int64_t>(1, GroupBytes(grp)));
      };
      std::stable_sort(dropped.begin(), dropped.end(), [&](int a, int b) {
        return by_density ? density(a) > density(b) : groups_[a].cost > groups_[b].cost;
      });
      return KeepBack(dropped, dropped.size(), limit, &plan.sim.peak_bytes, &plan.recompute_cost);
    };
    for (bool improved = true; improved && result_->evaluations < limit;) {
      improved = false;
      const double before = result_->best.recompute_cost;
      const double tolerance = 1e-9 * std::max(1.0, std::abs(before));
      ScoredPlan best;
      restore_best();
      const std::vector<bool> start_kept = kept_, start_each_use = each_use_;
      auto restore_start = [&] {
        kept_ = start_kept;
        each_use_ = start_each_use;
      };
      if (!Score(&best)) return false;  // with what is alive at the peak
      // Drop one more group alive at the peak, then keep again what fits
      // (trades one dearer drop for several cheaper ones).
      std::vector<std::pair<int64_t, int>> at_peak;  // (-bytes there, group)
      for (const auto& [grp, b] : KeptBytesAtPeak(best, -1)) at_peak.emplace_back(-b, grp);
      std::sort(at_peak.begin(), at_peak.end());
      for (const auto& [neg_bytes, grp] : at_peak) {
        if (result_->evaluations >= limit) break;
        for (bool by_density : {false, true}) {
          restore_start();
          kept_[grp] = false;
          ScoredPlan trial;
          if (!Score(&trial, /*detailed=*/false)) return false;
          if (trial.sim.peak_bytes > budget_) break;
          if (!keep_again(grp, std::move(trial), by_density)) return false;
        }
      }
      improved = result_->best.recompute_cost < before - tolerance;
      if (improved) continue;
      // Keep one dropped group, dearest first, drop again at the peak (the
      // greedy's bytes-per-cost rule) until it fits, then keep again.
      std::vector<int> dropped;
      for (size_t grp = 0; grp < groups_.size(); ++grp)
        if (!kept_[grp]) dropped.push_back(static_cast<int>(grp));
      std::stable_sort(dropped.begin(), dropped.end(),
                       [&](int a, int b) { return groups_[a].cost > groups_[b].cost; });
      for (int grp : dropped) {
        if (result_->evaluations >= limit) break;
        restore_start();
        kept_[grp] = true;
        ScoredPlan current;
        if (!Score(&current)) return false;
        bool fits = current.sim.peak_bytes <= budget_;
        for (int drops = 0; !fits && drops < kImproveRedrops && result_->evaluations < limit;
             ++drops) {
          // Units: at op granularity the kept groups at the peak made by
          // one op (one rerun remakes them all; free when that op is rerun
          // already for a dropped output), else each group.
          std::map<int, std::pair<int64_t, std::vector<int>>> units;  // key: (bytes, groups)
          for (const auto& [other, b] : KeptBytesAtPeak(current, grp)) {
            auto& unit = units[UnitKey(other)];
            unit.first += b;
            unit.second.push_back(other);
          }
          const std::vector<int>* pick = nullptr;
          double pick_ratio = -1;
          for (const auto& [key, unit] : units) {
            // Bytes past the excess buy nothing: a cheap unit that covers
            // it beats a dear one that covers it twice.
            const int64_t useful = std::min(unit.first, current.sim.peak_bytes - budget_);
            const double ratio = static_cast<double>(useful) / (UnitCost(key, unit.second) + 1e-12);
            if (ratio > pick_ratio) pick = &unit.second, pick_ratio = ratio;
          }
          if (pick == nullptr) break;
          for (int other : *pick) kept_[other] = false;
          if (!Score(&current)) return false;
          fits = current.sim.peak_bytes <= budget_;
        }
        if (!fits) continue;
        if (!keep_again(grp, std::move(current), /*by_density=*/false)) return false;
      }
      improved = result_->best.recompute_cost < before - tolerance;
    }
    restore_best();
    return true;
  }

  // Keeps back, in `order`, each dropped group whose return keeps the peak
  // within the budget and the cost from rising (keeping more never
  // recomputes more: a guard). First pass: a group whose bytes exceed the
  // headroom would most likely be alive at the peak, so it is skipped
  // unscored (a filter, not a proof; saves a replay). On graphs of at most
  // kImproveMaxGroups groups a second pass scores what the first skipped: a
  // group recomputed from a tensor held only for it returns at no cost in
  // bytes (the 50-op resnet at 90%: the filter left 9 such relu outputs
  // dropped, +8.2% over the MILP's best). Looks at the first max_groups of
  // `order`, and stops once result_->evaluations reaches evaluation_limit.
  // *peak, *cost: the current decisions', updated.
  bool KeepBack(const std::vector<int>& order, size_t max_groups, int64_t evaluation_limit,
                int64_t* peak, double* cost) {
    // Pass 0 skips what is over the headroom; pass 1 (small graphs) scores
    // what is over it then (pass 0's skips, and any whose headroom shrank).
    const int passes = groups_.size() > kImproveMaxGroups ? 1 : 2;
    for (int pass = 0; pass < passes; ++pass) {
      for (size_t i = 0; i < std::min(order.size(), max_groups); ++i) {
        if (result_->evaluations >= evaluation_limit) return true;
        const int grp = order[i];
        const bool roomy = GroupBytes(grp) <= budget_ - *peak;
        if (kept_[grp] || (pass == 0 ? !roomy : roomy)) continue;
        kept_[grp] = true;
        ScoredPlan trial;
        if (!Score(&trial, /*detailed=*/false)) return false;
        if (trial.sim.peak_bytes <= budget_ && trial.recompute_cost <= *cost) {
          *peak = trial.sim.peak_bytes;
          *cost = trial.recompute_cost;
        } else {
          kept_[grp] = false;
        }
      }
    }
    return true;
  }

  // The search's decisions from a scored plan.
  void SetDecisions(const ScoredPlan& plan) {
    kept_ = GroupsKept(plan.keep);
    each_use_ = GroupsEachUse(plan.each_use);
    std::fill(reverse_.begin(), reverse_.end(), false);
    for (size_t o = 0; o < plan.reverse_order.size() && o < reverse_.size(); ++o)
      reverse_[o] = plan.reverse_order[o];
  }

  // Reverses the recomputation order of each of OrderOps run at current's
  // peak in turn, keeping each reversal that lowers the peak (*lower: one
  // did).
  bool OrderFlips(ScoredPlan* current, bool* lower) {
    *lower = false;
    // Only the ops that run from the peak to the next backward op: the
    // recomputation there is what the order changes.
    const std::vector<int> order_ops = OrderOps();
    std::vector<int> near_peak;
    const std::vector<Step>& steps = current->checkpoint.program.steps;
    for (size_t i = std::max(0, current->sim.peak_step); i < steps.size(); ++i) {
      const int o = steps[i].op;
      if (o < 0) continue;
      if (std::find(order_ops.begin(), order_ops.end(), o) != order_ops.end() &&
          std::find(near_peak.begin(), near_peak.end(), o) == near_peak.end())
        near_peak.push_back(o);
      if (g_.ops[o].phase != Phase::kForward) break;
    }
    for (int o : near_peak) {
      reverse_[o] = !reverse_[o];
      ScoredPlan trial;
      if (!Score(&trial)) return false;
      if (trial.sim.peak_bytes < current->sim.peak_bytes) {
        *current = std::move(trial);
        *lower = true;
      } else {
        reverse_[o] = !reverse_[o];
      }
    }
    return true;
  }

  // By group, from a keep vector by tensor.
  std::vector<bool> GroupsKept(const std::vector<bool>& keep) const {
    std::vector<bool> kept(groups_.size(), true);
    for (int t : candidates_)
      if (group_of_[t] >= 0 && !keep[t]) kept[group_of_[t]] = false;
    return kept;
  }

  std::vector<bool> GroupsEachUse(const std::vector<bool>& each_use) const {
    std::vector<bool> out(groups_.size(), false);
    for (int t : candidates_)
      if (group_of_[t] >= 0 && static_cast<size_t>(t) < each_use.size() && each_use[t])
        out[group_of_[t]] = true;
    return out;
  }

  // Of the dropped groups alive at the peak that are held and whose
  // recomputation at each use may differ, the one with the most bytes
  // there (untried); -1 if none.
  int LargestHeldAtPeak(const ScoredPlan& current, const std::vector<bool>& tried) const {
    std::map<int, int64_t> bytes;
    for (const LiveBuffer& lb : current.sim.live_at_peak) {
      int grp = lb.owner >= 0 ? group_of_[lb.owner] : -1;
      if (grp < 0 || kept_[grp] || each_use_[grp] || !each_use_matters_[grp] || tried[grp])
        continue;
      bytes[grp] += lb.bytes;
    }
    int best = -1;
    for (const auto& [grp, b] : bytes)
      if (best < 0 || b > bytes[best]) best = grp;
    return best;
  }

  // Bytes alive at plan's peak by kept group, but `skip`.
  std::map<int, int64_t> KeptBytesAtPeak(const ScoredPlan& plan, int skip) const {
    std::map<int, int64_t> bytes;
    for (const LiveBuffer& lb : plan.sim.live_at_peak) {
      const int grp = lb.owner >= 0 ? group_of_[lb.owner] : -1;
      if (grp >= 0 && grp != skip && kept_[grp]) bytes[grp] += lb.bytes;
    }
    return bytes;
  }

  // Improve's drop unit of a group: its producer op at op granularity (a
  // rerun remakes every output), else the group itself (keys below zero).
  int UnitKey(int grp) const {
    if (options_.granularity != Granularity::kOp) return -1 - grp;
    return g_.tensors[groups_[grp].tensors.front()].producer;
  }

  // What dropping a unit adds to the recompute cost, about: nothing when
  // its op already reruns for an output that is dropped.
  double UnitCost(int key, const std::vector<int>& unit_groups) const {
    if (key < 0) return groups_[unit_groups.front()].cost;
    for (int t : g_.ops[key].outputs)
      if (group_of_[t] >= 0 && !kept_[group_of_[t]]) return 0;
    return costs_[key];
  }

  int64_t GroupBytes(int grp) const {
    int64_t bytes = 0;
    for (int t : groups_[grp].tensors) bytes += g_.OwnedBytes(t);
    return bytes;
  }

  // Of the dropped groups alive at the peak, the one whose first tensor is
  // made midway in op order; -1 if none.
  int MiddleRecomputedGroup(const ScoredPlan& current, const std::vector<bool>& pinned) const {
    std::vector<std::pair<int, int>> at_peak;  // (first producer, group)
    for (const LiveBuffer& lb : current.sim.live_at_peak) {
      int grp = lb.owner >= 0 ? group_of_[lb.owner] : -1;
      if (grp < 0 || kept_[grp] || pinned[grp]) continue;
      int first = g_.tensors[groups_[grp].tensors.front()].producer;
      for (int t : groups_[grp].tensors) first = std::min(first, g_.tensors[t].producer);
      at_peak.emplace_back(first, grp);
    }
    if (at_peak.empty()) return -1;
    std::sort(at_peak.begin(), at_peak.end());
    at_peak.erase(std::unique(at_peak.begin(), at_peak.end()), at_peak.end());
    return at_peak[at_peak.size() / 2].second;
  }

  // The sets users write by hand (sqrt(n) segments, one checkpoint per block
  // at scope depths 1-3) are scored too, so a plan is never dearer than one
  // of them that fits, and never reaches a higher lowest peak. Op
  // granularity only: at module granularity the search covers blocks.
  bool HandWritten() {
    if (options_.granularity != Granularity::kOp) return true;
    std::vector<std::vector<bool>> sets = {SqrtCheckpoints(g_), BlockCheckpoints(g_, 1),
                                           BlockCheckpoints(g_, 2), BlockCheckpoints(g_, 3)};
    for (const std::vector<bool>& keep : sets)
      if (!ScoreSeed(GroupsKept(keep))) return false;
    return true;
  }

  // Scores a seed (by group: kept or not; nothing recomputed at each use)
  // for the result, leaving the search's own decisions as they were.
  bool ScoreSeed(std::vector<bool> groups_kept) {
    std::swap(kept_, groups_kept);
    std::vector<bool> each_use(groups_.size(), false);
    std::swap(each_use_, each_use);
    ScoredPlan plan;
    const bool ok = Score(&plan, /*detailed=*/false);
    std::swap(kept_, groups_kept);
    std::swap(each_use_, each_use);
    return ok;
  }

  // The chain DP's plan (chain_dp.h), scored like any other set. Op
  // granularity only. Unbounded (exact on op chains) up to kChainExactStages
  // stages; on longer chains runs and fronts are bounded.
  bool ChainSeed() {
    if (options_.granularity != Granularity::kOp) return true;
    ChainDpOptions dp;
    ChainPlan chain;
    const int64_t stages = Stages().num_stages;
    // Past 400 stages the bounded DP takes a second or more; unless asked
    // for, it runs only on op chains (elsewhere it drops whole multi-op
    // stages, which the greedy beats) and only up to kChainAloneStages.
    if (stages > 400 && result_->algorithm != PlanAlgorithm::kChain &&
        (stages > kChainAloneStages || !IsOpChain()))
      return true;
    if (stages > kChainExactStages) {
      // Runs of 4 stages, then 16, 64 if nothing fits; fronts of at most
      // 512 buckets, fewer past 10k stages.
      dp.max_front = static_cast<int>(std::clamp<int64_t>(5000000 / stages, 64, 512));
      dp.max_run = 4;
      dp.max_run_limit = 64;
    }
    if (!PlanChain(g_, Stages(), budget_, costs_, options_.accumulation, dp, &chain, err_))
      return false;
    return !chain.found || ScoreSeed(GroupsKept(chain.keep));
  }

  // Sac granularity: the module plan at the same budget, scored as a set of
  // op decisions (an op is dropped when the module plan drops its
  // candidates), so an op-level plan is never dearer than the module plan
  // when both fit.
  bool ModuleSeed() {
    if (options_.granularity != Granularity::kSac) return true;
    PlannerOptions module = options_;
    module.granularity = Granularity::kModule;
    module.progress = nullptr;
    module.stage = nullptr;
    PlanResult by_module;
    return PlanCheckpoints(g_, budget_, module, &by_module, err_) &&
           ScoreSeed(GroupsKept(by_module.best.keep));
  }

  // Module and sac granularity: every module in checkpoint(). Dropping the
  // groups alive at the peak one at a time can stall above a budget that
  // this fits (a wrap's recomputation may raise the peak where it runs).
  bool EveryModuleSeed() {
    if (options_.granularity == Granularity::kOp || groups_.empty()) return true;
    return ScoreSeed(std::vector<bool>(groups_.size(), false));
  }

  const ChainStages& Stages() {
    if (!stages_computed_) stages_ = FindChainStages(g_, options_.accumulation);
    stages_computed_ = true;
    return stages_;
  }

  // Every forward op is a stage of its own.
  bool IsOpChain() {
    int64_t forward = 0;
    for (const Op& op : g_.ops) forward += op.phase == Phase::kForward;
    return Stages().num_stages == forward;
  }

  // Recompute cost with the current decisions, undecided groups kept,
  // without simulating. With
  // orders searched it holds what is recomputed at each use: a held program
  // reruns each op once in any order, and recomputing at each use reruns at
  // least that, so the bound holds for every order.
  double Bound() const {
    const std::vector<int>* groups = RecomputeGroups();
    CheckpointProgram cp = BuildCheckpointProgram(
        g_, KeepVector(), options_.accumulation, groups ? *groups : NoRecomputeGroups(),
        order_search_ ? std::vector<bool>() : EachUseVector());
    double cost = 0;
    for (int o : cp.recomputed_ops) cost += costs_[o];
    return cost;
  }

  bool Exact() {
    // At most kMaxExactEvaluations programs, and about kMaxExactOpReplays
    // op runs replayed in all.
    exact_evaluation_limit_ = std::min<int64_t>(
        kMaxExactEvaluations,
        result_->evaluations +
            kMaxExactOpReplays / std::max<int64_t>(1, static_cast<int64_t>(g_.ops.size())));
    order_.resize(groups_.size());
    for (size_t i = 0; i < groups_.size(); ++i) order_[i] = static_cast<int>(i);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int a, int b) { return groups_[a].cost > groups_[b].cost; });
    std::fill(kept_.begin(), kept_.end(), true);  // undecided ones count as kept
    std::fill(each_use_.begin(), each_use_.end(), false);
    std::fill(reverse_.begin(), reverse_.end(), false);  // leaves try every order
    return Branch(0);
  }

  // Programs in the search space: per group keep or hold, and recompute at
  // each use where that matters (saturates past kMaxLeastPeakPrograms).
  int64_t ProgramCount() const {
    int64_t count = 1;
    for (size_t i = 0; i < groups_.size() && count <= kMaxLeastPeakPrograms; ++i)
      count *= each_use_matters_[i] ? 3 : 2;
    return count;
  }

  // Scores every program of the space when there are at most
  // kMaxLeastPeakPrograms, else every set (2^groups): the least peak,
  // exactly over programs or over sets.
  bool LeastPeak() {
    const size_t n = groups_.size();
    const bool programs = ProgramCount() <= kMaxLeastPeakPrograms;
    bool orders_complete = true;
    std::fill(reverse_.begin(), reverse_.end(), false);
    std::vector<int> digit(n, 0);  // 0 keep, 1 hold, 2 each use
    for (;;) {
      for (size_t i = 0; i < n; ++i) {
        kept_[i] = digit[i] == 0;
        each_use_[i] = digit[i] == 2;
      }
      // Every order too, within about 4 x kMaxLeastPeakPrograms programs.
      if (programs && result_->evaluations < 4 * kMaxLeastPeakPrograms) {
        if (!ScoreOrders()) return false;
      } else {
        ScoredPlan plan;
        if (!Score(&plan, /*detailed=*/false)) return false;
        if (order_search_ && !OrderOps().empty()) orders_complete = false;
      }
      size_t i = 0;
      for (; i < n; ++i) {
        const int radix = programs && each_use_matters_[i] ? 3 : 2;
        if (++digit[i] < radix) break;
        digit[i] = 0;
      }
      if (i == n) break;
    }
    std::fill(each_use_.begin(), each_use_.end(), false);
    if (!orders_complete) result_->search_complete = false;
    return true;
  }

  // The ops whose recomputation order the current decisions make matter:
  // two or more of their inputs' bases dropped.
  std::vector<int> OrderOps() const {
    std::vector<int> ops, bases;
    for (size_t o = 0; o < order_matters_.size(); ++o) {
      if (!order_matters_[o]) continue;
      bases.clear();
      for (int u : g_.ops[o].inputs) {
        const int base = g_.tensors[u].base;
        const int grp = group_of_[base];
        if (grp >= 0 && !kept_[grp] && std::find(bases.begin(), bases.end(), base) == bases.end())
          bases.push_back(base);
      }
      if (bases.size() >= 2) ops.push_back(static_cast<int>(o));
    }
    return ops;
  }

  // Scores the current decisions in every recomputation order of OrderOps
  // (2^ops programs; past kMaxOrderOps, input order only and the search is
  // not complete).
  bool ScoreOrders() {
    const std::vector<int> ops = OrderOps();
    ScoredPlan plan;
    if (ops.size() > kMaxOrderOps) {
      result_->search_complete = false;
      return Score(&plan, /*detailed=*/false);
    }
    bool ok = true;
    for (uint32_t mask = 0; ok && mask < (1u << ops.size()); ++mask) {
      for (size_t i = 0; i < ops.size(); ++i) reverse_[ops[i]] = (mask >> i) & 1;
      ok = Score(&plan, /*detailed=*/false);
    }
    for (int o : ops) reverse_[o] = false;
    return ok;
  }

  bool Branch(size_t i) {
    if (result_->evaluations >= exact_evaluation_limit_) {
      result_->search_complete = false;
      return true;
    }
    if (result_->feasible) {
      double best = result_->best.recompute_cost;
      if (Bound() >= best - 1e-9 * std::max(1.0, std::abs(best))) return true;
    }
    if (i == order_.size()) return ScoreOrders();
    // Keep, hold, then recompute at each use: cost never falls.
    int grp = order_[i];
    kept_[grp] = true;
    if (!Branch(i + 1)) return false;
    kept_[grp] = false;
    bool ok = Branch(i + 1);
    if (ok && each_use_matters_[grp]) {
      each_use_[grp] = true;
      ok = Branch(i + 1);
      each_use_[grp] = false;
    }
    kept_[grp] = true;
    return ok;
  }

  const Graph& g_;
  int64_t budget_;
  const PlannerOptions& options_;
  PlanResult* result_;
  std::string* err_ = nullptr;
  std::vector<double> costs_;
  std::vector<int> candidates_, order_;
  std::vector<Group> groups_;
  std::map<std::string, int> group_index_;
  std::vector<int> group_of_;
  std::vector<int> region_of_;  // by tensor: recompute group (RecomputeGroups)
  // Sac granularity (SacModules): by module, its name and forward ops; by
  // group, its module's index.
  std::vector<std::string> sac_module_names_;
  std::vector<int> sac_module_ops_, sac_module_of_group_;
  std::vector<bool> kept_;              // by group
  std::vector<bool> each_use_;          // by group: when dropped, recomputed at each use
  std::vector<bool> each_use_matters_;  // by group (op granularity only)
  std::vector<bool> order_matters_;     // by op (op granularity only; OrderMatters)
  std::vector<bool> reverse_;           // by op: recompute dead inputs last first
  bool order_search_ = false;           // some op's order can matter
  ScoredPlan lowest_;
  std::vector<std::string> lowest_modules_;
  ChainStages stages_;
  bool stages_computed_ = false;
  int64_t exact_evaluation_limit_ = kMaxExactEvaluations;
};

}  // namespace

bool PlanCheckpoints(const Graph& g, int64_t budget_bytes, const PlannerOptions& options,
                     PlanResult* result, std::string* err) {
  *result = PlanResult();
  Search search(g, budget_bytes, options, result);
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
