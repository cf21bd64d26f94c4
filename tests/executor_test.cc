// The executor on the CPU backend against the simulator: the counting
// allocator's live bytes must equal the prediction at every step, on hand-made
// programs covering each rule of SPEC section 2, on every example (baseline
// and planned programs) and on random graphs.
#include "profiler/executor.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "analyzer/plan/planner.h"
#include "profiler/cpu_backend.h"
#include "profiler/profile.h"
#include "profiler/profile_report.h"
#include "random_graph.h"
#include "test_util.h"

namespace memplan {
namespace {

constexpr int64_t U = 1024;  // one [256] float32 tensor

// A joint graph exercising every rule: a resident view (xv), a two-output op
// (f: h, m), a view of h (hv), workspace (f: 100 bytes, b: 64), an in-place
// backward, a zero-byte tensor (z).
const char* kRules = R"({
  "format": "memplan.graph/1", "name": "rules",
  "tensors": [
    {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
    {"id": "xv", "shape": [16, 16], "dtype": "float32", "kind": "input", "alias_of": "x"},
    {"id": "w", "shape": [256], "dtype": "float32", "kind": "parameter"},
    {"id": "h", "shape": [256], "dtype": "float32"},
    {"id": "m", "shape": [128], "dtype": "float32"},
    {"id": "hv", "shape": [16, 16], "dtype": "float32", "alias_of": "h"},
    {"id": "z", "shape": [0], "dtype": "float32"},
    {"id": "y", "shape": [256], "dtype": "float32"},
    {"id": "g", "shape": [256], "dtype": "float32", "kind": "gradient"},
    {"id": "w.grad", "shape": [256], "dtype": "float32", "grad_of": "w"}
  ],
  "ops": [
    {"id": "f", "type": "x", "inputs": ["x", "w"], "outputs": ["h", "m"], "workspace_bytes": 100},
    {"id": "view", "type": "view", "inputs": ["h"], "outputs": ["hv"]},
    {"id": "f2", "type": "x", "inputs": ["hv", "xv"], "outputs": ["y", "z"]},
    {"id": "b", "type": "x", "inputs": ["y", "m"], "outputs": ["g"], "phase": "backward",
     "workspace_bytes": 64},
    {"id": "b2", "type": "x", "inputs": ["g", "hv"], "outputs": ["w.grad"], "phase": "backward"}
  ],
  "outputs": []
})";

// "run OP", "run OP OUT<-IN", "free A B ...".
Program Steps(const Graph& g, const std::vector<std::string>& lines) {
  Program p;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    std::string verb, word;
    in >> verb;
    Step s;
    if (verb == "run") {
      in >> word;
      s.op = g.FindOp(word);
      REQUIRE(s.op >= 0);
      while (in >> word) {
        size_t arrow = word.find("<-");
        s.inplace.push_back(
            {g.FindTensor(word.substr(0, arrow)), g.FindTensor(word.substr(arrow + 2))});
      }
    } else {
      while (in >> word) s.free.push_back(g.FindTensor(word));
    }
    p.steps.push_back(s);
  }
  return p;
}

struct Measured {
  ExecResult exec;
  int64_t outstanding = 0;
  uint64_t checksum = 0;
};

Measured RunOnCpu(const Graph& g, const Program& p, bool touch = true) {
  CpuBackendOptions options;
  options.touch = touch;
  CpuBackend backend(options);
  Measured m;
  std::string err;
  bool ok = Execute(g, p, &backend, ExecOptions(), &m.exec, &err);
  INFO(err);
  REQUIRE(ok);
  m.outstanding = backend.outstanding();
  m.checksum = backend.checksum();
  return m;
}

