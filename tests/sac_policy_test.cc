// Selective activation checkpointing policies (analyzer/plan/sac_policy.h): the
// module regions, and each rule of the policy on a hand-made joint graph.
#include "analyzer/plan/sac_policy.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/test_util.h"

namespace memplan {
namespace {

// Module m: fc makes a, act overwrites it in place (r, a view of a), drop
// makes y and its mask k. y leaves m (head reads it); head's backward reads
// y, m's backward reads k and r (so a).
const char* kJoint = R"({"format": "memplan.graph/1", "name": "sac", "tensors": [
  {"id": "x", "shape": [4, 8], "dtype": "float32", "kind": "input"},
  {"id": "w", "shape": [8, 8], "dtype": "float32", "kind": "parameter"},
  {"id": "a", "shape": [4, 8], "dtype": "float32", "kind": "activation"},
  {"id": "r", "shape": [4, 8], "dtype": "float32", "kind": "activation", "alias_of": "a"},
  {"id": "y", "shape": [4, 8], "dtype": "float32", "kind": "activation"},
  {"id": "k", "shape": [4, 8], "dtype": "float32", "kind": "activation"},
  {"id": "o", "shape": [4, 8], "dtype": "float32", "kind": "activation"},
  {"id": "l", "shape": [], "dtype": "float32", "kind": "activation"},
  {"id": "l.grad", "shape": [], "dtype": "float32", "kind": "gradient"},
  {"id": "o.grad", "shape": [4, 8], "dtype": "float32", "kind": "gradient"},
  {"id": "y.grad", "shape": [4, 8], "dtype": "float32", "kind": "gradient"},
  {"id": "r.grad", "shape": [4, 8], "dtype": "float32", "kind": "gradient"},
  {"id": "a.grad", "shape": [4, 8], "dtype": "float32", "kind": "gradient"},
  {"id": "w.grad", "shape": [8, 8], "dtype": "float32", "kind": "gradient", "grad_of": "w"}],
 "ops": [
  {"id": "fc", "type": "mm", "inputs": ["x", "w"], "outputs": ["a"], "phase": "forward", "scope": "m.fc"},
  {"id": "act", "type": "relu", "inputs": ["a"], "outputs": ["r"], "phase": "forward", "scope": "m.act"},
  {"id": "drop", "type": "native_dropout", "inputs": ["r"], "outputs": ["y", "k"], "phase": "forward", "scope": "m.drop"},
  {"id": "head", "type": "tanh", "inputs": ["y"], "outputs": ["o"], "phase": "forward", "scope": "head"},
  {"id": "loss", "type": "sum", "inputs": ["o"], "outputs": ["l"], "phase": "forward", "scope": "loss"},
  {"id": "seed", "type": "ones_like", "inputs": ["l"], "outputs": ["l.grad"], "phase": "backward", "scope": "loss"},
  {"id": "loss.bw", "type": "expand", "inputs": ["l.grad"], "outputs": ["o.grad"], "phase": "backward", "scope": "loss"},
  {"id": "head.bw", "type": "tanh_backward", "inputs": ["o.grad", "y"], "outputs": ["y.grad"], "phase": "backward", "scope": "head"},
  {"id": "drop.bw", "type": "dropout_backward", "inputs": ["y.grad", "k"], "outputs": ["r.grad"], "phase": "backward", "scope": "m.drop"},
  {"id": "act.bw", "type": "threshold_backward", "inputs": ["r.grad", "r"], "outputs": ["a.grad"], "phase": "backward", "scope": "m.act"},
  {"id": "fc.bw", "type": "mm", "inputs": ["a.grad", "x"], "outputs": ["w.grad"], "phase": "backward", "scope": "m.fc"}],
 "outputs": ["l"]})";

std::vector<bool> Keep(const Graph& g, const std::vector<std::string>& ids) {
  std::vector<bool> keep(g.tensors.size(), false);
  for (const std::string& id : ids) keep[g.FindTensor(id)] = true;
  return keep;
}

std::string Policies(const Graph& g, const SacRegion& r) {
  std::string out;
  for (const SacOp& op : r.ops) {
    out += g.ops[op.op].id + ":";
    for (bool s : op.save_outputs) out += s ? "S" : "r";
    out += " ";
  }
  return out;
}

