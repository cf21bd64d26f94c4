// Micro-batch planning: the accumulating peak by hand, and maximality.
#include "analyzer/drivers/microbatch.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/base/units.h"
#include "analyzer/import/graph_json.h"
#include "analyzer/report/microbatch_report.h"
#include "tests/test_util.h"

namespace memplan {
namespace {

// x [b,4] f32 (16b bytes), w [4,4] f32 (64), y [b,4] (16b), loss [] (4);
// fc.bw makes w.grad (64). Baseline steps: fc, sum, free y, fc.bw. Resident
// R = 16b + 64. Single step: sum R + 16b + 4 = 32b + 68; fc.bw R + 4 + 64 =
// 16b + 132. Accumulating (+64 for w.grad's accumulator until fc.bw, and
// during fc.bw both copies): sum 32b + 132, fc.bw 16b + 196.
constexpr const char* kJoint = R"({
  "format": "memplan.graph/1", "name": "tiny", "symbols": {"batch": 1},
  "tensors": [
    {"id": "x", "shape": ["batch", 4], "dtype": "float32", "kind": "input"},
    {"id": "w", "shape": [4, 4], "dtype": "float32", "kind": "parameter"},
    {"id": "y", "shape": ["batch", 4], "dtype": "float32"},
    {"id": "loss", "shape": [], "dtype": "float32"},
    {"id": "w.grad", "shape": [4, 4], "dtype": "float32", "kind": "gradient", "grad_of": "w"}
  ],
  "ops": [
    {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["y"]},
    {"id": "sum", "type": "sum", "inputs": ["y"], "outputs": ["loss"]},
    {"id": "fc.bw", "type": "linear_backward", "inputs": ["x", "loss"], "outputs": ["w.grad"],
     "phase": "backward"}
  ],
  "outputs": ["loss"]
})";

bool At(int64_t batch, JointGraph* out, std::string* err) {
  GraphLoadOptions o;
  o.symbol_overrides.emplace_back("batch", batch);
  out->file = "tiny.json";
  return ParseGraph(kJoint, "tiny.json", o, &out->graph, err);
}

struct Peaks {
  int64_t single = 0, accumulating = 0;
};

Peaks PeaksAt(int64_t batch) {
  JointGraph jg;
  std::string err;
  REQUIRE_MESSAGE(At(batch, &jg, &err), err);
  Program p = BuildBaselineProgram(jg.graph, AccumulationMode::kInplace);
  SimResult sim;
  REQUIRE_MESSAGE(Simulate(jg.graph, p, SimOptions(), &sim, &err), err);
  return {sim.peak_bytes, AccumulationPeak(jg.graph, p, sim)};
}

TEST_CASE("AccumulationPeak: parameter gradients alive from the start, fresh copy while made") {
  CHECK(PeaksAt(1).single == 148);        // max(100, 148)
  CHECK(PeaksAt(1).accumulating == 212);  // max(164, 212)
  CHECK(PeaksAt(5).single == 228);        // max(228, 212)
  CHECK(PeaksAt(5).accumulating == 292);  // max(292, 276)
  JointGraph jg;
  std::string err;
  REQUIRE(At(3, &jg, &err));
  CHECK(ParameterGradientBytes(jg.graph) == 64);  // does not scale with the batch
}

// The examples' baseline programs and plans at 60%: Simulate with
// accumulating_gradients gives AccumulationPeak's peak, and its live set at
// the peak sums to it and holds the accumulators not made yet.
TEST_CASE("Simulate accumulating_gradients: AccumulationPeak's peak, accumulators at it") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json", "mlp_torch.joint.graph.json"}) {
    CAPTURE(name);
    JointGraph jg;
    std::string err;
    REQUIRE(LoadJointGraph(testing::ExamplePath(name), GraphLoadOptions(), &jg, &err));
    const Graph& g = jg.graph;
    const Program baseline = BuildBaselineProgram(g, AccumulationMode::kInplace);
    PlanResult plan;
    const int64_t budget = testing::MustSimulate(g, baseline).peak_bytes * 6 / 10;
    REQUIRE_MESSAGE(PlanCheckpoints(g, budget, PlannerOptions(), &plan, &err), err);
    for (const Program* program :
         std::vector<const Program*>{&baseline, &plan.best.checkpoint.program}) {
      const SimResult plain = testing::MustSimulate(g, *program);
      SimOptions o;
      o.accumulating_gradients = true;
      SimResult acc;
      REQUIRE_MESSAGE(Simulate(g, *program, o, &acc, &err), err);
      CHECK(acc.peak_bytes == AccumulationPeak(g, *program, plain));
      CHECK(acc.start_bytes == plain.start_bytes + ParameterGradientBytes(g));
      CHECK(acc.end_bytes == plain.end_bytes);
      int64_t sum = 0, accumulators = 0;
      for (const LiveBuffer& lb : acc.live_at_peak) {
        sum += lb.bytes;
        if (lb.owner >= 0 && g.IsParameterGradient(lb.owner)) accumulators += lb.bytes;
      }
      CHECK(sum == acc.peak_bytes);
      CHECK(accumulators >= acc.peak_bytes - plain.live_during[std::max(acc.peak_step, 0)]);
    }
  }
}

