// ONNX import (analyzer/import/onnx_import.h): ModelProtos built in code.
#include "analyzer/import/onnx_import.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "test_util.h"

#ifdef MEMPLAN_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace memplan {
namespace {

using testing::AliasOf;
using testing::OpNamed;
using testing::TensorNamed;

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  auto path = std::filesystem::temp_directory_path() /
              ("memplan_onnx_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

TEST_CASE("onnx: scope from torch node names") {
  CHECK(ScopeFromOnnxNodeName("/layer1/layer1.0/conv1/Conv") == "layer1.0.conv1");
  CHECK(ScopeFromOnnxNodeName("/features/features.2/conv/conv.0/conv.0.0/Conv") ==
        "features.2.conv.0.0");
  CHECK(ScopeFromOnnxNodeName("/fc/Gemm") == "fc");
  CHECK(ScopeFromOnnxNodeName("/Flatten") == "");
  CHECK(ScopeFromOnnxNodeName("Conv_3") == "");
  CHECK(ScopeFromOnnxNodeName("") == "");
}

TEST_CASE("onnx: JSON is told apart by its first byte") {
  CHECK(LooksLikeJson(" \n\t{\"format\": 1}"));
  CHECK(!LooksLikeJson("\x08\x07\x12\x04"));
  CHECK(!LooksLikeJson("   "));
  CHECK(!LooksLikeJson(""));
}

#ifndef MEMPLAN_HAVE_ONNX

TEST_CASE("onnx: a build without ONNX refuses non-JSON input with exit-2 text") {
  CHECK(!OnnxSupported());
  std::string path = WriteTemp("m.onnx", std::string("\x08\x07\x12\x04test", 8));
  JointGraph jg;
  std::string err;
  CHECK(!LoadJointGraph(path, GraphLoadOptions(), &jg, &err));
  CHECK(err == path +
                   ": not a memplan.graph/1 JSON document (it does not start with '{'), and this "
                   "memplan was built without ONNX support; expected a memplan.graph/1 JSON file "
                   "(rebuild with libonnx-dev and libprotobuf-dev installed to read ONNX models)");
  std::remove(path.c_str());
}

#else  // MEMPLAN_HAVE_ONNX

// A dimension: a size or a dim_param name.
struct D {
  D(int64_t v) : value(v) {}      // NOLINT: implicit on purpose
  D(const char* p) : param(p) {}  // NOLINT
  int64_t value = -1;
  std::string param;
};

class Model {
 public:
  Model() {
    m_.set_ir_version(8);
    m_.set_producer_name("memplan-test");
    auto* op = m_.add_opset_import();
    op->set_domain("");
    op->set_version(14);
    m_.mutable_graph()->set_name("g");
  }
  Model& Input(const std::string& name, std::vector<D> dims, int elem = onnx::TensorProto::FLOAT) {
    auto* v = m_.mutable_graph()->add_input();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (const D& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.param.empty())
        dim->set_dim_param(d.param);
      else if (d.value >= 0)
        dim->set_dim_value(d.value);
    }
    return *this;
  }
  onnx::TensorProto* Init(const std::string& name, std::vector<int64_t> dims,
                          int elem = onnx::TensorProto::FLOAT, std::vector<int64_t> ints = {}) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    int64_t numel = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      numel *= d;
    }
    if (elem == onnx::TensorProto::FLOAT)
      for (int64_t k = 0; k < numel; ++k) t->add_float_data(0.5f);
    for (int64_t x : ints) t->add_int64_data(x);
    return t;
  }
  onnx::NodeProto* Node(const std::string& type, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string& name = "") {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  // A Constant node of int64 values (1-D, or a scalar when `scalar`).
  void Const(const std::string& out, std::vector<int64_t> values, bool scalar = false) {
    auto* n = Node("Constant", {}, {out});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  void FloatConst(const std::string& out, float value) {
    auto* n = Node("Constant", {}, {out});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_float_data(value);
  }
  Model& Output(const std::string& name) {
    m_.mutable_graph()->add_output()->set_name(name);
    return *this;
  }
  std::string Bytes() const { return m_.SerializeAsString(); }
  onnx::ModelProto& proto() { return m_; }

 private:
  onnx::ModelProto m_;
};

void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void IntsAttr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

GraphLoadOptions Set(std::vector<std::pair<std::string, int64_t> > s) {
  GraphLoadOptions o;
  o.symbol_overrides = std::move(s);
  return o;
}

Graph MustImport(const Model& m, const GraphLoadOptions& options = {},
                 std::vector<std::string>* warnings = nullptr) {
  Graph g;
  std::vector<std::string> w;
  std::string err;
  bool ok = ImportOnnx(m.Bytes(), "m.onnx", options, &g, &w, &err);
  INFO(err);
  REQUIRE(ok);
  if (warnings) *warnings = w;
  return g;
}

std::string ImportError(const std::string& bytes, const GraphLoadOptions& options = {}) {
  Graph g;
  std::vector<std::string> w;
  std::string err;
  CHECK(!ImportOnnx(bytes, "m.onnx", options, &g, &w, &err));
  return err;
}

std::vector<std::string> OpTypes(const Graph& g) {
  std::vector<std::string> out;
  for (const Op& op : g.ops) out.push_back(op.type.str());
  return out;
}

int64_t BytesOfKind(const Graph& g, TensorKind kind) {
  int64_t n = 0;
  for (const Tensor& t : g.tensors)
    if (t.kind == kind) n += t.bytes;
  return n;
}

// x[batch, 16] -> Gemm(w1, b1) -> Relu -> Gemm(w2, b2) -> logits[batch, 10].
Model Mlp() {
  Model m;
  m.Input("x", {"batch", 16});
  m.Init("fc1.weight", {32, 16});
  m.Init("fc1.bias", {32});
  m.Init("fc2.weight", {10, 32});
  m.Init("fc2.bias", {10});
  IntAttr(m.Node("Gemm", {"x", "fc1.weight", "fc1.bias"}, {"h"}, "/fc1/Gemm"), "transB", 1);
  m.Node("Relu", {"h"}, {"a"}, "/act/Relu");
  IntAttr(m.Node("Gemm", {"a", "fc2.weight", "fc2.bias"}, {"logits"}, "/fc2/Gemm"), "transB", 1);
  m.Output("logits");
  return m;
}

TEST_CASE("onnx: a Gemm MLP becomes linear ops, parameters and a cross-entropy loss") {
  CHECK(OnnxSupported());
  Graph g = MustImport(Mlp(), Set({{"batch", 4}}));
  CHECK(OpTypes(g) == std::vector<std::string>{"linear", "relu", "linear", "cross_entropy"});
  CHECK(BytesOfKind(g, TensorKind::kParameter) == (32 * 16 + 32 + 10 * 32 + 10) * 4);
  const Tensor& x = TensorNamed(g, "x");
  CHECK(x.kind == TensorKind::kInput);
  REQUIRE(x.shape.size() == 2);
  CHECK(x.shape[0].symbol == "batch");
  CHECK(x.shape[0].value == 4);
  CHECK(x.bytes == 4 * 16 * 4);
  CHECK(g.symbols == std::vector<std::pair<std::string, int64_t> >{{"batch", 4}});
  const Op& fc1 = OpNamed(g, "/fc1/Gemm");
  CHECK(testing::Names(g, fc1.inputs) == std::vector<std::string>{"x", "fc1.weight", "fc1.bias"});
  CHECK(fc1.scope == "fc1");
  const Tensor& target = TensorNamed(g, "target");
  CHECK(target.kind == TensorKind::kInput);
  CHECK(target.dtype == DType::kInt64);
  CHECK(target.bytes == 4 * 8);
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.tensors[g.outputs[0]].id == "loss");
  CHECK(TensorNamed(g, "logits").shape[0].value == 4);

  // Through the loader and the lowering, as every subcommand reads it.
  std::string path = WriteTemp("mlp.onnx", Mlp().Bytes());
  JointGraph jg;
  std::string err;
  bool ok = LoadJointGraph(path, Set({{"batch", 8}}), &jg, &err);
  INFO(err);
  REQUIRE(ok);
  CHECK(jg.lowered);
  CHECK(jg.warnings.empty());
  CHECK(TensorNamed(jg.graph, "fc1.weight.grad").grad_of == jg.graph.FindTensor("fc1.weight"));
  CHECK(TensorNamed(jg.graph, "h").bytes == 8 * 32 * 4);
  Analysis a;
  REQUIRE(AnalyzeBaseline(jg.graph, AccumulationMode::kInplace, &a, &err));
  CHECK(a.sim.peak_bytes > BytesOfKind(jg.graph, TensorKind::kParameter));
  std::remove(path.c_str());
}

