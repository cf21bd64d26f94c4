#include "profiler/cupti_records.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <unordered_map>

namespace memplan {

RecordSizeCheck CheckRecordSizes(const std::vector<RequestedAllocation>& requested,
                                 const std::vector<MemoryRecord>& memory) {
  RecordSizeCheck c;
  std::unordered_map<uint64_t, std::deque<int64_t>> pending;
  for (const RequestedAllocation& r : requested) pending[r.address].push_back(r.bytes);
  for (const MemoryRecord& m : memory) {
    if (m.delta <= 0) continue;
    if (m.async) ++c.async_records;
    auto it = pending.find(m.address);
    if (it == pending.end() || it->second.empty()) {
      ++c.unmatched_records;
      continue;
    }
    int64_t want = it->second.front();
    it->second.pop_front();
    ++c.matched;
    int64_t diff = m.delta - want;
    if (diff != 0) {
      ++c.disagree;
      c.max_abs_diff_bytes = std::max(c.max_abs_diff_bytes, std::abs(diff));
      c.total_diff_bytes += diff;
    }
  }
  for (const auto& [address, left] : pending)
    c.unmatched_requests += static_cast<int64_t>(left.size());
  return c;
}

int StepAt(const ExecResult& run, uint64_t ts_ns) {
  double t = static_cast<double>(static_cast<int64_t>(ts_ns) - run.t0_ns) / 1000.0;
  if (t < 0 || t > run.wall_us) return -2;
  const auto& begin = run.step_begin_us;
  auto it = std::upper_bound(begin.begin(), begin.end(), t);
  int s = static_cast<int>(it - begin.begin()) - 1;
  if (s >= 0 && static_cast<size_t>(s) < run.step_end_us.size() && t > run.step_end_us[s])
    return static_cast<size_t>(s) + 1 == begin.size() ? -2 : s;  // after the last: teardown
  return s;
}

StepTag TagByTime(const std::vector<ExecResult>& runs, uint64_t ts_ns) {
  for (size_t r = 0; r < runs.size(); ++r) {
    int s = StepAt(runs[r], ts_ns);
    if (s >= -1) return {static_cast<int>(r), s};
  }
  return {};
}

bool SeriesFromRecords(const std::vector<MemoryRecord>& memory, const std::vector<ExecResult>& runs,
                       size_t steps, RecordSeries* out) {
  *out = RecordSeries();
  // buckets[repeat][step + 1]: deltas in time order.
  std::vector<std::vector<std::vector<int64_t>>> buckets(
      runs.size(), std::vector<std::vector<int64_t>>(steps + 1));
  for (const MemoryRecord& m : memory) {
    bool tagged = m.tag.repeat >= 0;
    StepTag tag = tagged ? m.tag : TagByTime(runs, m.ts_ns);
    if (tag.repeat < 0 || tag.repeat >= static_cast<int>(runs.size()) || tag.step < -1 ||
        tag.step >= static_cast<int>(steps)) {
      ++out->outside;  // warm-up, teardown, or outside every run
      continue;
    }
    buckets[tag.repeat][tag.step + 1].push_back(m.delta);
    ++(tagged ? out->correlated : out->by_time);
  }
  out->during.assign(steps, 0);
  out->after.assign(steps, 0);
  if (out->correlated + out->by_time == 0) return false;
  for (const auto& by_step : buckets) {
    int64_t live = 0;
    for (int64_t d : by_step[0]) live += d;
    out->start_bytes = std::max(out->start_bytes, live);
    for (size_t s = 0; s < steps; ++s) {
      int64_t during = live;
      for (int64_t d : by_step[s + 1]) {
        live += d;
        during = std::max(during, live);
      }
      out->during[s] = std::max(out->during[s], during);
      out->after[s] = std::max(out->after[s], live);
    }
  }
  return true;
}

}  // namespace memplan
