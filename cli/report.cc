// memplan report: the self-contained HTML page of memory over time, by tensor
// kind, for the baseline or a plan.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/alloc/reserved.h"
#include "analyzer/base/units.h"
#include "analyzer/drivers/analysis.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/report/html/html_report.h"
#include "analyzer/report/memviz/predicted.h"
#include "analyzer/report/profile_document.h"
#include "analyzer/sim/simulator.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memplan {
namespace {

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
  BaselineInputs base;
  std::string err;
  if (!ParseBaselineFlags(f.common, f.optimizer, f.accumulation, f.alloc_conf, &base, &err))
    return Error(err);
  alloc::DeviceMemory device;
  bool with_device = false;
  if (!ResolveDeviceMemory(f.device, f.device_conf, &with_device, &device, &err)) return Error(err);
  MeasuredProfile measured;
  if (!f.profile.empty() && !LoadProfileReport(f.profile, &measured, &err)) return Error(err);
  JointGraph jg;
  if (!LoadStepGraph(f.common.graph, base.load, base.step, &jg, &err)) return Error(err);
  std::vector<std::string> warnings = jg.warnings;
  Plan plan;
  Program program;
  std::string label;
  if (!f.plan.empty()) {
    if (!LoadPlanFor(f.plan, f.common.graph, jg.graph, &plan, &warnings, &err)) return Error(err);
    program = plan.program;
    label = "plan " + f.plan;
  } else {
    program = BuildBaselineProgram(jg.graph, base.mode);
    label = std::string("baseline, gradient accumulation ") + AccumulationModeName(base.mode);
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
    Program baseline = BuildBaselineProgram(jg.graph, base.mode);
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
                              static_cast<int>(program.steps.size()), base.alloc_config,
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

}  // namespace

void RegisterReport(CLI::App* app, int* rc) {
  static ReportFlags report;
  CLI::App* rp = app->add_subcommand(
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
  rp->callback([rc] { *rc = RunReport(report); });
}

}  // namespace memplan
