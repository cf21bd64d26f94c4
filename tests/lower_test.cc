#include "analyzer/lower/lower.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "analyzer/ir/op_table.h"
#include "test_util.h"

namespace memplan {
namespace {

using testing::AliasOf;
using testing::MustLower;
using testing::Names;
using testing::OpNamed;
using testing::TensorNamed;
using Strings = std::vector<std::string>;

std::string Doc(const std::string& tensors, const std::string& ops,
                const std::string& outputs = R"(["loss"])") {
  return R"({"format": "memplan.graph/1", "name": "t", "symbols": {"B": 4},
             "tensors": [)" +
         tensors + R"(], "ops": [)" + ops + R"(], "outputs": )" + outputs + "}";
}

// "id:[dims]:dtype:kind" is too clever; spell tensors out instead.
std::string T(const std::string& id, const std::string& shape, const std::string& kind = "",
              const std::string& dtype = "float32", const std::string& extra = "") {
  std::string s = R"({"id": ")" + id + R"(", "shape": )" + shape + R"(, "dtype": ")" + dtype + "\"";
  if (!kind.empty()) s += R"(, "kind": ")" + kind + "\"";
  return s + extra + "}";
}

std::string O(const std::string& id, const std::string& type, const std::string& inputs,
              const std::string& outputs, const std::string& extra = "") {
  return R"({"id": ")" + id + R"(", "type": ")" + type + R"(", "inputs": )" + inputs +
         R"(, "outputs": )" + outputs + extra + "}";
}

const std::string kLoss = T("loss", "[]");

TEST_CASE("lower: linear saves the input only when the weight needs a gradient") {
  Graph g =
      MustLower(Doc(T("x", "[\"B\", 8]", "input") + "," + T("w", "[16, 8]", "parameter") + "," +
                        T("b", "[16]", "parameter") + "," + T("y", "[\"B\", 16]") + "," + kLoss,
                    O("fc", "linear", R"(["x","w","b"])", R"(["y"])") + "," +
                        O("l", "mean", R"(["y"])", R"(["loss"])")));
  CHECK(g.joint);
  const Op& bw = OpNamed(g, "fc.bw");
  CHECK(bw.phase == Phase::kBackward);
  CHECK(bw.type == "linear_backward");
  // x is saved for dW; w is resident and not needed since x needs no gradient.
  CHECK(Names(g, bw.inputs) == Strings{"y.grad", "x"});
  CHECK(Names(g, bw.outputs) == Strings{"w.grad", "b.grad"});
  CHECK(TensorNamed(g, "w.grad").grad_of == g.FindTensor("w"));
  CHECK(TensorNamed(g, "w.grad").kind == TensorKind::kGradient);
  CHECK(g.FindTensor("x.grad") < 0);
  // Order: forward, seed, then backward in reverse.
  CHECK(g.ops[2].id == "loss.grad.seed");
  CHECK(g.ops[3].id == "l.bw");
  CHECK(g.ops[4].id == "fc.bw");
  // Costs: forward estimated 2*B*16*8 + bias, backward twice that.
  CHECK(OpNamed(g, "fc").flops == doctest::Approx(2.0 * 4 * 16 * 8 + 4 * 16));
  CHECK(bw.flops == doctest::Approx(2.0 * OpNamed(g, "fc").flops));
}

TEST_CASE("lower: an activation that needs a gradient makes linear save both operands") {
  Graph g = MustLower(Doc(T("x", "[4, 8]", "input") + "," + T("w1", "[8, 8]", "parameter") + "," +
                              T("w2", "[8, 8]", "parameter") + "," + T("h", "[4, 8]") + "," +
                              T("y", "[4, 8]") + "," + kLoss,
                          O("fc1", "linear", R"(["x","w1"])", R"(["h"])") + "," +
                              O("fc2", "linear", R"(["h","w2"])", R"(["y"])") + "," +
                              O("l", "sum", R"(["y"])", R"(["loss"])")));
  CHECK(Names(g, OpNamed(g, "fc2.bw").inputs) == Strings{"y.grad", "h", "w2"});
  CHECK(Names(g, OpNamed(g, "fc2.bw").outputs) == Strings{"h.grad", "w2.grad"});
  CHECK(Names(g, OpNamed(g, "fc1.bw").inputs) == Strings{"h.grad", "x"});
  // sum's gradient is an expanded view of the scalar gradient.
  CHECK(AliasOf(g, "y.grad") == "loss.grad");
}

