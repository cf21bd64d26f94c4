// The simulator: replays a step program over a joint graph under the
// execution model of SPEC section 2, checks that it is valid, and measures it.
// It never searches; planners call it to score their programs.
//
// Live bytes count each buffer once (views own none) and assume a perfect
// allocator: the peak is the allocation-level, no-fragmentation peak that the
// CPU backend's counting allocator measures.
#ifndef MEMPLAN_ANALYZER_SIM_SIMULATOR_H_
#define MEMPLAN_ANALYZER_SIM_SIMULATOR_H_

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "analyzer/ir/buffer_interval.h"
#include "analyzer/ir/graph.h"
#include "analyzer/sim/program.h"

namespace memplan {

struct SimOptions {
  // Require every backward op to run exactly once and the graph outputs and
  // parameter gradients to be alive at the end.
  bool require_complete = true;
  // Cost of each op (by op index) for recompute_cost; empty: count runs only.
  std::vector<double> op_cost;
  // Collect live_at_peak and peak_by_kind (a second replay up to the peak).
  bool collect_live_at_peak = true;
  // The step as the second or a later micro-batch of gradient accumulation
  // (microbatch.h): every parameter gradient's accumulator is alive from the
  // start, and a fresh gradient is added into it as it is made. So live bytes
  // at each step also count the accumulators of the gradients not made yet
  // (made at that step: accumulator and fresh copy both), and live_at_peak
  // lists them (tensor and owner: the gradient). Intervals are unchanged.
  bool accumulating_gradients = false;
  // Only the figures: peak_bytes, peak_step, start_bytes, end_bytes,
  // recompute_cost and recompute_runs (and live_at_peak when collected);
  // live_during, live_after, recompute and intervals stay empty. For a
  // search that scores many programs. With accumulating_gradients the
  // accumulators are counted as the replay goes: the same figures.
  bool peak_only = false;
  // With peak_only: stop at the first step whose live bytes (accumulators
  // included) pass this. The result is then stopped: peak_bytes and
  // peak_step are that step's (peak_bytes > stop_above, at most the
  // program's peak), start_bytes is set, end_bytes is not, and
  // recompute_cost and recompute_runs count the whole program. The steps
  // after it are not checked. For searches that reject any plan over a bound.
  int64_t stop_above = std::numeric_limits<int64_t>::max();
};

// One buffer alive at the peak.
struct LiveBuffer {
  int tensor = -1;        // the live name holding it (the base if alive, else a view)
  int owner = -1;         // the tensor that allocated it
  int workspace_of = -1;  // >= 0: this is the scratch of that op (tensor, owner -1)
  int64_t bytes = 0;
};

// The order of SimResult::live_at_peak: largest first, then by tensor index,
// ties in the order given (a stable sort).
void SortLargestFirst(std::vector<LiveBuffer>* live);
// By tensor kind, the bytes of `live` (a workspace counts as temporary).
std::array<int64_t, kNumTensorKinds> BytesByKind(const Graph& g,
                                                 const std::vector<LiveBuffer>& live);

// Invariants (all but the figures empty under SimOptions::peak_only):
// peak_bytes = max(start_bytes, max(live_during)); live_during[s]
// >= live_after[s] for run steps; live_after.back() == end_bytes; the sum of
// live_at_peak bytes == peak_bytes == sum(peak_by_kind).
struct SimResult {
  int64_t peak_bytes = 0;
  int peak_step = -1;  // -1: the resident set before the first step
  int64_t start_bytes = 0;
  int64_t end_bytes = 0;
  std::vector<int64_t> live_during;      // per step: live bytes while it runs
  std::vector<int64_t> live_after;       // per step: live bytes when it is done
  std::vector<bool> recompute;           // per step: a run step that re-runs an op
  std::vector<LiveBuffer> live_at_peak;  // largest first, then by tensor index
  std::array<int64_t, kNumTensorKinds> peak_by_kind{};
  std::vector<BufferInterval> intervals;  // in allocation order
  double recompute_cost = 0;
  int64_t recompute_runs = 0;
  bool stopped = false;  // stopped above SimOptions::stop_above (see there)
};

bool Simulate(const Graph& g, const Program& program, const SimOptions& options, SimResult* result,
              std::string* err);

// Fills live_at_peak and peak_by_kind of *result, a Simulate of the same
// program with the same options but collect_live_at_peak false: the result
// is then what Simulate with collect_live_at_peak gives.
bool CollectLiveAtPeak(const Graph& g, const Program& program, const SimOptions& options,
                       SimResult* result, std::string* err);

// The least peak any valid program of `g` can reach, whatever it recomputes:
// resident bytes plus the larger of (a) the most that any op needed for the
// result must hold while it runs (its distinct non-resident input and output
// buffers plus workspace, less each output that could take over an input of
// its size in place) and (b) what must be alive at the end.
int64_t PeakLowerBound(const Graph& g);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_SIM_SIMULATOR_H_
