// Reading and writing memplan.plan/1 documents (SPEC section 3): a step
// program over the joint graph plus what the planner decided and predicted.
//
// ParsePlan checks the document's form and resolves every op and tensor id
// against the joint graph; it does not check that the program is valid (every
// backward op once, inputs alive, ...): that is Simulate's job. Errors have
// the form "FILE: POINTER: what was found; expected what", as the graph
// importer's.
#ifndef MEMPLAN_ANALYZER_PLAN_PLAN_DOCUMENT_H_
#define MEMPLAN_ANALYZER_PLAN_PLAN_DOCUMENT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/plan/sac_policy.h"
#include "analyzer/sim/program.h"

namespace memplan {

struct PlanPrediction {
  int64_t peak_bytes = 0;
  int64_t baseline_peak_bytes = 0;
  double recompute_cost = 0;        // finite, >= 0
  std::string cost_unit = "flops";  // "flops" | "time_us" | "bytes"
};

struct Plan {
  std::string graph;         // the graph's name
  std::string graph_sha256;  // of the graph file's bytes, 64 lower-case hex digits
  int64_t budget_bytes = 0;
  bool feasible = false;
  // Tensor index -> mode. ParsePlan returns it sorted by tensor index and
  // PlanToJson writes it in that order.
  std::vector<std::pair<int, AccumulationMode>> accumulation;
  std::vector<int> saved, recomputed;  // tensor indices
  PlanPrediction predicted;
  Program program;
  // Module scopes to wrap (module and sac granularity); written only when
  // non-empty.
  std::vector<std::string> modules;
  // Sac granularity: per module, its forward ops and their policies
  // (sac_policy.h); written only when non-empty. Each op is a forward op
  // of the joint graph, named with its type so that the framework side can
  // match it without the graph.
  std::vector<SacRegion> sac;
};

// "flops", "time_us", "bytes".
bool IsPlanCostUnit(const std::string& unit);

// Deterministic text: members in the order of SPEC section 3 ("modules" and
// "sac", when present, after "recomputed"), one step per line.
std::string PlanToJson(const Graph& joint, const Plan& plan);

// Parses `text` (named `file` in errors); ids are resolved against `joint`.
bool ParsePlan(const std::string& text, const std::string& file, const Graph& joint, Plan* plan,
               std::string* err);
bool LoadPlanFile(const std::string& path, const Graph& joint, Plan* plan, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_PLAN_PLAN_DOCUMENT_H_
