#include "analyzer/sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>

namespace memplan {
namespace {

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<int> GradientSteps(const Graph& g, const Program& program);

// The accumulators' bytes: by step, what the gradients made there hold
// (*made_at, `steps` entries, from GradientSteps' `made_step`); returns the
// total, alive from the start.
int64_t AccumulatorBytes(const Graph& g, const std::vector<int>& made_step, size_t steps,
                         std::vector<int64_t>* made_at) {
  made_at->assign(steps, 0);
  int64_t total = 0;
  for (size_t t = 0; t < made_step.size(); ++t) {
    if (made_step[t] < 0) continue;
    (*made_at)[made_step[t]] += g.tensors[t].bytes;
    total += g.tensors[t].bytes;
  }
  return total;
}

struct Buffer {
  int owner;
  int64_t bytes;
  int refs;
  int interval;
};

class Replay {
 public:
  Replay(const Graph& g, const Program& p, const SimOptions& o, SimResult* r)
      : g_(g), topo_(g.topology), p_(p), opt_(o), r_(r), kept_(KeptToEnd(g)), lean_(o.peak_only) {}

  // snapshot_step: collect live_at_peak at this step (-1: after start-up).
  // With snapshot_step >= -1, stops right after collecting what is alive
  // at that step (the rest of the result is then partial).
  bool Run(int snapshot_step, std::string* err) {
    err_ = err;
    snapshot_step_ = snapshot_step;
    const size_t nt = g_.tensors.size();
    if (topo_.io_start.size() != g_.ops.size() + 1 || topo_.bytes.size() != nt)
      return Fail(fmt::format(
          "the graph has {} ops and {} tensors, its topology {} and {}: finalize it again after "
          "changing it",
          g_.ops.size(), nt, topo_.io_start.size() - (topo_.io_start.empty() ? 0 : 1),
          topo_.bytes.size()));
    alive_.assign(nt, false);
    buffer_of_.assign(nt, -1);
    gone_at_.assign(nt, -1);
    consumed_at_.assign(nt, -1);
    runs_.assign(g_.ops.size(), 0);
    first_run_.assign(g_.ops.size(), -1);
    buffers_.clear();
    buffers_.reserve(nt + p_.steps.size() / 2);
    live_ = 0;
    *r_ = SimResult();
    if (lean_ && opt_.accumulating_gradients) CountAccumulators();
    if (!lean_) {
      r_->live_during.reserve(p_.steps.size());
      r_->live_after.reserve(p_.steps.size());
      r_->recompute.reserve(p_.steps.size());
    }
    for (size_t t = 0; t < nt; ++t)
      if (topo_.resident[t] && !topo_.IsView(int(t))) Allocate(int(t), -1);
    for (size_t t = 0; t < nt; ++t)
      if (topo_.resident[t] && topo_.IsView(int(t))) Alias(int(t), topo_.base[t]);
    r_->start_bytes = live_ + pending_;
    r_->peak_bytes = r_->start_bytes;
    r_->peak_step = -1;
    if (snapshot_step_ == -1) {
      Snapshot(nullptr, {}, 0);
      return true;
    }
    for (size_t s = 0; s < p_.steps.size(); ++s) {
      step_ = static_cast<int>(s);
      const Step& step = p_.steps[s];
      bool ok = step.IsRun() ? RunStep(step) : FreeStep(step);
      if (!ok) return false;
      if (!made_at_.empty()) pending_ -= made_at_[s];
      if (step_ == snapshot_step_) return true;
      if (lean_ && r_->peak_bytes > opt_.stop_above) {
        CountReruns(s + 1);
        r_->stopped = true;
        return true;
      }
    }
    r_->end_bytes = live_;
    if (opt_.require_complete && !CheckEnd()) return false;
    if (!lean_)
      for (Buffer& b : buffers_)
        if (b.refs > 0) r_->intervals[b.interval].free_step = static_cast<int>(p_.steps.size());
    return true;
  }

 private:
  bool Fail(const std::string& message) {
    *err_ = message;
    return false;
  }
  std::string Where() const {
    const Step& step = p_.steps[step_];
    if (step.IsRun()) return fmt::format("step {} (run \"{}\")", step_, g_.ops[step.op].id);
    return fmt::format("step {} (free)", step_);
  }
  std::string Name(int t) const { return "\"" + g_.tensors[t].id + "\""; }
  std::string WhyDead(int t) const {
    if (consumed_at_[t] >= 0)
      return fmt::format(" (consumed in place at step {})", consumed_at_[t]);
    if (gone_at_[t] >= 0) return fmt::format(" (freed at step {})", gone_at_[t]);
    return g_.tensors[t].producer >= 0 ? " (not produced yet)" : "";
  }

