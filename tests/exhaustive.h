// The exhaustive optimum over checkpoint sets, the oracle the planners are
// held to (2^candidates simulations: small graphs only).
#ifndef MEMPLAN_TESTS_EXHAUSTIVE_H_
#define MEMPLAN_TESTS_EXHAUSTIVE_H_

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "analyzer/planner.h"

namespace memplan::testing {

struct Exhaustive {
  std::vector<int64_t> peaks;
  std::vector<double> costs;
  int64_t min_peak = std::numeric_limits<int64_t>::max();

  Exhaustive(const Graph& g, const std::vector<double>& op_costs) {
    std::vector<int> candidates = CheckpointCandidates(g);
    for (uint32_t mask = 0; mask < (1u << candidates.size()); ++mask) {
      std::vector<bool> keep(g.tensors.size(), false);
      for (size_t i = 0; i < candidates.size(); ++i) keep[candidates[i]] = (mask >> i) & 1;
      ScoredPlan plan;
      std::string err;
      REQUIRE(ScoreCheckpointSet(g, keep, op_costs, AccumulationMode::kInplace, &plan, &err));
      peaks.push_back(plan.sim.peak_bytes);
      costs.push_back(plan.recompute_cost);
      min_peak = std::min(min_peak, plan.sim.peak_bytes);
    }
  }
  // Least cost of a set that fits, or -1.
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
