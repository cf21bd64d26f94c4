#include "profiler/profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "analyzer/base/json_util.h"
#include "analyzer/base/units.h"

namespace memplan {
namespace {

using ojson = nlohmann::ordered_json;

ojson StringOrNull(const std::string& s) { return s.empty() ? ojson(nullptr) : ojson(s); }

const char* StepPhaseName(const Graph& g, const Program& p, const SimResult& sim, int step) {
  if (step < 0 || static_cast<size_t>(step) >= p.steps.size()) return nullptr;
  const Step& s = p.steps[step];
  if (!s.IsRun()) return "free";
  if (sim.recompute[step]) return "recompute";
  return PhaseName(g.ops[s.op].phase);
}

std::string StepName(const Graph& g, const Program& p, int step) {
  if (step < 0) return "the resident set";
  const Step& s = p.steps[step];
  return s.IsRun() ? fmt::format("step {} (run \"{}\")", step, g.ops[s.op].id)
                   : fmt::format("step {} (free)", step);
}

// Microseconds to the nanosecond: enough for any op, and short.
double RoundUs(double us) { return std::round(us * 1000.0) / 1000.0; }

std::string Us(double us) {
  if (us >= 1e6) return fmt::format("{:.3f} s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f} ms", us / 1e3);
  return fmt::format("{:.1f} us", us);
}

}  // namespace

ProfileComparison Compare(const SimResult& sim, const ProfileResult& r) {
  ProfileComparison c;
  c.relative_error = static_cast<double>(r.measured_peak_bytes - sim.peak_bytes) /
                     static_cast<double>(std::max<int64_t>(sim.peak_bytes, 1));
  c.first_divergent_step =
      FirstDivergentStep(sim.start_bytes, sim.live_during, sim.live_after, r.measured_start_bytes,
                         r.measured_during, r.measured_after);
  c.exact = c.first_divergent_step == -2;
  return c;
}

std::string DivergenceText(const Graph& g, const Program& program, const SimResult& sim,
                           const ProfileResult& r) {
  int s = Compare(sim, r).first_divergent_step;
  if (s == -2) return "";
  if (s == -1)
    return fmt::format("the resident set: predicted {} bytes, measured {}", sim.start_bytes,
                       r.measured_start_bytes);
  auto at = [&](const std::vector<int64_t>& v) {
    return static_cast<size_t>(s) < v.size() ? fmt::format("{}", v[s]) : std::string("none");
  };
  return fmt::format("{}: predicted {} bytes while it runs / {} after, measured {} / {}",
                     StepName(g, program, s), at(sim.live_during), at(sim.live_after),
                     at(r.measured_during), at(r.measured_after));
}

std::string ProfileReportJson(const JointGraph& jg, const ProfiledProgram& p,
                              const ProfileResult& r, const std::vector<std::string>& warnings) {
  const Graph& g = jg.graph;
  const SimResult& sim = *p.sim;
  ProfileComparison c = Compare(sim, r);
  ojson doc = ReportHeader("profile", jg);
  doc["program"] = {
      {"source", p.plan_file.empty() ? "baseline" : "plan"},
      {"plan", StringOrNull(p.plan_file)},
      {"accumulation",
       p.plan_file.empty() ? ojson(AccumulationModeName(p.accumulation)) : ojson(nullptr)},
      {"steps", p.program->steps.size()}};
  doc["backend"] = r.backend;
  doc["allocator"] = r.allocator;
  doc["device"] = r.device;
  doc["device_name"] = r.device_name;
  doc["driver_version"] = StringOrNull(r.driver_version);
  doc["cuda_version"] = StringOrNull(r.cuda_version);
  doc["cupti"] = r.cupti;
  doc["repeat"] = r.repeat;
  doc["predicted_peak_bytes"] = sim.peak_bytes;
  doc["predicted_peak_step"] = sim.peak_step;
  doc["measured_source"] = r.measured_source;
  doc["measured_peak_bytes"] = r.measured_peak_bytes;
  doc["measured_peak_step"] = r.measured_peak_step;
  doc["allocator_peak_bytes"] = r.allocator_peak_bytes;
  doc["device_peak_bytes"] = r.device_peak_bytes >= 0 ? ojson(r.device_peak_bytes) : ojson(nullptr);
  doc["relative_error"] = c.relative_error;
  doc["exact"] = c.exact;
  if (c.exact) {
    doc["first_divergence"] = nullptr;
  } else {
    int s = c.first_divergent_step;
    auto at = [&](const std::vector<int64_t>& v, int64_t start) {
      if (s < 0) return ojson(start);
      return static_cast<size_t>(s) < v.size() ? ojson(v[s]) : ojson(nullptr);
    };
    const char* phase = StepPhaseName(g, *p.program, sim, s);
    ojson op = s >= 0 && p.program->steps[s].IsRun() ? ojson(g.ops[p.program->steps[s].op].id)
                                                     : ojson(nullptr);
    doc["first_divergence"] = {{"step", s},
                               {"op", op},
                               {"phase", phase ? ojson(phase) : ojson(nullptr)},
                               {"predicted_during", at(sim.live_during, sim.start_bytes)},
                               {"predicted_after", at(sim.live_after, sim.start_bytes)},
                               {"measured_during", at(r.measured_during, r.measured_start_bytes)},
                               {"measured_after", at(r.measured_after, r.measured_start_bytes)}};
  }
  doc["dropped_records"] = r.dropped_records;
  if (r.cupti) {
    const RecordSizeCheck& sc = r.size_check;
    doc["records"] = {{"memory", r.memory_records},
                      {"kernels", r.kernel_records},
                      {"untagged_memory", r.untagged_memory_records},
                      {"correlated_memory", r.correlated_memory_records},
                      {"time_attributed_memory", r.time_attributed_memory_records},
                      {"outside_memory", r.outside_memory_records},
                      {"api", r.api_records},
                      {"external_correlation", r.external_correlation_records},
                      {"size_check",
                       {{"matched", sc.matched},
                        {"disagree", sc.disagree},
                        {"max_abs_diff_bytes", sc.max_abs_diff_bytes},
                        {"total_diff_bytes", sc.total_diff_bytes},
                        {"unmatched_records", sc.unmatched_records},
                        {"unmatched_requests", sc.unmatched_requests}}},
                      {"async", r.allocator == "async" ? ojson({{"expected", r.async_expected},
                                                                {"seen", sc.async_records}})
                                                       : ojson(nullptr)},
                      {"cupti_library", r.cupti_library},
                      {"cupti_version", r.cupti_version},
                      {"cupti_built_version", r.cupti_built_version}};
  } else {
    doc["records"] = nullptr;
  }
  doc["run_time_us"] = RoundUs(r.run_us);
  doc["wall_time_us"] = RoundUs(r.wall_us);
  ojson ops = ojson::array();
  for (const OpTiming& t : r.ops) {
    const Op& op = g.ops[t.op];
    ops.push_back({{"op", op.id},
                   {"phase", PhaseName(op.phase)},
                   {"runs", t.runs},
                   {"recompute_runs", t.recompute_runs},
                   {"time_us", RoundUs(t.time_us)}});
  }
  doc["ops"] = ops;
  doc["notes"] = r.notes;
  doc["warnings"] = warnings;
  return json_util::Dump(doc, 2) + "\n";
}

std::string ProfileSummary(const JointGraph& jg, const ProfiledProgram& p, const ProfileResult& r,
                           int top) {
  const Graph& g = jg.graph;
  const SimResult& sim = *p.sim;
  ProfileComparison c = Compare(sim, r);
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  line("memplan profile " + jg.file);
  if (p.plan_file.empty())
    line(fmt::format("  program   baseline, {} steps, gradient accumulation {}",
                     p.program->steps.size(), AccumulationModeName(p.accumulation)));
  else
    line(fmt::format("  program   plan {}, {} steps", p.plan_file, p.program->steps.size()));
  std::string device = r.device_name.empty() ? r.device : r.device_name;
  if (r.backend == "cuda")
    device += fmt::format(" (driver {}, runtime {})", r.driver_version, r.cuda_version);
  line(fmt::format("  backend   {}, allocator {}, {}; {} run{}", r.backend, r.allocator, device,
                   r.repeat, r.repeat == 1 ? "" : "s"));
  std::string where;
  if (sim.peak_step >= 0) {
    const char* phase = StepPhaseName(g, *p.program, sim, sim.peak_step);
    where = fmt::format(" at {}{}", StepName(g, *p.program, sim.peak_step),
                        phase ? fmt::format(" ({})", phase) : "");
  } else {
    where = " before the first step";
  }
  line(fmt::format("  predicted {}{}", FormatBytesExact(sim.peak_bytes), where));
  std::string verdict = c.exact
                            ? "every step matches the prediction"
                            : fmt::format("{:+.4f}% of the prediction", c.relative_error * 100.0);
  line(fmt::format("  measured  {}{}, {} ({})", FormatBytesExact(r.measured_peak_bytes),
                   r.measured_peak_step >= 0 ? fmt::format(" at step {}", r.measured_peak_step)
                                             : std::string(" before the first step"),
                   verdict,
                   r.measured_source == "cupti" ? "CUPTI memory records" : "allocation counter"));
  if (!c.exact) line("  diverges  first at " + DivergenceText(g, *p.program, sim, r));
  if (r.device_peak_bytes >= 0)
    line(fmt::format("  device    {} in use over the start at the most (cudaMemGetInfo)",
                     FormatBytesExact(r.device_peak_bytes)));
  if (r.cupti)
    line(
        fmt::format("  cupti     {} memory records ({} tagged by step, {} by time), {} kernel/copy "
                    "records, {} dropped; {} {}",
                    r.memory_records, r.correlated_memory_records, r.time_attributed_memory_records,
                    r.kernel_records, r.dropped_records, r.cupti_library, r.cupti_version));
  line(fmt::format("  time      {} in ops, {} wall per run{}", Us(r.run_us), Us(r.wall_us),
                   r.repeat > 1 ? fmt::format(" (median of {})", r.repeat) : ""));
  for (const std::string& n : r.notes) line("  note      " + n);
  if (top > 0 && !r.ops.empty()) {
    std::vector<OpTiming> ops = r.ops;
    std::stable_sort(ops.begin(), ops.end(), [](const OpTiming& a, const OpTiming& b) {
      return a.time_us * a.runs > b.time_us * b.runs;
    });
    size_t shown = std::min(ops.size(), static_cast<size_t>(top));
    line("");
    line(fmt::format("slowest ops ({} of {}), time of one run:", shown, ops.size()));
    line(fmt::format("  {:>12}  {:>4}  {:<9}  {}", "time", "runs", "phase", "op"));
    for (size_t i = 0; i < shown; ++i) {
      const Op& op = g.ops[ops[i].op];
      line(fmt::format("  {:>12}  {:>4}  {:<9}  {}", Us(ops[i].time_us), ops[i].runs,
                       PhaseName(op.phase), op.id));
    }
  }
  return out;
}

MeasuredTrace ProfileTrace(const ProfileResult& r) {
  MeasuredTrace t;
  t.start_bytes = r.measured_start_bytes;
  t.live_during = r.measured_during;
  t.live_after = r.measured_after;
  t.step_begin_us = r.step_begin_us;
  t.step_end_us = r.step_end_us;
  for (const KernelSpan& k : r.kernels) t.kernels.push_back({k.name, k.step, k.start_us, k.dur_us});
  return t;
}

std::string ProfileCostsJson(const Graph& g, const ProfileResult& r) {
  ojson ops = ojson::object();
  for (const OpTiming& t : r.ops) ops[g.ops[t.op].id] = RoundUs(t.time_us);
  ojson doc = {{"format", "memplan.costs/1"},
               {"unit", "us"},
               {"graph", g.name},
               {"backend", r.backend},
               {"device", r.device_name.empty() ? r.device : r.device_name},
               {"ops", ops}};
  return json_util::Dump(doc, 2) + "\n";
}

}  // namespace memplan
