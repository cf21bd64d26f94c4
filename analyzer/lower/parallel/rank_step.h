// One rank's training step under a data-parallel strategy.
//
// Sees: a finalized joint graph of the single-device step (forward,
// backward, and the optimizer phase when --optimizer added one), ops
// scoped by module. Returns: the step one rank runs, as a joint graph of
// its own, which the simulator, the allocator model, the reports and the
// planners take like any other. Collectives are ops that move no bytes of
// their own beyond what is written here; their time is not modelled.
//
//   ddp    DistributedDataParallel: every rank holds the whole model. The
//          gradients are reduced in flat buckets (the first capped at
//          1 MiB, the rest at bucket_cap_bytes, filled in reverse parameter
//          order as DDP's reducer does), allocated when DDP wraps the model
//          and held for the whole step (resident, kind buffer). Without
//          gradient_as_bucket_view each gradient is copied into its bucket
//          and back: the buckets add the gradients' bytes. With it the
//          gradients are views of the buckets: a backward op's gradient is
//          copied into the bucket and freed, and the optimizer reads the
//          bucket.
//   zero1  ddp, plus torch.distributed.optim.ZeroRedundancyOptimizer: each
//          rank keeps the optimizer state (and runs the update) of its own
//          parameters only: parameters sorted by size, largest first, each
//          to the rank with the fewest elements so far (ties: lowest rank).
//   fsdp   FSDP2 fully_shard on every module at shard_depth scope components
//          (by default the depth of the repeated, numbered blocks: "h.0"),
//          then on the root (parameters no such module owns alone, and those
//          of modules shallower than shard_depth: an embedding, final norm or
//          lm_head beside the blocks): each parameter is sharded on dim 0
//          (ceil(dim0 / world) rows, padded).
//          Before a unit's first forward op one op all-gathers its shards
//          into a flat buffer (world x the padded shards) and one copies it
//          out into the unsharded parameters; FSDP2 frees the flat buffer at
//          the next unit's forward all-gather, the last when the root's
//          forward returns. Forward ops and the views they make of a
//          parameter (weight.t()) read the unsharded copy. A unit's
//          pre-backward runs before the first backward op scoped in its
//          module (the root's: the first backward op outside scope "loss",
//          so before the loss's backward when the model computes its own
//          loss), at the latest at its first backward use of a parameter.
//          With reshard_after_forward (not for the root, as FSDP2's default
//          for it) the copies are freed after their last forward use and
//          gathered again, all of them whether the backward reads them or
//          not, one unit ahead: at the previous unit's pre-backward (FSDP2's
//          backward prefetch; the root prefetches the last block; the flat
//          buffer is then a workspace), and the backward reads twins of the
//          forward's views made from them; without, the forward's copies
//          stay. After the last gradient of a unit is made, its
//          post-backward frees its unsharded copies (the module holds them
//          to there: an embedding's weight, which no backward op reads,
//          too), then one op copies the unsharded gradients into a flat
//          input (world x the padded shards) and reduce-scatters it into
//          sharded ones, which the optimizer reads; the flat input is held
//          until the next unit's post-backward (FSDP2's one retained
//          reduce-scatter buffer), the last to the end of the backward.
//          Optimizer state is sharded like its parameter. With param_dtype
//          (MixedPrecisionPolicy) every floating tensor the step makes is
//          of that dtype, as are the unsharded copies and the flat buffers;
//          each gather also casts the shards (a workspace); the reduce-scatter
//          runs in reduce_dtype (default param_dtype) and its output is cast
//          into sharded gradients of the parameter's dtype.
//   pipeline  one stage of a pipeline (pipeline.h).
//
// Not modelled: FSDP's output_dtype and casts of floating inputs; with
// param_dtype, tensors the model casts back to float32 itself (a Hugging Face
// loss upcasts its logits: the graph, exported in float32, cannot say which);
// a root given reshard_after_forward=True explicitly (FSDP2 then reshards it
// too); NCCL/gloo internal buffers, tensor parallelism, data and pipeline
// parallelism together.
#ifndef MEMPLAN_ANALYZER_LOWER_PARALLEL_RANK_STEP_H_
#define MEMPLAN_ANALYZER_LOWER_PARALLEL_RANK_STEP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/lower/parallel/pipeline.h"
#include "analyzer/lower/parallel/rank_stats.h"

namespace memplan::parallel {

bool ParseStrategy(std::string_view name, Strategy* out);

constexpr int64_t kDdpFirstBucketBytes = int64_t{1} << 20;  // dist._DEFAULT_FIRST_BUCKET_BYTES
constexpr int64_t kDdpBucketCapBytes = int64_t{25} << 20;   // bucket_cap_mb=25

constexpr int kAutoShardDepth = 0;
constexpr int kMaxAutoShardDepth = 8;

struct ParallelOptions {
  Strategy strategy = Strategy::kNone;
  int64_t world_size = 1;
  int64_t rank = -1;                     // zero1: -1 picks the rank with the most optimizer state
  bool gradient_as_bucket_view = false;  // ddp, zero1
  int64_t bucket_cap_bytes = kDdpBucketCapBytes;  // ddp, zero1
  bool reshard_after_forward = true;              // fsdp
  // fsdp: scope components naming a unit (2: "h.0.attn" -> "h.0"; a scope of
  // fewer components, "wte", is the root's); kAutoShardDepth: the shallowest
  // depth with a numbered module ("h.0", "model.layers.0": the repeated blocks
  // users wrap), else the shallowest at which no unit, the root included,
  // holds more than half of the parameter bytes, else 2.
  int shard_depth = kAutoShardDepth;
  // fsdp: the modules (scope prefixes) to shard; empty: every module at
  // shard_depth.
  std::vector<std::string> shard_modules;
  // fsdp: MixedPrecisionPolicy(param_dtype, reduce_dtype); unset: the
  // parameters' own (reduce_dtype unset: the gradients', i.e. param_dtype).
  std::optional<DType> param_dtype;
  std::optional<DType> reduce_dtype;
  // pipeline (pipeline.h): world_size equals pipeline.stages; rank is the
  // stage (-1: the one with the highest peak).
  PipelineOptions pipeline;
};

// The checks on the options alone, before any graph is read: a world size
// below 1, or above 1 with strategy none, or other than the stages of a
// pipeline; a rank outside [0, world).
bool CheckOptions(const ParallelOptions& options, std::string* err);

// Rewrites `joint` into the step of one rank. Errors (exit 2 at the CLI):
// a world size below 1, or above 1 with strategy none; a rank outside
// [0, world); a graph without parameters; zero1 without optimizer state;
// a module in shard_modules that no op of the graph is scoped in.
bool MakeRankStep(const ParallelOptions& options, Graph* joint, RankStats* stats, std::string* err);

}  // namespace memplan::parallel

#endif  // MEMPLAN_ANALYZER_LOWER_PARALLEL_RANK_STEP_H_
