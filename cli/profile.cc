// memplan profile: runs the baseline or a plan's program on a device (or the
// host) and measures its memory and op times against the prediction.
#include "profiler/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/ir/op_table.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/sim/simulator.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "profiler/profile_report.h"

namespace memplan {
namespace {

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
    if (!LoadPlanFor(f.plan, f.common.graph, g, &plan, &warnings, &err)) return Error(err);
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

}  // namespace

void RegisterProfile(CLI::App* app, int* rc) {
  static ProfileFlags profile;
  CLI::App* pr = app->add_subcommand(
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
  pr->callback([rc] { *rc = RunProfileCommand(profile); });
}

}  // namespace memplan
