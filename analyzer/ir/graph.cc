#include "analyzer/ir/graph.h"

#include <fmt/format.h>

#include <limits>

#include "analyzer/base/enum_table.h"
#include "analyzer/base/units.h"

namespace memplan {
namespace {

constexpr EnumName<DType> kDTypeNames[] = {
    {DType::kFloat64, "float64"},
    {DType::kFloat32, "float32"},
    {DType::kFloat16, "float16"},
    {DType::kBFloat16, "bfloat16"},
    {DType::kFloat8E4M3Fn, "float8_e4m3fn"},
    {DType::kFloat8E5M2, "float8_e5m2"},
    {DType::kInt64, "int64"},
    {DType::kInt32, "int32"},
    {DType::kInt16, "int16"},
    {DType::kInt8, "int8"},
    {DType::kUInt8, "uint8"},
    {DType::kBool, "bool"},
    {DType::kComplex64, "complex64"},
};

// Indexed by DType, in kDTypeNames' order.
struct DTypeInfo {
  int size;
  bool floating;
};
constexpr DTypeInfo kDTypes[] = {
    {8, true},   // float64
    {4, true},   // float32
    {2, true},   // float16
    {2, true},   // bfloat16
    {1, true},   // float8_e4m3fn
    {1, true},   // float8_e5m2
    {8, false},  // int64
    {4, false},  // int32
    {2, false},  // int16
    {1, false},  // int8
    {1, false},  // uint8
    {1, false},  // bool
    {8, true},   // complex64
};
static_assert(std::size(kDTypes) == std::size(kDTypeNames));
// The records' sizes graph.h states (std::string is 32 bytes in libstdc++).
static_assert(sizeof(Tensor) == sizeof(std::string) + 56);
static_assert(sizeof(Op) == sizeof(std::string) + 128);

constexpr EnumName<TensorKind> kKindNames[] = {
    {TensorKind::kInput, "input"},         {TensorKind::kParameter, "parameter"},
    {TensorKind::kBuffer, "buffer"},       {TensorKind::kActivation, "activation"},
    {TensorKind::kGradient, "gradient"},   {TensorKind::kOptimizerState, "optimizer_state"},
    {TensorKind::kTemporary, "temporary"},
};
constexpr EnumName<Phase> kPhaseNames[] = {
    {Phase::kForward, "forward"},
    {Phase::kBackward, "backward"},
    {Phase::kOptimizer, "optimizer"},
};

}  // namespace

bool ParseDType(std::string_view name, DType* out) { return ParseEnum(kDTypeNames, name, out); }
const char* DTypeName(DType d) { return NameOf(kDTypeNames, d); }
int DTypeSize(DType d) { return kDTypes[static_cast<int>(d)].size; }
bool IsFloating(DType d) { return kDTypes[static_cast<int>(d)].floating; }
std::string DTypeList() {
  std::string s;
  for (const auto& d : kDTypeNames) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

bool ParseTensorKind(std::string_view name, TensorKind* out) {
  return ParseEnum(kKindNames, name, out);
}
const char* TensorKindName(TensorKind k) { return NameOf(kKindNames, k); }
bool ParsePhase(std::string_view name, Phase* out) { return ParseEnum(kPhaseNames, name, out); }
const char* PhaseName(Phase p) { return NameOf(kPhaseNames, p); }

bool CheckedMul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool CheckedAdd(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

std::string CanonicalOpType(std::string_view type) {
  if (type.substr(0, 5) == "aten.") {
    type.remove_prefix(5);
    size_t dot = type.find('.');
    if (dot != std::string_view::npos) type = type.substr(0, dot);
  } else if (type.substr(0, 6) == "aten::") {
    type.remove_prefix(6);
    size_t dot = type.find('.');
    if (dot != std::string_view::npos) type = type.substr(0, dot);
  }
  return std::string(type);
}

int Graph::FindTensor(std::string_view id) const {
  return tensor_index.Find(id, [this](int t) -> std::string_view { return tensors[t].id; });
}

int Graph::FindOp(std::string_view id) const {
  return op_index.Find(id, [this](int o) -> std::string_view { return ops[o].id; });
}

int Graph::IndexTensor(int t) {
  return tensor_index.Insert(tensors[t].id, t,
                             [this](int u) -> std::string_view { return tensors[u].id; });
}

int Graph::IndexOp(int o) {
  return op_index.Insert(ops[o].id, o, [this](int u) -> std::string_view { return ops[u].id; });
}

bool Graph::IsParameterGradient(int t) const {
  int of = tensors[t].grad_of;
  return of >= 0 && tensors[of].kind == TensorKind::kParameter;
}

std::vector<int> Graph::FinalParameterGradients() const {
  std::vector<int> grad(tensors.size(), -1);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Tensor& tensor = tensors[t];
    if (!IsParameterGradient(static_cast<int>(t)) || tensor.producer < 0) continue;
    int& best = grad[tensor.grad_of];
    if (best < 0 || tensors[best].producer < tensor.producer) best = static_cast<int>(t);
  }
  return grad;
}

int64_t Graph::ResidentBytes() const {
  int64_t sum = 0;
  for (size_t t = 0; t < tensors.size(); ++t)
    if (IsResidentTensor(static_cast<int>(t))) sum += OwnedBytes(static_cast<int>(t));
  return sum;
}

bool Graph::Finalize(std::string* err) {
  constexpr size_t kMaxCount = std::numeric_limits<int>::max();
  if (tensors.size() >= kMaxCount || ops.size() >= kMaxCount) {
    *err = fmt::format("graph has {} tensors and {} ops; the limit is {} of each", tensors.size(),
                       ops.size(), kMaxCount - 1);
    return false;
  }
  const int nt = static_cast<int>(tensors.size());
  auto bad_index = [&](int t, bool allow_none) {
    return allow_none ? (t < -1 || t >= nt) : (t < 0 || t >= nt);
  };
  for (const Tensor& t : tensors) {
    if (bad_index(t.alias_of, true) || bad_index(t.grad_of, true)) {
      *err = fmt::format("tensor '{}' refers to a tensor index out of range", t.id);
      return false;
    }
  }
  for (const Op& op : ops) {
    for (const auto* list : {&op.inputs, &op.outputs, &op.saves}) {
      for (int t : *list) {
        if (bad_index(t, false)) {
          *err = fmt::format("op '{}' refers to a tensor index out of range", op.id);
          return false;
        }
      }
    }
  }
  for (int t : outputs) {
    if (bad_index(t, false)) {
      *err = "graph output index out of range";
      return false;
    }
  }
  // The importer and the lowering keep the indexes as they go; rebuild them
  // only when they do not have one entry per tensor and op.
  if (tensor_index.size() != tensors.size()) {
    tensor_index.Clear();
    tensor_index.Reserve(tensors.size());
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (IndexTensor(static_cast<int>(t)) >= 0) {
        *err = fmt::format("duplicate tensor id '{}'", tensors[t].id);
        return false;
      }
    }
  }
  if (op_index.size() != ops.size()) {
    op_index.Clear();
    op_index.Reserve(ops.size());
    for (size_t o = 0; o < ops.size(); ++o) {
      if (IndexOp(static_cast<int>(o)) >= 0) {
        *err = fmt::format("duplicate op id '{}'", ops[o].id);
        return false;
      }
    }
  }

  // Bytes, checked; the total bounds every live-bytes sum.
  int64_t total = 0;
  for (Tensor& t : tensors) {
    int64_t n = 1;
    for (const Dim& d : t.shape) {
      if (d.value < 0 || !CheckedMul(n, d.value, &n)) {
        *err = fmt::format("tensor '{}': element count overflows 64-bit arithmetic", t.id);
        return false;
      }
    }
    t.numel = n;
    if (!CheckedMul(n, DTypeSize(t.dtype), &t.bytes) || !CheckedAdd(total, t.bytes, &total)) {
      *err = fmt::format("tensor '{}': byte count overflows 64-bit arithmetic", t.id);
      return false;
    }
  }
  for (const Op& op : ops) {
    if (op.workspace_bytes < 0 || !CheckedAdd(total, op.workspace_bytes, &total)) {
      *err = fmt::format("op '{}': workspace bytes overflow 64-bit arithmetic", op.id);
      return false;
    }
  }
  // Live bytes never exceed twice the total (a recomputed op's fresh copies),
  // so this bound keeps every sum the simulator makes exact.
  if (total > kMaxGraphBytes) {
    *err = fmt::format(
        "the tensors and workspaces of this graph add up to {} bytes; memplan "
        "handles at most 2^61 bytes (2 EiB)",
        total);
    return false;
  }

  // Bases of views: follow alias_of with a three-colour walk (no recursion).
  std::vector<int> state(tensors.size(), 0);  // 0 new, 1 on path, 2 done
  std::vector<int> path;
  for (size_t start = 0; start < tensors.size(); ++start) {
    int t = static_cast<int>(start);
    path.clear();
    while (state[t] == 0 && tensors[t].alias_of >= 0) {
      state[t] = 1;
      path.push_back(t);
      t = tensors[t].alias_of;
    }
    if (state[t] == 1) {
      *err = fmt::format("alias_of cycle through tensor '{}'", tensors[t].id);
      return false;
    }
    int base = state[t] == 2 ? tensors[t].base : t;
    state[t] = 2;
    tensors[t].base = base;
    for (int p : path) {
      tensors[p].base = base;
      state[p] = 2;
    }
  }

  // Producers, and use-before-definition in file order.
  for (Tensor& t : tensors) t.producer = -1;
  joint = false;
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.phase == Phase::kBackward) joint = true;
    for (int in : op.inputs) {
      const Tensor& t = tensors[in];
      if (!IsResident(t.kind) && t.producer < 0) {
        *err = fmt::format("op '{}' reads tensor '{}' before it is produced", op.id, t.id);
        return false;
      }
    }
    for (int out : op.outputs) {
      Tensor& t = tensors[out];
      if (t.producer >= 0) {
        *err = fmt::format("tensor '{}' is produced by both '{}' and '{}'", t.id,
                           ops[t.producer].id, op.id);
        return false;
      }
      if (IsResident(t.kind)) {
        *err = fmt::format("op '{}' produces resident tensor '{}'", op.id, t.id);
        return false;
      }
      t.producer = static_cast<int>(o);
    }
  }
  kept_to_end.assign(tensors.size(), false);
  for (size_t t = 0; t < tensors.size(); ++t)
    kept_to_end[t] =
        IsResidentTensor(static_cast<int>(t)) || IsParameterGradient(static_cast<int>(t));
  for (int t : outputs) kept_to_end[t] = true;
  BuildTopology();
  return true;
}