// The measured series equal the predicted ones; otherwise the message names
// the first step where they part.
void CheckExact(const Graph& g, const Program& p, const std::string& what, bool touch = false) {
  SimResult sim = testing::MustSimulate(g, p);
  Measured m = RunOnCpu(g, p, touch);
  ProfileResult r;
  r.measured_start_bytes = m.exec.start_bytes;
  r.measured_during = m.exec.live_during;
  r.measured_after = m.exec.live_after;
  r.measured_peak_bytes = m.exec.peak_bytes;
  INFO(what, ": first divergence at ", DivergenceText(g, p, sim, r));
  CHECK(Compare(sim, r).exact);
  CHECK(m.exec.peak_bytes == sim.peak_bytes);
  CHECK(m.exec.peak_step == sim.peak_step);
  CHECK(m.exec.end_bytes == sim.end_bytes);
  CHECK(m.outstanding == 0);
}

TEST_CASE("executor: each rule of the execution model, hand-computed") {
  Graph g = testing::MustParse(kRules);
  // Resident: x (with its view xv) and w.
  SUBCASE("outputs, workspace, views, in place") {
    Program p = Steps(g, {"run f", "run view", "free h", "run f2", "run b", "free y m",
                          "run b2 w.grad<-g", "free hv z"});
    Measured m = RunOnCpu(g, p);
    const ExecResult& e = m.exec;
    CHECK(e.start_bytes == 2 * U);
    CHECK(e.live_during[0] == 2 * U + U + U / 2 + 100);  // + h + m + workspace
    CHECK(e.live_after[0] == 3 * U + U / 2);
    CHECK(e.live_after[2] == 3 * U + U / 2);        // h freed but held by its view hv
    CHECK(e.live_during[3] == 4 * U + U / 2);       // + y (z has no bytes)
    CHECK(e.live_during[4] == 5 * U + U / 2 + 64);  // + g + workspace
    CHECK(e.live_after[5] == 4 * U);                // x, w, h (via hv), g
    CHECK(e.live_during[6] == 4 * U);               // w.grad takes over g
    CHECK(e.live_after[7] == 3 * U);                // x, w, w.grad
    CHECK(e.peak_bytes == 5 * U + U / 2 + 64);
    CHECK(e.peak_step == 4);
    CHECK(m.outstanding == 0);
    CHECK(m.checksum != 0);  // the inputs were read (resident buffers are filled)
    CheckExact(g, p, "rules", true);
  }
  SUBCASE("a recomputed two-output op: the kept output's fresh copy lives while it runs") {
    Program p = Steps(g, {"run f", "free m", "run f", "run view", "run f2", "run b", "free y m h",
                          "run b2", "free g hv z"});
    Measured m = RunOnCpu(g, p);
    // Step 2: x, w, h alive; f allocates m, a fresh h and its workspace.
    CHECK(m.exec.live_during[2] == 3 * U + U / 2 + U + 100);
    CHECK(m.exec.live_after[2] == 3 * U + U / 2);
    CheckExact(g, p, "recompute", true);
  }
}

TEST_CASE("executor: a failure names the step and frees everything") {
  Graph g = testing::MustParse(kRules);
  Program p = Steps(
      g, {"run f", "run view", "free h", "run f2", "run b", "free y m", "run b2", "free g hv z"});
  SUBCASE("out of memory at the step that crosses the capacity") {
    CpuBackendOptions options;
    options.capacity_bytes = 5 * U;  // step 4 (b) needs 5.5 KiB + 64
    CpuBackend backend(options);
    ExecResult r;
    std::string err;
    CHECK_FALSE(Execute(g, p, &backend, ExecOptions(), &r, &err));
    CHECK(err.rfind("step 4 (run \"b\"): out of memory: 1024 bytes requested", 0) == 0);
    CHECK(backend.outstanding() == 0);
    CHECK(backend.Counter().live() == 0);
  }
  SUBCASE("an input that is not alive") {
    CpuBackend backend;
    ExecResult r;
    std::string err;
    CHECK_FALSE(
        Execute(g, Steps(g, {"run f", "free h", "run view"}), &backend, ExecOptions(), &r, &err));
    CHECK(err == "step 2 (run \"view\"): input \"h\" is not alive");
    CHECK(backend.outstanding() == 0);
  }
}

