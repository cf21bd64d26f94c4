// `memplan report --html`: one self-contained HTML page (inline CSS and SVG,
// no scripts, no network) with the predicted memory over time stacked by
// tensor kind, the peak, what is alive at the peak, the plan's recompute list
// and, from a `memplan profile --json` report, the measured peak. Pure: the
// page is a string, the same bytes for the same input.
#ifndef MEMPLAN_ANALYZER_REPORT_HTML_HTML_REPORT_H_
#define MEMPLAN_ANALYZER_REPORT_HTML_HTML_REPORT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/report/profile_document.h"

namespace memplan {

// Live bytes per tensor kind while each step runs, from the simulator's
// buffer intervals plus each run step's workspace (counted as temporary).
// Row s sums to sim.live_during[s].
std::vector<std::array<int64_t, kNumTensorKinds>> LiveBytesByKind(const Graph& g,
                                                                  const Program& program,
                                                                  const SimResult& sim);

struct HtmlReportInput {
  const JointGraph* jg = nullptr;
  const Program* program = nullptr;
  const SimResult* sim = nullptr;  // simulated with collect_live_at_peak
  std::string program_label;       // e.g. "baseline, accumulation inplace"
  const Plan* plan = nullptr;      // optional: its recompute list is listed
  std::string plan_file;
  const MeasuredProfile* measured = nullptr;  // optional
  // A plan's page: its budget (a line; < 0: none) and the baseline program's
  // live bytes while each of its steps runs (drawn faintly behind, each
  // program scaled to the chart's width; empty: none).
  int64_t budget_bytes = -1;
  std::vector<int64_t> baseline_during;
  // What PyTorch's caching allocator reserves while each step runs (one entry
  // per step, steady state; a line above the allocation-level total; empty:
  // none), and the whole device's peak on `device_name` (a line; < 0: none).
  std::vector<int64_t> reserved_during;
  int64_t device_total_bytes = -1;
  std::string device_name;
  // Why the device total is an estimate, e.g. "the CUDA context, 600.00 MiB,
  // is the default": its label and the legend then say "(estimate: ...)";
  // "" when its constants were given.
  std::string device_estimate;
  int top = 20;            // rows of the live-at-peak table
  int max_columns = 1200;  // chart columns (steps are bucketed beyond)
};

// Elements carry data-* attributes with the numbers drawn: the peak group
// (#peak: data-step, data-op, data-bytes), each band (data-kind,
// data-peak-bytes: its bytes at the peak step), the measured peak line, the
// budget (#budget: data-bytes), the baseline curve (#baseline:
// data-peak-bytes), the reserved curve (#reserved: data-peak-bytes) and the
// device total (#device: data-bytes, data-device; its label ends in
// "(estimate: ...)" when device_estimate is not empty).
bool RenderHtmlReport(const HtmlReportInput& in, std::string* html, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_HTML_HTML_REPORT_H_
