// memplan: a thin table of subcommands over the analyzer library.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/analysis.h"
#include "analyzer/base/file_io.h"
#include "analyzer/base/sha256.h"
#include "analyzer/base/units.h"
#include "analyzer/base/version.h"
#include "analyzer/import/graph_json.h"
#include "analyzer/ir/op_table.h"
#include "analyzer/lower/optimizer_state.h"
#include "analyzer/microbatch.h"
#include "analyzer/plan/cost_model.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/plan/planner.h"
#include "analyzer/report/analyze_report.h"
#include "analyzer/report/check.h"
#include "analyzer/report/chrome_trace.h"
#include "analyzer/report/html/html_report.h"
#include "analyzer/report/html/sweep_html.h"
#include "analyzer/report/memviz/predicted.h"
#include "analyzer/report/microbatch_report.h"
#include "analyzer/report/plan_report.h"
#include "analyzer/report/verify_report.h"
#include "analyzer/reserved_plan.h"
#include "analyzer/sim/simulator.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "profiler/profile.h"
#include "profiler/profile_report.h"

namespace memplan {
namespace {

struct AnalyzeFlags {
  CommonFlags common;
  StepFlags optimizer;
  std::string accumulation = "inplace";
  std::string json, trace;
  std::string alloc_conf;           // PYTORCH_CUDA_ALLOC_CONF text; "" = PyTorch's defaults
  std::string device, device_conf;  // "": no device total
  int top = 10;
  bool quiet = false;
  bool timings = false;
};

int RunAnalyze(const AnalyzeFlags& f) {
  GraphLoadOptions options;
  std::string err;
  if (!ParseSets(f.common.sets, &options, &err)) return Error(err);
  AccumulationMode mode;
  if (!ParseAccumulationMode(f.accumulation, &mode)) return Error("bad --accumulation");
  StepOptions optimizer;
  if (!ParseStepFlags(f.optimizer, &optimizer, &err)) return Error(err);
  alloc::Config alloc_config;
  if (!alloc::ParseAllocConf(f.alloc_conf, &alloc_config, &err))
    return Error("--alloc-conf: " + err);
  Analysis a;
  if (!ResolveDeviceMemory(f.device, f.device_conf, &a.has_device, &a.device, &err))
    return Error(err);
  Progress progress(f.quiet);
  progress.Phase("loading");
  JointGraph jg;
  bool loaded = LoadStepGraph(f.common.graph, options, optimizer, &jg, &err);
  progress.Clear();
  if (!loaded) return Error(err);
  PrintWarnings(jg.warnings);
  progress.Phase("analyzing");
  bool analyzed = AnalyzeBaseline(jg.graph, mode, &a, &err);
  const auto reserved_start = std::chrono::steady_clock::now();
  analyzed = analyzed &&
             PredictBaselineReserved(
                 jg.graph, alloc_config, f.alloc_conf, alloc::kDefaultReservedIterations, &a, &err,
                 a.has_device ? alloc::LibraryWorkspaces(a.device) : std::vector<int64_t>{});
  if (analyzed && a.has_device)
    a.device_total = alloc::TotalOnDevice(a.device, a.reserved.reserved_peak_bytes);
  const std::chrono::duration<double> reserved_seconds =
      std::chrono::steady_clock::now() - reserved_start;
  progress.Clear();
  if (!analyzed) return Error(f.common.graph + ": " + err);
  if (!f.json.empty() && !WriteFile(f.json, AnalyzeReportJson(jg, a, f.top), &err))
    return Error(err);
  if (!f.trace.empty() && !WriteFile(f.trace, ChromeTraceJson(jg.graph, a.program, a.sim), &err))
    return Error(err);
  if (!f.quiet) std::fputs(AnalyzeSummary(jg, a, f.top).c_str(), stdout);
  if (f.timings)
    std::fprintf(stderr,
                 "memplan: timings: parse %.3f s, lower %.3f s, analyze %.3f s, reserved %.3f s\n",
                 jg.parse_seconds, jg.lower_seconds, a.seconds, reserved_seconds.count());
  ExitNow(kExitOk);
}

struct LowerFlags {
  CommonFlags common;
  std::string out;
  bool quiet = false;
};

int RunLower(const LowerFlags& f) {
  GraphLoadOptions options;
  std::string err;
  if (!ParseSets(f.common.sets, &options, &err)) return Error(err);
  JointGraph jg;
  if (!LoadJointGraph(f.common.graph, options, &jg, &err)) return Error(err);
  PrintWarnings(jg.warnings);
  {
    std::ofstream out(f.out, std::ios::binary | std::ios::trunc);
    if (out) WriteGraphJson(jg.graph, out);
    if (!out) return Error("cannot write " + f.out);
  }
  size_t backward = 0;
  for (const Op& op : jg.graph.ops) backward += op.phase == Phase::kBackward;
  if (f.quiet) ExitNow(kExitOk);
  if (jg.lowered)
    std::printf("lowered %s: %zu forward ops -> %zu ops (%zu backward); wrote %s\n",
                f.common.graph.c_str(), jg.input_ops, jg.graph.ops.size(), backward, f.out.c_str());
  else
    std::printf("%s is already joint (%zu ops, %zu backward); wrote it unchanged to %s\n",
                f.common.graph.c_str(), jg.graph.ops.size(), backward, f.out.c_str());
  ExitNow(kExitOk);
}

struct VerifyFlags {
  CommonFlags common;
  StepFlags optimizer;
  std::string plan;
  std::string json;
  bool quiet = false;
};

int RunVerify(const VerifyFlags& f) {
  GraphLoadOptions options;
  std::string err;
  if (!ParseSets(f.common.sets, &options, &err)) return Error(err);
  StepOptions optimizer;
  if (!ParseStepFlags(f.optimizer, &optimizer, &err)) return Error(err);
  JointGraph jg;
  if (!LoadStepGraph(f.common.graph, options, optimizer, &jg, &err)) return Error(err);
  std::string graph_bytes;
  if (!ReadFile(f.common.graph, &graph_bytes, &err)) return Error(err);
  Plan plan;
  if (!LoadPlanFile(f.plan, jg.graph, &plan, &err)) return Error(err);
  PrintWarnings(jg.warnings);

  Verification v;
  v.sha_matches = plan.graph_sha256 == Sha256Hex(graph_bytes);
  SimOptions sim_options;
  sim_options.require_complete = true;
  sim_options.op_cost = OpCosts(jg.graph, CostModel{Objective::kFlops});  // report unit: flops
  v.valid = Simulate(jg.graph, plan.program, sim_options, &v.sim, &v.error);
  if (v.valid && plan.budget_bytes > 0) v.within_budget = v.sim.peak_bytes <= plan.budget_bytes;

  std::vector<std::string> warnings;
  if (!v.sha_matches)
    warnings.push_back(
        fmt::format("{}: graph_sha256 does not match the bytes of {}: the plan was "
                    "made for another version of the graph",
                    f.plan, f.common.graph));
  if (v.valid && plan.predicted.peak_bytes != v.sim.peak_bytes)
    warnings.push_back(fmt::format("{}: predicted peak_bytes {} but the program peaks at {}",
                                   f.plan, plan.predicted.peak_bytes, v.sim.peak_bytes));
  if (v.within_budget == 0)
    warnings.push_back(fmt::format("{}: the program peaks at {} bytes, over budget_bytes {}",
                                   f.plan, v.sim.peak_bytes, plan.budget_bytes));
  PrintWarnings(warnings);
  if (!v.valid)
    std::fprintf(stderr, "memplan: error: %s: invalid program: %s\n", f.plan.c_str(),
                 v.error.c_str());

  if (!f.json.empty() && !WriteFile(f.json, VerifyReportJson(jg, f.plan, plan, v), &err))
    return Error(err);
  if (!f.quiet) std::fputs(VerifySummary(jg, f.plan, plan, v).c_str(), stdout);
  ExitNow(v.valid ? kExitOk : kExitCheckFailed);
}

struct PlanFlags {
  CommonFlags common;
  StepFlags optimizer;
  std::string budget, out, json, trace, html;
  std::string objective = "time", device = "h100", accumulation = "auto", algorithm = "auto";
  std::string granularity = "op";
  std::string budget_of, alloc_conf;  // budget_of "": DefaultBudgetOf for the step
  std::string device_conf;
  bool device_given = false;
  bool alloc_conf_given = false;
  std::string costs;            // memplan.costs/1: measured op times
  double sac_dispatch_us = -1;  // < 0: the device preset's
  int module_depth = 2;
  int sweep = 0;
  int top = 10;
  int64_t global_batch = 0;  // > 0: micro-batch planning
  std::string batch_symbol = "batch";
  bool quiet = false;
};

// --budget-of when given, else its default for the step loaded
// (DefaultBudgetOf: the device with one, reserved bytes for a GPU step or
// with --alloc-conf, else allocated bytes).
BudgetOf ResolveBudgetOf(const PlanFlags& f, std::optional<BudgetOf> given, bool with_device,
                         const Graph& g) {
  return given.value_or(DefaultBudgetOf(with_device, g.target_device, f.alloc_conf_given));
}

// plan --global-batch: the largest micro-batch that fits, with and without
// checkpointing; -o writes the planner's plan at the recommended micro-batch.
// `device` is null without --device.
int RunMicroBatchPlan(const PlanFlags& f, const GraphLoadOptions& load, PlannerOptions options,
                      int64_t budget, std::optional<BudgetOf> budget_of,
                      const alloc::Config& alloc_config, const alloc::DeviceMemory* device) {
  std::string err;
  Progress progress(f.quiet);
  progress.Phase("loading");
  StepOptions optimizer;
  if (!ParseStepFlags(f.optimizer, &optimizer, &err)) return Error(err);
  if (optimizer.parallel.strategy == parallel::Strategy::kPipeline)
    return Error(
        "--global-batch: not with --parallel pipeline, whose graph is one micro-batch: give "
        "--set batch=MICRO and --micro-batches");
  if (f.global_batch % optimizer.parallel.world_size != 0)
    return Error(fmt::format(
        "--global-batch {} does not divide over --world-size {}: each rank takes an equal share",
        f.global_batch, optimizer.parallel.world_size));
  for (const auto& [name, value] : load.symbol_overrides)
    if (name == f.batch_symbol)
      return Error("--set " + name + ": the micro-batch search sets --batch-symbol " + name +
                   " itself");
  // The first load only lists the symbols: at batch 1, since an ONNX model
  // gives a named dimension no value of its own. A graph without that symbol
  // refuses the override: load it as given, to name its symbols below.
  GraphLoadOptions first = load;
  first.symbol_overrides.emplace_back(f.batch_symbol, 1);
  JointGraph jg;
  if (!LoadStepGraph(f.common.graph, first, optimizer, &jg, &err) &&
      !LoadStepGraph(f.common.graph, load, optimizer, &jg, &err)) {
    progress.Clear();
    return Error(err);
  }
  progress.Clear();
  // Batch 1 is no size the search settles on: the graph's export warnings
  // are printed at the micro-batch it chooses, below.
  jg.warnings.resize(jg.warnings.size() - ExportWarningsInEffect(jg.graph).size());
  PrintWarnings(jg.warnings);
  std::string names;
  bool has_symbol = false;
  for (const auto& [name, value] : jg.graph.symbols) {
    has_symbol = has_symbol || name == f.batch_symbol;
    names += (names.empty() ? "" : ", ") + name;
  }
  if (!has_symbol)
    return Error(fmt::format("--batch-symbol {}: {} has no symbol \"{}\" (its symbols: {})",
                             f.batch_symbol, f.common.graph, f.batch_symbol,
                             names.empty() ? "none" : names));
  GraphAtBatch at = [&](int64_t batch, JointGraph* out, std::string* e) {
    GraphLoadOptions o = load;
    o.symbol_overrides.emplace_back(f.batch_symbol, batch);
    return LoadStepGraph(f.common.graph, o, optimizer, out, e);
  };
  progress.Phase("planning micro-batches");
  progress.Attach(&options);
  MicroBatchOptions mo;
  // Under --parallel the global batch is split evenly over the ranks.
  mo.global_batch = f.global_batch / optimizer.parallel.world_size;
  mo.budget_bytes = budget;
  mo.planner = options;
  mo.budget_of = ResolveBudgetOf(f, budget_of, device != nullptr, jg.graph);
  mo.alloc_config = alloc_config;
  mo.has_device = device != nullptr;
  if (device != nullptr) mo.device = *device;
  // Say when the caching allocator would hold more than an allocated budget.
  mo.predict_reserved = mo.budget_of == BudgetOf::kAllocated && jg.graph.target_device != "cpu";
  MicroBatchResult result;
  bool searched = PlanMicroBatches(at, mo, &result, &err);
  progress.Clear();
  options.progress = nullptr;
  options.stage = nullptr;
  if (!searched) return Error(f.common.graph + ": " + err);
  const MicroBatchChoice& chosen =
      result.checkpointed_recommended ? result.checkpointed : result.baseline;
  JointGraph micro;
  if (!at(chosen.found ? chosen.micro_batch : 1, &micro, &err)) return Error(err);
  PrintWarnings(ExportWarningsInEffect(micro.graph));
  if (!f.out.empty()) {
    const BatchPoint* p = FindPoint(result, chosen.found ? chosen.micro_batch : 1);
    PlanResult plan_result;
    if (!PlanCheckpoints(micro.graph, p ? p->plan_budget_bytes : budget, options, &plan_result,
                         &err))
      return Error(f.common.graph + ": " + err);
    std::string graph_bytes;
    if (!ReadFile(f.common.graph, &graph_bytes, &err)) return Error(err);
    Plan plan = MakePlan(micro.graph, Sha256Hex(graph_bytes), budget, options, plan_result);
    if (!WriteFile(f.out, PlanToJson(micro.graph, plan), &err)) return Error(err);
  }
  if (!f.json.empty() &&
      !WriteFile(f.json, MicroBatchReportJson(micro, f.batch_symbol, options, result), &err))
    return Error(err);
  if (!f.quiet)
    std::fputs(MicroBatchSummary(micro, f.batch_symbol, options, result).c_str(), stdout);
  ExitNow(result.checkpointed.found ? kExitOk : kExitNoPlanFits);
}

int RunPlan(const PlanFlags& f) {
  GraphLoadOptions load;
  std::string err;
  if (!ParseSets(f.common.sets, &load, &err)) return Error(err);
  int64_t budget = 0;
  if (!ParseSize(f.budget, &budget, &err)) return Error("--budget: " + err);
  PlannerOptions options;
  options.cost.objective = f.objective == "flops" ? Objective::kFlops : Objective::kTime;
  if (!FindDevicePreset(f.device, &options.cost.device))
    return Error("--device " + f.device + ": expected one of " + DevicePresetNames());
  // auto: in place wherever legal, which the program builder does.
  if (f.accumulation != "auto" && !ParseAccumulationMode(f.accumulation, &options.accumulation))
    return Error("bad --accumulation");
  if (!ParsePlanAlgorithm(f.algorithm, &options.algorithm)) return Error("bad --algorithm");
  if (!ParseGranularity(f.granularity, &options.granularity)) return Error("bad --granularity");
  options.module_depth = f.module_depth;
  options.cost.sac_dispatch_us = f.sac_dispatch_us;
  // The whole device's memory: with --device h100|h200|a100 given.
  alloc::DeviceMemory device_memory;
  bool with_device = false;
  if (!ResolveDeviceMemory(f.device_given && f.device != "cpu" ? f.device : "", f.device_conf,
                           &with_device, &device_memory, &err))
    return Error(err);
  std::optional<BudgetOf> given_budget_of;  // else the default for the step, once loaded
  if (!f.budget_of.empty()) {
    BudgetOf b;
    if (!ParseBudgetOf(f.budget_of, &b)) return Error("bad --budget-of");
    if (b == BudgetOf::kDevice && !with_device)
      return Error("--budget-of device: needs --device (" + alloc::DeviceMemoryNames() + ")");
    given_budget_of = b;
  }
  alloc::Config alloc_config;
  if (!alloc::ParseAllocConf(f.alloc_conf, &alloc_config, &err))
    return Error("--alloc-conf: " + err);
  if (!f.html.empty() && f.sweep == 0)
    return Error("--html " + f.html +
                 ": needs --sweep N (the page draws the sweep; for a "
                 "plan's memory over time: memplan report GRAPH --plan PLAN --html F)");
  if (f.global_batch > 0) {
    if (!f.html.empty()) return Error("--html: not with --global-batch");
    return RunMicroBatchPlan(f, load, options, budget, given_budget_of, alloc_config,
                             with_device ? &device_memory : nullptr);
  }
  StepOptions optimizer;
  if (!ParseStepFlags(f.optimizer, &optimizer, &err)) return Error(err);
  Progress progress(f.quiet);
  progress.Phase("loading");
  JointGraph jg;
  bool loaded = LoadStepGraph(f.common.graph, load, optimizer, &jg, &err);
  progress.Clear();
  if (!loaded) return Error(err);
  PrintWarnings(jg.warnings);
  if (!f.costs.empty()) {
    if (options.cost.objective != Objective::kTime)
      return Error("--costs " + f.costs + ": measured times need --objective time");
    MeasuredCosts costs;
    if (!LoadCostsFile(f.costs, &costs, &err)) return Error(err);
    std::vector<std::string> cost_warnings;
    if (!ApplyMeasuredCosts(jg.graph, costs, f.costs, &options.cost, &cost_warnings, &err))
      return Error(err);
    PrintWarnings(cost_warnings);
  }
  std::string graph_bytes;
  if (!ReadFile(f.common.graph, &graph_bytes, &err)) return Error(err);
  const BudgetOf budget_of = ResolveBudgetOf(f, given_budget_of, with_device, jg.graph);
  progress.Phase("planning");
  progress.Attach(&options);
  BudgetedPlan budgeted;
  bool planned = PlanForBudget(jg.graph, budget, budget_of, options, alloc_config,
                               alloc::kDefaultReservedIterations, &budgeted, &err,
                               with_device ? &device_memory : nullptr);
  progress.Clear();
  if (!planned) return Error(f.common.graph + ": " + err);
  budgeted.reserved.alloc_conf = f.alloc_conf;
  PlanResult& result = budgeted.plan;
  result.feasible = budgeted.feasible;
  Plan plan = MakePlan(jg.graph, Sha256Hex(graph_bytes), budget, options, result);
  std::vector<SweepPoint> sweep;
  if (f.sweep > 0) progress.Phase("planning");
  bool swept = f.sweep == 0 || SweepBudgets(jg.graph,
                                            SweepRange(result.baseline_peak_bytes,
                                                       result.lower_bound_bytes, f.sweep),
                                            options, &sweep, &err);
  progress.Clear();
  options.progress = nullptr;
  options.stage = nullptr;
  if (!swept) return Error(f.common.graph + ": " + err);
  if (!f.out.empty() && !WriteFile(f.out, PlanToJson(jg.graph, plan), &err)) return Error(err);
  if (!f.json.empty() &&
      !WriteFile(f.json, PlanReportJson(jg, options, result, plan, f.top, sweep, &budgeted), &err))
    return Error(err);
  if (!f.trace.empty() &&
      !WriteFile(f.trace, ChromeTraceJson(jg.graph, plan.program, result.best.sim), &err))
    return Error(err);
  if (!f.html.empty()) {
    SweepHtmlInput page;
    page.graph_file = f.common.graph;
    page.graph_name = jg.graph.name;
    page.cost_unit = CostUnit(options.cost);
    page.step_cost = result.step_cost;
    page.baseline_peak_bytes = result.baseline_peak_bytes;
    page.floor_bytes = result.lower_bound_bytes;
    page.chosen = {budget, result.feasible, result.best.sim.peak_bytes, result.best.recompute_cost};
    page.points = sweep;
    std::string html;
    if (!RenderSweepHtml(page, &html, &err) || !WriteFile(f.html, html, &err)) return Error(err);
  }
  if (!f.quiet)
    std::fputs(PlanSummary(jg, options, result, plan, f.top, &budgeted).c_str(), stdout);
  if (!f.quiet && !sweep.empty()) std::fputs(SweepTable(result, options, sweep).c_str(), stdout);
  ExitNow(result.feasible ? kExitOk : kExitNoPlanFits);
}

struct ProfileFlags {
  CommonFlags common;
  std::string plan;
  std::string accumulation = "inplace", backend = "auto", allocator = "default";
  std::string json, trace, emit_costs;
  int repeat = 1;
  int top = 10;
  bool no_cupti = false;
  bool quiet = false;
};

int RunProfileCommand(const ProfileFlags& f) {
  GraphLoadOptions options;
  std::string err;
  if (!ParseSets(f.common.sets, &options, &err)) return Error(err);
  AccumulationMode mode;
  if (!ParseAccumulationMode(f.accumulation, &mode)) return Error("bad --accumulation");
  ProfileOptions po;
  if (!ParseBackendChoice(f.backend, &po.backend)) return Error("bad --backend");
  po.async_allocator = f.allocator == "async";
  if (po.async_allocator && po.backend == BackendChoice::kCpu)
    return Error("--allocator async: only the cuda backend has a stream-ordered allocator");
  po.cupti = !f.no_cupti;
  po.repeat = f.repeat;
  JointGraph jg;
  if (!LoadJointGraph(f.common.graph, options, &jg, &err)) return Error(err);
  for (std::string& w : ExportWarningsInEffect(jg.graph)) jg.warnings.push_back(std::move(w));
  const Graph& g = jg.graph;
  std::vector<std::string> warnings = jg.warnings;
  ProfiledProgram profiled;
  Program program;
  Plan plan;
  if (!f.plan.empty()) {
    if (!LoadPlanFile(f.plan, g, &plan, &err)) return Error(err);
    std::string graph_bytes;
    if (!ReadFile(f.common.graph, &graph_bytes, &err)) return Error(err);
    if (plan.graph_sha256 != Sha256Hex(graph_bytes))
      warnings.push_back(fmt::format(
          "{}: graph_sha256 does not match the bytes of {}: the plan was made for another "
          "version of the graph",
          f.plan, f.common.graph));
    program = plan.program;
    profiled.plan_file = f.plan;
  } else {
    program = BuildBaselineProgram(g, mode);
  }
  profiled.accumulation = mode;
  profiled.program = &program;
  SimResult sim;
  SimOptions sim_options;
  sim_options.collect_live_at_peak = false;
  if (!Simulate(g, program, sim_options, &sim, &err))
    return Error(
        fmt::format("{}: invalid program: {}", f.plan.empty() ? f.common.graph : f.plan, err));
  profiled.sim = &sim;
  if (!f.plan.empty() && plan.predicted.peak_bytes != sim.peak_bytes)
    warnings.push_back(fmt::format("{}: predicted peak_bytes {} but the program peaks at {}",
                                   f.plan, plan.predicted.peak_bytes, sim.peak_bytes));
  for (const Op& op : g.ops) po.op_flops.push_back(std::max(0.0, EstimateFlops(g, op)));
  PrintWarnings(warnings);

  ProfileResult result;
  ProfileStatus status = RunProfile(g, program, po, &result, &err);
  if (status == ProfileStatus::kUnavailable) {
    std::fprintf(stderr, "memplan: error: %s\n", err.c_str());
    ExitNow(kExitBackendUnavailable);
  }
  if (status == ProfileStatus::kRunFailed) {
    std::fprintf(stderr, "memplan: error: %s: the run failed at %s\n", f.common.graph.c_str(),
                 err.c_str());
    ExitNow(kExitCheckFailed);
  }
  for (const std::string& n : result.notes) std::fprintf(stderr, "memplan: note: %s\n", n.c_str());
  if (!f.json.empty() &&
      !WriteFile(f.json, ProfileReportJson(jg, profiled, result, warnings), &err))
    return Error(err);
  if (!f.trace.empty()) {
    MeasuredTrace measured = ProfileTrace(result);
    if (!WriteFile(f.trace, ChromeTraceJson(g, program, sim, &measured), &err)) return Error(err);
  }
  if (!f.emit_costs.empty() && !WriteFile(f.emit_costs, ProfileCostsJson(g, result), &err))
    return Error(err);
  if (!f.quiet) std::fputs(ProfileSummary(jg, profiled, result, f.top).c_str(), stdout);
  if (result.dropped_records > 0) {
    std::fprintf(stderr,
                 "memplan: error: CUPTI dropped %lld activity records: the measured timeline is "
                 "incomplete\n",
                 static_cast<long long>(result.dropped_records));
    ExitNow(kExitCheckFailed);
  }
  ExitNow(kExitOk);
}

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
    if (!LoadPlanFile(f.plan, g, &plan, &err)) return Error(err);
    std::string graph_bytes;
    if (!ReadFile(f.common.graph, &graph_bytes, &err)) return Error(err);
    if (plan.graph_sha256 != Sha256Hex(graph_bytes))
      warnings.push_back(fmt::format(
          "{}: graph_sha256 does not match the bytes of {}: the plan was made for another "
          "version of the graph",
          f.plan, f.common.graph));
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

struct ReportFlags {
  CommonFlags common;
  StepFlags optimizer;
  std::string plan, profile, html;
  std::string accumulation = "inplace";
  std::string alloc_conf, device, device_conf;
  int top = 20;
  bool quiet = false;
};

// report --html: the page of analyzer/report/html/html_report.h for the baseline or a plan.
int RunReport(const ReportFlags& f) {
  GraphLoadOptions options;
  std::string err;
  if (!ParseSets(f.common.sets, &options, &err)) return Error(err);
  AccumulationMode mode;
  if (!ParseAccumulationMode(f.accumulation, &mode)) return Error("bad --accumulation");
  StepOptions optimizer;
  if (!ParseStepFlags(f.optimizer, &optimizer, &err)) return Error(err);
  alloc::Config alloc_config;
  if (!alloc::ParseAllocConf(f.alloc_conf, &alloc_config, &err))
    return Error("--alloc-conf: " + err);
  alloc::DeviceMemory device;
  bool with_device = false;
  if (!ResolveDeviceMemory(f.device, f.device_conf, &with_device, &device, &err)) return Error(err);
  MeasuredProfile measured;
  if (!f.profile.empty() && !LoadProfileReport(f.profile, &measured, &err)) return Error(err);
  JointGraph jg;
  if (!LoadStepGraph(f.common.graph, options, optimizer, &jg, &err)) return Error(err);
  std::vector<std::string> warnings = jg.warnings;
  Plan plan;
  Program program;
  std::string label;
  if (!f.plan.empty()) {
    if (!LoadPlanFile(f.plan, jg.graph, &plan, &err)) return Error(err);
    std::string graph_bytes;
    if (!ReadFile(f.common.graph, &graph_bytes, &err)) return Error(err);
    if (plan.graph_sha256 != Sha256Hex(graph_bytes))
      warnings.push_back(fmt::format(
          "{}: graph_sha256 does not match the bytes of {}: the plan was made for another "
          "version of the graph",
          f.plan, f.common.graph));
    program = plan.program;
    label = "plan " + f.plan;
  } else {
    program = BuildBaselineProgram(jg.graph, mode);
    label = std::string("baseline, gradient accumulation ") + AccumulationModeName(mode);
  }
  SimResult sim;
  if (!Simulate(jg.graph, program, SimOptions{}, &sim, &err))
    return Error(
        fmt::format("{}: invalid program: {}", f.plan.empty() ? f.common.graph : f.plan, err));
  if (!f.profile.empty() && measured.steps >= 0 &&
      measured.steps != static_cast<int64_t>(program.steps.size()))
    warnings.push_back(
        fmt::format("{}: the profile measured a program of {} steps, this one has {}", f.profile,
                    measured.steps, program.steps.size()));
  PrintWarnings(warnings);
  HtmlReportInput in;
  in.jg = &jg;
  in.program = &program;
  in.sim = &sim;
  in.program_label = label;
  in.plan = f.plan.empty() ? nullptr : &plan;
  in.plan_file = f.plan;
  in.measured = f.profile.empty() ? nullptr : &measured;
  in.top = f.top;
  SimResult baseline_sim;
  if (!f.plan.empty()) {
    // The baseline program (--accumulation), drawn behind the plan's.
    Program baseline = BuildBaselineProgram(jg.graph, mode);
    SimOptions so;
    so.collect_live_at_peak = false;
    if (Simulate(jg.graph, baseline, so, &baseline_sim, &err))
      in.baseline_during = baseline_sim.live_during;
    if (plan.budget_bytes > 0) in.budget_bytes = plan.budget_bytes;
  }
  // What the caching allocator reserves while each step runs, and the device.
  alloc::ReservedReport reserved;
  alloc::ReplayTrace trace;
  const std::vector<int64_t> workspaces =
      with_device ? alloc::LibraryWorkspaces(device) : std::vector<int64_t>{};
  if (!alloc::PredictReserved(IntervalsWithWorkspaces(jg.graph, program, sim, workspaces),
                              static_cast<int>(program.steps.size()), alloc_config,
                              alloc::kDefaultReservedIterations, &reserved, &err, &trace))
    return Error(f.common.graph + ": " + err);
  in.reserved_during = memviz::ReservedDuringSteps(trace, static_cast<int>(program.steps.size()));
  if (with_device) {
    in.device_total_bytes = alloc::TotalOnDevice(device, reserved.reserved_peak_bytes).total_bytes;
    in.device_name = device.name;
    if (device.cuda_context_is_estimate)
      in.device_estimate = fmt::format("the CUDA context, {}, is the default",
                                       FormatBytes(device.cuda_context_bytes));
  }
  std::string html;
  if (!RenderHtmlReport(in, &html, &err)) return Error(err);
  if (!WriteFile(f.html, html, &err)) return Error(err);
  if (!f.quiet)
    std::printf(
        "wrote %s: predicted peak %s (%lld bytes) at step %d%s\n", f.html.c_str(),
        FormatBytes(sim.peak_bytes).c_str(), static_cast<long long>(sim.peak_bytes), sim.peak_step,
        f.profile.empty() ? "" : fmt::format(", measured {} bytes", measured.peak_bytes).c_str());
  ExitNow(kExitOk);
}

int Main(int argc, char** argv) {
  CLI::App app{"memplan: predict, plan and prove the memory of backward passes"};
  app.set_version_flag("--version", std::string("memplan ") + MemplanVersion());
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok, 1 a check failed, 2 bad usage or input, 3 no plan fits, 4 backend "
      "unavailable.");

