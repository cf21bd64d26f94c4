// The greedy: drop rounds, hold again, keep again (planner.h, Greedy).
#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "analyzer/plan/search.h"

namespace memplan::plan_search {

// With no seed that fits, the drop rounds run up to this many times their
// cap: the lowest peak they meet is the answer, and it keeps falling past
// the cap (Llama-2-70B op graph, 8 ranks, batch 1: 211 GB at 1x, 153 GB at
// 4x, as unbounded).
constexpr int64_t kInfeasibleRounds = 4;

// Second pass: this many rounds without a lower peak end the switches.
constexpr size_t kStalledSwitchRounds = 64;

namespace {
// True when the last `window` rounds met no lower peak than the one before them.
bool NoLowerFor(const std::vector<int64_t>& lows, size_t window) {
  return lows.size() > window && lows[lows.size() - 1 - window] == lows.back();
}
}  // namespace

bool Search::Greedy(ScoredPlan current) {
  const ScoredPlan baseline = current;
  auto fresh_state = [this](bool pin_when_stalled) {
    DropRoundState state;
    state.pinned.assign(groups_.size(), false);
    state.each_use_tried.assign(groups_.size(), false);
    state.pin_when_stalled = pin_when_stalled;
    return state;
  };
  DropRoundState state = fresh_state(false);
  if (!DropRounds(&current, &state)) return false;
  if (current.sim.peak_bytes > budget_ && !result_->feasible) {
    // Nothing fits: once more from the baseline, pinning where the each-use
    // switches stall (on op chains that reaches peaks the switches do not;
    // the lowest peak of both passes is kept).
    SetDecisions(baseline);
    current = baseline;
    state = fresh_state(true);
    if (!DropRounds(&current, &state)) return false;
  }
  if (current.sim.peak_bytes > budget_) {
    if (!result_->feasible) return true;     // infeasible for greedy and the seeds
    FromBestSeed(&current, &state.dropped);  // stuck above the budget where a seed fits
  }
  if (!HoldAgain(&current)) return false;
  return KeepAgain(std::move(state.dropped), &current);
}

bool Search::DropRounds(ScoredPlan* current, DropRoundState* state) {
  const size_t batch_divisor = DropBatchDivisor();
  double max_cost = 0;
  for (double c : costs_) max_cost = std::max(max_cost, c);
  const double epsilon = max_cost * 1e-9 + 1e-12;
  std::vector<int64_t> bytes_at_peak(groups_.size(), 0);
  // Drop rounds stop after about options_.greedy_drop_op_replays op runs
  // (tight budgets can take thousands of rounds of a few groups each).
  const int64_t max_rounds =
      std::max<int64_t>(1, options_.greedy_drop_op_replays /
                               std::max<int64_t>(1, static_cast<int64_t>(g_.ops.size())));
  int64_t rounds = 0;
  std::vector<int64_t>& lows = state->lows;
  while (current->sim.peak_bytes > budget_) {
    ++rounds;
    lows.push_back(lows.empty() ? current->sim.peak_bytes
                                : std::min(current->sim.peak_bytes, lows.back()));
    // While a seed fits, keep again from the cheapest one instead once the
    // rounds pass their cap, cost over kSeedCostFactor times it (they
    // seldom lower the cost: only pins do), or stall.
    if (result_->feasible &&
        (rounds > max_rounds ||
         current->recompute_cost > kSeedCostFactor * result_->best.recompute_cost ||
         (batch_divisor != 0 && Stalled(lows, max_rounds)))) {
      FromBestSeed(current, &state->dropped);
      break;
    }
    // While none fits, kInfeasibleRounds times that cap ends them: the
    // lowest peak met is the answer (infeasible, search_complete false).
    if (!result_->feasible && rounds > kInfeasibleRounds * max_rounds) break;
    std::fill(bytes_at_peak.begin(), bytes_at_peak.end(), 0);
    std::vector<int> touched;
    for (const LiveBuffer& lb : current->sim.live_at_peak) {
      int grp = lb.owner >= 0 ? group_of_[lb.owner] : -1;
      if (grp < 0 || !kept_[grp] || state->pinned[grp]) continue;
      if (bytes_at_peak[grp] == 0) touched.push_back(grp);
      bytes_at_peak[grp] += lb.bytes;
    }
    std::vector<std::pair<double, int>> droppable;  // (bytes per cost, group)
    for (int grp : touched)
      droppable.emplace_back(
          static_cast<double>(bytes_at_peak[grp]) / (groups_[grp].cost + epsilon), grp);
    if (droppable.empty()) {
      if (state->pin_when_stalled && NoLowerFor(lows, kStalledSwitchRounds))
        std::fill(state->each_use_tried.begin(), state->each_use_tried.end(), true);
      bool stuck = false;
      if (!RecomputedPeakRound(current, state, &stuck)) return false;
      if (stuck) break;
      continue;
    }
    std::sort(droppable.begin(), droppable.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    size_t n = batch_divisor == 0 ? 1 : std::max<size_t>(1, droppable.size() / batch_divisor);
    if (batch_divisor != 0 || current->sim.peak_bytes / 4 > budget_) {
      // Large graphs, and any graph while over four times the budget: the best
      // groups whose bytes at the peak cover half the excess (a drop frees
      // at most its bytes); else one group per round.
      const int64_t half_excess = (current->sim.peak_bytes - budget_) / 2;
      int64_t covered = 0;
      size_t cover = 0;
      while (cover < droppable.size() && covered < half_excess)
        covered += bytes_at_peak[droppable[cover++].second];
      n = std::max(n, cover);
    }
    for (size_t i = 0; i < n; ++i) {
      kept_[droppable[i].second] = false;
      state->dropped.push_back(droppable[i].second);
    }
    if (!Score(current)) return false;
  }
  return true;
}

bool Search::RecomputedPeakRound(ScoredPlan* current, DropRoundState* state, bool* stuck) {
  // First recompute the largest of them at each use instead of holding it,
  // while that lowers the peak.
  const int switched = LargestHeldAtPeak(*current, state->each_use_tried);
  if (switched >= 0) {
    state->each_use_tried[switched] = true;
    each_use_[switched] = true;
    ScoredPlan trial;
    if (!ScoreDetailedBelow(&trial, current->sim.peak_bytes)) return false;
    if (trial.sim.peak_bytes < current->sim.peak_bytes)
      *current = std::move(trial);
    else
      each_use_[switched] = false;
    return true;
  }
  // Else recompute some op's dead inputs in the other order, once, where
  // that lowers the peak.
  if (!state->orders_tried) {
    state->orders_tried = true;
    bool lower = false;
    if (!OrderFlips(current, &lower)) return false;
    if (lower) return true;
  }
  // Else keep one of them again for good, the one made midway in the
  // forward, to split the recomputed stretch in two.
  const int pin = MiddleRecomputedGroup(*current, state->pinned);
  if (pin < 0) {
    *stuck = true;
    return true;
  }
  kept_[pin] = true;
  state->pinned[pin] = true;
  return Score(current);
}

void Search::FromBestSeed(ScoredPlan* current, std::vector<int>* dropped) {
  SetDecisions(result_->best);
  *current = result_->best;
  dropped->clear();
  for (size_t grp = 0; grp < groups_.size(); ++grp)
    if (!kept_[grp]) dropped->push_back(static_cast<int>(grp));
}

bool Search::HoldAgain(ScoredPlan* current) {
  for (size_t grp = 0; grp < groups_.size(); ++grp) {
    if (kept_[grp] || !each_use_[grp]) continue;
    each_use_[grp] = false;
    ScoredPlan trial;
    if (!ScoreUnder(&trial, budget_)) return false;
    if (trial.sim.peak_bytes <= budget_ && trial.recompute_cost <= current->recompute_cost)
      *current = std::move(trial);
    else
      each_use_[grp] = true;
  }
  return true;
}

bool Search::KeepAgain(std::vector<int> dropped, ScoredPlan* current) {
  // Most expensive first, within a work bound of about 2e7 op replays (400
  // trials on a 50k-op graph, fewer above).
  std::stable_sort(dropped.begin(), dropped.end(),
                   [&](int a, int b) { return groups_[a].cost > groups_[b].cost; });
  const size_t work_bound = std::max<size_t>(20, 20000000 / std::max<size_t>(1, g_.ops.size()));
  const size_t max_trials = std::min(size_t{400}, work_bound);
  if (DropBatchDivisor() == 0)  // one at a time
    return KeepBack(dropped, max_trials, std::numeric_limits<int64_t>::max(),
                    &current->sim.peak_bytes, &current->recompute_cost);
  // Kept, a group would most likely be alive at the peak: skip it when its
  // bytes exceed the headroom (a filter, not a proof; saves a replay).
  auto eligible = [&](int grp) {
    return !kept_[grp] && GroupBytes(grp) <= budget_ - current->sim.peak_bytes;
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
    if (!ScoreUnder(&trial, budget_)) return false;
    if (trial.sim.peak_bytes <= budget_ && trial.recompute_cost <= current->recompute_cost) {
      *current = std::move(trial);
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

bool Search::Stalled(const std::vector<int64_t>& lows, int64_t max_rounds) const {
  constexpr size_t kStallWindow = 8;
  if (lows.size() <= kStallWindow) return false;
  const int64_t now = lows.back();
  const double rate =
      static_cast<double>(lows[lows.size() - 1 - kStallWindow] - now) / kStallWindow;
  if (rate <= 0) return true;
  const double needed = static_cast<double>(now - budget_) / rate;
  return static_cast<double>(lows.size()) + needed > static_cast<double>(max_rounds);
}

bool Search::KeepBack(const std::vector<int>& order, size_t max_groups, int64_t evaluation_limit,
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
      if (!ScoreUnder(&trial, budget_)) return false;
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

bool Search::OrderFlips(ScoredPlan* current, bool* lower) {
  *lower = false;
  // Only the ops that run from the peak to the next backward op: the
  // recomputation there is what the order changes.
  const std::vector<int> order_ops = OrderOps();
  std::vector<int> near_peak;
  // The search's scores keep no program (ScoreOptions::peak_only): lay it
  // out again.
  const CheckpointProgram built = BuildCheckpointProgram(
      g_, current->keep, ProgramOptions(&current->each_use, &current->reverse_order));
  const std::vector<Step>& steps = built.program.steps;
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
    if (!ScoreDetailedBelow(&trial, current->sim.peak_bytes)) return false;
    if (trial.sim.peak_bytes < current->sim.peak_bytes) {
      *current = std::move(trial);
      *lower = true;
    } else {
      reverse_[o] = !reverse_[o];
    }
  }
  return true;
}

int Search::LargestHeldAtPeak(const ScoredPlan& current, const std::vector<bool>& tried) const {
  std::map<int, int64_t> bytes;
  for (const LiveBuffer& lb : current.sim.live_at_peak) {
    int grp = lb.owner >= 0 ? group_of_[lb.owner] : -1;
    if (grp < 0 || kept_[grp] || each_use_[grp] || !each_use_matters_[grp] || tried[grp]) continue;
    bytes[grp] += lb.bytes;
  }
  int best = -1;
  for (const auto& [grp, b] : bytes)
    if (best < 0 || b > bytes[best]) best = grp;
  return best;
}

int Search::MiddleRecomputedGroup(const ScoredPlan& current,
                                  const std::vector<bool>& pinned) const {
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

}  // namespace memplan::plan_search
