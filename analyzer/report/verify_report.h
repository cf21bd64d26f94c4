// Reports of `memplan verify`: the JSON report and the human summary of a
// replayed plan.
#ifndef MEMPLAN_ANALYZER_REPORT_VERIFY_REPORT_H_
#define MEMPLAN_ANALYZER_REPORT_VERIFY_REPORT_H_

#include <string>

#include "analyzer/drivers/analysis.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/sim/simulator.h"

namespace memplan {

struct Verification {
  bool valid = false;
  std::string error;  // the simulator's, when invalid
  SimResult sim;
  bool sha_matches = false;
  // 1 within budget_bytes, 0 over, -1 not known: the program is invalid or
  // the plan has no budget (budget_bytes 0).
  int within_budget = -1;
};

std::string VerifyReportJson(const JointGraph& jg, const std::string& plan_file, const Plan& plan,
                             const Verification& v);
std::string VerifySummary(const JointGraph& jg, const std::string& plan_file, const Plan& plan,
                          const Verification& v);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_VERIFY_REPORT_H_