TEST_CASE("sac_policy: scope prefixes and module regions") {
  CHECK(ScopePrefix("h.0.attn.c_attn", 2) == "h.0");
  CHECK(ScopePrefix("h.0.attn.c_attn", 1) == "h");
  CHECK(ScopePrefix("h", 2) == "h");
  CHECK(ScopePrefix("", 2) == "");
  CHECK(InScope("h.0.attn", "h.0"));
  CHECK(InScope("h.0", "h.0"));
  CHECK_FALSE(InScope("h.01", "h.0"));
  CHECK_FALSE(InScope("h", "h.0"));
  CHECK(InScope("loss", "loss"));
  CHECK_FALSE(InScope("lossy", "loss"));
  Graph g = testing::MustParse(kJoint);
  ModuleRegions regions = FindModuleRegions(g, 1);
  CHECK(regions.module_of_op[g.FindOp("act")] == "m");
  CHECK(regions.module_of_op[g.FindOp("head")] == "head");
  CHECK(regions.escapes[g.FindTensor("y")]);   // head reads it
  CHECK(!regions.escapes[g.FindTensor("k")]);  // only the backward reads it
  CHECK(!regions.escapes[g.FindTensor("a")]);
  // At depth 2 "m.fc", "m.act", "m.drop" are regions; "head" and "loss" too
  // (leaves). An op scoped "m" itself would make "m" an ancestor: no region.
  Graph nested = g;
  nested.ops[g.FindOp("act")].scope = "m";
  ModuleRegions deep = FindModuleRegions(nested, 2);
  CHECK(deep.module_of_op[g.FindOp("fc")] == "m.fc");
  CHECK(deep.module_of_op[g.FindOp("act")] == "");
  CHECK(deep.module_of_op[g.FindOp("head")] == "head");
  // At depth 2, "m.act" overwrites "m.fc"'s output in place (r is a view of
  // a made by relu): checkpointing "m.act" alone would find its saved
  // input changed. A view op there would not count.
  CHECK(deep.module_of_op[g.FindOp("fc")] == "m.fc");
  ModuleRegions two = FindModuleRegions(g, 2);
  CHECK(two.module_of_op[g.FindOp("act")] == "");
  CHECK(two.module_of_op[g.FindOp("drop")] == "m.drop");
  Graph viewed = g;
  viewed.ops[g.FindOp("act")].type = "aten.view.default";
  CHECK(FindModuleRegions(viewed, 2).module_of_op[g.FindOp("act")] == "m.act");
  CHECK(IsViewOpType("aten.transpose.int"));
  CHECK(IsViewOpType("reshape"));
  CHECK_FALSE(IsViewOpType("aten.relu.default"));
  CHECK_FALSE(IsViewOpType("aten.viewx.default"));
}

TEST_CASE(
    "sac_policy: per output, in-place ops follow their base, other modules' reads do "
    "not save") {
  Graph g = testing::MustParse(kJoint);
  // Everything kept: a (and r in place on it) and the mask are read by m's
  // backward; y only by head's, whose autograd holds it: recompute.
  std::vector<SacRegion> all = SacPolicies(g, Keep(g, {"a", "y", "k"}), {}, {"m"}, 1);
  REQUIRE(all.size() == 1);
  CHECK(all[0].module == "m");
  CHECK(Policies(g, all[0]) == "fc:S act:S drop:rS ");
  CHECK(all[0].ops[2].save);
  // a dropped: fc and the in-place act recompute (SAC must not rerun act on
  // a cached buffer).
  std::vector<SacRegion> dropped = SacPolicies(g, Keep(g, {"y", "k"}), {}, {"m"}, 1);
  CHECK(Policies(g, dropped[0]) == "fc:r act:r drop:rS ");
  // Kept but read again by nobody: nothing to save.
  Graph g2 = g;
  std::vector<SacRegion> none = SacPolicies(g2, Keep(g2, {}), {}, {"m"}, 1);
  CHECK(Policies(g2, none[0]) == "fc:r act:r drop:rr ");
  CHECK(!none[0].ops[2].save);
  // A module not listed has no region; a listed one without ops, no ops.
  std::vector<SacRegion> two = SacPolicies(g, Keep(g, {"a"}), {}, {"head", "z"}, 1);
  REQUIRE(two.size() == 2);
  CHECK(Policies(g, two[0]) == "head:r ");
  CHECK(two[1].ops.empty());
}

TEST_CASE("sac_policy: a kept tensor read only by its own module's recomputation is saved") {
  Graph g = testing::MustParse(kJoint);
  // act's backward reads the mask instead of r: a is read again only by the
  // rerun of drop (through its view r), m's own recomputation: saved, and
  // act in place on it follows.
  Graph own = g;
  own.ops[g.FindOp("act.bw")].inputs[1] = own.FindTensor("k");
  std::vector<SacRegion> r =
      SacPolicies(own, Keep(own, {"a", "k"}), {own.FindOp("drop")}, {"m"}, 1);
  CHECK(Policies(own, r[0]) == "fc:S act:S drop:rS ");
  // Nothing reads a again: nothing to save.
  std::vector<SacRegion> unread = SacPolicies(own, Keep(own, {"a", "k"}), {}, {"m"}, 1);
  CHECK(Policies(own, unread[0]) == "fc:r act:r drop:rS ");
}

TEST_CASE("sac_policy: a module output read by another module's recomputation is not saved") {
  Graph g = testing::MustParse(kJoint);
  // y leaves m, and a rerun of head (checkpointed too) reads it: head's
  // checkpoint holds y as its input. Saved by m's policy, y would stay in
  // m's SAC cache until m's backward ends whenever m's recomputation stops
  // before drop (mnasnet1_0's layers.8 output, held through layers.8's
  // backward: -0.9% before this rule).
  std::vector<SacRegion> r = SacPolicies(g, Keep(g, {"y", "k"}), {g.FindOp("head")}, {"m"}, 1);
  CHECK(Policies(g, r[0]) == "fc:r act:r drop:rS ");
}

}  // namespace
}  // namespace memplan