  // One more recompute run of op o, with its cost.
  void ChargeRerun(int o) {
    ++r_->recompute_runs;
    if (!opt_.op_cost.empty()) r_->recompute_cost += opt_.op_cost[o];
  }
  // The recompute runs and cost of the steps from `first` on, unchecked.
  void CountReruns(size_t first) {
    for (size_t s = first; s < p_.steps.size(); ++s) {
      const int o = p_.steps[s].op;
      if (o >= 0 && o < static_cast<int>(runs_.size()) && ++runs_[o] > 1) ChargeRerun(o);
    }
  }

  // Lean replays with accumulating_gradients count the accumulators as they
  // go (AddAccumulators adds them after a full replay): pending_ holds the
  // bytes of the gradients not made before the current step, made_at_ what
  // each step makes.
  void CountAccumulators() {
    pending_ = AccumulatorBytes(g_, GradientSteps(g_, p_), p_.steps.size(), &made_at_);
  }

  int Allocate(int t, int step) {
    int b = static_cast<int>(buffers_.size());
    int64_t bytes = topo_.bytes[t];
    if (!lean_) r_->intervals.push_back({t, bytes, step, -1});
    buffers_.push_back({t, bytes, 1, static_cast<int>(r_->intervals.size()) - 1});
    alive_[t] = true;
    buffer_of_[t] = b;
    live_ += bytes;
    return b;
  }
  void Alias(int t, int of) {
    int b = buffer_of_[of];
    ++buffers_[b].refs;
    alive_[t] = true;
    buffer_of_[t] = b;
  }
  void Release(int t) {
    Buffer& b = buffers_[buffer_of_[t]];
    alive_[t] = false;
    buffer_of_[t] = -1;
    if (--b.refs == 0) {
      live_ -= b.bytes;
      if (!lean_) r_->intervals[b.interval].free_step = step_;
    }
  }

