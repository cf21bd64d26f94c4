// The analyze pipeline: import, lower when forward-only, build the baseline
// program, simulate it, and bound it from below.
#ifndef MEMPLAN_ANALYZER_DRIVERS_ANALYSIS_H_
#define MEMPLAN_ANALYZER_DRIVERS_ANALYSIS_H_

#include <string>
#include <vector>

#include "analyzer/alloc/device_memory.h"
#include "analyzer/alloc/reserved.h"
#include "analyzer/import/graph_json.h"
#include "analyzer/ir/graph.h"
#include "analyzer/lower/parallel/rank_stats.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan {

// A graph ready for the backward: joint as given, or lowered from forward-only.
struct JointGraph {
  std::string file;
  Graph graph;
  bool lowered = false;  // the input was forward-only
  size_t input_ops = 0;  // counts in the file as given
  size_t input_tensors = 0;
  std::vector<std::string> warnings;
  double parse_seconds = 0;      // wall time of reading and checking the file
  double lower_seconds = 0;      // wall time of the lowering (0 for joint input)
  parallel::RankStats parallel;  // one rank's step (rank_step.h); strategy none: the whole step
};

// Reads a memplan.graph/1 JSON document or an ONNX model (told apart by
// content: JSON starts with '{' after whitespace; see analyzer/import/onnx_import.h),
// into a finalized graph. ONNX import notes go to `warnings`.
bool LoadGraphAnyFormat(const std::string& path, const GraphLoadOptions& options, Graph* graph,
                        std::vector<std::string>* warnings, std::string* err);

bool LoadJointGraph(const std::string& path, const GraphLoadOptions& options, JointGraph* out,
                    std::string* err);

struct Analysis {
  AccumulationMode accumulation = AccumulationMode::kInplace;
  double seconds = 0;  // wall time of the baseline, the simulation and the bound
  Program program;
  SimResult sim;
  int64_t lower_bound_bytes = 0;
  // What PyTorch's caching allocator would reserve (PredictBaselineReserved).
  bool has_reserved = false;
  alloc::ReservedReport reserved;
  // With a device (--device): its library workspaces held in `reserved`, and
  // the whole device's total.
  bool has_device = false;
  alloc::DeviceMemory device;
  alloc::DeviceTotal device_total;
};

// Baseline program of `joint` under `mode`, simulated. Errors only for graphs
// whose baseline is invalid (e.g. a backward op that reads a freed tensor).
bool AnalyzeBaseline(const Graph& joint, AccumulationMode mode, Analysis* out, std::string* err);

// The simulator's buffer intervals plus each run step's op workspace as an
// interval of its own, allocated and freed by that step (after the step's
// other mallocs), plus `persistent` blocks (library workspaces,
// alloc/device_memory.h) held from before the first step to the end.
std::vector<BufferInterval> IntervalsWithWorkspaces(const Graph& g, const Program& program,
                                                    const SimResult& sim,
                                                    const std::vector<int64_t>& persistent = {});

// Fills a->reserved with the reserved-memory prediction of a's simulated
// program (analyzer/alloc/reserved.h) over `iterations` training steps;
// `alloc_conf` is the text `config` was parsed from ("" = defaults).
bool PredictBaselineReserved(const Graph& joint, const alloc::Config& config,
                             const std::string& alloc_conf, int iterations, Analysis* a,
                             std::string* err, const std::vector<int64_t>& persistent = {});

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_DRIVERS_ANALYSIS_H_
