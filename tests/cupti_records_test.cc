// What CUPTI's records say, without a GPU: attribution of records to steps
// (by tag, by integer-nanosecond time), the per-step series, and the check of
// allocation records against the requested sizes.
#include "profiler/cupti_records.h"

#include <doctest/doctest.h>

namespace memplan {
namespace {

// One run at CUPTI-like epoch nanoseconds: resident set-up before step 0,
// steps 0 and 1, then teardown. Step times are relative microseconds.
ExecResult Run(int64_t t0_ns) {
  ExecResult r;
  r.t0_ns = t0_ns;
  r.step_begin_us = {10.0, 20.0};
  r.step_end_us = {15.0, 25.0};
  r.wall_us = 30.0;
  return r;
}

constexpr int64_t kEpoch = 1'764'547'200'123'456'789;  // 2025 in ns: past 2^53

MemoryRecord At(int64_t t0, double us, int64_t delta, uint64_t address = 0) {
  MemoryRecord m;
  m.ts_ns = static_cast<uint64_t>(t0 + static_cast<int64_t>(us * 1000.0));
  m.delta = delta;
  m.address = address;
  return m;
}

TEST_CASE("StepAt places times at nanosecond resolution at CUPTI's epoch values") {
  ExecResult run = Run(kEpoch);
  CHECK(StepAt(run, kEpoch - 1) == -2);      // before the run
  CHECK(StepAt(run, kEpoch) == -1);          // the resident set-up
  CHECK(StepAt(run, kEpoch + 9'999) == -1);  // 1 ns before step 0
  CHECK(StepAt(run, kEpoch + 10'000) == 0);  // step 0 begins
  CHECK(StepAt(run, kEpoch + 15'000) == 0);  // step 0 ends
  CHECK(StepAt(run, kEpoch + 15'001) == 0);  // between steps: the earlier one
  CHECK(StepAt(run, kEpoch + 20'000) == 1);
  CHECK(StepAt(run, kEpoch + 25'001) == -2);  // after the last step: teardown
  CHECK(StepAt(run, kEpoch + 30'001) == -2);  // after the run
}

TEST_CASE("TagByTime picks the repeat whose run holds the time") {
  std::vector<ExecResult> runs = {Run(kEpoch), Run(kEpoch + 100'000)};
  StepTag t = TagByTime(runs, kEpoch + 100'000 + 21'000);
  CHECK(t.repeat == 1);
  CHECK(t.step == 1);
  CHECK(TagByTime(runs, kEpoch + 50'000).repeat == -1);
}

TEST_CASE("SeriesFromRecords: tagged, time-attributed and outside records") {
  std::vector<ExecResult> runs = {Run(kEpoch)};
  std::vector<MemoryRecord> memory;
  MemoryRecord resident = At(kEpoch, 1, 100, 1);
  resident.tag = {0, -1};
  memory.push_back(resident);
  memory.push_back(At(kEpoch, 11, 50, 2));   // untagged, in step 0
  memory.push_back(At(kEpoch, 12, -50, 2));  // untagged, in step 0
  MemoryRecord s1 = At(kEpoch, 21, 30, 3);
  s1.tag = {0, 1};
  memory.push_back(s1);
  memory.push_back(At(kEpoch, 27, -130, 1));  // teardown: outside
  memory.push_back(At(kEpoch, -5, 7, 9));     // warm-up: outside
  RecordSeries s;
  REQUIRE(SeriesFromRecords(memory, runs, 2, &s));
  CHECK(s.correlated == 2);
  CHECK(s.by_time == 2);
  CHECK(s.outside == 2);
  CHECK(s.start_bytes == 100);
  CHECK(s.during == std::vector<int64_t>{150, 130});
  CHECK(s.after == std::vector<int64_t>{100, 130});
}

TEST_CASE("SeriesFromRecords is false when no record falls in a run") {
  std::vector<ExecResult> runs = {Run(kEpoch)};
  RecordSeries s;
  CHECK_FALSE(SeriesFromRecords({At(kEpoch, -5, 7)}, runs, 2, &s));
  CHECK(s.outside == 1);
  CHECK(s.during == std::vector<int64_t>{0, 0});
}

TEST_CASE("CheckRecordSizes pairs records with requests by address, in order") {
  // Address 0x10 is used twice: 1000 then 512 bytes requested; the driver
  // reported 1024 for the first. 0x20 is the runtime's own allocation.
  std::vector<RequestedAllocation> requested = {{0x10, 1000}, {0x10, 512}, {0x30, 64}};
  std::vector<MemoryRecord> memory;
  memory.push_back(At(kEpoch, 1, 1024, 0x10));
  memory.push_back(At(kEpoch, 2, -1024, 0x10));  // releases are not checked
  memory.push_back(At(kEpoch, 3, 512, 0x10));
  MemoryRecord runtime = At(kEpoch, 4, 2 << 20, 0x20);
  runtime.async = true;
  memory.push_back(runtime);
  RecordSizeCheck c = CheckRecordSizes(requested, memory);
  CHECK(c.matched == 2);
  CHECK(c.disagree == 1);
  CHECK(c.max_abs_diff_bytes == 24);
  CHECK(c.total_diff_bytes == 24);
  CHECK(c.unmatched_records == 1);
  CHECK(c.unmatched_requests == 1);  // 0x30: no record
  CHECK(c.async_records == 1);
}

}  // namespace
}  // namespace memplan
