#include "analyzer/import/graph_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "analyzer/base/file_io.h"
#include "analyzer/base/json_scan.h"
#include "analyzer/base/json_util.h"
#include "analyzer/base/mapped_file.h"
#include "analyzer/ir/shape_expr.h"

namespace memplan {
namespace {

using json = nlohmann::json;
using json_util::Found;
using json_util::IsNonNegativeInteger;
using json_util::PointerToken;
using json_util::Quote;
using json_util::TypeName;
using ojson = nlohmann::ordered_json;

// A JSON object as a DOM, or as the flat key/value list the streaming reader
// collects for each tensor and op (no map to build). With duplicate keys the
// last one wins, as in the DOM.
class ObjectView {
 public:
  ObjectView(const json& object) : json_(&object) {}  // NOLINT: implicit on purpose
  ObjectView(const std::string* keys, const json* values, size_t n)
      : keys_(keys), values_(values), n_(n) {}

  const json* Find(std::string_view key) const {
    if (json_ != nullptr) {
      auto it = json_->find(key);
      return it == json_->end() ? nullptr : &*it;
    }
    for (size_t i = n_; i-- > 0;)
      if (std::string_view(keys_[i]) == key) return &values_[i];  // sizes first
    return nullptr;
  }
  template <class F>
  void ForEach(F f) const {
    if (json_ != nullptr) {
      for (auto it = json_->begin(); it != json_->end(); ++it) f(it.key(), it.value());
      return;
    }
    for (size_t i = 0; i < n_; ++i) f(keys_[i], values_[i]);
  }

 private:
  const json* json_ = nullptr;
  const std::string* keys_ = nullptr;
  const json* values_ = nullptr;
  size_t n_ = 0;
};

// Collects the first error; every check returns false once one is recorded.
class Reader {
 public:
  Reader(const std::string& file, std::string* err) : file_(file), err_(err) {}

  bool Fail(const std::string& pointer, const std::string& message) {
    *err_ = fmt::format("{}: {}: {}", file_, pointer.empty() ? "(root)" : pointer, message);
    return false;
  }
  bool Missing(const std::string& pointer, const char* expected) {
    return Fail(pointer, fmt::format("missing; expected {}", expected));
  }
  bool WrongType(const std::string& pointer, const json& j, const char* expected) {
    return Fail(pointer, fmt::format("expected {}, found {}", expected, Found(j)));
  }

  // Optional string member; `out` (a std::string or an InternedString)
  // untouched when absent.
  template <class Text>
  bool OptString(ObjectView obj, const std::string& ptr, const char* key, Text* out) {
    const json* it = obj.Find(key);
    if (!it) return true;
    if (!it->is_string()) return WrongType(ptr + "/" + key, *it, "a string");
    *out = it->get_ref<const std::string&>();
    return true;
  }
  template <class Text>
  bool ReqString(ObjectView obj, const std::string& ptr, const char* key, Text* out,
                 bool non_empty) {
    const json* it = obj.Find(key);
    const char* expected = non_empty ? "a non-empty string" : "a string";
    if (!it) return Missing(ptr + "/" + key, expected);
    if (!it->is_string() || (non_empty && it->get_ref<const std::string&>().empty()))
      return WrongType(ptr + "/" + key, *it, expected);
    *out = it->get_ref<const std::string&>();
    return true;
  }
  bool OptNonNegativeNumber(ObjectView obj, const std::string& ptr, const char* key, double* out) {
    const json* it = obj.Find(key);
    if (!it) return true;
    if (!it->is_number() || !(it->get<double>() >= 0) || !std::isfinite(it->get<double>()))
      return WrongType(ptr + "/" + key, *it, "a non-negative number");
    *out = it->get<double>();
    return true;
  }

 private:
  std::string file_;
  std::string* err_;
};

std::string ExtraKeys(ObjectView obj, std::initializer_list<std::string_view> known) {
  json extra;
  obj.ForEach([&](const std::string& key, const json& value) {
    for (std::string_view k : known)
      if (key == k) return;
    extra[key] = value;  // a sorted object: the same text for any key order
  });
  return extra.empty() ? std::string() : json_util::Dump(extra);
}

class GraphParser {
 public:
  GraphParser(const std::string& file, const GraphLoadOptions& options, Graph* g, std::string* err)
      : r_(file, err), file_(file), options_(options), g_(g), err_(err) {}

  // The document arrives member by member from StreamingReader. Small
  // members are kept in root_; the elements of "tensors" and "ops" are parsed
  // as they arrive when what they depend on came first (format and symbols
  // before tensors, tensors before ops: the order memplan and its exporters
  // write), else kept in root_ and parsed at the end. Either way the checks
  // and their messages are the same.
  bool OnRootNotObject(const json& value) { return r_.WrongType("", value, "an object"); }

  bool OnMember(const std::string& key, json value) {
    if (!Claim(key)) return false;
    bool format = key == "format";
    root_[key] = std::move(value);
    return format ? ParseFormat(root_) : true;
  }

  bool CanStream(const std::string& key) const {
    if (key == "tensors") return root_.contains("format") && root_.contains("symbols");
    return key == "ops" && tensors_done_;
  }

  // "/tensors/12", in a buffer reused from element to element (valid until
  // the next call).
  const std::string& ElementPointer(std::string_view array, size_t i) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, i).ptr;
    pointer_.assign(array);
    pointer_.append(digits, end);
    return pointer_;
  }

  // At most `objects` tensors and ops: the document's count of '{'.
  void SetObjectBound(size_t objects) { object_bound_ = objects; }

