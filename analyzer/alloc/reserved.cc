#include "analyzer/alloc/reserved.h"

#include <fmt/format.h>

#include <algorithm>

namespace memplan::alloc {
namespace {

// Interval indices grouped by step (counting sort): the ones of step s are
// index[begin[s] .. begin[s + 1]).
struct StepBuckets {
  std::vector<int> begin;
  std::vector<int> index;
};

StepBuckets Bucket(const std::vector<BufferInterval>& intervals, int num_steps, bool by_free) {
  StepBuckets b;
  b.begin.assign(num_steps + 2, 0);
  auto step_of = [&](const BufferInterval& iv) { return by_free ? iv.free_step : iv.alloc_step; };
  for (const BufferInterval& iv : intervals) {
    int s = step_of(iv);
    if (s >= 0 && s < num_steps && (by_free || iv.alloc_step >= 0)) ++b.begin[s + 1];
  }
  for (int s = 0; s <= num_steps; ++s) b.begin[s + 1] += b.begin[s];
  b.index.resize(b.begin[num_steps]);
  std::vector<int> next(b.begin.begin(), b.begin.end() - 1);
  for (int i = 0; i < static_cast<int>(intervals.size()); ++i) {
    int s = step_of(intervals[i]);
    if (s >= 0 && s < num_steps && (by_free || intervals[i].alloc_step >= 0))
      b.index[next[s]++] = i;
  }
  return b;
}

bool CheckIntervals(const std::vector<BufferInterval>& intervals, int num_steps, std::string* err) {
  for (size_t i = 0; i < intervals.size(); ++i) {
    const BufferInterval& iv = intervals[i];
    const char* bad = nullptr;
    if (iv.bytes < 0)
      bad = "bytes < 0";
    else if (iv.alloc_step < -1 || iv.alloc_step >= num_steps)
      bad = "alloc_step outside [-1, num_steps)";
    else if (iv.free_step < std::max(iv.alloc_step, 0) || iv.free_step > num_steps)
      bad = "free_step outside [max(alloc_step, 0), num_steps]";
    if (bad) {
      *err = fmt::format("interval {} (bytes {}, alloc_step {}, free_step {}): {}", i, iv.bytes,
                         iv.alloc_step, iv.free_step, bad);
      return false;
    }
  }
  return true;
}

// Drives the allocator and keeps the peaks the report needs.
class Replayer {
 public:
  Replayer(const Config& config, size_t num_intervals, ReplayTrace* trace)
      : allocator_(config), num_intervals_(static_cast<int64_t>(num_intervals)), trace_(trace) {
    if (trace_ != nullptr) allocator_.set_trace(&entries_);
  }

  void Malloc(int iteration, int step, int interval, int64_t bytes) {
    std::string error;
    const bool ok = allocator_.Malloc(Id(iteration, interval), bytes, &error);
    Label(iteration, step, interval);
    if (!ok) return;  // OOM: counted
    const int64_t reserved = allocator_.stats().reserved_bytes.current;
    iteration_peak_ = std::max(iteration_peak_, reserved);
    if (reserved > reserved_peak_) {
      reserved_peak_ = reserved;
      largest_free_at_peak_ = allocator_.LargestFreeBlock();
    }
  }
  // Frees the buffer unless its malloc failed (then the id is not live).
  void Free(int iteration, int step, int interval) {
    std::string error;
    allocator_.Free(Id(iteration, interval), &error);
    Label(iteration, step, interval);
  }
  // The reserved peak since the last call (at least what is reserved now).
  int64_t TakeIterationPeak() {
    int64_t peak = std::max(iteration_peak_, allocator_.stats().reserved_bytes.current);
    iteration_peak_ = allocator_.stats().reserved_bytes.current;
    return peak;
  }
  const CachingAllocator& allocator() const { return allocator_; }
  int64_t largest_free_at_peak() const { return largest_free_at_peak_; }

 private:
  int64_t Id(int iteration, int interval) const { return iteration * num_intervals_ + interval; }
  // Moves the allocator's new trace entries to the trace, labelled.
  void Label(int iteration, int step, int interval) {
    if (trace_ == nullptr) return;
    for (const TraceEntry& e : entries_) trace_->events.push_back({e, iteration, step, interval});
    entries_.clear();
  }

  CachingAllocator allocator_;
  int64_t num_intervals_;
  int64_t reserved_peak_ = 0;
  int64_t iteration_peak_ = 0;
  int64_t largest_free_at_peak_ = 0;
  ReplayTrace* trace_;
  std::vector<TraceEntry> entries_;
};

}  // namespace

bool PredictReserved(const std::vector<BufferInterval>& intervals, int num_steps,
                     const Config& config, int iterations, ReservedReport* out, std::string* err,
                     ReplayTrace* trace) {
  if (!ValidateConfig(config, err)) return false;
  if (iterations < 1) {
    *err = fmt::format("iterations must be >= 1, found {}", iterations);
    return false;
  }
  if (num_steps < 0) {
    *err = fmt::format("num_steps must be >= 0, found {}", num_steps);
    return false;
  }
  if (!CheckIntervals(intervals, num_steps, err)) return false;

  const StepBuckets mallocs = Bucket(intervals, num_steps, /*by_free=*/false);
  const StepBuckets frees = Bucket(intervals, num_steps, /*by_free=*/true);
  if (trace != nullptr) *trace = ReplayTrace{};
  Replayer replay(config, intervals.size(), trace);
  std::vector<int64_t> iteration_peaks;
  iteration_peaks.reserve(iterations);
  const int n = static_cast<int>(intervals.size());
  for (int i = 0; i < n; ++i)
    if (intervals[i].alloc_step < 0) replay.Malloc(0, -1, i, intervals[i].bytes);
  for (int k = 0; k < iterations; ++k) {
    if (k > 0) {
      for (int i = 0; i < n; ++i)
        if (intervals[i].alloc_step >= 0 && intervals[i].free_step == num_steps)
          replay.Free(k - 1, num_steps, i);
    }
    for (int s = 0; s < num_steps; ++s) {
      for (int j = mallocs.begin[s]; j < mallocs.begin[s + 1]; ++j)
        replay.Malloc(k, s, mallocs.index[j], intervals[mallocs.index[j]].bytes);
      for (int j = frees.begin[s]; j < frees.begin[s + 1]; ++j) {
        const int i = frees.index[j];
        // Resident buffers live under iteration 0's ids and are freed once.
        if (intervals[i].alloc_step >= 0)
          replay.Free(k, s, i);
        else if (k == 0)
          replay.Free(0, s, i);
      }
    }
    iteration_peaks.push_back(replay.TakeIterationPeak());
  }

  const Stats& stats = replay.allocator().stats();
  out->iterations = iterations;
  out->allocated_peak_bytes = stats.allocated_bytes.peak;
  out->reserved_peak_bytes = stats.reserved_bytes.peak;
  out->reserved_minus_allocated_at_reserved_peak = stats.unallocated_at_reserved_peak;
  out->largest_free_block_at_reserved_peak = replay.largest_free_at_peak();
  out->segments = stats.segment.current;
  out->num_alloc_retries = stats.num_alloc_retries;
  out->num_ooms = stats.num_ooms;
  out->iteration_reserved_peaks = std::move(iteration_peaks);
  if (trace != nullptr) trace->segments_at_end = replay.allocator().Segments();
  return true;
}

}  // namespace memplan::alloc
