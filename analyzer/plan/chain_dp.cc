#include "analyzer/plan/chain_dp.h"

#include <algorithm>
#include <cstddef>
#include <limits>

#include "analyzer/plan/pareto_front.h"
#include "analyzer/sim/checkpoint.h"
#include "analyzer/sim/simulator.h"

namespace memplan {

ChainStages FindChainStages(const Graph& g, AccumulationMode mode) {
  ChainStages stages;
  stages.stage_of_op.assign(g.ops.size(), -1);
  stages.stage_of_tensor.assign(g.tensors.size(), -1);
  std::vector<int> forward;
  for (int o : ScheduleOrder(g, mode))
    if (g.ops[o].phase == Phase::kForward) forward.push_back(o);
  const int n = static_cast<int>(forward.size());
  if (n == 0) return stages;
  std::vector<int> pos(g.ops.size(), -1);
  for (int i = 0; i < n; ++i) pos[forward[i]] = i;
  // A buffer crosses boundary i (between positions i and i+1) when it is
  // made at or before i and read after i; reading a view reads its base.
  std::vector<int> last_read(g.tensors.size(), -1);
  for (int i = 0; i < n; ++i)
    for (int u : g.ops[forward[i]].inputs) last_read[g.tensors[u].base] = i;
  std::vector<int> count(n + 1, 0);
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const Tensor& tensor = g.tensors[t];
    if (tensor.base != static_cast<int>(t) || IsResident(tensor.kind) || tensor.producer < 0)
      continue;
    int p = pos[tensor.producer];
    if (p < 0 || last_read[t] <= p) continue;
    ++count[p];
    --count[last_read[t]];
  }
  int stage = 1, crossing = 0;
  for (int i = 0; i < n; ++i) {
    stages.stage_of_op[forward[i]] = stage;
    crossing += count[i];
    if (crossing <= 1 && i + 1 < n) ++stage;
  }
  stages.num_stages = stage;
  for (int t : CheckpointCandidates(g))
    stages.stage_of_tensor[t] = stages.stage_of_op[g.tensors[t].producer];
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    int base = g.tensors[t].base;
    if (base != static_cast<int>(t) && stages.stage_of_tensor[base] > 0)
      stages.stage_of_tensor[t] = stages.stage_of_tensor[base];
  }
  return stages;
}

namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::min() / 4;

// Per-stage figures measured on the save-all program A. Stage indices
// 1..m; index m+1 is the end.
struct StageModel {
  int m = 0;
  std::vector<int64_t> held;     // candidate bytes alive in A's backward (read by it)
  std::vector<int64_t> hcut;     // the held bytes of the stage's outgoing cut
  std::vector<int64_t> nh_cut;   // the outgoing cut's bytes when it is a candidate not held
  std::vector<double> cost;      // recomputing the stage's candidate-making ops
  std::vector<bool> needed;      // the backward reads one of its candidates
  std::vector<int64_t> fw;       // max live over its forward ops in A
  std::vector<int64_t> rise;     // F: max rise of live over its forward ops in A
  std::vector<int64_t> bw;       // max live over backward ops of sigma s (s = 1..m+1)
  std::vector<int64_t> trig;     // live before the first backward op of sigma <= s
  std::vector<int64_t> H;        // prefix sums of held, H[0] = 0
  std::vector<double> C;         // prefix sums of cost
  std::vector<int> last_needed;  // the largest needed stage <= s, 0 if none
  int64_t start_bytes = 0;
};

