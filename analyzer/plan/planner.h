// Checkpoint planners: which forward tensors to keep for the backward and
// which to recompute, so that a training step's peak fits a budget at the
// least recompute cost found.
//
// What it sees: the joint graph (forward, backward and optimizer ops, with
// their tensors' sizes), a budget in bytes of the simulator's peak
// (allocated bytes: live tensors plus the running op's workspace, no
// fragmentation), and PlannerOptions: the cost model (cost_model.h), the
// accumulation mode, the algorithm, the granularity and the work bounds.
// Nothing else: no allocator model, no device, no importer or report.
//
// What it returns: a PlanResult. Its best plan is a checkpoint set (keep, by
// tensor), with, at op granularity, the dropped tensors recomputed at each
// use instead of held and the ops whose dead inputs are recomputed last
// first (checkpoint.h); the program BuildCheckpointProgram makes of it, that
// program's replay by the simulator, and its cost: the summed cost
// (cost_model.h) of its recomputed op runs, plus SAC's dispatch charge at
// sac granularity. At module and sac granularity, also the modules to wrap.
// The search only chooses sets: every figure it reports is the simulator's.
//
// Invariants of the result:
//  - Deterministic: the same graph, budget and options give the same plan,
//    bit for bit (no clock, randomness or threads in the search).
//  - best.sim is the replay of best.checkpoint.program, which passed the
//    simulator's validity checks, with what is alive at its peak.
//  - feasible iff best.sim.peak_bytes <= budget_bytes. When not, best is the
//    lowest peak met (the cheaper of equal peaks) and min_feasible_peak_bytes
//    its peak; lower_bound_bytes (PeakLowerBound) <= every peak.
//  - Never dearer than a seed that fits: at op granularity the hand-written
//    sets (baselines.h) and, where it runs, the chain DP's plan are scored
//    first; at sac granularity the module plan of the same budget.
//  - search_complete false where the least cost (or, infeasible, the least
//    peak) is not proven: the exact search hit its limits, or a heuristic's
//    lowest peak is above the floor.
//  - evaluations counts the programs the search scored, seeds included (not
//    the chain DP's own model replay, a nested module plan's programs, or
//    the final replay that collects what is alive at the peak).
//
// Complexity: each program scored is one build and one replay, O(ops x arity
// + tensors) (times the reruns when tensors are recomputed at each use). The
// greedy is O(rounds x that); Improve adds at most kImproveEvaluations
// programs or about 1e6 op runs; Exact is exponential in the candidates,
// capped at kMaxExactEvaluations programs or kMaxExactOpReplays op runs;
// Chain is O(m x L x F) plus one replay (chain_dp.h). Memory: a few vectors
// per program, O(ops + tensors).
//
// Where it falls short: the budget bounds the simulator's allocated peak, not
// what a caching allocator reserves (reserved_plan.h plans for that above
// this); the program space is checkpoint sets (a dropped tensor is
// recomputed once and held to its last use, or recomputed at each use), two
// recomputation orders per op, ops in schedule order (nothing is
// rescheduled or offloaded); costs are the cost model's, relative
// rather than measured unless measured costs are given; module granularity
// decides whole scope prefixes only. Greedy and Improve are heuristics
// (below); only Exact, on small graphs, and Chain, on op chains, are optimal
// over their spaces. docs/planning.md has the measurements, and the History
// of how these recipes came to be.
//
// Greedy (any graph). Recipe: start from keeping every candidate (the
// baseline); while the simulated peak is over the budget, drop from the
// checkpoint set the tensors alive at the peak with the most bytes per unit of
// recompute cost (its producer's cost; memory-bound ops are cheap), one at a
// time on graphs under 2,000 candidates while the peak is within four times
// the budget, else the best 2% per round, or, if more, the best whose bytes at
// the peak cover half the excess; when
// nothing droppable is alive at the peak (it holds recomputed tensors),
// recompute the largest of those at each use while that lowers the peak,
// then (once) reverse the recomputation order of each op reading two dropped
// tensors where that lowers the peak, then keep for good the recomputed
// tensor alive there that is made midway in the forward, splitting the
// recomputed stretch (as sqrt(n) checkpointing does); then hold again each
// tensor recomputed at each use where it still fits, and try to keep again,
// most expensive first, each dropped tensor whose return keeps the peak
// within the budget (first those whose bytes fit the headroom, then, on
// graphs of at most 256 groups, the rest: a tensor recomputed from one held
// only for it returns at no cost in bytes; on large graphs in batches that
// double while they fit; after one does not, a binary search finds how much
// of it fits). The drop rounds stop when the peak fits, or when nothing alive
// at the peak can be dropped or kept (infeasible: the lowest peak met is
// reported; when no seed fits either, the rounds run once more from the
// baseline, giving up the each-use switches for pins after 64 rounds without
// a lower peak, and the lower of the two is kept), or after about
// greedy_drop_op_replays op runs (4x that when no seed fits: the lowest peak
// met is reported, search_complete false), or, when a seed fits (the
// hand-written and chain sets are scored first; at module and sac
// granularity, every module wrapped), when the rounds stall above the budget
// (on graphs of 2,000 groups or more: the rate at which the lowest peak fell
// over the last 8 rounds of any kind would not reach the budget within that
// bound), or when their plan costs over 4x that seed: the keep-again then
// starts from the cheapest seed that fits. O(rounds x (ops + tensors)). Not
// optimal: alone it never trades one expensive drop for two cheap ones
// (Improve below does, on small graphs), a recomputation's own transient
// memory is only seen after the drop, and on budgets only a hand-written set
// reaches it may stop early at that set.
//
// Improve (after the greedy, at op granularity, on graphs of at most 256
// candidates). Recipe: local search from the cheapest plan that fits, two
// moves per round, each scored by the simulator: (a) drop one more group
// alive at the peak, then keep again what fits, dearest first and,
// separately, most cost per byte first (a knapsack's two greedy orders); (b)
// keep one dropped group, drop again at the peak (by bytes that cover the
// excess per cost, an op's outputs together, free when the op reruns
// already) up to 6 times until it fits, then keep again. A round takes every
// move's best; rounds repeat while the cost falls. O(groups^2) programs per
// round, bounded by 4,000 programs or 1e6 op runs. Finds the trades of one
// dear drop for several cheap ones that the greedy misses; on larger graphs
// it does not run.
//
// Chain (chain_dp.h): dynamic programming over the stages between
// single-tensor cuts; optimal on op chains. At op granularity its plan is
// also scored as a seed by the greedy and exact searches (graphs of up to 400
// stages, and op chains of up to 20k), so neither returns a dearer plan that
// fits. Auto picks it alone on op chains of over 20k stages, where its model
// is exact and the greedy slow.
//
// Exact (up to kMaxExactCandidates candidates). Recipe: branch and bound over
// keep / hold / recompute at each use per candidate (the last where
// EachUseMatters), most expensive producer first, in that order (cost never
// falls along it), and at each leaf every recomputation order of the ops
// reading two or more dropped tensors (checkpoint.h: input order or last
// first; up to 2^8 orders, else input order and search_complete false); a
// branch is cut when its cost with every undecided candidate kept and what
// is recomputed at each use held (a lower bound for every order: keeping
// more never recomputes more, a held program reruns each op once in any
// order, and recomputing at each use reruns at least that) reaches the best
// plan found, the greedy plan being the first. Exponential in the candidates
// in the worst case; optimal over that program space unless it stops at
// kMaxExactEvaluations programs or kMaxExactOpReplays op runs (then the best
// found is returned, search_complete false). Orders other than these two per
// op (three or more dead inputs) are not searched. Below the floor
// (PeakLowerBound) nothing can fit: with at most kMaxLeastPeakPrograms
// programs every one is scored in every order (within 4x that many) so the
// least peak reported is exact; with up to kMaxLeastPeakCandidates
// candidates, every set; with more, it is the least the greedy, hand-written
// and chain sets reach (search_complete false unless every program was
// scored).
#ifndef MEMPLAN_ANALYZER_PLAN_PLANNER_H_
#define MEMPLAN_ANALYZER_PLAN_PLANNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/plan/cost_model.h"
#include "analyzer/sim/checkpoint.h"
#include "analyzer/sim/lean_replay.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan {

