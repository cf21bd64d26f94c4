#include "analyzer/drivers/reserved_plan.h"

#include "analyzer/base/enum_table.h"
#include "analyzer/drivers/analysis.h"

namespace memplan {

namespace {

constexpr EnumName<BudgetOf> kBudgetOfs[] = {
    {BudgetOf::kAllocated, "allocated"},
    {BudgetOf::kReserved, "reserved"},
    {BudgetOf::kDevice, "device"},
};

}  // namespace

bool ParseBudgetOf(std::string_view name, BudgetOf* out) {
  return ParseEnum(kBudgetOfs, name, out);
}

const char* BudgetOfName(BudgetOf b) { return NameOf(kBudgetOfs, b, "?"); }

const char* BudgetOfPhrase(BudgetOf b) {
  switch (b) {
    case BudgetOf::kAllocated:
      return "of allocated bytes";
    case BudgetOf::kReserved:
      return "of reserved bytes";
    case BudgetOf::kDevice:
      return "on the device";
  }
  return "?";
}

BudgetOf DefaultBudgetOf(bool with_device, std::string_view target_device, bool alloc_conf_given) {
  if (with_device) return BudgetOf::kDevice;
  if (target_device == "cuda" || alloc_conf_given) return BudgetOf::kReserved;
  return BudgetOf::kAllocated;
}

bool AllocationBudgetRounds::Next(bool planner_fit, int64_t plan_peak, int64_t measured) {
  if (lowest_peak_ < 0 || plan_peak < lowest_peak_) {
    lowest_peak_ = plan_peak;
    lowest_peak_measured_ = measured;
  }
  if (!planner_fit && static_cast<double>(lowest_peak_measured_ - target_) >
                          kHopelessOvershoot * static_cast<double>(target_))
    return false;  // hopeless: the planner cannot go much lower
  if (planner_fit)
    hi_ = budget_;
  else
    lo_ = budget_;
  // Ask for the overshoot less, but never for a budget the plan measured
  // over already meets (it would come back): then its own peak less the
  // overshoot. Below what the planner can meet, bisect.
  int64_t next = -1;
  if (planner_fit) {
    const int64_t over = measured - target_;
    next = budget_ - over;
    if (next >= plan_peak) next = plan_peak - over;
  }
  if (next <= lo_) next = lo_ + (hi_ - lo_) / 2;
  if (next <= lo_ || next >= hi_) return false;
  budget_ = next;
  return true;
}

bool BetterRoundPlan(const RoundPlan& now, const RoundPlan& kept) {
  if (now.fits != kept.fits) return now.fits;
  if (now.within != kept.within) return now.within;
  if (now.within) return now.recompute_cost < kept.recompute_cost;
  return now.reserved_peak_bytes < kept.reserved_peak_bytes;
}

bool PredictPlanReserved(const Graph& g, const ScoredPlan& plan, const alloc::Config& config,
                         int iterations, alloc::ReservedReport* out, std::string* err,
                         const std::vector<int64_t>& persistent) {
  const Program& program = plan.checkpoint.program;
  return alloc::PredictReserved(IntervalsWithWorkspaces(g, program, plan.sim, persistent),
                                static_cast<int>(program.steps.size()), config, iterations, out,
                                err);
}

bool PlanForBudget(const Graph& g, int64_t budget, BudgetOf budget_of,
                   const PlannerOptions& options, const alloc::Config& config, int iterations,
                   BudgetedPlan* out, std::string* err, const alloc::DeviceMemory* device) {
  *out = BudgetedPlan();
  out->budget_of = budget_of;
  if (budget_of == BudgetOf::kDevice && device == nullptr) {
    *err = "a device budget needs a device (--device)";
    return false;
  }
  std::vector<int64_t> persistent;
  if (device != nullptr) persistent = alloc::LibraryWorkspaces(*device);
  const int64_t reserved_budget =
      budget_of == BudgetOf::kDevice ? budget - device->cuda_context_bytes : budget;
  AllocationBudgetRounds rounds(reserved_budget);
  RoundPlan kept;
  for (int round = 0; round < kMaxReservedRounds; ++round) {
    out->allocation_budgets.push_back(rounds.budget());
    PlanResult result;
    if (!PlanCheckpoints(g, rounds.budget(), options, &result, err)) return false;
    alloc::ReservedReport reserved;
    if (!PredictPlanReserved(g, result.best, config, iterations, &reserved, err, persistent))
      return false;
    const bool planner_fit = result.feasible;
    const int64_t plan_peak = result.best.sim.peak_bytes;
    const int64_t reserved_peak = reserved.reserved_peak_bytes;
    const bool within = budget_of != BudgetOf::kAllocated && reserved_peak <= reserved_budget;
    const bool fits = planner_fit && (budget_of == BudgetOf::kAllocated || within);
    // A plan within the budget whose planner missed its allocation budget
    // fits too, but the rounds go on for a cheaper one that met it.
    const RoundPlan now{fits, within, reserved_peak, result.best.recompute_cost};
    const bool keep = round == 0 || BetterRoundPlan(now, kept);
    if (keep) {
      kept = now;
      out->allocation_budget = rounds.budget();
      out->plan = std::move(result);
      out->reserved = reserved;
      out->feasible = fits || within;
    }
    if (fits || budget_of == BudgetOf::kAllocated ||
        !rounds.Next(planner_fit, plan_peak, reserved_peak))
      break;
  }
  if (device != nullptr) {
    out->has_device = true;
    out->device = *device;
    out->device_total = alloc::TotalOnDevice(*device, out->reserved.reserved_peak_bytes);
  }
  return true;
}

}  // namespace memplan
