// What this memplan can measure here: how it was built (CUDA, ONNX, the
// CUPTI headers), which libcupti it would load and the GPU it would use.
// Sees the build's compile definitions, the environment and the driver;
// returns a plain report, never fails (what is missing says why in *_error).
// `memplan doctor` prints it; the GPU check records it first.
#ifndef MEMPLAN_PROFILER_ENVIRONMENT_H_
#define MEMPLAN_PROFILER_ENVIRONMENT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace memplan {

// Invariants: cupti_library empty iff cupti_error non-empty (when
// cuda_built); device_name empty iff device_error non-empty (when
// cuda_built). Without CUDA, every CUPTI and device field is empty.
struct EnvironmentReport {
  std::string memplan_version;
  bool cuda_built = false, onnx_built = false;
  std::string cuda_built_runtime;  // CUDART_VERSION of the build, "13.0"
  uint32_t cupti_built_version = 0;
  std::vector<std::string> cupti_candidates;  // where CUPTI is looked for, in order
  std::string cupti_library, cupti_error;
  uint32_t cupti_version = 0;
  std::string device_name, driver_version, runtime_version, device_error;
  int64_t device_total_bytes = 0;
};

// `probe_device`: also open the GPU (creates a CUDA context).
EnvironmentReport ProbeEnvironment(bool probe_device);

std::string EnvironmentJson(const EnvironmentReport& e);
std::string EnvironmentText(const EnvironmentReport& e);

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_ENVIRONMENT_H_