TEST_CASE("onnx: a scalar float output is the loss itself") {
  Model m;
  m.Input("x", {4, 3});
  m.Init("w", {3, 2});
  m.Node("MatMul", {"x", "w"}, {"y"});
  m.Node("ReduceSum", {"y"}, {"s"});  // keepdims: [1, 1]
  m.Output("s");
  Graph g = MustImport(m);
  CHECK(OpTypes(g) == std::vector<std::string>{"matmul", "sum"});
  CHECK(g.tensors[g.outputs[0]].id == "s");
  CHECK(g.FindTensor("target") < 0);
}

TEST_CASE("onnx: Conv, BatchNormalization in training mode, Relu, pooling, Flatten") {
  Model m;
  m.Input("x", {2, 3, 8, 8});
  m.Init("conv.weight", {4, 3, 3, 3});
  for (const char* n : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"})
    m.Init(n, {4});
  m.Init("fc.weight", {5, 4});
  m.Init("fc.bias", {5});
  auto* conv = m.Node("Conv", {"x", "conv.weight"}, {"c"}, "/conv/Conv");
  IntsAttr(conv, "kernel_shape", {3, 3});
  auto* bn = m.Node("BatchNormalization",
                    {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
                    {"b", "new_mean", "new_var"}, "/bn/BatchNormalization");
  IntAttr(bn, "training_mode", 1);
  m.Node("Relu", {"b"}, {"r"}, "/relu/Relu");
  auto* pool = m.Node("MaxPool", {"r"}, {"p"}, "/pool/MaxPool");
  IntsAttr(pool, "kernel_shape", {2, 2});
  IntsAttr(pool, "strides", {2, 2});
  m.Node("GlobalAveragePool", {"p"}, {"gap"}, "/gap/GlobalAveragePool");
  m.Node("Flatten", {"gap"}, {"flat"}, "/Flatten");
  IntAttr(m.Node("Gemm", {"flat", "fc.weight", "fc.bias"}, {"logits"}, "/fc/Gemm"), "transB", 1);
  m.Output("logits");
  Graph g = MustImport(m);
  CHECK(OpTypes(g) == std::vector<std::string>{"convolution", "batch_norm", "relu", "max_pool2d",
                                               "adaptive_avg_pool2d", "flatten", "linear",
                                               "cross_entropy"});
  CHECK(TensorNamed(g, "c").bytes == 2 * 4 * 6 * 6 * 4);
  CHECK(TensorNamed(g, "p").bytes == 2 * 4 * 3 * 3 * 4);
  CHECK(TensorNamed(g, "bn.running_mean").kind == TensorKind::kBuffer);
  CHECK(TensorNamed(g, "bn.running_var").kind == TensorKind::kBuffer);
  CHECK(TensorNamed(g, "bn.weight").kind == TensorKind::kParameter);
  CHECK(BytesOfKind(g, TensorKind::kParameter) == (4 * 27 + 4 + 4 + 5 * 4 + 5) * 4);
  CHECK(BytesOfKind(g, TensorKind::kBuffer) == 8 * 4);
  const Op& b = OpNamed(g, "/bn/BatchNormalization");
  CHECK(testing::Names(g, b.inputs) ==
        std::vector<std::string>{"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"});
  CHECK(testing::Names(g, b.outputs) == std::vector<std::string>{"b"});  // stats updated in place
  CHECK(g.FindTensor("new_mean") < 0);
  CHECK(AliasOf(g, "flat") == "gap");
  CHECK(TensorNamed(g, "flat").shape.size() == 2);

  // The lowering knows every op: no warning, batch-norm statistics saved.
  std::string path = WriteTemp("cbr.onnx", m.Bytes());
  JointGraph jg;
  std::string err;
  REQUIRE(LoadJointGraph(path, GraphLoadOptions(), &jg, &err));
  CHECK(jg.warnings.empty());
  CHECK(jg.graph.FindTensor("/bn/BatchNormalization.save_mean") >= 0);
  CHECK(jg.graph.FindTensor("/pool/MaxPool.indices") >= 0);
  CHECK(jg.graph.FindTensor("bn.running_mean.grad") < 0);
  std::remove(path.c_str());
}

// x[batch, 4, 6] -> Reshape(x, concat(shape(x)[0], [24])): the shape
// subgraph is evaluated, gets no tensors, and the reshape is a view.
Model ReshapeModel() {
  Model m;
  m.Input("x", {"batch", 4, 6});
  m.Init("w", {24, 5});
  m.Node("Shape", {"x"}, {"shape"}, "/Shape");
  m.Const("zero", {0}, /*scalar=*/true);
  IntAttr(m.Node("Gather", {"shape", "zero"}, {"n"}, "/Gather"), "axis", 0);
  m.Const("axes", {0});
  m.Node("Unsqueeze", {"n", "axes"}, {"n1"}, "/Unsqueeze");
  m.Const("rest", {24});
  IntAttr(m.Node("Concat", {"n1", "rest"}, {"target_shape"}, "/Concat"), "axis", 0);
  m.Node("Reshape", {"x", "target_shape"}, {"flat"}, "/Reshape");
  m.Node("MatMul", {"flat", "w"}, {"y"}, "/fc/MatMul");
  IntsAttr(m.Node("Transpose", {"x"}, {"xt"}, "/Transpose"), "perm", {0, 2, 1});
  m.Node("Reshape", {"xt", "target_shape"}, {"flat_t"}, "/Reshape_1");
  m.Node("MatMul", {"flat_t", "w"}, {"y2"}, "/fc2/MatMul");
  m.Node("Add", {"y", "y2"}, {"logits"}, "/Add");
  m.Output("logits");
  return m;
}

TEST_CASE("onnx: Reshape through a Shape subgraph is a view, evaluated at --set batch") {
  Graph g = MustImport(ReshapeModel(), Set({{"batch", 3}}));
  CHECK(OpTypes(g) == std::vector<std::string>{"reshape", "matmul", "transpose", "reshape",
                                               "matmul", "add", "cross_entropy"});
  for (const char* shape_only : {"shape", "zero", "n", "axes", "n1", "rest", "target_shape"})
    CHECK(g.FindTensor(shape_only) < 0);
  const Tensor& flat = TensorNamed(g, "flat");
  REQUIRE(flat.shape.size() == 2);
  CHECK(flat.shape[0].value == 3);
  CHECK(flat.shape[1].value == 24);
  CHECK(AliasOf(g, "flat") == "x");
  CHECK(AliasOf(g, "xt") == "x");
  CHECK(AliasOf(g, "flat_t") == "");  // a reshape of a transposed view copies, as eager does
  CHECK(OpNamed(g, "/Reshape").inputs.size() == 1);
  CHECK(TensorNamed(g, "y").bytes == 3 * 5 * 4);

  Graph g7 = MustImport(ReshapeModel(), Set({{"batch", 7}}));
  CHECK(TensorNamed(g7, "flat").shape[0].value == 7);
}

TEST_CASE("onnx: symbolic dimensions need --set; unnamed ones are refused") {
  CHECK(ImportError(ReshapeModel().Bytes()) ==
        "m.onnx: /graph/input/0 (name \"x\"): dimension 0 is the symbol \"batch\", which has "
        "no value; expected --set batch=N");
  std::vector<std::string> warnings;
  Graph g = MustImport(ReshapeModel(), Set({{"batch", 3}}), &warnings);
  CHECK(warnings.empty());
  CHECK(g.symbols == std::vector<std::pair<std::string, int64_t> >{{"batch", 3}});
  CHECK(TensorNamed(g, "flat").shape[0].value == 3);
  CHECK(ImportError(ReshapeModel().Bytes(), Set({{"batch", 2}, {"seq", 5}})) ==
        "m.onnx: --set seq: the graph has no symbol \"seq\"; expected one of: batch");
  Model m;
  m.Input("x", {D(-1), 4});
  m.Init("w", {4, 2});
  m.Node("MatMul", {"x", "w"}, {"y"});
  m.Output("y");
  CHECK(ImportError(m.Bytes()) ==
        "m.onnx: /graph/input/0 (name \"x\"): dimension 0 has neither a value nor a name; "
        "expected a fixed size or a named dimension (dim_param) to --set");
}

TEST_CASE("onnx: an op without a rule is lowered conservatively with one warning per type") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("w", {8, 8});
  m.Node("MatMul", {"x", "w"}, {"a"}, "/l1/MatMul");
  m.Node("Sqrt", {"a"}, {"b"}, "/l1/Sqrt");
  m.Node("MatMul", {"b", "w"}, {"c"}, "/l2/MatMul");
  m.Node("Sqrt", {"c"}, {"d"}, "/l2/Sqrt");
  m.Node("Softplus", {"d"}, {"logits"}, "/Softplus");
  m.Output("logits");
  std::string path = WriteTemp("unk.onnx", m.Bytes());
  JointGraph jg;
  std::string err;
  REQUIRE(LoadJointGraph(path, GraphLoadOptions(), &jg, &err));
  // One warning per type, naming the op whose backward runs first.
  CHECK(jg.warnings ==
        std::vector<std::string>{
            "op \"/Softplus\" of unknown type \"Softplus\": lowered conservatively (its backward "
            "saves every input and costs 2x its forward)",
            "op \"/l2/Sqrt\" and 1 more op of unknown type \"Sqrt\": lowered conservatively (its "
            "backward saves every input and costs 2x its forward)"});
  // Conservative: the backward of Sqrt reads its input.
  const Op& bw = OpNamed(jg.graph, "/l2/Sqrt.bw");
  CHECK(std::count(bw.inputs.begin(), bw.inputs.end(), jg.graph.FindTensor("c")) == 1);
  std::remove(path.c_str());
}

TEST_CASE("onnx: torch's erf GELU and x * sigmoid(x) are fused into gelu and silu") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("w", {8, 8});
  m.Node("MatMul", {"x", "w"}, {"h"}, "/fc/MatMul");
  m.FloatConst("sqrt2", 1.4142135f);
  m.FloatConst("one", 1.0f);
  m.FloatConst("half", 0.5f);
  m.Node("Div", {"h", "sqrt2"}, {"d"}, "/act/Div");
  m.Node("Erf", {"d"}, {"e"}, "/act/Erf");
  m.Node("Add", {"e", "one"}, {"a"}, "/act/Add");
  m.Node("Mul", {"h", "a"}, {"g0"}, "/act/Mul");
  m.Node("Mul", {"g0", "half"}, {"g"}, "/act/Mul_1");
  m.Node("Sigmoid", {"g"}, {"s"}, "/silu/Sigmoid");
  m.Node("Mul", {"g", "s"}, {"y"}, "/silu/Mul");
  m.Node("Mul", {"y", "half"}, {"logits"}, "/scale/Mul");  // a scalar operand is dropped
  m.Output("logits");
  Graph g = MustImport(m);
  CHECK(OpTypes(g) == std::vector<std::string>{"matmul", "gelu", "silu", "mul", "cross_entropy"});
  CHECK(testing::Names(g, OpNamed(g, "/act/Mul_1").inputs) == std::vector<std::string>{"h"});
  CHECK(OpNamed(g, "/act/Mul_1").scope == "act");
  CHECK(testing::Names(g, OpNamed(g, "/scale/Mul").inputs) == std::vector<std::string>{"y"});
  for (const char* gone : {"d", "e", "a", "g0", "s", "sqrt2", "half"})
    CHECK(g.FindTensor(gone) < 0);
}

