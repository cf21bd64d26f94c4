// The search behind PlanCheckpoints (planner.h), private to the plan stage.
// One Search object plans one budget: it holds the keep/drop decisions by
// group, scores them with the simulator (Score records the cheapest plan that
// fits and the lowest peak in the PlanResult as it goes), and runs the
// recipes of planner.h. Its members are defined by concern:
//
//   search_core.cc     set-up, Run (which recipes, in what order), groups,
//                      decisions as vectors, Score
//   search_modules.cc  module and sac granularity: module groups, SAC
//                      policies and their dispatch charge, PlainWraps
//   search_seeds.cc    the hand-written, chain DP and module sets scored first
//   search_greedy.cc   Greedy: drop rounds, hold again, keep again (KeepBack)
//   search_local.cc    Improve: local search from the cheapest plan that fits
//   search_exact.cc    Exact: branch and bound, LeastPeak below the floor
#ifndef MEMPLAN_ANALYZER_PLAN_SEARCH_H_
#define MEMPLAN_ANALYZER_PLAN_SEARCH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/ir/scope.h"
#include "analyzer/plan/chain_dp.h"
#include "analyzer/plan/planner.h"

namespace memplan::plan_search {

// Past this many stages the chain DP takes seconds: auto runs it only on op
// chains, and then alone.
constexpr int64_t kChainAloneStages = 20000;
// Up to this many stages the chain DP runs unbounded (exact on op chains):
// its fronts can hold every sum of stage bytes, so this stays small.
constexpr int64_t kChainExactStages = 64;
// Improve's reach and work bound: groups (its moves are quadratic in them),
// programs, op runs replayed, and drops per move.
constexpr size_t kImproveMaxGroups = 256;
constexpr int64_t kImproveEvaluations = 4000;
constexpr int64_t kImproveOpReplays = 1000000;
constexpr int kImproveRedrops = 6;
// The greedy's drop rounds stop once their plan costs this many times the
// cheapest seed that fits (they seldom lower the cost; the keep-again does).
constexpr double kSeedCostFactor = 4;
// The exact searches try every recomputation order of up to this many ops
// per program (checkpoint.h: reverse_order).
constexpr size_t kMaxOrderOps = 8;

// One keep/drop decision: a candidate tensor (op granularity) or the tensors
// internal to a module (module granularity).
struct Group {
  std::string name;
  std::vector<int> tensors;
  double cost = 0;  // summed cost of the producers
};

class Search {
 public:
  Search(const Graph& g, int64_t budget, const PlannerOptions& options, PlanResult* result);
  // Plans: fills the PlanResult given to the constructor. False only on an
  // error (err set): an algorithm that does not apply, an invalid program.
  bool Run(std::string* err);

 private:
  // --- search_core.cc: groups, decisions, scoring.

  void AddToGroup(const std::string& name, int t);
  // Module and sac granularity: each module's tensors recompute together.
  const std::vector<int>* RecomputeGroups() const;
  // How the current decisions become a program (checkpoint.h).
  CheckpointProgramOptions ProgramOptions(const std::vector<bool>* each_use,
                                          const std::vector<bool>* reverse_order) const;
  // By tensor, from the current decisions: kept (undecided groups count as
  // kept).
  std::vector<bool> KeepVector() const;
  // By tensor: dropped tensors recomputed at each use; empty when none.
  std::vector<bool> EachUseVector() const;
  // The modules to wrap: dropped ones, or at sac granularity those with a
  // dropped op.
  std::vector<std::string> DroppedModules() const;
  // Scores the current decisions; keeps the plan as the result's best when it
  // fits and costs less, and as the lowest when its peak is lower. detailed:
  // with what is alive at the peak (the greedy's drop rounds need it; trials
  // that only ask "does it fit, for how much" do not).
  bool Score(ScoredPlan* out, bool detailed = true);
  // Score(out, false), then what is alive at the peak only if the peak is
  // below `peak` (a trial kept only when it lowers the peak): the same
  // plans, and the same result, as Score(out), without the second replay of
  // the trials that are dropped.
  // It also stops the replay as ScoreUnder(out, peak) does.
  bool ScoreDetailedBelow(ScoredPlan* out, int64_t peak);
  // Score(out, false) for a trial kept only when its peak is at most
  // `bound`: the replay stops once the live bytes pass the largest of
  // `bound`, the lowest peak met and the budget, where the trial can be
  // neither kept, nor the lowest, nor fit (out->sim.stopped; its peak is
  // then only a lower bound). The same plans and result as Score(out, false).
  bool ScoreUnder(ScoredPlan* out, int64_t bound);
  // The three above: what is alive at the peak when the peak is below
  // `collect_below`, the replay stopped past `stop_above` (ScoreUnder).
  bool ScoreTrial(ScoredPlan* out, int64_t collect_below, int64_t stop_above);
  // The search's decisions from a scored plan.
  void SetDecisions(const ScoredPlan& plan);
  // By group, from a keep vector by tensor.
  std::vector<bool> GroupsKept(const std::vector<bool>& keep) const;
  // By group, from an each_use vector by tensor.
  std::vector<bool> GroupsEachUse(const std::vector<bool>& each_use) const;
  int64_t GroupBytes(int grp) const;
  const ChainStages& Stages();
  // Every forward op is a stage of its own.
  bool IsOpChain();