void Graph::BuildTopology() {
  Topology& topo = topology;
  topo.io_start.assign(ops.size() + 1, 0);
  topo.num_inputs.resize(ops.size());
  size_t total = 0;
  for (size_t o = 0; o < ops.size(); ++o) {
    topo.io_start[o] = static_cast<int>(total);
    topo.num_inputs[o] = static_cast<int>(ops[o].inputs.size());
    total += ops[o].inputs.size() + ops[o].outputs.size();
  }
  topo.io_start[ops.size()] = static_cast<int>(total);
  topo.io.clear();
  topo.io.reserve(total);
  topo.forward.resize(ops.size());
  topo.accumulate.resize(ops.size());
  topo.workspace_bytes.resize(ops.size());
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    topo.io.insert(topo.io.end(), op.inputs.begin(), op.inputs.end());
    topo.io.insert(topo.io.end(), op.outputs.begin(), op.outputs.end());
    topo.forward[o] = op.phase == Phase::kForward;
    topo.accumulate[o] = op.accumulate;
    topo.workspace_bytes[o] = op.workspace_bytes;
  }
  const size_t nt = tensors.size();
  topo.alias_of.resize(nt);
  topo.base.resize(nt);
  topo.producer.resize(nt);
  topo.bytes.resize(nt);
  topo.resident.resize(nt);
  for (size_t t = 0; t < nt; ++t) {
    topo.alias_of[t] = tensors[t].alias_of;
    topo.base[t] = tensors[t].base;
    topo.producer[t] = tensors[t].producer;
    topo.bytes[t] = tensors[t].bytes;
    topo.resident[t] = IsResident(tensors[t].kind);
  }
}