TEST_CASE("onnx: truncated or corrupt bytes are an input error") {
  const std::string expected =
      "m.onnx: not a memplan.graph/1 JSON document (it does not start with '{') nor an ONNX "
      "model (the bytes do not parse as an ONNX ModelProto: truncated or corrupt); expected a "
      "memplan.graph/1 JSON file or an ONNX model";
  std::string bytes = Mlp().Bytes();
  CHECK(ImportError(bytes.substr(0, bytes.size() / 2)) == expected);
  CHECK(ImportError(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11)) == expected);
  CHECK(ImportError("") ==
        "m.onnx: not a memplan.graph/1 JSON document (it does not start with '{') nor an ONNX "
        "model (it parses as a protobuf without an ONNX ir_version); expected a memplan.graph/1 "
        "JSON file or an ONNX model");

  // Through the loader: a .onnx file of garbage, and a JSON file still parsed as JSON.
  std::string path = WriteTemp("bad.onnx", bytes.substr(0, bytes.size() / 2));
  JointGraph jg;
  std::string err;
  CHECK(!LoadJointGraph(path, GraphLoadOptions(), &jg, &err));
  CHECK(err.rfind(path + ": not a memplan.graph/1 JSON document", 0) == 0);
  std::remove(path.c_str());
  path = WriteTemp("bad.json", "[1, 2]");
  CHECK(!LoadJointGraph(path, GraphLoadOptions(), &jg, &err));
  CHECK(err.find("ONNX") == std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("onnx: weights in external data are sized from their dims, never opened") {
  Model m = Mlp();
  for (auto& t : *m.proto().mutable_graph()->mutable_initializer()) {
    t.clear_float_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t.add_external_data();
    e->set_key("location");
    e->set_value("../../no/such/weights.bin");
  }
  Graph g = MustImport(m, Set({{"batch", 4}}));
  CHECK(BytesOfKind(g, TensorKind::kParameter) == (32 * 16 + 32 + 10 * 32 + 10) * 4);
}

TEST_CASE("onnx: an output memplan drops must be unused") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("w", {8, 8});
  m.Node("MatMul", {"x", "w"}, {"h"});
  m.Node("Dropout", {"h"}, {"y", "mask"}, "/drop/Dropout");
  m.Node("Cast", {"mask"}, {"mf"}, "/Cast");
  IntAttr(m.proto().mutable_graph()->mutable_node(2), "to", onnx::TensorProto::FLOAT);
  m.Node("Mul", {"y", "mf"}, {"logits"});
  m.Output("logits");
  CHECK(ImportError(m.Bytes()) ==
        "m.onnx: /graph/node/1 (name \"/drop/Dropout\"): output 1 (\"mask\") of Dropout is read; "
        "expected it unused (memplan maps Dropout to dropout, which has no such output)");
}

