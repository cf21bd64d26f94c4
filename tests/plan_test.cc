// memplan.plan/1 (analyzer/plan/plan_document.h): the exact text PlanToJson writes, round
// trips of baseline programs through PlanToJson and ParsePlan, and every
// error class of ParsePlan word for word ("FILE: POINTER: what; expected
// what", SPEC section 5, exit code 2 in memplan verify).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "analyzer/base/file_io.h"
#include "analyzer/base/sha256.h"
#include "analyzer/plan/plan_document.h"
#include "tests/test_util.h"

namespace memplan {
namespace {

using json = nlohmann::json;
using testing::ExamplePath;

// x -> fc -> h -> act (relu) -> r -> loss (sum) -> l, lowered: 7 ops,
// tensors x w h r l l.grad r.grad (a view of l.grad) h.grad w.grad.
const char* kTiny = R"({"format": "memplan.graph/1", "name": "tiny", "tensors": [
  {"id": "x", "shape": [2, 3], "dtype": "float32", "kind": "input"},
  {"id": "w", "shape": [3, 3], "dtype": "float32", "kind": "parameter"},
  {"id": "h", "shape": [2, 3], "dtype": "float32"},
  {"id": "r", "shape": [2, 3], "dtype": "float32"},
  {"id": "l", "shape": [], "dtype": "float32"}],
 "ops": [
  {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"], "flops": 36},
  {"id": "act", "type": "relu", "inputs": ["h"], "outputs": ["r"], "flops": 6},
  {"id": "loss", "type": "sum", "inputs": ["r"], "outputs": ["l"]}],
 "outputs": ["l"]})";

const Graph& Tiny() {
  static const Graph g = testing::MustLower(kTiny);
  return g;
}

// A valid plan document for Tiny() that the error cases edit.
json BasePlan() {
  return json::parse(R"({
    "format": "memplan.plan/1", "graph": "tiny", "graph_sha256": ")" +
                     std::string(64, 'a') + R"(",
    "budget_bytes": 1024, "feasible": true,
    "accumulation": {"h.grad": "inplace"},
    "saved": ["h"], "recomputed": ["r"],
    "predicted": {"peak_bytes": 200, "baseline_peak_bytes": 300, "recompute_cost": 6,
                  "cost_unit": "flops"},
    "steps": [{"run": "fc"}, {"run": "act"}, {"free": ["h"]}]})");
}

// Parses `text` as "p.json" against Tiny(); "" on success, else the error.
std::string Err(const std::string& text) {
  Plan plan;
  std::string err;
  if (ParsePlan(text, "p.json", Tiny(), &plan, &err)) return "";
  CHECK(!err.empty());
  return err;
}

// The base plan with member `key` set to `value` (JSON text).
std::string With(const std::string& key, const std::string& value) {
  json p = BasePlan();
  p[key] = json::parse(value);
  return p.dump();
}

std::string WithStep(const std::string& step) {
  json p = BasePlan();
  p["steps"].push_back(json::parse(step));
  return p.dump();
}

std::string Without(const std::string& key) {
  json p = BasePlan();
  p.erase(key);
  return p.dump();
}

}  // namespace

TEST_CASE("plan: the base plan used by the error cases parses") {
  Plan plan;
  std::string err;
  REQUIRE(ParsePlan(BasePlan().dump(), "p.json", Tiny(), &plan, &err));
  const Graph& g = Tiny();
  CHECK(plan.graph == "tiny");
  CHECK(plan.graph_sha256 == std::string(64, 'a'));
  CHECK(plan.budget_bytes == 1024);
  CHECK(plan.feasible);
  REQUIRE(plan.accumulation.size() == 1);
  CHECK(plan.accumulation[0].first == g.FindTensor("h.grad"));
  CHECK(plan.accumulation[0].second == AccumulationMode::kInplace);
  CHECK(testing::Names(g, plan.saved) == std::vector<std::string>{"h"});
  CHECK(testing::Names(g, plan.recomputed) == std::vector<std::string>{"r"});
  CHECK(plan.predicted.peak_bytes == 200);
  CHECK(plan.predicted.baseline_peak_bytes == 300);
  CHECK(plan.predicted.recompute_cost == 6);
  CHECK(plan.predicted.cost_unit == "flops");
  CHECK(plan.modules.empty());
  REQUIRE(plan.program.steps.size() == 3);
  CHECK(plan.program.steps[0].op == g.FindOp("fc"));
  CHECK(plan.program.steps[1].op == g.FindOp("act"));
  CHECK(!plan.program.steps[2].IsRun());
  CHECK(testing::Names(g, plan.program.steps[2].free.ToVector()) == std::vector<std::string>{"h"});
}

