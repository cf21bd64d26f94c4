// The predicted step as a PyTorch memory snapshot, and a user's recorded
// snapshot compared with it.
//
// What it sees: a graph, its simulated program (program + SimResult), an
// allocator config; for the comparison also a Snapshot read from a pickle.
//
// What it returns: PredictSnapshot replays the program's buffer intervals
// through the caching allocator model (alloc/reserved.h, with its trace) and
// labels every trace entry and live block with frames naming the tensor, the
// op (name, type, program step) and its module scope, innermost first:
//   [{"name": tensor, "filename": "op (type)", "line": step},
//    {"name": scope, "filename": graph file, "line": iteration}]
// CompareSnapshots reduces both snapshots to the same curves (live requested
// bytes and reserved bytes over the trace, reconstructed backwards from the
// segments at the end as memory_viz does) and aligns their alloc sequences.
//
// Complexity: PredictSnapshot O(iterations * intervals * log blocks);
// CompareSnapshots O(entries + blocks).
//
// Where it falls short: see alloc/reserved.h (the order of events inside an
// op); the comparison aligns the two traces at their first alloc, so the
// recording should start at a step boundary (README "Compare with a recorded
// snapshot").
#ifndef MEMPLAN_ANALYZER_REPORT_MEMVIZ_PREDICTED_H_
#define MEMPLAN_ANALYZER_REPORT_MEMVIZ_PREDICTED_H_

#include <cstdint>
#include <string>

#include "analyzer/alloc/caching_allocator.h"
#include "analyzer/alloc/reserved.h"
#include "analyzer/ir/graph.h"
#include "analyzer/report/memviz/snapshot.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan::memviz {

// Fills *out (and *report) with the prediction of `iterations` training steps
// of the simulated program; `graph_file` and `alloc_conf` label it.
bool PredictSnapshot(const Graph& g, const Program& program, const SimResult& sim,
                     const alloc::Config& config, const std::string& alloc_conf, int iterations,
                     const std::string& graph_file, Snapshot* out, alloc::ReservedReport* report,
                     std::string* err);

// What the allocator holds while each step (0..num_steps-1) of the last
// iteration runs: the most reserved bytes over the step's events, a step
// without any holding the value before it.
std::vector<int64_t> ReservedDuringSteps(const alloc::ReplayTrace& trace, int num_steps);

// The curves of one snapshot. Invariants: allocated_peak >= allocated_end;
// reserved_peak >= reserved_end; allocs == number of "alloc" entries.
struct SnapshotCurve {
  int64_t allocated_peak = 0;  // live requested bytes, at most
  int64_t allocated_end = 0;
  int64_t reserved_peak = 0;  // segment bytes, at most
  int64_t reserved_end = 0;
  int64_t segments_end = 0;
  int64_t allocs = 0;
};
SnapshotCurve CurveOf(const Snapshot& s);

struct SnapshotComparison {
  SnapshotCurve measured, predicted;
  // Alloc sizes of the two traces, compared in order from the measured
  // trace's first alloc and the predicted alloc it aligns with (the one that
  // starts the longest agreeing run: a recording that starts at the step
  // lacks the prediction's resident allocs): the number that agree before
  // the first difference, and that difference (index, in measured allocs;
  // -1: none within the shorter trace).
  int64_t aligned_at_predicted_alloc = 0;
  int64_t matching_allocs = 0;
  int64_t first_divergence = -1;
  int64_t measured_size_at_divergence = 0, predicted_size_at_divergence = 0;
  std::string measured_frame_at_divergence, predicted_frame_at_divergence;
  // Of the measured trace's distinct alloc sizes, the share that the
  // prediction also allocates: a snapshot of another model scores low.
  double size_overlap = 0;
};

// Lowest size_overlap accepted as a recording of the same step.
inline constexpr double kMinSizeOverlap = 0.5;
// Predicted allocs tried as the start of the alignment, at most.
inline constexpr int kMaxAlignmentCandidates = 256;

// False with a message when the measured snapshot has no alloc in its trace
// or its alloc sizes overlap the prediction's less than kMinSizeOverlap.
bool CompareSnapshots(const Snapshot& measured, const Snapshot& predicted, SnapshotComparison* out,
                      std::string* err);

}  // namespace memplan::memviz

#endif  // MEMPLAN_ANALYZER_REPORT_MEMVIZ_PREDICTED_H_
