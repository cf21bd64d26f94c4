#include "analyzer/sac_policy.h"

#include <unordered_map>
#include <unordered_set>

#include "analyzer/program.h"

namespace memplan {

std::string ScopePrefix(const std::string& scope, int depth) {
  size_t pos = 0;
  for (int d = 0; d < depth; ++d) {
    pos = scope.find('.', pos);
    if (pos == std::string::npos) return scope;
    if (d + 1 < depth) ++pos;
  }
  return scope.substr(0, pos);
}

bool InScope(const std::string& scope, const std::string& module) {
  return scope.size() >= module.size() && scope.compare(0, module.size(), module) == 0 &&
         (scope.size() == module.size() || scope[module.size()] == '.');
}

bool IsReleaseOpType(std::string_view type) {
  return type == kFsdpFreeAllGatherOutput || type == kFsdpPostForward;
}

bool IsViewOpType(std::string_view type) {
  // "aten.view.default" -> "view"; other names as they are.
  std::string_view name = type;
  if (name.substr(0, 5) == "aten.") {
    name.remove_prefix(5);
    name = name.substr(0, name.find('.'));
  }
  static const std::unordered_set<std::string_view> kViews = {
      "view",         "_unsafe_view",     "reshape",   "_reshape_alias", "t",         "transpose",
      "permute",      "expand",           "expand_as", "view_as",        "unsqueeze", "squeeze",
      "split",        "split_with_sizes", "slice",     "select",         "detach",    "alias",
      "as_strided",   "unbind",           "chunk",     "narrow",         "flatten",   "unflatten",
      "movedim",      "diagonal",         "unfold",    "numpy_T",        "mT",        "T",
      "view_as_real", "view_as_complex",  "real",      "imag",           "lift_fresh"};
  return kViews.count(name) > 0;
}

ModuleRegions FindModuleRegions(const Graph& g, int depth) {
  ModuleRegions r;
  r.module_of_op.resize(g.ops.size());
  for (size_t o = 0; o < g.ops.size(); ++o)
    if (!g.ops[o].scope.empty()) r.module_of_op[o] = ScopePrefix(g.ops[o].scope, depth);
  // A shallower scope ("lm" at depth 3, its own ops) that contains other
  // regions ("lm.model.layers") is no region: wrapping it would rerun theirs.
  std::unordered_set<std::string> regions(r.module_of_op.begin(), r.module_of_op.end()), ancestors;
  for (const std::string& m : regions)
    for (size_t pos = m.find('.'); pos != std::string::npos; pos = m.find('.', pos + 1))
      if (regions.count(m.substr(0, pos))) ancestors.insert(m.substr(0, pos));
  // A module that overwrites one of its inputs in place (SiLU(inplace=True)
  // as a module of its own) cannot be checkpointed: checkpoint saves its
  // inputs and finds them changed. Its outputs that are views of a buffer
  // made outside it, by an op that is not a view op, mark it.
  std::unordered_set<std::string> mutating;
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    if (op.phase != Phase::kForward || r.module_of_op[o].empty() || IsViewOpType(op.type)) continue;
    for (int t : op.outputs) {
      const int base = g.tensors[t].base;
      if (base == t) continue;
      const int p = g.tensors[base].producer;
      const bool outside = p >= 0 ? r.module_of_op[p] != r.module_of_op[o]
                                  : g.tensors[base].kind == TensorKind::kInput;
      if (outside) mutating.insert(r.module_of_op[o]);
    }
  }
  for (std::string& m : r.module_of_op)
    if (ancestors.count(m) || mutating.count(m)) m.clear();
  r.escapes.assign(g.tensors.size(), false);
  for (size_t o = 0; o < g.ops.size(); ++o) {
    if (g.ops[o].phase != Phase::kForward || IsReleaseOpType(g.ops[o].type)) continue;
    for (int t : g.ops[o].inputs) {
      int base = g.tensors[t].base;
      for (int u : {t, base}) {
        int p = g.tensors[u].producer;
        if (p >= 0 && r.module_of_op[p] != r.module_of_op[o]) r.escapes[u] = true;
      }
    }
  }
  return r;
}

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