TEST_CASE("plan: PlanToJson writes members in spec order, one step per line") {
  const Graph& g = Tiny();
  Plan plan;
  plan.graph = "tiny";
  plan.graph_sha256 = std::string(64, '0');
  plan.budget_bytes = 4096;
  plan.feasible = true;
  // Given out of order: written by tensor index.
  plan.accumulation = {{g.FindTensor("w.grad"), AccumulationMode::kDeferred},
                       {g.FindTensor("h.grad"), AccumulationMode::kOutOfPlace}};
  plan.saved = {g.FindTensor("h")};
  plan.recomputed = {g.FindTensor("r"), g.FindTensor("l")};
  plan.modules = {"model.block0", "model.block1"};
  plan.predicted = {1000, 2000, 1.2e10, "time_us"};
  Step fc, act, free, bw;
  fc.op = g.FindOp("fc");
  act.op = g.FindOp("act");
  free.free = {g.FindTensor("x"), g.FindTensor("h")};
  bw.op = g.FindOp("act.bw");
  bw.inplace = {{g.FindTensor("h.grad"), g.FindTensor("r")}};
  plan.program.steps = {fc, act, free, bw};
  CHECK(PlanToJson(g, plan) ==
        "{\n"
        " \"format\": \"memplan.plan/1\",\n"
        " \"graph\": \"tiny\",\n"
        " \"graph_sha256\": \"" +
            std::string(64, '0') +
            "\",\n"
            " \"budget_bytes\": 4096,\n"
            " \"feasible\": true,\n"
            " \"accumulation\": {\"h.grad\": \"out_of_place\", \"w.grad\": \"deferred\"},\n"
            " \"saved\": [\"h\"],\n"
            " \"recomputed\": [\"r\", \"l\"],\n"
            " \"modules\": [\"model.block0\", \"model.block1\"],\n"
            " \"predicted\": {\"peak_bytes\": 1000, \"baseline_peak_bytes\": 2000, "
            "\"recompute_cost\": 12000000000.0, \"cost_unit\": \"time_us\"},\n"
            " \"steps\": [\n"
            "  {\"run\": \"fc\"},\n"
            "  {\"run\": \"act\"},\n"
            "  {\"free\": [\"x\", \"h\"]},\n"
            "  {\"run\": \"act.bw\", \"inplace\": {\"h.grad\": \"r\"}}\n"
            " ]\n"
            "}\n");

  // No modules and no steps.
  plan.modules.clear();
  plan.program.steps.clear();
  plan.accumulation.clear();
  plan.feasible = false;
  std::string text = PlanToJson(g, plan);
  CHECK(text.find("\"modules\"") == std::string::npos);
  CHECK(text.find(" \"accumulation\": {},\n") != std::string::npos);
  CHECK(text.find(" \"feasible\": false,\n") != std::string::npos);
  CHECK(text.find(" \"steps\": []\n}\n") != std::string::npos);
  Plan back;
  std::string err;
  INFO(text);
  CHECK(ParsePlan(text, "p.json", g, &back, &err));
  CHECK(err == "");
}

