// What one rank's step (rank_step.h) holds beyond the single-device step:
// a plain struct the reports print.
#ifndef MEMPLAN_ANALYZER_PARALLEL_RANK_STATS_H_
#define MEMPLAN_ANALYZER_PARALLEL_RANK_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace memplan::parallel {

enum class Strategy { kNone, kDdp, kZero1, kFsdp };

inline const char* StrategyName(Strategy s) {
  switch (s) {
    case Strategy::kNone:
      return "none";
    case Strategy::kDdp:
      return "ddp";
    case Strategy::kZero1:
      return "zero1";
    case Strategy::kFsdp:
      return "fsdp";
  }
  return "none";
}

// Invariants: bytes are of the rank's graph; units is empty unless fsdp;
// strategy none means the single-device step (the other fields unset).
struct RankStats {
  Strategy strategy = Strategy::kNone;
  int64_t world_size = 1;
  int64_t rank = 0;
  int64_t parameter_bytes = 0;        // resident parameter bytes on this rank
  int64_t optimizer_state_bytes = 0;  // on this rank
  int64_t bucket_bytes = 0;           // ddp, zero1: gradient buckets
  int64_t buckets = 0;
  bool gradient_as_bucket_view = false;  // ddp, zero1
  bool reshard_after_forward = false;    // fsdp
  std::vector<std::string> units;        // fsdp: the sharded modules, "" the root
};

}  // namespace memplan::parallel

#endif  // MEMPLAN_ANALYZER_PARALLEL_RANK_STATS_H_
