#include "analyzer/sim/checkpoint.h"

#include <doctest/doctest.h>

#include <random>

#include "analyzer/sim/simulator.h"
#include "order_graph.h"
#include "random_graph.h"
#include "test_util.h"

namespace memplan {
namespace {

using testing::MustLower;
using testing::MustSimulate;
using Strings = std::vector<std::string>;

constexpr int64_t U = 1024;

// x -> a -> b -> c -> d -> loss through tanh (each saves its output), w a
// parameter at the start. All activations [256] float32 (U bytes).
const char* kChain = R"({"format": "memplan.graph/1", "tensors": [
    {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
    {"id": "w", "shape": [256], "dtype": "float32", "kind": "parameter"},
    {"id": "a", "shape": [256], "dtype": "float32"},
    {"id": "b", "shape": [256], "dtype": "float32"},
    {"id": "c", "shape": [256], "dtype": "float32"},
    {"id": "d", "shape": [256], "dtype": "float32"},
    {"id": "loss", "shape": [], "dtype": "float32"}],
  "ops": [
    {"id": "fa", "type": "mul", "inputs": ["x", "w"], "outputs": ["a"]},
    {"id": "fb", "type": "tanh", "inputs": ["a"], "outputs": ["b"]},
    {"id": "fc", "type": "tanh", "inputs": ["b"], "outputs": ["c"]},
    {"id": "fd", "type": "tanh", "inputs": ["c"], "outputs": ["d"]},
    {"id": "l", "type": "mean", "inputs": ["d"], "outputs": ["loss"]}],
  "outputs": ["loss"]})";

std::vector<bool> Keep(const Graph& g, const Strings& names) {
  std::vector<bool> keep(g.tensors.size(), false);
  for (const std::string& n : names) keep[g.FindTensor(n)] = true;
  return keep;
}

Strings OpNames(const Graph& g, const std::vector<int>& ops) {
  Strings out;
  for (int o : ops) out.push_back(g.ops[o].id);
  return out;
}

TEST_CASE("checkpoint: candidates are the forward tensors the backward needs") {
  Graph g = MustLower(kChain);
  // a is not saved (tanh saves its output) but b's recomputation needs it.
  CHECK(testing::Names(g, CheckpointCandidates(g)) == Strings{"a", "b", "c", "d"});
}

TEST_CASE("checkpoint: keeping every candidate is the baseline program") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json"}) {
    CAPTURE(name);
    JointGraph jg;
    std::string err;
    REQUIRE(LoadJointGraph(testing::ExamplePath(name), GraphLoadOptions(), &jg, &err));
    const Graph& g = jg.graph;
    std::vector<bool> keep(g.tensors.size(), false);
    for (int t : CheckpointCandidates(g)) keep[t] = true;
    for (AccumulationMode mode : {AccumulationMode::kInplace, AccumulationMode::kDeferred}) {
      CheckpointProgram cp = BuildCheckpointProgram(g, keep, {.mode = mode});
      CHECK(cp.recomputed_ops.empty());
      SimResult r = MustSimulate(g, cp.program);
      CHECK(r.peak_bytes == testing::Baseline(g, mode).peak_bytes);
    }
  }
}