TEST_CASE("plan: baseline programs of the examples round-trip through PlanToJson and ParsePlan") {
  for (const char* name : {"mlp.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json", "gpt_tiny.graph.json"}) {
    for (AccumulationMode mode :
         {AccumulationMode::kInplace, AccumulationMode::kOutOfPlace, AccumulationMode::kDeferred}) {
      CAPTURE(name);
      CAPTURE(AccumulationModeName(mode));
      JointGraph jg;
      std::string err, bytes;
      REQUIRE(LoadJointGraph(ExamplePath(name), {}, &jg, &err));
      REQUIRE(ReadFile(ExamplePath(name), &bytes, &err));
      const Graph& g = jg.graph;
      Plan plan;
      plan.graph = g.name;
      plan.graph_sha256 = Sha256Hex(bytes);
      plan.program = BuildBaselineProgram(g, mode);
      SimResult sim = testing::MustSimulate(g, plan.program);
      plan.budget_bytes = sim.peak_bytes;
      plan.feasible = true;
      plan.predicted = {sim.peak_bytes, sim.peak_bytes, 0.5, "flops"};
      for (size_t o = 0; o < g.ops.size(); ++o)
        if (g.ops[o].accumulate) plan.accumulation.emplace_back(g.ops[o].outputs[0], mode);
      for (size_t t = 0; t < g.tensors.size() && plan.saved.size() < 3; ++t)
        if (g.tensors[t].kind == TensorKind::kActivation) plan.saved.push_back(int(t));

      const std::string text = PlanToJson(g, plan);
      Plan back;
      REQUIRE_MESSAGE(ParsePlan(text, "p.json", g, &back, &err), err);
      CHECK(PlanToJson(g, back) == text);
      CHECK(back.graph == plan.graph);
      CHECK(back.graph_sha256 == plan.graph_sha256);
      CHECK(back.budget_bytes == plan.budget_bytes);
      CHECK(back.saved == plan.saved);
      CHECK(back.accumulation.size() == plan.accumulation.size());
      CHECK(back.predicted.peak_bytes == sim.peak_bytes);
      CHECK(back.predicted.recompute_cost == 0.5);
      REQUIRE(back.program.steps.size() == plan.program.steps.size());
      bool same = true;
      for (size_t s = 0; s < plan.program.steps.size(); ++s) {
        const Step &a = plan.program.steps[s], &b = back.program.steps[s];
        same = same && a.op == b.op && a.free == b.free && a.inplace == b.inplace;
      }
      CHECK(same);
      SimResult replay = testing::MustSimulate(g, back.program);
      CHECK(replay.peak_bytes == sim.peak_bytes);
    }
  }
}

TEST_CASE("plan: the program is not checked by the parser") {
  // Frees a resident tensor, runs a backward op twice, never runs the rest:
  // well formed, so it parses; Simulate rejects it.
  json p = BasePlan();
  p["steps"] = json::parse(R"([{"free": ["x"]}, {"run": "fc.bw"}, {"run": "fc.bw"}])");
  CHECK(Err(p.dump()) == "");
  Plan plan;
  std::string err;
  REQUIRE(ParsePlan(p.dump(), "p.json", Tiny(), &plan, &err));
  SimResult sim;
  CHECK(!Simulate(Tiny(), plan.program, SimOptions(), &sim, &err));
  CHECK(err ==
        "step 0 (free): \"x\" is input and stays alive to the end; expected a non-resident "
        "tensor");
  // Unknown top-level members are ignored (forward compatibility).
  CHECK(Err(With("planner", R"({"name": "greedy"})")) == "");
}

TEST_CASE("plan: document errors") {
  CHECK(Err("[]") == "p.json: (root): expected an object, found an array");
  CHECK(Err("{\"format\": ") ==
        "p.json: invalid JSON: parse error at line 1, column 12: syntax error while parsing "
        "value - unexpected end of input; expected '[', '{', or a literal");
  CHECK(Err(With("format", R"("memplan.plan/2")")) ==
        "p.json: /format: unsupported format \"memplan.plan/2\"; expected \"memplan.plan/1\"");
  CHECK(Err(With("format", "1")) == "p.json: /format: expected \"memplan.plan/1\", found 1");
  CHECK(Err(Without("format")) == "p.json: /format: missing; expected \"memplan.plan/1\"");
  CHECK(Err(R"({"format": "memplan.plan/1", "format": "memplan.plan/1"})") ==
        "p.json: /format: appears twice; expected each member once");
  CHECK(Err(std::string(100, '[') + std::string(100, ']')) ==
        "p.json: nesting deeper than 64 levels at byte 64; expected at most 64 levels of "
        "arrays and objects");
}

TEST_CASE("plan: header errors") {
  CHECK(Err(Without("graph")) == "p.json: /graph: missing; expected a string");
  CHECK(Err(With("graph_sha256", R"("abc")")) ==
        "p.json: /graph_sha256: expected 64 lower-case hex digits (the SHA-256 of the graph "
        "file), found \"abc\"");
  CHECK(Err(With("graph_sha256", '"' + std::string(64, 'A') + '"')) ==
        "p.json: /graph_sha256: expected 64 lower-case hex digits (the SHA-256 of the graph "
        "file), found \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA...\"");
  CHECK(Err(With("budget_bytes", "1.5")) ==
        "p.json: /budget_bytes: expected a non-negative integer, found 1.5");
  CHECK(Err(With("budget_bytes", "-1")) ==
        "p.json: /budget_bytes: expected a non-negative integer, found -1");
  CHECK(Err(With("feasible", R"("yes")")) ==
        "p.json: /feasible: expected a boolean, found \"yes\"");
  CHECK(Err(Without("steps")) == "p.json: /steps: missing; expected an array of steps");
  CHECK(Err(With("modules", R"(["a", 3])")) ==
        "p.json: /modules/1: expected a non-empty string, found 3");
}

