// Helpers shared by the analyzer tests.
#ifndef MEMPLAN_TESTS_TEST_UTIL_H_
#define MEMPLAN_TESTS_TEST_UTIL_H_

#include <doctest/doctest.h>

#include <span>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/import/graph_json.h"
#include "analyzer/lower/lower.h"

namespace memplan::testing {

inline Graph MustParse(const std::string& text) {
  Graph g;
  std::string err;
  bool ok = ParseGraph(text, "test.json", GraphLoadOptions(), &g, &err);
  INFO(err);
  REQUIRE(ok);
  return g;
}

inline Graph MustLower(const std::string& text, std::vector<std::string>* warnings = nullptr) {
  Graph fwd = MustParse(text);
  Graph joint;
  std::vector<std::string> w;
  std::string err;
  bool ok = LowerToJoint(fwd, &joint, &w, &err);
  INFO(err);
  REQUIRE(ok);
  if (warnings) *warnings = w;
  return joint;
}

inline const Op& OpNamed(const Graph& g, const std::string& id) {
  int o = g.FindOp(id);
  INFO("no op " << id);
  REQUIRE(o >= 0);
  return g.ops[o];
}

inline const Tensor& TensorNamed(const Graph& g, const std::string& id) {
  int t = g.FindTensor(id);
  INFO("no tensor " << id);
  REQUIRE(t >= 0);
  return g.tensors[t];
}

inline std::vector<std::string> Names(const Graph& g, std::span<const int> tensors) {
  std::vector<std::string> out;
  for (int t : tensors) out.push_back(g.tensors[t].id);
  return out;
}

inline std::string AliasOf(const Graph& g, const std::string& id) {
  const Tensor& t = TensorNamed(g, id);
  return t.alias_of >= 0 ? g.tensors[t.alias_of].id : "";
}

inline SimResult MustSimulate(const Graph& g, const Program& p) {
  SimResult r;
  std::string err;
  bool ok = Simulate(g, p, SimOptions(), &r, &err);
  INFO(err);
  REQUIRE(ok);
  return r;
}

// The figures a peak-only replay answers: `got`'s equal `want`'s.
inline void CheckSameFigures(const SimResult& got, const SimResult& want) {
  CHECK(got.peak_bytes == want.peak_bytes);
  CHECK(got.peak_step == want.peak_step);
  CHECK(got.start_bytes == want.start_bytes);
  CHECK(got.end_bytes == want.end_bytes);
  CHECK(got.recompute_cost == want.recompute_cost);
  CHECK(got.recompute_runs == want.recompute_runs);
  CHECK(got.stopped == want.stopped);
}

inline SimResult Baseline(const Graph& joint, AccumulationMode mode) {
  return MustSimulate(joint, BuildBaselineProgram(joint, mode));
}

inline std::string ExamplePath(const std::string& name) {
  return std::string(MEMPLAN_SOURCE_DIR) + "/examples/" + name;
}

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_TEST_UTIL_H_
