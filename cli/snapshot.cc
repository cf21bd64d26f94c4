// memplan snapshot: the predicted step as a PyTorch memory snapshot pickle.
// memplan compare: a recorded snapshot against the prediction.
#include "analyzer/report/memviz/snapshot.h"

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/base/file_io.h"
#include "analyzer/base/units.h"
#include "analyzer/base/version.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/report/analyze_report.h"
#include "analyzer/report/memviz/predicted.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memplan {
namespace {

struct SnapshotFlags {
  CommonFlags common;
  StepFlags optimizer;
  std::string plan, out, snapshot, json, alloc_conf;
  std::string accumulation = "inplace";
  int iterations = alloc::kDefaultReservedIterations;
  bool quiet = false;
};

// The predicted snapshot of the baseline, or of --plan's program.
int Predict(const SnapshotFlags& f, JointGraph* jg, memviz::Snapshot* predicted,
            alloc::ReservedReport* report) {
  BaselineInputs base;
  std::string err;
  if (!ParseBaselineFlags(f.common, f.optimizer, f.accumulation, f.alloc_conf, &base, &err))
    return Error(err);
  if (f.iterations < 1 || f.iterations > 100)
    return Error(fmt::format("--iterations {}: expected 1 to 100", f.iterations));
  if (!LoadStepGraph(f.common.graph, base.load, base.step, jg, &err)) return Error(err);
  PrintWarnings(jg->warnings);
  Program program;
  SimResult sim;
  if (f.plan.empty()) {
    Analysis a;
    if (!AnalyzeBaseline(jg->graph, base.mode, &a, &err)) return Error(f.common.graph + ": " + err);
    program = std::move(a.program);
    sim = std::move(a.sim);
  } else {
    Plan plan;
    if (!LoadPlanFile(f.plan, jg->graph, &plan, &err)) return Error(err);
    SimOptions sim_options;
    sim_options.require_complete = true;
    if (!Simulate(jg->graph, plan.program, sim_options, &sim, &err))
      return Error(f.plan + ": invalid program: " + err);
    program = std::move(plan.program);
  }
  if (!memviz::PredictSnapshot(jg->graph, program, sim, base.alloc_config, f.alloc_conf,
                               f.iterations, f.common.graph, predicted, report, &err))
    return Error(f.common.graph + ": " + err);
  return kExitOk;
}

int RunSnapshot(const SnapshotFlags& f) {
  JointGraph jg;
  memviz::Snapshot predicted;
  alloc::ReservedReport report;
  if (int rc = Predict(f, &jg, &predicted, &report); rc != kExitOk) return rc;
  std::string err;
  if (!WriteFile(f.out, memviz::SnapshotToPickle(predicted), &err)) return Error(err);
  if (!f.quiet)
    std::printf(
        "wrote %s: %zu trace entries over %d steps, %zu segments at the end; allocated peak %s, "
        "reserved peak %s\nopen it at https://pytorch.org/memory_viz (or python -m "
        "torch.cuda._memory_viz trace_plot %s -o trace.html)\n",
        f.out.c_str(), predicted.trace.size(), report.iterations, predicted.segments.size(),
        FormatBytes(report.allocated_peak_bytes).c_str(),
        FormatBytes(report.reserved_peak_bytes).c_str(), f.out.c_str());
  ExitNow(kExitOk);
}

double RelativeError(int64_t predicted, int64_t measured) {
  return measured == 0 ? 0.0
                       : static_cast<double>(predicted - measured) / static_cast<double>(measured);
}

std::string ComparisonJson(const SnapshotFlags& f, const memviz::SnapshotComparison& c) {
  auto curve = [](const memviz::SnapshotCurve& s) {
    return nlohmann::ordered_json{
        {"allocated_peak_bytes", s.allocated_peak}, {"reserved_peak_bytes", s.reserved_peak},
        {"allocated_end_bytes", s.allocated_end},   {"reserved_end_bytes", s.reserved_end},
        {"segments_end", s.segments_end},           {"allocs", s.allocs}};
  };
  nlohmann::ordered_json j{
      {"format", "memplan.compare/1"},
      {"memplan_version", MemplanVersion()},
      {"graph", f.common.graph},
      {"snapshot", f.snapshot},
      {"plan", f.plan.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.plan)},
      {"measured", curve(c.measured)},
      {"predicted", curve(c.predicted)},
      {"allocated_peak_error",
       RelativeError(c.predicted.allocated_peak, c.measured.allocated_peak)},
      {"reserved_peak_error", RelativeError(c.predicted.reserved_peak, c.measured.reserved_peak)},
      {"size_overlap", c.size_overlap},
      {"aligned_at_predicted_alloc", c.aligned_at_predicted_alloc},
      {"matching_allocs", c.matching_allocs}};
  if (c.first_divergence >= 0)
    j["first_divergence"] = {{"alloc_index", c.first_divergence},
                             {"measured_size", c.measured_size_at_divergence},
                             {"predicted_size", c.predicted_size_at_divergence},
                             {"measured_frame", c.measured_frame_at_divergence},
                             {"predicted_frame", c.predicted_frame_at_divergence}};
  else
    j["first_divergence"] = nullptr;
  return j.dump(2) + "\n";
}