  AnalyzeFlags analyze;
  CLI::App* a = app.add_subcommand("analyze",
                                   "peak memory of the training step and what is "
                                   "alive at the peak");
  AddCommon(a, &analyze.common);
  a->add_option("--accumulation", analyze.accumulation,
                "gradient accumulation: inplace (PyTorch), out_of_place, deferred (Zygote)")
      ->check(CLI::IsMember({"inplace", "out_of_place", "deferred"}))
      ->capture_default_str();
  a->add_option("--json", analyze.json, "write the memplan.report/1 JSON report");
  a->add_option("--trace", analyze.trace, "write a Chrome trace (Perfetto, chrome://tracing)");
  a->add_option("--alloc-conf", analyze.alloc_conf,
                "PYTORCH_CUDA_ALLOC_CONF text for the reserved-memory prediction, e.g. "
                "expandable_segments:True (default: PyTorch's defaults)")
      ->type_name("TEXT");
  a->add_option("--device", analyze.device,
                "also the whole device's memory: h100, h200 or a100 (reserved with cuBLAS "
                "workspaces, plus the CUDA context, against the capacity)");
  a->add_option("--device-conf", analyze.device_conf,
                "override the device's constants: capacity=79GiB,cuda_context=600MiB,"
                "cublas_workspace_config=:4096:8,cublaslt_workspace=0")
      ->type_name("TEXT");
  a->add_option("--top", analyze.top, "how many live buffers to list")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  AddStepFlags(a, &analyze.optimizer);
  a->add_flag("-q,--quiet", analyze.quiet, "no summary on stdout");
  a->add_flag("--timings", analyze.timings, "print the time of each phase on stderr");
  a->footer(
      "Examples:\n"
      "  memplan analyze examples/mlp.graph.json\n"
      "  memplan analyze examples/densenet_toy.graph.json --accumulation deferred\n"
      "  memplan analyze examples/gpt_tiny.graph.json --set batch=16 --json r.json --trace t.json\n"
      "  memplan analyze examples/gpt_tiny.graph.json --optimizer adam --master-weights fp32\n"
      "  memplan analyze examples/gpt_tiny.graph.json --alloc-conf expandable_segments:True");
  int rc = kExitOk;
  a->callback([&] { rc = RunAnalyze(analyze); });

