// `memplan plan --sweep N --html F`: one self-contained HTML page (inline
// SVG, no scripts) with the curve of recompute cost against budget, the
// floor no plan can go under and the baseline peak marked, and the chosen
// budget highlighted. Sees only the sweep's points and the plan's figures;
// the same input gives the same bytes.
#ifndef MEMPLAN_ANALYZER_REPORT_HTML_SWEEP_HTML_H_
#define MEMPLAN_ANALYZER_REPORT_HTML_SWEEP_HTML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/plan/planner.h"

namespace memplan {

struct SweepHtmlInput {
  std::string graph_file, graph_name;
  std::string cost_unit;            // "time_us", "flops"
  double step_cost = 0;             // one training step, in cost_unit (for overhead %)
  int64_t baseline_peak_bytes = 0;  // keeping everything
  int64_t floor_bytes = 0;          // the lower bound: no plan goes under it
  SweepPoint chosen;                // the plan at --budget
  std::vector<SweepPoint> points;   // the sweep, in any order
};

// Elements carry the numbers drawn: #curve (data-points: the feasible
// points, budget:cost, by budget), #floor and #baseline-peak (data-bytes),
// #chosen (data-budget-bytes, data-cost). Errors: no points.
bool RenderSweepHtml(const SweepHtmlInput& in, std::string* html, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_HTML_SWEEP_HTML_H_
