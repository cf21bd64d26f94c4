#include "analyzer/sim/lean_replay.h"

#include <span>

namespace memplan {

namespace {

class LeanRun {
 public:
  LeanRun(const Graph& g, const ProgramLayout& layout, const SimOptions& options,
          LeanReplayScratch* scratch)
      : g_(g), topo_(g.topology), layout_(layout), options_(options), s_(*scratch) {}

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
    const int runs = static_cast<int>(layout_.runs.size());
    int step = 0;
    for (int p = 0; p < runs; ++p, ++step) {
      RunStep(p, step, r);
      if (r->peak_bytes > options_.stop_above) return Stop(p + 1, r);
      const int begin = layout_.free_start[p], end = layout_.free_start[p + 1];
      if (begin == end) continue;
      ++step;
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
    s_.buffers.push_back({topo_.bytes[t], 1});
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
  int64_t live_ = 0;
  int64_t pending_ = 0;
};

}  // namespace

void LeanReplay(const Graph& g, const ProgramLayout& layout, const SimOptions& options,
                SimResult* result, LeanReplayScratch* scratch) {
  LeanRun(g, layout, options, scratch).Run(result);
}

}  // namespace memplan