  PlanFlags plan;
  CLI::App* p = app.add_subcommand("plan",
                                   "choose what to keep and what to recompute so the "
                                   "training step fits a memory budget");
  AddCommon(p, &plan.common);
  p->add_option("--budget", plan.budget, "memory budget, e.g. 24GiB, 1.5GB, 4096")->required();
  p->add_option("-o,--output", plan.out, "write the memplan.plan/1 step program");
  p->add_option("--json", plan.json, "write the memplan.report/1 JSON report");
  p->add_option("--trace", plan.trace, "write a Chrome trace of the planned program");
  p->add_option("--objective", plan.objective, "what recomputation costs: time or flops")
      ->check(CLI::IsMember({"time", "flops"}))
      ->capture_default_str();
  p->add_option("--device", plan.device,
                "device preset for the time objective; h100, h200 and a100 also report the "
                "whole device's memory, and the budget bounds it unless --budget-of says "
                "otherwise")
      ->check(CLI::IsMember({"h100", "h200", "a100", "cpu"}))
      ->capture_default_str();
  p->add_option("--sac-dispatch-us", plan.sac_dispatch_us,
                "--granularity sac: host time SAC adds per forward op of a module it wraps "
                "with a policy, per pass (default: the --device preset's; 0 on GPUs)")
      ->check(CLI::NonNegativeNumber);
  p->add_option("--accumulation", plan.accumulation,
                "gradient accumulation: auto (in place wherever legal), inplace, out_of_place, "
                "deferred")
      ->check(CLI::IsMember({"auto", "inplace", "out_of_place", "deferred"}))
      ->capture_default_str();
  p->add_option("--algorithm", plan.algorithm,
                "auto (exact on small graphs, else greedy; both also score the chain DP's "
                "plan), exact, greedy, chain (DP over the stages between single-tensor cuts)")
      ->check(CLI::IsMember({"auto", "exact", "greedy", "chain"}))
      ->capture_default_str();
  p->add_option("--granularity", plan.granularity,
                "op: any tensor may be recomputed; module: only whole modules (scope prefixes), "
                "listed in the plan as the modules to wrap in checkpoint(); sac: any op inside "
                "a module, the plan listing per module which ops to save (PyTorch's selective "
                "activation checkpointing)")
      ->check(CLI::IsMember({"op", "module", "sac"}))
      ->capture_default_str();
  p->add_option("--budget-of", plan.budget_of,
                "what the budget bounds: allocated (the allocation-level peak), reserved "
                "(what PyTorch's CUDA caching allocator holds: the plan is searched again with "
                "less allocated bytes until its reserved peak fits) or device (reserved plus "
                "the CUDA context). Default: device with --device h100|h200|a100, else reserved "
                "when the graph's source.target_device is cuda or --alloc-conf is given, else "
                "allocated (docs/budget.md)")
      ->check(CLI::IsMember({"allocated", "reserved", "device"}));
  p->add_option("--device-conf", plan.device_conf,
                "override the device's memory constants (as analyze --device-conf)")
      ->type_name("TEXT");
  p->add_option("--alloc-conf", plan.alloc_conf,
                "PYTORCH_CUDA_ALLOC_CONF text for the reserved-memory prediction, e.g. "
                "expandable_segments:True");
  p->add_option("--module-depth", plan.module_depth,
                "scope components that name a module: 2 makes h.0.attn.c_attn part of h.0")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  p->add_option("--sweep", plan.sweep,
                "also plan at N budgets from the baseline peak down to the floor and print the "
                "curve of recompute cost against budget")
      ->check(CLI::Range(2, 1000));
  p->add_option("--html", plan.html,
                "with --sweep: write a page drawing the sweep's curve, the floor, the baseline "
                "peak and --budget");
  p->add_option("--costs", plan.costs,
                "measured op times (memplan.costs/1, from `memplan profile --emit-costs`): they "
                "override time_us and the roofline for --objective time");
  p->add_option("--top", plan.top, "how many tensors to list")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  AddStepFlags(p, &plan.optimizer);
  p->add_option("--global-batch", plan.global_batch,
                "find the largest micro-batch of a global batch of N that fits, with the "
                "baseline program and with checkpointing, and the gradient-accumulation steps")
      ->check(CLI::Range(int64_t{1}, kMaxGlobalBatch));
  p->add_option("--batch-symbol", plan.batch_symbol,
                "the graph symbol that is the batch size (set like --set batch=...)")
      ->capture_default_str();
  p->add_flag("-q,--quiet", plan.quiet, "no summary on stdout");
  p->footer(
      "Exit 0 when the plan fits, 3 when no checkpoint set fits (the plan and report then hold\n"
      "the lowest peak found).\n"
      "Examples:\n"
      "  memplan plan examples/densenet_toy.graph.json --budget 20MiB -o plan.json\n"
      "  memplan plan examples/gpt_tiny.graph.json --budget 128MiB --objective flops --json "
      "r.json\n"
      "  memplan verify examples/densenet_toy.graph.json plan.json\n"
      "  memplan plan examples/gpt_tiny.graph.json --budget 200MiB --global-batch 64");
  p->callback([&] {
    plan.device_given = p->count("--device") > 0;
    plan.alloc_conf_given = p->count("--alloc-conf") > 0;
    rc = RunPlan(plan);
  });

