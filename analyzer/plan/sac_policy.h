// Selective activation checkpointing (SAC) policies from an op-level
// checkpoint set, in the module regions of ir/scope.h.
//
// What it sees: the joint graph, a keep vector by tensor (a checkpoint set,
// checkpoint.h) and the module scopes to wrap. What it returns: per module,
// its forward ops in program order, each to save or to recompute, which is
// what torch.utils.checkpoint.create_selective_checkpoint_contexts takes
// (MUST_SAVE, PREFER_RECOMPUTE) around the module's checkpoint().
//
// Rules, per output. A buffer (an output that is not a view) is saved when
// it is kept (or kept to the end) and read after the forward by its own
// module: by one of the module's backward ops or its recomputation, directly
// or through a view. SAC holds what it saves until the module's
// recomputation consumes it, or to the end of the module's backward when the
// recomputation stops before it (early stop), whereas a checkpoint program
// frees a kept tensor after its last use; what other modules' backward ops
// read, their own autograd holds, and what their recomputations read (a
// block's output, the next block's input), their checkpoint holds. A
// block's output that only the next module reads is thus recomputed: saved,
// it would stay in the cache through the block's backward, since the
// recomputation stops before the block's last op. An op whose outputs are all views or
// eager in-place results takes its base's policy when the base is made in
// the same region (SAC caches a mutated buffer once: an in-place op must not
// be rerun on a cached buffer), else recomputes; view outputs of an op that
// also makes buffers (batch norm's running statistics) follow its buffers.
// SAC decides per op, so a
// plan's policy is per op too (Granularity::kSac decides per op), except
// where eager runs one traced op as several (CPU dropout: the noise and the
// product), which the framework side maps to the outputs. O(ops x arity).
#ifndef MEMPLAN_ANALYZER_PLAN_SAC_POLICY_H_
#define MEMPLAN_ANALYZER_PLAN_SAC_POLICY_H_

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/ir/scope.h"

namespace memplan {

struct SacOp {
  int op = -1;
  bool save = false;               // any output saved
  std::vector<bool> save_outputs;  // by output
};

struct SacRegion {
  std::string module;
  std::vector<SacOp> ops;  // the region's forward ops, in program order
};

// One region per module in `modules` (in that order), each with its forward
// ops at `depth`. keep: by tensor, as the planner's keep vectors;
// recomputed_ops: the forward ops the checkpoint program reruns.
std::vector<SacRegion> SacPolicies(const Graph& g, const std::vector<bool>& keep,
                                   const std::vector<int>& recomputed_ops,
                                   const std::vector<std::string>& modules, int depth);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_PLAN_SAC_POLICY_H_
