// What one rank's step (rank_step.h) holds beyond the single-device step:
// a plain struct the reports print.
#ifndef MEMPLAN_ANALYZER_LOWER_PARALLEL_RANK_STATS_H_
#define MEMPLAN_ANALYZER_LOWER_PARALLEL_RANK_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/base/enum_table.h"

namespace memplan::parallel {

enum class Strategy { kNone, kDdp, kZero1, kFsdp, kPipeline };
enum class PipelineSchedule { kGPipe, k1F1B };

// The names ParseStrategy and ParseSchedule (rank_step.h, pipeline.h) accept.
inline constexpr EnumName<Strategy> kStrategyNames[] = {
    {Strategy::kNone, "none"}, {Strategy::kDdp, "ddp"},           {Strategy::kZero1, "zero1"},
    {Strategy::kFsdp, "fsdp"}, {Strategy::kPipeline, "pipeline"},
};
inline constexpr EnumName<PipelineSchedule> kScheduleNames[] = {
    {PipelineSchedule::kGPipe, "gpipe"},
    {PipelineSchedule::k1F1B, "1f1b"},
};

inline const char* ScheduleName(PipelineSchedule s) { return NameOf(kScheduleNames, s, "1f1b"); }

inline const char* StrategyName(Strategy s) { return NameOf(kStrategyNames, s, "none"); }

// Invariants: bytes are of the rank's graph; units is empty unless fsdp;
// stage_starts has one entry per stage (pipeline), in forward order;
// strategy none means the single-device step (the other fields unset).
struct RankStats {
  Strategy strategy = Strategy::kNone;
  int64_t world_size = 1;
  int64_t rank = 0;
  int64_t parameter_bytes = 0;        // resident parameter bytes on this rank
  int64_t optimizer_state_bytes = 0;  // on this rank
  int64_t bucket_bytes = 0;           // ddp, zero1: gradient buckets
  int64_t buckets = 0;
  bool gradient_as_bucket_view = false;   // ddp, zero1
  bool reshard_after_forward = false;     // fsdp
  std::vector<std::string> units;         // fsdp: the sharded modules, "" the root
  std::string param_dtype, reduce_dtype;  // fsdp mixed precision ("" unset)
  // pipeline: rank is the stage.
  int64_t micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  std::vector<std::string> stage_starts;  // each stage's first forward op
  int64_t in_flight = 0;                  // micro-batches whose activations it holds at once
  int64_t received_buffer_bytes = 0;      // its receive buffers, all micro-batches
};

}  // namespace memplan::parallel

#endif  // MEMPLAN_ANALYZER_LOWER_PARALLEL_RANK_STATS_H_
