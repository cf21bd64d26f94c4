#include "analyzer/import/onnx_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "analyzer/base/json_scan.h"
#include "analyzer/base/json_util.h"

#ifdef MEMPLAN_HAVE_ONNX
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#endif

namespace memplan {

bool LooksLikeJson(std::string_view bytes) {
  for (char c : bytes) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

std::string ScopeFromOnnxNodeName(std::string_view name) {
  if (name.empty() || name[0] != '/') return "";
  std::vector<std::string_view> parts;
  size_t pos = 1;
  while (pos <= name.size()) {
    size_t next = name.find('/', pos);
    if (next == std::string_view::npos) next = name.size();
    parts.push_back(name.substr(pos, next - pos));
    pos = next + 1;
  }
  if (!parts.empty()) parts.pop_back();  // the node's own name ("Conv", "Relu_1")
  // torch writes a level as "PARENT.CHILD" when its parent level is PARENT
  // ("layer1" then "layer1.0"; "conv" then "conv.0"), else as "CHILD".
  std::string scope;
  std::string_view prev;
  for (std::string_view p : parts) {
    if (p.empty()) continue;
    std::string_view child = p;
    if (!prev.empty() && p.size() > prev.size() && p.substr(0, prev.size()) == prev &&
        p[prev.size()] == '.')
      child = p.substr(prev.size() + 1);
    scope += (scope.empty() ? "" : ".") + std::string(child);
    prev = p;
  }
  return scope;
}

#ifndef MEMPLAN_HAVE_ONNX

bool OnnxSupported() { return false; }

bool ImportOnnx(std::string_view bytes, const std::string& file, const GraphLoadOptions& options,
                Graph* graph, std::vector<std::string>* warnings, std::string* err) {
  *err = fmt::format(
      "{}: not a memplan.graph/1 JSON document (it does not start with '{{'), and this memplan "
      "was built without ONNX support; expected a memplan.graph/1 JSON file (rebuild with "
      "libonnx-dev and libprotobuf-dev installed to read ONNX models)",
      file);
  return false;
}

#else  // MEMPLAN_HAVE_ONNX

bool OnnxSupported() { return true; }

namespace {

using json_util::Quote;
using onnx::NodeProto;
using onnx::TensorProto;

// Largest static integer tensor evaluated here (shape computations are tiny).
constexpr int64_t kMaxStaticNumel = 4096;

bool DTypeOf(int32_t elem, DType* out) {
  switch (elem) {
    case TensorProto::FLOAT:
      *out = DType::kFloat32;
      return true;
    case TensorProto::DOUBLE:
      *out = DType::kFloat64;
      return true;
    case TensorProto::FLOAT16:
      *out = DType::kFloat16;
      return true;
    case TensorProto::BFLOAT16:
      *out = DType::kBFloat16;
      return true;
    case TensorProto::INT64:
      *out = DType::kInt64;
      return true;
    case TensorProto::INT32:
      *out = DType::kInt32;
      return true;
    case TensorProto::INT16:
      *out = DType::kInt16;
      return true;
    case TensorProto::INT8:
      *out = DType::kInt8;
      return true;
    case TensorProto::UINT8:
      *out = DType::kUInt8;
      return true;
    case TensorProto::BOOL:
      *out = DType::kBool;
      return true;
    case TensorProto::COMPLEX64:
      *out = DType::kComplex64;
      return true;
    default:
      return false;
  }
}

bool IsFloatElem(int32_t elem) {
  return elem == TensorProto::FLOAT || elem == TensorProto::DOUBLE ||
         elem == TensorProto::FLOAT16 || elem == TensorProto::BFLOAT16;
}

const char* ElemName(int32_t elem) {
  if (TensorProto::DataType_IsValid(elem))
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem)).c_str();
  return "an unknown element type";
}

// A small static tensor's value (integers and floats as double: exact for
// shapes, which stay far below 2^53).
// double -> int64 without undefined behaviour: NaN is 0, values out of
// range saturate (static values are kept as doubles).
int64_t SaturatingInt(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 9223372036854775807.0) return INT64_MAX;
  if (x <= -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(x);
}

struct StaticValue {
  int32_t elem = TensorProto::INT64;
  std::vector<int64_t> dims;
  std::vector<double> values;
};

bool IsIntElem(int32_t elem) { return !IsFloatElem(elem) && elem != TensorProto::STRING; }

template <class T>
void ReadRaw(const std::string& raw, std::vector<double>* out) {
  size_t n = raw.size() / sizeof(T);
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    (*out)[i] = static_cast<double>(v);
  }
}

int64_t NumelOf(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxStaticNumel * 1024 / d)) return -1;
    n *= d;
  }
  return n;
}

// The values of a TensorProto held in the file (not external data).
bool TensorValues(const TensorProto& t, StaticValue* out) {
  if (t.data_location() == TensorProto::EXTERNAL) return false;
  out->elem = t.data_type();
  out->dims.assign(t.dims().begin(), t.dims().end());
  int64_t numel = NumelOf(out->dims);
  if (numel < 0 || numel > kMaxStaticNumel) return false;
  std::vector<double>& v = out->values;
  v.clear();
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case TensorProto::INT64:
      if (raw)
        ReadRaw<int64_t>(t.raw_data(), &v);
      else
        v.assign(t.int64_data().begin(), t.int64_data().end());
      break;
    case TensorProto::INT32:
    case TensorProto::INT16:
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      if (raw) {
        if (t.data_type() == TensorProto::INT32)
          ReadRaw<int32_t>(t.raw_data(), &v);
        else if (t.data_type() == TensorProto::INT16)
          ReadRaw<int16_t>(t.raw_data(), &v);
        else if (t.data_type() == TensorProto::INT8)
          ReadRaw<int8_t>(t.raw_data(), &v);
        else
          ReadRaw<uint8_t>(t.raw_data(), &v);
      } else {
        v.assign(t.int32_data().begin(), t.int32_data().end());
      }
      break;
    case TensorProto::FLOAT:
      if (raw)
        ReadRaw<float>(t.raw_data(), &v);
      else
        v.assign(t.float_data().begin(), t.float_data().end());
      break;
    case TensorProto::DOUBLE:
      if (raw)
        ReadRaw<double>(t.raw_data(), &v);
      else
        v.assign(t.double_data().begin(), t.double_data().end());
      break;
    default:
      return false;
  }
  return static_cast<int64_t>(v.size()) == numel;
}

TensorProto ToTensorProto(const std::string& name, const StaticValue& s) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(s.elem);
  for (int64_t d : s.dims) t.add_dims(d);
  for (double x : s.values) {
    switch (s.elem) {
      case TensorProto::INT64:
        t.add_int64_data(SaturatingInt(x));
        break;
      case TensorProto::FLOAT:
        t.add_float_data(static_cast<float>(x));
        break;
      case TensorProto::DOUBLE:
        t.add_double_data(x);
        break;
      default:
        t.add_int32_data(
            static_cast<int32_t>(std::clamp<int64_t>(SaturatingInt(x), INT32_MIN, INT32_MAX)));
        break;
    }
  }
  return t;
}