  bool BeginElements(const std::string& key) {
    if (!Claim(key)) return false;
    // Reserved, not touched: address space costs nothing until it is used,
    // and the vectors never move as they grow. Tensors get room for the
    // backward too (LowerToJoint appends about 1.5 gradient tensors per
    // forward tensor and op), so lowering does not move the forward's.
    if (key == "tensors") {
      g_->tensors.reserve(2 * object_bound_);
      g_->tensor_index.Reserve(object_bound_);
    } else {
      g_->ops.reserve(object_bound_);
      g_->op_index.Reserve(object_bound_);
    }
    return key != "tensors" || ParseSymbols(root_);
  }

  bool OnElement(const std::string& key, size_t i, const json& value) {
    return key == "tensors" ? ParseTensor(i, value) : ParseOp(i, value);
  }
  bool OnFlatElement(const std::string& key, size_t i, ObjectView object) {
    return key == "tensors" ? ParseTensorObject(i, object) : ParseOpObject(i, object);
  }

  bool EndElements(const std::string& key) {
    if (key == "ops") {
      ops_done_ = true;
      return true;
    }
    tensors_done_ = true;
    return EndTensors();
  }

  bool Finish() {
    if (!root_.contains("format") && !ParseFormat(root_)) return false;
    if (!ParseHeader(root_)) return false;
    if (!tensors_done_ && !(ParseSymbols(root_) && ParseTensors(root_))) return false;
    if (!ops_done_ && !ParseOps(root_)) return false;
    return ParseOutputs(root_) && ResolveTensorRefs() && CheckOps() && ParseExportWarnings(root_) &&
           FinalizeGraph();
  }

 private:
  bool ParseFormat(const json& doc) {
    auto it = doc.find("format");
    if (it == doc.end()) return r_.Missing("/format", "\"memplan.graph/1\"");
    if (!it->is_string()) return r_.WrongType("/format", *it, "\"memplan.graph/1\"");
    if (*it != "memplan.graph/1")
      return r_.Fail("/format", fmt::format("unsupported format {}; expected \"memplan.graph/1\"",
                                            Found(*it)));
    return true;
  }

  bool ParseHeader(const json& doc) {
    if (!r_.OptString(doc, "", "name", &g_->name)) return false;
    auto it = doc.find("source");
    if (it != doc.end()) {
      if (!it->is_object()) return r_.WrongType("/source", *it, "an object");
      g_->source = json_util::Dump(*it);
      auto device = it->find("target_device");
      if (device != it->end()) {
        if (!device->is_string() || (*device != "cpu" && *device != "cuda"))
          return r_.Fail("/source/target_device",
                         fmt::format("unknown target device {}; expected \"cpu\" or \"cuda\"",
                                     Found(*device)));
        g_->target_device = device->get<std::string>();
      }
      auto held = it->find("outputs_held");
      if (held != it->end()) {
        if (!held->is_boolean())
          return r_.WrongType("/source/outputs_held", *held, "true or false");
        g_->outputs_held = held->get<bool>();
      }
      auto compile = it->find("compile");
      if (compile != it->end()) {
        if (!compile->is_string() || (*compile != "aot_eager" && *compile != "inductor"))
          return r_.Fail("/source/compile",
                         fmt::format("unknown torch.compile backend {}; expected \"aot_eager\" "
                                     "or \"inductor\"",
                                     Found(*compile)));
        g_->compile = compile->get<std::string>();
      }
    }
    return true;
  }

  // source.warnings (graph.h ExportWarning), once the ops are known.
  bool ParseExportWarnings(const json& doc) {
    auto source = doc.find("source");
    if (source == doc.end()) return true;
    auto it = source->find("warnings");
    if (it == source->end()) return true;
    if (!it->is_array()) return r_.WrongType("/source/warnings", *it, "an array of warnings");
    for (size_t i = 0; i < it->size(); ++i)
      if (!ParseExportWarning(fmt::format("/source/warnings/{}", i), (*it)[i])) return false;
    return true;
  }

  bool ParseExportWarning(const std::string& ptr, const json& j) {
    if (!j.is_object()) return r_.WrongType(ptr, j, "an object");
    ExportWarning w;
    auto kind = j.find("kind");
    if (kind == j.end()) return r_.Missing(ptr + "/kind", "\"frozen\" or \"dropped\"");
    if (*kind == "frozen") {
      w.kind = ExportWarning::Kind::kFrozen;
    } else if (*kind == "dropped") {
      w.kind = ExportWarning::Kind::kDropped;
    } else {
      return r_.Fail(ptr + "/kind", fmt::format("unknown kind {}; expected \"frozen\" or "
                                                "\"dropped\"",
                                                Found(*kind)));
    }
    if (!r_.ReqString(j, ptr, "op", &w.op, true)) return false;
    if (g_->FindOp(w.op) < 0)
      return r_.Fail(ptr + "/op",
                     fmt::format("unknown op {}; expected the id of an op in /ops", Quote(w.op)));
    if (!r_.ReqString(j, ptr, "field", &w.field, true) ||
        !r_.OptNonNegativeNumber(j, ptr, "value", &w.value))
      return false;
    if (w.kind == ExportWarning::Kind::kFrozen && !j.contains("value"))
      return r_.Missing(ptr + "/value", "the frozen value (a non-negative number)");
    auto symbols = j.find("symbols");
    if (symbols == j.end()) return r_.Missing(ptr + "/symbols", "a non-empty array of symbols");
    if (!symbols->is_array() || symbols->empty())
      return r_.WrongType(ptr + "/symbols", *symbols, "a non-empty array of symbols");
    for (size_t k = 0; k < symbols->size(); ++k) {
      const json& name = (*symbols)[k];
      if (!name.is_string() || name.get_ref<const std::string&>().empty())
        return r_.WrongType(fmt::format("{}/symbols/{}", ptr, k), name, "a symbol name");
      w.symbols.push_back(name.get<std::string>());
    }
    auto at = j.find("exported_at");
    if (at == j.end()) return r_.Missing(ptr + "/exported_at", "an object of symbol values");
    if (!at->is_object())
      return r_.WrongType(ptr + "/exported_at", *at, "an object of symbol values");
    for (auto v = at->begin(); v != at->end(); ++v) {
      if (!IsNonNegativeInteger(v.value()))
        return r_.WrongType(ptr + "/exported_at/" + PointerToken(v.key()), v.value(),
                            "a non-negative integer");
      w.exported_at.emplace_back(v.key(), v.value().get<int64_t>());
    }
    for (const std::string& name : w.symbols)
      if (!at->contains(name))
        return r_.Fail(ptr + "/exported_at",
                       fmt::format("no value for {}; expected one for each name in {}/symbols",
                                   Quote(name), ptr));
    g_->export_warnings.push_back(std::move(w));
    return true;
  }

