// The sets the search scores before its own: hand-written, chain DP, module
// plans (search.h).
#include <algorithm>
#include <utility>

#include "analyzer/plan/baselines.h"
#include "analyzer/plan/search.h"

namespace memplan::plan_search {

bool Search::HandWritten() {
  if (options_.granularity != Granularity::kOp) return true;
  std::vector<std::vector<bool>> sets = {SqrtCheckpoints(g_), BlockCheckpoints(g_, 1),
                                         BlockCheckpoints(g_, 2), BlockCheckpoints(g_, 3)};
  for (const std::vector<bool>& keep : sets)
    if (!ScoreSeed(GroupsKept(keep))) return false;
  return true;
}

bool Search::ScoreSeed(std::vector<bool> groups_kept) {
  std::swap(kept_, groups_kept);
  std::vector<bool> each_use(groups_.size(), false);
  std::swap(each_use_, each_use);
  ScoredPlan plan;
  const bool ok = Score(&plan, /*detailed=*/false);
  std::swap(kept_, groups_kept);
  std::swap(each_use_, each_use);
  return ok;
}

bool Search::ChainSeed() {
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

bool Search::ModuleSeed() {
  if (options_.granularity != Granularity::kSac) return true;
  PlannerOptions module = options_;
  module.granularity = Granularity::kModule;
  module.progress = nullptr;
  module.stage = nullptr;
  PlanResult by_module;
  return PlanCheckpoints(g_, budget_, module, &by_module, err_) &&
         ScoreSeed(GroupsKept(by_module.best.keep));
}

bool Search::EveryModuleSeed() {
  if (options_.granularity == Granularity::kOp || groups_.empty()) return true;
  return ScoreSeed(std::vector<bool>(groups_.size(), false));
}

}  // namespace memplan::plan_search