TEST_CASE("checkpoint: hand-computed recomputation on a chain") {
  Graph g = MustLower(kChain);
  // Keep only b: the backward of fd needs d (recomputed from c, itself from
  // b); fc's backward needs c (alive since recomputed); fb's needs b (kept).
  CheckpointProgram cp = BuildCheckpointProgram(g, Keep(g, {"b"}));
  CHECK(OpNames(g, cp.recomputed_ops) == Strings{"fc", "fd"});
  CHECK(testing::Names(g, cp.recomputed_tensors) == Strings{"c", "d"});
  SimResult r = MustSimulate(g, cp.program);
  // Forward: x, w resident (2U). At fd: a is already freed (tanh saves its
  // output, mul's backward needs x only), so b, c, d are alive: 5U.
  // Backward at fd.bw after recomputing: x, w, b, c, d, d.grad, c.grad ... the
  // peak is at fd.bw: 2U + b + c + d + d.grad + c.grad + loss = 7U + 4.
  CHECK(r.peak_bytes == 7 * U + 4);
  CHECK(g.ops[cp.program.steps[r.peak_step].op].id == "fd.bw");
  CHECK(r.recompute_runs == 2);
  // Keeping everything costs more: the forward peak holds b, c, d at once
  // and the backward starts with all of them.
  CheckpointProgram none = BuildCheckpointProgram(g, Keep(g, {}));
  CHECK(OpNames(g, none.recomputed_ops) == Strings{"fa", "fb", "fc", "fd"});
  CHECK(MustSimulate(g, none.program).recompute_runs == 4);
}

// A kept tensor whose producer reruns (for its other outputs) after the kept
// copy was freed: the rerun allocates it again, and the program must free
// that copy at once (it used to stay alive to the end).
TEST_CASE("checkpoint: a rerun remaking a kept tensor already freed frees the new copy") {
  Graph g = MustLower(R"({"format": "memplan.graph/1", "tensors": [
      {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
      {"id": "w", "shape": [256], "dtype": "float32", "kind": "parameter"},
      {"id": "a", "shape": [256], "dtype": "float32"},
      {"id": "y", "shape": [256], "dtype": "float32"},
      {"id": "z", "shape": [256], "dtype": "float32"},
      {"id": "loss", "shape": [], "dtype": "float32"}],
    "ops": [
      {"id": "fa", "type": "mul", "inputs": ["x", "w"], "outputs": ["a"]},
      {"id": "ln", "type": "layer_norm", "inputs": ["a"], "outputs": ["y"]},
      {"id": "ft", "type": "tanh", "inputs": ["y"], "outputs": ["z"]},
      {"id": "l", "type": "mean", "inputs": ["z"], "outputs": ["loss"]}],
    "outputs": ["loss"]})");
  // y's last use is tanh in the forward (tanh saves its output). Keep y and
  // z; ln's backward needs a and ln's statistics: ln reruns and remakes y.
  CheckpointProgram cp = BuildCheckpointProgram(g, Keep(g, {"y", "z"}));
  CHECK(OpNames(g, cp.recomputed_ops) == Strings{"fa", "ln"});
  SimResult r = MustSimulate(g, cp.program);
  SimResult baseline = testing::Baseline(g, AccumulationMode::kInplace);
  CHECK(r.end_bytes == baseline.end_bytes);
  const int y = g.FindTensor("y");
  size_t rerun = 0;
  for (size_t i = 0; i < cp.program.steps.size(); ++i)
    if (r.recompute[i] && g.ops[cp.program.steps[i].op].id == "ln") rerun = i;
  REQUIRE(rerun + 1 < cp.program.steps.size());
  const auto& freed = cp.program.steps[rerun + 1].free;
  CHECK(std::find(freed.begin(), freed.end(), y) != freed.end());
}

