#include "analyzer/alloc/device_memory.h"

#include <fmt/format.h>

#include <charconv>

#include "analyzer/base/units.h"

namespace memplan::alloc {
namespace {

DeviceMemory Preset(const char* name, int64_t capacity, int64_t cublas) {
  DeviceMemory d;
  d.name = name;
  d.capacity_bytes = capacity;
  d.cublas_workspace_bytes = cublas;
  return d;
}

const DeviceMemory* Presets(size_t* n) {
  static const DeviceMemory presets[] = {
      Preset("h100", kCapacity80GB, kCublasWorkspaceSm90),
      Preset("h200", kCapacityH200, kCublasWorkspaceSm90),
      Preset("a100", kCapacity80GB, kCublasWorkspaceDefault),
  };
  *n = std::size(presets);
  return presets;
}

// CUBLAS_WORKSPACE_CONFIG: ":SIZE_KiB:COUNT" repeated; the bytes it reserves.
bool ParseCublasConfig(std::string_view text, int64_t* bytes, std::string* why) {
  int64_t total = 0;
  std::vector<int64_t> numbers;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != ':') break;
    ++i;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
    if (ec != std::errc() || v < 0 || v > (int64_t{1} << 30)) break;
    i = static_cast<size_t>(end - text.data());
    numbers.push_back(v);
  }
  if (i != text.size() || numbers.empty() || numbers.size() % 2 != 0) {
    *why = fmt::format("expected \":SIZE_KiB:COUNT\" pairs (e.g. :4096:8), found \"{}\"", text);
    return false;
  }
  for (size_t k = 0; k < numbers.size(); k += 2) total += numbers[k] * 1024 * numbers[k + 1];
  *bytes = total;
  return true;
}

}  // namespace

bool FindDeviceMemory(std::string_view name, DeviceMemory* out) {
  size_t n = 0;
  const DeviceMemory* presets = Presets(&n);
  for (size_t i = 0; i < n; ++i) {
    if (EqualsIgnoreCase(name, presets[i].name)) {
      *out = presets[i];
      return true;
    }
  }
  return false;
}

std::string DeviceMemoryNames() {
  size_t n = 0;
  const DeviceMemory* presets = Presets(&n);
  std::string names;
  for (size_t i = 0; i < n; ++i) names += (i ? ", " : "") + presets[i].name;
  return names;
}

bool ParseDeviceConf(std::string_view text, DeviceMemory* out, std::string* err) {
  DeviceMemory d = *out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    std::string why;
    int64_t bytes = 0;
    if (key == "cublas_workspace_config") {
      if (!ParseCublasConfig(value, &bytes, &why)) {
        *err = fmt::format("{}: {}", key, why);
        return false;
      }
      d.cublas_workspace_bytes = bytes;
      continue;
    }
    int64_t* field = key == "capacity"             ? &d.capacity_bytes
                     : key == "cuda_context"       ? &d.cuda_context_bytes
                     : key == "cublas_workspace"   ? &d.cublas_workspace_bytes
                     : key == "cublaslt_workspace" ? &d.cublaslt_workspace_bytes
                                                   : nullptr;
    if (field == nullptr) {
      *err = fmt::format(
          "unknown key \"{}\": expected capacity, cuda_context, cublas_workspace, "
          "cublas_workspace_config or cublaslt_workspace (key=value, comma-separated)",
          key);
      return false;
    }
    if (!ParseSize(value, &bytes, &why)) {
      *err = fmt::format("{}: {}", key, why);
      return false;
    }
    *field = bytes;
    if (key == "cuda_context") d.cuda_context_is_estimate = false;
  }
  *out = d;
  return true;
}

std::vector<int64_t> LibraryWorkspaces(const DeviceMemory& device) {
  std::vector<int64_t> out;
  if (device.cublas_workspace_bytes > 0) out.push_back(device.cublas_workspace_bytes);
  if (device.cublaslt_workspace_bytes > 0) out.push_back(device.cublaslt_workspace_bytes);
  return out;
}

DeviceTotal TotalOnDevice(const DeviceMemory& device, int64_t reserved_peak_bytes) {
  DeviceTotal t;
  t.reserved_peak_bytes = reserved_peak_bytes;
  t.cuda_context_bytes = device.cuda_context_bytes;
  t.total_bytes = reserved_peak_bytes + device.cuda_context_bytes;
  t.capacity_bytes = device.capacity_bytes;
  t.fits = t.total_bytes <= t.capacity_bytes;
  return t;
}

}  // namespace memplan::alloc
