#include "analyzer/plan/cost_model.h"

#include <doctest/doctest.h>

#include <cmath>

#include "test_util.h"

namespace memplan {
namespace {

using testing::MustLower;
using testing::MustParse;
using testing::OpNamed;

std::string Doc(const std::string& tensors, const std::string& ops) {
  return R"({"format": "memplan.graph/1", "name": "t", "tensors": [)" + tensors + R"(], "ops": [)" +
         ops + R"(], "outputs": []})";
}

std::string T(const std::string& id, const std::string& shape, const std::string& extra = "") {
  return R"({"id": ")" + id + R"(", "shape": )" + shape + R"(, "dtype": "float32")" + extra + "}";
}

std::string O(const std::string& id, const std::string& type, const std::string& inputs,
              const std::string& outputs, const std::string& extra = "") {
  return R"({"id": ")" + id + R"(", "type": ")" + type + R"(", "inputs": )" + inputs +
         R"(, "outputs": )" + outputs + extra + "}";
}

const std::string kInput = R"(, "kind": "input")";

CostModel Model(Objective objective, const char* device = "h100") {
  CostModel m;
  m.objective = objective;
  REQUIRE(FindDevicePreset(device, &m.device));
  return m;
}

TEST_CASE("cost: device presets by name, case-insensitive; unknown names rejected") {
  DevicePreset d{};
  REQUIRE(FindDevicePreset("h100", &d));
  CHECK(std::string(d.name) == "h100");
  CHECK(d.peak_flops == 989e12);
  CHECK(d.bandwidth == 3.35e12);
  REQUIRE(FindDevicePreset("H200", &d));
  CHECK(d.peak_flops == 989e12);
  CHECK(d.bandwidth == 4.8e12);
  REQUIRE(FindDevicePreset("a100", &d));
  CHECK(d.peak_flops == 312e12);
  CHECK(d.bandwidth == 2.039e12);
  REQUIRE(FindDevicePreset("cpu", &d));
  CHECK(d.bandwidth == 100e9);
  DevicePreset untouched = d;
  CHECK_FALSE(FindDevicePreset("tpu", &d));
  CHECK_FALSE(FindDevicePreset("", &d));
  CHECK_FALSE(FindDevicePreset("h1000", &d));
  CHECK(std::string(d.name) == untouched.name);
  CHECK(DevicePresetNames() == "h100, h200, a100, cpu");
  // SAC's dispatch: the preset's (measured on the CPU, 0 on GPUs) unless
  // given; nothing under objective flops.
  CHECK(SacDispatchCost(Model(Objective::kTime, "cpu")) == 105);
  CHECK(SacDispatchCost(Model(Objective::kTime, "h100")) == 0);
  CostModel given = Model(Objective::kTime, "h100");
  given.sac_dispatch_us = 25;
  CHECK(SacDispatchCost(given) == 25);
  given.objective = Objective::kFlops;
  CHECK(SacDispatchCost(given) == 0);
  CHECK(std::string(CostModel().device.name) == "h100");
  CHECK(CostModel().objective == Objective::kTime);
  CHECK(std::string(CostUnit(Model(Objective::kTime))) == "time_us");
  CHECK(std::string(CostUnit(Model(Objective::kFlops))) == "flops");
}

TEST_CASE("cost: a given time_us wins over flops under objective time") {
  Graph g =
      MustParse(Doc(T("x", "[1024]", kInput) + "," + T("y", "[1024]"),
                    O("f", "relu", R"(["x"])", R"(["y"])", R"(, "flops": 1e15, "time_us": 7.5)")));
  const Op& op = OpNamed(g, "f");
  CHECK(OpCost(g, op, Model(Objective::kTime)) == 7.5);
  CHECK(OpCost(g, op, Model(Objective::kTime, "cpu")) == 7.5);
  CHECK(OpCost(g, op, Model(Objective::kFlops)) == 1e15);
}

TEST_CASE("cost: the roofline takes the compute term for a large matmul") {
  // [8192, 4096] x [4096, 4096]^T: 2*M*N*K flops over (2*M*K + K*N) * 4 bytes.
  Graph g = MustParse(Doc(T("x", "[8192, 4096]", kInput) + "," +
                              T("w", "[4096, 4096]", R"(, "kind": "parameter")") + "," +
                              T("y", "[8192, 4096]"),
                          O("fc", "linear", R"(["x","w"])", R"(["y"])")));
  const Op& op = OpNamed(g, "fc");
  const double flops = 2.0 * 8192 * 4096 * 4096;
  const double bytes = (2.0 * 8192 * 4096 + 4096.0 * 4096) * 4;
  CHECK(BytesMoved(g, op) == bytes);
  // h100: 274.9e9 / 989e12 s = 277.9 us of compute vs 100.2 us of traffic.
  CHECK(OpCost(g, op, Model(Objective::kTime)) == doctest::Approx(flops / 989e12 * 1e6));
  CHECK(OpCost(g, op, Model(Objective::kTime)) == doctest::Approx(277.935).epsilon(1e-5));
  CHECK(OpCost(g, op, Model(Objective::kTime, "a100")) == doctest::Approx(flops / 312e12 * 1e6));
  CHECK(OpCost(g, op, Model(Objective::kFlops)) == flops);
  CHECK_FALSE(IsMemoryBound(g, op, Model(Objective::kTime).device));
}

TEST_CASE("cost: the roofline takes the bandwidth term for an elementwise op") {
  Graph g = MustParse(Doc(T("x", "[1048576]", kInput) + "," + T("y", "[1048576]"),
                          O("r", "relu", R"(["x"])", R"(["y"])")));
  const Op& op = OpNamed(g, "r");
  const double bytes = 2.0 * 4 * 1048576;  // read x, write y
  CHECK(BytesMoved(g, op) == bytes);
  // h100: 8 MiB / 3.35 TB/s = 2.504 us; its 1M flops would take 0.001 us.
  CHECK(OpCost(g, op, Model(Objective::kTime)) == doctest::Approx(bytes / 3.35e12 * 1e6));
  CHECK(OpCost(g, op, Model(Objective::kTime)) == doctest::Approx(2.504).epsilon(1e-3));
  CHECK(OpCost(g, op, Model(Objective::kTime, "h200")) == doctest::Approx(bytes / 4.8e12 * 1e6));
  CHECK(OpCost(g, op, Model(Objective::kFlops)) == 1048576.0);
  for (const DevicePreset& d : kDevicePresets) CHECK(IsMemoryBound(g, op, d));
}

TEST_CASE("cost: views cost nothing and share their base's bytes") {
  Graph g = MustParse(Doc(T("x", "[4, 8]", kInput) + "," + T("v", "[32]", R"(, "alias_of": "x")") +
                              "," + T("y", "[4, 8]") + "," + T("big", "[1024]", kInput) + "," +
                              T("s", "[16]", R"(, "alias_of": "big")") + "," + T("z", "[16]"),
                          O("view", "reshape", R"(["x"])", R"(["v"])") + "," +
                              O("both", "mul", R"(["x","v"])", R"(["y"])") + "," +
                              O("slice", "slice", R"(["big"])", R"(["s"])") + "," +
                              O("part", "relu", R"(["s"])", R"(["z"])")));
  for (const char* id : {"view", "slice"}) {
    CAPTURE(id);
    CHECK(IsViewOnly(g, OpNamed(g, id)));
    CHECK(BytesMoved(g, OpNamed(g, id)) == 0.0);
    CHECK(OpCost(g, OpNamed(g, id), Model(Objective::kTime)) == 0.0);
    CHECK(OpCost(g, OpNamed(g, id), Model(Objective::kFlops)) == 0.0);
    CHECK(IsMemoryBound(g, OpNamed(g, id), CostModel().device));
  }
  // x and its view v are one 128-byte buffer, read once; y is written.
  CHECK_FALSE(IsViewOnly(g, OpNamed(g, "both")));
  CHECK(BytesMoved(g, OpNamed(g, "both")) == 128.0 + 128.0);
  // A 16-element view of a 1024-element buffer reads only its 64 bytes.
  CHECK(BytesMoved(g, OpNamed(g, "part")) == 64.0 + 64.0);

  // After lowering, a reshape's backward makes a view of the output gradient.
  Graph j = MustLower(R"({"format": "memplan.graph/1", "name": "v",
      "tensors": [{"id": "x", "shape": [4, 8], "dtype": "float32", "kind": "input"},
                  {"id": "w", "shape": [8, 8], "dtype": "float32", "kind": "parameter"},
                  {"id": "h", "shape": [4, 8], "dtype": "float32"},
                  {"id": "hv", "shape": [32], "dtype": "float32", "alias_of": "h"},
                  {"id": "loss", "shape": [], "dtype": "float32"}],
      "ops": [{"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"id": "flat", "type": "reshape", "inputs": ["h"], "outputs": ["hv"]},
              {"id": "l", "type": "mean", "inputs": ["hv"], "outputs": ["loss"]}],
      "outputs": ["loss"]})");
  const Op& flat_bw = OpNamed(j, "flat.bw");
  CHECK(IsViewOnly(j, flat_bw));
  CHECK(OpCost(j, flat_bw, Model(Objective::kTime)) == 0.0);
  CHECK(OpCost(j, flat_bw, Model(Objective::kFlops)) == 0.0);
  CHECK(OpCost(j, OpNamed(j, "fc.bw"), Model(Objective::kFlops)) > 0.0);
}

TEST_CASE("cost: objective flops falls back to bytes / 4 for an op with no flops") {
  Graph g = MustParse(Doc(T("x", "[256]", kInput) + "," + T("y", "[256]") + "," + T("z", "[256]"),
                          O("copy", "copy", R"(["x"])", R"(["y"])", R"(, "flops": 0)") + "," +
                              O("zeros", "zeros_like", R"(["x"])", R"(["z"])")));
  for (const char* id : {"copy", "zeros"}) {
    CAPTURE(id);
    const Op& op = OpNamed(g, id);
    CHECK(BytesMoved(g, op) == 2048.0);  // 1 KiB read + 1 KiB written
    CHECK(OpCost(g, op, Model(Objective::kFlops)) == 512.0);
    CHECK(OpCost(g, op, Model(Objective::kTime)) == doctest::Approx(2048.0 / 3.35e12 * 1e6));
    CHECK(IsMemoryBound(g, op, CostModel().device));
  }
}

TEST_CASE("cost: every example op has a finite, non-negative, deterministic cost") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json", "mlp_torch.joint.graph.json"}) {
    CAPTURE(name);
    JointGraph a, b;
    std::string err;
    REQUIRE(LoadJointGraph(testing::ExamplePath(name), GraphLoadOptions(), &a, &err));
    REQUIRE(LoadJointGraph(testing::ExamplePath(name), GraphLoadOptions(), &b, &err));
    int memory_bound = 0;
    for (Objective obj : {Objective::kTime, Objective::kFlops}) {
      for (const DevicePreset& d : kDevicePresets) {
        CostModel m;
        m.objective = obj;
        m.device = d;
        std::vector<double> costs = OpCosts(a.graph, m);
        REQUIRE(costs.size() == a.graph.ops.size());
        CHECK(costs == OpCosts(b.graph, m));
        for (size_t o = 0; o < costs.size(); ++o) {
          CAPTURE(a.graph.ops[o].id);
          CHECK(std::isfinite(costs[o]));
          CHECK(costs[o] >= 0.0);
          CHECK(costs[o] == OpCost(a.graph, a.graph.ops[o], m));
          // Only view-only ops are free, unless a measured time says so.
          if (costs[o] == 0.0 && a.graph.ops[o].time_us < 0 &&
              BytesMoved(a.graph, a.graph.ops[o]) > 0)
            CHECK(IsViewOnly(a.graph, a.graph.ops[o]));
          memory_bound += IsMemoryBound(a.graph, a.graph.ops[o], d);
        }
      }
    }
    CHECK(memory_bound > 0);  // every example has elementwise ops
  }
}

}  // namespace
}  // namespace memplan