// CollectLiveAtPeak after a replay without the live set gives what one
// Simulate with it gives, accumulating or not, and a live set that sums to
// the peak (the planner's trials rely on it: search.h ScoreDetailedBelow).
TEST_CASE("CollectLiveAtPeak completes a replay made without the live set") {
  for (const char* name :
       {"gpt_tiny.graph.json", "densenet_toy.graph.json", "cnn_small.joint.graph.json"}) {
    CAPTURE(name);
    JointGraph jg;
    std::string err;
    REQUIRE(LoadJointGraph(testing::ExamplePath(name), GraphLoadOptions(), &jg, &err));
    const Graph& g = jg.graph;
    const Program baseline = BuildBaselineProgram(g, AccumulationMode::kInplace);
    PlanResult plan;
    const int64_t budget = testing::MustSimulate(g, baseline).peak_bytes * 6 / 10;
    REQUIRE_MESSAGE(PlanCheckpoints(g, budget, PlannerOptions(), &plan, &err), err);
    for (bool accumulating : {false, true}) {
      CAPTURE(accumulating);
      SimOptions whole;
      whole.accumulating_gradients = accumulating;
      SimOptions lean = whole;
      lean.collect_live_at_peak = false;
      SimResult want, got;
      REQUIRE_MESSAGE(Simulate(g, plan.best.checkpoint.program, whole, &want, &err), err);
      REQUIRE_MESSAGE(Simulate(g, plan.best.checkpoint.program, lean, &got, &err), err);
      CHECK(got.live_at_peak.empty());
      REQUIRE_MESSAGE(CollectLiveAtPeak(g, plan.best.checkpoint.program, whole, &got, &err), err);
      REQUIRE(got.live_at_peak.size() == want.live_at_peak.size());
      REQUIRE_FALSE(want.live_at_peak.empty());
      for (size_t i = 0; i < want.live_at_peak.size(); ++i) {
        CHECK(got.live_at_peak[i].tensor == want.live_at_peak[i].tensor);
        CHECK(got.live_at_peak[i].owner == want.live_at_peak[i].owner);
        CHECK(got.live_at_peak[i].workspace_of == want.live_at_peak[i].workspace_of);
        CHECK(got.live_at_peak[i].bytes == want.live_at_peak[i].bytes);
      }
      CHECK(got.peak_by_kind == want.peak_by_kind);
      // The contract on its own (Simulate fills the live set through it).
      int64_t live = 0, by_kind = 0;
      for (const LiveBuffer& lb : got.live_at_peak) live += lb.bytes;
      for (int64_t bytes : got.peak_by_kind) by_kind += bytes;
      CHECK(live == got.peak_bytes);
      CHECK(by_kind == got.peak_bytes);
    }
  }
}

