// The executor: runs a step program literally on a backend, under the
// execution model of SPEC section 2 (the rules analyzer/sim/simulator.cc counts):
//  - resident tensors are allocated (and filled) before the first step;
//  - a run step allocates the op's new outputs and its workspace when it
//    starts; an output taken over in place uses its input's buffer; an output
//    still alive (a recomputed multi-output op whose other output was kept)
//    gets a fresh copy that lives while the op runs and is freed at its end;
//    the workspace is freed at the end too; view outputs alias their base;
//  - an op that writes nothing (only view outputs) launches no work;
//  - a free step releases names; a buffer is freed when its last live name
//    (the base or a view of it) is released;
//  - at the end everything still allocated is freed (not part of the
//    measurement).
// Each step is synchronized before the next starts, so per-step live bytes
// and times are exact and an error names the step that caused it. On any
// error every buffer is freed before returning.
#ifndef MEMPLAN_PROFILER_EXECUTOR_H_
#define MEMPLAN_PROFILER_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/sim/program.h"
#include "profiler/backend.h"

namespace memplan {

struct ExecOptions {
  // Flops each run spends (by op index); empty: none.
  std::vector<double> op_flops;
  StepObserver* observer = nullptr;
};

// What the backend's allocation counter measured, shaped like SimResult.
// Invariants: peak_bytes = max(start_bytes, max(live_during)), peak_step the
// first step reaching it (-1: the resident set); live_during[s] >=
// live_after[s]; op_us[s] < 0 exactly for free steps; step_begin_us is
// non-decreasing and relative to the start of the run.
struct ExecResult {
  int64_t start_bytes = 0;  // after the resident set is allocated
  int64_t end_bytes = 0;    // after the last step, before teardown
  int64_t peak_bytes = 0;
  int peak_step = -1;
  std::vector<int64_t> live_during;  // per step: most bytes while it ran
  std::vector<int64_t> live_after;   // per step: bytes when it was done
  std::vector<double> op_us;         // per step: the op's time on the device
  std::vector<double> step_begin_us, step_end_us;
  int64_t t0_ns = 0;   // the backend's clock when the run started
  double wall_us = 0;  // first allocation to last free
  // Device memory in use (DeviceUsedBytes) before the first allocation and
  // the most seen at any step boundary, or -1 when the backend has none.
  int64_t device_base_bytes = -1;
  int64_t device_max_bytes = -1;
};

// Runs `program` over `g` on `backend`. On failure *err starts with the step
// ("step 12 (run \"fc1\"): ...", "the resident tensors: ..." or "teardown: ...").
bool Execute(const Graph& g, const Program& program, Backend* backend, const ExecOptions& options,
             ExecResult* result, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_EXECUTOR_H_
