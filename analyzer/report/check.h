// `memplan check`: a CI gate on the predicted peak (SPEC sections 4 and 5).
//
// Conditions, each inclusive (equality passes); budget and regression each
// apply when given, and at least one of them is:
//  - budget:     the bytes the budget bounds (budget_of, reserved_plan.h) <=
//    budget_bytes: peak_bytes (allocated), reserved_peak_bytes (the caching
//    allocator's steady-state reserved peak of the program) or
//    device_total_bytes (that plus the CUDA context);
//  - regression: peak_bytes <= limit_bytes, where limit_bytes =
//    baseline_peak + floor(baseline_peak * tolerance), computed exactly from
//    the decimal text of the tolerance (so "2%" of 1000 bytes allows 1020,
//    and 1021 fails).
//  - plan (with --plan): the plan's step program replays on the graph.
// The baseline peak is read from an earlier memplan.report/1 (BaselinePointer
// names the field per command).
#ifndef MEMPLAN_ANALYZER_REPORT_CHECK_H_
#define MEMPLAN_ANALYZER_REPORT_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/drivers/reserved_plan.h"

namespace memplan {

// A non-negative tolerance as an exact fraction numerator / denominator.
// Invariant: denominator is a power of ten, numerator >= 0.
struct Tolerance {
  std::string text;  // as given: "2%" or "0.02"
  int64_t numerator = 0;
  int64_t denominator = 1;
  double value() const { return static_cast<double>(numerator) / denominator; }
};

// "2%", "2.5%", "0.02", "0". False, with a message quoting the text, on
// anything else (negative, empty, "2 %", more than 9 decimals, over 1000%).
bool ParseTolerance(std::string_view text, Tolerance* out, std::string* err);

// baseline + floor(baseline * tolerance), saturating at INT64_MAX.
int64_t RegressionLimit(int64_t baseline_bytes, const Tolerance& tolerance);

// The peak read from a baseline report.
struct BaselinePeak {
  std::string file;
  std::string command;  // the report's command
  std::string pointer;  // JSON pointer of the peak field, e.g. "/peak_bytes"
  std::string graph;    // the report's /graph/name, "" if absent
  int64_t peak_bytes = 0;
};

// The field that holds the peak in a report of `command`: analyze, check,
// verify "/peak_bytes"; plan "/predicted/peak_bytes"; profile
// "/predicted_peak_bytes". Empty for another command.
std::string BaselinePointer(std::string_view command);

// Reads the peak of a memplan.report/1. Errors name the file, the JSON
// pointer and what was expected.
bool ParseBaselineReport(const std::string& text, const std::string& file, BaselinePeak* out,
                         std::string* err);
bool LoadBaselineReport(const std::string& path, BaselinePeak* out, std::string* err);

// One condition. expected/actual are bytes, except for the plan condition
// (strings: "valid" and the simulator's message).
struct CheckCondition {
  std::string name;       // "budget", "regression", "plan"
  std::string condition;  // e.g. "peak_bytes <= budget_bytes"
  bool passed = false;
  bool bytes = true;  // expected/actual are byte counts
  int64_t expected_bytes = 0, actual_bytes = 0;
  std::string expected_text, actual_text;
  std::string message;  // one human sentence
};

// What was checked. peak_* describe the program (baseline or plan).
struct CheckInput {
  std::string graph_file;
  std::string plan_file;                 // "" for the baseline program
  std::string accumulation = "inplace";  // of the baseline program
  std::string optimizer = "none";        // optimizer state added (optimizer_state.h)
  std::optional<bool> outputs_held;      // the graph's source.outputs_held
  bool has_budget = true;
  int64_t budget_bytes = 0;
  BudgetOf budget_of = BudgetOf::kAllocated;  // what budget_bytes bounds
  // Predicted when the budget bounds reserved bytes or the device (-1 otherwise).
  int64_t reserved_peak_bytes = -1;
  int64_t device_total_bytes = -1;  // kDevice: reserved_peak_bytes + the CUDA context
  bool plan_valid = true;
  std::string plan_error;  // the simulator's message when !plan_valid
  int64_t peak_bytes = 0;
  int peak_step = -1;
  std::string peak_op;  // "" when none
  bool has_baseline = false;
  BaselinePeak baseline;
  Tolerance tolerance;
};

// Invariant: passed == every condition passed.
struct CheckResult {
  bool passed = true;
  int64_t limit_bytes = 0;  // the regression limit (has_baseline only)
  std::vector<CheckCondition> conditions;
};

CheckResult EvaluateCheck(const CheckInput& in);

enum class CheckFormat { kText, kGithub, kMarkdown };
bool ParseCheckFormat(std::string_view name, CheckFormat* out);

// The memplan.report/1 check report. Deterministic.
std::string CheckReportJson(const JointGraph& jg, const CheckInput& in, const CheckResult& r,
                            const std::vector<std::string>& warnings);
// Text summary, GitHub workflow commands, or a Markdown summary.
std::string CheckOutput(const CheckInput& in, const CheckResult& r, CheckFormat format);

// A GitHub workflow-command message: "%" "\r" "\n" escaped (%25 %0D %0A).
std::string GithubEscape(std::string_view s);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_CHECK_H_
