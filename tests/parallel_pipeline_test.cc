#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "analyzer/lower/parallel/pipeline.h"
#include "analyzer/lower/parallel/rank_step.h"
#include "analyzer/sim/checkpoint.h"
#include "analyzer/sim/simulator.h"
#include "parallel_three.h"
#include "test_util.h"

namespace memplan::parallel {
namespace {

using testing_three::kThree;
using testing_three::U;

PipelineOptions TwoStages(PipelineSchedule schedule, int64_t stage) {
  PipelineOptions o;
  o.stages = 2;
  o.micro_batches = 3;
  o.schedule = schedule;
  o.stage = stage;
  o.split = {"l2"};  // stage 0: f0, f1; stage 1: f2, l
  return o;
}

Graph Stage(const PipelineOptions& o, RankStats* stats, const char* text = kThree) {
  Graph g = testing::MustLower(text);
  std::string err;
  INFO(err);
  REQUIRE(MakePipelineStage(o, &g, stats, &err));
  return g;
}

int64_t Peak(const Graph& g) { return testing::Baseline(g, AccumulationMode::kInplace).peak_bytes; }

std::vector<std::string> OpIds(const Graph& g) {
  std::vector<std::string> ids;
  for (const Op& op : g.ops) ids.push_back(op.id);
  return ids;
}

TEST_CASE("pipeline: the schedules' op order") {
  RankStats stats;
  Graph gpipe = Stage(TwoStages(PipelineSchedule::kGPipe, 0), &stats);
  CHECK(OpIds(gpipe) == std::vector<std::string>{"f0.mb0",
                                                 "f1.mb0",
                                                 "f0.mb1",
                                                 "f1.mb1",
                                                 "f0.mb2",
                                                 "f1.mb2",
                                                 "f1.bw.mb0",
                                                 "f0.bw.mb0",
                                                 "pp.backward_done.mb0",
                                                 "f1.bw.mb1",
                                                 "pp.accumulate_grad.w1.mb1",
                                                 "f0.bw.mb1",
                                                 "pp.accumulate_grad.w0.mb1",
                                                 "pp.backward_done.mb1",
                                                 "f1.bw.mb2",
                                                 "pp.accumulate_grad.w1.mb2",
                                                 "f0.bw.mb2",
                                                 "pp.accumulate_grad.w0.mb2",
                                                 "pp.backward_done.mb2",
                                                 "pp.sends_done"});
  // 1F1B, stage 0 of 2: min(3, 2 - 0) = 2 warm-up forwards, then B, F, B, B.
  Graph one = Stage(TwoStages(PipelineSchedule::k1F1B, 0), &stats);
  CHECK(OpIds(one) == std::vector<std::string>{
                          "f0.mb0", "f1.mb0", "f0.mb1", "f1.mb1", "f1.bw.mb0", "f0.bw.mb0",
                          "pp.backward_done.mb0", "f0.mb2", "f1.mb2", "f1.bw.mb1",
                          "pp.accumulate_grad.w1.mb1", "f0.bw.mb1", "pp.accumulate_grad.w0.mb1",
                          "pp.backward_done.mb1", "f1.bw.mb2", "pp.accumulate_grad.w1.mb2",
                          "f0.bw.mb2", "pp.accumulate_grad.w0.mb2", "pp.backward_done.mb2"});
  CHECK(stats.in_flight == 2);
  CHECK(stats.stage_starts == std::vector<std::string>{"l0", "l2"});
  // Stage 1 (last): one warm-up forward; its backward starts at the loss.
  Graph last = Stage(TwoStages(PipelineSchedule::k1F1B, 1), &stats);
  CHECK(OpIds(last) == std::vector<std::string>{"f2.mb0",
                                                "l.mb0",
                                                "loss.grad.seed.mb0",
                                                "l.bw.mb0",
                                                "f2.bw.mb0",
                                                "f2.mb1",
                                                "l.mb1",
                                                "loss.grad.seed.mb1",
                                                "l.bw.mb1",
                                                "f2.bw.mb1",
                                                "pp.accumulate_grad.w2.mb1",
                                                "pp.backward_done.mb1",
                                                "f2.mb2",
                                                "l.mb2",
                                                "loss.grad.seed.mb2",
                                                "l.bw.mb2",
                                                "f2.bw.mb2",
                                                "pp.accumulate_grad.w2.mb2",
                                                "pp.backward_done.mb2",
                                                "pp.sends_done",
                                                "pp.merge_outputs"});
  CHECK(stats.in_flight == 1);
}

TEST_CASE("pipeline: stage 0's peaks, by hand") {
  // Resident: w0, w1, x per micro-batch (3U) and a receive buffer for y's
  // gradient per micro-batch (3U): 8U. Each forward adds a (saved for f1.bw)
  // and y (sent: held to the end of its backward, under GPipe to the end).
  RankStats stats;
  Graph gpipe = Stage(TwoStages(PipelineSchedule::kGPipe, 0), &stats);
  CHECK(stats.received_buffer_bytes == 3 * U);
  CHECK(stats.rank == 0);
  CHECK(stats.in_flight == 3);
  // GPipe at f1.bw.mb1: 8U + a1, a2 + y0, y1, y2 + w1.grad, w0.grad (micro-
  // batch 0's, the accumulators) + a.grad1 and a fresh w1.grad: 17U.
  CHECK(Peak(gpipe) == 17 * U);
  // 1F1B at f1.bw.mb1: a0 and y0 are gone with B(0): 8U + a1, a2, y1, y2 +
  // 2 accumulators + a.grad1 + the fresh w1.grad: 16U.
  Graph one = Stage(TwoStages(PipelineSchedule::k1F1B, 0), &stats);
  CHECK(Peak(one) == 16 * U);
}

TEST_CASE("pipeline: the last stage's peaks, by hand") {
  // Resident: w2 and a receive buffer for y per micro-batch: 4U. Each
  // forward adds z, the model output the last stage keeps to the end
  // (output_chunks), and its 4-byte loss (kept: the losses list).
  RankStats stats;
  // GPipe at f2.bw.mb2: 4U + z0..2 + 3 losses + y.grad0, y.grad1 (sends
  // pending to the end) + w2.grad + z.grad2, y.grad2 and a fresh w2.grad:
  // 13U + 12.
  Graph gpipe = Stage(TwoStages(PipelineSchedule::kGPipe, 1), &stats);
  CHECK(Peak(gpipe) == 13 * U + 12);
  // 1F1B: y.grad0 is released at the end of B(1), so at f2.bw.mb2 only
  // y.grad1 is pending: 12U + 12.
  Graph one = Stage(TwoStages(PipelineSchedule::k1F1B, 1), &stats);
  CHECK(Peak(one) == 12 * U + 12);
  // The merge of the outputs: a workspace of z0..2.
  CHECK(one.ops[one.FindOp("pp.merge_outputs")].workspace_bytes == 3 * U);
}

TEST_CASE("pipeline: without --rank, the stage with the highest peak") {
  PipelineOptions o = TwoStages(PipelineSchedule::k1F1B, -1);
  RankStats stats;
  Graph g = Stage(o, &stats);
  CHECK(stats.rank == 0);  // 16U against 12U + 12
  CHECK(Peak(g) == 16 * U);
}

TEST_CASE("pipeline: one stage of one micro-batch is the single-device step") {
  PipelineOptions o;
  RankStats stats;
  Graph g = Stage(o, &stats);
  // The single step's peak (9U + 4 at f2.bw, parallel_rank_step_test) plus
  // z, kept as the model output (mean's backward does not read it).
  Graph single = testing::MustLower(kThree);
  CHECK(Peak(single) == 9 * U + 4);
  CHECK(Peak(g) == 10 * U + 4);
  CHECK(g.FindOp("pp.merge_outputs") >= 0);
}

TEST_CASE("pipeline: a stage keeps the graph's source facts") {
  for (std::optional<bool> held :
       {std::optional<bool>(), std::optional<bool>(true), std::optional<bool>(false)}) {
    Graph g = testing::MustLower(kThree);
    g.target_device = "cuda";
    g.outputs_held = held;
    RankStats stats;
    std::string err;
    REQUIRE_MESSAGE(MakePipelineStage(TwoStages(PipelineSchedule::k1F1B, 1), &g, &stats, &err),
                    err);
    CHECK(g.target_device == "cuda");
    CHECK(g.outputs_held == held);
  }
}

TEST_CASE("pipeline: the balanced split weighs parameter bytes at module starts") {
  Graph g = testing::MustLower(kThree);
  std::vector<int> starts;
  std::string err;
  PipelineOptions o;
  o.stages = 3;
  REQUIRE(SplitStages(g, o, &starts, &err));
  CHECK(starts == std::vector<int>{0, 1, 2});  // l0 | l1 | l2 + loss: U each
  o.stages = 5;
  CHECK_FALSE(SplitStages(g, o, &starts, &err));
  CHECK(err ==
        "--pp-stages 5: stage 4 would be empty: a stage begins where a module begins, and the "
        "forward enters at most 4 (l0, l1, l2, loss); give at most 4 stages, or --pp-split");
}

TEST_CASE("pipeline: bad splits, word for word") {
  Graph g = testing::MustLower(kThree);
  RankStats stats;
  std::string err;
  PipelineOptions o;
  o.stages = 3;
  o.split = {"l2", "l1"};
  CHECK_FALSE(MakePipelineStage(o, &g, &stats, &err));
  CHECK(err ==
        "--pp-split: stage 1 would be empty: module \"l1\" does not begin after module \"l2\" in "
        "the forward");
  o.split = {"l0", "l2"};
  CHECK_FALSE(MakePipelineStage(o, &g, &stats, &err));
  CHECK(err == "--pp-split: stage 0 would be empty: module \"l0\" begins at the first forward op");
  o.split = {"l9", "l2"};
  CHECK_FALSE(MakePipelineStage(o, &g, &stats, &err));
  CHECK(err == "--pp-split: no forward op of the graph is scoped in module \"l9\"");
  o.split = {"l2"};
  CHECK_FALSE(MakePipelineStage(o, &g, &stats, &err));
  CHECK(err == "--pp-split names 1 modules; --pp-stages 3 needs 2 (where stages 1 to 2 begin)");
  o.stages = 2;
  o.stage = 2;
  CHECK_FALSE(MakePipelineStage(o, &g, &stats, &err));
  CHECK(err == "--rank 2: expected a stage from 0 to 1 (--pp-stages 2)");
  o.stage = -1;
  o.micro_batches = 0;
  CHECK_FALSE(MakePipelineStage(o, &g, &stats, &err));
  CHECK(err == "--micro-batches 0: expected at least 1");
}

TEST_CASE("pipeline: stages cannot share a parameter") {
  std::string text = kThree;
  const std::string from = R"("inputs": ["y", "w2"])";
  text.replace(text.find(from), from.size(), R"("inputs": ["y", "w0"])");
  Graph g = testing::MustLower(text);
  RankStats stats;
  std::string err;
  PipelineOptions o;
  o.stages = 2;
  o.split = {"l2"};
  CHECK_FALSE(MakePipelineStage(o, &g, &stats, &err));
  CHECK(err ==
        "parameter \"w0\" is read by the forward ops of two stages: stages cannot share "
        "parameters (tied weights live on one stage)");
}

TEST_CASE("pipeline: through MakeRankStep, world size = stages") {
  Graph g = testing::MustLower(kThree);
  RankStats stats;
  std::string err;
  ParallelOptions o;
  o.strategy = Strategy::kPipeline;
  o.world_size = 4;
  o.pipeline = TwoStages(PipelineSchedule::k1F1B, -1);
  CHECK_FALSE(MakeRankStep(o, &g, &stats, &err));
  CHECK(err == "--world-size 4: --parallel pipeline runs one stage per rank, and --pp-stages is 2");
  o.world_size = 2;
  o.rank = 1;
  REQUIRE(MakeRankStep(o, &g, &stats, &err));
  CHECK(stats.strategy == Strategy::kPipeline);
  CHECK(stats.rank == 1);
  CHECK(stats.parameter_bytes == U);
  CHECK(Peak(g) == 12 * U + 12);
}

TEST_CASE("pipeline: checkpoint programs keep the interleaved order") {
  // Dropping a (recomputed by f0 before each f1.bw) on 1F1B stage 0: the
  // forwards of micro-batch 2 still run between B(0) and B(1).
  RankStats stats;
  Graph g = Stage(TwoStages(PipelineSchedule::k1F1B, 0), &stats);
  std::vector<bool> keep(g.tensors.size(), false);
  CheckpointProgram cp = BuildCheckpointProgram(g, keep);
  std::vector<std::string> runs;
  for (const Step& s : cp.program.steps)
    if (s.IsRun()) runs.push_back(g.ops[s.op].id);
  CHECK(runs == std::vector<std::string>{"f0.mb0",
                                         "f1.mb0",
                                         "f0.mb1",
                                         "f1.mb1",
                                         "f0.mb0",
                                         "f1.bw.mb0",
                                         "f0.bw.mb0",
                                         "pp.backward_done.mb0",
                                         "f0.mb2",
                                         "f1.mb2",
                                         "f0.mb1",
                                         "f1.bw.mb1",
                                         "pp.accumulate_grad.w1.mb1",
                                         "f0.bw.mb1",
                                         "pp.accumulate_grad.w0.mb1",
                                         "pp.backward_done.mb1",
                                         "f0.mb2",
                                         "f1.bw.mb2",
                                         "pp.accumulate_grad.w1.mb2",
                                         "f0.bw.mb2",
                                         "pp.accumulate_grad.w0.mb2",
                                         "pp.backward_done.mb2"});
  // Each a is freed after f1 and remade before its backward; at f1.bw.mb1,
  // a2 is not alive: 16U - 1U. The sent y's are never recomputed: the ops
  // that hold them run as forward ops.
  SimResult r = testing::MustSimulate(g, cp.program);
  CHECK(r.peak_bytes == 15 * U);
}

}  // namespace
}  // namespace memplan::parallel
