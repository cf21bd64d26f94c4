#include "analyzer/cost_model.h"

#include <algorithm>
#include <map>
#include <set>

#include "analyzer/op_table.h"

namespace memplan {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

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

double OpCost(const Graph& g, const Op& op, const CostModel& model) {
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

}  // namespace memplan
