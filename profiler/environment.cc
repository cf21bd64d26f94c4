#include "profiler/environment.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analyzer/base/json_util.h"
#include "analyzer/base/version.h"
#include "analyzer/report/analyze_report.h"
#if MEMPLAN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "profiler/cuda_backend.h"
#include "profiler/cupti_api.h"
#endif

namespace memplan {

EnvironmentReport ProbeEnvironment(bool probe_device) {
  EnvironmentReport e;
  e.memplan_version = MemplanVersion();
#ifdef MEMPLAN_HAVE_ONNX
  e.onnx_built = true;
#endif
#if MEMPLAN_HAVE_CUDA
  e.cuda_built = true;
  e.cuda_built_runtime = fmt::format("{}.{}", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
  e.cupti_built_version = CUPTI_API_VERSION;
  e.cupti_candidates = CuptiCandidates();
  if (const CuptiApi* api = LoadCupti(&e.cupti_error)) {
    e.cupti_library = api->library;
    e.cupti_version = api->version;
  }
  if (probe_device) {
    CudaDeviceInfo info;
    if (DescribeCudaDevice(&info, &e.device_error)) {
      e.device_name = info.name;
      e.driver_version = info.driver_version;
      e.runtime_version = info.runtime_version;
      e.device_total_bytes = info.total_bytes;
    }
  } else {
    e.device_error = "not probed";
  }
#endif
  return e;
}

std::string EnvironmentJson(const EnvironmentReport& e) {
  using ojson = nlohmann::ordered_json;
  auto or_null = [](const std::string& s) { return s.empty() ? ojson(nullptr) : ojson(s); };
  ojson doc = {{"format", "memplan.doctor/1"},
               {"memplan_version", e.memplan_version},
               {"cuda_built", e.cuda_built},
               {"onnx_built", e.onnx_built}};
  if (e.cuda_built) {
    doc["cuda_built_runtime"] = e.cuda_built_runtime;
    doc["cupti"] = {{"built_version", e.cupti_built_version},
                    {"candidates", e.cupti_candidates},
                    {"library", or_null(e.cupti_library)},
                    {"version", e.cupti_version ? ojson(e.cupti_version) : ojson(nullptr)},
                    {"error", or_null(e.cupti_error)}};
    doc["device"] = {
        {"name", or_null(e.device_name)},
        {"driver_version", or_null(e.driver_version)},
        {"runtime_version", or_null(e.runtime_version)},
        {"total_bytes", e.device_name.empty() ? ojson(nullptr) : ojson(e.device_total_bytes)},
        {"error", or_null(e.device_error)}};
  } else {
    doc["cupti"] = nullptr;
    doc["device"] = nullptr;
  }
  return json_util::Dump(doc, 2) + "\n";
}

std::string EnvironmentText(const EnvironmentReport& e) {
  std::string out = fmt::format("memplan {}\n", e.memplan_version);
  out += fmt::format("  onnx      {}\n", e.onnx_built ? "built in" : "not built");
  if (!e.cuda_built)
    return out + "  cuda      not built (no CUDA toolkit with CUPTI at build time)\n";
  out += fmt::format("  cuda      built with runtime {} (static), CUPTI headers {}\n",
                     e.cuda_built_runtime, e.cupti_built_version);
  if (e.cupti_library.empty())
    out += "  cupti     " + e.cupti_error + "\n";
  else
    out += fmt::format("  cupti     {} (version {})\n", e.cupti_library, e.cupti_version);
  if (e.device_name.empty())
    out += "  device    " + e.device_error + "\n";
  else
    out += fmt::format("  device    {} ({} bytes), driver {}, runtime {}\n", e.device_name,
                       e.device_total_bytes, e.driver_version, e.runtime_version);
  return out;
}

}  // namespace memplan
