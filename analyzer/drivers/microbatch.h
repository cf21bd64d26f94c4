// Micro-batch planning: the largest micro-batch of a global batch of N that
// fits a budget, with the baseline program and with checkpointing (the
// planner), and how to accumulate gradients over the micro-batches.
//
// Model. A global batch of N runs as steps = ceil(N / micro) micro-batches;
// the last has N - (steps - 1) * micro samples. Parameter gradients persist
// across micro-batches: from the second one on, the accumulated gradient of
// every parameter is alive from the start, and each fresh gradient is added
// into it and freed right after it is made (PyTorch's AccumulateGrad). So
// AccumulationPeak adds, at each step, the bytes of the parameter gradients
// not made yet, plus those being made at that step (accumulator + fresh copy).
// Their bytes do not scale with the micro-batch. With one micro-batch (micro
// = N) there is nothing to accumulate and the plain peak applies.
//
// Search. Every tensor's bytes are a product of literals and symbols, so they
// never fall as the batch grows, and a fixed program's peak (a max of sums of
// them) never falls either. Programs may still differ between batch values
// (an in-place takeover needs equal sizes; the planner may choose another
// set), so for N <= kExhaustiveBatches every batch from N down is evaluated
// until one fits (exact whatever the shape of the curve); above, a bracket
// search runs (from the baseline's answer up, for checkpointing, which fits
// wherever the baseline does): each probe is where the bytes would reach the
// budget if they grew linearly in the batch (the baseline's bytes at batches
// 1 and 2 give what does not grow, the nearest batch over the budget the
// slope), or, after two guesses that did not halve it, one try without the
// model (batch_bracket.h); with fitting monotone in the batch, bisection's
// answer in fewer plans. The result is checked: the chosen micro-batch fits,
// the next one up does not, and the peaks met are non-decreasing in the
// batch (monotone = false otherwise: the answer is then not proven maximal).
//
// What the budget bounds (MicroBatchOptions::budget_of, reserved_plan.h).
// Allocated bytes: the peaks above; at a batch that accumulates, the planner
// scores its programs with the accumulators alive
// (PlannerOptions::accumulating_gradients), so one plan bounds
// AccumulationPeak. Reserved bytes: the caching allocator's
// reserved peak of the micro-batches as they run one after another
// (PredictMicroBatchReserved), for the baseline program and for each plan;
// the planner sees allocated bytes only, so a batch whose plan reserves too
// much is planned again at lower allocation budgets, as PlanForBudget does
// (AllocationBudgetRounds, at most kMaxReservedRounds plans per batch). The
// device: that reserved peak, with the device's library workspaces held by
// the allocator, plus the CUDA context. A micro-batch fits when the bytes
// the budget bounds are within it.
//
// Loss scaling: with a per-micro-batch mean loss, scale micro-batch i's loss
// by size_i / N (micro / N, and last / N for the last one) so the summed
// gradients equal those of the mean loss over the global batch.
#ifndef MEMPLAN_ANALYZER_DRIVERS_MICROBATCH_H_
#define MEMPLAN_ANALYZER_DRIVERS_MICROBATCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analyzer/alloc/caching_allocator.h"
#include "analyzer/alloc/device_memory.h"
#include "analyzer/alloc/reserved.h"
#include "analyzer/drivers/analysis.h"
#include "analyzer/drivers/reserved_plan.h"
#include "analyzer/plan/planner.h"

