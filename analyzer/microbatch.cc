#include "analyzer/microbatch.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "analyzer/cost_model.h"
#include "analyzer/json_util.h"
#include "analyzer/report.h"
#include "analyzer/units.h"

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

std::string LossScale(int64_t micro, int64_t global_batch) {
  return fmt::format("{}/{} = {:.6g}", micro, global_batch,
                     static_cast<double>(micro) / static_cast<double>(global_batch));
}

namespace {

class Search {
 public:
  Search(const GraphAtBatch& graph_at, const MicroBatchOptions& o) : graph_at_(graph_at), o_(o) {}

  // Evaluates batch b (memoized); with_plan also runs the planner when the
  // baseline does not fit.
  bool Eval(int64_t b, bool with_plan, BatchPoint** out, std::string* err) {
    BatchPoint& p = points_[b];
    if (p.batch == b && (p.planned || !with_plan || p.baseline_fits)) {
      *out = &p;
      return true;
    }
    if (o_.planner.stage) o_.planner.stage("micro-batch", b, 0);
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
      for (double c : OpCosts(g, o_.planner.cost)) p.step_cost += c;
      p.plan_peak_bytes = p.baseline_peak_bytes;  // keeping everything is a checkpoint set
      p.plan_fits = p.baseline_fits;
      p.plan_budget_bytes = o_.budget_bytes;
    }
    if (with_plan && !p.baseline_fits && !p.planned) {
      p.planned = true;
      // The planner sees one step; when accumulating, the accumulators add
      // bytes it does not see, so replan below the budget by the overshoot.
      int64_t budget = o_.budget_bytes;
      p.plan_peak_bytes = INT64_MAX;
      for (int attempt = 0; attempt < 4 && budget >= 0; ++attempt) {
        PlanResult r;
        if (!PlanCheckpoints(g, budget, o_.planner, &r, err)) {
          *err = fmt::format("at batch {}: {}", b, *err);
          return false;
        }
        int64_t peak = accumulating ? AccumulationPeak(g, r.best.checkpoint.program, r.best.sim)
                                    : r.best.sim.peak_bytes;
        if (peak < p.plan_peak_bytes) {
          p.plan_peak_bytes = peak;
          p.recompute_cost = r.best.recompute_cost;
          p.plan_budget_bytes = budget;
        }
        if (peak <= o_.budget_bytes || !r.feasible) break;
        // From the plan's own peak: a plan with slack under `budget` would
        // otherwise come back unchanged.
        budget = std::min(budget, r.best.sim.peak_bytes) - (peak - o_.budget_bytes);
      }
      p.plan_fits = p.plan_peak_bytes <= o_.budget_bytes;
    }
    *out = &p;
    return true;
  }

  int64_t Steps(int64_t b) const { return (o_.global_batch + b - 1) / b; }

