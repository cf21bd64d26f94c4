#include "analyzer/drivers/microbatch.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <map>
#include <mutex>

#include "analyzer/base/units.h"
#include "analyzer/drivers/batch_bracket.h"
#include "analyzer/plan/cost_model.h"

namespace memplan {

int64_t ParameterGradientBytes(const Graph& g) {
  int64_t sum = 0;
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (g.IsParameterGradient(static_cast<int>(t))) sum += g.OwnedBytes(static_cast<int>(t));
  return sum;
}

int64_t AccumulationPeak(const Graph& g, const Program& program, const SimResult& sim) {
  const size_t n = program.steps.size();
  std::vector<int> first_run(g.ops.size(), -1);
  for (size_t s = 0; s < n; ++s) {
    const Step& step = program.steps[s];
    if (step.IsRun() && first_run[step.op] < 0) first_run[step.op] = static_cast<int>(s);
  }
  std::vector<int64_t> made_at(n + 1, 0);  // parameter-gradient bytes made at each step
  int64_t pending = 0;                     // accumulators whose fresh copy is not made yet
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    int ti = static_cast<int>(t);
    if (g.IsView(ti) || !g.IsParameterGradient(ti)) continue;
    int p = g.tensors[t].producer;
    int at = p >= 0 ? first_run[p] : -1;
    if (at < 0) continue;  // never made: not a gradient this step accumulates
    made_at[at] += g.tensors[t].bytes;
    pending += g.tensors[t].bytes;
  }
  int64_t peak = sim.start_bytes + pending;
  for (size_t s = 0; s < n && s < sim.live_during.size(); ++s) {
    peak = std::max(peak, sim.live_during[s] + pending);  // accumulator + fresh copy
    pending -= made_at[s];
    peak = std::max(peak, sim.live_after[s] + pending);
  }
  return peak;
}

bool PredictMicroBatchReserved(const Graph& g, const Program& program, const SimResult& sim,
                               int64_t micro_batches, const alloc::Config& config, int iterations,
                               const std::vector<int64_t>& persistent, alloc::ReservedReport* out,
                               std::string* err) {
  const int n = static_cast<int>(program.steps.size());
  const std::vector<BufferInterval> one = IntervalsWithWorkspaces(g, program, sim);
  const int copies = static_cast<int>(std::clamp<int64_t>(micro_batches, 1, kReplayedMicroBatches));
  const int end = copies * n;
  std::vector<BufferInterval> intervals;
  intervals.reserve(one.size() * copies + persistent.size());
  for (int c = 0; c < copies; ++c) {
    const int offset = c * n;
    for (BufferInterval iv : one) {
      if (iv.alloc_step < 0) {  // resident: allocated once, before the first micro-batch
        if (c > 0) continue;
        if (iv.free_step == n) iv.free_step = end;
        intervals.push_back(iv);
        continue;
      }
      const bool gradient = iv.owner >= 0 && iv.free_step == n && !g.IsView(iv.owner) &&
                            g.IsParameterGradient(iv.owner);
      iv.alloc_step += offset;
      if (gradient)  // the first one is the accumulator; later ones are added into it
        iv.free_step = c == 0 ? end : iv.alloc_step;
      else  // alive at the end (the loss): freed by the next micro-batch's first step
        iv.free_step += offset;
      intervals.push_back(iv);
    }
  }
  for (int64_t bytes : persistent) intervals.push_back({-1, bytes, -1, end});
  return alloc::PredictReserved(intervals, end, config, iterations, out, err);
}

namespace {

class Search {
 public:
  Search(const GraphAtBatch& graph_at, const MicroBatchOptions& o) : graph_at_(graph_at), o_(o) {
    if (o_.has_device) persistent_ = alloc::LibraryWorkspaces(o_.device);
  }