TEST_CASE("lower: elementwise activations save what their derivative needs") {
  const std::string tensors =
      T("w", "[4, 8]", "parameter") + "," + T("h", "[4, 8]") + "," + T("y", "[4, 8]") + "," + kLoss;
  auto bw_inputs = [&](const std::string& type) {
    Graph g = MustLower(Doc(tensors, O("a", type, R"(["w"])", R"(["h"])") + "," +
                                         O("b", "relu", R"(["h"])", R"(["y"])") + "," +
                                         O("l", "mean", R"(["y"])", R"(["loss"])")));
    return Names(g, OpNamed(g, "a.bw").inputs);
  };
  CHECK(bw_inputs("relu") == Strings{"h.grad", "h"});     // output
  CHECK(bw_inputs("sigmoid") == Strings{"h.grad", "h"});  // output
  CHECK(bw_inputs("tanh") == Strings{"h.grad", "h"});     // output
  CHECK(bw_inputs("softmax") == Strings{"h.grad", "h"});  // output
  CHECK(bw_inputs("log_softmax") == Strings{"h.grad", "h"});
  CHECK(bw_inputs("gelu") == Strings{"h.grad", "w"});  // input
  CHECK(bw_inputs("silu") == Strings{"h.grad", "w"});  // input
  CHECK(bw_inputs("aten.gelu.default") == Strings{"h.grad", "w"});
}

TEST_CASE("lower: add passes the gradient through as views unless it broadcasts") {
  Graph g = MustLower(Doc(T("a", "[4, 8]", "parameter") + "," + T("b", "[4, 8]", "parameter") +
                              "," + T("bias", "[8]", "parameter") + "," + T("s", "[4, 8]") + "," +
                              T("y", "[4, 8]") + "," + kLoss,
                          O("add1", "add", R"(["a","b"])", R"(["s"])") + "," +
                              O("add2", "add", R"(["s","bias"])", R"(["y"])") + "," +
                              O("l", "mean", R"(["y"])", R"(["loss"])")));
  CHECK(Names(g, OpNamed(g, "add2.bw").inputs) == Strings{"y.grad"});
  CHECK(AliasOf(g, "s.grad") == "y.grad");
  CHECK(AliasOf(g, "bias.grad") == "");  // a reduction: a new buffer
  CHECK(AliasOf(g, "a.grad") == "s.grad");
  CHECK(AliasOf(g, "b.grad") == "s.grad");
  CHECK(TensorNamed(g, "a.grad").base == g.FindTensor("y.grad"));
  // sub: the second operand's gradient is negated, a new buffer.
  Graph s = MustLower(Doc(
      T("a", "[4]", "parameter") + "," + T("b", "[4]", "parameter") + "," + T("y", "[4]") + "," +
          kLoss,
      O("d", "sub", R"(["a","b"])", R"(["y"])") + "," + O("l", "mean", R"(["y"])", R"(["loss"])")));
  CHECK(AliasOf(s, "a.grad") == "y.grad");
  CHECK(AliasOf(s, "b.grad") == "");
}

TEST_CASE("lower: mul and div save the operands the other gradient needs") {
  const std::string tensors =
      T("x", "[4]", "input") + "," + T("w", "[4]", "parameter") + "," + T("y", "[4]") + "," + kLoss;
  auto lowered = [&](const std::string& type, const std::string& inputs) {
    return MustLower(Doc(tensors, O("m", type, inputs, R"(["y"])") + "," +
                                      O("l", "mean", R"(["y"])", R"(["loss"])")));
  };
  Graph m = lowered("mul", R"(["x","w"])");
  CHECK(Names(m, OpNamed(m, "m.bw").inputs) == Strings{"y.grad", "x"});  // dw = g * x
  Graph d1 = lowered("div", R"(["w","x"])");                             // dw = g / x
  CHECK(Names(d1, OpNamed(d1, "m.bw").inputs) == Strings{"y.grad", "x"});
  Graph d2 = lowered("div", R"(["x","w"])");  // dw = -g * x / w^2
  CHECK(Names(d2, OpNamed(d2, "m.bw").inputs) == Strings{"y.grad", "x", "w"});
}

