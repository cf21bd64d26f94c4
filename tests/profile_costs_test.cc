// Measured costs (memplan.costs/1, written by `memplan profile --emit-costs`):
// parsing, errors with file and pointer, and the override in the cost model.
#include <doctest/doctest.h>

#include "analyzer/plan/cost_model.h"
#include "test_util.h"

namespace memplan {
namespace {

const char* kGraph = R"({"format": "memplan.graph/1", "name": "two", "tensors": [
    {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
    {"id": "w", "shape": [256, 256], "dtype": "float32", "kind": "parameter"},
    {"id": "a", "shape": [256], "dtype": "float32"},
    {"id": "b", "shape": [256], "dtype": "float32"}],
  "ops": [
    {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["a"], "time_us": 3},
    {"id": "act", "type": "relu", "inputs": ["a"], "outputs": ["b"]}],
  "outputs": ["b"]})";

std::string ParseError(const std::string& text) {
  MeasuredCosts costs;
  std::string err;
  CHECK_FALSE(ParseCostsJson(text, "c.json", &costs, &err));
  return err;
}

TEST_CASE("measured costs: parsed, sorted by op id, optional fields kept") {
  MeasuredCosts costs;
  std::string err;
  REQUIRE(ParseCostsJson(R"({"format": "memplan.costs/1", "unit": "us", "graph": "two",
      "backend": "cuda", "device": "NVIDIA H200", "future": 1,
      "ops": {"fc": 12.5, "act": 0}})",
                         "c.json", &costs, &err));
  CHECK(costs.graph == "two");
  CHECK(costs.backend == "cuda");
  CHECK(costs.device == "NVIDIA H200");
  REQUIRE(costs.ops.size() == 2);
  CHECK(costs.ops[0].first == "act");
  CHECK(costs.ops[0].second == 0.0);
  CHECK(costs.ops[1].first == "fc");
  CHECK(costs.ops[1].second == 12.5);
}

TEST_CASE("measured costs: errors name the file, the pointer and what was expected") {
  CHECK(ParseError("[1]") == "c.json: (root): expected an object, found an array");
  CHECK(ParseError(R"({"unit": "us", "ops": {}})") ==
        "c.json: /format: missing; expected \"memplan.costs/1\"");
  CHECK(ParseError(R"({"format": "memplan.costs/2", "unit": "us", "ops": {}})") ==
        "c.json: /format: unsupported format \"memplan.costs/2\"; expected \"memplan.costs/1\"");
  CHECK(ParseError(R"({"format": "memplan.costs/1", "unit": "s", "ops": {}})") ==
        "c.json: /unit: found \"s\"; expected \"us\" (microseconds)");
  CHECK(ParseError(R"({"format": "memplan.costs/1", "unit": "us", "ops": []})") ==
        "c.json: /ops: expected an object of op id -> microseconds, found an array");
  CHECK(ParseError(R"({"format": "memplan.costs/1", "unit": "us", "ops": {"x~y": null}})") ==
        "c.json: /ops/x~0y: expected a finite number of microseconds >= 0, found null");
  CHECK(ParseError(R"({"format": "memplan.costs/1", "unit": "us", "device": 3, "ops": {}})") ==
        "c.json: /device: expected a string, found 3");
  CHECK(ParseError("{").rfind("c.json: invalid JSON: ", 0) == 0);
}

TEST_CASE("measured costs override time_us and the roofline under objective time only") {
  Graph g = testing::MustParse(kGraph);
  MeasuredCosts costs;
  costs.ops = {{"act", 7.0}, {"gone", 1.0}};
  CostModel model;
  std::vector<std::string> warnings;
  std::string err;
  double act_roofline = OpCost(g, g.ops[1], model);
  REQUIRE(ApplyMeasuredCosts(g, costs, "c.json", &model, &warnings, &err));
  CHECK(OpCost(g, g.ops[0], model) == 3.0);  // no measurement: time_us
  CHECK(OpCost(g, g.ops[1], model) == 7.0);  // measured
  CHECK(act_roofline != 7.0);
  CHECK(OpCosts(g, model) == std::vector<double>{3.0, 7.0});
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "c.json: 1 op(s) not in graph \"two\" are ignored, e.g. \"gone\"");
  CHECK(warnings[1] ==
        "c.json: 1 of 2 ops have no measured time; their cost is estimated (time_us or "
        "roofline)");
  costs.ops = {{"fc", 0.5}, {"act", 7.0}};
  warnings.clear();
  REQUIRE(ApplyMeasuredCosts(g, costs, "c.json", &model, &warnings, &err));
  CHECK(OpCost(g, g.ops[0], model) == 0.5);  // measured wins over time_us
  CHECK(warnings.empty());
  // An op that is not an element of g.ops has no measured time.
  Op copy = g.ops[1];
  CHECK(OpCost(g, copy, model) == act_roofline);
  CostModel flops = model;
  flops.objective = Objective::kFlops;
  CHECK(OpCost(g, g.ops[1], flops) != 7.0);
}

TEST_CASE("measured costs for another graph are an error") {
  Graph g = testing::MustParse(kGraph);
  MeasuredCosts costs;
  costs.ops = {{"conv1", 1.0}};
  CostModel model;
  std::vector<std::string> warnings;
  std::string err;
  CHECK_FALSE(ApplyMeasuredCosts(g, costs, "c.json", &model, &warnings, &err));
  CHECK(err ==
        "c.json: /ops: no op of graph \"two\" has a time (1 ops listed, e.g. \"conv1\"); "
        "expected the op ids of its joint graph, as `memplan profile --emit-costs` writes them");
  CHECK(model.measured_us.empty());
}

}  // namespace
}  // namespace memplan