  bool RunStep(const Step& step) {
    if (step.op < 0 || step.op >= static_cast<int>(g_.ops.size()))
      return Fail(fmt::format("step {}: no op with index {}", step_, step.op));
    const int o = step.op;
    const std::span<const int> inputs = topo_.Inputs(o), outputs = topo_.Outputs(o);
    int run = ++runs_[o];
    if (run == 1) first_run_[o] = step_;
    bool recompute = run > 1;
    if (recompute && !topo_.forward[o])
      return Fail(
          fmt::format("{}: {} op \"{}\" already ran at step {}; expected it to run "
                      "exactly once",
                      Where(), PhaseName(g_.ops[o].phase), g_.ops[o].id, first_run_[o]));
    for (int t : inputs)
      if (!alive_[t])
        return Fail(fmt::format("{}: input {} is not alive{}", Where(), Name(t), WhyDead(t)));

    // In-place takeovers.
    // In-place lists hold a pair or two: plain vectors, reused across steps.
    std::vector<int>& taken_by = taken_by_;
    std::vector<int>& inplace_outs = inplace_outs_;
    taken_by.clear();
    inplace_outs.clear();
    for (auto [out, in] : step.inplace) {
      bool is_out = std::count(outputs.begin(), outputs.end(), out) > 0;
      bool is_in = std::count(inputs.begin(), inputs.end(), in) > 0;
      if (!is_out || !is_in)
        return Fail(
            fmt::format("{}: in-place {} <- {}: expected an output and an input of the "
                        "op",
                        Where(), Name(out), Name(in)));
      if (g_.IsView(out) || g_.IsView(in))
        return Fail(fmt::format("{}: in-place {} <- {}: views cannot take over or give a buffer",
                                Where(), Name(out), Name(in)));
      if (g_.tensors[out].bytes != g_.tensors[in].bytes)
        return Fail(fmt::format("{}: in-place {} <- {}: sizes differ ({} vs {} bytes)", Where(),
                                Name(out), Name(in), g_.tensors[out].bytes, g_.tensors[in].bytes));
      if (kept_[in])
        return Fail(fmt::format("{}: in-place {} <- {}: {} must stay alive to the end", Where(),
                                Name(out), Name(in), Name(in)));
      if (buffers_[buffer_of_[in]].refs != 1)
        return Fail(
            fmt::format("{}: in-place {} <- {}: the buffer of {} is shared with a live "
                        "view",
                        Where(), Name(out), Name(in), Name(in)));
      if (Contains(inplace_outs, out) || Contains(taken_by, in))
        return Fail(fmt::format("{}: in-place {} <- {}: each output and input may appear once",
                                Where(), Name(out), Name(in)));
      if (alive_[out])
        return Fail(fmt::format("{}: in-place {} <- {}: {} is already alive", Where(), Name(out),
                                Name(in), Name(out)));
      taken_by.push_back(in);
      inplace_outs.push_back(out);
    }

    // New buffers (outputs not taken over, not views), fresh copies of
    // outputs that are still alive, and workspace.
    int64_t fresh = 0, added = 0;
    std::vector<int>& fresh_outs = fresh_outs_;
    fresh_outs.clear();
    for (int t : outputs) {
      if (topo_.IsView(t) || Contains(inplace_outs, t)) continue;
      if (alive_[t]) {
        fresh += topo_.bytes[t];
        fresh_outs.push_back(t);
      } else {
        added += topo_.bytes[t];
      }
    }
    const int64_t workspace = topo_.workspace_bytes[o];
    int64_t during = live_ + added + fresh + workspace + pending_;
    if (!lean_) {
      r_->live_during.push_back(during);
      r_->recompute.push_back(recompute);
    }
    if (during > r_->peak_bytes) {
      r_->peak_bytes = during;
      r_->peak_step = step_;
    }
    if (snapshot_step_ == step_) Snapshot(&g_.ops[o], inplace_outs, workspace);
    if (recompute) ChargeRerun(o);

    // Apply: fresh copies vanish; in-place outputs take their inputs' buffers.
    for (auto [out, in] : step.inplace) {
      int b = buffer_of_[in];
      alive_[in] = false;
      buffer_of_[in] = -1;
      consumed_at_[in] = step_;
      alive_[out] = true;
      buffer_of_[out] = b;
      gone_at_[out] = -1;
      consumed_at_[out] = -1;
    }
    for (int t : outputs) {
      if (topo_.IsView(t) || Contains(inplace_outs, t) || alive_[t]) continue;
      Allocate(t, step_);
      gone_at_[t] = consumed_at_[t] = -1;
    }
    if (!lean_)
      for (int t : fresh_outs) r_->intervals.push_back({t, topo_.bytes[t], step_, step_});
    for (int t : outputs) {
      if (!topo_.IsView(t) || alive_[t]) continue;
      int parent = topo_.alias_of[t];
      if (!alive_[parent])
        return Fail(fmt::format("{}: view {} of {}: {} is not alive{}", Where(), Name(t),
                                Name(parent), Name(parent), WhyDead(parent)));
      Alias(t, parent);
      gone_at_[t] = consumed_at_[t] = -1;
    }
    if (!lean_) r_->live_after.push_back(live_);
    return true;
  }

  bool FreeStep(const Step& step) {
    if (!lean_) {
      r_->live_during.push_back(live_);
      r_->recompute.push_back(false);
    }
    for (int t : step.free) {
      if (t < 0 || t >= static_cast<int>(g_.tensors.size()))
        return Fail(fmt::format("{}: no tensor with index {}", Where(), t));
      if (topo_.resident[t])
        return Fail(
            fmt::format("{}: {} is {} and stays alive to the end; expected a "
                        "non-resident tensor",
                        Where(), Name(t), TensorKindName(g_.tensors[t].kind)));
      if (!alive_[t])
        return Fail(fmt::format("{}: {} is not alive{}", Where(), Name(t), WhyDead(t)));
      Release(t);
      gone_at_[t] = step_;
    }
    if (!lean_) r_->live_after.push_back(live_);
    return true;
  }

  bool CheckEnd() {
    for (size_t o = 0; o < g_.ops.size(); ++o)
      if (runs_[o] == 0 && g_.ops[o].phase == Phase::kBackward)
        return Fail(
            fmt::format("backward op \"{}\" never runs; expected every backward op to run "
                        "exactly once",
                        g_.ops[o].id));
    for (int t : g_.outputs)
      if (!alive_[t])
        return Fail(fmt::format("graph output {} is not alive at the end{}", Name(t), WhyDead(t)));
    for (size_t t = 0; t < g_.tensors.size(); ++t)
      if (kept_[t] && !alive_[t] && g_.IsParameterGradient(int(t)))
        return Fail(fmt::format("parameter gradient {} is not alive at the end{}", Name(int(t)),
                                WhyDead(int(t))));
    return true;
  }

