// The whole device: what a training step needs beyond its tensors, so that
// "does it fit on an 80 GB H100?" is answered for the GPU, not the allocator.
//
// What it sees: a device preset (h100, h200, a100) with overrides, and the
// reserved peak of the caching allocator model (alloc/reserved.h). It never
// sees the graph.
//
// What it returns: the library workspaces that PyTorch allocates through the
// caching allocator once and keeps (cuBLAS, cuBLASLt), as byte sizes for the
// replay to hold from the start, and DeviceTotal: the reserved peak plus the
// memory outside the allocator (the CUDA context), against the capacity.
//
// Where it falls short: the CUDA context cannot be derived, only measured
// (it grows with the kernels loaded, the driver and CUDA_MODULE_LOADING);
// its default is an estimate, named as one in every report, until the GPU
// check (profiler/gpu_check.sh) measures it. One stream (one cuBLAS handle),
// no NCCL buffers, no other processes. Workspaces are held from before the
// first step; PyTorch allocates them at the first matmul.
#ifndef MEMPLAN_ANALYZER_ALLOC_DEVICE_MEMORY_H_
#define MEMPLAN_ANALYZER_ALLOC_DEVICE_MEMORY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/alloc/caching_allocator.h"

namespace memplan::alloc {

// Capacities: the total PyTorch's out-of-memory message reports
// ("GPU 0 has a total capacity of ... GiB"), i.e. cudaMemGetInfo's total.
// Public logs of 80 GB parts (H100 and A100) show 79.11 to 79.33 GiB by
// variant, ECC and driver; of H200 (141 GB), 139.80 GiB.
inline constexpr int64_t kCapacity80GB = 81050 * kMiB;   // 79.15 GiB
inline constexpr int64_t kCapacityH200 = 143155 * kMiB;  // 139.80 GiB
// CUDA context with lazy module loading (PyTorch's default since 1.13): an
// estimate (a process holding only its context and a few tensors shows
// 0.5-0.6 GiB in nvidia-smi on H100/H200). Measured-only; override it.
inline constexpr int64_t kCudaContextEstimate = 600 * kMiB;
// PyTorch's cuBLAS workspace per handle and stream
// (aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize): the
// CUBLAS_WORKSPACE_CONFIG default ":4096:2:16:8" (2 x 4096 KiB + 8 x 16 KiB)
// before sm90, ":4096:8" (32 MiB) on sm90 (H100, H200).
inline constexpr int64_t kCublasWorkspaceDefault = 4096 * 1024 * 2 + 16 * 1024 * 8;
inline constexpr int64_t kCublasWorkspaceSm90 = 4096 * 1024 * 8;

struct DeviceMemory {
  std::string name;
  int64_t capacity_bytes = 0;
  int64_t cuda_context_bytes = kCudaContextEstimate;
  bool cuda_context_is_estimate = true;  // false once overridden
  int64_t cublas_workspace_bytes = kCublasWorkspaceDefault;
  // cuBLASLt's own workspace; 0 when it shares cuBLAS's (recent PyTorch).
  int64_t cublaslt_workspace_bytes = 0;
};

// The preset of `name` (case-insensitive): false when there is none.
bool FindDeviceMemory(std::string_view name, DeviceMemory* out);
// "h100, h200, a100".
std::string DeviceMemoryNames();

// Applies "key=value,..." overrides: capacity, cuda_context,
// cublas_workspace, cublaslt_workspace (sizes as --budget takes them) and
// cublas_workspace_config (CUBLAS_WORKSPACE_CONFIG syntax, ":SIZE_KiB:COUNT"
// repeated). False with a message naming the key; *out is left alone then.
bool ParseDeviceConf(std::string_view text, DeviceMemory* out, std::string* err);

// The blocks PyTorch's libraries take from the caching allocator and keep.
std::vector<int64_t> LibraryWorkspaces(const DeviceMemory& device);

// Invariant: total_bytes == reserved_peak_bytes + cuda_context_bytes; fits ==
// (total_bytes <= capacity_bytes).
struct DeviceTotal {
  int64_t reserved_peak_bytes = 0;  // includes LibraryWorkspaces
  int64_t cuda_context_bytes = 0;
  int64_t total_bytes = 0;
  int64_t capacity_bytes = 0;
  bool fits = false;
};
DeviceTotal TotalOnDevice(const DeviceMemory& device, int64_t reserved_peak_bytes);

}  // namespace memplan::alloc

#endif  // MEMPLAN_ANALYZER_ALLOC_DEVICE_MEMORY_H_
