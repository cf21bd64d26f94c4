// Reports of `memplan plan`: the plan file's contents, the JSON report (SPEC
// section 4) and the human summary. Deterministic for the same input.
#ifndef MEMPLAN_ANALYZER_REPORT_PLAN_REPORT_H_
#define MEMPLAN_ANALYZER_REPORT_PLAN_REPORT_H_

#include <string>
#include <string_view>

#include "analyzer/drivers/analysis.h"
#include "analyzer/drivers/reserved_plan.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/plan/planner.h"

namespace memplan {

// The memplan.plan/1 document for a planner result.
Plan MakePlan(const Graph& g, const std::string& graph_sha256, int64_t budget_bytes,
              const PlannerOptions& options, const PlanResult& result);

// Where SAC's dispatch charge (--granularity sac) comes from: given with
// --sac-dispatch-us, or the time objective's device preset's, measured (a
// charge above 0: the cpu preset) or an unmeasured default of 0 (the GPU
// presets, whose host time is taken to hide behind the kernels;
// cost_model.h).
enum class SacDispatchSource { kGiven, kMeasured, kUnmeasuredDefault };
SacDispatchSource SacDispatchSourceOf(const CostModel& model);
// "given", "measured", "unmeasured_default".
const char* SacDispatchSourceName(SacDispatchSource source);

// `sweep` (may be empty) adds the budget sweep as "sweep"; `budgeted` (may
// be null) adds what the budget is of, the plan's reserved-memory
// prediction and the allocation budgets tried. Under --granularity sac,
// sac_dispatch_us and sac_dispatch_source say what SAC's dispatch was
// charged and where that figure comes from.
std::string PlanReportJson(const JointGraph& jg, const PlannerOptions& options,
                           const PlanResult& result, const Plan& plan, int top,
                           const std::vector<SweepPoint>& sweep,
                           const BudgetedPlan* budgeted = nullptr);
// The sweep as a table for the terminal. Its budgets are of allocated bytes
// (SweepBudgets plans at allocation budgets), whatever --budget-of says.
std::string SweepTable(const PlanResult& result, const PlannerOptions& options,
                       const std::vector<SweepPoint>& sweep);
// Under --granularity sac and objective time, a "  dispatch  ..." line says
// what SAC's dispatch is charged and whether it is the unmeasured default.
// A device's CUDA context is marked "(estimate)" while it is the default.
std::string PlanSummary(const JointGraph& jg, const PlannerOptions& options,
                        const PlanResult& result, const Plan& plan, int top,
                        const BudgetedPlan* budgeted = nullptr);

// The summary line ("  warning   ...\n") for a budget that bounded less
// than what the step is predicted to hold: under budgets of allocated bytes,
// a reserved peak over the budget; else, with a device (may be null) and
// under a budget that is not the device's, a device total (reserved plus the
// CUDA context) over it. "" when neither, or when `target_device` is "cpu":
// a CPU step has no caching allocator. `where` follows the prediction, e.g.
// " at micro-batch 8".
std::string OverBudgetLine(BudgetOf budget_of, int64_t budget_bytes, int64_t reserved_peak_bytes,
                           const alloc::DeviceMemory* device, std::string_view target_device,
                           std::string_view where = "");

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_PLAN_REPORT_H_