  // Everything alive now, plus (during a run step) the op's new outputs and
  // its workspace.
  void Snapshot(const Op* op, const std::vector<int>& inplace_outs, int64_t workspace) {
    std::vector<int> holder(buffers_.size(), -1);
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      if (!alive_[t]) continue;
      int b = buffer_of_[t];
      int& h = holder[b];
      if (h < 0 || (g_.IsView(h) && !g_.IsView(int(t)))) h = static_cast<int>(t);
    }
    auto& out = r_->live_at_peak;
    for (size_t b = 0; b < buffers_.size(); ++b)
      if (buffers_[b].refs > 0)
        out.push_back({holder[b], buffers_[b].owner, -1, buffers_[b].bytes});
    if (op != nullptr) {
      for (int t : op->outputs)
        if (!g_.IsView(t) && !Contains(inplace_outs, t))
          out.push_back({t, t, -1, g_.tensors[t].bytes});
      if (workspace > 0) out.push_back({-1, -1, p_.steps[step_].op, workspace});
    }
    SortLargestFirst(&out);
    r_->peak_by_kind = BytesByKind(g_, out);
  }

  const Graph& g_;
  const Topology& topo_;
  const Program& p_;
  const SimOptions& opt_;
  SimResult* r_;
  const std::vector<bool>& kept_;
  const bool lean_;  // SimOptions::peak_only
  std::string* err_ = nullptr;
  int snapshot_step_ = -2;
  int step_ = -1;
  int64_t live_ = 0;
  int64_t pending_ = 0;           // CountAccumulators'
  std::vector<int64_t> made_at_;  // by step; empty unless lean and accumulating
  std::vector<uint8_t> alive_;    // bytes, not bits: tested and set at every step
  std::vector<int> buffer_of_, gone_at_, consumed_at_, runs_, first_run_;
  std::vector<Buffer> buffers_;
  std::vector<int> taken_by_, inplace_outs_, fresh_outs_;  // RunStep's, per step
};

// By tensor: the step of the first run of the op making each (non-view)
// parameter gradient, or -1 (not a gradient, or never made).
std::vector<int> GradientSteps(const Graph& g, const Program& program) {
  std::vector<int> first_run(g.ops.size(), -1);
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step& step = program.steps[s];
    if (step.IsRun() && first_run[step.op] < 0) first_run[step.op] = static_cast<int>(s);
  }
  std::vector<int> at(g.tensors.size(), -1);
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const int ti = static_cast<int>(t);
    if (g.IsView(ti) || !g.IsParameterGradient(ti)) continue;
    const int p = g.tensors[t].producer;
    at[t] = p >= 0 ? first_run[p] : -1;
  }
  return at;
}

// SimOptions::accumulating_gradients on a finished replay: live_during,
// live_after, start_bytes and the peak.
void AddAccumulators(const Graph& g, const std::vector<int>& made_step, SimResult* r) {
  const size_t n = r->live_during.size();
  std::vector<int64_t> made_at;
  int64_t pending = AccumulatorBytes(g, made_step, n + 1, &made_at);
  r->start_bytes += pending;
  r->peak_bytes = r->start_bytes;
  r->peak_step = -1;
  for (size_t s = 0; s < n; ++s) {
    r->live_during[s] += pending;  // accumulator and fresh copy
    if (r->live_during[s] > r->peak_bytes) {
      r->peak_bytes = r->live_during[s];
      r->peak_step = static_cast<int>(s);
    }
    pending -= made_at[s];
    r->live_after[s] += pending;
  }
}

}  // namespace

void SortLargestFirst(std::vector<LiveBuffer>* live) {
  std::stable_sort(live->begin(), live->end(), [](const LiveBuffer& a, const LiveBuffer& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.tensor < b.tensor;
  });
}

std::array<int64_t, kNumTensorKinds> BytesByKind(const Graph& g,
                                                 const std::vector<LiveBuffer>& live) {
  std::array<int64_t, kNumTensorKinds> bytes{};
  for (const LiveBuffer& lb : live) {
    const TensorKind k = lb.owner >= 0 ? g.tensors[lb.owner].kind : TensorKind::kTemporary;
    bytes[static_cast<int>(k)] += lb.bytes;
  }
  return bytes;
}