TEST_CASE("lower: normalizations save the input and their statistics") {
  Graph g = MustLower(Doc(T("x", "[\"B\", 16, 32]", "input") + "," + T("w", "[32]", "parameter") +
                              "," + T("b", "[32]", "parameter") + "," + T("y", "[\"B\", 16, 32]") +
                              "," + T("z", "[\"B\", 16, 32]") + "," + kLoss,
                          O("ln", "layer_norm", R"(["x","w","b"])", R"(["y"])") + "," +
                              O("rms", "rms_norm", R"(["y","w"])", R"(["z"])") + "," +
                              O("l", "mean", R"(["z"])", R"(["loss"])")));
  CHECK(Names(g, OpNamed(g, "ln").outputs) == Strings{"y", "ln.mean", "ln.rstd"});
  const Tensor& mean = TensorNamed(g, "ln.mean");
  CHECK(mean.shape.size() == 2);
  CHECK(mean.shape[0].symbol == "B");
  CHECK(mean.bytes == 4 * 16 * 4);
  CHECK(mean.kind == TensorKind::kActivation);
  CHECK(Names(g, OpNamed(g, "ln.bw").inputs) == Strings{"y.grad", "x", "w", "ln.mean", "ln.rstd"});
  CHECK(Names(g, OpNamed(g, "ln.bw").outputs) == Strings{"w.grad.c1", "b.grad"});
  CHECK(Names(g, OpNamed(g, "rms.bw").inputs) == Strings{"z.grad", "y", "w", "rms.rstd"});

  Graph bn =
      MustLower(Doc(T("x", "[\"B\", 3, 8, 8]", "input") + "," + T("w", "[3]", "parameter") + "," +
                        T("b", "[3]", "parameter") + "," + T("rm", "[3]", "buffer") + "," +
                        T("rv", "[3]", "buffer") + "," + T("y", "[\"B\", 3, 8, 8]") + "," + kLoss,
                    O("bn", "batch_norm", R"(["x","w","b","rm","rv"])", R"(["y"])") + "," +
                        O("l", "mean", R"(["y"])", R"(["loss"])")));
  CHECK(Names(bn, OpNamed(bn, "bn.bw").inputs) ==
        Strings{"y.grad", "x", "w", "bn.save_mean", "bn.save_invstd"});
  CHECK(TensorNamed(bn, "bn.save_mean").bytes == 3 * 4);
  CHECK(Names(bn, OpNamed(bn, "bn.bw").outputs) == Strings{"w.grad", "b.grad"});
}

TEST_CASE("lower: dropout saves a boolean mask, max_pool2d its indices") {
  Graph g = MustLower(Doc(T("w", "[2, 3, 8, 8]", "parameter") + "," + T("d", "[2, 3, 8, 8]") + "," +
                              T("p", "[2, 3, 4, 4]") + "," + kLoss,
                          O("drop", "dropout", R"(["w"])", R"(["d"])") + "," +
                              O("pool", "max_pool2d", R"(["d"])", R"(["p"])") + "," +
                              O("l", "mean", R"(["p"])", R"(["loss"])")));
  CHECK(TensorNamed(g, "drop.mask").dtype == DType::kBool);
  CHECK(TensorNamed(g, "drop.mask").bytes == 2 * 3 * 8 * 8);
  CHECK(Names(g, OpNamed(g, "drop.bw").inputs) == Strings{"d.grad", "drop.mask"});
  CHECK(TensorNamed(g, "pool.indices").dtype == DType::kInt64);
  CHECK(TensorNamed(g, "pool.indices").bytes == 2 * 3 * 4 * 4 * 8);
  CHECK(Names(g, OpNamed(g, "pool.bw").inputs) == Strings{"p.grad", "d", "pool.indices"});
}