// Counts observer calls: every BeginStep has its EndStep, failure included.
struct Balance : StepObserver {
  int begun = 0, ended = 0, open = 0, max_open = 0;
  void BeginStep(int) override {
    ++begun;
    max_open = std::max(max_open, ++open);
  }
  void EndStep(int) override {
    ++ended;
    --open;
  }
};

TEST_CASE("executor: step hooks are balanced, one per step plus set-up and teardown") {
  Graph g = testing::MustParse(kRules);
  Program p = Steps(
      g, {"run f", "run view", "free h", "run f2", "run b", "free y m", "run b2", "free g hv z"});
  Balance balance;
  ExecOptions options;
  options.observer = &balance;
  CpuBackend backend;
  ExecResult r;
  std::string err;
  REQUIRE(Execute(g, p, &backend, options, &r, &err));
  CHECK(balance.begun == static_cast<int>(p.steps.size()) + 2);
  CHECK(balance.ended == balance.begun);
  CHECK(balance.max_open == 1);
  CHECK(r.op_us.size() == p.steps.size());
  CHECK(r.op_us[2] < 0);  // a free step
  CHECK(r.op_us[0] >= 0);
  Balance failing;
  options.observer = &failing;
  CHECK_FALSE(Execute(g, Steps(g, {"run f", "free h", "run view"}), &backend, options, &r, &err));
  CHECK(failing.begun == failing.ended);
}

TEST_CASE("FirstDivergentStep names the first step whose live bytes differ") {
  std::vector<int64_t> during = {10, 20, 30}, after = {5, 15, 25};
  CHECK(FirstDivergentStep(1, during, after, 1, during, after) == -2);
  CHECK(FirstDivergentStep(1, during, after, 2, during, after) == -1);
  std::vector<int64_t> late = {10, 20, 31};
  CHECK(FirstDivergentStep(1, during, after, 1, late, after) == 2);
  std::vector<int64_t> early_after = {5, 16, 25};
  CHECK(FirstDivergentStep(1, during, after, 1, during, early_after) == 1);
  CHECK(FirstDivergentStep(1, during, after, 1, {10, 20}, {5, 15}) == 2);
}

std::vector<std::string> Examples() {
  std::vector<std::string> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(MEMPLAN_SOURCE_DIR) + "/examples"))
    if (entry.path().extension() == ".json") out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Baselines in every accumulation mode and plans at 90/70/50% of the baseline.
struct Tally {
  int programs = 0;
  int recomputing = 0;  // programs that rerun some op
};

void CheckGraphAndPlans(const Graph& g, const std::string& name, Tally* tally,
                        PlanAlgorithm algorithm = PlanAlgorithm::kAuto) {
  for (AccumulationMode mode :
       {AccumulationMode::kInplace, AccumulationMode::kOutOfPlace, AccumulationMode::kDeferred}) {
    CheckExact(g, BuildBaselineProgram(g, mode), name + " baseline " + AccumulationModeName(mode));
    ++tally->programs;
  }
  int64_t baseline = testing::Baseline(g, AccumulationMode::kInplace).peak_bytes;
  for (int pct : {90, 70, 50}) {
    PlanResult plan;
    PlannerOptions options;
    options.algorithm = algorithm;
    std::string err;
    REQUIRE(PlanCheckpoints(g, baseline * pct / 100, options, &plan, &err));
    CheckExact(g, plan.best.checkpoint.program, fmt::format("{} plan at {}%", name, pct));
    ++tally->programs;
    tally->recomputing += plan.best.sim.recompute_runs > 0;
  }
}