  // --- search_modules.cc: module and sac granularity.

  // Module granularity: a module's group holds the candidates its ops make
  // that no forward op outside it reads (its outputs stay kept, as
  // torch.utils.checkpoint keeps them). Sac granularity: the same candidates,
  // one group per producer op. Both: region_of_ marks every tensor a
  // module's ops make with the module's index (its recompute group), and the
  // outputs of its backward ops too (checkpoint.h: they trigger it).
  void ModuleGroups();
  // Sac granularity: each group's module (from module_of_group, by group),
  // and each module's forward ops (what SAC's dispatch mode runs through
  // twice when the module has a policy).
  void SacModules(const ModuleRegions& regions, const std::vector<std::string>& module_of_group);
  // Sac granularity, by module: whether `keep` (by tensor) wraps it with a
  // policy: some of its groups dropped, some kept. A module with every
  // group dropped is wrapped without one (plain checkpoint()).
  std::vector<bool> ModulesWithPolicy(const std::vector<bool>& keep) const;
  // SAC's dispatch cost of `keep`: two passes over each module with a
  // policy (SacDispatchCost per op and pass).
  double DispatchCharge(const std::vector<bool>& keep) const;
  // Sac granularity, when SAC's dispatch costs something: each module the
  // best plan gives a policy, in turn, recomputed whole instead (no policy,
  // no charge), kept when that fits and costs less. At most one program per
  // module.
  bool PlainWraps();

  // --- search_seeds.cc: sets scored before the greedy.

  // The sets users write by hand (sqrt(n) segments, one checkpoint per block
  // at scope depths 1-3) are scored too, so a plan is never dearer than one
  // of them that fits, and never reaches a higher lowest peak. Op
  // granularity only: at module granularity the search covers blocks.
  bool HandWritten();
  // Scores a seed (by group: kept or not; nothing recomputed at each use)
  // for the result, leaving the search's own decisions as they were.
  bool ScoreSeed(std::vector<bool> groups_kept);
  // The chain DP's plan (chain_dp.h), scored like any other set. Op
  // granularity only. Unbounded (exact on op chains) up to kChainExactStages
  // stages; on longer chains runs and fronts are bounded.
  bool ChainSeed();
  // Sac granularity: the module plan at the same budget, scored as a set of
  // op decisions (an op is dropped when the module plan drops its
  // candidates), so an op-level plan is never dearer than the module plan
  // when both fit.
  bool ModuleSeed();
  // Module and sac granularity: every module in checkpoint(). Dropping the
  // groups alive at the peak one at a time can stall above a budget that
  // this fits (a wrap's recomputation may raise the peak where it runs).
  bool EveryModuleSeed();

  // --- search_greedy.cc: the greedy (planner.h, Greedy).

  // What the greedy's drop rounds carry from one round to the next.
  struct DropRoundState {
    std::vector<int> dropped;          // groups dropped, in order
    std::vector<bool> pinned;          // by group: kept again for good
    std::vector<bool> each_use_tried;  // by group: switched to each use once
    bool orders_tried = false;         // OrderFlips ran
    // The second pass (nothing fit after the first): once the lowest peak
    // stalls, the each-use switches are given up for pins.
    bool pin_when_stalled = false;
    // The lowest peak met before each round (of any kind: drops, each-use
    // switches, order flips, pins), for Stalled and the second pass.
    std::vector<int64_t> lows;
  };
  // current: the baseline (every group kept), scored in detail.
  bool Greedy(ScoredPlan current);
  // The drop rounds, from *current until it fits or they stop; the groups
  // dropped in state->dropped.
  bool DropRounds(ScoredPlan* current, DropRoundState* state);
  // A round when nothing droppable is alive at the peak (it holds
  // recomputed tensors): recompute one at each use, else flip orders (once),
  // else pin one. *stuck: none of them applies.
  bool RecomputedPeakRound(ScoredPlan* current, DropRoundState* state, bool* stuck);
  // The decisions of the cheapest seed that fits, as *current and *dropped.
  void FromBestSeed(ScoredPlan* current, std::vector<int>* dropped);
  // Hold again, where it still fits, what is recomputed at each use.
  bool HoldAgain(ScoredPlan* current);
  // Keep again what fits of `dropped`, most expensive first.
  bool KeepAgain(std::vector<int> dropped, ScoredPlan* current);
  // One drop at a time on graphs under 2,000 groups (0), else 2% of the
  // droppable groups per round (50).
  size_t DropBatchDivisor() const { return groups_.size() < 2000 ? 0 : 50; }
  // While a seed fits, on graphs whose drop rounds take 2% of the groups
  // at the peak or more: whether the rounds, at the rate their lowest peak
  // fell over the last kStallWindow rounds (drops, each-use switches, order
  // flips and pins alike), would reach the budget only after max_rounds (or
  // never: no new low in that window).
  bool Stalled(const std::vector<int64_t>& lows, int64_t max_rounds) const;
  // Keeps back, in `order`, each dropped group whose return keeps the peak
  // within the budget and the cost from rising (keeping more never
  // recomputes more: a guard). First pass: a group whose bytes exceed the
  // headroom would most likely be alive at the peak, so it is skipped
  // unscored (a filter, not a proof; saves a replay). On graphs of at most
  // kImproveMaxGroups groups a second pass scores what the first skipped: a
  // group recomputed from a tensor held only for it returns at no cost in
  // bytes. Looks at the first max_groups of `order`, and stops once
  // result_->evaluations reaches evaluation_limit. *peak, *cost: the current
  // decisions', updated.
  bool KeepBack(const std::vector<int>& order, size_t max_groups, int64_t evaluation_limit,
                int64_t* peak, double* cost);
  // Reverses the recomputation order of each of OrderOps run at current's
  // peak in turn, keeping each reversal that lowers the peak (*lower: one
  // did).
  bool OrderFlips(ScoredPlan* current, bool* lower);
  // Of the dropped groups alive at the peak that are held and whose
  // recomputation at each use may differ, the one with the most bytes
  // there (untried); -1 if none.
  int LargestHeldAtPeak(const ScoredPlan& current, const std::vector<bool>& tried) const;
  // Of the dropped groups alive at the peak, the one whose first tensor is
  // made midway in op order; -1 if none.
  int MiddleRecomputedGroup(const ScoredPlan& current, const std::vector<bool>& pinned) const;

