#include "analyzer/ir/scope.h"

#include <unordered_map>
#include <unordered_set>

namespace memplan {

std::string ScopePrefix(std::string_view scope, int depth) {
  size_t pos = 0;
  for (int d = 0; d < depth; ++d) {
    pos = scope.find('.', pos);
    if (pos == std::string_view::npos) return std::string(scope);
    if (d + 1 < depth) ++pos;
  }
  return std::string(scope.substr(0, pos));
}

bool InScope(std::string_view scope, std::string_view module) {
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

}  // namespace memplan
