#include <cmath>

#include "kernels/touch.h"

namespace memplan::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 2048;
constexpr int kComputeBlocks = 1056;  // 8 per SM on a 132-SM H100/H200

// Read results land here only when a checksum hits a magic value (never in
// practice), so the reads cannot be optimized away and cost no atomics.
__device__ unsigned long long g_sink;

__global__ void memplan_read(const uint4* p, size_t n16, const unsigned char* tail, int ntail) {
  unsigned int acc = 0;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16;
       i += stride) {
    uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int i = 0; i < ntail; ++i) acc += tail[i];
  if (acc == 0x9e3779b9u) atomicAdd(&g_sink, 1ull);
}

__global__ void memplan_write(uint4* p, size_t n16, unsigned char* tail, int ntail) {
  unsigned int v = static_cast<unsigned int>(g_sink) | 0x01010101u;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride)
    p[i] = make_uint4(v, v, v, v);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int i = 0; i < ntail; ++i) tail[i] = static_cast<unsigned char>(v);
}

// Four independent FMA chains per thread: 8 flops an iteration.
__global__ void memplan_compute(long long iters) {
  float a = threadIdx.x * 1e-3f, b = 1.0f, c = 0.5f, d = 0.25f;
  const float m = 0.999999f, k = 1e-7f;
  for (long long i = 0; i < iters; ++i) {
    a = fmaf(a, m, k);
    b = fmaf(b, m, k);
    c = fmaf(c, m, k);
    d = fmaf(d, m, k);
  }
  if (a + b + c + d == 12345.0f) atomicAdd(&g_sink, 1ull);
}

int Blocks(size_t n16) {
  size_t blocks = (n16 + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<int>(blocks);
}

}  // namespace

cudaError_t LaunchRead(const void* ptr, int64_t bytes, cudaStream_t stream) {
  size_t n16 = static_cast<size_t>(bytes) / 16;
  const unsigned char* base = static_cast<const unsigned char*>(ptr);
  memplan_read<<<Blocks(n16), kThreads, 0, stream>>>(
      static_cast<const uint4*>(ptr), n16, base + n16 * 16, static_cast<int>(bytes - n16 * 16));
  return cudaGetLastError();
}

cudaError_t LaunchWrite(void* ptr, int64_t bytes, cudaStream_t stream) {
  size_t n16 = static_cast<size_t>(bytes) / 16;
  unsigned char* base = static_cast<unsigned char*>(ptr);
  memplan_write<<<Blocks(n16), kThreads, 0, stream>>>(
      static_cast<uint4*>(ptr), n16, base + n16 * 16, static_cast<int>(bytes - n16 * 16));
  return cudaGetLastError();
}

cudaError_t LaunchCompute(double flops, cudaStream_t stream) {
  if (!(flops >= 1)) return cudaSuccess;
  if (flops > kMaxComputeFlops) flops = kMaxComputeFlops;
  double threads = static_cast<double>(kComputeBlocks) * kThreads;
  long long iters = static_cast<long long>(std::ceil(flops / (8.0 * threads)));
  memplan_compute<<<kComputeBlocks, kThreads, 0, stream>>>(iters);
  return cudaGetLastError();
}

}  // namespace memplan::kernels