TEST_CASE("plan: sac policies are written per op, per output where they differ, and read back") {
  const Graph& g = Tiny();
  Plan plan;
  plan.graph = "tiny";
  plan.graph_sha256 = std::string(64, 'a');
  plan.modules = {"m"};
  plan.sac = {SacRegion{
      "m", {SacOp{g.FindOp("fc"), true, {true}}, SacOp{g.FindOp("act"), false, {false}}}}};
  std::string text = PlanToJson(g, plan);
  CHECK(text.find(" \"modules\": [\"m\"],\n"
                  " \"sac\": [\n"
                  "  {\"module\": \"m\", \"ops\": [\n"
                  "   {\"op\": \"fc\", \"type\": \"linear\", \"policy\": \"save\"},\n"
                  "   {\"op\": \"act\", \"type\": \"relu\", \"policy\": \"recompute\"}]}\n"
                  " ],\n"
                  " \"predicted\"") != std::string::npos);
  Plan back;
  std::string err;
  REQUIRE(ParsePlan(text, "p.json", g, &back, &err));
  REQUIRE(back.sac.size() == 1);
  CHECK(back.sac[0].module == "m");
  REQUIRE(back.sac[0].ops.size() == 2);
  CHECK(back.sac[0].ops[0].op == g.FindOp("fc"));
  CHECK(back.sac[0].ops[0].save);
  CHECK(back.sac[0].ops[0].save_outputs == std::vector<bool>{true});
  CHECK_FALSE(back.sac[0].ops[1].save);
  // Per output.
  json doc = BasePlan();
  doc["sac"] = json::parse(
      R"([{"module": "m", "ops": [{"op": "fc", "type": "linear", "policy": ["save"]}]}])");
  REQUIRE(ParsePlan(doc.dump(), "p.json", g, &back, &err));
  CHECK(back.sac[0].ops[0].save_outputs == std::vector<bool>{true});
}

TEST_CASE("plan: sac errors") {
  auto sac = [](const std::string& ops) {
    return With("sac", R"([{"module": "m", "ops": [)" + ops + "]}]");
  };
  CHECK(Err(With("sac", R"({"m": []})")) ==
        "p.json: /sac: expected an array of {\"module\", \"ops\"} objects, found an object");
  CHECK(Err(With("sac", R"([{"ops": []}])")) ==
        "p.json: /sac/0/module: missing; expected a non-empty string");
  CHECK(Err(sac(R"({"op": "act.bw", "type": "relu", "policy": "save"})")) ==
        "p.json: /sac/0/ops/0/op: \"act.bw\" is not a forward op of the joint graph; expected "
        "the id of a forward op");
  CHECK(Err(sac(R"({"op": "act", "type": "gelu", "policy": "save"})")) ==
        "p.json: /sac/0/ops/0/type: \"gelu\" is not the type of op \"act\"; expected \"relu\"");
  CHECK(Err(sac(R"({"op": "act", "type": "relu", "policy": "keep"})")) ==
        "p.json: /sac/0/ops/0/policy: unknown policy \"keep\"; expected \"save\", "
        "\"recompute\", or one of them per output of the op");
  CHECK(Err(sac(R"({"op": "act", "type": "relu", "policy": ["save", "save"]})")) ==
        "p.json: /sac/0/ops/0/policy: 2 policies for 1 outputs; expected one per output");
  CHECK(Err(sac(R"({"op": "act", "type": "relu"})")) ==
        "p.json: /sac/0/ops/0/policy: missing; expected \"save\", \"recompute\", or one of "
        "them per output of the op");
}