  bool BoundsReserved() const { return o_.budget_of != BudgetOf::kAllocated; }
  // What the budget bounds, given a reserved peak: it, or it plus the context.
  int64_t Bounded(int64_t reserved) const {
    return o_.budget_of == BudgetOf::kDevice ? alloc::TotalOnDevice(o_.device, reserved).total_bytes
                                             : reserved;
  }

  // The reserved peak of `program` run as batch b's micro-batches.
  bool Reserved(const Graph& g, const Program& program, const SimResult& sim, int64_t b,
                int64_t* out, std::string* err) const {
    alloc::ReservedReport report;
    if (!PredictMicroBatchReserved(g, program, sim, Steps(b), o_.alloc_config,
                                   o_.reserved_iterations, persistent_, &report, err)) {
      *err = fmt::format("at batch {}: {}", b, *err);
      return false;
    }
    *out = report.reserved_peak_bytes;
    return true;
  }

  // Whether point p fits, by the kind's predicate (with or without a plan).
  static bool FitsFor(const BatchPoint& p, bool with_plan) {
    return with_plan ? p.plan_fits : p.baseline_fits;
  }

  // Whether point p (of batch b) answers for the kind without more work.
  static bool Complete(const BatchPoint& p, int64_t b, bool with_plan) {
    return p.batch == b && (p.planned || p.over_floor || !with_plan || p.baseline_fits);
  }

  // Batch b's point when it answers for the kind without more work; else
  // nullptr, with what is known of it (if anything) copied to *partial.
  BatchPoint* Known(int64_t b, bool with_plan, BatchPoint* partial = nullptr) {
    std::lock_guard<std::mutex> lock(points_mutex_);
    auto it = points_.find(b);
    if (it == points_.end()) return nullptr;
    if (Complete(it->second, b, with_plan)) return &it->second;
    if (partial != nullptr) *partial = it->second;
    return nullptr;
  }

  // Evaluates batch b (memoized); with_plan also runs the planner when the
  // baseline does not fit. Thread-safe for distinct b: the points are
  // guarded, and a point's fields are written only by the call that makes it.
  bool Eval(int64_t b, bool with_plan, BatchPoint** out, std::string* err) {
    return Eval(b, with_plan, o_.planner, out, err);
  }
  bool Eval(int64_t b, bool with_plan, const PlannerOptions& planner, BatchPoint** out,
            std::string* err) {
    BatchPoint p;
    if (BatchPoint* known = Known(b, with_plan, &p)) {
      *out = known;
      return true;
    }
    if (!Compute(b, with_plan, planner, &p, err)) return false;
    std::lock_guard<std::mutex> lock(points_mutex_);
    BatchPoint& slot = points_[b];
    slot = p;
    *out = &slot;
    return true;
  }

  // Eval's work on p, a copy of batch b's point so far (or a new one).
  bool Compute(int64_t b, bool with_plan, const PlannerOptions& planner, BatchPoint* out,
               std::string* err) const {
    BatchPoint& p = *out;
    if (planner.stage) planner.stage("micro-batch", b, 0);
    JointGraph jg;
    if (!graph_at_(b, &jg, err)) return false;
    const Graph& g = jg.graph;
    const bool accumulating = Steps(b) > 1;
    if (p.batch != b) {
      p.batch = b;
      Program program = BuildBaselineProgram(g, o_.baseline_accumulation);
      SimOptions so;
      so.collect_live_at_peak = false;
      SimResult sim;
      if (!Simulate(g, program, so, &sim, err)) {
        *err = fmt::format("at batch {}: baseline program is invalid: {}", b, *err);
        return false;
      }
      p.baseline_peak_bytes = accumulating ? AccumulationPeak(g, program, sim) : sim.peak_bytes;
      p.baseline_fits = p.baseline_peak_bytes <= o_.budget_bytes;
      if (BoundsReserved()) {
        if (!Reserved(g, program, sim, b, &p.baseline_reserved_bytes, err)) return false;
        p.baseline_fits = Bounded(p.baseline_reserved_bytes) <= o_.budget_bytes;
      }
      for (double c : OpCosts(g, o_.planner.cost)) p.step_cost += c;
      ClearPlan(&p);  // keeping everything is a checkpoint set
    }
    if (with_plan && !p.baseline_fits && !p.planned && !p.over_floor) {
      p.planned = true;
      if (!(BoundsReserved() ? PlanReserved(g, b, planner, &p, err)
                             : PlanAllocated(g, b, planner, &p, err))) {
        if (*err != kPlanCancelled) return false;
        err->clear();
        ClearPlan(&p);  // stopped (PlannerOptions::cancel): the baseline alone
        stopped_plans_.fetch_add(1);
      }
    }
    return true;
  }

