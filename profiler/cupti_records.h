// What CUPTI's records say, as pure functions of the records and of the
// executor's runs, so they are tested without a GPU:
//  - which step of which repeat a record belongs to, by its CUPTI tag or,
//    failing that, by time (StepAt, TagByTime);
//  - the per-step live bytes the memory records give (SeriesFromRecords);
//  - whether each allocation record agrees with the size the backend asked
//    for at that address (CheckRecordSizes: the driver may round).
// Times are integer nanoseconds of CUPTI's clock (a double of microseconds
// at CUPTI's epoch values resolves only 0.25 us).
#ifndef MEMPLAN_PROFILER_CUPTI_RECORDS_H_
#define MEMPLAN_PROFILER_CUPTI_RECORDS_H_

#include <cstdint>
#include <vector>

#include "profiler/executor.h"

namespace memplan {

// Which repeat and step a record belongs to; step -1 is the set-up of the
// resident tensors, repeat -1 an untagged record.
struct StepTag {
  int repeat = -1;
  int step = -1;
};

struct MemoryRecord {
  uint64_t ts_ns = 0;
  int64_t delta = 0;  // +bytes for an allocation, -bytes for a release
  uint64_t address = 0;
  bool async = false;  // through the stream-ordered allocator (cudaMallocAsync)
  StepTag tag;
};

// An allocation the backend made, in the order it made them.
struct RequestedAllocation {
  uint64_t address = 0;
  int64_t bytes = 0;
};

// Invariants: matched + unmatched_records = allocation records;
// matched + unmatched_requests = requests; disagree <= matched.
struct RecordSizeCheck {
  int64_t matched = 0;             // allocation records paired with a request at their address
  int64_t disagree = 0;            // of those, whose bytes differ from the request
  int64_t max_abs_diff_bytes = 0;  // the largest |record - request|
  int64_t total_diff_bytes = 0;    // sum of (record - request)
  int64_t unmatched_records = 0;   // allocations no request explains (the runtime's own)
  int64_t unmatched_requests = 0;  // requests no record reported
  int64_t async_records = 0;       // allocation records of the stream-ordered allocator
};

// Pairs the allocation records (delta > 0, in time order) with the requests
// at the same address, first with first.
RecordSizeCheck CheckRecordSizes(const std::vector<RequestedAllocation>& requested,
                                 const std::vector<MemoryRecord>& memory);

// The step of `run` a time falls in: -1 the resident set-up, -2 outside the
// run (before it, after its last step, or in its teardown).
int StepAt(const ExecResult& run, uint64_t ts_ns);
// The repeat and step a time falls in; repeat -1 when outside every run.
StepTag TagByTime(const std::vector<ExecResult>& runs, uint64_t ts_ns);

// Per-step live bytes from the memory records, element-wise maxima over the
// repeats. Invariants: during/after have `steps` entries; correlated +
// by_time + outside = memory.size().
struct RecordSeries {
  int64_t start_bytes = 0;
  std::vector<int64_t> during, after;
  int64_t correlated = 0;  // tagged by CUPTI's external correlation
  int64_t by_time = 0;     // untagged, placed by TagByTime
  int64_t outside = 0;     // in no run (warm-up, teardown, the runtime's own)
};
// False when no record fell inside a run (nothing to measure).
bool SeriesFromRecords(const std::vector<MemoryRecord>& memory, const std::vector<ExecResult>& runs,
                       size_t steps, RecordSeries* out);

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_CUPTI_RECORDS_H_