// Two branches of one module, a = tanh(m) and b = tanh(m), summed: the
// backward reads b (fb.bw) before a (fa.bw). On demand, a is remade only
// after fb.bw has freed b; as one recompute group (torch.utils.checkpoint on
// the module), both are remade at the first need and alive together.
TEST_CASE("checkpoint: a recompute group is remade at once at its first backward need") {
  Graph g = MustLower(R"({"format": "memplan.graph/1", "tensors": [
      {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
      {"id": "w", "shape": [256], "dtype": "float32", "kind": "parameter"},
      {"id": "m", "shape": [256], "dtype": "float32"},
      {"id": "a", "shape": [256], "dtype": "float32"},
      {"id": "b", "shape": [256], "dtype": "float32"},
      {"id": "s", "shape": [256], "dtype": "float32"},
      {"id": "loss", "shape": [], "dtype": "float32"}],
    "ops": [
      {"id": "fm", "type": "mul", "inputs": ["x", "w"], "outputs": ["m"]},
      {"id": "fa", "type": "tanh", "inputs": ["m"], "outputs": ["a"]},
      {"id": "fb", "type": "tanh", "inputs": ["m"], "outputs": ["b"]},
      {"id": "fs", "type": "add", "inputs": ["a", "b"], "outputs": ["s"]},
      {"id": "l", "type": "mean", "inputs": ["s"], "outputs": ["loss"]}],
    "outputs": ["loss"]})");
  const std::vector<bool> keep = Keep(g, {"m"});
  auto step_of = [&](const Program& p, const std::string& op, bool rerun) {
    int seen = 0;
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (p.steps[i].IsRun() && g.ops[p.steps[i].op].id == op && (!rerun || seen++ == 1))
        return static_cast<int>(i);
    return -1;
  };
  CheckpointProgram lazy = BuildCheckpointProgram(g, keep);
  std::vector<int> group(g.tensors.size(), -1);
  group[g.FindTensor("a")] = group[g.FindTensor("b")] = group[g.FindTensor("s")] = 0;
  CheckpointProgram grouped = BuildCheckpointProgram(g, keep, {.recompute_group = &group});
  CHECK(OpNames(g, lazy.recomputed_ops) == Strings{"fb", "fa"});
  CHECK(OpNames(g, grouped.recomputed_ops) == Strings{"fa", "fb"});
  const int fb_bw = step_of(grouped.program, "fb.bw", false);
  CHECK(step_of(grouped.program, "fa", true) < fb_bw);
  CHECK(step_of(lazy.program, "fa", true) > step_of(lazy.program, "fb.bw", false));
  SimResult rl = MustSimulate(g, lazy.program), rg = MustSimulate(g, grouped.program);
  // The same work; m, which only the recomputations read, is freed sooner.
  CHECK(rg.peak_bytes == rl.peak_bytes);
  CHECK(rg.recompute_runs == rl.recompute_runs);
  // Without groups (or with every group -1) it is the on-demand program.
  std::vector<int> none(g.tensors.size(), -1);
  CheckpointProgram same = BuildCheckpointProgram(g, keep, {.recompute_group = &none});
  CHECK(OpNames(g, same.recomputed_ops) == OpNames(g, lazy.recomputed_ops));
  CHECK(MustSimulate(g, same.program).peak_bytes == rl.peak_bytes);
}

