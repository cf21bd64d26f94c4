// Optimizer state: what `--optimizer` adds to a joint graph so the peak
// covers the whole training step (forward, backward, optimizer update).
//
// Per parameter that has a gradient (PyTorch makes state lazily, only for
// parameters that get one), resident tensors of kind optimizer_state:
//   sgd       none
//   momentum  "<p>.momentum_buffer"           1x
//   adam(w)   "<p>.exp_avg", "<p>.exp_avg_sq"  2x
// in the dtype of the weights the optimizer updates: the parameter's, or
// float32 with --master-weights fp32, which also adds "<p>.master" (float32)
// for a parameter stored in a narrower floating type (float16, bfloat16,
// float8). One optimizer-phase op "<p>.<optimizer>_step" per parameter, in
// parameter order, reads the parameter, its gradient and its state and
// updates them in place (no outputs); its type names the implementation that
// torch.optim runs: "<optimizer>_step" (single-tensor, a loop over the
// parameters), "<optimizer>_foreach_step" (multi-tensor) or
// "<optimizer>_fused_step".
//
// Which one: OptimizerImpl::kAuto is torch.optim's default when neither
// foreach= nor fused= is given (torch 2.14/2.15 torch/optim/optimizer.py
// _default_to_fused_or_foreach with use_fused=False: foreach exactly when
// every parameter is on a device of torch/utils/_foreach_utils.py
// _get_foreach_kernels_supported_devices(), which lists cuda but not cpu):
// foreach for a graph whose source.target_device is "cuda", single-tensor
// otherwise.
//
// Workspaces (SetOptimizerWorkspaces; only adam/adamw have any: SGD with or
// without momentum updates in place, nesterov, weight_decay and maximize
// aside). With b(p) the bytes of p's exp_avg_sq:
//   single-tensor (torch/optim/adam.py _single_tensor_adam): per parameter
//     `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`:
//     sqrt's and div's outputs, 2 b(p), while the previous parameter's
//     denom is still referenced (the local is rebound only after the new
//     one is made): workspace 2 b(p) + b(previous updated parameter).
//   foreach (_multi_tensor_adam): per (device, dtype) group, in the order
//     the groups first appear, `exp_avg_sq_sqrt =
//     torch._foreach_sqrt(device_exp_avg_sqs)` copies every exp_avg_sq of
//     the group at once, while the previous group's list is still
//     referenced: the group's first op gets the workspace sum of the
//     group's b + sum of the previous group's b; the others none.
//   fused (_fused_adam): none (torch._fused_adam_ updates in place).
// Not modelled: the 4-byte "step" tensor per parameter (on the CPU unless
// capturable or fused), the 4- to 12-byte scalar wrappers of each op,
// amsgrad, maximize, Adam's non-decoupled weight_decay (a gradient copy per
// parameter, or per group with foreach), nesterov, several param groups.
#ifndef MEMPLAN_ANALYZER_LOWER_OPTIMIZER_STATE_H_
#define MEMPLAN_ANALYZER_LOWER_OPTIMIZER_STATE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "analyzer/ir/graph.h"

namespace memplan {

enum class OptimizerKind { kNone, kSgd, kMomentum, kAdam, kAdamW };
bool ParseOptimizerKind(std::string_view name, OptimizerKind* out);
const char* OptimizerKindName(OptimizerKind k);

// How torch.optim runs the update (foreach=/fused= of the optimizer).
enum class OptimizerImpl { kAuto, kSingleTensor, kForeach, kFused };
// kAuto resolved for a graph's source.target_device: kForeach for "cuda",
// kSingleTensor otherwise; any other value is returned as it is.
OptimizerImpl ResolveOptimizerImpl(OptimizerImpl impl, std::string_view target_device);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kNone;
  bool master_fp32 = false;  // --master-weights fp32
  OptimizerImpl impl = OptimizerImpl::kAuto;
};
// "none", "adam", "adam+master_fp32".
std::string OptimizerLabel(const OptimizerOptions& o);

// What AddOptimizerState added. Invariant: state_bytes is the sum of the
// bytes of the tensors added.
struct OptimizerStats {
  int64_t parameters = 0;                     // parameters with a gradient (and an update op)
  int64_t state_bytes = 0;                    // optimizer_state bytes added
  int64_t master_bytes = 0;                   // of which fp32 master weights
  int64_t workspace_bytes = 0;                // the largest update op's workspace
  OptimizerImpl impl = OptimizerImpl::kAuto;  // the one modelled (never kAuto once added)
};

// Adds the state tensors and update ops to a finalized joint graph (kind
// kNone: nothing). Errors: the graph already has an optimizer phase or
// optimizer state, or an id to add is taken.
bool AddOptimizerState(const OptimizerOptions& options, Graph* joint, OptimizerStats* stats,
                       std::string* err);

// Sets the workspace of every update op AddOptimizerState made (found by
// phase and type) from the ops and state now in the graph, as the header
// comment says, in op order; returns the largest. For a step whose optimizer
// ops or state were changed afterwards, call it after the change, on a
// finalized graph, so the previous parameter and the foreach groups are the
// remaining ones: ZeRO-1 keeps the ops of the rank's parameters, and
// ZeroRedundancyOptimizer's local optimizer updates them in descending numel
// order (stable; torch/distributed/optim/zero_redundancy_optimizer.py
// _partition_parameters), so they should be in that order first; FSDP
// shards the state. Ops of other types keep theirs. Finalize the graph again
// afterwards (it checks the workspaces' sum and lays them out in Topology).
int64_t SetOptimizerWorkspaces(Graph* g);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_LOWER_OPTIMIZER_STATE_H_