  // --- search_local.cc: local search (planner.h, Improve).

  // Local search from the cheapest plan that fits. Each move starts from
  // result_->best; Score keeps whichever trial is cheaper and fits, so a move
  // that fails costs only its replays.
  bool Improve();
  // Bytes alive at plan's peak by kept group, but `skip`.
  std::map<int, int64_t> KeptBytesAtPeak(const ScoredPlan& plan, int skip) const;
  // Improve's drop unit of a group: its producer op at op granularity (a
  // rerun remakes every output), else the group itself (keys below zero).
  int UnitKey(int grp) const;
  // What dropping a unit adds to the recompute cost, about: nothing when
  // its op already reruns for an output that is dropped.
  double UnitCost(int key, const std::vector<int>& unit_groups) const;

  // --- search_exact.cc: branch and bound (planner.h, Exact).

  // Recompute cost with the current decisions, undecided groups kept,
  // without simulating. With orders searched it holds what is recomputed at
  // each use: a held program reruns each op once in any order, and
  // recomputing at each use reruns at least that, so the bound holds for
  // every order.
  double Bound() const;
  bool Exact();
  // Programs in the search space: per group keep or hold, and recompute at
  // each use where that matters (saturates past kMaxLeastPeakPrograms).
  int64_t ProgramCount() const;
  // Scores every program of the space when there are at most
  // kMaxLeastPeakPrograms, else every set (2^groups): the least peak,
  // exactly over programs or over sets.
  bool LeastPeak();
  // The ops whose recomputation order the current decisions make matter:
  // two or more of their inputs' bases dropped.
  std::vector<int> OrderOps() const;
  // Scores the current decisions in every recomputation order of OrderOps
  // (2^ops programs; past kMaxOrderOps, input order only and the search is
  // not complete).
  bool ScoreOrders();
  // Decides group order_[i] and on: keep, hold, then recompute at each use.
  bool Branch(size_t i);

  const Graph& g_;
  int64_t budget_;
  const PlannerOptions& options_;
  PlanResult* result_;
  std::string* err_ = nullptr;
  std::vector<double> costs_;
  std::vector<int> candidates_, order_;
  std::vector<Group> groups_;
  std::map<std::string, int> group_index_;
  std::vector<int> group_of_;
  std::vector<int> region_of_;  // by tensor: recompute group (RecomputeGroups)
  // Sac granularity (SacModules): by module, its name and forward ops; by
  // group, its module's index.
  std::vector<std::string> sac_module_names_;
  std::vector<int> sac_module_ops_, sac_module_of_group_;
  std::vector<bool> kept_;              // by group
  std::vector<bool> each_use_;          // by group: when dropped, recomputed at each use
  std::vector<bool> each_use_matters_;  // by group (op granularity only)
  std::vector<bool> order_matters_;     // by op (op granularity only; OrderMatters)
  std::vector<bool> reverse_;           // by op: recompute dead inputs last first
  bool order_search_ = false;           // some op's order can matter
  // The lowest peak met: its figures and decisions, not its program, which
  // is scored again only when it is the answer (nothing fits): copying a
  // plan at each lower peak cost more than scoring it once more.
  struct Lowest {
    int64_t peak_bytes = 0;
    double recompute_cost = 0;
    std::vector<bool> keep, each_use, reverse_order;
  };
  Lowest lowest_;
  std::vector<std::string> lowest_modules_;
  ChainStages stages_;
  bool stages_computed_ = false;
  int64_t exact_evaluation_limit_ = kMaxExactEvaluations;
  ScoreScratch scratch_;  // ScoreTrial's
};

}  // namespace memplan::plan_search

#endif  // MEMPLAN_ANALYZER_PLAN_SEARCH_H_