  LowerFlags lower;
  CLI::App* l = app.add_subcommand("lower", "derive the backward of a forward-only graph");
  AddCommon(l, &lower.common);
  l->add_option("-o,--output", lower.out, "where to write the joint memplan.graph/1")->required();
  l->add_flag("-q,--quiet", lower.quiet, "nothing on stdout");
  l->footer("Example:\n  memplan lower examples/mlp.graph.json -o mlp.joint.graph.json");
  l->callback([&] { rc = RunLower(lower); });

  VerifyFlags verify;
  CLI::App* v = app.add_subcommand("verify", "replay a plan's step program: valid? peak?");
  AddCommon(v, &verify.common);
  AddStepFlags(v, &verify.optimizer);
  v->add_option("PLAN", verify.plan, "memplan.plan/1 file made for GRAPH")->required();
  v->add_option("--json", verify.json, "write the memplan.report/1 JSON report");
  v->add_flag("-q,--quiet", verify.quiet, "no summary on stdout");
  v->footer(
      "Exit codes: 0 the program is valid, 1 it is not (the message names the step and the "
      "tensor), 2 bad usage or input.\n"
      "Example:\n"
      "  memplan verify examples/mlp.graph.json mlp.plan.json --json verify.json");
  v->callback([&] { rc = RunVerify(verify); });