TEST_CASE("planner accumulating_gradients: its plan bounds the accumulating peak in one plan") {
  JointGraph jg;
  std::string err;
  REQUIRE(
      LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), GraphLoadOptions(), &jg, &err));
  const Graph& g = jg.graph;
  const Program baseline = BuildBaselineProgram(g, AccumulationMode::kInplace);
  const SimResult plain = testing::MustSimulate(g, baseline);
  // 70% of the accumulating baseline: the plain planner's plan overshoots
  // it once its accumulators are counted; the accumulating planner's fits.
  const int64_t budget = AccumulationPeak(g, baseline, plain) * 7 / 10;
  PlannerOptions o;
  PlanResult single, accumulating;
  REQUIRE(PlanCheckpoints(g, budget, o, &single, &err));
  o.accumulating_gradients = true;
  REQUIRE(PlanCheckpoints(g, budget, o, &accumulating, &err));
  REQUIRE(accumulating.feasible);
  const Program& program = accumulating.best.checkpoint.program;
  CHECK(accumulating.best.sim.peak_bytes ==
        AccumulationPeak(g, program, testing::MustSimulate(g, program)));
  CHECK(accumulating.best.sim.peak_bytes <= budget);
  const Program& p1 = single.best.checkpoint.program;
  CHECK(AccumulationPeak(g, p1, testing::MustSimulate(g, p1)) > budget);
}

MicroBatchResult Search(int64_t n, int64_t budget) {
  MicroBatchOptions o;
  o.global_batch = n;
  o.budget_bytes = budget;
  MicroBatchResult r;
  std::string err;
  REQUIRE_MESSAGE(PlanMicroBatches(At, o, &r, &err), err);
  return r;
}

TEST_CASE("PlanMicroBatches: largest micro-batch, steps, last micro-batch") {
  // One micro-batch of 10: single peak max(388, 292) <= 400.
  MicroBatchResult one = Search(10, 400);
  CHECK(one.baseline.micro_batch == 10);
  CHECK(one.baseline.accumulation_steps == 1);
  CHECK(one.baseline.next_peak_bytes == -1);
  // Budget 260: 388 > 260 at 10, so accumulate: max(32b + 132, 16b + 196)
  // <= 260 -> b = 4, exactly at the budget (inclusive); 5 needs 292.
  MicroBatchResult r = Search(10, 260);
  CHECK(r.baseline.micro_batch == 4);
  CHECK(r.baseline.accumulation_steps == 3);
  CHECK(r.baseline.last_micro_batch == 2);
  CHECK(r.baseline.balanced_micro_batch == 4);
  CHECK(r.baseline.peak_bytes == 260);
  CHECK(r.baseline.next_peak_bytes == 292);  // 5 does not fit
  CHECK(r.baseline.last_peak_bytes == 228);  // max(196, 228) at 2
  CHECK(r.checkpointed.micro_batch == 4);    // nothing to recompute here
  CHECK(r.parameter_gradient_bytes == 64);
  CHECK(Search(10, 259).baseline.micro_batch == 3);  // one byte less
  // N = 9: 4, 4, 1; as many steps with 3, 3, 3.
  MicroBatchResult odd = Search(9, 260);
  CHECK(odd.baseline.micro_batch == 4);
  CHECK(odd.baseline.accumulation_steps == 3);
  CHECK(odd.baseline.last_micro_batch == 1);
  CHECK(odd.baseline.balanced_micro_batch == 3);
  CHECK(odd.baseline.last_peak_bytes == 212);
  CHECK(LossScale(4, 9) == "4/9 = 0.444444");
  // Binary search above kExhaustiveBatches: same answer, checked monotone.
  MicroBatchResult big = Search(1000, 260);
  CHECK(big.search == "binary");
  CHECK(big.baseline.micro_batch == 4);
  CHECK(big.baseline.accumulation_steps == 250);
  CHECK(big.monotone);
  CHECK(big.evaluated.size() < 20);
  // Nothing fits: single at 4 is 196 > 190, accumulating at 1 is 212.
  MicroBatchResult none = Search(4, 190);
  CHECK(!none.baseline.found);
  CHECK(!none.checkpointed.found);
  CHECK(none.checkpointed.lowest_peak_bytes == 212);
}

TEST_CASE("PlanMicroBatches: one micro-batch can fit where accumulating ones do not") {
  // N = 2: the single peak at 2 is max(132, 164) = 164; accumulating at 1 is 212.
  MicroBatchResult r = Search(2, 200);
  CHECK(r.baseline.micro_batch == 2);
  CHECK(r.baseline.accumulation_steps == 1);
  CHECK(r.baseline.peak_bytes == 164);
}

// ---------------------------------------------------------------------------
// Budgets of reserved bytes and of the device (--budget-of reserved|device)
// ---------------------------------------------------------------------------

constexpr int64_t kMiB = int64_t{1} << 20;