bool BuildModel(const Graph& g, const ChainStages& st, const std::vector<double>& op_costs,
                AccumulationMode mode, StageModel* model, std::string* err) {
  const int m = st.num_stages;
  StageModel& M = *model;
  M.m = m;
  M.held.assign(m + 2, 0);
  M.hcut.assign(m + 2, 0);
  M.nh_cut.assign(m + 2, 0);
  M.cost.assign(m + 2, 0);
  M.needed.assign(m + 2, false);
  M.fw.assign(m + 2, kNone);
  M.rise.assign(m + 2, 0);
  M.bw.assign(m + 2, kNone);
  M.trig.assign(m + 2, kNone);

  std::vector<int> candidates = CheckpointCandidates(g);
  std::vector<bool> keep(g.tensors.size(), false), read_by_backward(g.tensors.size(), false);
  for (int t : candidates) keep[t] = true;
  for (const Op& op : g.ops)
    if (op.phase != Phase::kForward)
      for (int u : op.inputs) read_by_backward[g.tensors[u].base] = true;
  // The outgoing cut of a stage: the one buffer its last op leaves to the next.
  std::vector<int> cut(m + 2, -1);
  {
    std::vector<int> forward;
    for (int o : ScheduleOrder(g, mode))
      if (g.ops[o].phase == Phase::kForward) forward.push_back(o);
    for (size_t i = 0; i + 1 < forward.size(); ++i) {
      int s = st.stage_of_op[forward[i]];
      if (st.stage_of_op[forward[i + 1]] == s) continue;
      for (int u : g.ops[forward[i + 1]].inputs) {
        int b = g.tensors[u].base;
        int p = g.tensors[b].producer;
        if (p >= 0 && st.stage_of_op[p] == s && !IsResident(g.tensors[b].kind)) cut[s] = b;
      }
    }
  }
  for (int t : candidates) {
    int s = st.stage_of_tensor[t];
    if (read_by_backward[t]) {
      M.held[s] += g.OwnedBytes(t);
      M.needed[s] = true;
      if (cut[s] == t) M.hcut[s] = g.OwnedBytes(t);
    } else if (cut[s] == t) {
      M.nh_cut[s] = g.OwnedBytes(t);
    }
  }
  for (size_t o = 0; o < g.ops.size(); ++o) {
    int s = st.stage_of_op[o];
    if (s <= 0) continue;
    bool makes_candidate = false;
    for (int t : g.ops[o].outputs) makes_candidate |= st.stage_of_tensor[t] > 0;
    if (makes_candidate) M.cost[s] += op_costs[o];
  }

  CheckpointProgram a = BuildCheckpointProgram(g, keep, {.mode = mode});
  SimOptions sim_options;
  sim_options.collect_live_at_peak = false;
  SimResult sim;
  if (!Simulate(g, a.program, sim_options, &sim, err)) {
    *err = "chain planner: the save-all program is invalid: " + *err;
    return false;
  }
  M.start_bytes = sim.start_bytes;
  const std::vector<Step>& steps = a.program.steps;
  int64_t before = sim.start_bytes;  // live before the current step
  int stage_now = -1;
  int64_t stage_start = 0;
  int sigma = m + 1;
  bool backward = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    if (step.IsRun()) {
      const Op& op = g.ops[step.op];
      if (!backward && op.phase != Phase::kForward) backward = true;
      if (!backward) {
        int s = st.stage_of_op[step.op];
        if (s != stage_now) {
          stage_now = s;
          stage_start = before;
        }
        M.fw[s] = std::max(M.fw[s], sim.live_during[i]);
        M.rise[s] = std::max(M.rise[s], sim.live_during[i] - stage_start);
      } else {
        int lowest = m + 1;
        for (int u : op.inputs)
          if (st.stage_of_tensor[u] > 0) lowest = std::min(lowest, st.stage_of_tensor[u]);
        for (int s = std::min(lowest, sigma); s < sigma; ++s) M.trig[s] = before;
        sigma = std::min(sigma, lowest);
        M.bw[sigma] = std::max(M.bw[sigma], sim.live_during[i]);
      }
    }
    before = sim.live_after[i];
  }
  M.H.assign(m + 2, 0);
  M.C.assign(m + 2, 0);
  M.last_needed.assign(m + 2, 0);
  for (int s = 1; s <= m + 1; ++s) {
    M.H[s] = M.H[s - 1] + M.held[s];
    M.C[s] = M.C[s - 1] + M.cost[s];
    M.last_needed[s] = M.needed[s] ? s : M.last_needed[s - 1];
  }
  return true;
}

