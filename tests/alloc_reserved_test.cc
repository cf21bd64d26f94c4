#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/alloc/reserved.h"
#include "analyzer/drivers/analysis.h"
#include "test_util.h"

namespace memplan::alloc {
namespace {

BufferInterval Interval(int64_t bytes, int alloc_step, int free_step) {
  return {-1, bytes, alloc_step, free_step};
}

ReservedReport MustPredict(const std::vector<BufferInterval>& intervals, int num_steps,
                           const Config& config = Config(), int iterations = 2) {
  ReservedReport report;
  std::string err;
  bool ok = PredictReserved(intervals, num_steps, config, iterations, &report, &err);
  INFO(err);
  REQUIRE(ok);
  return report;
}

Config MustParseConf(const std::string& text) {
  Config config;
  std::string err;
  bool ok = ParseAllocConf(text, &config, &err);
  INFO(err);
  REQUIRE(ok);
  return config;
}

// The invariants ReservedReport documents.
void CheckInvariants(const ReservedReport& r) {
  CHECK(r.reserved_peak_bytes >= r.allocated_peak_bytes);
  CHECK(r.reserved_minus_allocated_at_reserved_peak >= 0);
  CHECK(r.reserved_minus_allocated_at_reserved_peak <= r.reserved_peak_bytes);
  CHECK(r.largest_free_block_at_reserved_peak <= r.reserved_minus_allocated_at_reserved_peak);
  REQUIRE(static_cast<int>(r.iteration_reserved_peaks.size()) == r.iterations);
  int64_t max_peak = 0;
  for (int64_t p : r.iteration_reserved_peaks) max_peak = std::max(max_peak, p);
  CHECK(max_peak == r.reserved_peak_bytes);
}

TEST_CASE("alloc reserved: two 5 MiB buffers in sequence reuse one 20 MiB segment") {
  // 5 MiB is a large-pool request below 10 MiB: its segment is kLargeBuffer.
  ReservedReport r =
      MustPredict({Interval(5 * kMiB, 0, 0), Interval(5 * kMiB, 1, 1)}, 2, Config(), 1);
  CheckInvariants(r);
  CHECK(r.allocated_peak_bytes == 5 * kMiB);
  CHECK(r.reserved_peak_bytes == 20 * kMiB);
  CHECK(r.reserved_minus_allocated_at_reserved_peak == 15 * kMiB);
  CHECK(r.largest_free_block_at_reserved_peak == 15 * kMiB);
  CHECK(r.segments == 1);
  CHECK(r.num_alloc_retries == 0);
  CHECK(r.num_ooms == 0);
}

TEST_CASE("alloc reserved: a second iteration does not grow reserved") {
  // A resident 4 MiB weight, a 6 MiB activation freed by step 1, and a 4 MiB
  // gradient alive at the end (freed before the next iteration).
  std::vector<BufferInterval> intervals = {Interval(4 * kMiB, -1, 2), Interval(6 * kMiB, 0, 1),
                                           Interval(4 * kMiB, 1, 2)};
  ReservedReport r = MustPredict(intervals, 2);
  CheckInvariants(r);
  CHECK(r.iterations == 2);
  CHECK(r.iteration_reserved_peaks == std::vector<int64_t>{20 * kMiB, 20 * kMiB});
  CHECK(r.allocated_peak_bytes == 14 * kMiB);
  CHECK(r.segments == 1);
}

TEST_CASE("alloc reserved: requests are rounded, so allocated >= the exact sum") {
  // 100 B rounds to 512 B in a 2 MiB small-pool segment.
  ReservedReport r = MustPredict({Interval(100, 0, 1)}, 1, Config(), 1);
  CHECK(r.allocated_peak_bytes == 512);
  CHECK(r.reserved_peak_bytes == 2 * kMiB);
  CHECK(r.segments == 1);
}

TEST_CASE("alloc reserved: expandable_segments:True lowers a fragmented reserved peak") {
  // 12 MiB then 14 MiB: the cached 12 MiB segment cannot hold the second
  // request, so a second segment is cudaMalloc'd; an expandable segment maps
  // one 20 MiB page and serves both from it.
  std::vector<BufferInterval> intervals = {Interval(12 * kMiB, 0, 0), Interval(14 * kMiB, 1, 1)};
  ReservedReport plain = MustPredict(intervals, 2, Config(), 1);
  CheckInvariants(plain);
  CHECK(plain.allocated_peak_bytes == 14 * kMiB);
  CHECK(plain.reserved_peak_bytes == 26 * kMiB);
  CHECK(plain.reserved_minus_allocated_at_reserved_peak == 12 * kMiB);
  CHECK(plain.segments == 2);

  ReservedReport expandable =
      MustPredict(intervals, 2, MustParseConf("expandable_segments:True"), 1);
  CheckInvariants(expandable);
  CHECK(expandable.allocated_peak_bytes == 14 * kMiB);
  CHECK(expandable.reserved_peak_bytes == 20 * kMiB);
  CHECK(expandable.reserved_peak_bytes < plain.reserved_peak_bytes);
}

TEST_CASE("alloc reserved: an out-of-memory malloc is counted, not an error") {
  Config config;
  config.device_capacity = 20 * kMiB;
  ReservedReport r =
      MustPredict({Interval(12 * kMiB, 0, 1), Interval(12 * kMiB, 0, 1)}, 1, config, 1);
  CHECK(r.num_ooms == 1);
  CHECK(r.reserved_peak_bytes == 12 * kMiB);
}

TEST_CASE("alloc reserved: malformed input is an error naming the problem") {
  ReservedReport r;
  std::string err;
  CHECK_FALSE(PredictReserved({Interval(1, 0, 1)}, 1, Config(), 0, &r, &err));
  CHECK(err.find("iterations") != std::string::npos);
  CHECK_FALSE(PredictReserved({Interval(1, 3, 3)}, 2, Config(), 1, &r, &err));
  CHECK(err.find("interval 0") != std::string::npos);
  CHECK(err.find("alloc_step") != std::string::npos);
  CHECK_FALSE(PredictReserved({Interval(1, 1, 0)}, 2, Config(), 1, &r, &err));
  CHECK(err.find("free_step") != std::string::npos);
  CHECK_FALSE(PredictReserved({Interval(-1, 0, 0)}, 2, Config(), 1, &r, &err));
  CHECK(err.find("bytes") != std::string::npos);
  Config bad;
  bad.min_block_size = 3;
  CHECK_FALSE(PredictReserved({}, 0, bad, 1, &r, &err));
  CHECK(err.find("min_block_size") != std::string::npos);
}

TEST_CASE("alloc reserved: gpt_tiny's baseline, reserved >= allocated >= the simulator's peak") {
  JointGraph jg;
  std::string err;
  bool ok =
      LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &jg, &err);
  INFO(err);
  REQUIRE(ok);
  Analysis a;
  ok = AnalyzeBaseline(jg.graph, AccumulationMode::kInplace, &a, &err);
  INFO(err);
  REQUIRE(ok);
  REQUIRE(PredictBaselineReserved(jg.graph, Config(), "", 2, &a, &err));
  REQUIRE(a.has_reserved);
  const ReservedReport two = a.reserved;
  CheckInvariants(two);
  CHECK(two.reserved_peak_bytes >= two.allocated_peak_bytes);
  CHECK(two.allocated_peak_bytes >= a.sim.peak_bytes);
  CHECK(two.num_ooms == 0);