TEST_CASE("lower: attention saves q, k, v, the output and the logsumexp") {
  Graph g = MustLower(
      Doc(T("q", "[2, 4, 16, 8]", "parameter") + "," + T("k", "[2, 4, 16, 8]", "parameter") + "," +
              T("v", "[2, 4, 16, 8]", "parameter") + "," + T("o", "[2, 4, 16, 8]") + "," + kLoss,
          O("attn", "scaled_dot_product_attention", R"(["q","k","v"])", R"(["o"])") + "," +
              O("l", "mean", R"(["o"])", R"(["loss"])")));
  const Op& bw = OpNamed(g, "attn.bw");
  CHECK(Names(g, bw.inputs) == Strings{"o.grad", "q", "k", "v", "o", "attn.logsumexp"});
  CHECK(TensorNamed(g, "attn.logsumexp").bytes == 2 * 4 * 16 * 4);
  CHECK(Names(g, bw.outputs) == Strings{"q.grad", "k.grad", "v.grad"});
  CHECK(bw.flops == doctest::Approx(2.5 * OpNamed(g, "attn").flops));
}

TEST_CASE("lower: embedding and cross_entropy give no gradient to indices and targets") {
  Graph g = MustLower(
      Doc(T("wte", "[100, 8]", "parameter") + "," + T("idx", "[4]", "input", "int64") + "," +
              T("tgt", "[4]", "input", "int64") + "," + T("e", "[4, 8]") + "," + kLoss,
          O("emb", "embedding", R"(["wte","idx"])", R"(["e"])") + "," +
              O("ce", "cross_entropy", R"(["e","tgt"])", R"(["loss"])")));
  CHECK(Names(g, OpNamed(g, "ce").outputs) == Strings{"loss", "ce.log_probs"});
  CHECK(Names(g, OpNamed(g, "ce.bw").inputs) == Strings{"loss.grad", "tgt", "ce.log_probs"});
  CHECK(Names(g, OpNamed(g, "ce.bw").outputs) == Strings{"e.grad"});
  CHECK(Names(g, OpNamed(g, "emb.bw").inputs) == Strings{"e.grad", "idx"});
  CHECK(Names(g, OpNamed(g, "emb.bw").outputs) == Strings{"wte.grad"});
  CHECK(g.FindTensor("idx.grad") < 0);
  CHECK(g.FindTensor("tgt.grad") < 0);
}

TEST_CASE("lower: views, cat, split, expand and slice") {
  Graph g =
      MustLower(Doc(T("a", "[4, 6]", "parameter") + "," + T("b", "[4, 2]", "parameter") + "," +
                        T("v", "[24]", "", "float32", R"(, "alias_of": "a")") + "," +
                        T("c", "[4, 8]") + "," + T("p0", "[4, 4]") + "," + T("p1", "[4, 4]") + "," +
                        T("e", "[2, 4, 4]") + "," + T("sl", "[2, 4]") + "," + T("y", "[2, 4, 4]") +
                        "," + T("z", "[2, 4]") + "," + T("u", "[2, 4]") + "," + kLoss,
                    O("view", "view", R"(["a"])", R"(["v"])") + "," +
                        O("cat", "cat", R"(["a","b"])", R"(["c"])") + "," +
                        O("split", "split", R"(["c"])", R"(["p0","p1"])") + "," +
                        O("expand", "expand", R"(["p0"])", R"(["e"])") + "," +
                        O("slice", "slice", R"(["p1"])", R"(["sl"])") + "," +
                        O("mul", "mul", R"(["e","e"])", R"(["y"])") + "," +
                        O("sum2", "sum", R"(["y"])", R"(["z"])") + "," +
                        O("add", "add", R"(["z","sl"])", R"(["u"])") + "," +
                        O("l", "mean", R"(["u"])", R"(["loss"])")));
  // The unread view "v" carries no gradient, so view has no backward.
  CHECK(g.FindOp("view.bw") < 0);
  CHECK(AliasOf(g, "a.grad") == "c.grad");  // cat: slices of the output gradient
  CHECK(AliasOf(g, "b.grad") == "c.grad");
  CHECK(AliasOf(g, "c.grad") == "");  // split: a new concatenated buffer
  CHECK(Names(g, OpNamed(g, "split.bw").inputs) == Strings{"p0.grad", "p1.grad"});
  CHECK(AliasOf(g, "p0.grad") == "");  // expand: a reduction
  CHECK(AliasOf(g, "p1.grad") == "");  // slice: an input-sized buffer
  // mul(e, e): two contributions to e from one op, summed by one accumulate op.
  CHECK(Names(g, OpNamed(g, "mul.bw").outputs) == Strings{"e.grad.c0", "e.grad.c1"});
  CHECK(Names(g, OpNamed(g, "e.grad.acc1").inputs) == Strings{"e.grad.c0", "e.grad.c1"});
}

