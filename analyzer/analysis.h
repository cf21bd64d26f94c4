// The analyze pipeline: import, lower when forward-only, build the baseline
// program, simulate it, and bound it from below.
#ifndef MEMPLAN_ANALYZER_ANALYSIS_H_
#define MEMPLAN_ANALYZER_ANALYSIS_H_

#include <string>
#include <vector>

#include "analyzer/graph.h"
#include "analyzer/graph_json.h"
#include "analyzer/program.h"
#include "analyzer/simulator.h"

namespace memplan {

// A graph ready for the backward: joint as given, or lowered from forward-only.
struct JointGraph {
  std::string file;
  Graph graph;
  bool lowered = false;  // the input was forward-only
  size_t input_ops = 0;  // counts in the file as given
  size_t input_tensors = 0;
  std::vector<std::string> warnings;
  double parse_seconds = 0;  // wall time of reading and checking the file
  double lower_seconds = 0;  // wall time of the lowering (0 for joint input)
};

// Reads a memplan.graph/1 JSON document or an ONNX model (told apart by
// content: JSON starts with '{' after whitespace; see analyzer/onnx_import.h),
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
};

// Baseline program of `joint` under `mode`, simulated. Errors only for graphs
// whose baseline is invalid (e.g. a backward op that reads a freed tensor).
bool AnalyzeBaseline(const Graph& joint, AccumulationMode mode, Analysis* out, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_ANALYSIS_H_
