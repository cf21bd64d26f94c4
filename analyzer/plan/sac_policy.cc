#include "analyzer/plan/sac_policy.h"

#include <unordered_map>
#include <unordered_set>

#include "analyzer/sim/program.h"

namespace memplan {

std::vector<SacRegion> SacPolicies(const Graph& g, const std::vector<bool>& keep,
                                   const std::vector<int>& recomputed_ops,
                                   const std::vector<std::string>& modules, int depth) {
  const ModuleRegions regions = FindModuleRegions(g, depth);
  const std::vector<bool>& kept = KeptToEnd(g);
  // Read again after the forward by the tensor's own region: its backward
  // ops (or ops without a scope) or its recomputation. What other regions'
  // backward ops or recomputations read (a block's output, the next block's
  // input), their autograd or their checkpoint's saved inputs hold, not this
  // region's SAC cache: saved there, it would stay in the cache until this
  // module's backward ends whenever its recomputation stops before it.
  std::vector<bool> read_later(g.tensors.size(), false);
  auto reads = [&](const Op& op, const std::string& region) {
    for (int t : op.inputs)
      for (int u : {t, g.tensors[t].base}) {
        int p = g.tensors[u].producer;
        if (p >= 0 && (region.empty() || regions.module_of_op[p] == region)) read_later[u] = true;
      }
  };
  for (const Op& op : g.ops)
    if (op.phase != Phase::kForward) reads(op, ScopePrefix(op.scope, depth));
  for (int o : recomputed_ops) reads(g.ops[o], regions.module_of_op[o]);
  std::unordered_map<std::string, size_t> index;
  std::vector<SacRegion> out(modules.size());
  for (size_t i = 0; i < modules.size(); ++i) {
    out[i].module = modules[i];
    index.emplace(modules[i], i);
  }
  std::vector<bool> saved(g.tensors.size(), false);  // buffers the policies save
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    if (op.phase != Phase::kForward) continue;
    auto it = index.find(regions.module_of_op[o]);
    if (it == index.end()) continue;
    // Buffers first; views then follow the op's buffers when it has any
    // (batch norm's updated running statistics), else their base's policy
    // when the base is made in the same region.
    bool owns = false, own_save = false;
    for (int t : op.outputs)
      if (g.tensors[t].base == t) {
        owns = true;
        saved[t] = (kept[t] || (static_cast<size_t>(t) < keep.size() && keep[t])) && read_later[t];
        own_save = own_save || saved[t];
      }
    SacOp sac{static_cast<int>(o), false, {}};
    for (int t : op.outputs) {
      const int base = g.tensors[t].base;
      if (base != t) {
        const int p = g.tensors[base].producer;
        saved[t] =
            owns ? own_save
                 : p >= 0 && regions.module_of_op[p] == regions.module_of_op[o] && saved[base];
      }
      sac.save_outputs.push_back(saved[t]);
      sac.save = sac.save || saved[t];
    }
    out[it->second].ops.push_back(std::move(sac));
  }
  return out;
}

}  // namespace memplan