// One module: a = tanh(m), z = -a, b = tanh(a), s = b + z. The backward reads
// a and b (tanh saves its output), never z. As torch.utils.checkpoint reruns
// a module, the group reruns its forward ops in order up to its last
// tensor the backward reads (b: early stop), so also fz, and not fs; its
// input m (made outside) stays alive for it.
TEST_CASE("checkpoint: a recompute group reruns its module up to its last saved tensor") {
  Graph g = MustLower(R"({"format": "memplan.graph/1", "tensors": [
      {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
      {"id": "w", "shape": [256], "dtype": "float32", "kind": "parameter"},
      {"id": "m", "shape": [256], "dtype": "float32"},
      {"id": "a", "shape": [256], "dtype": "float32"},
      {"id": "z", "shape": [256], "dtype": "float32"},
      {"id": "b", "shape": [256], "dtype": "float32"},
      {"id": "s", "shape": [256], "dtype": "float32"},
      {"id": "loss", "shape": [], "dtype": "float32"}],
    "ops": [
      {"id": "fm", "type": "mul", "inputs": ["x", "w"], "outputs": ["m"]},
      {"id": "fa", "type": "tanh", "inputs": ["m"], "outputs": ["a"]},
      {"id": "fz", "type": "neg", "inputs": ["a"], "outputs": ["z"]},
      {"id": "fb", "type": "tanh", "inputs": ["a"], "outputs": ["b"]},
      {"id": "fs", "type": "add", "inputs": ["b", "z"], "outputs": ["s"]},
      {"id": "l", "type": "mean", "inputs": ["s"], "outputs": ["loss"]}],
    "outputs": ["loss"]})");
  std::vector<int> group(g.tensors.size(), -1);
  for (const char* t : {"a", "z", "b", "s"}) group[g.FindTensor(t)] = 0;
  // Nothing kept: m is not a candidate (only fa reads it) and would be
  // recomputed on demand; as the module's input it is kept.
  CheckpointProgram lazy = BuildCheckpointProgram(g, Keep(g, {}));
  CheckpointProgram grouped = BuildCheckpointProgram(g, Keep(g, {}), {.recompute_group = &group});
  CHECK(OpNames(g, lazy.recomputed_ops) == Strings{"fm", "fa", "fb"});
  CHECK(OpNames(g, grouped.recomputed_ops) == Strings{"fa", "fz", "fb"});
  MustSimulate(g, grouped.program);
  // b kept: saved ops are not rerun; a is, and z with it.
  CheckpointProgram saved = BuildCheckpointProgram(g, Keep(g, {"b"}), {.recompute_group = &group});
  CHECK(OpNames(g, saved.recomputed_ops) == Strings{"fa", "fz"});
  // Every member alive: the group is not wrapped, nothing reruns.
  CheckpointProgram all =
      BuildCheckpointProgram(g, Keep(g, {"a", "b"}), {.recompute_group = &group});
  CHECK(all.recomputed_ops.empty());

  // The module's own backward ops trigger it at their first read of any of
  // its tensors, alive or not (the first unpack); others only when they
  // need a dead one. fb.bw reads the kept b before fa.bw needs the dead a.
  auto first_rerun_before = [&](const CheckpointProgram& cp, const std::string& op) {
    int rerun = -1, at = -1;
    std::vector<bool> seen(g.ops.size(), false);
    for (size_t i = 0; i < cp.program.steps.size(); ++i) {
      const Step& st = cp.program.steps[i];
      if (!st.IsRun()) continue;
      if (seen[st.op] && rerun < 0) rerun = static_cast<int>(i);
      seen[st.op] = true;
      if (g.ops[st.op].id == op) at = static_cast<int>(i);
    }
    return rerun >= 0 && rerun < at;
  };
  CHECK_FALSE(first_rerun_before(saved, "fb.bw"));
  std::vector<int> own = group;
  for (int t : g.ops[g.FindOp("fb.bw")].outputs) own[t] = 0;
  CheckpointProgram triggered =
      BuildCheckpointProgram(g, Keep(g, {"b"}), {.recompute_group = &own});
  CHECK(first_rerun_before(triggered, "fb.bw"));
  CHECK(OpNames(g, triggered.recomputed_ops) == Strings{"fa", "fz"});
  MustSimulate(g, triggered.program);
}

TEST_CASE("checkpoint: every checkpoint set gives a valid program on random graphs") {
  std::mt19937 rng(7);
  int programs = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    Graph g = MustLower(testing::RandomForwardGraph(seed, 12 + static_cast<int>(seed % 20)));
    std::vector<int> candidates = CheckpointCandidates(g);
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<bool> keep(g.tensors.size(), false);
      for (int t : candidates) keep[t] = (rng() % 2) == 0;
      for (AccumulationMode mode : {AccumulationMode::kInplace, AccumulationMode::kOutOfPlace,
                                    AccumulationMode::kDeferred}) {
        CheckpointProgram cp = BuildCheckpointProgram(g, keep, {.mode = mode});
        SimResult r;
        std::string err;
        bool ok = Simulate(g, cp.program, SimOptions(), &r, &err);
        INFO(err);
        CHECK(ok);
        CHECK(r.recompute_runs == static_cast<int64_t>(cp.recomputed_ops.size()));
        CHECK(r.peak_bytes >= PeakLowerBound(g));
        ++programs;
      }
    }
  }
  CHECK(programs == 40 * 12 * 3);
}