MicroBatchResult SearchOf(const GraphAtBatch& at, int64_t n, int64_t budget, BudgetOf of,
                          const alloc::DeviceMemory* device = nullptr, int probe_threads = 1) {
  MicroBatchOptions o;
  o.probe_threads = probe_threads;
  o.global_batch = n;
  o.budget_bytes = budget;
  o.budget_of = of;
  o.has_device = device != nullptr;
  if (device) o.device = *device;
  MicroBatchResult r;
  std::string err;
  REQUIRE_MESSAGE(PlanMicroBatches(at, o, &r, &err), err);
  return r;
}

TEST_CASE("PlanMicroBatches: a reserved budget bounds the caching allocator's segments") {
  // Every tiny buffer (at most 64 B at batch 4, rounded to 512 B) fits in one
  // 2 MiB segment of the small pool: 2 MiB reserved whatever the program,
  // though its allocated peak is a few hundred bytes.
  MicroBatchResult fits = SearchOf(At, 4, 2 * kMiB, BudgetOf::kReserved);
  CHECK(fits.budget_of == BudgetOf::kReserved);
  CHECK(fits.baseline.micro_batch == 4);
  CHECK(fits.baseline.accumulation_steps == 1);
  CHECK(fits.baseline.peak_bytes == 196);  // the allocated peak, as before
  CHECK(fits.baseline.reserved_peak_bytes == 2 * kMiB);
  CHECK(fits.reserved_peak_bytes == 2 * kMiB);
  for (const BatchPoint& p : fits.evaluated) CHECK(p.baseline_reserved_bytes == 2 * kMiB);
  // One byte less: no micro-batch fits, though allocations would.
  MicroBatchResult none = SearchOf(At, 4, 2 * kMiB - 1, BudgetOf::kReserved);
  CHECK_FALSE(none.baseline.found);
  CHECK_FALSE(none.checkpointed.found);
  CHECK(none.checkpointed.lowest_peak_bytes == 212);
  CHECK(none.checkpointed.lowest_reserved_peak_bytes == 2 * kMiB);
  CHECK(none.reserved_peak_bytes == -1);
  // Under allocated budgets nothing is replayed.
  MicroBatchResult allocated = Search(4, 2 * kMiB);
  CHECK(allocated.budget_of == BudgetOf::kAllocated);
  CHECK(allocated.baseline.reserved_peak_bytes == -1);
  CHECK(allocated.reserved_peak_bytes == -1);
  for (const BatchPoint& p : allocated.evaluated) CHECK(p.baseline_reserved_bytes == -1);
}

TEST_CASE("PlanMicroBatches: a device budget adds the workspaces and the CUDA context") {
  alloc::DeviceMemory h100;
  REQUIRE(alloc::FindDeviceMemory("h100", &h100));
  // The 32 MiB cuBLAS workspace is its own large segment beside the 2 MiB
  // small one; the context (600 MiB) is outside the allocator.
  REQUIRE(h100.cublas_workspace_bytes == 32 * kMiB);
  const int64_t total = 2 * kMiB + 32 * kMiB + h100.cuda_context_bytes;
  MicroBatchResult fits = SearchOf(At, 4, total, BudgetOf::kDevice, &h100);
  CHECK(fits.baseline.micro_batch == 4);
  CHECK(fits.baseline.reserved_peak_bytes == 34 * kMiB);
  CHECK(fits.has_device);
  MicroBatchResult none = SearchOf(At, 4, total - 1, BudgetOf::kDevice, &h100);
  CHECK_FALSE(none.checkpointed.found);
  CHECK(none.checkpointed.lowest_reserved_peak_bytes == 34 * kMiB);

  MicroBatchOptions o;
  o.global_batch = 4;
  o.budget_bytes = total;
  o.budget_of = BudgetOf::kDevice;
  MicroBatchResult r;
  std::string err;
  CHECK_FALSE(PlanMicroBatches(At, o, &r, &err));
  CHECK(err == "a device budget needs a device (--device)");
}

bool GptAt(int64_t batch, JointGraph* out, std::string* err) {
  GraphLoadOptions o;
  o.symbol_overrides.emplace_back("batch", batch);
  return LoadJointGraph(testing::ExamplePath("gpt_tiny.graph.json"), o, out, err);
}

