// One stage of a pipeline-parallel step, as torch.distributed.pipelining
// runs it (PipelineStage + ScheduleGPipe / Schedule1F1B, torch 2.x).
//
// Sees: a finalized joint graph of ONE micro-batch (forward, backward, the
// optimizer phase when --optimizer added one), ops scoped by module. Returns:
// the step of one stage over all micro-batches, as a joint graph of its own,
// which the simulator, the reports and the planners take like any other.
//
// Split. Stages are contiguous runs of forward ops. Stage k > 0 begins at the
// first forward op scoped in split[k-1] (a module); without a split, the cut
// points are the first forward ops of depth-2 modules ("h.2"), chosen to
// balance parameter bytes (the least largest stage; O(stages x modules^2)).
// A backward op runs on the latest stage whose forward tensors or
// parameters it reads; one that reads only gradients, on the stage of its
// scope's forward ops, else of its first input's producer.
//
// Stage program, per micro-batch m (tensors and ops cloned per m):
//  - received activations (made on an earlier stage) and received output
//    gradients (made on a later one) live in buffers the stage allocates
//    once per micro-batch and keeps (resident);
//  - F(m): the stage's forward ops. The tensors it sends (its outputs) stay
//    to the end of B(m), as the stage's fwd_cache holds them;
//  - B(m): the stage's backward ops; parameter gradients of m > 0 are made
//    fresh and added into those of micro-batch 0 (AccumulateGrad), which the
//    optimizer reads; the input gradients it sends stay until the end of
//    B(m+1) under 1F1B (the pending send), to the end of the schedule under
//    GPipe (its send works are waited at the end);
//  - the last stage keeps each micro-batch's model output (the tensors its
//    "loss"-scoped ops read) to the end and concatenates them after the last
//    backward (return_outputs=True, torch's default): a workspace of their
//    bytes. With return_outputs false neither happens.
// The ops that stand for what the runtime holds (pp.backward_done,
// pp.sends_done, pp.merge_outputs) are forward ops that read what it holds:
// no checkpoint plan may recompute a sent activation or a model output.
// Order: GPipe runs F(0..M-1) then B(0..M-1); 1F1B runs min(M, S - s)
// forwards, then alternates B, F, then the remaining Bs. Then the optimizer.
//
// Not modelled: data parallelism across pipelines, interleaved / zero-bubble
// schedules, a model input without a batch dimension (cloned per micro-batch
// like the others), the transfers' time.
#ifndef MEMPLAN_ANALYZER_LOWER_PARALLEL_PIPELINE_H_
#define MEMPLAN_ANALYZER_LOWER_PARALLEL_PIPELINE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/lower/parallel/rank_stats.h"

namespace memplan::parallel {

bool ParseSchedule(std::string_view name, PipelineSchedule* out);

struct PipelineOptions {
  int64_t stages = 1;
  int64_t micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t stage = -1;              // -1: the stage with the highest baseline peak
  std::vector<std::string> split;  // modules where stages 1.. begin; empty: balanced
  bool return_outputs = true;      // step(return_outputs=...): the last stage keeps and merges them
};

// The forward-op index each stage begins at (stage 0 at 0), or false with an
// error naming the module or the stage that would be empty.
bool SplitStages(const Graph& g, const PipelineOptions& options, std::vector<int>* starts,
                 std::string* err);

// Rewrites `g` (one micro-batch) into the step of options.stage. Errors:
// stages or micro-batches below 1, a stage index outside [0, stages), a
// split that leaves a stage empty or names a module no forward op is scoped
// in, a parameter two stages read, a gradient that flows to a later stage.
bool MakePipelineStage(const PipelineOptions& options, Graph* g, RankStats* stats,
                       std::string* err);

}  // namespace memplan::parallel

#endif  // MEMPLAN_ANALYZER_LOWER_PARALLEL_PIPELINE_H_