// a = x * w is read by fb (whose backward needs a for w2's gradient) and by
// fd (whose backward needs a and f). Backward: fd.bw, ff.bw (tanh: needs
// f), fc.bw (needs c), fb.bw.
const char* kFarUses = R"({"format": "memplan.graph/1", "tensors": [
    {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
    {"id": "w", "shape": [256], "dtype": "float32", "kind": "parameter"},
    {"id": "w2", "shape": [256], "dtype": "float32", "kind": "parameter"},
    {"id": "a", "shape": [256], "dtype": "float32"},
    {"id": "b", "shape": [256], "dtype": "float32"},
    {"id": "c", "shape": [256], "dtype": "float32"},
    {"id": "f", "shape": [256], "dtype": "float32"},
    {"id": "d", "shape": [256], "dtype": "float32"},
    {"id": "loss", "shape": [], "dtype": "float32"}],
  "ops": [
    {"id": "fa", "type": "mul", "inputs": ["x", "w"], "outputs": ["a"]},
    {"id": "fb", "type": "mul", "inputs": ["a", "w2"], "outputs": ["b"]},
    {"id": "fc", "type": "tanh", "inputs": ["b"], "outputs": ["c"]},
    {"id": "ff", "type": "tanh", "inputs": ["c"], "outputs": ["f"]},
    {"id": "fd", "type": "mul", "inputs": ["f", "a"], "outputs": ["d"]},
    {"id": "l", "type": "mean", "inputs": ["d"], "outputs": ["loss"]}],
  "outputs": ["loss"]})";

std::string RunsAndFrees(const Graph& g, const Program& p, size_t from) {
  std::string out;
  for (size_t i = from; i < p.steps.size(); ++i) {
    const Step& step = p.steps[i];
    if (step.IsRun()) {
      out += g.ops[step.op].id + " ";
      continue;
    }
    out += "free(";
    for (int t : step.free) out += g.tensors[t].id + (t == step.free.back() ? "" : ",");
    out += ") ";
  }
  return out;
}

TEST_CASE("checkpoint: a tensor recomputed at each use is freed after each and remade") {
  Graph g = MustLower(kFarUses);
  CHECK(EachUseMatters(g)[g.FindTensor("a")]);
  std::vector<bool> keep = Keep(g, {"c", "f"}), each_use(g.tensors.size(), false);
  each_use[g.FindTensor("a")] = true;
  CheckpointProgram held = BuildCheckpointProgram(g, keep);
  CheckpointProgram each = BuildCheckpointProgram(g, keep, {.each_use = &each_use});
  CHECK(OpNames(g, held.recomputed_ops) == Strings{"fa"});
  CHECK(OpNames(g, each.recomputed_ops) == Strings{"fa", "fa"});
  CHECK(testing::Names(g, each.recomputed_tensors) == Strings{"a"});
  const size_t backward = g.FindOp("loss.grad.seed");
  size_t from = 0;
  while (each.program.steps[from].op != static_cast<int>(backward)) ++from;
  // Held: a lives from its rerun before fd.bw to fb.bw. At each use: freed
  // after fd.bw, remade before fb.bw.
  CHECK(RunsAndFrees(g, held.program, from) ==
        "loss.grad.seed l.bw free(loss.grad) fa fd.bw free(d.grad) ff.bw free(f,f.grad) fc.bw "
        "free(c,c.grad) fb.bw free(a,b.grad) a.grad.acc1 free(a.grad.c1) fa.bw free(a.grad) ");
  CHECK(RunsAndFrees(g, each.program, from) ==
        "loss.grad.seed l.bw free(loss.grad) fa fd.bw free(a,d.grad) ff.bw free(f,f.grad) fc.bw "
        "free(c,c.grad) fa fb.bw free(a,b.grad) a.grad.acc1 free(a.grad.c1) fa.bw free(a.grad) ");
  SimResult r_held = MustSimulate(g, held.program), r_each = MustSimulate(g, each.program);
  CHECK(r_each.recompute_runs == 2);
  // During ff.bw and fc.bw a is gone: U less there, and at those steps only.
  CHECK(r_each.peak_bytes <= r_held.peak_bytes);
}