const onnx::AttributeProto* FindAttr(const NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t AttrInt(const NodeProto& n, std::string_view name, int64_t fallback) {
  const auto* a = FindAttr(n, name);
  return a ? a->i() : fallback;
}

std::vector<int64_t> AttrInts(const NodeProto& n, std::string_view name) {
  const auto* a = FindAttr(n, name);
  if (!a) return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

// How an ONNX node's outputs relate to its first data input.
enum class View {
  kNone,       // new buffers
  kView,       // views of it (Split, Slice, Expand, Squeeze, Unsqueeze)
  kTranspose,  // a view, contiguous only for the identity permutation
  kReshape,    // a view of a contiguous input, else a copy (eager's .contiguous())
  kForward,    // the input itself (Identity, zero Pad, a Cast to its own type)
};

// The ONNX types with a fixed rule: the op table's name, whether only the
// first input is data (the others are shapes, axes, bounds or ratios), how
// the outputs relate to it, and whether every output is kept (else only the
// first; the others must be unused).
struct OnnxRule {
  const char* type;
  bool first_input_only = false;
  View view = View::kNone;
  bool all_outputs = false;
};

const std::map<std::string, OnnxRule, std::less<> >& OnnxRules() {
  static const auto* rules = new std::map<std::string, OnnxRule, std::less<> >{
      {"Relu", {"relu"}},
      {"Sigmoid", {"sigmoid"}},
      {"Tanh", {"tanh"}},
      {"Gelu", {"gelu"}},
      {"Softmax", {"softmax"}},
      {"LogSoftmax", {"log_softmax"}},
      {"LeakyRelu", {"leaky_relu"}},
      {"Clip", {"hardtanh", true}},
      {"Add", {"add"}},
      {"Sub", {"sub"}},
      {"Mul", {"mul"}},
      {"Div", {"div"}},
      {"MatMul", {"matmul"}},
      {"Conv", {"convolution"}},
      {"ConvTranspose", {"convolution"}},
      {"BatchNormalization", {"batch_norm"}},
      {"LayerNormalization", {"layer_norm"}},
      {"Dropout", {"dropout", true}},
      {"MaxPool", {"max_pool2d"}},
      {"AveragePool", {"avg_pool2d"}},
      {"GlobalAveragePool", {"adaptive_avg_pool2d"}},
      {"ReduceMean", {"mean", true}},
      {"ReduceSum", {"sum", true}},
      {"Concat", {"cat"}},
      {"Split", {"split", true, View::kView, true}},
      {"Slice", {"slice", true, View::kView}},
      {"Expand", {"expand", true, View::kView}},
      {"Flatten", {"flatten", true, View::kReshape}},
      {"Reshape", {"reshape", true, View::kReshape}},
      {"Transpose", {"transpose", false, View::kTranspose}},
      {"Squeeze", {"squeeze", true, View::kView}},
      {"Unsqueeze", {"unsqueeze", true, View::kView}},
  };
  return *rules;
}

class Importer {
 public:
  Importer(const std::string& file, const GraphLoadOptions& options, Graph* graph,
           std::vector<std::string>* warnings, std::string* err)
      : file_(file), options_(options), g_(*graph), warnings_(*warnings), err_(*err) {}

  bool Run(std::string_view bytes) {
    if (!Parse(bytes)) return false;
    if (!Symbols()) return false;
    if (!InferAll()) return false;
    if (!Emit()) return false;
    if (!AddLoss()) return false;
    std::string err;
    if (!g_.Finalize(&err)) return Fail(file_ + ": " + err);
    return true;
  }

 private:
  bool Fail(std::string message) {
    err_ = std::move(message);
    return false;
  }
  std::string NodeLoc(int i) const {
    return fmt::format("/graph/node/{} (name {})", i, Quote(graph().node(i).name()));
  }
  const onnx::GraphProto& graph() const { return model_.graph(); }

  bool Parse(std::string_view bytes) {
    if (bytes.size() > static_cast<size_t>(INT_MAX))
      return Fail(fmt::format(
          "{}: an ONNX model of {} bytes; expected under 2 GiB (protobuf's limit: save larger "
          "models with their weights as external data, onnx.save(..., "
          "save_as_external_data=True))",
          file_, bytes.size()));
    if (!model_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      return Fail(fmt::format(
          "{}: not a memplan.graph/1 JSON document (it does not start with '{{') nor an ONNX "
          "model (the bytes do not parse as an ONNX ModelProto: truncated or corrupt); expected "
          "a memplan.graph/1 JSON file or an ONNX model",
          file_));
    if (model_.ir_version() <= 0 || !model_.has_graph() || graph().node_size() == 0)
      return Fail(fmt::format(
          "{}: not a memplan.graph/1 JSON document (it does not start with '{{') nor an ONNX "
          "model (it parses as a protobuf without {}); expected a memplan.graph/1 JSON file or "
          "an ONNX model",
          file_,
          model_.ir_version() <= 0 ? "an ONNX ir_version"
                                   : (!model_.has_graph() ? "a graph" : "any graph node")));
    for (const auto& op : model_.opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
    // Weights are never read: only their dims and types matter. Dropping
    // float data keeps the inference copies small.
    auto* gp = model_.mutable_graph();
    for (auto& t : *gp->mutable_initializer()) {
      if (!IsFloatElem(t.data_type())) continue;
      t.clear_raw_data();
      t.clear_float_data();
      t.clear_double_data();
      t.clear_int32_data();
    }
    if (!CheckNames() || !CheckArity()) return false;
    for (int i = 0; i < graph().node_size(); ++i) {
      const NodeProto& n = graph().node(i);
      for (const auto& in : n.input())
        if (!in.empty()) consumers_[in].push_back(i);
      for (const auto& out : n.output())
        if (!out.empty()) producer_[out] = i;
    }
    for (const auto& o : graph().output()) graph_outputs_.insert(o.name());
    return true;
  }

  // Names become tensor ids, op types and JSON strings in memplan's outputs:
  // UTF-8 (ONNX says so; protobuf does not check it), and not empty where
  // memplan.graph/1 needs a name.
  bool CheckNames() {
    auto bad = [&](const std::string& where, const char* what) {
      return Fail(fmt::format("{}: {}: {}", file_, where, what));
    };
    const char* not_utf8 = "a name that is not UTF-8 text; expected UTF-8";
    const char* empty = "an empty name; expected a name";
    auto value_infos = [&](const auto& list, const char* key) {
      for (int k = 0; k < list.size(); ++k) {
        const std::string where = fmt::format("/graph/{}/{}", key, k);
        if (list[k].name().empty()) return bad(where, empty);
        bool ok = IsValidUtf8(list[k].name());
        if (list[k].type().has_tensor_type())
          for (const auto& d : list[k].type().tensor_type().shape().dim())
            ok = ok && IsValidUtf8(d.dim_param());
        if (!ok) return bad(where, not_utf8);
      }
      return true;
    };
    if (!IsValidUtf8(graph().name())) return bad("/graph/name", not_utf8);
    if (!value_infos(graph().input(), "input") || !value_infos(graph().output(), "output") ||
        !value_infos(graph().value_info(), "value_info"))
      return false;
    for (int k = 0; k < graph().initializer_size(); ++k) {
      const std::string where = fmt::format("/graph/initializer/{}", k);
      if (graph().initializer(k).name().empty()) return bad(where, empty);
      if (!IsValidUtf8(graph().initializer(k).name())) return bad(where, not_utf8);
    }
    for (int i = 0; i < graph().node_size(); ++i) {
      const NodeProto& n = graph().node(i);
      bool ok = IsValidUtf8(n.name()) && IsValidUtf8(n.op_type()) && IsValidUtf8(n.domain());
      for (const auto& name : n.input()) ok = ok && IsValidUtf8(name);
      for (const auto& name : n.output()) ok = ok && IsValidUtf8(name);
      if (!ok) return bad(fmt::format("/graph/node/{}", i), not_utf8);
      if (n.op_type().empty())
        return bad(NodeLoc(i), "an empty op_type; expected an ONNX operator type");
    }
    return true;
  }

  // Each node of a type ONNX defines has as many inputs and outputs as its
  // schema allows at the model's opset (the mapping reads them by position).
  bool CheckArity() {
    auto range = [](int lo, int hi) {
      return hi == std::numeric_limits<int>::max() ? fmt::format("at least {}", lo)
             : lo == hi                            ? fmt::format("{}", lo)
                                                   : fmt::format("{} to {}", lo, hi);
    };
    for (int i = 0; i < graph().node_size(); ++i) {
      const NodeProto& n = graph().node(i);
      const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
      const onnx::OpSchema* schema =
          onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset_), domain);
      if (schema == nullptr) continue;  // unknown: every input and output is data
      for (bool inputs : {true, false}) {
        const int count = inputs ? n.input_size() : n.output_size();
        const int lo = inputs ? schema->min_input() : schema->min_output();
        const int hi = inputs ? schema->max_input() : schema->max_output();
        if (count < lo || count > hi)
          return Fail(fmt::format("{}: {}: {} with {} {}; expected {} (ONNX opset {})", file_,
                                  NodeLoc(i), n.op_type(), count, inputs ? "inputs" : "outputs",
                                  range(lo, hi), opset_));
      }
    }
    return true;
  }

  // dim_param of graph inputs -> symbols, valued by --set.
  bool Symbols() {
    for (const auto& t : graph().initializer()) initializer_names_.insert(t.name());
    std::map<std::string, int64_t> set(options_.symbol_overrides.begin(),
                                       options_.symbol_overrides.end());
    for (int i = 0; i < graph().input_size(); ++i) {
      const auto& in = graph().input(i);
      if (initializer_names_.count(in.name())) continue;
      if (!in.type().has_tensor_type())
        return Fail(
            fmt::format("{}: /graph/input/{} (name {}): not a tensor; expected a tensor "
                        "input",
                        file_, i, Quote(in.name())));
      const auto& tt = in.type().tensor_type();
      if (!tt.has_shape())
        return Fail(
            fmt::format("{}: /graph/input/{} (name {}): no shape; expected a shape "
                        "(export with fixed or named dimensions)",
                        file_, i, Quote(in.name())));
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        if (dim.has_dim_value()) continue;
        if (!dim.has_dim_param() || dim.dim_param().empty())
          return Fail(fmt::format(
              "{}: /graph/input/{} (name {}): dimension {} has neither a value nor a name; "
              "expected a fixed size or a named dimension (dim_param) to --set",
              file_, i, Quote(in.name()), d));
        const std::string& name = dim.dim_param();
        if (symbol_value_.count(name)) continue;
        auto it = set.find(name);
        // ONNX gives a named dimension no value (a JSON graph's "symbols"
        // does): a peak at a guessed batch would be a wrong number.
        if (it == set.end())
          return Fail(fmt::format(
              "{}: /graph/input/{} (name {}): dimension {} is the symbol {}, which has no value; "
              "expected --set {}=N",
              file_, i, Quote(in.name()), d, Quote(name), name));
        const int64_t value = it->second;
        symbol_value_[name] = value;
        g_.symbols.emplace_back(name, value);
      }
    }
    for (const auto& [name, value] : options_.symbol_overrides) {
      if (symbol_value_.count(name)) continue;
      std::string names;
      for (const auto& [n, v] : g_.symbols) names += (names.empty() ? "" : ", ") + n;
      return Fail(fmt::format(
          "{}: --set {}: the graph has no symbol {}; expected {}", file_, name, Quote(name),
          names.empty() ? "no --set: the graph declares no symbols" : "one of: " + names));
    }
    return true;
  }

  // ---------------------------------------------------------------------
  // Shapes: concrete inference to a fixed point.
  // ---------------------------------------------------------------------
  void Concretize(onnx::TypeProto* type) {
    if (!type->has_tensor_type() || !type->tensor_type().has_shape()) return;
    for (auto& dim : *type->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
      if (dim.has_dim_value() || !dim.has_dim_param()) continue;
      auto it = symbol_value_.find(dim.dim_param());
      if (it != symbol_value_.end())
        dim.set_dim_value(it->second);
      else
        dim.clear_dim_param();
    }
  }

  // Static tensors compute shapes only: non-float or scalar initializers,
  // Constant / Shape / Size outputs and whatever only they feed.
  void FindStatic() {
    for (const auto& t : graph().initializer()) {
      int64_t numel = 1;
      bool huge = false;
      for (int64_t d : t.dims()) huge = huge || d < 0 || !CheckedMul(numel, d, &numel);
      if (!IsFloatElem(t.data_type()) || (!huge && numel <= 1)) static_.insert(t.name());
    }
    for (int i = 0; i < graph().node_size(); ++i) {
      const NodeProto& n = graph().node(i);
      const std::string& type = n.op_type();
      bool is_static = type == "Constant" || type == "Shape" || type == "Size";
      if (!is_static && n.domain().empty()) {
        bool any = false, all = true;
        for (const auto& in : n.input()) {
          if (in.empty()) continue;
          any = true;
          all = all && static_.count(in) > 0;
        }
        is_static = any && all && type.rfind("Random", 0) != 0;
      }
      if (!is_static) continue;
      for (const auto& out : n.output())
        if (!out.empty()) static_.insert(out);
    }
  }

  bool Known(const std::string& name) const { return values_.count(name) > 0; }

  // The value of node n's input k, or null when it has none (yet).
  const StaticValue* StaticInput(const NodeProto& n, int k) const {
    if (k >= n.input_size() || n.input(k).empty()) return nullptr;
    auto it = values_.find(n.input(k));
    return it == values_.end() ? nullptr : &it->second;
  }

  // An evaluator writes node n's first output into *out; false when it cannot.
  using Evaluator = bool (Importer::*)(const NodeProto& n, StaticValue* out);

  // The op types Evaluate computes, and how.
  static const std::map<std::string, Evaluator, std::less<> >& Evaluators() {
    static const auto* table = new std::map<std::string, Evaluator, std::less<> >{
        {"Constant", &Importer::EvalConstant}, {"Shape", &Importer::EvalShape},
        {"Size", &Importer::EvalShape},        {"Identity", &Importer::EvalElementwise},
        {"Cast", &Importer::EvalElementwise},  {"Floor", &Importer::EvalElementwise},
        {"Ceil", &Importer::EvalElementwise},  {"Neg", &Importer::EvalElementwise},
        {"Abs", &Importer::EvalElementwise},   {"Unsqueeze", &Importer::EvalSqueeze},
        {"Squeeze", &Importer::EvalSqueeze},   {"Concat", &Importer::EvalConcat},
        {"Gather", &Importer::EvalGather},     {"Add", &Importer::EvalBinary},
        {"Sub", &Importer::EvalBinary},        {"Mul", &Importer::EvalBinary},
        {"Div", &Importer::EvalBinary},        {"Max", &Importer::EvalBinary},
        {"Min", &Importer::EvalBinary},        {"Mod", &Importer::EvalBinary},
        {"Slice", &Importer::EvalSlice},       {"ConstantOfShape", &Importer::EvalConstantOfShape},
    };
    return *table;
  }

  // Evaluates node n when every input it needs has a value. True if it did.
  bool Evaluate(const NodeProto& n) {
    auto it = Evaluators().find(n.op_type());
    if (it == Evaluators().end()) return false;
    StaticValue out;
    if (!(this->*(it->second))(n, &out)) return false;
    if (static_cast<int64_t>(out.values.size()) != NumelOf(out.dims) ||
        out.values.size() > static_cast<size_t>(kMaxStaticNumel))
      return false;
    values_[n.output(0)] = std::move(out);
    return true;
  }

  bool EvalConstant(const NodeProto& n, StaticValue* out) {
    if (const auto* a = FindAttr(n, "value")) {
      if (!TensorValues(a->t(), out)) return false;
    } else if (const auto* a = FindAttr(n, "value_int")) {
      out->values = {static_cast<double>(a->i())};
    } else if (const auto* a = FindAttr(n, "value_ints")) {
      out->dims = {a->ints_size()};
      for (int64_t x : a->ints()) out->values.push_back(static_cast<double>(x));
    } else if (const auto* a = FindAttr(n, "value_float")) {
      out->elem = TensorProto::FLOAT;
      out->values = {a->f()};
    } else {
      return false;
    }
    return true;
  }

  // Shape (with start and end) and Size, from the inferred shapes.
  bool EvalShape(const NodeProto& n, StaticValue* out) {
    auto it = shapes_.find(n.input(0));
    if (it == shapes_.end()) return false;
    const auto& s = it->second;
    if (n.op_type() == "Size") {
      double p = 1;
      for (int64_t d : s) p *= static_cast<double>(d);
      out->values = {p};
      return true;
    }
    int64_t r = static_cast<int64_t>(s.size());
    int64_t start = AttrInt(n, "start", 0), end = AttrInt(n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    for (int64_t k = start; k < end; ++k) out->values.push_back(static_cast<double>(s[k]));
    out->dims = {end - start};
    return true;
  }

  // Identity, Cast, Floor, Ceil, Neg, Abs.
  bool EvalElementwise(const NodeProto& n, StaticValue* out) {
    const std::string& type = n.op_type();
    const StaticValue* a = StaticInput(n, 0);
    if (!a) return false;
    *out = *a;
    if (type == "Cast") out->elem = static_cast<int32_t>(AttrInt(n, "to", a->elem));
    for (double& x : out->values) {
      if (type == "Floor") x = std::floor(x);
      if (type == "Ceil") x = std::ceil(x);
      if (type == "Neg") x = -x;
      if (type == "Abs") x = std::fabs(x);
      if (IsIntElem(out->elem)) x = std::trunc(x);
    }
    return true;
  }

  // Unsqueeze and Squeeze, with axes as an attribute or an input.
  bool EvalSqueeze(const NodeProto& n, StaticValue* out) {
    const StaticValue* a = StaticInput(n, 0);
    if (!a) return false;
    std::vector<int64_t> axes = AttrInts(n, "axes");
    if (n.input_size() > 1 && !n.input(1).empty()) {
      const StaticValue* ax = StaticInput(n, 1);
      if (!ax) return false;
      axes.clear();
      for (double x : ax->values) axes.push_back(SaturatingInt(x));
    }
    *out = *a;
    if (n.op_type() == "Unsqueeze") {
      int64_t r = static_cast<int64_t>(a->dims.size() + axes.size());
      for (int64_t& x : axes)
        if (x < 0) x += r;
      std::sort(axes.begin(), axes.end());
      for (int64_t x : axes) {
        if (x < 0 || x > static_cast<int64_t>(out->dims.size())) return false;
        out->dims.insert(out->dims.begin() + x, 1);
      }
      return true;
    }
    std::vector<int64_t> dims;
    int64_t r = static_cast<int64_t>(a->dims.size());
    for (int64_t k = 0; k < r; ++k) {
      bool drop = axes.empty() ? a->dims[k] == 1
                               : std::count(axes.begin(), axes.end(), k) +
                                         std::count(axes.begin(), axes.end(), k - r) >
                                     0;
      if (!drop) dims.push_back(a->dims[k]);
    }
    out->dims = dims;
    return true;
  }

  // Concat of 1-D values.
  bool EvalConcat(const NodeProto& n, StaticValue* out) {
    for (int k = 0; k < n.input_size(); ++k) {
      const StaticValue* a = StaticInput(n, k);
      if (!a || a->dims.size() != 1) return false;
      out->elem = a->elem;
      out->values.insert(out->values.end(), a->values.begin(), a->values.end());
    }
    out->dims = {static_cast<int64_t>(out->values.size())};
    return true;
  }

  // Gather from a 1-D value on axis 0.
  bool EvalGather(const NodeProto& n, StaticValue* out) {
    const StaticValue *a = StaticInput(n, 0), *idx = StaticInput(n, 1);
    if (!a || !idx || a->dims.size() != 1 || AttrInt(n, "axis", 0) != 0) return false;
    out->elem = a->elem;
    out->dims = idx->dims;
    int64_t len = static_cast<int64_t>(a->values.size());
    for (double x : idx->values) {
      int64_t k = SaturatingInt(x);
      if (k < 0) k += len;
      if (k < 0 || k >= len) return false;
      out->values.push_back(a->values[k]);
    }
    return true;
  }

  // Add, Sub, Mul, Div, Max, Min, Mod, with a scalar broadcast.
  bool EvalBinary(const NodeProto& n, StaticValue* out) {
    const std::string& type = n.op_type();
    const StaticValue *a = StaticInput(n, 0), *b = StaticInput(n, 1);
    if (!a || !b || n.input_size() != 2) return false;
    size_t na = a->values.size(), nb = b->values.size();
    if (na != nb && na != 1 && nb != 1) return false;
    out->elem = a->elem;
    out->dims = na >= nb ? a->dims : b->dims;
    if (a->dims.size() > out->dims.size()) out->dims = a->dims;
    if (b->dims.size() > out->dims.size()) out->dims = b->dims;
    const bool ints = IsIntElem(out->elem);
    for (size_t k = 0; k < std::max(na, nb); ++k) {
      double x = a->values[na == 1 ? 0 : k], y = b->values[nb == 1 ? 0 : k];
      double r = 0;
      if (type == "Add")
        r = x + y;
      else if (type == "Sub")
        r = x - y;
      else if (type == "Mul")
        r = x * y;
      else if (type == "Max")
        r = std::max(x, y);
      else if (type == "Min")
        r = std::min(x, y);
      else if (y == 0)
        return false;
      else if (type == "Div")
        r = ints ? std::trunc(x / y) : x / y;
      else
        r = x - y * std::floor(x / y);
      out->values.push_back(r);
    }
    return true;
  }

  // Slice of a 1-D value, on axis 0 with step 1.
  bool EvalSlice(const NodeProto& n, StaticValue* out) {
    const StaticValue *a = StaticInput(n, 0), *st = StaticInput(n, 1), *en = StaticInput(n, 2);
    if (!a || !st || !en || a->dims.size() != 1 || st->values.size() != 1 || en->values.size() != 1)
      return false;
    const StaticValue* axes = StaticInput(n, 3);
    if (axes && (axes->values.size() != 1 || axes->values[0] != 0)) return false;
    int64_t step = 1;
    if (n.input_size() > 4 && !n.input(4).empty()) {
      const StaticValue* steps = StaticInput(n, 4);
      if (!steps || steps->values.size() != 1) return false;
      step = SaturatingInt(steps->values[0]);
    }
    if (step != 1) return false;
    int64_t len = static_cast<int64_t>(a->values.size());
    auto clampi = [&](double v) {
      int64_t k = v > 1e18 ? len : (v < -1e18 ? 0 : SaturatingInt(v));
      if (k < 0) k += len;
      return std::clamp<int64_t>(k, 0, len);
    };
    int64_t s = clampi(st->values[0]), e = clampi(en->values[0]);
    out->elem = a->elem;
    for (int64_t k = s; k < e; ++k) out->values.push_back(a->values[k]);
    out->dims = {static_cast<int64_t>(out->values.size())};
    return true;
  }

  bool EvalConstantOfShape(const NodeProto& n, StaticValue* out) {
    const StaticValue* a = StaticInput(n, 0);
    if (!a) return false;
    for (double x : a->values) out->dims.push_back(SaturatingInt(x));
    int64_t numel = NumelOf(out->dims);
    if (numel < 0 || numel > kMaxStaticNumel) return false;
    double v = 0;
    out->elem = TensorProto::FLOAT;
    if (const auto* attr = FindAttr(n, "value")) {
      StaticValue fill;
      if (!TensorValues(attr->t(), &fill) || fill.values.size() != 1) return false;
      v = fill.values[0];
      out->elem = fill.elem;
    }
    out->values.assign(numel, v);
    return true;
  }

  // onnx::shape_inference (libonnx 1.12) can crash on malformed models
  // (fuzz_onnx found a Conv whose weight rank disagrees with its input's), so
  // it runs in a child process: the model goes in by fork, the inferred one
  // comes back serialized through a pipe ("1" + bytes, or "0" + the error).
  bool InferOnce(onnx::ModelProto* m) {
    int fds[2];
    if (pipe(fds) != 0)
      return Fail(fmt::format("{}: cannot run ONNX shape inference: pipe: {}", file_,
                              std::strerror(errno)));
    const pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      return Fail(fmt::format("{}: cannot run ONNX shape inference: fork: {}", file_,
                              std::strerror(errno)));
    }
    if (pid == 0) {
      close(fds[0]);
      // Die of a crash plainly: no handler inherited from the parent (a
      // sanitizer's or a fuzzer's) may report it as the parent's.
      struct sigaction plain {};
      plain.sa_handler = SIG_DFL;
      sigemptyset(&plain.sa_mask);
      for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &plain, nullptr);
      std::string reply;
      try {
        onnx::shape_inference::InferShapes(*m, onnx::OpSchemaRegistry::Instance(),
                                           onnx::ShapeInferenceOptions(false, 0, true));
        reply = "1" + m->SerializeAsString();
      } catch (const std::exception& e) {
        reply = std::string("0") + e.what();
      }
      for (size_t done = 0; done < reply.size();) {
        ssize_t n = write(fds[1], reply.data() + done, reply.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(1);
        done += static_cast<size_t>(n);
      }
      _exit(0);
    }
    close(fds[1]);
    std::string reply;
    char buf[1 << 16];
    for (;;) {
      ssize_t n = read(fds[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
      return Fail(fmt::format(
          "{}: ONNX shape inference crashed on this model ({}); expected a well-formed model "
          "(one that onnx.checker.check_model and onnx.shape_inference.infer_shapes accept)",
          file_, WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status)) : "no result"));
    if (reply[0] != '1')
      return Fail(
          fmt::format("{}: ONNX shape inference failed: {}; expected a model that "
                      "onnx.shape_inference accepts",
                      file_, reply.substr(1)));
    if (reply.size() - 1 > static_cast<size_t>(INT_MAX) ||
        !m->ParseFromArray(reply.data() + 1, static_cast<int>(reply.size() - 1)))
      return Fail(
          fmt::format("{}: ONNX shape inference returned a model that does not parse", file_));
    auto record = [&](const onnx::ValueInfoProto& v) {
      if (!v.type().has_tensor_type()) return;
      const auto& tt = v.type().tensor_type();
      if (tt.elem_type() != 0) elem_[v.name()] = tt.elem_type();
      if (!tt.has_shape()) return;
      std::vector<int64_t> s;
      for (const auto& d : tt.shape().dim()) {
        if (!d.has_dim_value() || d.dim_value() < 0) return;
        s.push_back(d.dim_value());
      }
      shapes_[v.name()] = std::move(s);
    };
    for (const auto& v : m->graph().input()) record(v);
    for (const auto& v : m->graph().value_info()) record(v);
    for (const auto& v : m->graph().output()) record(v);
    for (const auto& t : m->graph().initializer()) {
      elem_[t.name()] = t.data_type();
      shapes_[t.name()] = std::vector<int64_t>(t.dims().begin(), t.dims().end());
    }
    return true;
  }

  bool InferAll() {
    FindStatic();
    for (const auto& t : graph().initializer()) {
      StaticValue v;
      if (static_.count(t.name()) && TensorValues(t, &v)) values_[t.name()] = std::move(v);
    }
    onnx::ModelProto inf = model_;
    auto* gp = inf.mutable_graph();
    for (auto& v : *gp->mutable_input()) Concretize(v.mutable_type());
    for (auto& v : *gp->mutable_output()) Concretize(v.mutable_type());
    for (auto& v : *gp->mutable_value_info()) Concretize(v.mutable_type());
    std::vector<bool> removed(graph().node_size(), false);
    for (int round = 0;; ++round) {
      if (!InferOnce(&inf)) return false;
      bool progress = false;
      for (int i = 0; i < graph().node_size(); ++i) {
        const NodeProto& n = graph().node(i);
        if (removed[i] || n.output_size() != 1 || !static_.count(n.output(0))) continue;
        if (!Known(n.output(0)) && !Evaluate(n)) continue;
        removed[i] = true;
        progress = true;
        *gp->add_initializer() = ToTensorProto(n.output(0), values_[n.output(0)]);
      }
      if (!progress || round > graph().node_size()) break;
      gp->clear_node();
      for (int i = 0; i < graph().node_size(); ++i)
        if (!removed[i]) *gp->add_node() = graph().node(i);
    }
    for (const auto& [name, v] : values_) {
      shapes_[name] = v.dims;
      elem_[name] = v.elem;
    }
    return true;
  }

  // ---------------------------------------------------------------------
  // Emission.
  // ---------------------------------------------------------------------
  // A memplan tensor for ONNX value `name` (concrete shape required).
  bool NewTensor(const std::string& name, TensorKind kind, const std::string& where, int* out,
                 const std::string& id_override = "") {
    auto s = shapes_.find(name);
    auto e = elem_.find(name);
    if (s == shapes_.end() || e == elem_.end())
      return Fail(fmt::format(
          "{}: {}: tensor {} has no {} after shape inference; expected a concrete shape (name "
          "the model's dynamic dimensions and --set them, or export with fixed shapes)",
          file_, where, Quote(name), e == elem_.end() ? "element type" : "concrete shape"));
    DType dt;
    if (!DTypeOf(e->second, &dt))
      return Fail(fmt::format("{}: {}: tensor {} has element type {}; expected one of {}", file_,
                              where, Quote(name), ElemName(e->second), DTypeList()));
    Tensor t;
    t.id = UniqueTensorId(id_override.empty() ? name : id_override);
    t.dtype = dt;
    t.kind = kind;
    std::vector<Dim> dims;
    for (int64_t d : s->second) dims.push_back(Dim{d, ""});
    t.shape = Shape(dims);
    *out = static_cast<int>(g_.tensors.size());
    g_.tensors.push_back(std::move(t));
    contiguous_.push_back(true);
    if (id_override.empty()) tensor_of_[name] = *out;
    return true;
  }

  // id, or id~1, id~2, ... : the first not in `used`, which then holds it.
  static std::string Unique(const std::string& id, std::unordered_set<std::string>* used) {
    std::string candidate = id;
    for (int k = 1; !used->insert(candidate).second; ++k) candidate = fmt::format("{}~{}", id, k);
    return candidate;
  }
  std::string UniqueTensorId(const std::string& id) { return Unique(id, &tensor_ids_); }
  std::string UniqueOpId(const std::string& id) { return Unique(id, &op_ids_); }

  bool Emit() {
    // Graph inputs, with their symbolic dimensions kept.
    for (int i = 0; i < graph().input_size(); ++i) {
      const auto& in = graph().input(i);
      if (initializer_names_.count(in.name())) continue;
      int t;
      if (!NewTensor(in.name(), TensorKind::kInput, fmt::format("/graph/input/{}", i), &t))
        return false;
      const auto& dims = in.type().tensor_type().shape().dim();
      std::vector<Dim> shape = g_.tensors[t].shape.ToVector();
      for (int d = 0; d < dims.size() && d < static_cast<int>(shape.size()); ++d)
        if (!dims[d].has_dim_value()) shape[d].symbol = dims[d].dim_param();
      g_.tensors[t].shape = Shape(shape);
    }
    // Running statistics of BatchNormalization are buffers.
    std::unordered_set<std::string> stats;
    for (const auto& n : graph().node())
      if (n.op_type() == "BatchNormalization")
        for (int k = 3; k < n.input_size() && k < 5; ++k) stats.insert(n.input(k));
    for (int i = 0; i < graph().initializer_size(); ++i) {
      const auto& init = graph().initializer(i);
      if (static_.count(init.name())) continue;
      int t;
      TensorKind kind = stats.count(init.name()) ? TensorKind::kBuffer : TensorKind::kParameter;
      if (!NewTensor(init.name(), kind, fmt::format("/graph/initializer/{}", i), &t)) return false;
    }
    FindFusions();
    for (int i = 0; i < graph().node_size(); ++i) {
      if (fused_away_.count(i)) continue;
      if (!EmitNode(i)) return false;
    }
    return true;
  }

  bool SingleConsumer(const std::string& name, int* consumer) const {
    auto it = consumers_.find(name);
    if (it == consumers_.end() || it->second.size() != 1 || graph_outputs_.count(name))
      return false;
    *consumer = it->second[0];
    return true;
  }
  // The operand of a binary node other than `name`, or "" if it is not one.
  std::string Other(const NodeProto& n, const std::string& name) const {
    if (n.input_size() != 2) return "";
    if (n.input(0) == name) return n.input(1);
    if (n.input(1) == name) return n.input(0);
    return "";
  }

  // torch's nn.GELU: y = (x * (erf(x / sqrt2) + 1)) * 0.5 -> gelu(x);
  // nn.SiLU: y = x * sigmoid(x) -> silu(x).
  void FindFusions() {
    for (int e = 0; e < graph().node_size(); ++e) {
      const NodeProto& first = graph().node(e);
      if (first.op_type() == "Sigmoid" && first.input_size() == 1 && first.output_size() == 1) {
        int mul = -1;
        if (!SingleConsumer(first.output(0), &mul)) continue;
        const NodeProto& m = graph().node(mul);
        if (m.op_type() != "Mul" || Other(m, first.output(0)) != first.input(0)) continue;
        fused_away_.insert(e);
        fused_at_[mul] = {"silu", first.input(0), m.output(0), first.name()};
        continue;
      }
      const NodeProto& erf = first;
      if (erf.op_type() != "Erf" || erf.input_size() != 1) continue;
      auto div_it = producer_.find(erf.input(0));
      if (div_it == producer_.end()) continue;
      const NodeProto& div = graph().node(div_it->second);
      if (div.op_type() != "Div" || div.input_size() != 2 || !static_.count(div.input(1))) continue;
      const std::string& x = div.input(0);
      int c = -1, add = -1, mul = -1, half = -1;
      if (!SingleConsumer(div.output(0), &c) || c != e) continue;
      if (!SingleConsumer(erf.output(0), &add)) continue;
      const NodeProto& a = graph().node(add);
      if (a.op_type() != "Add" || !static_.count(Other(a, erf.output(0)))) continue;
      if (!SingleConsumer(a.output(0), &mul)) continue;
      const NodeProto& m = graph().node(mul);
      if (m.op_type() != "Mul" || Other(m, a.output(0)) != x) continue;
      if (!SingleConsumer(m.output(0), &half)) continue;
      const NodeProto& h = graph().node(half);
      if (h.op_type() != "Mul" || !static_.count(Other(h, m.output(0)))) continue;
      for (int k : {div_it->second, e, add, mul}) fused_away_.insert(k);
      fused_at_[half] = {"gelu", x, h.output(0), erf.name()};
    }
  }

  // The memplan tensor of an op's data input, or -1 when the input is a
  // static scalar (dropped: a wrapped number in eager). Non-scalar statics
  // become buffers.
  bool DataInput(int i, const std::string& name, int* out) {
    *out = -1;
    if (name.empty()) return true;
    auto it = tensor_of_.find(name);
    if (it != tensor_of_.end()) {
      *out = it->second;
      return true;
    }
    if (static_.count(name)) {
      auto s = shapes_.find(name);
      if (s != shapes_.end() && NumelOf(s->second) >= 0 && NumelOf(s->second) <= 1) return true;
      return NewTensor(name, TensorKind::kBuffer, NodeLoc(i), out);
    }
    return Fail(
        fmt::format("{}: {}: input {} is not a graph input, an initializer or the "
                    "output of an earlier node; expected nodes in topological order",
                    file_, NodeLoc(i), Quote(name)));
  }

  // How a node maps to a memplan op, beyond its type.
  struct Mapping {
    std::vector<int> data_pos;  // positions of data inputs; empty: all
    bool all_outputs = false;   // every output kept (else only the first)
    View view = View::kNone;
  };

  bool EmitNode(int i) {
    const NodeProto& n = graph().node(i);
    bool all_static = n.output_size() > 0;
    for (const auto& out : n.output())
      all_static = all_static && (out.empty() || static_.count(out));
    if (all_static) return true;  // shape computation: no tensor, no op

    Op op;
    op.id = UniqueOpId(n.name().empty() ? fmt::format("{}_{}", n.op_type(), i) : n.name());
    op.scope = ScopeFromOnnxNodeName(n.name());
    if (fused_at_.count(i)) return EmitFused(i, std::move(op));
    const Mapping mapping = MapNode(n, &op);
    // Inputs.
    std::vector<int> positions = mapping.data_pos;
    if (positions.empty())
      for (int k = 0; k < n.input_size(); ++k) positions.push_back(k);
    for (int k : positions) {
      if (k >= n.input_size()) continue;
      int t;
      if (!DataInput(i, n.input(k), &t)) return false;
      if (t >= 0) op.inputs.push_back(t);
    }
    if (mapping.view == View::kForward) {
      if (op.inputs.empty())
        return Fail(fmt::format("{}: {}: {} of a constant; expected a data input", file_,
                                NodeLoc(i), n.op_type()));
      tensor_of_[n.output(0)] = op.inputs[0];
      return true;
    }
    if (!EmitOutputs(i, mapping.all_outputs, &op)) return false;
    if (mapping.view != View::kNone && !op.inputs.empty()) MarkViews(n, mapping.view, op);
    g_.ops.push_back(std::move(op));
    return true;
  }

  // The op FindFusions put at node i: one data input, one output.
  bool EmitFused(int i, Op op) {
    const Fused& fused = fused_at_.at(i);
    op.type = fused.type;
    op.scope = ScopeFromOnnxNodeName(fused.name);
    int x;
    if (!DataInput(i, fused.x, &x)) return false;
    op.inputs = {x};
    int y;
    if (!NewTensor(fused.y, TensorKind::kActivation, NodeLoc(i), &y)) return false;
    op.outputs = {y};
    g_.ops.push_back(std::move(op));
    return true;
  }

  // Sets op->type for node n and says which inputs are data, which outputs
  // are kept and how they relate to the first input.
  Mapping MapNode(const NodeProto& n, Op* op) {
    const std::string& type = n.op_type();
    Mapping mapping;
    auto rule = OnnxRules().find(type);
    if (!n.domain().empty() && n.domain() != "ai.onnx") {
      op->type = n.domain() + "." + type;
      mapping.all_outputs = true;
    } else if (rule != OnnxRules().end()) {
      op->type = rule->second.type;
      if (rule->second.first_input_only) mapping.data_pos = {0};
      mapping.view = rule->second.view;
      mapping.all_outputs = rule->second.all_outputs;
    } else if (type == "Gemm") {
      MapGemm(n, op, &mapping);
    } else if (type == "Identity") {
      mapping.view = View::kForward;
    } else if (type == "Pad") {
      MapPad(n, op, &mapping);
    } else if (type == "Cast") {
      auto e = elem_.find(n.input(0));
      if (e != elem_.end() && e->second == AttrInt(n, "to", -1))
        mapping.view = View::kForward;
      else
        op->type = "Cast";
    } else if (type == "Gather") {
      MapGather(n, op, &mapping);
    } else {
      op->type = type;  // no rule: the lowering treats it conservatively and warns
      mapping.all_outputs = true;
    }
    return mapping;
  }

  // Gemm: linear (B transposed), addmm (with a bias C), else mm.
  void MapGemm(const NodeProto& n, Op* op, Mapping* mapping) const {
    bool ta = AttrInt(n, "transA", 0) != 0, tb = AttrInt(n, "transB", 0) != 0;
    if (!ta && tb) {
      op->type = "linear";
    } else if (n.input_size() >= 3 && !n.input(2).empty()) {
      op->type = "addmm";
      mapping->data_pos = {2, 0, 1};
    } else {
      op->type = "mm";
    }
  }

  // Pad: the input itself when every pad is known and zero.
  void MapPad(const NodeProto& n, Op* op, Mapping* mapping) const {
    mapping->data_pos = {0};
    std::vector<int64_t> pads = AttrInts(n, "pads");
    bool known = true;
    if (n.input_size() > 1 && !n.input(1).empty()) {
      auto it = values_.find(n.input(1));
      known = it != values_.end();
      if (known)
        for (double p : it->second.values) pads.push_back(SaturatingInt(p));
    }
    if (known && std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
      mapping->view = View::kForward;
    else
      op->type = "constant_pad_nd";
  }

  // Gather: an embedding from a parameter on axis 0, a select (a view) at a
  // static scalar index, else Gather.
  void MapGather(const NodeProto& n, Op* op, Mapping* mapping) {
    auto w = tensor_of_.find(n.input(0));
    if (AttrInt(n, "axis", 0) == 0 && w != tensor_of_.end() &&
        g_.tensors[w->second].kind == TensorKind::kParameter) {
      op->type = "embedding";
    } else if (static_.count(n.input(1)) && values_.count(n.input(1)) &&
               values_[n.input(1)].values.size() == 1 && values_[n.input(1)].dims.empty()) {
      op->type = "select";
      mapping->data_pos = {0};
      mapping->view = View::kView;
    } else {
      op->type = "Gather";
    }
  }

  // Outputs: the mapped ones (all, or the first); any other must be unused.
  bool EmitOutputs(int i, bool all_outputs, Op* op) {
    const NodeProto& n = graph().node(i);
    std::vector<int> keep_outputs = {0};
    if (all_outputs) {
      keep_outputs.clear();
      for (int k = 0; k < n.output_size(); ++k) keep_outputs.push_back(k);
    }
    for (int k = 0; k < n.output_size(); ++k) {
      const std::string& name = n.output(k);
      if (name.empty()) continue;
      if (std::find(keep_outputs.begin(), keep_outputs.end(), k) != keep_outputs.end()) {
        int t;
        if (!NewTensor(name, TensorKind::kActivation, NodeLoc(i), &t)) return false;
        op->outputs.push_back(t);
        continue;
      }
      if (consumers_.count(name) || graph_outputs_.count(name))
        return Fail(fmt::format(
            "{}: {}: output {} ({}) of {} is read; expected it unused (memplan maps {} to {}, "
            "which has no such output)",
            file_, NodeLoc(i), k, Quote(name), n.op_type(), n.op_type(), op->type));
    }
    return true;
  }

  // The outputs of a view node alias its first input (a reshape of a strided
  // input copies), and whether each is contiguous.
  void MarkViews(const NodeProto& n, View view, const Op& op) {
    int src = op.inputs[0];
    bool src_contiguous = contiguous_[src];
    bool copy = view == View::kReshape && !src_contiguous;
    for (int t : op.outputs) {
      if (!copy) g_.tensors[t].alias_of = src;
      bool c = src_contiguous;
      if (view == View::kTranspose) {
        std::vector<int64_t> perm = AttrInts(n, "perm");
        for (size_t k = 0; k < perm.size(); ++k) c = c && perm[k] == static_cast<int64_t>(k);
        if (perm.empty() && g_.tensors[t].shape.size() > 1) c = false;
      } else if (view == View::kReshape) {
        c = true;
      } else if (op.type == "split" || op.type == "slice") {
        c = c && SliceOuterOne(n, op.type, g_.tensors[src].shape);
      }
      contiguous_[t] = c;
    }
  }

  // A slice along any dimension but the outermost non-1 one is strided:
  // whether every dimension of `shape` before the split or slice axis is 1.
  bool SliceOuterOne(const NodeProto& n, std::string_view type, const Shape& shape) const {
    int64_t axis = AttrInt(n, "axis", 0);
    if (type == "slice") {
      axis = -1;
      auto it = n.input_size() > 3 ? values_.find(n.input(3)) : values_.end();
      if (it != values_.end() && it->second.values.size() == 1)
        axis = SaturatingInt(it->second.values[0]);
      else if (n.input_size() <= 3)
        axis = 0;
    }
    if (axis < 0 && axis != -1) axis += static_cast<int64_t>(shape.size());
    bool outer_one = axis >= 0;  // every dimension before the axis is 1
    for (int64_t k = 0; k < axis && k < static_cast<int64_t>(shape.size()); ++k)
      outer_one = outer_one && shape[k].value == 1;
    return outer_one;
  }

  bool AddLoss() {
    if (graph().output_size() == 0)
      return Fail(fmt::format("{}: /graph/output: none; expected the model's output", file_));
    const std::string& first = graph().output(0).name();
    auto it = tensor_of_.find(first);
    if (it == tensor_of_.end())
      return Fail(
          fmt::format("{}: /graph/output/0 (name {}): not computed from the inputs and "
                      "parameters; expected the model's output",
                      file_, Quote(first)));
    for (int k = 1; k < graph().output_size(); ++k)
      warnings_.push_back(fmt::format(
          "{}: graph output {} is not part of the loss (memplan's loss reads output 0, {}); it "
          "is freed after its last use",
          file_, Quote(graph().output(k).name()), Quote(first)));
    int out = it->second;
    Tensor& o = g_.tensors[out];
    // Checked: the graph is finalized (and its sizes checked) only later.
    int64_t numel = 1, rows = 1;
    bool overflow = false;
    for (size_t k = 0; k < o.shape.size(); ++k) {
      overflow = overflow || !CheckedMul(numel, o.shape[k].value, &numel);
      if (k + 1 < o.shape.size()) overflow = overflow || !CheckedMul(rows, o.shape[k].value, &rows);
    }
    if (overflow)
      return Fail(
          fmt::format("{}: /graph/output/0 (name {}): more than 2^63-1 elements; "
                      "expected a tensor whose size fits in 64 bits",
                      file_, Quote(first)));
    nlohmann::ordered_json source;
    source["framework"] = "onnx";
    source["producer"] = model_.producer_name() +
                         (model_.producer_version().empty() ? "" : " " + model_.producer_version());
    source["opset"] = opset_;
    if (numel == 1 && IsFloating(o.dtype)) {
      source["loss"] = "the model's output";
      g_.outputs = {out};
    } else {
      source["loss"] = "cross_entropy added by memplan";
      if (o.shape.empty())
        return Fail(
            fmt::format("{}: /graph/output/0 (name {}): a scalar of type {}; expected "
                        "float logits or a float scalar loss",
                        file_, Quote(first), DTypeName(o.dtype)));
      Shape lead(o.shape.begin(), o.shape.end() - 1);
      Dim classes = o.shape.back();
      DType dt = o.dtype;
      int logits = out;
      if (o.shape.size() != 2) {  // out.reshape(-1, C): a view
        Tensor v;
        v.id = UniqueTensorId(first + ".rows");
        v.shape = {Dim{rows, ""}, classes};
        v.dtype = dt;
        v.alias_of = out;
        logits = static_cast<int>(g_.tensors.size());
        g_.tensors.push_back(std::move(v));
        Op r;
        r.id = UniqueOpId("loss.reshape");
        r.type = "reshape";
        r.inputs = {out};
        r.outputs = {logits};
        r.scope = "loss";
        g_.ops.push_back(std::move(r));
      }
      Tensor target;
      target.id = UniqueTensorId("target");
      target.shape = lead;
      target.dtype = DType::kInt64;
      target.kind = TensorKind::kInput;
      int tt = static_cast<int>(g_.tensors.size());
      g_.tensors.push_back(std::move(target));
      Tensor loss;
      loss.id = UniqueTensorId("loss");
      loss.dtype = dt;
      int lt = static_cast<int>(g_.tensors.size());
      g_.tensors.push_back(std::move(loss));
      Op ce;
      ce.id = UniqueOpId("loss");
      ce.type = "cross_entropy";
      ce.inputs = {logits, tt};
      ce.outputs = {lt};
      ce.scope = "loss";
      g_.ops.push_back(std::move(ce));
      g_.outputs = {lt};
    }
    g_.source = json_util::Dump(source);
    g_.name = graph().name().empty() ? "onnx" : graph().name();
    return true;
  }

  struct Fused {
    std::string type, x, y, name;  // op type, input, output, name of the node giving the scope
  };

  const std::string& file_;
  const GraphLoadOptions& options_;
  Graph& g_;
  std::vector<std::string>& warnings_;
  std::string& err_;
  onnx::ModelProto model_;
  int64_t opset_ = 0;
  std::unordered_map<std::string, std::vector<int> > consumers_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_set<std::string> graph_outputs_, initializer_names_, static_;
  std::map<std::string, int64_t> symbol_value_;
  std::unordered_map<std::string, StaticValue> values_;
  std::unordered_map<std::string, std::vector<int64_t> > shapes_;
  std::unordered_map<std::string, int32_t> elem_;
  std::unordered_map<std::string, int> tensor_of_;
  std::unordered_set<std::string> tensor_ids_, op_ids_;
  std::vector<bool> contiguous_;
  std::set<int> fused_away_;
  std::map<int, Fused> fused_at_;  // at the position of the last node
};

}  // namespace

bool ImportOnnx(std::string_view bytes, const std::string& file, const GraphLoadOptions& options,
                Graph* graph, std::vector<std::string>* warnings, std::string* err) {
  *graph = Graph();
  try {
    Importer importer(file, options, graph, warnings, err);
    return importer.Run(bytes);
  } catch (const std::exception& e) {
    *err = fmt::format("{}: reading the ONNX model failed: {}; expected a valid ONNX model", file,
                       e.what());
    return false;
  }
}

#endif  // MEMPLAN_HAVE_ONNX

}  // namespace memplan