// The reserved peak of gpt_tiny's baseline program at `batch`, run as
// `micro_batches` micro-batches.
int64_t GptBaselineReserved(int64_t batch, int64_t micro_batches) {
  JointGraph jg;
  std::string err;
  REQUIRE_MESSAGE(GptAt(batch, &jg, &err), err);
  Program program = BuildBaselineProgram(jg.graph, AccumulationMode::kInplace);
  SimResult sim;
  REQUIRE_MESSAGE(Simulate(jg.graph, program, SimOptions(), &sim, &err), err);
  alloc::ReservedReport report;
  REQUIRE_MESSAGE(PredictMicroBatchReserved(jg.graph, program, sim, micro_batches, alloc::Config(),
                                            2, {}, &report, &err),
                  err);
  return report.reserved_peak_bytes;
}

TEST_CASE("PredictMicroBatchReserved: one micro-batch is the plain replay; accumulators add") {
  JointGraph jg;
  std::string err;
  REQUIRE_MESSAGE(GptAt(8, &jg, &err), err);
  const Graph& g = jg.graph;
  Program program = BuildBaselineProgram(g, AccumulationMode::kInplace);
  SimResult sim;
  REQUIRE_MESSAGE(Simulate(g, program, SimOptions(), &sim, &err), err);
  auto replay = [&](int64_t micro_batches) {
    alloc::ReservedReport report;
    REQUIRE_MESSAGE(PredictMicroBatchReserved(g, program, sim, micro_batches, alloc::Config(), 2,
                                              {}, &report, &err),
                    err);
    return report;
  };
  alloc::ReservedReport plain;
  REQUIRE(alloc::PredictReserved(IntervalsWithWorkspaces(g, program, sim),
                                 static_cast<int>(program.steps.size()), alloc::Config(), 2, &plain,
                                 &err));
  const alloc::ReservedReport one = replay(1);
  CHECK(one.reserved_peak_bytes == plain.reserved_peak_bytes);
  CHECK(one.allocated_peak_bytes == plain.allocated_peak_bytes);
  // Accumulating: the allocator holds at least the accumulating peak, and
  // more than one plain step (the accumulators are alive throughout).
  const alloc::ReservedReport two = replay(2), three = replay(3);
  CHECK(two.allocated_peak_bytes >= AccumulationPeak(g, program, sim));
  CHECK(three.allocated_peak_bytes >= AccumulationPeak(g, program, sim));
  CHECK(two.allocated_peak_bytes > one.allocated_peak_bytes);
  CHECK(three.reserved_peak_bytes >= one.reserved_peak_bytes);
  // Past kReplayedMicroBatches, more micro-batches replay the same sequence.
  const alloc::ReservedReport many = replay(1000);
  CHECK(many.reserved_peak_bytes == three.reserved_peak_bytes);
  CHECK(many.allocated_peak_bytes == three.allocated_peak_bytes);
}

TEST_CASE("PlanMicroBatches: above kExhaustiveBatches, guesses find the boundary in few plans") {
  const int64_t n = 256, budget = 200 * kMiB;
  MicroBatchResult r = SearchOf(GptAt, n, budget, BudgetOf::kAllocated);
  CHECK(r.search == "binary");
  CHECK(r.monotone);
  // The baseline's answer, by a scan of every batch.
  int64_t want = 0;
  std::string err;
  for (int64_t b = 1; b <= n; ++b) {
    JointGraph jg;
    REQUIRE(GptAt(b, &jg, &err));
    const Program p = BuildBaselineProgram(jg.graph, AccumulationMode::kInplace);
    const SimResult sim = testing::MustSimulate(jg.graph, p);
    const int64_t steps = (n + b - 1) / b;
    if ((steps > 1 ? AccumulationPeak(jg.graph, p, sim) : sim.peak_bytes) <= budget) want = b;
  }
  CHECK(r.baseline.micro_batch == want);
  // The checkpointed answer fits and the next batch does not, each planned
  // again here, with the accumulators.
  REQUIRE(r.checkpointed.found);
  for (int64_t b : {r.checkpointed.micro_batch, r.checkpointed.micro_batch + 1}) {
    JointGraph jg;
    REQUIRE(GptAt(b, &jg, &err));
    PlannerOptions o;
    o.accumulating_gradients = (n + b - 1) / b > 1;
    PlanResult plan;
    REQUIRE_MESSAGE(PlanCheckpoints(jg.graph, budget, o, &plan, &err), err);
    CHECK(plan.feasible == (b == r.checkpointed.micro_batch));
  }
  int planned = 0;
  for (const BatchPoint& p : r.evaluated) planned += p.planned;
  CHECK(planned <= 6);  // bisection over 256 plans 8 or more
}

