// Local search from the cheapest plan that fits (planner.h, Improve).
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "analyzer/plan/search.h"

namespace memplan::plan_search {

bool Search::Improve() {
  // Op granularity only: a module plan's programs are whole models, and
  // its moves there cost more than they find (docs/planning.md, History).
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
        if (!ScoreUnder(&trial, budget_)) return false;
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

std::map<int, int64_t> Search::KeptBytesAtPeak(const ScoredPlan& plan, int skip) const {
  std::map<int, int64_t> bytes;
  for (const LiveBuffer& lb : plan.sim.live_at_peak) {
    const int grp = lb.owner >= 0 ? group_of_[lb.owner] : -1;
    if (grp >= 0 && grp != skip && kept_[grp]) bytes[grp] += lb.bytes;
  }
  return bytes;
}

int Search::UnitKey(int grp) const {
  if (options_.granularity != Granularity::kOp) return -1 - grp;
  return g_.tensors[groups_[grp].tensors.front()].producer;
}

double Search::UnitCost(int key, const std::vector<int>& unit_groups) const {
  if (key < 0) return groups_[unit_groups.front()].cost;
  for (int t : g_.ops[key].outputs)
    if (group_of_[t] >= 0 && !kept_[group_of_[t]]) return 0;
  return costs_[key];
}

}  // namespace memplan::plan_search
