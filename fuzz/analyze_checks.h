// What every graph-reading fuzz target checks once a graph has parsed: what
// `memplan analyze` does with it (lowering of forward-only input, a writer
// round trip, the baseline program under each accumulation mode, its
// simulation, the floor and the reports), aborting on a broken invariant.
#ifndef MEMPLAN_FUZZ_ANALYZE_CHECKS_H_
#define MEMPLAN_FUZZ_ANALYZE_CHECKS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/import/graph_json.h"
#include "analyzer/lower/lower.h"
#include "analyzer/report/analyze_report.h"
#include "analyzer/report/chrome_trace.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"
#include "fuzz/fuzz_check.h"

namespace memplan {

inline void CheckAnalyze(Graph input, const std::string& file) {
  GraphLoadOptions options;
  std::string err;
  // Keep one iteration cheap: shapes are tiny, but a graph with many ops
  // would make lowering and simulation the whole budget.
  if (input.ops.size() > 2000 || input.tensors.size() > 4000) return;
  JointGraph jg;
  jg.file = file;
  jg.input_ops = input.ops.size();
  jg.input_tensors = input.tensors.size();
  jg.lowered = !input.joint;
  if (input.joint) {
    jg.graph = std::move(input);
  } else if (!LowerToJoint(std::move(input), &jg.graph, &jg.warnings, &err)) {
    Check(!err.empty());
    return;
  }
  // The joint graph round-trips through the writer and the importer.
  {
    std::string written = GraphToJson(jg.graph);
    Graph again;
    std::string err2;
    if (!ParseGraph(written, "written.json", options, &again, &err2)) {
      std::fprintf(stderr, "written graph does not parse: %s\n", err2.c_str());
      std::abort();
    }
    Check(again.ops.size() == jg.graph.ops.size());
    Check(again.tensors.size() == jg.graph.tensors.size());
  }
  int64_t bound = PeakLowerBound(jg.graph);
  for (AccumulationMode mode :
       {AccumulationMode::kInplace, AccumulationMode::kOutOfPlace, AccumulationMode::kDeferred}) {
    Analysis a;
    a.accumulation = mode;
    a.program = BuildBaselineProgram(jg.graph, mode);
    SimOptions sim_options;
    std::string sim_err;
    if (!Simulate(jg.graph, a.program, sim_options, &a.sim, &sim_err)) {
      Check(!sim_err.empty());
      continue;
    }
    a.lower_bound_bytes = bound;
    // SimResult invariants (simulator.h).
    const SimResult& s = a.sim;
    Check(s.peak_bytes >= 0 && s.start_bytes >= 0 && s.end_bytes >= 0);
    Check(s.peak_bytes >= s.start_bytes);
    Check(s.live_during.size() == a.program.steps.size());
    Check(s.live_after.size() == a.program.steps.size());
    int64_t peak = s.start_bytes;
    for (int64_t v : s.live_during) peak = v > peak ? v : peak;
    Check(peak == s.peak_bytes);
    if (!s.live_after.empty()) Check(s.live_after.back() == s.end_bytes);
    int64_t sum = 0, kinds = 0;
    for (const LiveBuffer& b : s.live_at_peak) sum += b.bytes;
    for (int64_t v : s.peak_by_kind) kinds += v;
    Check(sum == s.peak_bytes && kinds == s.peak_bytes);
    // No valid program goes below the floor, in-place takeovers included.
    Check(bound <= s.peak_bytes);
    std::string report = AnalyzeReportJson(jg, a, 10);
    std::string summary = AnalyzeSummary(jg, a, 10);
    std::string trace = ChromeTraceJson(jg.graph, a.program, a.sim);
    Check(!report.empty() && !summary.empty() && !trace.empty());
  }
}

}  // namespace memplan

#endif  // MEMPLAN_FUZZ_ANALYZE_CHECKS_H_