  // *over: batch 1's floor (PeakLowerBound) is over the budget (reserved and
  // device bytes are at least the allocated peak), so no batch fits with any
  // plan; batch 1's point then records the floor in place of a plan.
  // (Elsewhere the planner runs: its lowest peak feeds the guesses.) Called
  // with no probe running.
  bool FloorOverAtOne(bool* over, std::string* err) {
    *over = false;
    BatchPoint* one;
    if (!Eval(1, false, &one, err)) return false;
    if (one->baseline_fits || one->planned || one->over_floor) {
      *over = one->over_floor;
      return true;
    }
    JointGraph jg;
    if (!graph_at_(1, &jg, err)) return false;
    const int64_t floor = PeakLowerBound(jg.graph);
    if ((BoundsReserved() ? Bounded(floor) : floor) <= o_.budget_bytes) return true;
    std::lock_guard<std::mutex> lock(points_mutex_);
    one->over_floor = true;
    one->plan_peak_bytes = floor;
    if (BoundsReserved()) one->plan_reserved_bytes = floor;
    one->plan_fits = false;
    *over = true;
    return true;
  }

  // Point p's plan as the baseline's, unplanned.
  void ClearPlan(BatchPoint* p) const {
    p->planned = false;
    p->over_floor = false;
    p->plan_peak_bytes = p->baseline_peak_bytes;
    p->plan_reserved_bytes = p->baseline_reserved_bytes;
    p->plan_fits = p->baseline_fits;
    p->plan_budget_bytes = o_.budget_bytes;
    p->recompute_cost = 0;
  }

  // Forgets batch b's plan, keeping its baseline: a plan whose answer the
  // other thread's point implied (so the points listed do not depend on
  // which thread finished first, or whether a stop came in time).
  void Unplan(int64_t b) {
    std::lock_guard<std::mutex> lock(points_mutex_);
    auto it = points_.find(b);
    if (it != points_.end()) ClearPlan(&it->second);
  }

  // Starts evaluating batch b on another thread when probes may run two at
  // a time and b is new (or not yet planned); the returned future, if valid,
  // must be waited for. The second thread reports no progress.
  // `stop`: stops its plan when set; `on_fit`: set once b fits (if not null).
  std::future<bool> Speculate(int64_t b, bool with_plan, BatchPoint** out, std::string* err,
                              const std::atomic<bool>* stop, std::atomic<bool>* on_fit) {
    if (o_.probe_threads < 2 || b < 1 || b > o_.global_batch) return {};
    if (Known(b, with_plan)) return {};
    return std::async(std::launch::async, [this, b, with_plan, out, err, stop, on_fit] {
      PlannerOptions quiet = o_.planner;
      quiet.progress = nullptr;
      quiet.stage = nullptr;
      quiet.cancel = stop;
      if (!Eval(b, with_plan, quiet, out, err)) return false;
      const BatchPoint& p = **out;
      if (on_fit != nullptr && Complete(p, b, with_plan) && FitsFor(p, with_plan))
        on_fit->store(true);
      return true;
    });
  }

