// memplan check: the CI gate: fails when the predicted peak is over the budget
// or has grown past an earlier report's.
#include "analyzer/report/check.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/alloc/reserved.h"
#include "analyzer/base/units.h"
#include "analyzer/drivers/analysis.h"
#include "analyzer/drivers/reserved_plan.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/sim/simulator.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memplan {
namespace {

struct CheckFlags {
  CommonFlags common;
  StepFlags optimizer;
  std::optional<std::string> budget;
  std::string plan, baseline, tolerance, json;
  std::string accumulation = "inplace", format = "text";
  std::string budget_of;  // "": DefaultBudgetOf for the step
  std::string alloc_conf, device, device_conf;
  bool alloc_conf_given = false;
  bool quiet = false;
};

// check's budget condition beyond allocated bytes: the program's reserved
// peak (with the device's library workspaces held) and the device total.
bool PredictCheckReserved(const Graph& g, const Program& program, const SimResult& sim,
                          const alloc::Config& config, const alloc::DeviceMemory* device,
                          CheckInput* in, std::string* err) {
  const std::vector<int64_t> workspaces =
      device ? alloc::LibraryWorkspaces(*device) : std::vector<int64_t>{};
  alloc::ReservedReport reserved;
  if (!alloc::PredictReserved(IntervalsWithWorkspaces(g, program, sim, workspaces),
                              static_cast<int>(program.steps.size()), config,
                              alloc::kDefaultReservedIterations, &reserved, err))
    return false;
  in->reserved_peak_bytes = reserved.reserved_peak_bytes;
  if (in->budget_of == BudgetOf::kDevice)
    in->device_total_bytes =
        alloc::TotalOnDevice(*device, reserved.reserved_peak_bytes).total_bytes;
  return true;
}

int RunCheck(const CheckFlags& f) {
  GraphLoadOptions options;
  std::string err;
  if (!ParseSets(f.common.sets, &options, &err)) return Error(err);
  CheckInput in;
  in.graph_file = f.common.graph;
  in.plan_file = f.plan;
  in.accumulation = f.accumulation;
  in.has_budget = f.budget.has_value();
  if (!in.has_budget && f.baseline.empty())
    return Error("check needs --budget SIZE, --baseline REPORT.json, or both");
  if (in.has_budget && !ParseSize(*f.budget, &in.budget_bytes, &err))
    return Error("--budget: " + err);
  alloc::DeviceMemory device;
  bool with_device = false;
  if (!ResolveDeviceMemory(f.device, f.device_conf, &with_device, &device, &err)) return Error(err);
  alloc::Config alloc_config;
  if (!alloc::ParseAllocConf(f.alloc_conf, &alloc_config, &err))
    return Error("--alloc-conf: " + err);
  std::optional<BudgetOf> given_budget_of;  // else the default for the step, once loaded
  if (!f.budget_of.empty()) {
    BudgetOf b;
    if (!ParseBudgetOf(f.budget_of, &b)) return Error("bad --budget-of");
    if (!in.has_budget) return Error("--budget-of " + f.budget_of + ": needs --budget SIZE");
    if (b == BudgetOf::kDevice && !with_device)
      return Error("--budget-of device: needs --device (" + alloc::DeviceMemoryNames() + ")");
    given_budget_of = b;
  }
  CheckFormat format;
  if (!ParseCheckFormat(f.format, &format)) return Error("bad --format");
  AccumulationMode mode;
  if (!ParseAccumulationMode(f.accumulation, &mode)) return Error("bad --accumulation");
  if (!f.tolerance.empty() && f.baseline.empty())
    return Error("--tolerance " + f.tolerance + ": needs --baseline REPORT.json");
  in.has_baseline = !f.baseline.empty();
  if (!ParseTolerance(f.tolerance.empty() ? "0" : f.tolerance, &in.tolerance, &err))
    return Error("--tolerance: " + err);
  if (in.has_baseline && !LoadBaselineReport(f.baseline, &in.baseline, &err)) return Error(err);
  StepOptions optimizer;
  if (!ParseStepFlags(f.optimizer, &optimizer, &err)) return Error(err);
  in.optimizer = OptimizerLabel(optimizer.optimizer);
  JointGraph jg;
  if (!LoadStepGraph(f.common.graph, options, optimizer, &jg, &err)) return Error(err);
  const Graph& g = jg.graph;
  in.outputs_held = g.outputs_held;
  std::vector<std::string> warnings = jg.warnings;
  if (in.has_baseline && !in.baseline.graph.empty() && in.baseline.graph != g.name)
    warnings.push_back(fmt::format("{}: the baseline report is of graph \"{}\", not \"{}\"",
                                   f.baseline, in.baseline.graph, g.name));
  Program program;
  if (!f.plan.empty()) {
    Plan plan;
    if (!LoadPlanFor(f.plan, f.common.graph, g, &plan, &warnings, &err)) return Error(err);
    program = std::move(plan.program);
  } else {
    program = BuildBaselineProgram(g, mode);
  }
  SimResult sim;
  SimOptions sim_options;
  sim_options.collect_live_at_peak = false;
  std::string sim_err;
  in.plan_valid = Simulate(g, program, sim_options, &sim, &sim_err);
  if (!in.plan_valid && f.plan.empty())
    return Error(f.common.graph + ": baseline program is invalid: " + sim_err);
  in.plan_error = sim_err;
  in.peak_bytes = sim.peak_bytes;
  in.peak_step = sim.peak_step;
  if (sim.peak_step >= 0 && program.steps[sim.peak_step].IsRun())
    in.peak_op = g.ops[program.steps[sim.peak_step].op].id;
  in.budget_of =
      given_budget_of.value_or(DefaultBudgetOf(with_device, g.target_device, f.alloc_conf_given));
  if (in.has_budget && in.plan_valid && in.budget_of != BudgetOf::kAllocated &&
      !PredictCheckReserved(g, program, sim, alloc_config, with_device ? &device : nullptr, &in,
                            &err))
    return Error(f.common.graph + ": " + err);
  PrintWarnings(warnings);
  CheckResult result = EvaluateCheck(in);
  if (!f.json.empty() && !WriteFile(f.json, CheckReportJson(jg, in, result, warnings), &err))
    return Error(err);
  if (!f.quiet) std::fputs(CheckOutput(in, result, format).c_str(), stdout);
  ExitNow(result.passed ? kExitOk : kExitCheckFailed);
}

}  // namespace