// The largest live bytes of the ops a move j -> k covers, plus the dropped
// held bytes before j (D_j): live under the plan = Terms(j, k) - D_j.
// Direct form, O(k - j); the DP computes the same incrementally.
int64_t Terms(const StageModel& M, int j, int k) {
  const int m = M.m;
  int64_t t_max = kNone;
  auto take = [&](int64_t v) { t_max = std::max(t_max, v); };
  const int64_t group = M.H[k - 1] - M.H[j];
  const int top = M.last_needed[k - 1];
  const int64_t ex = top > j ? M.nh_cut[j] : 0;  // c_j waits for the recomputation
  for (int t = j + 1; t <= std::min(k, m); ++t) {
    if (t == j + 1)
      take(M.fw[t]);
    else
      take(M.fw[t] - M.H[t - 1] + M.hcut[t - 1] + M.H[j] + ex);
  }
  if (top > j) {
    for (int s = j + 1; s < k; ++s) take(M.bw[s]);
    for (int t = j + 1; t <= top; ++t) {
      int64_t y = t == j + 1 ? M.H[j] + M.rise[t] + ex : M.H[t - 1] + M.rise[t] + M.nh_cut[t - 1];
      take(M.trig[k - 1] - M.H[k - 1] + y);
    }
  }
  take(M.bw[k] - group + ex);
  return t_max;
}

}  // namespace

bool PlanChain(const Graph& g, int64_t budget_bytes, const std::vector<double>& op_costs,
               AccumulationMode mode, const ChainDpOptions& options, ChainPlan* plan,
               std::string* err) {
  return PlanChain(g, FindChainStages(g, mode), budget_bytes, op_costs, mode, options, plan, err);
}

