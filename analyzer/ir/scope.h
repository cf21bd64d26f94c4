// Module scopes of a graph: scope prefixes, module regions, and the op types
// that only alias or only release. Shared by SAC policies, the module
// planner and the parallel lowerings.
#ifndef MEMPLAN_ANALYZER_IR_SCOPE_H_
#define MEMPLAN_ANALYZER_IR_SCOPE_H_

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/ir/graph.h"

namespace memplan {

// "h.0.attn.c_attn" at depth 2 -> "h.0"; a scope with fewer components is
// its own prefix.
std::string ScopePrefix(std::string_view scope, int depth);
// Whether `scope` is `module` or inside it, component-wise ("h.0.attn" is in
// "h.0", "h.01" is not).
bool InScope(std::string_view scope, std::string_view module);

// Whether an op type only makes views ("aten.view.default", "transpose"):
// an aliasing output of any other op is an in-place write.
bool IsViewOpType(std::string_view type);

// Whether an op type only ends a buffer's lifetime, as FSDP2's deferred
// free of a unit's all-gather buffer does: reading a module's buffer, it
// makes no output of it (checkpoint() does not save it).
inline constexpr char kFsdpFreeAllGatherOutput[] = "fsdp_free_all_gather_output";
inline constexpr char kFsdpPostForward[] = "fsdp_post_forward";
bool IsReleaseOpType(std::string_view type);

// Module regions at a scope depth: the region of each op ("" when its scope
// is empty, when its region is the ancestor of another: a model's own ops
// at depth 3 beside "lm.model.layers", which wrapping would rerun, or when
// its region writes in place into one of its inputs, which checkpoint
// forbids) and, by tensor, whether a
// forward op of another region (or of none) reads it or a view of it: such a tensor leaves its
// region, and a checkpointed region keeps it (the module's output). Release
// ops (IsReleaseOpType) are no such readers.
struct ModuleRegions {
  std::vector<std::string> module_of_op;
  std::vector<bool> escapes;
};
ModuleRegions FindModuleRegions(const Graph& g, int depth);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IR_SCOPE_H_