  bool Claim(const std::string& key) {
    if (claimed_.insert(key).second) return true;
    return r_.Fail("/" + PointerToken(key), "appears twice; expected each member once");
  }

  bool ParseSymbols(const json& doc) {
    auto it = doc.find("symbols");
    if (it != doc.end()) {
      if (!it->is_object()) return r_.WrongType("/symbols", *it, "an object");
      for (auto s = it->begin(); s != it->end(); ++s) {
        if (!IsNonNegativeInteger(s.value()))
          return r_.WrongType("/symbols/" + PointerToken(s.key()), s.value(),
                              "a non-negative integer");
        g_->symbols.emplace_back(s.key(), s.value().get<int64_t>());
      }
    }
    for (const auto& [name, value] : options_.symbol_overrides) {
      bool found = false;
      for (auto& [n, v] : g_->symbols) {
        if (n == name) {
          v = value;
          found = true;
        }
      }
      if (!found) {
        g_->symbols.emplace_back(name, value);
        undeclared_overrides_.insert(name);
      }
    }
    return true;
  }

  // A dimension expression (a shape entry, flops, workspace_bytes) at `ptr`,
  // evaluated with the graph's symbols; the symbols it reads count as used.
  bool Expression(std::string_view text, const std::string& ptr, int64_t* value) {
    std::vector<std::string> used;
    std::string error;
    if (!EvalShapeExpr(text, g_->symbols, value, &used, &error)) return r_.Fail(ptr, error);
    used_symbols_.insert(used.begin(), used.end());
    return true;
  }