TEST_CASE("simulator: peak_only gives the full replay's figures and nothing else") {
  std::mt19937 rng(7);
  int with_accumulators = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    Graph g = MustLower(testing::RandomForwardGraph(seed, 12 + static_cast<int>(seed % 20)));
    std::vector<bool> keep(g.tensors.size(), false);
    for (int t : CheckpointCandidates(g)) keep[t] = (rng() % 2) == 0;
    const CheckpointProgram cp = BuildCheckpointProgram(g, keep);
    SimOptions full, lean;
    full.op_cost = lean.op_cost = std::vector<double>(g.ops.size(), 1.5);
    lean.peak_only = true;
    // Odd seeds: a later micro-batch, the accumulators counted as it goes.
    full.accumulating_gradients = lean.accumulating_gradients = seed % 2 == 1;
    SimResult a, b;
    std::string err;
    REQUIRE(Simulate(g, cp.program, full, &a, &err));
    REQUIRE(Simulate(g, cp.program, lean, &b, &err));
    testing::CheckSameFigures(b, a);
    CHECK(b.peak_by_kind == a.peak_by_kind);
    CHECK(b.live_at_peak.size() == a.live_at_peak.size());
    CHECK(b.live_during.empty());
    CHECK(b.live_after.empty());
    CHECK(b.recompute.empty());
    CHECK(b.intervals.empty());
    CHECK(!a.intervals.empty());
    if (lean.accumulating_gradients && a.start_bytes > MustSimulate(g, cp.program).start_bytes)
      ++with_accumulators;
  }
  CHECK(with_accumulators >= 10);
}

TEST_CASE("simulator: stop_above stops past the bound, with the whole program's recompute cost") {
  std::mt19937 rng(13);
  int stopped = 0, whole = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    Graph g = MustLower(testing::RandomForwardGraph(seed, 12 + static_cast<int>(seed % 20)));
    std::vector<bool> keep(g.tensors.size(), false);
    for (int t : CheckpointCandidates(g)) keep[t] = (rng() % 3) == 0;
    const CheckpointProgram cp = BuildCheckpointProgram(g, keep);
    SimOptions lean;
    lean.op_cost = std::vector<double>(g.ops.size(), 1.5);
    lean.peak_only = true;
    lean.accumulating_gradients = seed % 2 == 1;  // the accumulators count toward the bound
    SimResult full;
    std::string err;
    REQUIRE(Simulate(g, cp.program, lean, &full, &err));
    CHECK(!full.stopped);
    for (int64_t bound : {full.start_bytes, (full.start_bytes + full.peak_bytes) / 2,
                          full.peak_bytes - 1, full.peak_bytes}) {
      CAPTURE(bound);
      SimOptions cut = lean;
      cut.stop_above = bound;
      SimResult r;
      REQUIRE(Simulate(g, cp.program, cut, &r, &err));
      CHECK(r.recompute_cost == full.recompute_cost);
      CHECK(r.recompute_runs == full.recompute_runs);
      CHECK(r.start_bytes == full.start_bytes);
      if (bound >= full.peak_bytes) {  // never passed: the whole replay
        CHECK(!r.stopped);
        CHECK(r.peak_bytes == full.peak_bytes);
        CHECK(r.peak_step == full.peak_step);
        CHECK(r.end_bytes == full.end_bytes);
        ++whole;
      } else {  // stopped at the first step past the bound, at or before the peak
        CHECK(r.stopped);
        CHECK(r.peak_bytes > bound);
        CHECK(r.peak_bytes <= full.peak_bytes);
        CHECK(r.peak_step <= full.peak_step);
        ++stopped;
      }
    }
  }
  CHECK(stopped > 40);
  CHECK(whole == 40);
}

