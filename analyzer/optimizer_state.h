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
// float8). One optimizer-phase op "<p>.<optimizer>_step" per parameter reads
// the parameter, its gradient and its state and updates them in place (no
// outputs); adam/adamw's has a workspace of one state tensor (the
// denominator sqrt(v) + eps of torch.optim.Adam's single-tensor path).
#ifndef MEMPLAN_ANALYZER_OPTIMIZER_STATE_H_
#define MEMPLAN_ANALYZER_OPTIMIZER_STATE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "analyzer/graph.h"

namespace memplan {

enum class OptimizerKind { kNone, kSgd, kMomentum, kAdam, kAdamW };
bool ParseOptimizerKind(std::string_view name, OptimizerKind* out);
const char* OptimizerKindName(OptimizerKind k);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kNone;
  bool master_fp32 = false;  // --master-weights fp32
};
// "none", "adam", "adam+master_fp32".
std::string OptimizerLabel(const OptimizerOptions& o);

// What AddOptimizerState added. Invariant: state_bytes is the sum of the
// bytes of the tensors added.
struct OptimizerStats {
  int64_t parameters = 0;       // parameters with a gradient (and an update op)
  int64_t state_bytes = 0;      // optimizer_state bytes added
  int64_t master_bytes = 0;     // of which fp32 master weights
  int64_t workspace_bytes = 0;  // the largest update op's workspace
};

// Adds the state tensors and update ops to a finalized joint graph (kind
// kNone: nothing). Errors: the graph already has an optimizer phase or
// optimizer state, or an id to add is taken.
bool AddOptimizerState(const OptimizerOptions& options, Graph* joint, OptimizerStats* stats,
                       std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_OPTIMIZER_STATE_H_