TEST_CASE("plan: accumulation, saved, recomputed and predicted errors") {
  CHECK(Err(With("accumulation", R"({"h.grad": "lazy"})")) ==
        "p.json: /accumulation/h.grad: unknown accumulation mode \"lazy\"; expected inplace, "
        "out_of_place or deferred");
  CHECK(Err(With("accumulation", R"({"a/b.grad": "inplace"})")) ==
        "p.json: /accumulation/a~1b.grad: unknown tensor \"a/b.grad\"; expected the id of a "
        "tensor in the joint graph");
  CHECK(Err(With("accumulation", R"(["h.grad"])")) ==
        "p.json: /accumulation: expected an object mapping tensor ids to accumulation modes, "
        "found an array");
  CHECK(Err(With("saved", R"(["h", "q"])")) ==
        "p.json: /saved/1: unknown tensor \"q\"; expected the id of a tensor in the joint graph");
  CHECK(Err(With("recomputed", R"("r")")) ==
        "p.json: /recomputed: expected an array of tensor ids, found \"r\"");
  json p = BasePlan();
  p["predicted"]["cost_unit"] = "seconds";
  CHECK(Err(p.dump()) ==
        "p.json: /predicted/cost_unit: unknown cost unit \"seconds\"; expected flops, time_us or "
        "bytes");
  p = BasePlan();
  p["predicted"]["recompute_cost"] = -1;
  CHECK(Err(p.dump()) ==
        "p.json: /predicted/recompute_cost: expected a non-negative number, found -1");
  p = BasePlan();
  p["predicted"].erase("peak_bytes");
  CHECK(Err(p.dump()) == "p.json: /predicted/peak_bytes: missing; expected a non-negative integer");
}

TEST_CASE("plan: step errors") {
  CHECK(Err(With("steps", R"({"run": "fc"})")) ==
        "p.json: /steps: expected an array of steps, found an object");
  CHECK(Err(WithStep(R"("fc")")) ==
        "p.json: /steps/3: expected a step object (\"run\" or \"free\"), found \"fc\"");
  CHECK(Err(WithStep(R"({"run": "fc", "free": ["h"]})")) ==
        "p.json: /steps/3: a step with both \"run\" and \"free\"; expected exactly one of them");
  CHECK(Err(WithStep("{}")) ==
        "p.json: /steps/3: a step with neither \"run\" nor \"free\"; expected exactly one of "
        "them");
  CHECK(Err(WithStep(R"({"recompute": "fc"})")) ==
        "p.json: /steps/3/recompute: unknown member; expected \"run\" (with an optional "
        "\"inplace\") or \"free\"");
  CHECK(Err(WithStep(R"({"free": ["h"], "inplace": {"h.grad": "r"}})")) ==
        "p.json: /steps/3/inplace: \"inplace\" on a free step; expected it only beside \"run\"");
  CHECK(Err(WithStep(R"({"run": "conv1"})")) ==
        "p.json: /steps/3/run: unknown op \"conv1\"; expected the id of an op in the joint "
        "graph");
  CHECK(Err(WithStep(R"({"run": 3})")) == "p.json: /steps/3/run: expected an op id, found 3");
  CHECK(Err(WithStep(R"({"free": ["h", "nope"]})")) ==
        "p.json: /steps/3/free/1: unknown tensor \"nope\"; expected the id of a tensor in the "
        "joint graph");
  CHECK(Err(WithStep(R"({"free": "h"})")) ==
        "p.json: /steps/3/free: expected an array of tensor ids, found \"h\"");
  CHECK(Err(WithStep(R"({"run": "act.bw", "inplace": {"h.grad": 1}})")) ==
        "p.json: /steps/3/inplace/h.grad: expected a tensor id, found 1");
  CHECK(Err(WithStep(R"({"run": "act.bw", "inplace": {"nope": "r"}})")) ==
        "p.json: /steps/3/inplace/nope: unknown tensor \"nope\"; expected the id of a tensor in "
        "the joint graph");
  CHECK(Err(WithStep(R"({"run": "act.bw", "inplace": ["h.grad", "r"]})")) ==
        "p.json: /steps/3/inplace: expected an object mapping output ids to input ids, found "
        "an array");
  // The raw text, so that the duplicate survives.
  json p = BasePlan();
  p["steps"] = json::array();
  std::string text = p.dump();
  text.replace(text.find("\"steps\":[]"), 10,
               R"("steps": [{"run": "fc"}, {"free": ["h"]}, {"run": "fc", "run": "act"}])");
  CHECK(Err(text) == "p.json: /steps/2/run: appears twice; expected each member once");
}

TEST_CASE("plan: LoadPlanFile") {
  Plan plan;
  std::string err;
  CHECK(!LoadPlanFile("/no/such/plan.json", Tiny(), &plan, &err));
  CHECK(err == "cannot read /no/such/plan.json: No such file or directory");
}

}  // namespace memplan