TEST_CASE("onnx: a tensor inference cannot size is named") {
  Model m;
  m.Input("x", {2, 8});
  m.Node("NoSuchOp", {"x"}, {"y"}, "/custom");
  m.Output("y");
  CHECK(ImportError(m.Bytes()) ==
        "m.onnx: /graph/node/0 (name \"/custom\"): tensor \"y\" has no element type after shape "
        "inference; expected a concrete shape (name the model's dynamic dimensions and --set "
        "them, or export with fixed shapes)");
}

TEST_CASE("onnx: a crash in ONNX's shape inference is an input error, not memplan's crash") {
  // libonnx 1.12 reads past a Conv's input dims when the weight has more
  // (found by fuzz_onnx): inference runs in a child process.
  Model m;
  m.Input("x", {1, 3, 8, 8});
  m.Init("w", {4, 3, 3, 3, 1, 1});
  m.Node("Conv", {"x", "w"}, {"y"}, "/conv/Conv");
  m.Output("y");
  CHECK(ImportError(m.Bytes()) ==
        "m.onnx: ONNX shape inference crashed on this model (signal 11); expected a "
        "well-formed model (one that onnx.checker.check_model and "
        "onnx.shape_inference.infer_shapes accept)");
  // The same import still works on a well-formed model afterwards.
  Graph g = MustImport(Mlp(), Set({{"batch", 4}}));
  CHECK(BytesOfKind(g, TensorKind::kParameter) == (32 * 16 + 32 + 10 * 32 + 10) * 4);
}