  bool ParseShape(ObjectView t, const std::string& ptr, Tensor* tensor) {
    const json* it = t.Find("shape");
    if (!it) return r_.Missing(ptr + "/shape", "an array of dimensions");
    if (!it->is_array()) return r_.WrongType(ptr + "/shape", *it, "an array of dimensions");
    dims_.clear();
    for (size_t i = 0; i < it->size(); ++i) {
      const json& d = (*it)[i];
      auto dptr = [&] { return fmt::format("{}/shape/{}", ptr, i); };
      Dim dim;
      if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0) {
        return r_.Fail(dptr(), fmt::format("negative dimension {}; expected an integer >= 0 or a "
                                           "symbol name",
                                           d.get<int64_t>()));
      } else if (IsNonNegativeInteger(d)) {
        dim.value = d.get<int64_t>();
      } else if (d.is_string()) {
        dim.symbol = d.get<std::string>();
        if (!Expression(dim.symbol, dptr(), &dim.value)) return false;
      } else {
        return r_.WrongType(dptr(), d, "an integer >= 0 or a symbol name");
      }
      dims_.push_back(dim);
    }
    tensor->shape = Shape(dims_);
    return true;
  }

  bool ParseTensors(const json& doc) {
    auto it = doc.find("tensors");
    if (it == doc.end()) return r_.Missing("/tensors", "an array of tensors");
    if (!it->is_array()) return r_.WrongType("/tensors", *it, "an array of tensors");
    g_->tensors.reserve(it->size());
    g_->tensor_index.Reserve(it->size());
    kind_given_.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i)
      if (!ParseTensor(i, (*it)[i])) return false;
    return EndTensors();
  }

  bool ParseTensor(size_t i, const json& t) {
    if (!t.is_object()) return r_.WrongType(fmt::format("/tensors/{}", i), t, "an object");
    return ParseTensorObject(i, t);
  }

  bool ParseTensorObject(size_t i, ObjectView t) {
    const std::string& ptr = ElementPointer("/tensors/", i);
    Tensor& tensor = g_->tensors.emplace_back();  // position i
    if (!r_.ReqString(t, ptr, "id", &tensor.id, true)) return false;
    int first = g_->IndexTensor(static_cast<int>(i));
    if (first >= 0)
      return r_.Fail(ptr + "/id", fmt::format("duplicate tensor id {}; first defined at "
                                              "/tensors/{}",
                                              Quote(tensor.id), first));
    if (!ParseShape(t, ptr, &tensor)) return false;
    std::string dtype;
    const json* d = t.Find("dtype");
    if (!d) return r_.Missing(ptr + "/dtype", "a dtype name");
    if (!d->is_string()) return r_.WrongType(ptr + "/dtype", *d, "a dtype name");
    if (!ParseDType(d->get<std::string>(), &tensor.dtype))
      return r_.Fail(ptr + "/dtype",
                     fmt::format("unknown dtype {}; expected one of {}", Found(*d), DTypeList()));
    const json* k = t.Find("kind");
    bool kind_given = k != nullptr;
    if (kind_given) {
      if (!k->is_string() || !ParseTensorKind(k->get<std::string>(), &tensor.kind))
        return r_.Fail(ptr + "/kind",
                       fmt::format("unknown kind {}; expected one of input, parameter, buffer, "
                                   "activation, gradient, optimizer_state, temporary",
                                   Found(*k)));
    }
    kind_given_.push_back(kind_given);
    std::string alias, grad;
    if (!r_.OptString(t, ptr, "alias_of", &alias) || !r_.OptString(t, ptr, "grad_of", &grad))
      return false;
    alias_ids_.push_back(std::move(alias));
    grad_ids_.push_back(std::move(grad));
    tensor.extra = ExtraKeys(t, {"id", "shape", "dtype", "kind", "alias_of", "grad_of"});
    // Bytes, checked here so the error points at the tensor.
    int64_t n = 1;
    for (const Dim& dim : tensor.shape) {
      if (!CheckedMul(n, dim.value, &n))
        return r_.Fail(ptr + "/shape",
                       "element count overflows 64-bit arithmetic; expected a "
                       "tensor under 2^63 bytes");
    }
    int64_t bytes;
    if (!CheckedMul(n, DTypeSize(tensor.dtype), &bytes))
      return r_.Fail(ptr + "/shape", fmt::format("byte count ({} elements of {}) overflows "
                                                 "64-bit arithmetic; expected a tensor under "
                                                 "2^63 bytes",
                                                 n, DTypeName(tensor.dtype)));
    if (!CheckedAdd(total_bytes_, bytes, &total_bytes_))
      return r_.Fail(ptr,
                     "the bytes of all tensors together overflow 64-bit arithmetic; "
                     "expected a graph under 2^61 bytes");
    return true;
  }

  // Checks that need every tensor: each --set names a symbol in use.
  bool EndTensors() {
    for (const auto& name : undeclared_overrides_) {
      if (!used_symbols_.count(name)) {
        std::string names;
        for (const auto& [n, v] : g_->symbols)
          if (!undeclared_overrides_.count(n)) names += (names.empty() ? "" : ", ") + n;
        *err_ = fmt::format(
            "{}: --set {}: the graph has no symbol {}; expected {}", file_, name, Quote(name),
            names.empty() ? "no --set: the graph declares no symbols" : "one of: " + names);
        return false;
      }
    }
    return true;
  }

  bool TensorRef(const json& j, const std::string& ptr, int* out) {
    if (!j.is_string()) return r_.WrongType(ptr, j, "a tensor id");
    int t = g_->FindTensor(j.get_ref<const std::string&>());
    if (t < 0)
      return r_.Fail(ptr, fmt::format("unknown tensor {}; expected the id of a tensor in "
                                      "/tensors",
                                      Found(j)));
    *out = t;
    return true;
  }

  // Ops name their tensors mostly in the order /tensors declares them: the
  // tensor after the last one found, or that one, before the index (ids are
  // unique by now, so a match is the index's answer).
  int FindTensorNear(const std::string& id) {
    const std::vector<Tensor>& tensors = g_->tensors;
    for (int t : {last_ref_ + 1, last_ref_})
      if (t >= 0 && t < static_cast<int>(tensors.size()) && tensors[t].id == id)
        return last_ref_ = t;
    const int t = g_->FindTensor(id);
    if (t >= 0) last_ref_ = t;
    return t;
  }

  template <class Ids>  // std::vector<int> or TensorIds
  bool TensorList(ObjectView obj, const std::string& ptr, const char* key, bool required,
                  Ids* out) {
    const json* it = obj.Find(key);
    if (!it) return required ? r_.Missing(ptr + "/" + key, "an array of tensor ids") : true;
    if (!it->is_array()) return r_.WrongType(ptr + "/" + key, *it, "an array of tensor ids");
    out->reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      const json& j = (*it)[i];
      int t = j.is_string() ? FindTensorNear(j.get_ref<const std::string&>()) : -1;
      if (t < 0 && !TensorRef(j, fmt::format("{}/{}/{}", ptr, key, i), &t)) return false;
      out->push_back(t);
    }
    return true;
  }

  bool ParseOps(const json& doc) {
    auto it = doc.find("ops");
    if (it == doc.end()) return r_.Missing("/ops", "an array of ops");
    if (!it->is_array()) return r_.WrongType("/ops", *it, "an array of ops");
    g_->ops.reserve(it->size());
    g_->op_index.Reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i)
      if (!ParseOp(i, (*it)[i])) return false;
    return true;
  }

  bool ParseOp(size_t i, const json& o) {
    if (!o.is_object()) return r_.WrongType(fmt::format("/ops/{}", i), o, "an object");
    return ParseOpObject(i, o);
  }

  bool ParseOpObject(size_t i, ObjectView o) {
    const std::string& ptr = ElementPointer("/ops/", i);
    Op& op = g_->ops.emplace_back();  // position i
    if (!r_.ReqString(o, ptr, "id", &op.id, true)) return false;
    int first = g_->IndexOp(static_cast<int>(i));
    if (first >= 0)
      return r_.Fail(ptr + "/id", fmt::format("duplicate op id {}; first defined at /ops/{}",
                                              Quote(op.id), first));
    if (!r_.ReqString(o, ptr, "type", &op.type, true)) return false;
    if (!TensorList(o, ptr, "inputs", true, &op.inputs) ||
        !TensorList(o, ptr, "outputs", true, &op.outputs))
      return false;
    const json* ph = o.Find("phase");
    if (ph && (!ph->is_string() || !ParsePhase(ph->get<std::string>(), &op.phase)))
      return r_.Fail(ptr + "/phase", fmt::format("unknown phase {}; expected forward, "
                                                 "backward or optimizer",
                                                 Found(*ph)));
    const json* fl = o.Find("flops");
    if (fl && fl->is_string()) {  // a dimension expression: scales with --set
      int64_t flops = 0;
      if (!Expression(fl->get<std::string>(), ptr + "/flops", &flops)) return false;
      op.flops = static_cast<double>(flops);
    } else if (!r_.OptNonNegativeNumber(o, ptr, "flops", &op.flops)) {
      return false;
    }
    if (!r_.OptNonNegativeNumber(o, ptr, "time_us", &op.time_us)) return false;
    const json* ws = o.Find("workspace_bytes");
    if (ws) {
      if (ws->is_string()) {
        if (!Expression(ws->get<std::string>(), ptr + "/workspace_bytes", &op.workspace_bytes))
          return false;
      } else if (!IsNonNegativeInteger(*ws)) {
        return r_.WrongType(ptr + "/workspace_bytes", *ws,
                            "a non-negative integer or a dimension expression");
      } else {
        op.workspace_bytes = ws->get<int64_t>();
      }
      if (!CheckedAdd(total_bytes_, op.workspace_bytes, &total_bytes_))
        return r_.Fail(ptr + "/workspace_bytes",
                       "the bytes of all tensors and workspaces together overflow 64-bit "
                       "arithmetic; expected a graph under 2^61 bytes");
    }
    op.saves_given = o.Find("saves") != nullptr;
    if (!TensorList(o, ptr, "saves", false, &op.saves)) return false;
    const json* acc = o.Find("accumulate");
    if (acc) {
      if (!acc->is_boolean()) return r_.WrongType(ptr + "/accumulate", *acc, "a boolean");
      op.accumulate = acc->get<bool>();
    }
    if (!r_.OptString(o, ptr, "scope", &op.scope)) return false;
    op.extra = ExtraKeys(o, {"id", "type", "inputs", "outputs", "phase", "flops", "time_us",
                             "workspace_bytes", "saves", "accumulate", "scope"});
    return true;
  }

  bool ParseOutputs(const json& doc) { return TensorList(doc, "", "outputs", false, &g_->outputs); }

  // Kinds default from producers; then alias_of and grad_of are resolved.
  bool ResolveTensorRefs() {
    std::vector<int> producer(g_->tensors.size(), -1);
    for (size_t o = 0; o < g_->ops.size(); ++o)
      for (int out : g_->ops[o].outputs)
        if (producer[out] < 0) producer[out] = static_cast<int>(o);
    auto& tensors = g_->tensors;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (kind_given_[t]) continue;
      bool backward = producer[t] >= 0 && g_->ops[producer[t]].phase != Phase::kForward;
      tensors[t].kind =
          (backward || !grad_ids_[t].empty()) ? TensorKind::kGradient : TensorKind::kActivation;
    }
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::string& alias = alias_ids_[t];
      if (alias.empty()) continue;
      int base = g_->FindTensor(alias);
      if (base < 0)
        return r_.Fail(AliasPointer(t),
                       fmt::format("unknown tensor {}; expected the id of a tensor in "
                                   "/tensors",
                                   Quote(alias)));
      if (base == static_cast<int>(t))
        return r_.Fail(AliasPointer(t),
                       fmt::format("tensor {} is a view of itself; expected another "
                                   "tensor's id",
                                   Quote(alias)));
      tensors[t].alias_of = base;
    }
    // Cycles, without recursion: walk each chain, marking the tensors on it.
    std::vector<int> mark(tensors.size(), -1);
    for (size_t start = 0; start < tensors.size(); ++start) {
      int t = static_cast<int>(start);
      while (t >= 0 && mark[t] < 0) {
        mark[t] = static_cast<int>(start);
        t = tensors[t].alias_of;
      }
      if (t >= 0 && mark[t] == static_cast<int>(start)) {
        std::string chain = tensors[t].id;
        for (int u = tensors[t].alias_of; u != t; u = tensors[u].alias_of)
          chain += " -> " + tensors[u].id;
        chain += " -> " + tensors[t].id;
        return r_.Fail(AliasPointer(t),
                       fmt::format("alias cycle {}; expected a chain ending at a tensor that owns "
                                   "its memory",
                                   chain));
      }
    }
    for (size_t t = 0; t < tensors.size(); ++t) {
      int base = tensors[t].alias_of;
      if (base >= 0 && IsResident(tensors[t].kind) && !IsResident(tensors[base].kind))
        return r_.Fail(AliasPointer(t),
                       fmt::format("resident tensor {} ({}) is a view of {} ({}); expected a "
                                   "resident base",
                                   Quote(tensors[t].id), TensorKindName(tensors[t].kind),
                                   Quote(tensors[base].id), TensorKindName(tensors[base].kind)));
    }
    std::vector<int> gradient(tensors.size(), -1);
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::string& grad = grad_ids_[t];
      if (grad.empty()) continue;
      int of = g_->FindTensor(grad);
      if (of < 0)
        return r_.Fail(GradPointer(t),
                       fmt::format("unknown tensor {}; expected the id of a tensor in "
                                   "/tensors",
                                   Quote(grad)));
      if (of == static_cast<int>(t))
        return r_.Fail(GradPointer(t),
                       fmt::format("tensor {} is its own gradient; expected another "
                                   "tensor's id",
                                   Quote(grad)));
      if (tensors[t].kind != TensorKind::kGradient)
        return r_.Fail(GradPointer(t),
                       fmt::format("tensor {} has kind {}; expected kind gradient on "
                                   "a tensor with grad_of",
                                   Quote(tensors[t].id), TensorKindName(tensors[t].kind)));
      if (gradient[of] >= 0)
        return r_.Fail(GradPointer(t),
                       fmt::format("{} already has gradient {} (/tensors/{}); "
                                   "expected one gradient per tensor",
                                   Quote(grad), Quote(tensors[gradient[of]].id), gradient[of]));
      int64_t n_grad = Numel(tensors[t]), n_of = Numel(tensors[of]);
      if (n_grad != n_of)
        return r_.Fail(GradPointer(t),
                       fmt::format("gradient {} has {} elements but {} has {}; "
                                   "expected the same number",
                                   Quote(tensors[t].id), n_grad, Quote(grad), n_of));
      gradient[of] = static_cast<int>(t);
      tensors[t].grad_of = of;
    }
    return true;
  }

  static std::string AliasPointer(size_t t) { return fmt::format("/tensors/{}/alias_of", t); }
  static std::string GradPointer(size_t t) { return fmt::format("/tensors/{}/grad_of", t); }

  static int64_t Numel(const Tensor& t) {
    int64_t n = 1;
    for (const Dim& d : t.shape) n *= d.value;  // checked when parsed
    return n;
  }

  // Producers, resident writes, use before definition, views' bases.
  bool CheckOps() {
    auto& tensors = g_->tensors;
    std::vector<int> producer(tensors.size(), -1);
    for (size_t o = 0; o < g_->ops.size(); ++o) {
      for (size_t j = 0; j < g_->ops[o].outputs.size(); ++j) {
        int t = g_->ops[o].outputs[j];
        std::string ptr = fmt::format("/ops/{}/outputs/{}", o, j);
        if (producer[t] >= 0)
          return r_.Fail(
              ptr, fmt::format("tensor {} already produced by {} (/ops/{}); expected "
                               "one producer per tensor",
                               Quote(tensors[t].id), Quote(g_->ops[producer[t]].id), producer[t]));
        if (IsResident(tensors[t].kind))
          return r_.Fail(ptr, fmt::format("tensor {} has kind {}, which is resident; expected a "
                                          "tensor that an op produces",
                                          Quote(tensors[t].id), TensorKindName(tensors[t].kind)));
        producer[t] = static_cast<int>(o);
      }
    }
    auto available = [&](int t, size_t o, bool as_output) {
      if (IsResident(tensors[t].kind)) return true;
      return producer[t] >= 0 && (as_output ? producer[t] <= int(o) : producer[t] < int(o));
    };
    auto undefined = [&](int t, size_t o, const std::string& ptr) {
      if (producer[t] < 0)
        return r_.Fail(ptr, fmt::format("tensor {} is never produced and has kind {}; expected "
                                        "an output of an earlier op or a tensor of kind input, "
                                        "parameter, buffer or optimizer_state",
                                        Quote(tensors[t].id), TensorKindName(tensors[t].kind)));
      if (producer[t] == static_cast<int>(o))
        return r_.Fail(ptr, fmt::format("tensor {} is both an input and an output of this op; "
                                        "expected an op to read only tensors defined before it",
                                        Quote(tensors[t].id)));
      return r_.Fail(
          ptr, fmt::format("tensor {} is used before it is defined; its producer {} "
                           "is /ops/{} (ops must be listed in execution order, without "
                           "cycles)",
                           Quote(tensors[t].id), Quote(g_->ops[producer[t]].id), producer[t]));
    };
    for (size_t j = 0; j < g_->outputs.size(); ++j) {
      int t = g_->outputs[j];
      if (!IsResident(tensors[t].kind) && producer[t] < 0)
        return r_.Fail(fmt::format("/outputs/{}", j),
                       fmt::format("tensor {} is never produced and has kind {}; expected an "
                                   "output of an op or a resident tensor",
                                   Quote(tensors[t].id), TensorKindName(tensors[t].kind)));
    }
    for (size_t o = 0; o < g_->ops.size(); ++o) {
      const Op& op = g_->ops[o];
      for (size_t j = 0; j < op.inputs.size(); ++j)
        if (!available(op.inputs[j], o, false))
          return undefined(op.inputs[j], o, fmt::format("/ops/{}/inputs/{}", o, j));
      for (size_t j = 0; j < op.saves.size(); ++j)
        if (!available(op.saves[j], o, true))
          return undefined(op.saves[j], o, fmt::format("/ops/{}/saves/{}", o, j));
      for (size_t j = 0; j < op.outputs.size(); ++j) {
        int t = op.outputs[j];
        int base = tensors[t].alias_of;
        if (base >= 0 && !available(base, o, true))
          return r_.Fail(
              fmt::format("/ops/{}/outputs/{}", o, j),
              fmt::format("view {} of {} is produced before {} is defined; expected "
                          "its base to be defined first",
                          Quote(tensors[t].id), Quote(tensors[base].id), Quote(tensors[base].id)));
      }
    }
    return true;
  }

  bool FinalizeGraph() {
    std::string finalize_err;
    if (!g_->Finalize(&finalize_err)) {
      *err_ = fmt::format("{}: {}", file_, finalize_err);
      return false;
    }
    return true;
  }

  Reader r_;
  std::string file_;
  const GraphLoadOptions& options_;
  Graph* g_;
  std::string* err_;
  std::vector<bool> kind_given_;
  std::vector<Dim> dims_;  // the shape being parsed
  std::vector<std::string> alias_ids_, grad_ids_;
  json root_ = json::object();
  std::set<std::string> claimed_;
  bool tensors_done_ = false, ops_done_ = false;
  std::set<std::string> used_symbols_, undeclared_overrides_;
  int64_t total_bytes_ = 0;
  size_t object_bound_ = 0;
  int last_ref_ = -1;    // the tensor FindTensorNear found last
  std::string pointer_;  // ElementPointer's buffer
};

