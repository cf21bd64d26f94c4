// The exhaustive optima the planners are held to: over checkpoint sets
// (2^candidates simulations) and over the wider program space of
// checkpoint.h (keep, hold, or recompute at each use where EachUseMatters:
// up to 3^candidates simulations), and over those programs in every
// recomputation order (each op whose dropped inputs number two or more:
// input order or last first). Small graphs only.
#ifndef MEMPLAN_TESTS_EXHAUSTIVE_H_
#define MEMPLAN_TESTS_EXHAUSTIVE_H_

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "analyzer/plan/planner.h"

namespace memplan::testing {

enum class Space { kSets, kPrograms, kOrders };

struct Exhaustive {
  std::vector<int64_t> peaks;
  std::vector<double> costs;
  int64_t min_peak = std::numeric_limits<int64_t>::max();

  Exhaustive(const Graph& g, const std::vector<double>& op_costs, Space space = Space::kSets) {
    const std::vector<int> candidates = CheckpointCandidates(g);
    const std::vector<bool> matters = EachUseMatters(g);
    std::vector<int> digit(candidates.size(), 0);  // 0 keep, 1 hold, 2 each use
    for (;;) {
      std::vector<bool> keep(g.tensors.size(), false), each_use(g.tensors.size(), false);
      for (size_t i = 0; i < candidates.size(); ++i) {
        keep[candidates[i]] = digit[i] == 0;
        each_use[candidates[i]] = digit[i] == 2;
      }
      std::vector<int> order_ops;  // ops reading two or more dropped bases
      if (space == Space::kOrders) {
        for (size_t o = 0; o < g.ops.size(); ++o) {
          std::vector<int> bases;
          for (int u : g.ops[o].inputs) {
            const int base = g.tensors[u].base;
            const bool dropped =
                std::find(candidates.begin(), candidates.end(), base) != candidates.end() &&
                !keep[base];
            if (dropped && std::find(bases.begin(), bases.end(), base) == bases.end())
              bases.push_back(base);
          }
          if (bases.size() >= 2) order_ops.push_back(static_cast<int>(o));
        }
      }
      for (uint32_t mask = 0; mask < (1u << order_ops.size()); ++mask) {
        std::vector<bool> reverse(g.ops.size(), false);
        for (size_t k = 0; k < order_ops.size(); ++k) reverse[order_ops[k]] = (mask >> k) & 1;
        ScoredPlan plan;
        std::string err;
        const ScoreOptions options{.program = {.each_use = &each_use, .reverse_order = &reverse},
                                   .detailed = false};
        REQUIRE(ScoreCheckpointSet(g, keep, op_costs, options, &plan, &err));
        peaks.push_back(plan.sim.peak_bytes);
        costs.push_back(plan.recompute_cost);
        min_peak = std::min(min_peak, plan.sim.peak_bytes);
      }
      size_t i = 0;
      for (; i < candidates.size(); ++i) {
        const int radix = space != Space::kSets && matters[candidates[i]] ? 3 : 2;
        if (++digit[i] < radix) break;
        digit[i] = 0;
      }
      if (i == candidates.size()) break;
    }
  }
  // Least cost of a program that fits, or -1.
  double Optimum(int64_t budget) const {
    double best = -1;
    for (size_t i = 0; i < peaks.size(); ++i)
      if (peaks[i] <= budget && (best < 0 || costs[i] < best)) best = costs[i];
    return best;
  }
};

inline bool Near(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b));
}

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_EXHAUSTIVE_H_