TEST_CASE("onnx: a name that is not UTF-8 is an input error (it would not fit in JSON)") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("w", {8, 8});
  m.Node("MatMul", {"x", "w"}, {"y"}, "/fc\xff/MatMul");
  m.Output("y");
  CHECK(ImportError(m.Bytes()) ==
        "m.onnx: /graph/node/0: a name that is not UTF-8 text; expected UTF-8");
  Model in;
  in.Input("x\xc0\xaf", {2, 8});
  in.Init("w", {8, 8});
  in.Node("MatMul", {"x\xc0\xaf", "w"}, {"y"});
  in.Output("y");
  CHECK(ImportError(in.Bytes()) ==
        "m.onnx: /graph/input/0: a name that is not UTF-8 text; expected UTF-8");
}

TEST_CASE("onnx: an empty op_type or tensor name is an input error (memplan needs names)") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("w", {8, 8});
  m.Node("MatMul", {"x", "w"}, {"h"}, "/fc/MatMul");
  m.Node("", {"h"}, {"y"}, "/Flatten");
  m.Output("y");
  CHECK(ImportError(m.Bytes()) ==
        "m.onnx: /graph/node/1 (name \"/Flatten\"): an empty op_type; expected an ONNX "
        "operator type");
  Model e;
  e.Input("", {2, 8});
  e.Init("w", {8, 8});
  e.Node("MatMul", {"", "w"}, {"y"});
  e.Output("y");
  CHECK(ImportError(e.Bytes()) == "m.onnx: /graph/input/0: an empty name; expected a name");
}