bool Simulate(const Graph& g, const Program& program, const SimOptions& options, SimResult* result,
              std::string* err) {
  {
    Replay replay(g, program, options, result);
    if (!replay.Run(-2, err)) return false;
  }
  // A lean replay counted the accumulators itself.
  if (options.accumulating_gradients && !options.peak_only)
    AddAccumulators(g, GradientSteps(g, program), result);
  if (!options.collect_live_at_peak) return true;
  return CollectLiveAtPeak(g, program, options, result, err);
}

bool CollectLiveAtPeak(const Graph& g, const Program& program, const SimOptions& options,
                       SimResult* result, std::string* err) {
  // A second replay, up to the peak, collects what is alive then.
  SimResult at_peak;
  Replay replay(g, program, options, &at_peak);
  if (!replay.Run(result->peak_step, err)) return false;
  result->live_at_peak = std::move(at_peak.live_at_peak);
  result->peak_by_kind = at_peak.peak_by_kind;
  if (options.accumulating_gradients) {
    const std::vector<int> made_step = GradientSteps(g, program);
    for (size_t t = 0; t < made_step.size(); ++t) {
      if (made_step[t] < 0 || made_step[t] < result->peak_step) continue;
      const int ti = static_cast<int>(t);
      result->live_at_peak.push_back({ti, ti, -1, g.tensors[t].bytes});
      result->peak_by_kind[static_cast<int>(g.tensors[t].kind)] += g.tensors[t].bytes;
    }
    SortLargestFirst(&result->live_at_peak);
  }
  return true;
}

int64_t PeakLowerBound(const Graph& g) {
  // Ops whose results are needed: the backward and optimizer ops, producers of
  // graph outputs, and transitively the producers of what they read.
  std::vector<bool> needed(g.ops.size(), false);
  std::vector<int> work;
  for (size_t o = 0; o < g.ops.size(); ++o)
    if (g.ops[o].phase != Phase::kForward) work.push_back(static_cast<int>(o));
  for (int t : g.outputs)
    if (g.tensors[t].producer >= 0) work.push_back(g.tensors[t].producer);
  while (!work.empty()) {
    int o = work.back();
    work.pop_back();
    if (needed[o]) continue;
    needed[o] = true;
    for (int t : g.ops[o].inputs) {
      int p = g.tensors[g.tensors[t].base].producer;
      if (p >= 0 && !needed[p]) work.push_back(p);
      if (g.tensors[t].producer >= 0 && !needed[g.tensors[t].producer])
        work.push_back(g.tensors[t].producer);
    }
  }
  const std::vector<bool>& kept = KeptToEnd(g);
  std::vector<int> seen_mark(g.tensors.size(), -1);
  int64_t op_max = 0;
  std::vector<int> takeable;
  for (size_t o = 0; o < g.ops.size(); ++o) {
    if (!needed[o]) continue;
    const Op& op = g.ops[o];
    int64_t sum = op.workspace_bytes;
    auto add = [&](int t) {
      int base = g.tensors[t].base;
      if (g.IsResidentTensor(base) || seen_mark[base] == int(o)) return false;
      seen_mark[base] = static_cast<int>(o);
      sum += g.tensors[base].bytes;
      return true;
    };
    // Inputs an output could take over in place (SPEC section 2: not a view,
    // of the output's size, dead afterwards, so not kept to the end).
    takeable.clear();
    for (int t : op.inputs)
      if (add(t) && !g.IsView(t) && !kept[t]) takeable.push_back(t);
    for (int t : op.outputs) {
      if (!add(t) || g.IsView(t)) continue;
      auto it = std::find_if(takeable.begin(), takeable.end(),
                             [&](int in) { return g.tensors[in].bytes == g.tensors[t].bytes; });
      if (it == takeable.end()) continue;
      sum -= g.tensors[t].bytes;  // the best case: it shares that input's buffer
      takeable.erase(it);
    }
    op_max = std::max(op_max, sum);
  }
  std::vector<bool> counted(g.tensors.size(), false);
  int64_t end_sum = 0;
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    int base = g.tensors[t].base;
    if (!kept[t] || g.IsResidentTensor(base) || counted[base]) continue;
    counted[base] = true;
    end_sum += g.tensors[base].bytes;
  }
  return g.ResidentBytes() + std::max(op_max, end_sum);
}

}  // namespace memplan
