// The CUDA backend: one device buffer per tensor buffer through cudaMalloc /
// cudaFree (allocator "default") or cudaMallocAsync / cudaFreeAsync on the
// backend's one stream (allocator "async"); WarmUp loads every kernel once;
// per op, the kernels of
// kernels/touch.h read every input, write every output and the workspace and
// spend the op's flops, timed with CUDA events. Only built when
// MEMPLAN_CUDA_ENABLED; this header needs no CUDA headers.
#ifndef MEMPLAN_PROFILER_CUDA_BACKEND_H_
#define MEMPLAN_PROFILER_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler/backend.h"
#include "profiler/cupti_records.h"

namespace memplan {

enum class CudaAllocator { kDefault, kAsync };

struct CudaBackendOptions {
  CudaAllocator allocator = CudaAllocator::kDefault;
  // The clock NowNs reads (e.g. CUPTI's, to share its time base); null: the
  // host's steady clock.
  int64_t (*clock_ns)() = nullptr;
  // When set, every allocation's address and requested bytes are appended
  // here in order (to check CUPTI's records against); the warm-up's too.
  std::vector<RequestedAllocation>* allocation_log = nullptr;
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

// Device 0's name, memory and the driver's and runtime's versions
// (ProbeCudaDevice first); creates the context.
bool DescribeCudaDevice(CudaDeviceInfo* info, std::string* err);

// Opens device 0 (DescribeCudaDevice first).
bool OpenCudaBackend(const CudaBackendOptions& options, std::unique_ptr<Backend>* backend,
                     CudaDeviceInfo* info, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_CUDA_BACKEND_H_
