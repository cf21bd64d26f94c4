#include "analyzer/sim/lean_replay.h"

#include <algorithm>
#include <span>
#include <utility>

namespace memplan {

namespace {

class LeanRun {
 public:
  // snapshot_step >= -1: stop at that step, with what is alive then.
  LeanRun(const Graph& g, const ProgramLayout& layout, const SimOptions& options,
          LeanReplayScratch* scratch, int snapshot_step = -2)
      : g_(g),
        topo_(g.topology),
        layout_(layout),
        options_(options),
        s_(*scratch),
        snapshot_step_(snapshot_step) {}

  void Run(SimResult* r) {
    *r = SimResult();
    const size_t nt = g_.tensors.size();
    s_.alive.assign(nt, 0);
    s_.buffer_of.resize(nt);
    s_.runs.assign(g_.ops.size(), 0);
    s_.buffers.clear();
    if (options_.accumulating_gradients) CountAccumulators();
    for (size_t t = 0; t < nt; ++t)
      if (topo_.resident[t] && !topo_.IsView(static_cast<int>(t))) Allocate(static_cast<int>(t));
    for (size_t t = 0; t < nt; ++t)
      if (topo_.resident[t] && topo_.IsView(static_cast<int>(t)))
        Alias(static_cast<int>(t), topo_.base[t]);
    r->start_bytes = live_ + pending_;
    r->peak_bytes = r->start_bytes;
    r->peak_step = -1;
    if (snapshot_step_ == -1) return Snapshot(-1, r);
    const int runs = static_cast<int>(layout_.runs.size());
    int step = 0;
    for (int p = 0; p < runs; ++p, ++step) {
      if (step == snapshot_step_) return Snapshot(p, r);
      RunStep(p, step, r);
      if (r->peak_bytes > options_.stop_above) return Stop(p + 1, r);
      const int begin = layout_.free_start[p], end = layout_.free_start[p + 1];
      if (begin == end) continue;
      if (++step == snapshot_step_) return;  // a free step holds no peak
      for (int i = begin; i < end; ++i) Release(layout_.frees[i]);
      if (r->peak_bytes > options_.stop_above) return Stop(p + 1, r);
    }
    r->end_bytes = live_;
  }

 private:
  // The accumulators of the gradients the program makes, alive from the
  // start; each op's first run makes its own (simulator.cc, GradientSteps).
  void CountAccumulators() {
    s_.made_at.assign(g_.ops.size(), 0);
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      const int ti = static_cast<int>(t);
      if (g_.IsView(ti) || !g_.IsParameterGradient(ti)) continue;
      const int p = g_.tensors[t].producer;
      if (p >= 0) s_.made_at[p] += g_.tensors[t].bytes;
    }
    for (int o : layout_.runs)
      if (s_.runs[o]++ == 0) pending_ += s_.made_at[o];
    std::fill(s_.runs.begin(), s_.runs.end(), 0);
  }

  void Allocate(int t) {
    s_.buffer_of[t] = static_cast<int>(s_.buffers.size());
    s_.buffers.push_back({topo_.bytes[t], t, 1});
    s_.alive[t] = 1;
    live_ += topo_.bytes[t];
  }
  void Alias(int t, int of) {
    const int b = s_.buffer_of[of];
    ++s_.buffers[b].refs;
    s_.alive[t] = 1;
    s_.buffer_of[t] = b;
  }
  void Release(int t) {
    LeanReplayScratch::Buffer& b = s_.buffers[s_.buffer_of[t]];
    s_.alive[t] = 0;
    if (--b.refs == 0) live_ -= b.bytes;
  }
  void Charge(int o, SimResult* r) const {
    ++r->recompute_runs;
    if (!options_.op_cost.empty()) r->recompute_cost += options_.op_cost[o];
  }

