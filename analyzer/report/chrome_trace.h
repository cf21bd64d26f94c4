// The Chrome trace of a step program (Perfetto, chrome://tracing): steps by
// phase, predicted live bytes, and a measured series when given.
#ifndef MEMPLAN_ANALYZER_REPORT_CHROME_TRACE_H_
#define MEMPLAN_ANALYZER_REPORT_CHROME_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan {

// The track a step is drawn on: "free", "recompute" or its op's phase
// ("forward", "backward", "optimizer"); nullptr for step -1.
const char* StepPhase(const Graph& g, const Program& p, const SimResult& sim, int step);

// What `memplan profile` measured, to overlay on the predicted trace.
// live_during/live_after have one entry per step (as SimResult's). When
// step_begin_us/step_end_us have one entry per step, the time axis is their
// wall time; kernels then go on a "gpu" track at their own times.
struct MeasuredTrace {
  int64_t start_bytes = 0;
  std::vector<int64_t> live_during, live_after;
  std::vector<double> step_begin_us, step_end_us;
  struct Kernel {
    std::string name;
    int step = -1;  // -1: unknown
    double start_us = 0, dur_us = 0;
  };
  std::vector<Kernel> kernels;
};

// Chrome trace-event JSON: an X event per step on a track per phase
// (forward / recompute / backward / optimizer / free), a C counter of
// predicted live bytes, M events naming the tracks. The time axis is the
// step index (10 us per step), not wall time. With `measured`, the counter
// has a second series "measured", and the time axis is measured wall time
// when step times are given.
std::string ChromeTraceJson(const Graph& g, const Program& program, const SimResult& sim,
                            const MeasuredTrace* measured = nullptr);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_CHROME_TRACE_H_
