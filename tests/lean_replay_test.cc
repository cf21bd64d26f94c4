#include "analyzer/sim/lean_replay.h"

#include <doctest/doctest.h>

#include <random>

#include "analyzer/plan/planner.h"
#include "analyzer/sim/checkpoint.h"
#include "random_graph.h"
#include "test_util.h"

namespace memplan {
namespace {

using testing::MustLower;

bool SameSteps(const Program& a, const Program& b) {
  if (a.steps.size() != b.steps.size()) return false;
  for (size_t s = 0; s < a.steps.size(); ++s) {
    const Step& x = a.steps[s];
    const Step& y = b.steps[s];
    if (x.op != y.op || !std::equal(x.free.begin(), x.free.end(), y.free.begin(), y.free.end()) ||
        !std::equal(x.inplace.begin(), x.inplace.end(), y.inplace.begin(), y.inplace.end()))
      return false;
  }
  return true;
}

bool SameLive(const std::vector<LiveBuffer>& a, const std::vector<LiveBuffer>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].tensor != b[i].tensor || a[i].owner != b[i].owner ||
        a[i].workspace_of != b[i].workspace_of || a[i].bytes != b[i].bytes)
      return false;
  return true;
}

// One program, replayed both ways at `bound`: the figures must agree.
void CheckFigures(const Graph& g, const Program& program, const ProgramLayout& layout,
                  SimOptions options, int64_t bound, LeanReplayScratch* scratch, int* stopped) {
  CAPTURE(bound);
  options.stop_above = bound;
  SimResult want, got;
  std::string err;
  REQUIRE(Simulate(g, program, options, &want, &err));
  LeanReplay(g, layout, options, &got, scratch);
  testing::CheckSameFigures(got, want);
  CHECK(got.live_at_peak.empty());
  CHECK(got.live_during.empty());
  *stopped += got.stopped;
}

TEST_CASE("lean replay: the figures of the peak-only replay of the laid-out program") {
  std::mt19937 rng(11);
  LeanReplayScratch scratch;  // one for every graph: reused across sizes
  ProgramLayout layout;
  int stopped = 0, with_takeover = 0, with_reruns = 0, with_accumulators = 0, live_lists = 0;
  const AccumulationMode modes[] = {AccumulationMode::kInplace, AccumulationMode::kOutOfPlace,
                                    AccumulationMode::kDeferred};
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    Graph g = MustLower(testing::RandomForwardGraph(seed, 10 + static_cast<int>(seed % 25)));
    std::vector<bool> keep(g.tensors.size(), false), each_use(g.tensors.size(), false),
        reverse(g.ops.size(), false);
    for (int t : CheckpointCandidates(g)) {
      keep[t] = rng() % 2 == 0;
      each_use[t] = rng() % 3 == 0;
    }
    for (size_t o = 0; o < reverse.size(); ++o) reverse[o] = rng() % 4 == 0;
    const CheckpointProgramOptions program{
        .mode = modes[seed % 3], .each_use = &each_use, .reverse_order = &reverse};
    const CheckpointProgram built = BuildCheckpointProgram(g, keep, program);
    const CheckpointProgram laid = LayOutCheckpointProgram(g, keep, program, &layout);
    CHECK(laid.program.steps.empty());
    CHECK(laid.recomputed_ops == built.recomputed_ops);
    CHECK(laid.recomputed_tensors == built.recomputed_tensors);
    CHECK(SameSteps(MaterializeProgram(layout), built.program));
    for (const auto& [out, in] : layout.takeover) with_takeover += out >= 0;
    with_reruns += !built.recomputed_ops.empty();

    SimOptions options;
    options.op_cost.resize(g.ops.size());
    for (double& c : options.op_cost) c = 0.1 * static_cast<double>(rng() % 100);
    options.peak_only = true;
    options.accumulating_gradients = seed % 2 == 1;
    SimResult whole;
    std::string err;
    REQUIRE(Simulate(g, built.program, options, &whole, &err));
    if (options.accumulating_gradients) {
      SimOptions plain = options;
      plain.accumulating_gradients = false;
      SimResult without;
      REQUIRE(Simulate(g, built.program, plain, &without, &err));
      with_accumulators += whole.start_bytes > without.start_bytes;
    }
    // What is alive at the peak, after start-up and at a few other run steps.
    std::vector<int> steps = {whole.peak_step, -1};
    for (int k = 0; k < 3; ++k) {
      int s = static_cast<int>(rng() % built.program.steps.size());
      while (!built.program.steps[s].IsRun()) --s;  // a free step follows a run
      steps.push_back(s);
    }
    for (int step : steps) {
      CAPTURE(step);
      SimResult want, got;
      want.peak_step = step;
      SimOptions collect;
      collect.accumulating_gradients = options.accumulating_gradients;
      REQUIRE(CollectLiveAtPeak(g, built.program, collect, &want, &err));
      LeanLiveAt(g, layout, options.accumulating_gradients, step, &got, &scratch);
      CHECK(SameLive(got.live_at_peak, want.live_at_peak));
      CHECK(got.peak_by_kind == want.peak_by_kind);
      live_lists += !want.live_at_peak.empty();
    }
    for (int64_t bound :
         {std::numeric_limits<int64_t>::max(), whole.peak_bytes, whole.peak_bytes - 1,
          (whole.start_bytes + whole.peak_bytes) / 2, whole.start_bytes, whole.start_bytes - 1})
      CheckFigures(g, built.program, layout, options, bound, &scratch, &stopped);
  }
  // Not vacuous: takeovers, reruns, accumulators and stopped replays all met.
  CHECK(with_takeover >= 10);
  CHECK(with_reruns >= 30);
  CHECK(with_accumulators >= 15);
  CHECK(stopped >= 100);
  CHECK(live_lists >= 240);
}