  ProfileFlags profile;
  CLI::App* pr = app.add_subcommand(
      "profile", "run the baseline or a plan's program on a device and measure its memory");
  AddCommon(pr, &profile.common);
  pr->add_option("--plan", profile.plan, "memplan.plan/1 file made for GRAPH (default: baseline)");
  pr->add_option("--accumulation", profile.accumulation,
                 "gradient accumulation of the baseline: inplace, out_of_place, deferred")
      ->check(CLI::IsMember({"inplace", "out_of_place", "deferred"}))
      ->capture_default_str();
  pr->add_option("--backend", profile.backend,
                 "auto: cuda when built with CUDA and a GPU is present, else cpu (with a note); "
                 "cuda: exit 4 when unavailable; cpu: host memory through a counting allocator")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  pr->add_option("--allocator", profile.allocator,
                 "cuda: default (cudaMalloc/cudaFree per buffer) or async "
                 "(cudaMallocAsync/cudaFreeAsync on one stream)")
      ->check(CLI::IsMember({"default", "async"}))
      ->capture_default_str();
  pr->add_option("--repeat", profile.repeat, "run the program N times (times: median)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  pr->add_flag("--no-cupti", profile.no_cupti,
               "cuda: no CUPTI activity records (measures CUPTI's overhead; bytes then come from "
               "the backend's allocation counter)");
  pr->add_option("--json", profile.json, "write the memplan.report/1 JSON report");
  pr->add_option("--trace", profile.trace,
                 "write a Chrome trace: predicted and measured live bytes, ops, GPU kernels");
  pr->add_option("--emit-costs", profile.emit_costs,
                 "write measured op times (memplan.costs/1) for `memplan plan --costs`");
  pr->add_option("--top", profile.top, "how many of the slowest ops to list")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  pr->add_flag("-q,--quiet", profile.quiet, "no summary on stdout");
  pr->footer(
      "Exit codes: 0 measured, 1 the run failed on the device (out of memory, CUDA error) or "
      "CUPTI dropped records, 2 bad usage or input, 4 the backend is unavailable (no GPU, no "
      "CUPTI, built without CUDA).\n"
      "Examples:\n"
      "  memplan profile examples/mlp.graph.json --backend cpu --json profile.json\n"
      "  memplan plan examples/gpt_tiny.graph.json --budget 110MiB -o gpt.plan.json\n"
      "  memplan profile examples/gpt_tiny.graph.json --plan gpt.plan.json --backend cuda "
      "--trace t.json\n"
      "  memplan profile examples/gpt_tiny.graph.json --repeat 5 --emit-costs costs.json");
  pr->callback([&] { rc = RunProfileCommand(profile); });

