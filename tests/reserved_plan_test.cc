// Plans budgeted on reserved bytes (analyzer/drivers/reserved_plan.h) on gpt_tiny,
// whose plans leave the caching allocator 15-30 MiB above their peaks.
#include "analyzer/drivers/reserved_plan.h"

#include <doctest/doctest.h>

#include "analyzer/drivers/analysis.h"
#include "tests/test_util.h"

namespace memplan {
namespace {

constexpr int64_t MiB = int64_t{1} << 20;

const Graph& GptTiny() {
  static const JointGraph jg = [] {
    JointGraph out;
    std::string err;
    bool ok =
        LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &out, &err);
    INFO(err);
    REQUIRE(ok);
    return out;
  }();
  return jg.graph;
}

TEST_CASE("reserved_plan: budget kinds by name") {
  BudgetOf b = BudgetOf::kAllocated;
  CHECK(ParseBudgetOf("reserved", &b));
  CHECK(b == BudgetOf::kReserved);
  CHECK(std::string(BudgetOfName(b)) == "reserved");
  CHECK(ParseBudgetOf("allocated", &b));
  CHECK(b == BudgetOf::kAllocated);
  CHECK(ParseBudgetOf("device", &b));
  CHECK(b == BudgetOf::kDevice);
  CHECK(std::string(BudgetOfName(b)) == "device");
  CHECK_FALSE(ParseBudgetOf("gpu", &b));
}

TEST_CASE("reserved_plan: the default budget follows what runs out") {
  CHECK(DefaultBudgetOf(true, "", false) == BudgetOf::kDevice);
  CHECK(DefaultBudgetOf(true, "cpu", true) == BudgetOf::kDevice);
  CHECK(DefaultBudgetOf(false, "cuda", false) == BudgetOf::kReserved);
  CHECK(DefaultBudgetOf(false, "", true) == BudgetOf::kReserved);
  CHECK(DefaultBudgetOf(false, "cpu", true) == BudgetOf::kReserved);
  CHECK(DefaultBudgetOf(false, "", false) == BudgetOf::kAllocated);
  CHECK(DefaultBudgetOf(false, "cpu", false) == BudgetOf::kAllocated);
  CHECK(std::string(BudgetOfPhrase(BudgetOf::kAllocated)) == "of allocated bytes");
  CHECK(std::string(BudgetOfPhrase(BudgetOf::kReserved)) == "of reserved bytes");
  CHECK(std::string(BudgetOfPhrase(BudgetOf::kDevice)) == "on the device");
}

TEST_CASE("reserved_plan: allocation budget rounds: the overshoot less, then bisection") {
  AllocationBudgetRounds rounds(100);
  CHECK(rounds.budget() == 100);
  REQUIRE(rounds.Next(true, 100, 120));  // fit 100, reserved 20 over: ask for 80
  CHECK(rounds.budget() == 80);
  REQUIRE(rounds.Next(false, 95, 0));  // the planner misses 80: halfway to 100
  CHECK(rounds.budget() == 90);
  REQUIRE(rounds.Next(true, 90, 105));  // 5 over at 90: 85, above the 80 missed
  CHECK(rounds.budget() == 85);
  REQUIRE(rounds.Next(true, 85, 150));  // 50 over: 35 is below 80, so bisect (80, 85)
  CHECK(rounds.budget() == 82);
  REQUIRE(rounds.Next(false, 84, 103));  // (82, 85); its plan, the lowest peak, is 3% over
  CHECK(rounds.budget() == 83);
  CHECK_FALSE(rounds.Next(true, 83, 101));  // (82, 83): nothing left between
}

TEST_CASE("reserved_plan: the round's plan kept: fits, then within the budget, then lowest") {
  const RoundPlan fits{true, true, 90, 50};
  const RoundPlan within_cheap{false, true, 95, 20};  // the planner missed its budget
  const RoundPlan within_dear{false, true, 80, 30};
  const RoundPlan over_low{false, false, 105, 10};
  const RoundPlan over_high{false, false, 120, 5};  // met its allocation budget
  CHECK(BetterRoundPlan(fits, within_cheap));
  CHECK_FALSE(BetterRoundPlan(within_cheap, fits));
  // Within the budget: the cheaper, whatever its reserved peak.
  CHECK(BetterRoundPlan(within_cheap, within_dear));
  CHECK_FALSE(BetterRoundPlan(within_dear, within_cheap));
  // Within the budget beats over it, however cheap or low that is.
  CHECK(BetterRoundPlan(within_dear, over_low));
  CHECK_FALSE(BetterRoundPlan(over_low, within_dear));
  // Over the budget: the lower reserved peak; a tie keeps the one kept.
  CHECK(BetterRoundPlan(over_low, over_high));
  CHECK_FALSE(BetterRoundPlan(over_high, over_low));
  CHECK_FALSE(BetterRoundPlan(over_low, over_low));
  CHECK_FALSE(BetterRoundPlan(within_cheap, within_cheap));
}

TEST_CASE("reserved_plan: allocation budget rounds end when the lowest-peak plan is 5% over") {
  // The planner misses 60 and peaks at 70, reserving 106: no lower plan is
  // likely to reserve 6 less.
  AllocationBudgetRounds rounds(100);
  REQUIRE(rounds.Next(true, 100, 140));  // 60
  CHECK_FALSE(rounds.Next(false, 70, 106));
  // 105 is not over by more than 5%: bisect (60, 100).
  AllocationBudgetRounds edge(100);
  REQUIRE(edge.Next(true, 100, 140));
  REQUIRE(edge.Next(false, 70, 105));
  CHECK(edge.budget() == 80);
  // A plan that met its budget goes on however far over it is: a lower
  // budget may still lower the peak.
  AllocationBudgetRounds met(100);
  REQUIRE(met.Next(true, 70, 130));
  CHECK(met.budget() == 40);
  // The lowest peak decides, not the last plan: 80 -> 103 is the lowest-peak
  // plan when a later miss peaks at 85 and reserves 120.
  AllocationBudgetRounds lowest(100);
  REQUIRE(lowest.Next(true, 100, 140));
  REQUIRE(lowest.Next(false, 80, 103));  // (60, 100): 80
  REQUIRE(lowest.Next(false, 85, 120));  // (80, 100): 90
  CHECK(lowest.budget() == 90);
  CHECK_FALSE(lowest.Next(false, 79, 106));  // now the lowest peak is 6% over
}

TEST_CASE("reserved_plan: allocation budget rounds never ask for a budget the plan meets") {
  // A plan with slack under its budget (whole modules recompute or not): at
  // 100 it peaks at 70 and reserves 105. The budget less the overshoot (95)
  // would give the same plan again; its peak less the overshoot asks for 65.
  AllocationBudgetRounds rounds(100);
  REQUIRE(rounds.Next(true, 70, 105));
  CHECK(rounds.budget() == 65);
  // A plan whose peak is above the budget less the overshoot: as before.
  AllocationBudgetRounds close(100);
  REQUIRE(close.Next(true, 97, 105));
  CHECK(close.budget() == 95);
  // At the budget less the overshoot exactly: its peak less it.
  AllocationBudgetRounds at(100);
  REQUIRE(at.Next(true, 95, 105));
  CHECK(at.budget() == 90);
  // Below the highest budget the planner missed: bisect as before.
  AllocationBudgetRounds missed(100);
  REQUIRE(missed.Next(true, 100, 140));  // 60
  REQUIRE(missed.Next(false, 0, 0));     // missed 60: 80
  CHECK(missed.budget() == 80);
  REQUIRE(missed.Next(true, 50, 105));  // 45 is below 60: bisect (60, 80)
  CHECK(missed.budget() == 70);
}

TEST_CASE("reserved_plan: whole-module plans: the next budget is below the plan that missed") {
  // At 130 MiB reserved, gpt_tiny's module plan peaks at 118.9 MiB and
  // reserves 138 MiB. Lowering the 130 MiB allocation budget by the 8 MiB
  // overshoot gives that plan back (122 MiB, then 114 MiB: three plans); its
  // peak less the overshoot (110.9 MiB) needs a plan that drops more.
  PlannerOptions options;
  options.granularity = Granularity::kModule;
  BudgetedPlan out;
  std::string err;
  REQUIRE(PlanForBudget(GptTiny(), 130 * MiB, BudgetOf::kReserved, options, alloc::Config(), 2,
                        &out, &err));
  REQUIRE(out.feasible);
  CHECK(out.reserved.reserved_peak_bytes <= 130 * MiB);
  REQUIRE(out.allocation_budgets.size() == 2);
  CHECK(out.allocation_budgets[1] < 119 * MiB);
  CHECK(out.plan.best.sim.peak_bytes <= out.allocation_budgets[1]);
}

TEST_CASE("reserved_plan: allocated budgets plan once and predict what is reserved") {
  BudgetedPlan out;
  std::string err;
  REQUIRE(PlanForBudget(GptTiny(), 130 * MiB, BudgetOf::kAllocated, PlannerOptions(),
                        alloc::Config(), 2, &out, &err));
  CHECK(out.allocation_budgets == std::vector<int64_t>{130 * MiB});
  CHECK(out.feasible == out.plan.feasible);
  REQUIRE(out.feasible);
  CHECK(out.plan.best.sim.peak_bytes <= 130 * MiB);
  // The allocator reserves more than the allocation-level peak: here more
  // than the budget itself.
  CHECK(out.reserved.reserved_peak_bytes >= out.plan.best.sim.peak_bytes);
  CHECK(out.reserved.reserved_peak_bytes > 130 * MiB);
}

TEST_CASE("reserved_plan: a reserved budget lowers the allocation budget until it fits") {
  const Graph& g = GptTiny();
  BudgetedPlan out;
  std::string err;
  REQUIRE(PlanForBudget(g, 130 * MiB, BudgetOf::kReserved, PlannerOptions(), alloc::Config(), 2,
                        &out, &err));
  REQUIRE(out.feasible);
  CHECK(out.reserved.reserved_peak_bytes <= 130 * MiB);
  REQUIRE(out.allocation_budgets.size() >= 2);
  CHECK(out.allocation_budgets.front() == 130 * MiB);
  for (size_t i = 1; i < out.allocation_budgets.size(); ++i)
    CHECK(out.allocation_budgets[i] < out.allocation_budgets.front());
  CHECK(out.plan.best.sim.peak_bytes <= out.allocation_budgets.back());
  // The returned prediction is the plan's own.
  alloc::ReservedReport again;
  REQUIRE(PredictPlanReserved(g, out.plan.best, alloc::Config(), 2, &again, &err));
  CHECK(again.reserved_peak_bytes == out.reserved.reserved_peak_bytes);

  // Where nothing fits: infeasible, with the lowest reserved peak met, and
  // never more plans than the rounds allow.
  BudgetedPlan none;
  REQUIRE(PlanForBudget(g, 110 * MiB, BudgetOf::kReserved, PlannerOptions(), alloc::Config(), 2,
                        &none, &err));
  CHECK_FALSE(none.feasible);
  CHECK(none.reserved.reserved_peak_bytes > 110 * MiB);
  CHECK(none.allocation_budgets.size() <= static_cast<size_t>(kMaxReservedRounds));
}

TEST_CASE("reserved_plan: a device budget plans the reserved peak below budget - context") {
  const Graph& g = GptTiny();
  alloc::DeviceMemory d;
  REQUIRE(alloc::FindDeviceMemory("h100", &d));
  PlannerOptions options;
  BudgetedPlan out;
  std::string err;
  const int64_t budget = 750LL << 20;
  REQUIRE_MESSAGE(
      PlanForBudget(g, budget, BudgetOf::kDevice, options, alloc::Config(), 2, &out, &err, &d),
      err);
  REQUIRE(out.feasible);
  REQUIRE(out.has_device);
  CHECK(out.device_total.total_bytes <= budget);
  CHECK(out.allocation_budgets.front() == budget - d.cuda_context_bytes);
  CHECK(out.device_total.reserved_peak_bytes == out.reserved.reserved_peak_bytes);
  // The workspaces are held by the allocator: without them it reserves less.
  alloc::ReservedReport bare;
  REQUIRE(PredictPlanReserved(g, out.plan.best, alloc::Config(), 2, &bare, &err));
  CHECK(bare.reserved_peak_bytes < out.reserved.reserved_peak_bytes);

  CHECK_FALSE(PlanForBudget(g, budget, BudgetOf::kDevice, options, alloc::Config(), 2, &out, &err));
  CHECK(err == "a device budget needs a device (--device)");
}

}  // namespace
}  // namespace memplan