TEST_CASE("lower: a tensor read k times gets k contributions and k-1 accumulate ops") {
  Graph g = MustLower(Doc(T("w", "[8]", "parameter") + "," + T("h", "[8]") + "," + T("y1", "[8]") +
                              "," + T("y2", "[8]") + "," + T("y3", "[8]") + "," + T("s", "[8]") +
                              "," + T("s2", "[8]") + "," + kLoss,
                          O("f", "tanh", R"(["w"])", R"(["h"])") + "," +
                              O("g1", "relu", R"(["h"])", R"(["y1"])") + "," +
                              O("g2", "gelu", R"(["h"])", R"(["y2"])") + "," +
                              O("g3", "sigmoid", R"(["h"])", R"(["y3"])") + "," +
                              O("a1", "add", R"(["y1","y2"])", R"(["s"])") + "," +
                              O("a2", "add", R"(["s","y3"])", R"(["s2"])") + "," +
                              O("l", "mean", R"(["s2"])", R"(["loss"])")));
  // Contributions arrive in reverse forward order: g3, g2, g1.
  CHECK(Names(g, OpNamed(g, "g3.bw").outputs) == Strings{"h.grad.c0"});
  CHECK(Names(g, OpNamed(g, "g2.bw").outputs) == Strings{"h.grad.c1"});
  CHECK(Names(g, OpNamed(g, "g1.bw").outputs) == Strings{"h.grad.c2"});
  const Op& acc1 = OpNamed(g, "h.grad.acc1");
  const Op& acc2 = OpNamed(g, "h.grad.acc2");
  CHECK(acc1.accumulate);
  CHECK(acc2.accumulate);
  CHECK(acc1.type == "add");
  CHECK(Names(g, acc1.inputs) == Strings{"h.grad.c0", "h.grad.c1"});
  CHECK(Names(g, acc1.outputs) == Strings{"h.grad.s1"});
  CHECK(Names(g, acc2.inputs) == Strings{"h.grad.s1", "h.grad.c2"});
  CHECK(Names(g, acc2.outputs) == Strings{"h.grad"});
  CHECK(TensorNamed(g, "h.grad").grad_of == g.FindTensor("h"));
  CHECK(TensorNamed(g, "h.grad.c0").grad_of == -1);
  // Each accumulate op runs right after the contribution it adds.
  CHECK(g.FindOp("h.grad.acc1") == g.FindOp("g2.bw") + 1);
  CHECK(g.FindOp("h.grad.acc2") == g.FindOp("g1.bw") + 1);
  CHECK(g.FindOp("f.bw") > g.FindOp("h.grad.acc2"));
}

TEST_CASE("lower: ops off the gradient path get no backward") {
  Graph g = MustLower(Doc(
      T("x", "[8]", "input") + "," + T("w", "[8]", "parameter") + "," + T("n", "[8]") + "," +
          T("h", "[8]") + "," + T("y", "[8]") + "," + kLoss,
      O("noise", "relu", R"(["x"])", R"(["n"])") + "," + O("f", "mul", R"(["n","w"])", R"(["h"])") +
          "," + O("side", "tanh", R"(["h"])", R"(["y"])") + "," +
          O("l", "mean", R"(["h"])", R"(["loss"])")));
  CHECK(g.FindOp("noise.bw") < 0);  // no parameter upstream
  CHECK(g.FindOp("side.bw") < 0);   // its output does not reach the loss
  CHECK(g.FindOp("f.bw") >= 0);
  CHECK(Names(g, OpNamed(g, "f.bw").outputs) == Strings{"w.grad"});
}