  CheckFlags check;
  CLI::App* ck = app.add_subcommand(
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
  ck->callback([&] {
    check.alloc_conf_given = ck->count("--alloc-conf") > 0;
    rc = RunCheck(check);
  });

  ReportFlags report;
  CLI::App* rp = app.add_subcommand(
      "report", "write a self-contained HTML page: memory over time by tensor kind, the peak");
  AddCommon(rp, &report.common);
  rp->add_option("--html", report.html, "where to write the HTML page")->required();
  rp->add_option("--plan", report.plan,
                 "chart this memplan.plan/1 (replayed by the simulator) instead of the baseline");
  rp->add_option("--profile", report.profile,
                 "a `memplan profile --json` report: draw its measured peak");
  rp->add_option("--accumulation", report.accumulation,
                 "gradient accumulation of the baseline program: inplace, out_of_place, deferred")
      ->check(CLI::IsMember({"inplace", "out_of_place", "deferred"}))
      ->capture_default_str();
  rp->add_option("--alloc-conf", report.alloc_conf,
                 "PYTORCH_CUDA_ALLOC_CONF text for the reserved curve, e.g. "
                 "expandable_segments:True")
      ->type_name("TEXT");
  rp->add_option("--device", report.device,
                 "also draw the whole device's total: h100, h200 or a100");
  rp->add_option("--device-conf", report.device_conf,
                 "override the device's memory constants (as analyze --device-conf)")
      ->type_name("TEXT");
  rp->add_option("--top", report.top, "how many live buffers to list")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  AddStepFlags(rp, &report.optimizer);
  rp->add_flag("-q,--quiet", report.quiet, "nothing on stdout");
  rp->footer(
      "The page has no scripts and loads nothing; the same input gives the same bytes.\n"
      "Examples:\n"
      "  memplan report examples/gpt_tiny.graph.json --html gpt.html\n"
      "  memplan plan examples/gpt_tiny.graph.json --budget 110MiB -o gpt.plan.json\n"
      "  memplan report examples/gpt_tiny.graph.json --plan gpt.plan.json --html plan.html\n"
      "  memplan profile examples/mlp.graph.json --backend cpu --json p.json\n"
      "  memplan report examples/mlp.graph.json --profile p.json --html mlp.html");
  rp->callback([&] { rc = RunReport(report); });

  AddDoctorCommand(&app, &rc);
  AddSnapshotCommands(&app, &rc);

  if (argc >= 2 && argv[1][0] != '-') {
    std::string name = argv[1];
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->get_name() == name;
    if (!known) {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({}))
        names += (names.empty() ? "" : ", ") + sub->get_name();
      return Error("unknown subcommand \"" + name + "\"; expected one of: " + names +
                   " (see memplan --help)");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return Error(std::string(e.what()) + " (see memplan " +
                 (argc >= 2 && argv[1][0] != '-' ? std::string(argv[1]) + " " : "") + "--help)");
  }
  return rc;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) { return memplan::Main(argc, argv); }