  // A batch evaluated on the second thread meanwhile (Speculate); nothing
  // when b is 0, known, or probes run one at a time. Join before reading.
  // When it fits it sets `on_fit` (if not null): the main thread's plan
  // stops when its answer no longer matters. Stop() stops its own plan.
  class Probe {
   public:
    Probe(Search* search, int64_t b, bool with_plan, std::atomic<bool>* on_fit = nullptr)
        : b_(b), with_plan_(with_plan) {
      if (b > 0) future_ = search->Speculate(b, with_plan, &point_, &err_, &stop_, on_fit);
    }
    ~Probe() {
      if (future_.valid()) future_.wait();
    }
    void Stop() { stop_.store(true); }
    // Waits for it; false with its error if it failed.
    bool Join(std::string* err) {
      if (!future_.valid()) return true;
      if (future_.get()) return true;
      point_ = nullptr;
      *err = err_;
      return false;
    }
    // After Join: its point, or nullptr when it did not run or was stopped
    // before its answer.
    const BatchPoint* point() const {
      return point_ != nullptr && Complete(*point_, b_, with_plan_) ? point_ : nullptr;
    }
    bool Fits() const { return FitsFor(*point_, with_plan_); }

   private:
    int64_t b_;
    bool with_plan_;
    std::atomic<bool> stop_{false};
    std::future<bool> future_;
    BatchPoint* point_ = nullptr;
    std::string err_;
  };

  // The planner's options at batch b: when accumulating, it scores every
  // program with the accumulators alive (SimOptions::accumulating_gradients),
  // so the peak it bounds is AccumulationPeak's.
  PlannerOptions PlannerAt(int64_t b) const { return PlannerAt(b, o_.planner); }
  PlannerOptions PlannerAt(int64_t b, const PlannerOptions& base) const {
    PlannerOptions options = base;
    options.accumulating_gradients = Steps(b) > 1;
    return options;
  }

  // The plan at batch b, for allocated bytes: one plan at the budget.
  bool PlanAllocated(const Graph& g, int64_t b, const PlannerOptions& planner, BatchPoint* p,
                     std::string* err) const {
    PlanResult r;
    if (!PlanCheckpoints(g, o_.budget_bytes, PlannerAt(b, planner), &r, err)) {
      if (*err != kPlanCancelled) *err = fmt::format("at batch {}: {}", b, *err);
      return false;
    }
    p->plan_peak_bytes = r.best.sim.peak_bytes;
    p->recompute_cost = r.best.recompute_cost;
    p->plan_budget_bytes = o_.budget_bytes;
    p->plan_fits = p->plan_peak_bytes <= o_.budget_bytes;
    return true;
  }

  // The plan at batch b, for reserved bytes or the device: plans at lower
  // allocation budgets while the plan's reserved peak, run as micro-batches,
  // is over (AllocationBudgetRounds); the first plan that fits, else the one
  // with the lowest reserved peak.
  bool PlanReserved(const Graph& g, int64_t b, const PlannerOptions& planner, BatchPoint* p,
                    std::string* err) const {
    const bool accumulating = Steps(b) > 1;
    const int64_t target = o_.budget_of == BudgetOf::kDevice
                               ? o_.budget_bytes - o_.device.cuda_context_bytes
                               : o_.budget_bytes;
    AllocationBudgetRounds rounds(target);
    for (int round = 0; round < kMaxReservedRounds; ++round) {
      PlanResult r;
      if (!PlanCheckpoints(g, rounds.budget(), planner, &r, err)) {
        if (*err != kPlanCancelled) *err = fmt::format("at batch {}: {}", b, *err);
        return false;
      }
      const Program& program = r.best.checkpoint.program;
      int64_t reserved = 0;
      if (!Reserved(g, program, r.best.sim, b, &reserved, err)) return false;
      const bool fits = Bounded(reserved) <= o_.budget_bytes;
      if (round == 0 || fits || reserved < p->plan_reserved_bytes) {
        p->plan_peak_bytes =
            accumulating ? AccumulationPeak(g, program, r.best.sim) : r.best.sim.peak_bytes;
        p->plan_reserved_bytes = reserved;
        p->recompute_cost = r.best.recompute_cost;
        p->plan_budget_bytes = rounds.budget();
        p->plan_fits = fits;
      }
      if (fits || !rounds.Next(r.feasible, r.best.sim.peak_bytes, reserved)) break;
    }
    return true;
  }

