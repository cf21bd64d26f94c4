// Branch and bound over the program space, and the least peak below the
// floor (planner.h, Exact).
#include <algorithm>
#include <cmath>

#include "analyzer/plan/search.h"

namespace memplan::plan_search {

double Search::Bound() const {
  const std::vector<bool> each_use = order_search_ ? std::vector<bool>() : EachUseVector();
  const CheckpointProgram cp =
      BuildCheckpointProgram(g_, KeepVector(), ProgramOptions(&each_use, nullptr));
  double cost = 0;
  for (int o : cp.recomputed_ops) cost += costs_[o];
  return cost;
}

bool Search::Exact() {
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

int64_t Search::ProgramCount() const {
  int64_t count = 1;
  for (size_t i = 0; i < groups_.size() && count <= kMaxLeastPeakPrograms; ++i)
    count *= each_use_matters_[i] ? 3 : 2;
  return count;
}

bool Search::LeastPeak() {
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

std::vector<int> Search::OrderOps() const {
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

bool Search::ScoreOrders() {
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

bool Search::Branch(size_t i) {
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

}  // namespace memplan::plan_search
