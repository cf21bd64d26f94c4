#include "analyzer/ir/topology.h"

#include <doctest/doctest.h>

#include <span>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/ir/graph.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"
#include "test_util.h"

namespace memplan {
namespace {

// Every field of g.topology against the records it copies (topology.h's
// invariants).
void CheckMatchesRecords(const Graph& g) {
  const Topology& topo = g.topology;
  REQUIRE(topo.io_start.size() == g.ops.size() + 1);
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    const std::span<const int> in = topo.Inputs(static_cast<int>(o));
    const std::span<const int> out = topo.Outputs(static_cast<int>(o));
    CHECK(std::vector<int>(in.begin(), in.end()) == op.inputs);
    CHECK(std::vector<int>(out.begin(), out.end()) == op.outputs);
    CHECK(static_cast<bool>(topo.forward[o]) == (op.phase == Phase::kForward));
    CHECK(static_cast<bool>(topo.accumulate[o]) == op.accumulate);
    CHECK(topo.workspace_bytes[o] == op.workspace_bytes);
  }
  REQUIRE(topo.alias_of.size() == g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const Tensor& tensor = g.tensors[t];
    CHECK(topo.alias_of[t] == tensor.alias_of);
    CHECK(topo.IsView(static_cast<int>(t)) == g.IsView(static_cast<int>(t)));
    CHECK(topo.base[t] == tensor.base);
    CHECK(topo.producer[t] == tensor.producer);
    CHECK(topo.bytes[t] == tensor.bytes);
    CHECK(static_cast<bool>(topo.resident[t]) == IsResident(tensor.kind));
  }
}

Tensor MakeTensor(const std::string& id, int64_t n, TensorKind kind) {
  Tensor t;
  t.id = id;
  t.shape = {Dim{n, ""}};
  t.kind = kind;
  return t;
}

Op MakeOp(const std::string& id, std::vector<int> in, std::vector<int> out, Phase phase) {
  Op op;
  op.id = id;
  op.type = "relu";
  op.inputs.assign(in.begin(), in.end());
  op.outputs.assign(out.begin(), out.end());
  op.phase = phase;
  return op;
}

TEST_CASE("topology: Finalize lays out each op's inputs then outputs, flat") {
  Graph g;
  g.tensors = {MakeTensor("w", 4, TensorKind::kParameter), MakeTensor("x", 4, TensorKind::kInput),
               MakeTensor("h", 4, TensorKind::kActivation),
               MakeTensor("v", 4, TensorKind::kActivation),
               MakeTensor("g", 4, TensorKind::kGradient)};
  g.tensors[3].alias_of = 2;
  g.ops = {MakeOp("mm", {1, 0}, {2}, Phase::kForward), MakeOp("view", {2}, {3}, Phase::kForward),
           MakeOp("bw", {3, 0, 1}, {4}, Phase::kBackward)};
  g.ops[2].workspace_bytes = 128;
  g.ops[2].accumulate = true;
  std::string err;
  REQUIRE(g.Finalize(&err));
  const Topology& topo = g.topology;
  CHECK(topo.io == std::vector<int>{1, 0, 2, 2, 3, 3, 0, 1, 4});
  CHECK(topo.io_start == std::vector<int>{0, 3, 5, 9});
  CHECK(topo.num_inputs == std::vector<int>{2, 1, 3});
  const std::span<const int> out = topo.Outputs(2);
  CHECK(std::vector<int>(out.begin(), out.end()) == std::vector<int>{4});
  CHECK(topo.forward == std::vector<uint8_t>{1, 1, 0});
  CHECK(topo.accumulate == std::vector<uint8_t>{0, 0, 1});
  CHECK(topo.workspace_bytes == std::vector<int64_t>{0, 0, 128});
  CHECK(topo.alias_of == std::vector<int>{-1, -1, -1, 2, -1});
  CHECK(topo.base == std::vector<int>{0, 1, 2, 2, 4});
  CHECK(topo.producer == std::vector<int>{-1, -1, 0, 1, 2});
  CHECK(topo.bytes == std::vector<int64_t>{16, 16, 16, 16, 16});
  CHECK(topo.resident == std::vector<uint8_t>{1, 1, 0, 0, 0});
  CheckMatchesRecords(g);

  SUBCASE("a changed graph is laid out again by the next Finalize") {
    g.ops[1].inputs = {2, 0};
    g.tensors[4].shape = {Dim{8, ""}};
    REQUIRE(g.Finalize(&err));
    CHECK(topo.io == std::vector<int>{1, 0, 2, 2, 0, 3, 3, 0, 1, 4});
    CHECK(topo.bytes[4] == 32);
    CheckMatchesRecords(g);
  }
}

TEST_CASE("topology: the simulator refuses a graph changed since Finalize") {
  Graph g;
  g.tensors = {MakeTensor("x", 4, TensorKind::kInput), MakeTensor("h", 4, TensorKind::kActivation)};
  g.ops = {MakeOp("f", {0}, {1}, Phase::kForward)};
  g.outputs = {1};
  std::string err;
  REQUIRE(g.Finalize(&err));
  const Program program = BuildBaselineProgram(g, AccumulationMode::kInplace);
  SimResult sim;
  REQUIRE(Simulate(g, program, SimOptions(), &sim, &err));
  g.tensors.push_back(MakeTensor("y", 4, TensorKind::kActivation));
  CHECK_FALSE(Simulate(g, program, SimOptions(), &sim, &err));
  CHECK(err ==
        "the graph has 1 ops and 3 tensors, its topology 1 and 2: finalize it again after "
        "changing it");
}

TEST_CASE("topology: matches the records of every example's joint graph") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json"}) {
    CAPTURE(name);
    JointGraph jg;
    std::string err;
    REQUIRE(LoadJointGraph(testing::ExamplePath(name), GraphLoadOptions(), &jg, &err));
    CheckMatchesRecords(jg.graph);
  }
}

}  // namespace
}  // namespace memplan