  // The reserved peak of the program chosen at `micro` (the baseline's, or
  // the plan made there again), for predict_reserved.
  bool ReservedOfChoice(int64_t micro, bool with_plan, int64_t* out, std::string* err) {
    BatchPoint* p;
    if (!Eval(micro, with_plan, &p, err)) return false;
    JointGraph jg;
    if (!graph_at_(micro, &jg, err)) return false;
    const Graph& g = jg.graph;
    if (with_plan && p->planned) {
      PlanResult r;
      if (!PlanCheckpoints(g, p->plan_budget_bytes, PlannerAt(micro), &r, err)) {
        *err = fmt::format("at batch {}: {}", micro, *err);
        return false;
      }
      return Reserved(g, r.best.checkpoint.program, r.best.sim, micro, out, err);
    }
    Program program = BuildBaselineProgram(g, o_.baseline_accumulation);
    SimOptions so;
    so.collect_live_at_peak = false;
    SimResult sim;
    if (!Simulate(g, program, so, &sim, err)) {
      *err = fmt::format("at batch {}: baseline program is invalid: {}", micro, *err);
      return false;
    }
    return Reserved(g, program, sim, micro, out, err);
  }

  int64_t Steps(int64_t b) const { return (o_.global_batch + b - 1) / b; }

  // The bytes the budget bounds at an evaluated point, for the kind.
  int64_t BoundBytes(const BatchPoint& p, bool with_plan) const {
    if (!BoundsReserved()) return with_plan ? p.plan_peak_bytes : p.baseline_peak_bytes;
    return Bounded(with_plan ? p.plan_reserved_bytes : p.baseline_reserved_bytes);
  }

  // The batch where the bytes the budget bounds reach it, if they grow as
  // c + k * batch: c from the baseline at batches 1 and 2 (what does not
  // grow with the batch), k from the point at `over` (over the budget); 0 or
  // less when not even batch 1 would fit. kNoGuess when the model does not
  // apply.
  static constexpr int64_t kNoGuess = BatchBracket::kNoGuess;
  bool Guess(bool with_plan, int64_t over, int64_t* guess, std::string* err) {
    *guess = kNoGuess;
    BatchPoint *one, *two, *p;
    if (!Eval(1, false, &one, err) || !Eval(2, false, &two, err) || !Eval(over, with_plan, &p, err))
      return false;
    const double c = 2.0 * BoundBytes(*one, false) - BoundBytes(*two, false);
    const double k = (static_cast<double>(BoundBytes(*p, with_plan)) - c) / over;
    if (c < 0 || k <= 0) return true;
    const double at = std::floor((static_cast<double>(o_.budget_bytes) - c) / k);
    *guess = static_cast<int64_t>(std::clamp(at, 0.0, static_cast<double>(o_.global_batch)));
    return true;
  }