  // The largest b in [1, N] that fits (0: none), by the kind's predicate.
  bool Largest(bool with_plan, int64_t* best, std::string* err) {
    const int64_t n = o_.global_batch;
    auto fits = [&](int64_t b, bool* ok) {
      BatchPoint* p;
      if (!Eval(b, with_plan, &p, err)) return false;
      *ok = with_plan ? p->plan_fits : p->baseline_fits;
      return true;
    };
    *best = 0;
    bool ok = false;
    if (n <= kExhaustiveBatches) {
      for (int64_t b = n; b >= 1; --b) {
        if (!fits(b, &ok)) return false;
        if (ok) {
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
    int64_t lo = 0, hi = n;  // fits(lo) (or lo = 0), !fits(hi)
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      if (!fits(mid, &ok)) return false;
      (ok ? lo : hi) = mid;
    }
    *best = lo;
    return true;
  }

  bool Fill(bool with_plan, int64_t micro, MicroBatchChoice* c, std::string* err) {
    const int64_t n = o_.global_batch;
    BatchPoint* p;
    c->found = micro > 0;
    if (!c->found) {
      if (!Eval(1, with_plan, &p, err)) return false;
      c->lowest_peak_bytes = with_plan ? p->plan_peak_bytes : p->baseline_peak_bytes;
      return true;
    }
    auto peak = [&](const BatchPoint* q) {
      return with_plan ? q->plan_peak_bytes : q->baseline_peak_bytes;
    };
    c->micro_batch = micro;
    c->accumulation_steps = Steps(micro);
    c->last_micro_batch = n - (c->accumulation_steps - 1) * micro;
    c->balanced_micro_batch = (n + c->accumulation_steps - 1) / c->accumulation_steps;
    if (!Eval(micro, with_plan, &p, err)) return false;
    c->peak_bytes = peak(p);
    c->recompute_cost = with_plan ? p->recompute_cost : 0.0;
    c->recompute_overhead = p->step_cost > 0 ? c->recompute_cost / p->step_cost : 0.0;
    double full = p->step_cost + c->recompute_cost;
    if (!Eval(c->last_micro_batch, with_plan, &p, err)) return false;
    c->last_peak_bytes = peak(p);
    c->global_batch_cost =
        (c->accumulation_steps - 1) * full + p->step_cost + (with_plan ? p->recompute_cost : 0.0);
    if (micro < n) {
      if (!Eval(micro + 1, with_plan, &p, err)) return false;
      c->next_peak_bytes = peak(p);
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
      if (p.planned || p.baseline_fits) {
        if (p.plan_fits && plan_miss) return false;
        plan_miss = plan_miss || !p.plan_fits;
      }
    }
    return true;
  }

  std::vector<BatchPoint> Points() const {
    std::vector<BatchPoint> out;
    for (const auto& [b, p] : points_) out.push_back(p);
    return out;
  }

 private:
  const GraphAtBatch& graph_at_;
  const MicroBatchOptions& o_;
  std::map<int64_t, BatchPoint> points_;
};

}  // namespace

bool PlanMicroBatches(const GraphAtBatch& graph_at, const MicroBatchOptions& options,
                      MicroBatchResult* out, std::string* err) {
  if (options.global_batch < 1 || options.global_batch > kMaxGlobalBatch) {
    *err = fmt::format("global batch {}: expected 1 to 2^40", options.global_batch);
    return false;
  }
  *out = MicroBatchResult();
  out->global_batch = options.global_batch;
  out->budget_bytes = options.budget_bytes;
  out->search = options.global_batch <= kExhaustiveBatches ? "exhaustive" : "binary";
  Search search(graph_at, options);
  int64_t base = 0, ckpt = 0;
  if (!search.Largest(false, &base, err) || !search.Fill(false, base, &out->baseline, err))
    return false;
  if (!search.Largest(true, &ckpt, err) || !search.Fill(true, ckpt, &out->checkpointed, err))
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
  out->monotone = search.Monotone();
  out->evaluated = search.Points();
  return true;
}

const BatchPoint* FindPoint(const MicroBatchResult& r, int64_t batch) {
  for (const BatchPoint& p : r.evaluated)
    if (p.batch == batch) return &p;
  return nullptr;
}

namespace {

using ojson = nlohmann::ordered_json;

ojson ChoiceJson(const MicroBatchChoice& c) {
  auto or_null = [&](int64_t v) { return c.found ? ojson(v) : ojson(nullptr); };
  return {{"found", c.found},
          {"micro_batch", or_null(c.micro_batch)},
          {"accumulation_steps", or_null(c.accumulation_steps)},
          {"last_micro_batch", or_null(c.last_micro_batch)},
          {"balanced_micro_batch", or_null(c.balanced_micro_batch)},
          {"peak_bytes", or_null(c.peak_bytes)},
          {"last_peak_bytes", or_null(c.last_peak_bytes)},
          {"next_peak_bytes",
           c.found && c.next_peak_bytes >= 0 ? ojson(c.next_peak_bytes) : ojson(nullptr)},
          {"recompute_cost", c.recompute_cost},
          {"recompute_overhead", c.recompute_overhead},
          {"global_batch_cost", c.found ? ojson(c.global_batch_cost) : ojson(nullptr)},
          {"lowest_peak_bytes", c.found ? ojson(nullptr) : ojson(c.lowest_peak_bytes)}};
}

const MicroBatchChoice& Chosen(const MicroBatchResult& r) {
  return r.checkpointed_recommended ? r.checkpointed : r.baseline;
}

}  // namespace

std::string MicroBatchReportJson(const JointGraph& jg, const std::string& batch_symbol,
                                 const PlannerOptions& options, const MicroBatchResult& r) {
  const MicroBatchChoice& c = Chosen(r);
  const BatchPoint* at = c.found ? FindPoint(r, c.micro_batch) : nullptr;
  ojson doc = ReportHeader("plan", jg);
  doc["batch_symbol"] = batch_symbol;
  doc["global_batch"] = r.global_batch;
  doc["budget_bytes"] = r.budget_bytes;
  doc["feasible"] = c.found;
  doc["recommended"] =
      c.found ? ojson(r.checkpointed_recommended ? "checkpointed" : "baseline") : ojson(nullptr);
  doc["micro_batch"] = c.found ? ojson(c.micro_batch) : ojson(nullptr);
  doc["accumulation_steps"] = c.found ? ojson(c.accumulation_steps) : ojson(nullptr);
  doc["last_micro_batch"] = c.found ? ojson(c.last_micro_batch) : ojson(nullptr);
  doc["loss_scale"] =
      c.found ? ojson(static_cast<double>(c.micro_batch) / r.global_batch) : ojson(nullptr);
  doc["last_loss_scale"] =
      c.found ? ojson(static_cast<double>(c.last_micro_batch) / r.global_batch) : ojson(nullptr);
  doc["recompute_overhead"] = c.recompute_overhead;
  doc["min_feasible_peak_bytes"] = c.found ? c.peak_bytes : r.checkpointed.lowest_peak_bytes;
  doc["predicted"] = {{"peak_bytes", c.found ? c.peak_bytes : r.checkpointed.lowest_peak_bytes},
                      {"baseline_peak_bytes", at ? at->baseline_peak_bytes : 0},
                      {"recompute_cost", c.recompute_cost},
                      {"cost_unit", CostUnit(options.cost)}};
  doc["parameter_gradient_bytes"] = r.parameter_gradient_bytes;
  doc["baseline"] = ChoiceJson(r.baseline);
  doc["checkpointed"] = ChoiceJson(r.checkpointed);
  doc["search"] = {
      {"method", r.search}, {"monotone", r.monotone}, {"evaluations", r.evaluated.size()}};
  ojson points = ojson::array();
  for (const BatchPoint& p : r.evaluated)
    points.push_back({{"batch", p.batch},
                      {"baseline_peak_bytes", p.baseline_peak_bytes},
                      {"baseline_fits", p.baseline_fits},
                      {"planned", p.planned},
                      {"plan_peak_bytes", p.plan_peak_bytes},
                      {"plan_fits", p.plan_fits},
                      {"recompute_cost", p.recompute_cost},
                      {"step_cost", p.step_cost}});
  doc["evaluated"] = points;
  doc["warnings"] = jg.warnings;
  return json_util::Dump(doc, 2) + "\n";
}

std::string MicroBatchSummary(const JointGraph& jg, const std::string& batch_symbol,
                              const PlannerOptions& options, const MicroBatchResult& r) {
  std::string out;
  const char* unit = CostUnit(options.cost);
  out += fmt::format("memplan plan {} --global-batch {}\n", jg.file, r.global_batch);
  out += ParallelLine(jg);
  out += fmt::format("  budget    {} ({} bytes), micro-batches over symbol \"{}\"\n",
                     FormatBytes(r.budget_bytes), r.budget_bytes, batch_symbol);
  auto line = [&](const char* name, const MicroBatchChoice& c) {
    if (!c.found) {
      out += fmt::format("  {:<9} no micro-batch fits: {} at 1\n", name,
                         FormatBytes(c.lowest_peak_bytes));
      return;
    }
    std::string last = c.last_micro_batch == c.micro_batch
                           ? std::string()
                           : fmt::format(", the last of {}", c.last_micro_batch);
    out += fmt::format(
        "  {:<9} micro-batch {} x {} step{}{}: peak {}{}; recompute {:.1f}%\n", name, c.micro_batch,
        c.accumulation_steps, c.accumulation_steps == 1 ? "" : "s", last, FormatBytes(c.peak_bytes),
        c.next_peak_bytes >= 0
            ? fmt::format(" ({} at {})", FormatBytes(c.next_peak_bytes), c.micro_batch + 1)
            : std::string(),
        100 * c.recompute_overhead);
  };
  line("baseline", r.baseline);
  line("planned", r.checkpointed);
  const MicroBatchChoice& c = Chosen(r);
  if (c.found) {
    out += fmt::format(
        "  choose    {}: micro-batch {}, {} accumulation step{}, cost {:.4g} {} per global batch "
        "(baseline {}, checkpointed {})\n",
        r.checkpointed_recommended ? "checkpointed" : "baseline", c.micro_batch,
        c.accumulation_steps, c.accumulation_steps == 1 ? "" : "s", c.global_batch_cost, unit,
        r.baseline.found ? fmt::format("{:.4g}", r.baseline.global_batch_cost) : "-",
        r.checkpointed.found ? fmt::format("{:.4g}", r.checkpointed.global_batch_cost) : "-");
    out += fmt::format("  loss      scale each micro-batch's mean loss by {}",
                       LossScale(c.micro_batch, r.global_batch));
    if (c.last_micro_batch != c.micro_batch)
      out += fmt::format(", the last by {}", LossScale(c.last_micro_batch, r.global_batch));
    out += "\n";
    if (c.balanced_micro_batch != c.micro_batch)
      out += fmt::format(
          "  balance   micro-batches of {} take as many steps ({}) with sizes within one\n",
          c.balanced_micro_batch, c.accumulation_steps);
  }
  out += fmt::format(
      "  grads     {} of parameter gradients stay alive across micro-batches (they do not "
      "scale with the micro-batch)\n",
      FormatBytes(r.parameter_gradient_bytes));
  out += fmt::format("  search    {}, {} batch values evaluated{}\n", r.search, r.evaluated.size(),
                     r.monotone ? ""
                                : "; WARNING: peaks are not monotone in the batch, the "
                                  "micro-batch may not be the largest");
  return out;
}

}  // namespace memplan