constexpr size_t kMaxExactCandidates = 22;  // tensors or modules
// The exact search stops after this many programs, or after replaying about
// this many op runs in all (search_complete false).
constexpr int64_t kMaxExactEvaluations = 200000;
constexpr int64_t kMaxExactOpReplays = 10000000;
// Below the floor, the exact planner scores every program of the space when
// there are at most kMaxLeastPeakPrograms, else every set up to
// kMaxLeastPeakCandidates candidates.
constexpr size_t kMaxLeastPeakCandidates = 14;
constexpr int64_t kMaxLeastPeakPrograms = 1 << 16;

enum class PlanAlgorithm { kAuto, kExact, kGreedy, kChain };
bool ParsePlanAlgorithm(std::string_view name, PlanAlgorithm* out);
const char* PlanAlgorithmName(PlanAlgorithm a);

// What one keep/drop decision covers: a tensor, or a module: the tensors
// made inside a scope prefix of module_depth components that no forward op
// outside it reads (what wrapping the module in torch.utils.checkpoint,
// Zygote.checkpointed or jax.checkpoint recomputes). Tensors of ops without
// a scope are always kept at module granularity. A dropped module is
// recomputed at once at the backward's first need of one of its tensors, as
// torch.utils.checkpoint does (checkpoint.h, recompute groups).
// Sac: one decision per forward op (all its buffers together) made inside a
// module at module_depth, whose outputs leave it never dropped; a module
// with a dropped op is recomputed at once as at module granularity, skipping
// what its policy saves: plans that selective activation checkpointing
// (sac_policy.h) runs as they are simulated. A module with some ops dropped
// and some kept gets a policy, which costs SacDispatchCost per forward op of
// the module in each of its two passes (added to the plan's recompute
// cost); a module with every op dropped is wrapped plainly, at no such cost.
enum class Granularity { kOp, kModule, kSac };
bool ParseGranularity(std::string_view name, Granularity* out);
const char* GranularityName(Granularity g);

