// Micro-batch planning: the accumulating peak by hand, and maximality.
#include "analyzer/microbatch.h"

#include <doctest/doctest.h>

#include <string>

#include "analyzer/graph_json.h"

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

}  // namespace
}  // namespace memplan