// SAX events to GraphParser: each top-level member, and each element of a
// streamed "tensors" or "ops" array, is built as a small DOM and handed over,
// so a large graph is never held as one JSON document.
class StreamingReader final : public nlohmann::json_sax<json> {
 public:
  explicit StreamingReader(GraphParser* parser) : parser_(parser) {}

  bool semantic_error() const { return semantic_error_; }
  const std::string& syntax_error() const { return syntax_error_; }

  bool null() override {
    return Scalar(json(nullptr), [](Builder& b) { return b.null(); });
  }
  bool boolean(bool v) override {
    return Scalar(json(v), [&](Builder& b) { return b.boolean(v); });
  }
  bool number_integer(number_integer_t v) override {
    return Scalar(json(v), [&](Builder& b) { return b.number_integer(v); });
  }
  bool number_unsigned(number_unsigned_t v) override {
    return Scalar(json(v), [&](Builder& b) { return b.number_unsigned(v); });
  }
  bool number_float(number_float_t v, const string_t& s) override {
    return Scalar(json(v), [&](Builder& b) { return b.number_float(v, s); });
  }
  bool string(string_t& v) override {
    if (builder_) return Forward(builder_->string(v));
    if (flat_array_) {
      AssignString(&FlatArrayElement(), v);
      return true;
    }
    if (flat_ && depth_ == 3) {
      AssignString(&flat_values_[flat_n_ - 1], v);
      return true;
    }
    return Scalar(json(v), nullptr);
  }
  bool binary(binary_t& v) override {
    if (builder_) return Forward(builder_->binary(v));
    return Scalar(json::binary(v), nullptr);
  }
  bool key(string_t& k) override {
    if (builder_) return Forward(builder_->key(k));
    if (flat_) {
      if (flat_keys_.size() <= flat_n_) {
        flat_keys_.emplace_back();
        flat_values_.emplace_back();
      }
      flat_keys_[flat_n_] = k;  // its value is assigned next, reusing the slot's storage
      ++flat_n_;
      return true;
    }
    key_ = k;
    return true;
  }
  bool start_object(std::size_t n) override { return Start(true, n); }
  bool start_array(std::size_t n) override { return Start(false, n); }
  bool end_object() override { return End(true); }
  bool end_array() override { return End(false); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    syntax_error_ = json_util::ExceptionText(e);
    return false;
  }