  // The largest b in [1, N] that fits (0: none), by the kind's predicate;
  // `fits_at_least`: a batch known to fit (0: none).
  bool Largest(bool with_plan, int64_t fits_at_least, int64_t* best, std::string* err) {
    const int64_t n = o_.global_batch;
    // *ok: whether b fits (false when `stop` stopped its plan first).
    auto fits = [&](int64_t b, bool* ok, const std::atomic<bool>* stop = nullptr) {
      PlannerOptions planner = o_.planner;
      planner.cancel = stop;
      BatchPoint* p;
      if (!Eval(b, with_plan, planner, &p, err)) return false;
      *ok = FitsFor(*p, with_plan);
      return true;
    };
    *best = 0;
    bool ok = false;
    // Nothing fits where batch 1's floor is over the budget: no plan.
    bool none = false;
    if (with_plan && !FloorOverAtOne(&none, err)) return false;
    if (none) return true;
    if (n <= kExhaustiveBatches) {
      for (int64_t b = n; b >= 1; --b) {
        // The next one down, on the second thread, needed only when b does
        // not fit: stopped, and its plan forgotten, when b does.
        Probe below(this, b - 1, with_plan);
        if (!fits(b, &ok)) return false;
        if (ok) below.Stop();
        if (!below.Join(err)) return false;
        if (ok) {
          Unplan(b - 1);
          *best = b;
          return true;
        }
      }
      return true;
    }
    if (!fits(n, &ok)) return false;
    if (ok) {
      *best = n;
      return true;
    }
    // The bracket's tries: batch_bracket.h.
    BatchBracket bracket(std::clamp<int64_t>(fits_at_least, 0, n - 1), n);
    while (!bracket.Done()) {
      int64_t guess = kNoGuess;
      if (bracket.WantsGuess() && !Guess(with_plan, bracket.hi(), &guess, err)) return false;
      const int64_t mid = bracket.Next(guess);
      // mid + 1 on the second thread: when mid fits, it closes the bracket
      // or moves its bottom one further. When it fits, mid is taken to fit
      // (its plan stopped and forgotten, whichever finished first): the
      // answer is then at least mid + 1, which fits.
      std::atomic<bool> stop_mid{false};
      Probe above(this, mid + 1 < bracket.hi() ? mid + 1 : 0, with_plan, &stop_mid);
      if (!fits(mid, &ok, &stop_mid) || !above.Join(err)) return false;
      const bool above_known = above.point() != nullptr;
      const bool above_fits = above_known && above.Fits();
      if (above_fits) {
        ok = true;
        Unplan(mid);
      }
      bracket.Record(ok, above_known, above_fits);
    }
    *best = bracket.lo();
    return true;
  }

  bool Fill(bool with_plan, int64_t micro, MicroBatchChoice* c, std::string* err) {
    const int64_t n = o_.global_batch;
    BatchPoint* p;
    c->found = micro > 0;
    auto peak = [&](const BatchPoint* q) {
      return with_plan ? q->plan_peak_bytes : q->baseline_peak_bytes;
    };
    auto reserved = [&](const BatchPoint* q) {
      return with_plan ? q->plan_reserved_bytes : q->baseline_reserved_bytes;
    };
    if (!c->found) {
      if (!Eval(1, with_plan, &p, err)) return false;
      c->lowest_peak_bytes = peak(p);
      c->lowest_is_floor = with_plan && p->over_floor;
      c->lowest_reserved_peak_bytes = reserved(p);
      return true;
    }
    c->micro_batch = micro;
    c->accumulation_steps = Steps(micro);
    c->last_micro_batch = n - (c->accumulation_steps - 1) * micro;
    c->balanced_micro_batch = (n + c->accumulation_steps - 1) / c->accumulation_steps;
    if (!Eval(micro, with_plan, &p, err)) return false;
    c->peak_bytes = peak(p);
    c->reserved_peak_bytes = reserved(p);
    c->recompute_cost = with_plan ? p->recompute_cost : 0.0;
    c->recompute_overhead = p->step_cost > 0 ? c->recompute_cost / p->step_cost : 0.0;
    double full = p->step_cost + c->recompute_cost;
    Probe next(this, micro < n ? micro + 1 : 0, with_plan);
    if (!Eval(c->last_micro_batch, with_plan, &p, err) || !next.Join(err)) return false;
    c->last_peak_bytes = peak(p);
    c->global_batch_cost =
        (c->accumulation_steps - 1) * full + p->step_cost + (with_plan ? p->recompute_cost : 0.0);
    if (micro < n) {
      if (!Eval(micro + 1, with_plan, &p, err)) return false;
      c->next_peak_bytes = peak(p);
      c->next_reserved_peak_bytes = reserved(p);
    }
    return true;
  }