struct PlannerOptions {
  CostModel cost;
  AccumulationMode accumulation = AccumulationMode::kInplace;
  PlanAlgorithm algorithm = PlanAlgorithm::kAuto;  // exact when small enough, else greedy
  Granularity granularity = Granularity::kOp;
  int module_depth = 2;  // "h.0.attn.c_attn" -> module "h.0"
  // The greedy's drop rounds stop after replaying about this many op runs
  // in all when a seed (a hand-written or chain set) fits the budget; it
  // then keeps again from the cheapest seed that fits (4x as many when none
  // fits).
  int64_t greedy_drop_op_replays = 10000000;
  // The greedy's plan is improved by local search (Improve above); false:
  // the greedy alone.
  bool local_search = true;
  // Trials kept only under a bound stop their replay past it
  // (SimOptions::stop_above): the same plans and result, sooner. false:
  // every trial replayed whole (tests hold the two to the same result).
  bool stop_trials = true;
  // Plan the step as a later micro-batch of gradient accumulation: every
  // program is scored with SimOptions::accumulating_gradients, so the peak
  // the budget bounds counts the parameter gradients' accumulators.
  bool accumulating_gradients = false;
  // Called after each program the search scores, with the count so far (the
  // CLI's progress line); may be empty.
  std::function<void(int64_t programs)> progress;
  // Called as a longer search moves on: ("sweep", budget index, budgets) or
  // ("micro-batch", the batch being tried, 0); may be empty.
  std::function<void(const char* stage, int64_t done, int64_t total)> stage;
  // When set (by another thread), the search stops before its next program:
  // PlanCheckpoints returns false with the error kPlanCancelled. May be null.
  const std::atomic<bool>* cancel = nullptr;
};

// The error of a plan stopped by PlannerOptions::cancel.
inline constexpr const char* kPlanCancelled = "the plan was cancelled";

// A checkpoint set with its program and score.
struct ScoredPlan {
  std::vector<bool> keep;  // by tensor index
  // By tensor index: dropped tensors recomputed at each use; may be empty.
  std::vector<bool> each_use;
  std::vector<bool> reverse_order;  // by op index (checkpoint.h); may be empty
  CheckpointProgram checkpoint;
  SimResult sim;
  double recompute_cost = 0;
};

