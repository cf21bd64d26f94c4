// Module and sac granularity: module groups, SAC policies and their dispatch
// charge, PlainWraps (search.h).
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/plan/sac_policy.h"
#include "analyzer/plan/search.h"

namespace memplan::plan_search {

void Search::ModuleGroups() {
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

void Search::SacModules(const ModuleRegions& regions,
                        const std::vector<std::string>& module_of_group) {
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

std::vector<bool> Search::ModulesWithPolicy(const std::vector<bool>& keep) const {
  std::vector<int> dropped(sac_module_names_.size(), 0), groups(sac_module_names_.size(), 0);
  for (size_t grp = 0; grp < sac_module_of_group_.size(); ++grp) {
    ++groups[sac_module_of_group_[grp]];
    dropped[sac_module_of_group_[grp]] += !keep[groups_[grp].tensors[0]];
  }
  std::vector<bool> policy(dropped.size());
  for (size_t m = 0; m < dropped.size(); ++m) policy[m] = dropped[m] > 0 && dropped[m] < groups[m];
  return policy;
}

double Search::DispatchCharge(const std::vector<bool>& keep) const {
  const double per_op = SacDispatchCost(options_.cost);
  if (per_op <= 0 || sac_module_names_.empty()) return 0;
  const std::vector<bool> policy = ModulesWithPolicy(keep);
  double charge = 0;
  for (size_t m = 0; m < policy.size(); ++m)
    if (policy[m]) charge += 2.0 * per_op * sac_module_ops_[m];
  return charge;
}

bool Search::PlainWraps() {
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

}  // namespace memplan::plan_search