TEST_CASE("PlanMicroBatches: reserved budgets on gpt_tiny, baseline and checkpointed") {
  const int64_t budget = 200 * kMiB;
  const int64_t n = 24;  // exhaustive: every micro-batch from 24 down
  MicroBatchResult alloc_r = SearchOf(GptAt, n, budget, BudgetOf::kAllocated);
  MicroBatchResult r = SearchOf(GptAt, n, budget, BudgetOf::kReserved);
  REQUIRE(r.baseline.found);
  REQUIRE(r.checkpointed.found);
  for (const MicroBatchChoice* c : {&r.baseline, &r.checkpointed}) {
    CHECK(c->reserved_peak_bytes <= budget);
    CHECK(c->peak_bytes <= c->reserved_peak_bytes);  // allocations never exceed the segments
    if (c->micro_batch < n) CHECK(c->next_reserved_peak_bytes > budget);
  }
  // Bounding more bytes never allows a larger micro-batch.
  CHECK(r.baseline.micro_batch <= alloc_r.baseline.micro_batch);
  CHECK(r.checkpointed.micro_batch <= alloc_r.checkpointed.micro_batch);
  CHECK(r.checkpointed.micro_batch >= r.baseline.micro_batch);
  // The baseline's reserved peak is the replay of its own program.
  CHECK(r.baseline.reserved_peak_bytes ==
        GptBaselineReserved(r.baseline.micro_batch, r.baseline.accumulation_steps));
  if (r.baseline.micro_batch < n)
    CHECK(r.baseline.next_reserved_peak_bytes ==
          GptBaselineReserved(r.baseline.micro_batch + 1,
                              (n + r.baseline.micro_batch) / (r.baseline.micro_batch + 1)));
  // Every planned point kept the plan whose reserved peak fits, if one did,
  // and the allocation budget it was planned at is at most the budget.
  for (const BatchPoint& p : r.evaluated) {
    CHECK(p.plan_reserved_bytes >= 0);
    CHECK(p.plan_fits == (p.plan_reserved_bytes <= budget));
    CHECK(p.plan_budget_bytes <= budget);
    if (p.planned && p.plan_fits) {
      // Planned again at that allocation budget, the plan reserves as much.
      JointGraph jg;
      std::string err;
      REQUIRE(GptAt(p.batch, &jg, &err));
      PlanResult again;
      REQUIRE_MESSAGE(
          PlanCheckpoints(jg.graph, p.plan_budget_bytes, PlannerOptions(), &again, &err), err);
      alloc::ReservedReport report;
      REQUIRE(PredictMicroBatchReserved(jg.graph, again.best.checkpoint.program, again.best.sim,
                                        (n + p.batch - 1) / p.batch, alloc::Config(), 2, {},
                                        &report, &err));
      CHECK(report.reserved_peak_bytes == p.plan_reserved_bytes);
    }
  }
  CHECK(r.reserved_peak_bytes ==
        (r.checkpointed_recommended ? r.checkpointed : r.baseline).reserved_peak_bytes);

  // Under allocated budgets with predict_reserved: the recommended program's
  // replay, here over the budget (the reason --budget-of reserved exists).
  MicroBatchOptions o;
  o.global_batch = n;
  o.budget_bytes = budget;
  o.predict_reserved = true;
  MicroBatchResult predicted;
  std::string err;
  REQUIRE_MESSAGE(PlanMicroBatches(GptAt, o, &predicted, &err), err);
  CHECK(predicted.baseline.micro_batch == alloc_r.baseline.micro_batch);  // same search
  CHECK(predicted.checkpointed.micro_batch == alloc_r.checkpointed.micro_batch);
  REQUIRE_FALSE(predicted.checkpointed_recommended);
  CHECK(predicted.reserved_peak_bytes ==
        GptBaselineReserved(predicted.baseline.micro_batch, predicted.baseline.accumulation_steps));
  CHECK(predicted.reserved_peak_bytes > budget);
}

}  // namespace
}  // namespace memplan