namespace {

std::string Assignments(const std::vector<std::pair<std::string, int64_t>>& values) {
  std::string out;
  for (const auto& [name, value] : values)
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", name, value);
  return out;
}

// "op \"ID\": FIELD frozen at V by the symbolic export at batch=2, seq=8 (not
// multilinear in batch); at batch=64 it may be larger".
std::string ExportWarningText(const ExportWarning& w,
                              const std::vector<std::pair<std::string, int64_t>>& moved) {
  std::string symbols;
  for (const std::string& s : w.symbols) symbols += (symbols.empty() ? "" : ", ") + s;
  const std::string at = Assignments(w.exported_at);
  if (w.kind == ExportWarning::Kind::kDropped)
    return fmt::format(
        "op \"{}\": {} dropped by the symbolic export at {} (not multilinear in {}); at {} memplan "
        "estimates it from the op type and shapes",
        w.op, w.field, at, symbols, Assignments(moved));
  const bool bytes = w.field.size() > 6 && w.field.compare(w.field.size() - 6, 6, "_bytes") == 0 &&
                     w.value < 9.2e18;
  const std::string value =
      bytes ? FormatBytes(static_cast<int64_t>(w.value)) : fmt::format("{:g}", w.value);
  return fmt::format(
      "op \"{}\": {} frozen at {} by the symbolic export at {} (not multilinear in {}); at {} it "
      "may be larger",
      w.op, w.field, value, at, symbols, Assignments(moved));
}

}  // namespace

std::vector<std::string> ExportWarningsInEffect(const Graph& g, size_t limit) {
  std::vector<std::string> out;
  size_t more = 0;
  for (const ExportWarning& w : g.export_warnings) {
    std::vector<std::pair<std::string, int64_t>> moved;
    for (const std::string& s : w.symbols) {
      int64_t exported = -1, now = -1;
      for (const auto& [name, value] : w.exported_at)
        if (name == s) exported = value;
      for (const auto& [name, value] : g.symbols)
        if (name == s) now = value;
      if (exported >= 0 && now >= 0 && now != exported) moved.emplace_back(s, now);
    }
    if (moved.empty()) continue;
    if (out.size() < limit)
      out.push_back(ExportWarningText(w, moved));
    else
      ++more;
  }
  if (more > 0)
    out.push_back(fmt::format(
        "and {} more op{} whose numbers the symbolic export froze or dropped (the graph's "
        "source.warnings)",
        more, more == 1 ? "" : "s"));
  return out;
}

}  // namespace memplan