TEST_CASE("executor on the CPU backend: exact on every example, baseline and planned") {
  Tally tally;
  std::vector<std::string> examples = Examples();
  REQUIRE(examples.size() >= 5);
  for (const std::string& path : examples) {
    JointGraph jg;
    std::string err;
    bool ok = LoadJointGraph(path, GraphLoadOptions(), &jg, &err);
    INFO(path, ": ", err);
    REQUIRE(ok);
    CheckGraphAndPlans(jg.graph, path, &tally);
  }
  CHECK(tally.programs == 6 * static_cast<int>(examples.size()));
  MESSAGE(tally.recomputing, " of ", tally.programs, " example programs recompute");
  CHECK(tally.recomputing >= 4);
}

TEST_CASE("executor on the CPU backend: exact on random graphs") {
  Tally tally;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Graph g =
        testing::MustLower(testing::RandomForwardGraph(seed, 5 + static_cast<int>(seed % 40)));
    // Greedy plans: the exact search is slow on these and adds nothing here.
    CheckGraphAndPlans(g, fmt::format("random graph {}", seed), &tally, PlanAlgorithm::kGreedy);
  }
  CHECK(tally.programs == 240);
  MESSAGE(tally.recomputing, " of ", tally.programs, " random programs recompute");
  CHECK(tally.recomputing >= 40);
}

TEST_CASE("profile on the cpu backend: repeats, per-op times, the comparison") {
  JointGraph jg;
  std::string err;
  REQUIRE(LoadJointGraph(testing::ExamplePath("mlp.graph.json"), GraphLoadOptions(), &jg, &err));
  const Graph& g = jg.graph;
  Program p = BuildBaselineProgram(g, AccumulationMode::kInplace);
  SimResult sim = testing::MustSimulate(g, p);
  ProfileOptions options;
  options.backend = BackendChoice::kCpu;
  options.repeat = 3;
  ProfileResult r;
  REQUIRE(RunProfile(g, p, options, &r, &err) == ProfileStatus::kOk);
  CHECK(r.backend == "cpu");
  CHECK(r.repeat == 3);
  CHECK(r.measured_peak_bytes == sim.peak_bytes);
  CHECK(r.measured_peak_step == sim.peak_step);
  CHECK(r.allocator_peak_bytes == sim.peak_bytes);
  CHECK(r.device_peak_bytes == -1);
  ProfileComparison c = Compare(sim, r);
  CHECK(c.exact);
  CHECK(c.relative_error == 0);
  int run_steps = 0;
  for (const Step& s : p.steps) run_steps += s.IsRun();
  int runs = 0;
  for (const OpTiming& t : r.ops) {
    runs += t.runs;
    CHECK(t.time_us >= 0);
    CHECK(t.recompute_runs == 0);
  }
  CHECK(runs == run_steps);
  CHECK(r.step_begin_us.size() == p.steps.size());
  // A 1% larger measurement: relative error 0.01, divergence named.
  ProfileResult off = r;
  for (int64_t& b : off.measured_during) b += b / 100;
  off.measured_peak_bytes = sim.peak_bytes + sim.peak_bytes / 100;
  ProfileComparison c2 = Compare(sim, off);
  CHECK_FALSE(c2.exact);
  CHECK(c2.first_divergent_step >= 0);
  CHECK(c2.relative_error == doctest::Approx(0.01).epsilon(1e-3));
  CHECK(DivergenceText(g, p, sim, off).find("predicted") != std::string::npos);
}

TEST_CASE("profile: the cuda backend is built exactly when CMake found CUDA and CUPTI") {
  CHECK(BuiltWithCuda() == (MEMPLAN_TEST_CUDA_ENABLED != 0));
  if (!BuiltWithCuda()) {
    Graph g = testing::MustParse(kRules);
    ProfileOptions options;
    options.backend = BackendChoice::kCuda;
    ProfileResult r;
    std::string err;
    CHECK(RunProfile(g, Program(), options, &r, &err) == ProfileStatus::kUnavailable);
    CHECK(err.find("built without CUDA") != std::string::npos);
  }
}

}  // namespace
}  // namespace memplan
