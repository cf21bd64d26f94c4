// Reports of `memplan profile`: the JSON report (memplan.report/1, command
// "profile"; schemas/report.schema.json), the human summary, the measured
// overlay of the Chrome trace, and the costs file that feeds measured op
// times back to the planner (memplan.costs/1, analyzer/plan/cost_model.h).
// Keys come in a fixed order; measured times differ from run to run.
#ifndef MEMPLAN_PROFILER_PROFILE_REPORT_H_
#define MEMPLAN_PROFILER_PROFILE_REPORT_H_

#include <cstdint>
#include <string>

#include "analyzer/drivers/analysis.h"
#include "analyzer/report/analyze_report.h"
#include "analyzer/report/chrome_trace.h"
#include "profiler/profile.h"

namespace memplan {

// What was profiled: the baseline program (plan_file empty) or a plan's.
struct ProfiledProgram {
  std::string plan_file;
  AccumulationMode accumulation = AccumulationMode::kInplace;  // baseline only
  const Program* program = nullptr;
  const SimResult* sim = nullptr;  // the prediction
};

// Measured against predicted. Invariants: exact iff first_divergent_step ==
// -2 (every step's live bytes agree); relative_error = (measured -
// predicted) / max(predicted, 1).
struct ProfileComparison {
  double relative_error = 0;
  int first_divergent_step = -2;
  bool exact = false;
};
ProfileComparison Compare(const SimResult& sim, const ProfileResult& r);

// One line naming where the measurement first left the prediction, e.g.
// "step 12 (run \"fc1\"): predicted 100 bytes during / 80 after, measured
// 120 / 80"; empty when exact.
std::string DivergenceText(const Graph& g, const Program& program, const SimResult& sim,
                           const ProfileResult& r);

std::string ProfileReportJson(const JointGraph& jg, const ProfiledProgram& p,
                              const ProfileResult& r, const std::vector<std::string>& warnings);
// `top`: how many of the slowest ops to list.
std::string ProfileSummary(const JointGraph& jg, const ProfiledProgram& p, const ProfileResult& r,
                           int top);
MeasuredTrace ProfileTrace(const ProfileResult& r);
// memplan.costs/1 with the median time of one run of every op that ran.
std::string ProfileCostsJson(const Graph& g, const ProfileResult& r);

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_PROFILE_REPORT_H_