namespace memplan {

constexpr int64_t kExhaustiveBatches = 32;
// The most global batch memplan searches.
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 40;

// The peak of `program` (simulated as `sim`) run as the second or a later
// micro-batch: parameter gradients accumulate into buffers alive throughout.
int64_t AccumulationPeak(const Graph& g, const Program& program, const SimResult& sim);
// Bytes of the parameter gradients (owned buffers only; views own none).
int64_t ParameterGradientBytes(const Graph& g);

// Micro-batches PredictMicroBatchReserved replays in a row: the first, which
// makes the parameter gradients, then two that accumulate into them (every
// transition a longer sequence has).
constexpr int64_t kReplayedMicroBatches = 3;

// The reserved-memory prediction (alloc/reserved.h) of `program` (simulated
// as `sim`, op workspaces included) run as `micro_batches` micro-batches of
// one global batch: min(micro_batches, kReplayedMicroBatches) copies of its
// steps in a row. Resident buffers and `persistent` blocks are allocated once,
// before the first; the first micro-batch's parameter gradients stay alive to
// the end (they become the accumulators); in each later one a parameter
// gradient is a fresh buffer freed at the end of the step that makes it
// (AccumulateGrad adds it into the accumulator); what is alive at the end of
// a micro-batch (the loss) is freed after the next one's first step. That
// sequence is replayed `iterations` times (global batches; zero_grad frees
// the accumulators between them). Every micro-batch runs the whole program,
// optimizer ops included, as AccumulationPeak assumes. With one micro-batch
// it is PredictPlanReserved's replay.
bool PredictMicroBatchReserved(const Graph& g, const Program& program, const SimResult& sim,
                               int64_t micro_batches, const alloc::Config& config, int iterations,
                               const std::vector<int64_t>& persistent, alloc::ReservedReport* out,
                               std::string* err);

// Loads the joint graph with the batch symbol set to `batch`.
using GraphAtBatch = std::function<bool(int64_t batch, JointGraph* out, std::string* err)>;

struct MicroBatchOptions {
  int64_t global_batch = 1;
  int64_t budget_bytes = 0;
  AccumulationMode baseline_accumulation = AccumulationMode::kInplace;
  PlannerOptions planner;
  // What budget_bytes bounds; kDevice needs has_device. Reserved peaks are
  // predicted with alloc_config over reserved_iterations global batches.
  BudgetOf budget_of = BudgetOf::kAllocated;
  alloc::Config alloc_config;
  int reserved_iterations = alloc::kDefaultReservedIterations;
  bool has_device = false;  // the replays hold the device's library workspaces
  alloc::DeviceMemory device;
  // kAllocated: also predict the reserved peak of the recommended
  // micro-batch's program (MicroBatchResult::reserved_peak_bytes), so the
  // summary can say when the caching allocator would hold more than the
  // budget. Costs one replay, and one plan when the plan is recommended.
  bool predict_reserved = false;
  // 2: while one batch is evaluated, the next one the search may need (one
  // up in the bracket, one down when exhaustive, micro_batch + 1 for the
  // answer's check) is evaluated on a second thread. The same answers as 1
  // wherever fitting is monotone in the batch, in fewer rounds of plans;
  // `evaluated` may then list more points. A plan whose answer the other
  // thread's implies is stopped and its point listed unplanned: bracketed,
  // a batch tried is taken to fit when the one above it fits (elsewhere a
  // larger answer than one thread's, which fits); trying every size, the
  // one below is not needed once a size fits.
  int probe_threads = 1;
};

// One batch value evaluated. Peaks are of a whole micro-batch step: the
// accumulating peak when the batch needs more than one micro-batch.
struct BatchPoint {
  int64_t batch = 0;
  int64_t baseline_peak_bytes = 0;  // baseline program, as needed at this batch
  bool baseline_fits = false;
  bool planned = false;  // the planner ran at this batch
  // No plan fits: the least peak of any program (PeakLowerBound) is over the
  // budget, so the planner did not run; plan_peak_bytes (and
  // plan_reserved_bytes for reserved budgets) hold that floor.
  bool over_floor = false;
  int64_t plan_peak_bytes = 0;  // the planner's plan, as needed at this batch
  bool plan_fits = false;
  int64_t plan_budget_bytes = 0;  // the budget the planner was given for that plan
  double recompute_cost = 0;
  double step_cost = 0;  // one micro-batch step, no recompute
  // Budgets of reserved bytes or of the device: the reserved peaks of the
  // baseline program and of the plan run as micro-batches
  // (PredictMicroBatchReserved); -1 otherwise. The fits flags then compare
  // these (plus the CUDA context for the device) with the budget.
  int64_t baseline_reserved_bytes = -1;
  int64_t plan_reserved_bytes = -1;
};

// The answer for one kind of program. Invariants when found: micro_batch in
// [1, N]; accumulation_steps = ceil(N / micro_batch); last_micro_batch =
// N - (accumulation_steps - 1) * micro_batch in [1, micro_batch]; the bytes
// the budget bounds are within it at micro_batch (peak_bytes, or
// reserved_peak_bytes, plus the CUDA context for the device) and over it at
// micro_batch + 1 (next_peak_bytes, next_reserved_peak_bytes), or
// next_peak_bytes is -1 (micro_batch == N).
struct MicroBatchChoice {
  bool found = false;
  int64_t micro_batch = 0;
  int64_t accumulation_steps = 0;
  int64_t last_micro_batch = 0;
  // ceil(N / accumulation_steps): as many steps, sizes within one of each
  // other (e.g. 64 = 8 x 8 rather than 7 x 9 + 1); under allocated budgets it
  // fits when micro_batch does (reserved peaks need not fall with the batch).
  int64_t balanced_micro_batch = 0;
  int64_t peak_bytes = 0;         // at micro_batch
  int64_t last_peak_bytes = 0;    // at last_micro_batch (evaluated)
  int64_t next_peak_bytes = -1;   // at micro_batch + 1, or -1
  double recompute_cost = 0;      // per micro-batch (checkpointed)
  double recompute_overhead = 0;  // recompute_cost / step_cost
  // Estimated cost of the whole global batch: sum over micro-batches of
  // step_cost * (1 + overhead), in the planner's cost unit.
  double global_batch_cost = 0;
  int64_t lowest_peak_bytes = 0;  // when !found: the peak at batch 1
  bool lowest_is_floor = false;   // ... which is batch 1's floor (BatchPoint::over_floor)
  // Budgets of reserved bytes or of the device: the reserved peaks at
  // micro_batch, at micro_batch + 1 and (when !found) at batch 1; -1
  // otherwise.
  int64_t reserved_peak_bytes = -1;
  int64_t next_reserved_peak_bytes = -1;
  int64_t lowest_reserved_peak_bytes = -1;
};

struct MicroBatchResult {
  int64_t global_batch = 0;
  int64_t budget_bytes = 0;
  BudgetOf budget_of = BudgetOf::kAllocated;
  bool has_device = false;
  alloc::DeviceMemory device;
  // The reserved peak at the recommended micro-batch: its choice's under
  // budgets of reserved bytes or of the device, the replay of its program
  // under allocated budgets with predict_reserved; -1 when not predicted or
  // nothing fits.
  int64_t reserved_peak_bytes = -1;
  int64_t parameter_gradient_bytes = 0;  // at the recommended micro-batch
  MicroBatchChoice baseline, checkpointed;
  bool checkpointed_recommended = false;  // cheaper per global batch than the baseline
  std::string search;                     // "exhaustive" or "binary"
  bool monotone = true;                   // peaks met never fall as the batch grows
  std::vector<BatchPoint> evaluated;      // by batch, ascending
  // Plans stopped unfinished because the other thread's answer made them
  // needless (probe_threads 2); their points are listed unplanned.
  int64_t stopped_plans = 0;
};

bool PlanMicroBatches(const GraphAtBatch& graph_at, const MicroBatchOptions& options,
                      MicroBatchResult* out, std::string* err);

// The point evaluated at `batch`, or nullptr.
const BatchPoint* FindPoint(const MicroBatchResult& r, int64_t batch);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_DRIVERS_MICROBATCH_H_