  REQUIRE(PredictBaselineReserved(jg.graph, Config(), "", 3, &a, &err));
  CheckInvariants(a.reserved);
  CHECK(a.reserved.reserved_peak_bytes == two.reserved_peak_bytes);
  CHECK(a.reserved.allocated_peak_bytes == two.allocated_peak_bytes);
}

}  // namespace
}  // namespace memplan::alloc

namespace memplan::alloc {
namespace {

std::string TraceText(const ReplayTrace& trace) {
  std::string out;
  for (const ReplayEvent& e : trace.events)
    out += std::string(TraceActionName(e.entry.action)) + " " + std::to_string(e.entry.size) +
           " @" + std::to_string(e.entry.address - (int64_t{1} << 32)) + " it" +
           std::to_string(e.iteration) + " s" + std::to_string(e.step) + " i" +
           std::to_string(e.interval) + "\n";
  return out;
}

TEST_CASE("alloc reserved: the trace labels every allocator event with its cause") {
  // A resident 100 B buffer, then a 5 MiB buffer made at step 0 and freed at
  // step 1, then a 1000 B gradient made at step 1 and kept to the end.
  const std::vector<BufferInterval> intervals = {Interval(100, -1, 2), Interval(5 << 20, 0, 1),
                                                 Interval(1000, 1, 2)};
  ReservedReport report;
  ReplayTrace trace;
  std::string err;
  REQUIRE_MESSAGE(PredictReserved(intervals, 2, Config(), 2, &report, &err, &trace), err);
  CHECK(TraceText(trace) ==
        "segment_alloc 2097152 @0 it0 s-1 i0\n"
        "alloc 100 @0 it0 s-1 i0\n"
        "segment_alloc 20971520 @2097152 it0 s0 i1\n"
        "alloc 5242880 @2097152 it0 s0 i1\n"
        "alloc 1000 @512 it0 s1 i2\n"
        "free_requested 5242880 @2097152 it0 s1 i1\n"
        "free_completed 5242880 @2097152 it0 s1 i1\n"
        "free_requested 1000 @512 it0 s2 i2\n"
        "free_completed 1000 @512 it0 s2 i2\n"
        "alloc 5242880 @2097152 it1 s0 i1\n"
        "alloc 1000 @512 it1 s1 i2\n"
        "free_requested 5242880 @2097152 it1 s1 i1\n"
        "free_completed 5242880 @2097152 it1 s1 i1\n");
  REQUIRE(trace.segments_at_end.size() == 2);
  CHECK(trace.segments_at_end[0].is_small);
  CHECK(trace.segments_at_end[0].allocated_size == 512 + 1024);
  CHECK(trace.segments_at_end[1].total_size == 20 << 20);
  CHECK(trace.segments_at_end[1].allocated_size == 0);
  // The trace changes nothing in the report.
  CHECK(report.reserved_peak_bytes == MustPredict(intervals, 2).reserved_peak_bytes);
}

}  // namespace
}  // namespace memplan::alloc