  void RunStep(int p, int step, SimResult* r) {
    const int o = layout_.runs[p];
    const std::span<const int> outputs = topo_.Outputs(o);
    const int run = ++s_.runs[o];
    const auto [inplace_out, inplace_in] = layout_.takeover[p];
    int64_t fresh = 0, added = 0;
    for (int t : outputs) {
      if (topo_.IsView(t) || t == inplace_out) continue;
      (s_.alive[t] ? fresh : added) += topo_.bytes[t];
    }
    const int64_t during = live_ + added + fresh + topo_.workspace_bytes[o] + pending_;
    if (during > r->peak_bytes) {
      r->peak_bytes = during;
      r->peak_step = step;
    }
    if (run > 1) Charge(o, r);
    if (inplace_out >= 0) {
      s_.alive[inplace_in] = 0;
      s_.alive[inplace_out] = 1;
      s_.buffer_of[inplace_out] = s_.buffer_of[inplace_in];
    }
    for (int t : outputs)
      if (!topo_.IsView(t) && t != inplace_out && !s_.alive[t]) Allocate(t);
    for (int t : outputs)
      if (topo_.IsView(t) && !s_.alive[t]) Alias(t, topo_.alias_of[t]);
    if (run == 1 && options_.accumulating_gradients) pending_ -= s_.made_at[o];
  }

  // What is alive while run p runs, before it does,
  // as simulator.cc's Snapshot lists it and CollectLiveAtPeak adds the
  // accumulators not made before that step (p -1: after start-up).
  void Snapshot(int p, SimResult* r) {
    std::vector<int>& holder = s_.holder;
    holder.assign(s_.buffers.size(), -1);
    for (size_t t = 0; t < s_.alive.size(); ++t) {
      if (!s_.alive[t]) continue;
      int& h = holder[s_.buffer_of[t]];
      if (h < 0 || (topo_.IsView(h) && !topo_.IsView(static_cast<int>(t)))) h = static_cast<int>(t);
    }
    std::vector<LiveBuffer>& out = r->live_at_peak;
    out.clear();
    for (size_t b = 0; b < s_.buffers.size(); ++b)
      if (s_.buffers[b].refs > 0)
        out.push_back({holder[b], s_.buffers[b].owner, -1, s_.buffers[b].bytes});
    const int o = p >= 0 ? layout_.runs[p] : -1;
    if (o >= 0) {
      for (int t : topo_.Outputs(o))
        if (!topo_.IsView(t) && t != layout_.takeover[p].first)
          out.push_back({t, t, -1, topo_.bytes[t]});
      if (topo_.workspace_bytes[o] > 0) out.push_back({-1, -1, o, topo_.workspace_bytes[o]});
    }
    SortLargestFirst(&out);
    r->peak_by_kind = BytesByKind(g_, out);
    if (!options_.accumulating_gradients) return;
    // Made at or after this step: ops of the program that have not run yet.
    std::vector<uint8_t>& in_program = s_.in_program;
    in_program.assign(g_.ops.size(), 0);
    for (int q : layout_.runs) in_program[q] = 1;
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      const int ti = static_cast<int>(t);
      if (g_.IsView(ti) || !g_.IsParameterGradient(ti)) continue;
      const int q = g_.tensors[t].producer;
      if (q < 0 || !in_program[q] || s_.runs[q] > 0) continue;
      out.push_back({ti, ti, -1, g_.tensors[t].bytes});
      r->peak_by_kind[static_cast<int>(g_.tensors[t].kind)] += g_.tensors[t].bytes;
    }
    SortLargestFirst(&out);
  }

  // Stopped: the reruns of the runs from `first` on still count.
  void Stop(int first, SimResult* r) {
    const int runs = static_cast<int>(layout_.runs.size());
    for (int p = first; p < runs; ++p) {
      const int o = layout_.runs[p];
      if (++s_.runs[o] > 1) Charge(o, r);
    }
    r->stopped = true;
  }

  const Graph& g_;
  const Topology& topo_;
  const ProgramLayout& layout_;
  const SimOptions& options_;
  LeanReplayScratch& s_;
  const int snapshot_step_;
  int64_t live_ = 0;
  int64_t pending_ = 0;
};

}  // namespace

void LeanReplay(const Graph& g, const ProgramLayout& layout, const SimOptions& options,
                SimResult* result, LeanReplayScratch* scratch) {
  LeanRun(g, layout, options, scratch).Run(result);
}

void LeanLiveAt(const Graph& g, const ProgramLayout& layout, bool accumulating_gradients, int step,
                SimResult* result, LeanReplayScratch* scratch) {
  SimOptions options;
  options.accumulating_gradients = accumulating_gradients;
  SimResult at;
  LeanRun(g, layout, options, scratch, step).Run(&at);
  result->live_at_peak = std::move(at.live_at_peak);
  result->peak_by_kind = at.peak_by_kind;
}

}  // namespace memplan