TEST_CASE("lower: unknown op types are lowered conservatively with a warning naming the op") {
  std::vector<std::string> warnings;
  Graph g = MustLower(Doc(T("w", "[8]", "parameter") + "," + T("x", "[8]", "input") + "," +
                              T("h", "[8]") + "," + T("h2", "[8]") + "," + kLoss,
                          O("f", "my_fancy_op", R"(["x","w"])", R"(["h"])") + "," +
                              O("f2", "my_fancy_op", R"(["h","x"])", R"(["h2"])") + "," +
                              O("l", "mean", R"(["h2"])", R"(["loss"])")),
                      &warnings);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "op \"f2\" and 1 more op of unknown type \"my_fancy_op\": lowered conservatively (its "
        "backward saves every input and costs 2x its forward)");
  CHECK(Names(g, OpNamed(g, "f.bw").inputs) == Strings{"h.grad", "x", "w"});
  CHECK(OpNamed(g, "f.bw").flops == doctest::Approx(2.0 * OpNamed(g, "f").flops));
}

TEST_CASE("lower: explicit saves override the table; no parameter means an empty backward") {
  Graph g = MustLower(Doc(T("w", "[8]", "parameter") + "," + T("h", "[8]") + "," + kLoss,
                          O("f", "gelu", R"(["w"])", R"(["h"])", R"(, "saves": ["h"])") + "," +
                              O("l", "mean", R"(["h"])", R"(["loss"])")));
  CHECK(Names(g, OpNamed(g, "f.bw").inputs) == Strings{"h.grad", "h"});

  std::vector<std::string> warnings;
  Graph none = MustLower(
      Doc(T("x", "[8]", "input") + "," + T("h", "[8]") + "," + kLoss,
          O("f", "relu", R"(["x"])", R"(["h"])") + "," + O("l", "mean", R"(["h"])", R"(["loss"])")),
      &warnings);
  CHECK(none.ops.size() == 2);
  CHECK(warnings == Strings{"no graph output depends on a parameter; the backward is empty"});
}

TEST_CASE("lower: the joint graph round-trips through JSON") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json"}) {
    CAPTURE(name);
    Graph fwd;
    std::string err;
    REQUIRE(LoadGraphFile(testing::ExamplePath(name), GraphLoadOptions(), &fwd, &err));
    Graph joint;
    std::vector<std::string> warnings;
    REQUIRE(LowerToJoint(fwd, &joint, &warnings, &err));
    CHECK(warnings.empty());
    Graph back = testing::MustParse(GraphToJson(joint));
    CHECK(back.joint);
    CHECK(back.ops.size() == joint.ops.size());
    CHECK(back.tensors.size() == joint.tensors.size());
    CHECK(GraphToJson(back) == GraphToJson(joint));
    // Every gradient of a parameter exists.
    for (size_t t = 0; t < fwd.tensors.size(); ++t)
      if (fwd.tensors[t].kind == TensorKind::kParameter)
        CHECK(joint.FindTensor(fwd.tensors[t].id + ".grad") >= 0);
  }
}

TEST_CASE("lower: a joint graph is refused") {
  Graph g = testing::MustParse(GraphToJson(MustLower(
      Doc(T("w", "[8]", "parameter") + "," + kLoss, O("l", "mean", R"(["w"])", R"(["loss"])")))));
  Graph joint;
  std::vector<std::string> warnings;
  std::string err;
  CHECK_FALSE(LowerToJoint(g, &joint, &warnings, &err));
  CHECK(err == "graph already has a backward (phase \"backward\"); nothing to lower");
}

