// Limits (issue 7): every byte count is exact or refused with a message that
// names the limit; nothing wraps. Complements the overflow cases of
// graph_json_test.cc (element count, byte count, sum of tensors) and
// units_test.cc (ParseSize over 2^63-1).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "analyzer/base/units.h"
#include "analyzer/drivers/analysis.h"
#include "analyzer/import/graph_json.h"
#include "analyzer/ir/graph.h"
#include "analyzer/lower/lower.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan {
namespace {

constexpr int64_t k2to58 = int64_t{1} << 58;

// A forward-only chain x -> relu -> relu -> sum with activations of `elems`
// float32 elements each (x an input).
std::string Chain(int64_t elems, const std::string& more_tensors = "") {
  std::string e = std::to_string(elems);
  return R"({"format": "memplan.graph/1", "name": "big", "tensors": [
    {"id": "x", "shape": [)" +
         e + R"(], "dtype": "float32", "kind": "input"},
    {"id": "w", "shape": [1], "dtype": "float32", "kind": "parameter"},
    {"id": "a", "shape": [)" +
         e + R"(], "dtype": "float32"},
    {"id": "b", "shape": [)" +
         e + R"(], "dtype": "float32"},
    {"id": "l", "shape": [], "dtype": "float32"})" +
         more_tensors + R"(],
   "ops": [
    {"id": "r1", "type": "mul", "inputs": ["x", "w"], "outputs": ["a"]},
    {"id": "r2", "type": "relu", "inputs": ["a"], "outputs": ["b"]},
    {"id": "s", "type": "sum", "inputs": ["b"], "outputs": ["l"]}],
   "outputs": ["l"]})";
}

}  // namespace

TEST_CASE("limits: a graph over 2^61 bytes is refused naming the limit") {
  // Three tensors of 2^60 bytes: 3 * 2^60 fits in int64 but is over 2^61.
  Graph g;
  std::string err;
  CHECK_FALSE(ParseGraph(Chain(k2to58), "big.json", {}, &g, &err));
  CHECK(err.find("big.json: ") == 0);
  CHECK(err.find("memplan handles at most 2^61 bytes (2 EiB)") != std::string::npos);
}

TEST_CASE("limits: the lowering that pushes a graph over 2^61 bytes is refused") {
  // Forward: 3 * 2^57 bytes (fine); the joint graph adds gradients of a and b
  // and more, going over 2^61 bytes only if they are large: 2^59 each here.
  Graph fwd, joint;
  std::string err;
  const int64_t elems = k2to58 / 4 * 2;  // 2^57 elements = 2^59 bytes
  REQUIRE(ParseGraph(Chain(elems), "big.json", {}, &fwd, &err));
  std::vector<std::string> warnings;
  bool ok = LowerToJoint(std::move(fwd), &joint, &warnings, &err);
  if (!ok) {
    CHECK(err.find("2^61") != std::string::npos);
    return;
  }
  // Lowered fine: then every sum is exact (2^59-byte buffers, no wrap).
  Analysis a;
  REQUIRE(AnalyzeBaseline(joint, AccumulationMode::kInplace, &a, &err));
  CHECK(a.sim.peak_bytes > 0);
  CHECK(a.sim.peak_bytes % (int64_t{1} << 59) < 64);  // whole buffers plus a few bytes
  CHECK(a.lower_bound_bytes <= a.sim.peak_bytes);
}