TEST_CASE("lean replay: a peak-only score keeps no program, and what is alive only if asked") {
  Graph g = MustLower(testing::RandomForwardGraph(5, 24));
  std::vector<bool> keep(g.tensors.size(), false);
  const std::vector<double> costs(g.ops.size(), 1.0);
  ScoreScratch scratch;
  ScoredPlan full, lean, cut;
  std::string err;
  REQUIRE(ScoreCheckpointSet(g, keep, costs, {.detailed = false}, &full, &err));
  REQUIRE(ScoreCheckpointSet(
      g, keep, costs, {.detailed = false, .peak_only = true, .scratch = &scratch}, &lean, &err));
  CHECK(lean.sim.peak_bytes == full.sim.peak_bytes);
  CHECK(lean.recompute_cost == full.recompute_cost);
  CHECK(lean.checkpoint.program.steps.empty());
  CHECK(lean.checkpoint.recomputed_ops == full.checkpoint.recomputed_ops);
  CHECK(lean.sim.live_at_peak.empty());  // not asked for
  REQUIRE(ScoreCheckpointSet(g, keep, costs,
                             {.detailed = false,
                              .peak_only = true,
                              .stop_above = full.sim.peak_bytes - 1,
                              .scratch = &scratch},
                             &cut, &err));
  CHECK(cut.sim.stopped);
  CHECK(cut.checkpoint.program.steps.empty());
  CHECK(cut.recompute_cost == full.recompute_cost);
  // Detailed and peak-only: what is alive at the peak, as a full replay finds it.
  ScoredPlan detailed, lean_detailed;
  REQUIRE(ScoreCheckpointSet(g, keep, costs, {}, &detailed, &err));
  REQUIRE(ScoreCheckpointSet(g, keep, costs, {.peak_only = true}, &lean_detailed, &err));
  CHECK(SameLive(lean_detailed.sim.live_at_peak, detailed.sim.live_at_peak));
  CHECK(lean_detailed.sim.peak_by_kind == detailed.sim.peak_by_kind);
  // Not detailed: collected only when the peak is below collect_below.
  for (int64_t below : {full.sim.peak_bytes, full.sim.peak_bytes + 1}) {
    ScoredPlan trial;
    REQUIRE(ScoreCheckpointSet(g, keep, costs,
                               {.detailed = false, .peak_only = true, .collect_below = below},
                               &trial, &err));
    CHECK(trial.sim.live_at_peak.empty() == (below == full.sim.peak_bytes));
    if (below > full.sim.peak_bytes)
      CHECK(SameLive(trial.sim.live_at_peak, detailed.sim.live_at_peak));
  }
}

}  // namespace
}  // namespace memplan