std::string ComparisonText(const memviz::SnapshotComparison& c) {
  auto line = [](const char* what, int64_t measured, int64_t predicted) {
    return fmt::format("  {:<10} measured {:>12}  predicted {:>12}  ({:+.2f}%)\n", what,
                       FormatBytes(measured), FormatBytes(predicted),
                       100 * RelativeError(predicted, measured));
  };
  std::string out = "peaks (allocated: live requested bytes; reserved: segment bytes):\n";
  out += line("allocated", c.measured.allocated_peak, c.predicted.allocated_peak);
  out += line("reserved", c.measured.reserved_peak, c.predicted.reserved_peak);
  out += fmt::format("  segments   measured {:>12}  predicted {:>12}  (at the end)\n",
                     c.measured.segments_end, c.predicted.segments_end);
  if (c.aligned_at_predicted_alloc > 0)
    out += fmt::format(
        "allocs: the measured trace starts at predicted alloc {} (the ones before are not in "
        "the recording)\n",
        c.aligned_at_predicted_alloc);
  if (c.first_divergence < 0) {
    out += fmt::format("allocs: the first {} agree in size, in order (measured {}, predicted {})\n",
                       c.matching_allocs, c.measured.allocs, c.predicted.allocs);
  } else {
    out += fmt::format(
        "allocs: the first {} agree in size; alloc {} differs: measured {} bytes at {}, predicted "
        "{} bytes at {}\n",
        c.matching_allocs, c.first_divergence, c.measured_size_at_divergence,
        c.measured_frame_at_divergence, c.predicted_size_at_divergence,
        c.predicted_frame_at_divergence);
  }
  return out;
}

int RunCompare(const SnapshotFlags& f) {
  std::string bytes, err;
  if (!ReadFile(f.snapshot, &bytes, &err)) return Error(err);
  memviz::Snapshot measured;
  if (!memviz::ParseSnapshot(bytes, &measured, &err))
    return Error(f.snapshot + ": " + err +
                 " (expected a pickle written by torch.cuda.memory._dump_snapshot)");
  JointGraph jg;
  memviz::Snapshot predicted;
  alloc::ReservedReport report;
  if (int rc = Predict(f, &jg, &predicted, &report); rc != kExitOk) return rc;
  memviz::SnapshotComparison c;
  if (!memviz::CompareSnapshots(measured, predicted, &c, &err))
    return Error(f.snapshot + ": " + err);
  if (!f.json.empty() && !WriteFile(f.json, ComparisonJson(f, c), &err)) return Error(err);
  if (!f.quiet) std::fputs(ComparisonText(c).c_str(), stdout);
  ExitNow(kExitOk);
}

void AddPredictionFlags(CLI::App* cmd, SnapshotFlags* f) {
  AddCommon(cmd, &f->common);
  AddStepFlags(cmd, &f->optimizer);
  cmd->add_option("--plan", f->plan, "predict this plan's step program instead of the baseline");
  cmd->add_option("--accumulation", f->accumulation,
                  "baseline gradient accumulation: inplace, out_of_place, deferred")
      ->check(CLI::IsMember({"inplace", "out_of_place", "deferred"}))
      ->capture_default_str();
  cmd->add_option("--alloc-conf", f->alloc_conf,
                  "PYTORCH_CUDA_ALLOC_CONF text, e.g. expandable_segments:True");
  cmd->add_option("--iterations", f->iterations, "training steps to replay (1 to 100)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", f->quiet, "print nothing on success");
}

}  // namespace

void RegisterSnapshotCommands(CLI::App* app, int* rc) {
  static SnapshotFlags snapshot, compare;
  CLI::App* s = app->add_subcommand(
      "snapshot", "write the predicted step as a PyTorch memory snapshot (memory_viz pickle)");
  AddPredictionFlags(s, &snapshot);
  s->add_option("-o,--out", snapshot.out, "the pickle to write")->required();
  s->footer(
      "The pickle has the layout of torch.cuda.memory._snapshot(): segments with blocks and the "
      "device trace (alloc, free_requested, free_completed, segment_alloc, ...), each entry's "
      "frames naming the tensor, the op and its module scope.");
  s->callback([rc] { *rc = RunSnapshot(snapshot); });

  CLI::App* c = app->add_subcommand(
      "compare", "compare a recorded PyTorch memory snapshot with the predicted step");
  AddPredictionFlags(c, &compare);
  c->add_option("SNAPSHOT", compare.snapshot,
                "pickle from torch.cuda.memory._dump_snapshot (recorded with "
                "_record_memory_history)")
      ->required();
  c->add_option("--json", compare.json, "also write the comparison as JSON (memplan.compare/1)");
  c->footer(
      "The pickle is read as data only: an opcode that would build a Python object is an "
      "error. Exit 2 when the file is no snapshot or records another model's step.");
  c->callback([rc] { *rc = RunCompare(compare); });
}

}  // namespace memplan