TEST_CASE("onnx: an output too large to count is an input error, not an overflow") {
  Model m;
  m.Input("x", {int64_t{1} << 40, int64_t{1} << 40});
  m.Node("Relu", {"x"}, {"y"}, "/Relu");
  m.Output("y");
  CHECK(ImportError(m.Bytes()) ==
        "m.onnx: /graph/output/0 (name \"y\"): more than 2^63-1 elements; expected a tensor "
        "whose size fits in 64 bits");
}

TEST_CASE("onnx: a node with more or fewer inputs than its schema allows is an input error") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("w", {8, 8});
  m.Node("MatMul", {"x", "w"}, {"h"}, "/fc/MatMul");
  m.Node("Gather", {"h"}, {"y"}, "/Gather");
  m.Output("y");
  CHECK(ImportError(m.Bytes()) ==
        "m.onnx: /graph/node/1 (name \"/Gather\"): Gather with 1 inputs; expected 2 (ONNX "
        "opset 14)");
  Model c;
  c.Input("x", {2, 8});
  c.Init("w", {8, 8});
  c.Node("MatMul", {"x", "w"}, {"h"}, "/fc/MatMul");
  c.Node("Concat", {}, {"y"}, "/Concat");
  c.Output("y");
  CHECK(ImportError(c.Bytes()).find("Concat with 0 inputs; expected at least 1") !=
        std::string::npos);
}

#endif  // MEMPLAN_HAVE_ONNX

}  // namespace
}  // namespace memplan