 private:
  using Builder = nlohmann::detail::json_sax_dom_parser<json>;

  // Reuses the string a slot already holds (no allocation once it is big enough).
  static void AssignString(json* slot, const std::string& v) {
    if (slot->is_string())
      slot->get_ref<std::string&>() = v;
    else
      *slot = v;
  }
  // The next element of the array member being filled, reused when it exists.
  json& FlatArrayElement() {
    json::array_t& array = flat_values_[flat_n_ - 1].get_ref<json::array_t&>();
    if (flat_array_n_ == array.size()) array.emplace_back();
    return array[flat_array_n_++];
  }

  bool Semantic(bool ok) {
    semantic_error_ = semantic_error_ || !ok;
    return ok;
  }
  bool Forward(bool ok) { return ok; }

  template <class F>
  bool Scalar(json value, F forward) {
    if (builder_) {
      if constexpr (!std::is_same_v<F, std::nullptr_t>) return Forward(forward(*builder_));
    }
    if (depth_ == 0) return Semantic(parser_->OnRootNotObject(value));
    if (depth_ == 1) return Semantic(parser_->OnMember(key_, std::move(value)));
    if (flat_array_) {
      FlatArrayElement() = std::move(value);
      return true;
    }
    if (flat_) {
      flat_values_[flat_n_ - 1] = std::move(value);
      return true;
    }
    return Semantic(parser_->OnElement(key_, index_++, value));  // depth 2: streamed element
  }

