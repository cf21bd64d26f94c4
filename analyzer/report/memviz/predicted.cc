#include "analyzer/report/memviz/predicted.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "analyzer/drivers/analysis.h"

namespace memplan::memviz {
namespace {

using alloc::TraceEntry;

// The frames of an event caused by `interval` at `step` of `iteration`.
std::vector<Frame> FramesOf(const Graph& g, const Program& program, const SimResult& sim,
                            const std::vector<BufferInterval>& intervals, int step, int interval,
                            int iteration, const std::string& graph_file) {
  const int num_steps = static_cast<int>(program.steps.size());
  const BufferInterval& iv = intervals[interval];
  std::string tensor = iv.owner >= 0 ? g.tensors[iv.owner].id : "workspace";
  std::string where, scope = "(top level)";
  if (step < 0) {
    where = "resident (before the step)";
  } else if (step >= num_steps) {
    where = "end of step (zero_grad, loss)";
  } else if (program.steps[step].IsRun()) {
    const Op& op = g.ops[program.steps[step].op];
    const bool recompute = step < static_cast<int>(sim.recompute.size()) && sim.recompute[step];
    where = fmt::format("{} ({}{})", op.id, op.type, recompute ? ", recompute" : "");
    if (!op.scope.empty()) scope = op.scope;
    if (iv.owner < 0) tensor = "workspace of " + op.id;
  } else {
    where = "free";
  }
  return {Frame{where, step, tensor}, Frame{graph_file, iteration, scope}};
}

std::string FrameText(const std::vector<Frame>& frames) {
  std::string out;
  for (size_t i = 0; i < frames.size() && i < 2; ++i) {
    if (i > 0) out += " < ";
    out += fmt::format("{}:{}:{}", frames[i].filename, frames[i].line, frames[i].name);
  }
  return out.empty() ? "(no frames)" : out;
}

}  // namespace

bool PredictSnapshot(const Graph& g, const Program& program, const SimResult& sim,
                     const alloc::Config& config, const std::string& alloc_conf, int iterations,
                     const std::string& graph_file, Snapshot* out, alloc::ReservedReport* report,
                     std::string* err) {
  const std::vector<BufferInterval> intervals = IntervalsWithWorkspaces(g, program, sim);
  const int num_steps = static_cast<int>(program.steps.size());
  alloc::ReplayTrace trace;
  if (!alloc::PredictReserved(intervals, num_steps, config, iterations, report, err, &trace))
    return false;
  report->alloc_conf = alloc_conf;
  *out = Snapshot{};
  out->alloc_conf = alloc_conf;
  out->trace.reserve(trace.events.size());
  // Frames of the blocks live at the end: those of their latest alloc.
  std::unordered_map<int64_t, size_t> live_alloc;  // address -> trace index
  for (const alloc::ReplayEvent& e : trace.events) {
    TraceRecord r;
    r.action = alloc::TraceActionName(e.entry.action);
    r.address = e.entry.address;
    r.size = e.entry.size;
    r.time_us = static_cast<int64_t>(e.iteration) * (num_steps + 2) + e.step + 1;
    if (e.entry.action == TraceEntry::Action::kOom) {
      r.device_free = e.entry.address;
      r.address = 0;
    }
    r.frames = FramesOf(g, program, sim, intervals, e.step, e.interval, e.iteration, graph_file);
    if (e.entry.action == TraceEntry::Action::kAlloc) live_alloc[r.address] = out->trace.size();
    if (e.entry.action == TraceEntry::Action::kFreeCompleted) live_alloc.erase(r.address);
    out->trace.push_back(std::move(r));
  }
  for (const alloc::SegmentInfo& s : trace.segments_at_end) {
    SnapshotSegment seg;
    seg.address = s.address;
    seg.is_small = s.is_small;
    seg.is_expandable = s.is_expandable;
    for (const alloc::BlockInfo& b : s.blocks) {
      SnapshotBlock block;
      block.address = b.address;
      block.size = b.size;
      block.requested_size = b.allocated ? b.requested_size : 0;
      block.state = b.allocated ? "active_allocated" : "inactive";
      if (auto it = live_alloc.find(b.address); b.allocated && it != live_alloc.end())
        block.frames = out->trace[it->second].frames;
      seg.total_size += b.size;
      seg.blocks.push_back(std::move(block));
    }
    out->segments.push_back(std::move(seg));
  }
  return true;
}

std::vector<int64_t> ReservedDuringSteps(const alloc::ReplayTrace& trace, int num_steps) {
  // The bytes an entry adds to what is reserved.
  auto change = [](const TraceEntry& e) -> int64_t {
    switch (e.action) {
      case TraceEntry::Action::kSegmentAlloc:
      case TraceEntry::Action::kSegmentMap:
        return e.size;
      case TraceEntry::Action::kSegmentFree:
      case TraceEntry::Action::kSegmentUnmap:
        return -e.size;
      default:
        return 0;
    }
  };
  std::vector<int64_t> during(std::max(num_steps, 0), -1);
  int last = 0;
  for (const alloc::ReplayEvent& e : trace.events) last = std::max(last, e.iteration);
  int64_t reserved = 0, at_start = 0;  // at_start: before the last iteration
  for (const alloc::ReplayEvent& e : trace.events) {
    if (e.iteration < last) at_start += change(e.entry);
    reserved += change(e.entry);
    if (e.iteration == last && e.step >= 0 && e.step < num_steps)
      during[e.step] = std::max(during[e.step], reserved);
  }
  // Steps without events hold what the step before held (or the start).
  int64_t held = at_start;
  for (int64_t& d : during) {
    if (d < 0) d = held;
    held = d;
  }
  return during;
}

SnapshotCurve CurveOf(const Snapshot& s) {
  SnapshotCurve c;
  for (const SnapshotSegment& seg : s.segments) {
    c.reserved_end += seg.total_size;
    for (const SnapshotBlock& b : seg.blocks)
      if (b.state != "inactive") c.allocated_end += b.requested_size;
  }
  c.segments_end = static_cast<int64_t>(s.segments.size());
  // Walk back from the end state, undoing each entry (memory_viz does the same).
  int64_t allocated = c.allocated_end, reserved = c.reserved_end;
  c.allocated_peak = allocated;
  c.reserved_peak = reserved;
  for (auto it = s.trace.rbegin(); it != s.trace.rend(); ++it) {
    const std::string& a = it->action;
    if (a == "alloc") {
      allocated -= it->size;
      ++c.allocs;
    } else if (a == "free_completed") {
      allocated += it->size;
    } else if (a == "segment_alloc" || a == "segment_map") {
      reserved -= it->size;
    } else if (a == "segment_free" || a == "segment_unmap") {
      reserved += it->size;
    }
    c.allocated_peak = std::max(c.allocated_peak, allocated);
    c.reserved_peak = std::max(c.reserved_peak, reserved);
  }
  return c;
}

bool CompareSnapshots(const Snapshot& measured, const Snapshot& predicted, SnapshotComparison* out,
                      std::string* err) {
  *out = SnapshotComparison{};
  out->measured = CurveOf(measured);
  out->predicted = CurveOf(predicted);
  std::vector<const TraceRecord*> m, p;
  for (const TraceRecord& r : measured.trace)
    if (r.action == "alloc") m.push_back(&r);
  for (const TraceRecord& r : predicted.trace)
    if (r.action == "alloc") p.push_back(&r);
  if (m.empty()) {
    *err =
        "the snapshot's trace has no alloc entry: record it with "
        "torch.cuda.memory._record_memory_history() running before the step";
    return false;
  }
  std::unordered_set<int64_t> predicted_sizes, measured_sizes;
  for (const TraceRecord* r : p) predicted_sizes.insert(r->size);
  int64_t shared = 0;
  for (const TraceRecord* r : m)
    if (measured_sizes.insert(r->size).second) shared += predicted_sizes.count(r->size);
  out->size_overlap = static_cast<double>(shared) / static_cast<double>(measured_sizes.size());
  if (out->size_overlap < kMinSizeOverlap) {
    *err = fmt::format(
        "the snapshot does not record this graph's step: {} of its {} distinct allocation sizes "
        "({:.0f}%) occur in the predicted step; expected at least {:.0f}% (a snapshot recorded "
        "while running this graph's training step)",
        shared, measured_sizes.size(), 100 * out->size_overlap, 100 * kMinSizeOverlap);
    return false;
  }
  auto agreeing = [&](size_t offset) {
    size_t i = 0;
    while (i < m.size() && offset + i < p.size() && m[i]->size == p[offset + i]->size) ++i;
    return i;
  };
  size_t offset = 0, run = agreeing(0);
  int tried = 0;
  for (size_t o = 1; o < p.size() && tried < kMaxAlignmentCandidates; ++o) {
    if (p[o]->size != m[0]->size) continue;
    ++tried;
    if (const size_t r = agreeing(o); r > run) {
      run = r;
      offset = o;
    }
  }
  out->aligned_at_predicted_alloc = static_cast<int64_t>(offset);
  out->matching_allocs = static_cast<int64_t>(run);
  if (run < m.size() && offset + run < p.size()) {
    const TraceRecord& mi = *m[run];
    const TraceRecord& pi = *p[offset + run];
    out->first_divergence = static_cast<int64_t>(run);
    out->measured_size_at_divergence = mi.size;
    out->predicted_size_at_divergence = pi.size;
    out->measured_frame_at_divergence = FrameText(mi.frames);
    out->predicted_frame_at_divergence = FrameText(pi.frames);
  }
  return true;
}

}  // namespace memplan::memviz
