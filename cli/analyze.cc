// memplan analyze: the baseline step's peak, what is alive at it, and what
// the caching allocator (and with --device the whole device) would hold.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/drivers/analysis.h"
#include "analyzer/report/analyze_report.h"
#include "analyzer/report/chrome_trace.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"

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
  BaselineInputs base;
  std::string err;
  if (!ParseBaselineFlags(f.common, f.optimizer, f.accumulation, f.alloc_conf, &base, &err))
    return Error(err);
  Analysis a;
  if (!ResolveDeviceMemory(f.device, f.device_conf, &a.has_device, &a.device, &err))
    return Error(err);
  Progress progress(f.quiet);
  progress.Phase("loading");
  JointGraph jg;
  bool loaded = LoadStepGraph(f.common.graph, base.load, base.step, &jg, &err);
  progress.Clear();
  if (!loaded) return Error(err);
  PrintWarnings(jg.warnings);
  progress.Phase("analyzing");
  bool analyzed = AnalyzeBaseline(jg.graph, base.mode, &a, &err);
  const auto reserved_start = std::chrono::steady_clock::now();
  analyzed = analyzed &&
             PredictBaselineReserved(
                 jg.graph, base.alloc_config, f.alloc_conf, alloc::kDefaultReservedIterations, &a,
                 &err, a.has_device ? alloc::LibraryWorkspaces(a.device) : std::vector<int64_t>{});
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

}  // namespace

void RegisterAnalyze(CLI::App* app, int* rc) {
  static AnalyzeFlags analyze;
  CLI::App* a = app->add_subcommand("analyze",
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
  a->callback([rc] { *rc = RunAnalyze(analyze); });
}

}  // namespace memplan
