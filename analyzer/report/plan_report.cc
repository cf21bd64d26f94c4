#include "analyzer/report/plan_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "analyzer/base/enum_table.h"
#include "analyzer/base/json_util.h"
#include "analyzer/base/units.h"
#include "analyzer/report/analyze_report.h"

namespace memplan {
namespace {

using ojson = nlohmann::ordered_json;

double Overhead(const PlanResult& r) {
  return r.step_cost > 0 ? r.best.recompute_cost / r.step_cost : 0.0;
}

// The recomputed tensors that own memory, largest first.
std::vector<int> RecomputedBuffers(const Graph& g, const Plan& plan) {
  std::vector<int> out;
  for (int t : plan.recomputed)
    if (!g.IsView(t) && g.tensors[t].bytes > 0) out.push_back(t);
  std::stable_sort(out.begin(), out.end(),
                   [&](int a, int b) { return g.tensors[a].bytes > g.tensors[b].bytes; });
  return out;
}

// The tensors the plan recomputes at each use (checkpoint.h), by index.
std::vector<int> EachUse(const ScoredPlan& best) {
  std::vector<int> out;
  for (size_t t = 0; t < best.each_use.size(); ++t)
    if (best.each_use[t] && !best.keep[t]) out.push_back(static_cast<int>(t));
  return out;
}

// The ops whose dead inputs the plan recomputes last first (checkpoint.h).
std::vector<int> ReversedOrder(const ScoredPlan& best) {
  std::vector<int> out;
  for (size_t o = 0; o < best.reverse_order.size(); ++o)
    if (best.reverse_order[o]) out.push_back(static_cast<int>(o));
  return out;
}

// The SAC dispatch charge per op and pass, whatever the objective.
double SacDispatchUs(const CostModel& m) {
  return m.sac_dispatch_us >= 0 ? m.sac_dispatch_us : m.device.sac_dispatch_us;
}

// "  dispatch  ..." under --granularity sac and objective time: the charge
// and where it comes from; "" otherwise.
std::string SacDispatchLine(const PlannerOptions& options) {
  const CostModel& m = options.cost;
  if (options.granularity != Granularity::kSac || m.objective != Objective::kTime) return "";
  const std::string charge =
      fmt::format("  dispatch  SAC's dispatch charged {:g} us per op and pass", SacDispatchUs(m));
  switch (SacDispatchSourceOf(m)) {
    case SacDispatchSource::kGiven:
      return charge + " (--sac-dispatch-us)\n";
    case SacDispatchSource::kMeasured:
      return charge + fmt::format(": the {} preset's, measured (bench/results/sac_dispatch.json)\n",
                                  m.device.name);
    case SacDispatchSource::kUnmeasuredDefault:
      break;
  }
  return charge +
         fmt::format(": the {} preset's default, not measured (--sac-dispatch-us sets it)\n",
                     m.device.name);
}

int64_t Bytes(const Graph& g, const std::vector<int>& tensors) {
  int64_t sum = 0;
  for (int t : tensors) sum += g.OwnedBytes(t);
  return sum;
}

}  // namespace

SacDispatchSource SacDispatchSourceOf(const CostModel& model) {
  if (model.sac_dispatch_us >= 0) return SacDispatchSource::kGiven;
  return model.device.sac_dispatch_us > 0 ? SacDispatchSource::kMeasured
                                          : SacDispatchSource::kUnmeasuredDefault;
}

namespace {

constexpr EnumName<SacDispatchSource> kSacDispatchSources[] = {
    {SacDispatchSource::kGiven, "given"},
    {SacDispatchSource::kMeasured, "measured"},
    {SacDispatchSource::kUnmeasuredDefault, "unmeasured_default"},
};

}  // namespace

const char* SacDispatchSourceName(SacDispatchSource source) {
  return NameOf(kSacDispatchSources, source, "unmeasured_default");
}

Plan MakePlan(const Graph& g, const std::string& graph_sha256, int64_t budget_bytes,
              const PlannerOptions& options, const PlanResult& result) {
  const ScoredPlan& best = result.best;
  Plan plan;
  plan.graph = g.name;
  plan.graph_sha256 = graph_sha256;
  plan.budget_bytes = budget_bytes;
  plan.feasible = result.feasible;
  for (const Step& step : best.checkpoint.program.steps) {
    if (!step.IsRun() || !g.ops[step.op].accumulate || g.ops[step.op].outputs.size() != 1) continue;
    AccumulationMode mode =
        step.inplace.empty()
            ? (options.accumulation == AccumulationMode::kInplace ? AccumulationMode::kOutOfPlace
                                                                  : options.accumulation)
            : AccumulationMode::kInplace;
    plan.accumulation.emplace_back(g.ops[step.op].outputs[0], mode);
  }
  std::sort(plan.accumulation.begin(), plan.accumulation.end());
  // The planner's keep vectors mark candidates only.
  for (size_t t = 0; t < best.keep.size(); ++t)
    if (best.keep[t]) plan.saved.push_back(static_cast<int>(t));
  plan.recomputed = best.checkpoint.recomputed_tensors;
  plan.predicted.peak_bytes = best.sim.peak_bytes;
  plan.predicted.baseline_peak_bytes = result.baseline_peak_bytes;
  plan.predicted.recompute_cost = best.recompute_cost;
  plan.predicted.cost_unit = CostUnit(options.cost);
  plan.program = best.checkpoint.program;
  plan.modules = result.modules;
  if (options.granularity == Granularity::kSac)
    plan.sac = SacPolicies(g, best.keep, best.checkpoint.recomputed_ops, result.policy_modules,
                           options.module_depth);
  return plan;
}

std::string PlanReportJson(const JointGraph& jg, const PlannerOptions& options,
                           const PlanResult& result, const Plan& plan, int top,
                           const std::vector<SweepPoint>& sweep, const BudgetedPlan* budgeted) {
  const Graph& g = jg.graph;
  const SimResult& sim = result.best.sim;
  ojson r = ReportHeader("plan", jg);
  r["budget_bytes"] = plan.budget_bytes;
  r["feasible"] = result.feasible;
  r["min_feasible_peak_bytes"] = result.min_feasible_peak_bytes;
  r["lower_bound_bytes"] = result.lower_bound_bytes;
  r["predicted"] = {{"peak_bytes", plan.predicted.peak_bytes},
                    {"baseline_peak_bytes", plan.predicted.baseline_peak_bytes},
                    {"recompute_cost", plan.predicted.recompute_cost},
                    {"cost_unit", plan.predicted.cost_unit}};
  r["step_cost"] = result.step_cost;
  r["recompute_overhead"] = Overhead(result);
  r["objective"] = options.cost.objective == Objective::kTime ? "time" : "flops";
  r["device"] = options.cost.device.name;
  r["accumulation"] = AccumulationModeName(options.accumulation);
  r["algorithm"] = PlanAlgorithmName(result.algorithm);
  r["granularity"] = GranularityName(options.granularity);
  r["modules"] = plan.modules;
  if (options.granularity == Granularity::kSac) {
    r["policy_modules"] = result.policy_modules;
    r["sac_dispatch_cost"] = result.sac_dispatch_cost;
    r["sac_dispatch_us"] = SacDispatchUs(options.cost);
    r["sac_dispatch_source"] = SacDispatchSourceName(SacDispatchSourceOf(options.cost));
  }
  r["evaluations"] = result.evaluations;
  r["search_complete"] = result.search_complete;
  r["peak_step"] = sim.peak_step;
  int peak_op = sim.peak_step >= 0 ? plan.program.steps[sim.peak_step].op : -1;
  r["peak_op"] = peak_op >= 0 ? ojson(g.ops[peak_op].id) : ojson(nullptr);
  r["saved"] = plan.saved.size();
  r["saved_bytes"] = Bytes(g, plan.saved);
  ojson recomputed = ojson::array();
  for (int t : RecomputedBuffers(g, plan)) {
    int p = g.tensors[t].producer;
    recomputed.push_back({{"tensor", g.tensors[t].id},
                          {"bytes", g.tensors[t].bytes},
                          {"producer", g.ops[p].id},
                          {"scope", g.ops[p].scope}});
  }
  r["recomputed"] = recomputed;
  r["recompute_runs"] = sim.recompute_runs;
  ojson each_use = ojson::array();
  for (int t : EachUse(result.best)) each_use.push_back(g.tensors[t].id);
  r["recomputed_each_use"] = each_use;
  ojson reversed = ojson::array();
  for (int o : ReversedOrder(result.best)) reversed.push_back(g.ops[o].id);
  r["recompute_order_reversed"] = reversed;
  r["live_at_peak"] = LiveAtPeakJson(g, sim, top);
  if (!sweep.empty()) {
    ojson points = ojson::array();
    for (const SweepPoint& p : sweep)
      points.push_back({{"budget_bytes", p.budget_bytes},
                        {"feasible", p.feasible},
                        {"peak_bytes", p.peak_bytes},
                        {"recompute_cost", p.recompute_cost}});
    r["sweep"] = points;
  }
  if (budgeted) {
    r["budget_of"] = BudgetOfName(budgeted->budget_of);
    r["allocation_budgets"] = budgeted->allocation_budgets;
    r["reserved"] = ReservedJson(budgeted->reserved);
    if (budgeted->has_device)
      r["device_memory"] = DeviceJson(budgeted->device, budgeted->device_total);
  }
  r["warnings"] = jg.warnings;
  return json_util::Dump(r, 2) + "\n";
}

std::string PlanSummary(const JointGraph& jg, const PlannerOptions& options,
                        const PlanResult& result, const Plan& plan, int top,
                        const BudgetedPlan* budgeted) {
  const Graph& g = jg.graph;
  const SimResult& sim = result.best.sim;
  const char* unit = CostUnit(options.cost);
  std::string out = fmt::format("memplan plan {}\n", jg.file);
  out += LoopLine(g);
  out += ParallelLine(jg);
  const BudgetOf budget_of = budgeted ? budgeted->budget_of : BudgetOf::kAllocated;
  const bool of_reserved = budget_of != BudgetOf::kAllocated;
  out += fmt::format("  budget    {} ({} bytes) {}: {}\n", FormatBytes(plan.budget_bytes),
                     plan.budget_bytes, BudgetOfPhrase(budget_of),
                     result.feasible ? "fits" : "NO checkpoint set fits");
  out += fmt::format("  peak      {} baseline -> {} planned",
                     FormatBytes(result.baseline_peak_bytes), FormatBytes(sim.peak_bytes));
  if (sim.peak_step >= 0) {
    const Op& op = g.ops[plan.program.steps[sim.peak_step].op];
    out += fmt::format(", at step {} while \"{}\" runs ({})", sim.peak_step, op.id,
                       sim.recompute[sim.peak_step] ? "recompute" : PhaseName(op.phase));
  }
  out += "\n";
  if (!result.feasible)
    out += fmt::format(
        "  lowest    {} is the lowest peak found (floor {}: no program goes lower)\n",
        FormatBytes(result.min_feasible_peak_bytes), FormatBytes(result.lower_bound_bytes));
  if (budgeted) {
    out += ReservedLine(budgeted->reserved, sim.peak_bytes);
    if (budgeted->has_device) out += DeviceLine(budgeted->device, budgeted->device_total);
    if (result.feasible)
      out += OverBudgetLine(budget_of, plan.budget_bytes, budgeted->reserved.reserved_peak_bytes,
                            budgeted->has_device ? &budgeted->device : nullptr, g.target_device);
    if (of_reserved && budgeted->allocation_budgets.size() > 1)
      out += fmt::format(
          "  searched  {} allocation budgets for a reserved peak within the budget ({}): {}\n",
          budgeted->allocation_budgets.size(),
          FormatBytes(budgeted->feasible ? budgeted->allocation_budget
                                         : budgeted->allocation_budgets.back()),
          budgeted->feasible ? "this plan fits" : "none fits; the lowest reserved peak is shown");
  }
  std::vector<int> recomputed = RecomputedBuffers(g, plan);
  const size_t each_use = EachUse(result.best).size();
  const size_t reversed = ReversedOrder(result.best).size();
  out += fmt::format(
      "  recompute {} op runs, {} tensors ({}{}{}); cost {:.4g} {} = {:.1f}% of one training "
      "step\n",
      sim.recompute_runs, recomputed.size(), FormatBytes(Bytes(g, recomputed)),
      each_use ? fmt::format(", {} of them again at each use", each_use) : "",
      reversed ? fmt::format(", last input first for {} op{}", reversed, reversed == 1 ? "" : "s")
               : "",
      result.best.recompute_cost, unit, 100.0 * Overhead(result));
  out += fmt::format("  keep      {} tensors ({}) for the backward\n", plan.saved.size(),
                     FormatBytes(Bytes(g, plan.saved)));
  if (options.granularity != Granularity::kOp) {
    auto joined = [](const std::vector<std::string>& names) {
      std::string s;
      for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
      return s;
    };
    out += fmt::format("  wrap      {} in checkpoint(): {}\n", plan.modules.size(),
                       plan.modules.empty() ? "none" : joined(plan.modules));
    if (options.granularity == Granularity::kSac && !plan.modules.empty()) {
      out += result.policy_modules.empty()
                 ? std::string("  policy    none: each wrapped module recomputes whole\n")
                 : fmt::format(
                       "  policy    {} of them ({:.4g} {} of the cost is SAC's dispatch): {}\n",
                       result.policy_modules.size(), result.sac_dispatch_cost, unit,
                       joined(result.policy_modules));
    }
    out += SacDispatchLine(options);
  }
  out +=
      fmt::format("  search    {}{} ({} programs simulated), objective {}, device {}\n",
                  PlanAlgorithmName(result.algorithm),
                  result.search_complete ? ""
                  : result.feasible      ? ", stopped early: the best plan found"
                                         : ", the least peak found, not proven",
                  result.evaluations, options.cost.objective == Objective::kTime ? "time" : "flops",
                  options.cost.device.name);
  if (!recomputed.empty()) {
    size_t shown = std::min<size_t>(recomputed.size(), static_cast<size_t>(std::max(top, 0)));
    out += fmt::format("\nrecomputed, largest first ({} of {}):\n", shown, recomputed.size());
    for (size_t i = 0; i < shown; ++i) {
      const Tensor& t = g.tensors[recomputed[i]];
      const Op& p = g.ops[t.producer];
      out += fmt::format("  {:>12}  {:<28} {:<24} {}\n", FormatBytes(t.bytes), t.id, p.id, p.scope);
    }
  }
  size_t shown = std::min<size_t>(sim.live_at_peak.size(), static_cast<size_t>(std::max(top, 0)));
  out += fmt::format("\nwhat the planned peak holds, largest first ({} of {}):\n", shown,
                     sim.live_at_peak.size());
  for (size_t i = 0; i < shown; ++i) {
    const LiveBuffer& lb = sim.live_at_peak[i];
    std::string name =
        lb.workspace_of >= 0 ? g.ops[lb.workspace_of].id + ":workspace" : g.tensors[lb.owner].id;
    TensorKind kind = lb.owner >= 0 ? g.tensors[lb.owner].kind : TensorKind::kTemporary;
    out += fmt::format("  {:>12}  {:<15} {}\n", FormatBytes(lb.bytes), TensorKindName(kind), name);
  }
  return out;
}

std::string OverBudgetLine(BudgetOf budget_of, int64_t budget_bytes, int64_t reserved_peak_bytes,
                           const alloc::DeviceMemory* device, std::string_view target_device,
                           std::string_view where) {
  if (target_device == "cpu" || budget_of == BudgetOf::kDevice) return "";
  if (budget_of == BudgetOf::kAllocated && reserved_peak_bytes > budget_bytes)
    return fmt::format(
        "  warning   the caching allocator is predicted to reserve {}{}, over the budget of {}: "
        "--budget-of reserved bounds it\n",
        FormatBytes(reserved_peak_bytes), where, FormatBytes(budget_bytes));
  if (device == nullptr) return "";
  const alloc::DeviceTotal total = alloc::TotalOnDevice(*device, reserved_peak_bytes);
  if (total.total_bytes <= budget_bytes) return "";
  return fmt::format(
      "  warning   the device is predicted to hold {}{} (reserved {} + CUDA context {}{}), over "
      "the budget of {}: --budget-of device bounds it\n",
      FormatBytes(total.total_bytes), where, FormatBytes(reserved_peak_bytes),
      FormatBytes(total.cuda_context_bytes), device->cuda_context_is_estimate ? " (estimate)" : "",
      FormatBytes(budget_bytes));
}

std::string SweepTable(const PlanResult& result, const PlannerOptions& options,
                       const std::vector<SweepPoint>& sweep) {
  // The sweep plans at allocation budgets, whatever --budget-of says.
  std::string out =
      fmt::format("\nbudget sweep of allocated bytes (a smaller budget never costs less):\n");
  out += fmt::format("  {:>12}  {:<5} {:>12}  {:>14}  {:>9}\n", "budget", "fits", "peak",
                     std::string("cost (") + CostUnit(options.cost) + ")", "overhead");
  for (const SweepPoint& p : sweep) {
    double overhead = result.step_cost > 0 ? 100.0 * p.recompute_cost / result.step_cost : 0.0;
    out += fmt::format("  {:>12}  {:<5} {:>12}  {:>14.4g}  {:>8.1f}%\n",
                       FormatBytes(p.budget_bytes), p.feasible ? "yes" : "no",
                       FormatBytes(p.peak_bytes), p.recompute_cost, overhead);
  }
  return out;
}

}  // namespace memplan