TEST_CASE("limits: peaks near 2^61 bytes are exact") {
  // Activations of 2^56 bytes (2^54 float32): peak = x + a + b + small, exact.
  const int64_t elems = int64_t{1} << 54, bytes = int64_t{1} << 56;
  Graph g;
  JointGraph jg;
  std::string err;
  REQUIRE(ParseGraph(Chain(elems), "big.json", {}, &g, &err));
  std::vector<std::string> warnings;
  REQUIRE(LowerToJoint(std::move(g), &jg.graph, &warnings, &err));
  Analysis a;
  REQUIRE(AnalyzeBaseline(jg.graph, AccumulationMode::kInplace, &a, &err));
  // Every buffer is a multiple of 2^56 or at most a few bytes.
  CHECK(a.sim.peak_bytes >= 2 * bytes);
  CHECK(a.sim.peak_bytes % bytes <= 16);
  int64_t sum = 0;
  for (const LiveBuffer& b : a.sim.live_at_peak) sum += b.bytes;
  CHECK(sum == a.sim.peak_bytes);
}

TEST_CASE("limits: --set values that overflow a tensor are refused at that tensor") {
  const std::string doc = R"({"format": "memplan.graph/1", "symbols": {"batch": 2},
    "tensors": [{"id": "x", "shape": ["batch", 1000, 1000], "dtype": "float32",
                 "kind": "input"}], "ops": []})";
  Graph g;
  std::string err;
  GraphLoadOptions o;
  o.symbol_overrides.emplace_back("batch", int64_t{1000000000000000000});
  CHECK_FALSE(ParseGraph(doc, "g.json", o, &g, &err));
  CHECK(err ==
        "g.json: /tensors/0/shape: element count overflows 64-bit arithmetic; expected a "
        "tensor under 2^63 bytes");
}

TEST_CASE("limits: plan byte counts beyond int64 are refused with their pointer") {
  Graph fwd;
  JointGraph jg;
  std::string err;
  REQUIRE(ParseGraph(Chain(16), "g.json", {}, &fwd, &err));
  std::vector<std::string> warnings;
  REQUIRE(LowerToJoint(std::move(fwd), &jg.graph, &warnings, &err));
  auto plan_text = [](const std::string& budget, const std::string& peak) {
    return R"({"format": "memplan.plan/1", "graph": "big", "graph_sha256": ")" +
           std::string(64, '0') + R"(", "budget_bytes": )" + budget +
           R"(, "feasible": true, "accumulation": {}, "saved": [], "recomputed": [],
           "predicted": {"peak_bytes": )" +
           peak +
           R"(, "baseline_peak_bytes": 0, "recompute_cost": 0, "cost_unit": "flops"},
           "steps": []})";
  };
  Plan plan;
  CHECK(ParsePlan(plan_text("9223372036854775807", "0"), "p.json", jg.graph, &plan, &err));
  CHECK(plan.budget_bytes == INT64_MAX);
  CHECK_FALSE(ParsePlan(plan_text("9223372036854775808", "0"), "p.json", jg.graph, &plan, &err));
  CHECK(err.find("p.json: /budget_bytes: ") == 0);
  CHECK(err.find("non-negative integer") != std::string::npos);
  CHECK_FALSE(ParsePlan(plan_text("1", "18446744073709551615"), "p.json", jg.graph, &plan, &err));
  CHECK(err.find("p.json: /predicted/peak_bytes: ") == 0);
  CHECK_FALSE(ParsePlan(plan_text("1e300", "0"), "p.json", jg.graph, &plan, &err));
  CHECK(err.find("p.json: /budget_bytes: ") == 0);
}

TEST_CASE("limits: budgets at and over 2^63-1 bytes") {
  int64_t b = 0;
  std::string err;
  CHECK(ParseSize("9223372036854775807", &b, &err));
  CHECK(b == INT64_MAX);
  CHECK_FALSE(ParseSize("8388608TiB", &b, &err));  // exactly 2^63
  CHECK(err == "size \"8388608TiB\" is larger than 2^63-1 bytes");
  CHECK(ParseSize("8388607TiB", &b, &err));
  CHECK(b == int64_t{8388607} << 40);
  CHECK_FALSE(ParseSize("99999999999999999999999999999999999GB", &b, &err));
  CHECK(err.find("larger than 2^63-1 bytes") != std::string::npos);
}

}  // namespace memplan
