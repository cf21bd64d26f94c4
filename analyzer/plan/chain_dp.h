// Chain planner: dynamic programming over a chain of stages, in the spirit
// of Revolve/rotor, under the single-recomputation checkpoint model of
// checkpoint.h, with heterogeneous stage sizes and costs.
//
// Stages. The forward schedule is cut wherever at most one non-resident
// tensor crosses from the ops before to the ops after (an articulation
// tensor: the residual stream between transformer blocks, the output of each
// op of an op chain). A stage is the run of ops between two cuts. The DP
// keeps or drops each stage as a whole: all candidates (checkpoint.h) made in
// the stage. On an op chain a stage is one op and this is every checkpoint
// set.
//
// Model. One save-all program A is simulated. With a set K, what is alive at
// an op of A differs from A by whole stages: in the forward, a dropped stage
// is dead once the stage after it is done; in the backward, the dropped
// stages below the current one are dead until the first backward op reading
// the top of their run (the trigger), which recomputes the run at once, one
// stage after another. So every op's live bytes under K are its bytes in A
// less the dropped bytes below it, plus, at a trigger, the stages recomputed
// so far. Each constraint "live <= budget" becomes "dropped bytes below >=
// a threshold".
//
// Recipe: nodes are kept stages (0: the inputs, m+1: the end). A move from
// kept stage j to kept stage k drops the stages between, costs their ops,
// and is allowed when the bytes dropped before j meet the thresholds of the
// forward ops of stages j+1..k, the backward ops of stages j+1..k and the
// recomputation of the run. Each node holds the Pareto front of (dropped
// bytes, cost) over the ways to reach it; the answer is the cheapest way to
// the end. O(m x L x F) for m stages, runs of at most L stages and fronts of
// at most F points, plus one simulation.
//
// Optimality. On an op chain (every forward op reads one non-resident tensor,
// made by the op before) the model is exact and, with L and F unbounded
// (small graphs), the plan is optimal over all checkpoint sets; tests hold it
// to the exhaustive optimum. Not optimal: on larger graphs L and F are
// bounded (dropping a run of more than L stages is never tried; fronts are
// thinned); on chains of multi-op stages only whole stages are dropped (the
// greedy planner can drop single cheap tensors), and the model is an upper
// bound there (a dropped tensor that dies inside its stage is counted to its
// stage's end). The planner scores every DP plan with the simulator.
#ifndef MEMPLAN_ANALYZER_PLAN_CHAIN_DP_H_
#define MEMPLAN_ANALYZER_PLAN_CHAIN_DP_H_

#include <cstdint>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/sim/program.h"

namespace memplan {

// The stages of a graph's forward.
struct ChainStages {
  int num_stages = 0;                // m
  std::vector<int> stage_of_op;      // forward ops: 1..m; other ops: -1
  std::vector<int> stage_of_tensor;  // candidates (and their views): 1..m; else -1
};
ChainStages FindChainStages(const Graph& g, AccumulationMode mode);

struct ChainDpOptions {
  int max_run = 0;  // L: most stages one run may drop; 0: no bound
  // With max_run set: if nothing fits, retry with runs 4x as long while they
  // stay within this (the stage model is built once for all rounds).
  int max_run_limit = 0;
  int max_front = 0;  // F: most points per Pareto front; 0: no bound
};

// Invariants when found: keep covers every candidate (true in kept stages);
// modeled_peak_bytes <= budget; cost is the summed cost of the recomputed
// producers, which a simulation of the set reproduces. On an op chain
// modeled_peak_bytes is the simulated peak.
struct ChainPlan {
  bool found = false;
  std::vector<bool> keep;  // by tensor index
  double cost = 0;
  int64_t modeled_peak_bytes = 0;
  int stages = 0;
};

// op_costs by op index (cost_model.h OpCosts). False only on an internal
// error (the save-all program failed to simulate), with err set.
bool PlanChain(const Graph& g, int64_t budget_bytes, const std::vector<double>& op_costs,
               AccumulationMode mode, const ChainDpOptions& options, ChainPlan* plan,
               std::string* err);
// The same with the stages FindChainStages(g, mode) already found.
bool PlanChain(const Graph& g, const ChainStages& stages, int64_t budget_bytes,
               const std::vector<double>& op_costs, AccumulationMode mode,
               const ChainDpOptions& options, ChainPlan* plan, std::string* err);

// The model's peak and cost for a set that keeps or drops whole stages (a
// stage counts as kept when its first candidate is). For tests: on op chains
// it equals the simulator.
bool ChainModel(const Graph& g, const std::vector<bool>& keep, const std::vector<double>& op_costs,
                AccumulationMode mode, int64_t* peak_bytes, double* cost, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_PLAN_CHAIN_DP_H_
