// memplan plan: which activations to recompute so the training step fits a
// budget, at the least recompute cost found; --sweep plans at many budgets,
// --global-batch searches the largest micro-batch that fits.
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/base/file_io.h"
#include "analyzer/base/sha256.h"
#include "analyzer/base/units.h"
#include "analyzer/drivers/analysis.h"
#include "analyzer/drivers/microbatch.h"
#include "analyzer/drivers/reserved_plan.h"
#include "analyzer/plan/cost_model.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/plan/planner.h"
#include "analyzer/report/chrome_trace.h"
#include "analyzer/report/html/sweep_html.h"
#include "analyzer/report/microbatch_report.h"
#include "analyzer/report/plan_report.h"
#include "analyzer/sim/simulator.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"

namespace memplan {
namespace {

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
  int search_threads = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
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
  mo.probe_threads = f.search_threads;
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
    // As the search planned it: with the accumulators under allocated budgets.
    PlannerOptions at = options;
    at.accumulating_gradients =
        result.budget_of == BudgetOf::kAllocated && chosen.accumulation_steps > 1;
    if (!PlanCheckpoints(micro.graph, p ? p->plan_budget_bytes : budget, at, &plan_result, &err))
      return Error(f.common.graph + ": " + err);
    // The plan file describes one step: its figures without the accumulators.
    if (at.accumulating_gradients) {
      SimOptions plain;
      plain.op_cost = OpCosts(micro.graph, options.cost);
      if (!Simulate(micro.graph, plan_result.best.checkpoint.program, plain, &plan_result.best.sim,
                    &err))
        return Error(f.common.graph + ": " + err);
      ScoredPlan kept_all;  // the planner's baseline: every candidate kept
      ScoreOptions keep_all;
      keep_all.program.mode = options.accumulation;
      keep_all.detailed = false;
      if (!ScoreCheckpointSet(micro.graph, std::vector<bool>(micro.graph.tensors.size(), true),
                              plain.op_cost, keep_all, &kept_all, &err))
        return Error(f.common.graph + ": " + err);
      plan_result.baseline_peak_bytes = kept_all.sim.peak_bytes;
    }
    std::string graph_sha256;
    if (!FileSha256Hex(f.common.graph, &graph_sha256, &err)) return Error(err);
    Plan plan = MakePlan(micro.graph, graph_sha256, budget, options, plan_result);
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
  std::string graph_sha256;  // of the file's bytes, for the plan
  if (!FileSha256Hex(f.common.graph, &graph_sha256, &err)) return Error(err);
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
  Plan plan = MakePlan(jg.graph, graph_sha256, budget, options, result);
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

}  // namespace

void RegisterPlan(CLI::App* app, int* rc) {
  static PlanFlags plan;
  CLI::App* p = app->add_subcommand("plan",
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
  p->add_option("--search-threads", plan.search_threads,
                "--global-batch: batches evaluated at a time (2: the next one the search may "
                "need is planned on a second core meanwhile; the same answers); default 2 on "
                "a machine with two or more cores, else 1")
      ->check(CLI::Range(1, 2));
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
  p->callback([rc, p] {
    plan.device_given = p->count("--device") > 0;
    plan.alloc_conf_given = p->count("--alloc-conf") > 0;
    *rc = RunPlan(plan);
  });
}

}  // namespace memplan
