#include "analyzer/plan/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "analyzer/base/file_io.h"
#include "analyzer/base/json_util.h"
#include "analyzer/base/units.h"
#include "analyzer/ir/op_table.h"

namespace memplan {
namespace {

// a / b, or 0 for a device preset with a zero rate (never inf or NaN).
double Over(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

bool FindDevicePreset(std::string_view name, DevicePreset* out) {
  for (const DevicePreset& d : kDevicePresets) {
    if (EqualsIgnoreCase(name, d.name)) {
      *out = d;
      return true;
    }
  }
  return false;
}

std::string DevicePresetNames() {
  std::string names;
  for (const DevicePreset& d : kDevicePresets) {
    if (!names.empty()) names += ", ";
    names += d.name;
  }
  return names;
}

const char* CostUnit(const CostModel& model) {
  return model.objective == Objective::kTime ? "time_us" : "flops";
}

bool IsViewOnly(const Graph& g, const Op& op) {
  if (op.outputs.empty()) return false;
  for (int out : op.outputs) {
    if (!g.IsView(out)) return false;
    int base = g.tensors[out].base;
    bool of_input = std::any_of(op.inputs.begin(), op.inputs.end(),
                                [&](int in) { return g.tensors[in].base == base; });
    if (!of_input) return false;
  }
  return true;
}

double BytesMoved(const Graph& g, const Op& op) {
  if (IsViewOnly(g, op)) return 0.0;
  // Distinct operands, then their logical sizes summed per buffer and capped
  // at the buffer's size: x and a view of x read one buffer once, while a
  // slice of a large buffer reads only the slice. Ordered containers fix
  // the summation order, hence the result.
  std::set<int> operands(op.inputs.begin(), op.inputs.end());
  operands.insert(op.outputs.begin(), op.outputs.end());
  std::map<int, double> per_buffer;
  for (int t : operands) per_buffer[g.tensors[t].base] += static_cast<double>(g.tensors[t].bytes);
  double total = 0.0;
  for (const auto& [base, bytes] : per_buffer)
    total += std::min(bytes, static_cast<double>(g.tensors[base].bytes));
  return total;
}

namespace {

// The measured time of op (an element of g.ops) in model, or -1.
double MeasuredTime(const Graph& g, const Op& op, const CostModel& model) {
  if (model.measured_us.empty() || g.ops.empty()) return -1;
  std::less<const Op*> before;
  const Op* first = g.ops.data();
  if (before(&op, first) || !before(&op, first + g.ops.size())) return -1;
  size_t i = static_cast<size_t>(&op - first);
  return i < model.measured_us.size() ? model.measured_us[i] : -1;
}

}  // namespace

double SacDispatchCost(const CostModel& model) {
  if (model.objective != Objective::kTime) return 0;
  return model.sac_dispatch_us >= 0 ? model.sac_dispatch_us : model.device.sac_dispatch_us;
}

double OpCost(const Graph& g, const Op& op, const CostModel& model) {
  if (model.objective == Objective::kTime) {
    double measured = MeasuredTime(g, op, model);
    if (measured >= 0) return measured;
  }
  if (model.objective == Objective::kTime && op.time_us >= 0) return op.time_us;
  if (IsViewOnly(g, op)) return 0.0;
  double flops = EstimateFlops(g, op);  // op.flops when given
  double bytes = BytesMoved(g, op);
  if (model.objective == Objective::kFlops) return flops > 0 ? flops : bytes / 4.0;
  double seconds =
      std::max(Over(flops, model.device.peak_flops), Over(bytes, model.device.bandwidth));
  return seconds * 1e6;
}

std::vector<double> OpCosts(const Graph& g, const CostModel& model) {
  std::vector<double> costs;
  costs.reserve(g.ops.size());
  for (const Op& op : g.ops) costs.push_back(OpCost(g, op, model));
  return costs;
}

bool IsMemoryBound(const Graph& g, const Op& op, const DevicePreset& device) {
  if (IsViewOnly(g, op)) return true;
  double bytes = BytesMoved(g, op);
  if (bytes <= 0) return false;
  return Over(bytes, device.bandwidth) >= Over(EstimateFlops(g, op), device.peak_flops);
}

namespace {

using json = nlohmann::json;
using json_util::Found;
using json_util::PointerToken;

bool CostsFail(const std::string& file, const std::string& pointer, const std::string& message,
               std::string* err) {
  *err = fmt::format("{}: {}: {}", file, pointer.empty() ? "(root)" : pointer, message);
  return false;
}

// An optional string member.
bool OptionalString(const json& doc, const std::string& file, const char* key, std::string* out,
                    std::string* err) {
  auto it = doc.find(key);
  if (it == doc.end()) return true;
  if (!it->is_string())
    return CostsFail(file, std::string("/") + key,
                     fmt::format("expected a string, found {}", Found(*it)), err);
  *out = it->get<std::string>();
  return true;
}

}  // namespace

bool ParseCostsJson(const std::string& text, const std::string& file, MeasuredCosts* out,
                    std::string* err) {
  *out = MeasuredCosts();
  std::string depth_err;
  if (!CheckJsonDepth(text, kMaxJsonDepth, &depth_err)) {
    *err = fmt::format("{}: {}; expected at most {} levels of arrays and objects", file, depth_err,
                       kMaxJsonDepth);
    return false;
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const std::exception& e) {
    *err = fmt::format("{}: invalid JSON: {}", file, json_util::ExceptionText(e));
    return false;
  }
  if (!doc.is_object())
    return CostsFail(file, "", fmt::format("expected an object, found {}", Found(doc)), err);
  const char* kFormat = "\"memplan.costs/1\"";
  auto format = doc.find("format");
  if (format == doc.end())
    return CostsFail(file, "/format", fmt::format("missing; expected {}", kFormat), err);
  if (!format->is_string() || *format != "memplan.costs/1")
    return CostsFail(file, "/format",
                     fmt::format("unsupported format {}; expected {}", Found(*format), kFormat),
                     err);
  auto unit = doc.find("unit");
  if (unit == doc.end())
    return CostsFail(file, "/unit", "missing; expected \"us\" (microseconds)", err);
  if (!unit->is_string() || *unit != "us")
    return CostsFail(file, "/unit",
                     fmt::format("found {}; expected \"us\" (microseconds)", Found(*unit)), err);
  if (!OptionalString(doc, file, "graph", &out->graph, err) ||
      !OptionalString(doc, file, "backend", &out->backend, err) ||
      !OptionalString(doc, file, "device", &out->device, err))
    return false;
  auto ops = doc.find("ops");
  if (ops == doc.end())
    return CostsFail(file, "/ops", "missing; expected an object of op id -> microseconds", err);
  if (!ops->is_object())
    return CostsFail(
        file, "/ops",
        fmt::format("expected an object of op id -> microseconds, found {}", Found(*ops)), err);
  for (auto it = ops->begin(); it != ops->end(); ++it) {
    const json& v = it.value();
    bool ok = v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0;
    if (!ok)
      return CostsFail(
          file, "/ops/" + PointerToken(it.key()),
          fmt::format("expected a finite number of microseconds >= 0, found {}", Found(v)), err);
    out->ops.emplace_back(it.key(), v.get<double>());
  }
  return true;
}

bool LoadCostsFile(const std::string& path, MeasuredCosts* out, std::string* err) {
  std::string text;
  if (!ReadFile(path, &text, err)) return false;
  return ParseCostsJson(text, path, out, err);
}

bool ApplyMeasuredCosts(const Graph& g, const MeasuredCosts& costs, const std::string& file,
                        CostModel* model, std::vector<std::string>* warnings, std::string* err) {
  model->measured_us.assign(g.ops.size(), -1.0);
  std::vector<std::string> unknown;
  size_t matched = 0;
  for (const auto& [id, us] : costs.ops) {
    int o = g.FindOp(id);
    if (o < 0) {
      unknown.push_back(id);
      continue;
    }
    if (model->measured_us[o] < 0) ++matched;
    model->measured_us[o] = us;
  }
  if (matched == 0) {
    model->measured_us.clear();
    *err = fmt::format(
        "{}: /ops: no op of graph \"{}\" has a time ({} ops listed{}); expected the op ids of "
        "its joint graph, as `memplan profile --emit-costs` writes them",
        file, g.name, costs.ops.size(),
        unknown.empty() ? "" : fmt::format(", e.g. \"{}\"", unknown.front()));
    return false;
  }
  if (!unknown.empty())
    warnings->push_back(fmt::format("{}: {} op(s) not in graph \"{}\" are ignored, e.g. \"{}\"",
                                    file, unknown.size(), g.name, unknown.front()));
  if (matched < g.ops.size())
    warnings->push_back(fmt::format(
        "{}: {} of {} ops have no measured time; their cost is estimated (time_us or roofline)",
        file, g.ops.size() - matched, g.ops.size()));
  return true;
}

}  // namespace memplan