namespace memplan {
namespace {

// The fields of a choice that make the answer.
std::vector<int64_t> AnswerOf(const MicroBatchChoice& c) {
  return {c.found,
          c.micro_batch,
          c.accumulation_steps,
          c.last_micro_batch,
          c.peak_bytes,
          c.last_peak_bytes,
          c.next_peak_bytes,
          c.reserved_peak_bytes,
          c.next_reserved_peak_bytes,
          c.lowest_peak_bytes};
}

TEST_CASE("PlanMicroBatches: two probe threads give one thread's answers") {
  // Exhaustive (n <= 32) and bracketed searches, allocated and reserved
  // budgets, with and without checkpointing needed, and nothing fitting.
  struct Case {
    int64_t n, budget;
    BudgetOf of;
  };
  const Case cases[] = {
      {24, 200 * kMiB, BudgetOf::kAllocated},  {24, 200 * kMiB, BudgetOf::kReserved},
      {256, 200 * kMiB, BudgetOf::kAllocated}, {256, 300 * kMiB, BudgetOf::kReserved},
      {100, 60 * kMiB, BudgetOf::kAllocated},  {64, 1 * kMiB, BudgetOf::kAllocated},
  };
  for (const Case& c : cases) {
    CAPTURE(c.n);
    CAPTURE(c.budget);
    CAPTURE(static_cast<int>(c.of));
    const MicroBatchResult one = SearchOf(GptAt, c.n, c.budget, c.of, nullptr, 1);
    const MicroBatchResult two = SearchOf(GptAt, c.n, c.budget, c.of, nullptr, 2);
    CHECK(AnswerOf(two.baseline) == AnswerOf(one.baseline));
    CHECK(AnswerOf(two.checkpointed) == AnswerOf(one.checkpointed));
    CHECK(two.checkpointed.recompute_cost == one.checkpointed.recompute_cost);
    CHECK(two.checkpointed_recommended == one.checkpointed_recommended);
    CHECK(two.reserved_peak_bytes == one.reserved_peak_bytes);
    CHECK(two.monotone == one.monotone);
    // Every point both evaluated has the same figures.
    for (const BatchPoint& p : one.evaluated) {
      const BatchPoint* q = FindPoint(two, p.batch);
      if (q == nullptr) continue;
      CHECK(q->baseline_peak_bytes == p.baseline_peak_bytes);
      CHECK(q->baseline_fits == p.baseline_fits);
      // The second thread may plan a batch one thread only sized.
      if (p.planned && q->planned) CHECK(q->plan_peak_bytes == p.plan_peak_bytes);
    }
  }
}

TEST_CASE("PlannerOptions::cancel stops a plan before its first program") {
  JointGraph jg;
  std::string err;
  REQUIRE_MESSAGE(GptAt(64, &jg, &err), err);
  std::atomic<bool> cancel{true};
  PlannerOptions o;
  o.cancel = &cancel;
  int64_t programs = 0;
  o.progress = [&](int64_t) { ++programs; };
  PlanResult r;
  CHECK_FALSE(PlanCheckpoints(jg.graph, 60 * kMiB, o, &r, &err));
  CHECK(err == "the plan was cancelled");
  CHECK(programs == 0);
  cancel = false;
  err.clear();
  CHECK_MESSAGE(PlanCheckpoints(jg.graph, 60 * kMiB, o, &r, &err), err);
  CHECK(programs > 0);
}

TEST_CASE("PlanMicroBatches: a fitting probe stops the plan below it, listed unplanned") {
  // Under a budget of 90 MiB reserved the search tries 3 with 4 beside it
  // on the second thread, and both fit. Batch 3 loads slowly here, so 4's
  // answer comes first: 3's plan stops before its first program, 3 is taken
  // to fit, and its plan is not listed.
  auto slow_three = [](int64_t b, JointGraph* jg, std::string* err) {
    if (b == 3) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return GptAt(b, jg, err);
  };
  const MicroBatchResult two =
      SearchOf(slow_three, 100, 90 * kMiB, BudgetOf::kReserved, nullptr, 2);
  const MicroBatchResult one = SearchOf(GptAt, 100, 90 * kMiB, BudgetOf::kReserved);
  CHECK(AnswerOf(two.checkpointed) == AnswerOf(one.checkpointed));
  CHECK(two.checkpointed.recompute_cost == one.checkpointed.recompute_cost);
  CHECK(two.stopped_plans == 1);
  CHECK(one.stopped_plans == 0);
  const BatchPoint* three = FindPoint(two, 3);
  const BatchPoint* four = FindPoint(two, 4);
  REQUIRE(three != nullptr);
  REQUIRE(four != nullptr);
  CHECK_FALSE(three->planned);
  CHECK(four->planned);
  CHECK(four->plan_fits);
  // Without the delay 3's plan may finish first: it is forgotten all the
  // same, so the points listed do not depend on the timing.
  const MicroBatchResult fast = SearchOf(GptAt, 100, 90 * kMiB, BudgetOf::kReserved, nullptr, 2);
  REQUIRE(fast.evaluated.size() == two.evaluated.size());
  for (size_t i = 0; i < two.evaluated.size(); ++i) {
    CAPTURE(two.evaluated[i].batch);
    CHECK(fast.evaluated[i].batch == two.evaluated[i].batch);
    CHECK(fast.evaluated[i].planned == two.evaluated[i].planned);
    CHECK(fast.evaluated[i].plan_peak_bytes == two.evaluated[i].plan_peak_bytes);
  }
}

TEST_CASE("PlanMicroBatches: trying every size, the probe below an answer is not listed planned") {
  const MicroBatchResult two = SearchOf(GptAt, 24, 200 * kMiB, BudgetOf::kAllocated, nullptr, 2);
  REQUIRE(two.search == "exhaustive");
  REQUIRE(two.checkpointed.found);
  const int64_t below = two.checkpointed.micro_batch - 1;
  REQUIRE(below != two.checkpointed.last_micro_batch);
  const BatchPoint* p = FindPoint(two, below);
  REQUIRE(p != nullptr);  // probed while the answer was planned
  REQUIRE_FALSE(p->baseline_fits);
  CHECK_FALSE(p->planned);
}

TEST_CASE("PlanMicroBatches: where the floor is over the budget, no plan is made") {
  // gpt_tiny's least peak at batch 1 (its parameters and their gradients
  // alone) is over 1 MiB: no program fits at any batch, and no planner runs.
  JointGraph one;
  std::string err;
  REQUIRE_MESSAGE(GptAt(1, &one, &err), err);
  const int64_t floor = PeakLowerBound(one.graph);
  REQUIRE(floor > 1 * kMiB);
  for (BudgetOf of : {BudgetOf::kAllocated, BudgetOf::kReserved}) {
    CAPTURE(static_cast<int>(of));
    MicroBatchOptions o;
    o.global_batch = 64;
    o.budget_bytes = 1 * kMiB;
    o.budget_of = of;
    int64_t programs = 0;
    o.planner.progress = [&](int64_t) { ++programs; };
    MicroBatchResult r;
    REQUIRE_MESSAGE(PlanMicroBatches(GptAt, o, &r, &err), err);
    CHECK_FALSE(r.checkpointed.found);
    CHECK(r.checkpointed.lowest_is_floor);
    CHECK(r.checkpointed.lowest_peak_bytes == floor);
    CHECK(programs == 0);
    for (const BatchPoint& p : r.evaluated) {  // 1 for the floor, the rest for the baseline
      CAPTURE(p.batch);
      CHECK(p.over_floor == (p.batch == 1));
      CHECK_FALSE(p.planned);
      CHECK_FALSE(p.plan_fits);
    }
    const std::string summary = MicroBatchSummary(one, "batch", o.planner, r);
    CHECK_MESSAGE(summary.find(fmt::format("  planned   no micro-batch fits: no program goes "
                                           "below {} at 1 (its floor)\n",
                                           FormatBytes(floor))) != std::string::npos,
                  summary);
  }
  // A budget over the floor at batch 1 plans there as before.
  const MicroBatchResult r = SearchOf(GptAt, 64, floor + 1, BudgetOf::kAllocated);
  const BatchPoint* at_one = FindPoint(r, 1);
  REQUIRE(at_one != nullptr);
  CHECK_FALSE(at_one->over_floor);
}

}  // namespace
}  // namespace memplan
