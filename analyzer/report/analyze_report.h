// Reports of `memplan analyze`: the JSON report (SPEC section 4), the human
// summary, and the Chrome trace. All are deterministic: same input, same bytes.
#ifndef MEMPLAN_ANALYZER_REPORT_ANALYZE_REPORT_H_
#define MEMPLAN_ANALYZER_REPORT_ANALYZE_REPORT_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"

namespace memplan {

// The "graph" object every report carries.
nlohmann::ordered_json GraphReportJson(const JointGraph& jg);
// The training-loop convention source.outputs_held states, e.g. "output held
// through the backward (source.outputs_held)"; "" when the graph does not say.
std::string OutputsHeldPhrase(std::optional<bool> outputs_held);
// "  compiled  ..." when the step runs under torch.compile (source.compile),
// then "  loop      <OutputsHeldPhrase>", each with its newline; "" when the
// graph states neither.
std::string LoopLine(const Graph& g);
// "  rank      ..." for a rank's step (parallel/rank_step.h); "" otherwise.
std::string ParallelLine(const JointGraph& jg);
// What every memplan.report/1 starts with: format, command, memplan_version
// and graph, in that order.
nlohmann::ordered_json ReportHeader(const char* command, const JointGraph& jg);
// The `top` largest buffers alive at the peak: tensor, bytes, kind, producer,
// scope, and held_by when only a view of the buffer is alive.
nlohmann::ordered_json LiveAtPeakJson(const Graph& g, const SimResult& sim, int top);

// `top` caps the live_at_peak list (the total count is reported beside it).
std::string AnalyzeReportJson(const JointGraph& jg, const Analysis& a, int top);
std::string AnalyzeSummary(const JointGraph& jg, const Analysis& a, int top);

// A reserved-memory prediction as the reports' "reserved" object, and as the
// summaries' "  reserved  ..." line (with its newline) against the
// allocation-level `peak_bytes`.
nlohmann::ordered_json ReservedJson(const alloc::ReservedReport& rr);
std::string ReservedLine(const alloc::ReservedReport& rr, int64_t peak_bytes);
// Which of a device's constants are defaults rather than given with
// --device-conf (alloc/device_memory.h names their sources): the CUDA
// context (an estimate until measured), the capacity (the preset's, from
// public logs of that part) and the library workspaces (PyTorch's defaults
// for the architecture). A constant given with its default's value counts as
// the default.
struct DeviceDefaults {
  bool context = false;
  bool capacity = false;
  bool workspace = false;
};
DeviceDefaults DeviceDefaultsOf(const alloc::DeviceMemory& d);
// The whole device (--device), for analyze and plan alike: the JSON object
// (context_is_estimate, capacity_is_preset and workspace_is_default say which
// constants are defaults) and the summary line, which marks the CUDA context
// "(estimate)" while it is the default.
nlohmann::ordered_json DeviceJson(const alloc::DeviceMemory& d, const alloc::DeviceTotal& t);
std::string DeviceLine(const alloc::DeviceMemory& d, const alloc::DeviceTotal& t);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_ANALYZE_REPORT_H_
