// The CUDA backend: one device buffer per tensor buffer through cudaMalloc /
// cudaFree (allocator "default") or cudaMallocAsync / cudaFreeAsync on the
// backend's one stream (allocator "async"); per op, the kernels of
// kernels/touch.h read every input, write every output and the workspace and
// spend the op's flops, timed with CUDA events. Only built when
// MEMPLAN_CUDA_ENABLED; this header needs no CUDA headers.
#ifndef MEMPLAN_PROFILER_CUDA_BACKEND_H_
#define MEMPLAN_PROFILER_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "profiler/backend.h"

namespace memplan {

enum class CudaAllocator { kDefault, kAsync };

struct CudaBackendOptions {
  CudaAllocator allocator = CudaAllocator::kDefault;
  // The clock NowUs reads (e.g. CUPTI's, to share its time base); null: the
  // host's steady clock.
  double (*clock_us)() = nullptr;
};

struct CudaDeviceInfo {
  std::string device;          // "cuda:0"
  std::string name;            // "NVIDIA H200"
  std::string driver_version;  // "13.0": the CUDA version the driver supports
  std::string runtime_version;
  int64_t total_bytes = 0;
};

// Whether a CUDA device can be used; otherwise *err is one line naming the
// CUDA error ("no CUDA GPU: ..."). Creates no context.
bool ProbeCudaDevice(std::string* err);

// Opens device 0 (ProbeCudaDevice first).
bool OpenCudaBackend(const CudaBackendOptions& options, std::unique_ptr<Backend>* backend,
                     CudaDeviceInfo* info, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_CUDA_BACKEND_H_
