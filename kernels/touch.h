// Kernels the CUDA backend launches for each op: memory-bound kernels that
// read an input buffer or write an output buffer whole (so the memory is
// really used, at the bandwidth a real op would need), and a compute loop
// sized by the op's flops (so recomputation costs real time).
// All are launched on the given stream and return the launch error.
#ifndef MEMPLAN_KERNELS_TOUCH_H_
#define MEMPLAN_KERNELS_TOUCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace memplan::kernels {

// Reads `bytes` (> 0) from ptr (16-byte aligned) and folds them into a
// device-side sink.
cudaError_t LaunchRead(const void* ptr, int64_t bytes, cudaStream_t stream);
// Writes `bytes` (> 0) at ptr (16-byte aligned) with a value derived from the
// sink, so every write depends on earlier reads.
cudaError_t LaunchWrite(void* ptr, int64_t bytes, cudaStream_t stream);
// Spends about `flops` single-precision operations (an FMA counts 2); none
// below 1. Capped at kMaxComputeFlops.
cudaError_t LaunchCompute(double flops, cudaStream_t stream);
constexpr double kMaxComputeFlops = 1e14;

}  // namespace memplan::kernels

#endif  // MEMPLAN_KERNELS_TOUCH_H_