  bool Start(bool object, std::size_t n) {
    if (!builder_) {
      if (depth_ == 0) {
        if (!object) return Semantic(parser_->OnRootNotObject(json::array()));
        ++depth_;
        return true;
      }
      if (depth_ == 1 && !object && (key_ == "tensors" || key_ == "ops") &&
          parser_->CanStream(key_)) {
        streaming_ = true;
        index_ = 0;
        ++depth_;
        return Semantic(parser_->BeginElements(key_));
      }
      if (streaming_ && depth_ == 2 && object) {  // a tensor or op: collected flat
        flat_ = true;
        flat_n_ = 0;
        ++depth_;
        return true;
      }
      if (flat_ && depth_ == 3 && !object) {  // an array member: filled in place
        json& slot = flat_values_[flat_n_ - 1];
        if (!slot.is_array()) slot = json::array();
        flat_array_ = true;
        flat_array_n_ = 0;
        ++depth_;
        return true;
      }
      json& target = flat_array_ ? FlatArrayElement() : flat_ ? flat_values_[flat_n_ - 1] : built_;
      target = json();
      builder_.emplace(target, /*allow_exceptions=*/false);
      builder_depth_ = depth_;
    }
    ++depth_;
    return Forward(object ? builder_->start_object(n) : builder_->start_array(n));
  }

  bool End(bool object) {
    --depth_;
    if (builder_) {
      bool ok = object ? builder_->end_object() : builder_->end_array();
      if (!ok) return false;
      if (depth_ != builder_depth_) return true;
      builder_.reset();
      if (builder_depth_ == 1) return Semantic(parser_->OnMember(key_, std::move(built_)));
      if (builder_depth_ == 2) return Semantic(parser_->OnElement(key_, index_++, built_));
      return true;  // a member of a flat element or of its array, built in place
    }
    if (flat_array_ && depth_ == 3) {  // the end of an array member
      flat_values_[flat_n_ - 1].get_ref<json::array_t&>().resize(flat_array_n_);
      flat_array_ = false;
      return true;
    }
    if (flat_ && depth_ == 2) {
      flat_ = false;
      return Semantic(parser_->OnFlatElement(
          key_, index_++, ObjectView(flat_keys_.data(), flat_values_.data(), flat_n_)));
    }
    if (streaming_ && depth_ == 1) {
      streaming_ = false;
      return Semantic(parser_->EndElements(key_));
    }
    return true;  // the root object
  }