// Invariants (see the top of this file): best.sim.peak_bytes <= budget_bytes
// when feasible; otherwise best is the lowest peak the search met
// (min_feasible_peak_bytes). best's program passed the simulator's validity
// checks (the search's trials are replayed peak-only, unchecked).
struct PlanResult {
  bool feasible = false;
  PlanAlgorithm algorithm = PlanAlgorithm::kGreedy;  // the one that ran
  ScoredPlan best;
  int64_t baseline_peak_bytes = 0;
  int64_t min_feasible_peak_bytes = 0;  // the lowest peak found, fitting or not
  int64_t lower_bound_bytes = 0;        // PeakLowerBound: no program goes lower
  double step_cost = 0;                 // cost of one training step, no recompute
  int64_t evaluations = 0;              // programs simulated
  int64_t stopped_trials = 0;           // of them, replays stopped (stop_trials)
  std::vector<std::string> modules;     // module or sac granularity: the modules to wrap
  // Sac granularity: those of `modules` wrapped with a policy (some of their
  // ops kept); the others are wrapped plainly, every op recomputed.
  std::vector<std::string> policy_modules;
  // Sac granularity: SacDispatchCost for each forward op of policy_modules,
  // twice; part of best.recompute_cost.
  double sac_dispatch_cost = 0;
  // false: the exact search hit its limits, or the least peak of an
  // infeasible budget is not proven (see Exact above; the greedy and chain
  // searches prove it only when it is the floor, lower_bound_bytes).
  bool search_complete = true;
};

// What ScoreCheckpointSet reuses between peak-only calls.
struct ScoreScratch {
  ProgramLayout layout;
  LeanReplayScratch replay;
};

// How ScoreCheckpointSet builds and replays a set's program. {} is the
// on-demand program under inplace accumulation, replayed in detail; e.g.
// {.program = {.mode = m, .each_use = &each_use}, .detailed = false}.
struct ScoreOptions {
  // Accumulation mode, recompute groups (by tensor: recompute each group at
  // once, as torch.utils.checkpoint reruns a whole module), each use and
  // recomputation order (checkpoint.h).
  CheckpointProgramOptions program;
  // Also collect what is alive at the peak (a second replay).
  bool detailed = true;
  // SimOptions::accumulating_gradients.
  bool accumulating_gradients = false;
  // SimOptions::peak_only: the plan's simulation holds its figures only,
  // replayed from the program's layout (sim/lean_replay.h: unchecked), and
  // checkpoint.program stays empty (the rest of checkpoint is filled).
  bool peak_only = false;
  // SimOptions::stop_above (with peak_only): the replay stops once the live
  // bytes pass it (sim.stopped).
  int64_t stop_above = std::numeric_limits<int64_t>::max();
  // With peak_only and detailed false: what is alive at the peak all the
  // same when the replay did not stop and the peak is below this.
  int64_t collect_below = std::numeric_limits<int64_t>::min();
  // With peak_only: storage reused from one call to the next (one per
  // thread); null: the call's own.
  ScoreScratch* scratch = nullptr;
};

// Scores one checkpoint set (keep, by tensor) with op costs by op index
// (OpCosts): builds its program, replays it, and sums the cost of the
// recomputed op runs. *out holds the set, its program and the replay, and
// copies of options.program's each_use and reverse_order. False only if the
// program is invalid (a bug).
bool ScoreCheckpointSet(const Graph& g, const std::vector<bool>& keep,
                        const std::vector<double>& costs, const ScoreOptions& options,
                        ScoredPlan* out, std::string* err);

// Plans g under budget_bytes (the recipes and the result's contract: the
// top of this file). Not fitting is no error: result->feasible says. False
// only when the options do not apply (exact on too many candidates, chain
// at module granularity) or a program is invalid (a bug), with err set.
bool PlanCheckpoints(const Graph& g, int64_t budget_bytes, const PlannerOptions& options,
                     PlanResult* result, std::string* err);

// One point of the curve of recompute cost against budget.
struct SweepPoint {
  int64_t budget_bytes = 0;
  bool feasible = false;
  int64_t peak_bytes = 0;  // of the plan chosen for this budget (the lowest found if none fits)
  double recompute_cost = 0;
};

// Plans at every budget, then makes the curve monotone: a plan found for one
// budget also serves every larger one, so each point takes the cheapest plan
// that fits among all those found. A smaller budget thus never costs less.
// Points come back in the order of `budgets`.
bool SweepBudgets(const Graph& g, const std::vector<int64_t>& budgets,
                  const PlannerOptions& options, std::vector<SweepPoint>* points, std::string* err);

// n budgets evenly spaced from the baseline peak down to the floor
// (PeakLowerBound), largest first.
std::vector<int64_t> SweepRange(int64_t baseline_peak, int64_t floor, int n);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_PLAN_PLANNER_H_