TEST_CASE("op table: canonical names strip the aten namespace and overload") {
  CHECK(CanonicalOpType("aten.convolution.default") == "convolution");
  CHECK(CanonicalOpType("aten::addmm") == "addmm");
  CHECK(CanonicalOpType("aten.add.Tensor") == "add");
  CHECK(CanonicalOpType("relu") == "relu");
  for (const char* name : {"linear",
                           "matmul",
                           "mm",
                           "bmm",
                           "addmm",
                           "convolution",
                           "relu",
                           "gelu",
                           "silu",
                           "tanh",
                           "sigmoid",
                           "add",
                           "sub",
                           "mul",
                           "div",
                           "softmax",
                           "log_softmax",
                           "layer_norm",
                           "batch_norm",
                           "group_norm",
                           "rms_norm",
                           "dropout",
                           "embedding",
                           "max_pool2d",
                           "avg_pool2d",
                           "adaptive_avg_pool2d",
                           "cat",
                           "split",
                           "reshape",
                           "view",
                           "transpose",
                           "permute",
                           "expand",
                           "slice",
                           "scaled_dot_product_attention",
                           "cross_entropy",
                           "mse_loss",
                           "sum",
                           "mean",
                           "hardtanh",
                           "leaky_relu"}) {
    CAPTURE(name);
    std::vector<std::string> known = KnownOpTypes();
    CHECK(std::find(known.begin(), known.end(), name) != known.end());
  }
}

}  // namespace
}  // namespace memplan

namespace memplan {
namespace {

TEST_CASE("lower: optimizer ops move after the backward and keep their ids") {
  Graph g = testing::MustLower(R"({"format": "memplan.graph/1", "tensors": [
      {"id": "w", "shape": [8], "dtype": "float32", "kind": "parameter"},
      {"id": "h", "shape": [8], "dtype": "float32"},
      {"id": "loss", "shape": [], "dtype": "float32"},
      {"id": "step", "shape": [8], "dtype": "float32", "kind": "temporary"}],
    "ops": [
      {"id": "f", "type": "tanh", "inputs": ["w"], "outputs": ["h"]},
      {"id": "sgd", "type": "sgd", "inputs": ["w"], "outputs": ["step"], "phase": "optimizer"},
      {"id": "l", "type": "mean", "inputs": ["h"], "outputs": ["loss"]}],
    "outputs": ["loss"]})");
  REQUIRE(g.ops.size() == 6);
  CHECK(g.ops.back().id == "sgd");
  CHECK(g.FindOp("sgd") == 5);
  CHECK(g.FindOp("f") == 0);
  CHECK(g.FindOp("l") == 1);
  CHECK(g.FindOp("f.bw") == 4);
  for (size_t o = 0; o < g.ops.size(); ++o) CHECK(g.FindOp(g.ops[o].id) == int(o));
}

TEST_CASE("lower: generated names that are taken get a ~N suffix") {
  Graph g = testing::MustLower(R"({"format": "memplan.graph/1", "tensors": [
      {"id": "w", "shape": [8], "dtype": "float32", "kind": "parameter"},
      {"id": "w.grad", "shape": [8], "dtype": "float32", "kind": "input"},
      {"id": "h", "shape": [8], "dtype": "float32"},
      {"id": "loss", "shape": [], "dtype": "float32"}],
    "ops": [
      {"id": "f", "type": "mul", "inputs": ["w", "w.grad"], "outputs": ["h"]},
      {"id": "f.bw", "type": "relu", "inputs": ["h"], "outputs": ["loss"]}],
    "outputs": ["loss"]})");
  // The gradient of w and the backward of f need names already in use.
  CHECK(g.FindTensor("w.grad~1") >= 0);
  CHECK(g.tensors[g.FindTensor("w.grad~1")].grad_of == g.FindTensor("w"));
  CHECK(g.FindOp("f.bw~1") >= 0);
  CHECK(g.ops[g.FindOp("f.bw~1")].type == "mul_backward");
  for (size_t t = 0; t < g.tensors.size(); ++t) CHECK(g.FindTensor(g.tensors[t].id) == int(t));
}

}  // namespace
}  // namespace memplan
