// Step programs (SPEC section 2) and the baseline program.
//
// Baseline recipe: ops in file order, except that in "deferred" mode each
// chain of accumulate ops moves to just before the first reader of its sum
// (or to the end of the backward); each tensor is freed right after its last
// reader (or its producer when nothing reads it); resident tensors, graph
// outputs and parameter gradients are never freed. Accumulate ops run in place
// ("inplace" mode) when their first input, the running sum, may be taken
// over: it is not a view, not kept to the end, has the output's size, has no
// later reader and no live view. Otherwise the sum is a new buffer, even when
// the contribution could be taken over: PyTorch's InputBuffer reuses only
// the accumulator of dense gradients (a tied embedding's gradient, summed
// into the transposed LM-head gradient, is out of place).
// O(ops + tensors + total op arity).
#ifndef MEMPLAN_ANALYZER_SIM_PROGRAM_H_
#define MEMPLAN_ANALYZER_SIM_PROGRAM_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/base/small_vector.h"
#include "analyzer/ir/graph.h"

namespace memplan {

// A run step (op >= 0) with optional in-place takeovers, or a free step.
// The lists hold an entry or two inline (base/small_vector.h).
struct Step {
  int op = -1;
  SmallVector<std::pair<int, int>, 2> inplace;  // (output, input whose buffer it takes)
  SmallVector<int, 4> free;                     // tensors released (free step)
  bool IsRun() const { return op >= 0; }
};

struct Program {
  std::vector<Step> steps;
};

enum class AccumulationMode { kInplace, kOutOfPlace, kDeferred };
bool ParseAccumulationMode(std::string_view name, AccumulationMode* out);
const char* AccumulationModeName(AccumulationMode m);

// Tensors that must stay alive to the end: resident, graph outputs, and
// parameter gradients (Graph::kept_to_end, computed by Finalize).
const std::vector<bool>& KeptToEnd(const Graph& g);

// The op order of the baseline: file order, accumulate chains moved in
// deferred mode.
std::vector<int> ScheduleOrder(const Graph& g, AccumulationMode mode);

// The program that runs `runs` (op indices; an op may appear again: a
// recomputation) and frees each tensor instance right after its last use.
// Each production starts a new instance of its outputs, except that a rerun
// leaves a tensor that is kept to the end or in `keep` as it is (the rerun's
// copy is discarded; if the kept copy was freed before, the rerun's copy is
// freed right after it). In-place takeovers follow the rule above.
// O(runs x arity + tensors).
// A program before its steps are laid out: its op runs and, by run, the
// in-place takeover (output, input; (-1, -1) when none) and the tensors freed
// right after it (frees[free_start[p], free_start[p + 1]), in no order).
// Invariants: takeover has one entry per run, free_start one more.
struct ProgramLayout {
  std::vector<int> runs;
  std::vector<std::pair<int, int>> takeover;
  std::vector<int> free_start, frees;
};

// BuildProgram's analysis (below) without the steps; *out's storage is
// reused.
void LayOutProgram(const Graph& g, const std::vector<int>& runs, AccumulationMode mode,
                   const std::vector<bool>* keep, ProgramLayout* out);

// The steps: each run, then a free step with that run's frees, sorted, when
// it has any.
Program MaterializeProgram(const ProgramLayout& layout);

Program BuildProgram(const Graph& g, const std::vector<int>& runs, AccumulationMode mode,
                     const std::vector<bool>* keep);

Program BuildBaselineProgram(const Graph& joint, AccumulationMode mode);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_SIM_PROGRAM_H_