TEST_CASE("checkpoint: recomputing at each use never changes a program that recomputes nothing") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    Graph g = MustLower(testing::RandomForwardGraph(seed, 12));
    std::vector<bool> keep(g.tensors.size(), false), each_use(g.tensors.size(), true);
    for (int t : CheckpointCandidates(g)) keep[t] = true;
    CheckpointProgram plain = BuildCheckpointProgram(g, keep);
    CheckpointProgram each = BuildCheckpointProgram(g, keep, {.each_use = &each_use});
    CHECK(each.recomputed_ops.empty());
    CHECK(RunsAndFrees(g, each.program, 0) == RunsAndFrees(g, plain.program, 0));
  }
}

TEST_CASE("checkpoint: programs recomputing at each use are valid on random graphs") {
  int programs = 0;
  std::mt19937 rng(11);
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Graph g = MustLower(testing::RandomForwardGraph(seed, 10 + static_cast<int>(seed % 20)));
    const std::vector<int> candidates = CheckpointCandidates(g);
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<bool> keep(g.tensors.size(), false), each_use(g.tensors.size(), false);
      for (int t : candidates) {
        keep[t] = (rng() % 3) == 0;
        each_use[t] = (rng() % 2) == 0;
      }
      CheckpointProgram cp = BuildCheckpointProgram(g, keep, {.each_use = &each_use});
      CheckpointProgram held = BuildCheckpointProgram(g, keep);
      SimResult r, h;
      std::string err;
      bool ok = Simulate(g, cp.program, SimOptions(), &r, &err) &&
                Simulate(g, held.program, SimOptions(), &h, &err);
      INFO(err);
      REQUIRE(ok);
      CHECK(r.recompute_runs == static_cast<int64_t>(cp.recomputed_ops.size()));
      CHECK(r.recompute_runs >= h.recompute_runs);
      CHECK(r.recompute_runs <= kMaxRerunFactor * static_cast<int64_t>(g.ops.size()) + 1);
      CHECK(r.peak_bytes >= PeakLowerBound(g));
      ++programs;
    }
  }
  CHECK(programs == 40 * 12);
}

TEST_CASE("checkpoint: reverse_order recomputes an op's dead inputs last first") {
  Graph g = MustLower(testing::kOrderGraph);
  const std::vector<bool> matters = OrderMatters(g);
  CHECK(matters[g.FindOp("fd.bw")]);   // reads p and q
  CHECK(matters[g.FindOp("fd")]);      // in the forward too
  CHECK(!matters[g.FindOp("fz.bw")]);  // reads no candidate
  std::vector<bool> keep = Keep(g, {}), reverse(g.ops.size(), false);
  CheckpointProgram input_order = BuildCheckpointProgram(g, keep);
  reverse[g.FindOp("fd.bw")] = true;
  CheckpointProgram last_first = BuildCheckpointProgram(g, keep, {.reverse_order = &reverse});
  CHECK(OpNames(g, input_order.recomputed_ops) == Strings{"fh1", "fh2", "fp", "fs3", "fhq", "fq"});
  CHECK(OpNames(g, last_first.recomputed_ops) == Strings{"fs3", "fhq", "fq", "fh1", "fh2", "fp"});
  // The same runs, so the same cost; hq's 112 KiB no longer meet p.
  CHECK(input_order.recomputed_tensors == last_first.recomputed_tensors);
  SimResult a = MustSimulate(g, input_order.program), b = MustSimulate(g, last_first.program);
  CHECK(a.peak_bytes == 197124);
  CHECK(b.peak_bytes == 180740);
  CHECK(a.recompute_runs == b.recompute_runs);
  // An empty vector, or one reversing an op with one dead input, changes nothing.
  std::vector<bool> other(g.ops.size(), false);
  other[g.FindOp("fz.bw")] = true;
  CHECK(BuildCheckpointProgram(g, keep, {.reverse_order = &other}).recomputed_ops ==
        input_order.recomputed_ops);
}

}  // namespace
}  // namespace memplan