  GraphParser* parser_;
  std::optional<Builder> builder_;
  json built_;
  int depth_ = 0;          // open arrays and objects
  int builder_depth_ = 0;  // depth_ where the value being built started
  bool streaming_ = false;
  size_t index_ = 0;
  // The tensor or op being collected (flat_): its members, reused.
  bool flat_ = false;
  size_t flat_n_ = 0;
  // Filling an array member of the flat element in place: its slot's array,
  // of which flat_array_n_ elements are filled so far.
  bool flat_array_ = false;
  size_t flat_array_n_ = 0;
  std::vector<std::string> flat_keys_;
  std::vector<json> flat_values_;
  std::string key_;
  bool semantic_error_ = false;
  std::string syntax_error_;
};

}  // namespace

bool ParseGraph(std::string_view text, const std::string& file, const GraphLoadOptions& options,
                Graph* graph, std::string* err) {
  auto depth_error = [&](const std::string& what) {
    *err = fmt::format("{}: {}; expected at most {} levels of arrays and objects", file, what,
                       kMaxJsonDepth);
    return false;
  };
  {
    *graph = Graph();
    GraphParser parser(file, options, graph, err);
    parser.SetObjectBound(static_cast<size_t>(std::count(text.begin(), text.end(), '{')));
    StreamingReader reader(&parser);
    size_t deep_at = 0;
    ScanResult scan = ScanJson(text, &reader, kMaxJsonDepth, &deep_at);
    if (scan == ScanResult::kOk) return parser.Finish();
    if (scan == ScanResult::kStopped) return false;
    if (scan == ScanResult::kTooDeep)
      return depth_error(
          fmt::format("nesting deeper than {} levels at byte {}", kMaxJsonDepth, deep_at));
  }
  // A syntax error: parse again with nlohmann to report it in its words (and
  // any error in the input before it, as the fast scan would have). Its SAX
  // parser has no depth limit, so check the depth first.
  std::string depth_err;
  if (!CheckJsonDepth(text, kMaxJsonDepth, &depth_err)) return depth_error(depth_err);
  *graph = Graph();
  GraphParser parser(file, options, graph, err);
  StreamingReader reader(&parser);
  if (json::sax_parse(text.begin(), text.end(), &reader)) return parser.Finish();
  if (!reader.semantic_error())
    *err = fmt::format("{}: invalid JSON: {}", file,
                       reader.syntax_error().empty() ? "unexpected input" : reader.syntax_error());
  return false;
}

bool LoadGraphFile(const std::string& path, const GraphLoadOptions& options, Graph* graph,
                   std::string* err) {
  MappedFile file;
  if (!file.Open(path, err)) return false;
  return ParseGraph(file.view(), path, options, graph, err);
}

namespace {

ojson TensorJson(const Graph& g, const Tensor& t) {
  ojson jt;
  jt["id"] = t.id;
  ojson shape = ojson::array();
  for (const Dim& d : t.shape) {
    if (d.symbol.empty())
      shape.push_back(d.value);
    else
      shape.push_back(d.symbol.str());
  }
  jt["shape"] = std::move(shape);
  jt["dtype"] = DTypeName(t.dtype);
  jt["kind"] = TensorKindName(t.kind);
  if (t.alias_of >= 0) jt["alias_of"] = g.tensors[t.alias_of].id;
  if (t.grad_of >= 0) jt["grad_of"] = g.tensors[t.grad_of].id;
  if (!t.extra.empty()) {
    const ojson extra = ojson::parse(t.extra.view());
    for (const auto& [k, v] : extra.items()) jt[k] = v;
  }
  return jt;
}

ojson OpJson(const Graph& g, const Op& op) {
  ojson jo;
  jo["id"] = op.id;
  jo["type"] = op.type;
  ojson in = ojson::array(), out = ojson::array();
  for (int t : op.inputs) in.push_back(g.tensors[t].id);
  for (int t : op.outputs) out.push_back(g.tensors[t].id);
  jo["inputs"] = std::move(in);
  jo["outputs"] = std::move(out);
  jo["phase"] = PhaseName(op.phase);
  if (op.flops >= 0) jo["flops"] = op.flops;
  if (op.time_us >= 0) jo["time_us"] = op.time_us;
  if (op.workspace_bytes > 0) jo["workspace_bytes"] = op.workspace_bytes;
  if (op.saves_given) {
    ojson saves = ojson::array();
    for (int t : op.saves) saves.push_back(g.tensors[t].id);
    jo["saves"] = std::move(saves);
  }
  if (op.accumulate) jo["accumulate"] = true;
  if (!op.scope.empty()) jo["scope"] = op.scope;
  if (!op.extra.empty()) {
    const ojson extra = ojson::parse(op.extra.view());
    for (const auto& [k, v] : extra.items()) jo[k] = v;
  }
  return jo;
}

}  // namespace

void WriteGraphJson(const Graph& g, std::ostream& out) {
  out << "{\n \"format\": \"memplan.graph/1\",\n \"name\": " << json_util::Dump(ojson(g.name))
      << ",\n";
  if (!g.source.empty()) out << " \"source\": " << json_util::Dump(ojson::parse(g.source)) << ",\n";
  ojson symbols = ojson::object();
  for (const auto& [n, v] : g.symbols) symbols[n] = v;
  out << " \"symbols\": " << json_util::Dump(symbols) << ",\n \"tensors\": [";
  for (size_t t = 0; t < g.tensors.size(); ++t)
    out << (t ? ",\n  " : "\n  ") << json_util::Dump(TensorJson(g, g.tensors[t]));
  out << "\n ],\n \"ops\": [";
  for (size_t o = 0; o < g.ops.size(); ++o)
    out << (o ? ",\n  " : "\n  ") << json_util::Dump(OpJson(g, g.ops[o]));
  ojson outputs = ojson::array();
  for (int t : g.outputs) outputs.push_back(g.tensors[t].id);
  out << "\n ],\n \"outputs\": " << json_util::Dump(outputs) << "\n}\n";
}

std::string GraphToJson(const Graph& g) {
  std::ostringstream out;
  WriteGraphJson(g, out);
  return std::move(out).str();
}

}  // namespace memplan