bool PlanChain(const Graph& g, const ChainStages& st, int64_t budget_bytes,
               const std::vector<double>& op_costs, AccumulationMode mode,
               const ChainDpOptions& options, ChainPlan* plan, std::string* err) {
  *plan = ChainPlan();
  plan->stages = st.num_stages;
  if (st.num_stages == 0) return true;
  StageModel M;
  if (!BuildModel(g, st, op_costs, mode, &M, err)) return false;
  const int m = M.m;
  if (M.start_bytes > budget_bytes) return true;
  const int64_t B = budget_bytes;
  // fronts[k]: the ways to reach kept stage k; a point's dropped bytes are
  // the held bytes dropped before k, less the kept cuts no backward op reads
  // that wait there for a recomputation (D).
  std::vector<std::vector<FrontPoint>> fronts(m + 2);
  std::vector<FrontRun> runs;
  FrontScratch scratch;
  // One round of the DP with runs of at most max_run stages.
  auto run_dp = [&](int max_run) {
    for (std::vector<FrontPoint>& front : fronts) front.clear();
    fronts[0].push_back(FrontPoint{});
    for (int k = 1; k <= m + 1; ++k) {
      std::vector<FrontPoint>& out = fronts[k];
      int64_t max_x = kNone, max_bw = kNone, max_y = kNone;
      const int top_k = M.last_needed[k - 1];
      runs.clear();
      for (int j = k - 1; j >= std::max(0, k - 1 - max_run); --j) {
        // Grow the running maxima to cover stages j+1.. for this j.
        if (j + 2 <= std::min(k, m))
          max_x = std::max(max_x, M.fw[j + 2] - M.H[j + 1] + M.hcut[j + 1]);
        if (j + 1 < k) max_bw = std::max(max_bw, M.bw[j + 1]);
        if (j + 2 <= top_k) max_y = std::max(max_y, M.H[j + 1] + M.rise[j + 2] + M.nh_cut[j + 1]);
        if (fronts[j].empty()) continue;
        const int64_t group = M.H[k - 1] - M.H[j];
        // A kept cut that no backward op reads stays alive until the run after
        // it is recomputed from it.
        const int64_t ex = top_k > j ? M.nh_cut[j] : 0;
        int64_t terms = M.bw[k] - group + ex;
        if (j + 1 <= m) terms = std::max(terms, M.fw[j + 1]);
        if (max_x != kNone) terms = std::max(terms, max_x + M.H[j] + ex);
        double cost = 0;
        if (top_k > j) {
          terms = std::max(terms, max_bw);
          int64_t y = std::max(max_y, M.H[j] + M.rise[j + 1] + ex);
          terms = std::max(terms, M.trig[k - 1] - M.H[k - 1] + y);
          cost = M.C[top_k] - M.C[j];
        }
        const int64_t need = terms - B;  // D_j >= need
        const std::vector<FrontPoint>& in = fronts[j];
        // Sorted by dropped bytes, most first: the valid points are a prefix.
        const auto valid = std::partition_point(
            in.begin(), in.end(), [&](const FrontPoint& p) { return p.dropped >= need; });
        runs.push_back(FrontRun{j, static_cast<int>(valid - in.begin()), group - ex, cost});
      }
      MergeFronts(fronts, runs, &out, &scratch);
      ThinFront(&out, options.max_front);
    }
  };
  // Without a bound, one round. With one: rounds of max_run, 4x as long,
  // ..., up to max_run_limit, until a plan fits.
  int max_run = options.max_run > 0 ? options.max_run : m + 1;
  const int limit = std::max(max_run, options.max_run_limit);
  for (;; max_run *= 4) {
    run_dp(max_run);
    if (!fronts[m + 1].empty() || max_run * 4 > limit) break;
  }
  if (fronts[m + 1].empty()) return true;
  // The cheapest way to the end: the last point (fronts fall in cost).
  std::vector<bool> kept_stage(m + 2, false);
  int node = m + 1, point = static_cast<int>(fronts[m + 1].size()) - 1;
  plan->cost = fronts[node][point].cost;
  plan->modeled_peak_bytes = M.start_bytes;
  while (node > 0) {
    const FrontPoint& p = fronts[node][point];
    kept_stage[node] = true;
    plan->modeled_peak_bytes =
        std::max(plan->modeled_peak_bytes,
                 Terms(M, p.from_node, node) - fronts[p.from_node][p.from_point].dropped);
    node = p.from_node;
    point = p.from_point;
  }
  plan->found = true;
  plan->keep.assign(g.tensors.size(), false);
  for (int t : CheckpointCandidates(g)) plan->keep[t] = kept_stage[st.stage_of_tensor[t]];
  return true;
}

bool ChainModel(const Graph& g, const std::vector<bool>& keep, const std::vector<double>& op_costs,
                AccumulationMode mode, int64_t* peak_bytes, double* cost, std::string* err) {
  ChainStages st = FindChainStages(g, mode);
  StageModel M;
  *peak_bytes = 0;
  *cost = 0;
  if (st.num_stages == 0) return true;
  if (!BuildModel(g, st, op_costs, mode, &M, err)) return false;
  const int m = M.m;
  std::vector<int> first(m + 2, -1);
  for (int t : CheckpointCandidates(g)) {
    int s = st.stage_of_tensor[t];
    if (first[s] < 0) first[s] = t;
  }
  int64_t dropped = 0, peak = M.start_bytes;
  int j = 0;
  for (int k = 1; k <= m + 1; ++k) {
    if (k <= m && (first[k] < 0 || !keep[first[k]])) continue;
    const int top = M.last_needed[k - 1];
    peak = std::max(peak, Terms(M, j, k) - dropped);
    if (top > j) *cost += M.C[top] - M.C[j];
    dropped += M.H[k - 1] - M.H[j] - (top > j ? M.nh_cut[j] : 0);
    j = k;
  }
  *peak_bytes = peak;
  return true;
}

}  // namespace memplan
