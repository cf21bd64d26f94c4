// Plans whose budget is what PyTorch's CUDA caching allocator reserves, not
// the allocation-level peak: a plan that fits allocated bytes but not the
// reserved ones does not fit.
//
// What it sees: the joint graph, a budget, the planner's options and an
// allocator configuration. What it returns: the planner's result for the
// allocation budget it ended with, that plan's reserved-memory prediction
// (alloc/reserved.h: its program's buffers and op workspaces, replayed for
// `iterations` training steps) and the allocation budgets it tried.
//
// Recipe (BudgetOf::kReserved): plan at the budget (PlanCheckpoints);
// predict the plan's reserved peak; while it is over the budget, plan again
// with the allocation budget lowered by the overshoot (or, where the plan's
// own allocated peak is that low already, its peak less the overshoot: the
// same plan must not come back), or, once that is below what the planner
// can meet, halfway between the two allocation budgets known to fail either
// way; at most kMaxReservedRounds plans, and none after a plan that missed
// its allocation budget once the plan with the lowest allocated peak met so
// far reserves more than kHopelessOvershoot over the budget (the planner can
// go little lower, and a plan that peaks higher seldom reserves less). The
// first plan that met its allocation budget and whose reserved peak fits is
// returned; else the cheapest whose reserved peak fits where the planner
// missed its allocation budget (its lowest-peak plan: it fits, but the
// rounds go on for a cheaper one); if none fits, the one with the lowest
// reserved peak (feasible false). BudgetOf::kAllocated plans once and only
// predicts.
//
// Complexity: up to kMaxReservedRounds plans plus as many reserved replays.
//
// Where it falls short: the planner itself never sees fragmentation, so a
// plan that would fit the reserved budget at a higher allocation budget than
// the rounds reach is missed; the reserved peak is not monotone in the
// allocation budget, so lowering it can overshoot the cheapest plan; the
// hopeless overshoot is a rule of thumb (on the Llama-2 searches of
// bench/search_speed.py, plans 1-3 GB above the lowest peak reserved up to
// 4% less than it, and no batch whose lowest-peak plan was 5% over fitted).
#ifndef MEMPLAN_ANALYZER_DRIVERS_RESERVED_PLAN_H_
#define MEMPLAN_ANALYZER_DRIVERS_RESERVED_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/alloc/caching_allocator.h"
#include "analyzer/alloc/device_memory.h"
#include "analyzer/alloc/reserved.h"
#include "analyzer/plan/planner.h"

namespace memplan {

inline constexpr int kMaxReservedRounds = 8;
// The rounds end after a plan that missed its allocation budget once the
// lowest-peak plan reserves more than this share over the budget.
inline constexpr double kHopelessOvershoot = 0.05;

// kDevice: the reserved peak plus what lives outside the allocator (the CUDA
// context, alloc/device_memory.h); planned as kReserved on the budget less
// the context.
enum class BudgetOf { kAllocated, kReserved, kDevice };
bool ParseBudgetOf(std::string_view name, BudgetOf* out);
const char* BudgetOfName(BudgetOf b);
// What a summary says the budget bounded: "of allocated bytes", "of
// reserved bytes", "on the device".
const char* BudgetOfPhrase(BudgetOf b);

// The default of --budget-of (SPEC section 6, docs/budget.md): what runs
// out. kDevice when the whole device is modelled (`with_device`: --device
// h100|h200|a100); else kReserved for a step that targets a GPU
// (`target_device` "cuda", the graph's source.target_device) or when an
// allocator configuration is given (`alloc_conf_given`: --alloc-conf); else
// kAllocated: a CPU step has no caching allocator.
BudgetOf DefaultBudgetOf(bool with_device, std::string_view target_device, bool alloc_conf_given);

// The allocation budgets of the recipe above, one round at a time, for any
// measure of a plan against `target` bytes (the reserved budget): start at
// `target`; after a plan that met its allocation budget (planner_fit) but
// measured over `target`, ask for the overshoot less, or for the plan's own
// peak (`plan_peak`) less it where the plan already meets the budget less
// the overshoot; below what the planner can meet, bisect between the highest
// budget it missed and the lowest whose plan measured over; none once the
// planner missed its budget while the plan with the lowest peak so far
// measured over `target` by more than kHopelessOvershoot. Invariant:
// lo < budget < hi while the search goes on.
class AllocationBudgetRounds {
 public:
  explicit AllocationBudgetRounds(int64_t target) : target_(target), budget_(target), hi_(target) {}
  int64_t budget() const { return budget_; }  // the allocation budget to plan at
  // Records the plan at budget(); false when no budget is left to try (the
  // caller stops after kMaxReservedRounds plans, or once a plan fits).
  bool Next(bool planner_fit, int64_t plan_peak, int64_t measured);

 private:
  int64_t target_, budget_, hi_, lo_ = -1;
  int64_t lowest_peak_ = -1, lowest_peak_measured_ = 0;  // the lowest-peak plan so far
};

// One round's plan as PlanForBudget ranks it: `fits` (it met its allocation
// budget and its bytes are within the budget), `within` (its bytes are within
// the budget, whether or not the planner met its allocation budget).
struct RoundPlan {
  bool fits = false;
  bool within = false;
  int64_t reserved_peak_bytes = 0;
  double recompute_cost = 0;
};
// Whether `now` is kept over `kept`: a plan that fits first; then, within
// the budget, the cheaper; then the lower reserved peak (ties keep `kept`).
bool BetterRoundPlan(const RoundPlan& now, const RoundPlan& kept);

// Invariants: allocation_budgets is non-empty, its first entry the budget
// (less the CUDA context for kDevice),
// each later one another; plan is the planner's result at one of them;
// feasible means plan.feasible for kAllocated, reserved.reserved_peak_bytes
// <= budget for kReserved, device_total.total_bytes <= budget for kDevice
// (a plan whose bytes fit fits, even where the planner missed the allocation
// budget it was given: as the micro-batch search counts it); has_device when
// a device was given (then device_total is of `reserved`, whose replay held
// the device's library workspaces).
struct BudgetedPlan {
  BudgetOf budget_of = BudgetOf::kAllocated;
  bool feasible = false;  // the plan fits the budget in the bytes budget_of names
  PlanResult plan;
  alloc::ReservedReport reserved;  // of plan.best's program
  std::vector<int64_t> allocation_budgets;
  int64_t allocation_budget = 0;  // the one `plan` was made at
  bool has_device = false;
  alloc::DeviceMemory device;
  alloc::DeviceTotal device_total;
};

// The reserved-memory prediction of one planned program.
// `persistent`: blocks held from before the first step (IntervalsWithWorkspaces).
bool PredictPlanReserved(const Graph& g, const ScoredPlan& plan, const alloc::Config& config,
                         int iterations, alloc::ReservedReport* out, std::string* err,
                         const std::vector<int64_t>& persistent = {});

bool PlanForBudget(const Graph& g, int64_t budget, BudgetOf budget_of,
                   const PlannerOptions& options, const alloc::Config& config, int iterations,
                   BudgetedPlan* out, std::string* err,
                   const alloc::DeviceMemory* device = nullptr);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_DRIVERS_RESERVED_PLAN_H_