void RegisterCheck(CLI::App* app, int* rc) {
  static CheckFlags check;
  CLI::App* ck = app->add_subcommand(
      "check", "CI gate: fail when the predicted peak is over budget or has regressed");
  AddCommon(ck, &check.common);
  ck->add_option("--budget", check.budget,
                 "memory budget, e.g. 24GiB, 1.5GB, 4096 (with --baseline, optional)");
  ck->add_option("--plan", check.plan,
                 "check this memplan.plan/1 (replayed by the simulator) instead of the baseline");
  ck->add_option("--accumulation", check.accumulation,
                 "gradient accumulation of the baseline program: inplace, out_of_place, deferred")
      ->check(CLI::IsMember({"inplace", "out_of_place", "deferred"}))
      ->capture_default_str();
  ck->add_option("--baseline", check.baseline,
                 "an earlier memplan.report/1 (analyze, check, plan, verify, profile): fail when "
                 "the peak grew past its peak by more than --tolerance");
  ck->add_option("--tolerance", check.tolerance,
                 "allowed growth over the baseline, 2% or 0.02 (default 0); the limit "
                 "baseline + floor(baseline x tolerance) itself passes");
  ck->add_option("--json", check.json, "write the memplan.report/1 JSON report");
  ck->add_option("--format", check.format,
                 "stdout: text, github (workflow annotations), markdown (for a pull-request "
                 "comment or $GITHUB_STEP_SUMMARY)")
      ->check(CLI::IsMember({"text", "github", "markdown"}))
      ->capture_default_str();
  ck->add_option("--budget-of", check.budget_of,
                 "what --budget bounds: allocated (the allocation-level peak), reserved (what "
                 "PyTorch's CUDA caching allocator holds) or device (reserved plus the CUDA "
                 "context). Default: device with --device, else reserved when the graph's "
                 "source.target_device is cuda or --alloc-conf is given, else allocated "
                 "(docs/budget.md). The regression condition always compares allocated peaks")
      ->check(CLI::IsMember({"allocated", "reserved", "device"}));
  ck->add_option("--alloc-conf", check.alloc_conf,
                 "PYTORCH_CUDA_ALLOC_CONF text for the reserved-memory prediction, e.g. "
                 "expandable_segments:True")
      ->type_name("TEXT");
  ck->add_option("--device", check.device,
                 "the whole device: h100, h200 or a100 (the budget then bounds it by default)");
  ck->add_option("--device-conf", check.device_conf,
                 "override the device's memory constants (as analyze --device-conf)")
      ->type_name("TEXT");
  AddStepFlags(ck, &check.optimizer);
  ck->add_flag("-q,--quiet", check.quiet, "nothing on stdout");
  ck->footer(
      "Exit codes: 0 every condition holds, 1 a condition failed (over budget, regression, "
      "invalid plan), 2 bad usage or input.\n"
      "Examples:\n"
      "  memplan check examples/gpt_tiny.graph.json --budget 160MiB\n"
      "  memplan check examples/gpt_tiny.graph.json --budget 160MiB --baseline base.json "
      "--tolerance 2% --format github\n"
      "  memplan check examples/gpt_tiny.graph.json --baseline base.json --tolerance 2%\n"
      "  memplan check examples/gpt_tiny.graph.json --budget 110MiB --plan gpt.plan.json "
      "--format markdown >> $GITHUB_STEP_SUMMARY");
  ck->callback([rc, ck] {
    check.alloc_conf_given = ck->count("--alloc-conf") > 0;
    *rc = RunCheck(check);
  });
}

}  // namespace memplan
