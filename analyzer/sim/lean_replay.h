// The figures of a peak-only replay (simulator.h, SimOptions::peak_only)
// straight from a program's layout (program.h, ProgramLayout), for searches
// that score thousands of programs and keep few: no steps are laid out, none
// is checked, and the scratch is reused from one program to the next.
//
// Recipe: the replay of simulator.cc, step by step, over the runs and the
// free steps MaterializeProgram would make (a run's frees form a step of
// their own when it has any), with the buffers' reference counts, fresh
// copies, in-place takeovers, workspaces and (accumulating_gradients) the
// accumulators not made yet.
//
// Contract: for a valid program (one BuildProgram or BuildCheckpointProgram
// makes), *result equals what Simulate gives for MaterializeProgram(layout)
// with options.peak_only: peak_bytes, peak_step (a step index of that
// program), start_bytes, end_bytes, recompute_cost (summed in the same
// order), recompute_runs and stopped; the per-step vectors, intervals and
// live_at_peak stay empty (collect_live_at_peak is ignored). An invalid
// program is not detected: its figures are unspecified.
//
// Complexity: O(runs x arity + frees + tensors + ops) per program, without
// allocation once the scratch has grown.
//
// Where it falls short: it checks nothing, so it is only for programs the
// builders made; a program to show or verify is laid out and replayed in full.
#ifndef MEMPLAN_ANALYZER_SIM_LEAN_REPLAY_H_
#define MEMPLAN_ANALYZER_SIM_LEAN_REPLAY_H_

#include <cstdint>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan {

// What LeanReplay keeps from one program to the next (one per thread).
struct LeanReplayScratch {
  struct Buffer {
    int64_t bytes;
    int owner;  // the tensor that allocated it
    int refs;
  };
  std::vector<uint8_t> alive;       // by tensor
  std::vector<int> buffer_of;       // by tensor, read only where alive
  std::vector<int> runs;            // by op: runs so far
  std::vector<Buffer> buffers;      // allocated so far
  std::vector<int64_t> made_at;     // by op: accumulator bytes its first run makes
  std::vector<int> holder;          // LeanLiveAt's, by buffer
  std::vector<uint8_t> in_program;  // LeanLiveAt's, by op
};

void LeanReplay(const Graph& g, const ProgramLayout& layout, const SimOptions& options,
                SimResult* result, LeanReplayScratch* scratch);

// What is alive at program step `step` (a run step, or -1: after start-up),
// in result->live_at_peak and peak_by_kind, as CollectLiveAtPeak (simulator.h)
// finds them at result->peak_step == step for MaterializeProgram(layout)
// with the same accumulating_gradients. O(steps up to `step` + tensors).
void LeanLiveAt(const Graph& g, const ProgramLayout& layout, bool accumulating_gradients, int step,
                SimResult* result, LeanReplayScratch* scratch);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_SIM_LEAN_REPLAY_H_