  // Peaks met never fall with the batch (baseline, accumulating batches),
  // and no batch fits above one that does not (either kind).
  bool Monotone() const {
    int64_t last_peak = -1;
    bool baseline_miss = false, plan_miss = false;
    for (const auto& [b, p] : points_) {
      if (Steps(b) == 1) continue;  // one micro-batch: no accumulators
      if (p.baseline_peak_bytes < last_peak) return false;
      last_peak = p.baseline_peak_bytes;
      if (p.baseline_fits && baseline_miss) return false;
      baseline_miss = baseline_miss || !p.baseline_fits;
      if (p.planned || p.over_floor || p.baseline_fits) {
        if (p.plan_fits && plan_miss) return false;
        plan_miss = plan_miss || !p.plan_fits;
      }
    }
    return true;
  }

  int64_t StoppedPlans() const { return stopped_plans_.load(); }

  std::vector<BatchPoint> Points() const {
    std::vector<BatchPoint> out;
    for (const auto& [b, p] : points_) out.push_back(p);
    return out;
  }

 private:
  const GraphAtBatch& graph_at_;
  const MicroBatchOptions& o_;
  std::vector<int64_t> persistent_;  // the device's library workspaces
  std::mutex points_mutex_;          // guards points_ (not the fields of a point)
  std::map<int64_t, BatchPoint> points_;
  mutable std::atomic<int64_t> stopped_plans_{0};
};

}  // namespace

bool PlanMicroBatches(const GraphAtBatch& graph_at, const MicroBatchOptions& options,
                      MicroBatchResult* out, std::string* err) {
  if (options.global_batch < 1 || options.global_batch > kMaxGlobalBatch) {
    *err = fmt::format("global batch {}: expected 1 to 2^40", options.global_batch);
    return false;
  }
  if (options.budget_of == BudgetOf::kDevice && !options.has_device) {
    *err = "a device budget needs a device (--device)";
    return false;
  }
  *out = MicroBatchResult();
  out->global_batch = options.global_batch;
  out->budget_bytes = options.budget_bytes;
  out->budget_of = options.budget_of;
  out->has_device = options.has_device;
  out->device = options.device;
  out->search = options.global_batch <= kExhaustiveBatches ? "exhaustive" : "binary";
  Search search(graph_at, options);
  int64_t base = 0, ckpt = 0;
  if (!search.Largest(false, 0, &base, err) || !search.Fill(false, base, &out->baseline, err))
    return false;
  // Keeping everything is a checkpoint set: the plan fits wherever the baseline does.
  if (!search.Largest(true, base, &ckpt, err) || !search.Fill(true, ckpt, &out->checkpointed, err))
    return false;
  out->checkpointed_recommended =
      out->checkpointed.found && (!out->baseline.found || out->checkpointed.global_batch_cost <
                                                              out->baseline.global_batch_cost);
  // At the recommended micro-batch: the lowering may make a gradient a view
  // at one batch size and not at another.
  const MicroBatchChoice& c = out->checkpointed_recommended ? out->checkpointed : out->baseline;
  JointGraph jg;
  if (!graph_at(c.found ? c.micro_batch : 1, &jg, err)) return false;
  out->parameter_gradient_bytes = ParameterGradientBytes(jg.graph);
  if (c.found && options.budget_of != BudgetOf::kAllocated)
    out->reserved_peak_bytes = c.reserved_peak_bytes;
  else if (c.found && options.predict_reserved &&
           !search.ReservedOfChoice(c.micro_batch, out->checkpointed_recommended,
                                    &out->reserved_peak_bytes, err))
    return false;
  out->monotone = search.Monotone();
  out->evaluated = search.Points();
  out->stopped_plans = search.StoppedPlans();
  return true;
}

const BatchPoint* FindPoint(const MicroBatchResult& r, int64_t batch) {
  for (const BatchPoint& p : r.evaluated)
    if (p.batch == batch) return &p;
  return nullptr;
}

}  // namespace memplan
