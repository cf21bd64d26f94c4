#include "profiler/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>

#include "kernels/touch.h"

namespace memplan {
namespace {

std::string CudaText(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

std::string VersionText(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

int64_t SteadyNs() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}
  ~CudaBackend() override {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  bool Init(std::string* err) {
    cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreate(&start_);
    if (e == cudaSuccess) e = cudaEventCreate(&stop_);
    if (e != cudaSuccess) return Fail("creating the stream and events", e, err);
    return true;
  }

  const char* Name() const override { return "cuda"; }

  bool Allocate(int64_t bytes, void** ptr, std::string* err) override {
    cudaError_t e = options_.allocator == CudaAllocator::kAsync
                        ? cudaMallocAsync(ptr, static_cast<size_t>(bytes), stream_)
                        : cudaMalloc(ptr, static_cast<size_t>(bytes));
    if (e != cudaSuccess) {
      *ptr = nullptr;
      return Fail(fmt::format("{} of {} bytes", AllocName(), bytes), e, err);
    }
    if (options_.allocation_log)
      options_.allocation_log->push_back({reinterpret_cast<uint64_t>(*ptr), bytes});
    return true;
  }

  bool Free(void* ptr, int64_t bytes, std::string* err) override {
    cudaError_t e =
        options_.allocator == CudaAllocator::kAsync ? cudaFreeAsync(ptr, stream_) : cudaFree(ptr);
    if (e != cudaSuccess) return Fail(fmt::format("{} of {} bytes", FreeName(), bytes), e, err);
    return true;
  }

  bool Fill(void* ptr, int64_t bytes, std::string* err) override {
    cudaError_t e = cudaMemsetAsync(ptr, 1, static_cast<size_t>(bytes), stream_);
    return e == cudaSuccess || Fail("cudaMemsetAsync", e, err);
  }

  bool RunOp(const OpLaunch& launch, std::string* err) override {
    cudaError_t e = cudaEventRecord(start_, stream_);
    for (const Operand& in : launch.inputs)
      if (e == cudaSuccess) e = kernels::LaunchRead(in.ptr, in.bytes, stream_);
    if (e == cudaSuccess) e = kernels::LaunchCompute(launch.flops, stream_);
    for (const Operand& out : launch.outputs)
      if (e == cudaSuccess) e = kernels::LaunchWrite(out.ptr, out.bytes, stream_);
    if (e == cudaSuccess && launch.workspace.ptr)
      e = kernels::LaunchWrite(launch.workspace.ptr, launch.workspace.bytes, stream_);
    if (e == cudaSuccess) e = cudaEventRecord(stop_, stream_);
    if (e != cudaSuccess) return Fail("launching the op's kernels", e, err);
    timed_ = true;
    return true;
  }

  bool Sync(std::string* err) override {
    cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) return Fail("cudaStreamSynchronize", e, err);
    if (timed_) {
      timed_ = false;
      float ms = 0;
      e = cudaEventElapsedTime(&ms, start_, stop_);
      if (e != cudaSuccess) return Fail("cudaEventElapsedTime", e, err);
      last_op_us_ = ms * 1000.0;
    }
    return true;
  }

  double LastOpUs() const override { return last_op_us_; }
  int64_t NowNs() override { return options_.clock_ns ? options_.clock_ns() : SteadyNs(); }
  AllocationCounter& Counter() override { return counter_; }

  // One allocation of 1 MiB, a fill, one op (read, compute, write) and the
  // free, synchronized; then cudaMemGetInfo once.
  bool WarmUp(std::string* err) override {
    constexpr int64_t kBytes = 1 << 20;
    void* p = nullptr;
    if (!Allocate(kBytes, &p, err)) return false;
    OpLaunch launch;
    launch.name = "warm-up";
    launch.inputs.push_back({p, kBytes});
    launch.outputs.push_back({p, kBytes});
    launch.flops = 1e6;
    bool ok = Fill(p, kBytes, err) && RunOp(launch, err) && Sync(err);
    std::string free_err;
    bool freed = Free(p, kBytes, &free_err);
    if (ok && !freed) *err = free_err;
    ok = ok && freed && Sync(err);
    int64_t used = 0;
    DeviceUsedBytes(&used);
    return ok;
  }

  bool DeviceUsedBytes(int64_t* used) override {
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    *used = static_cast<int64_t>(total - free_bytes);
    return true;
  }

 private:
  const char* AllocName() const {
    return options_.allocator == CudaAllocator::kAsync ? "cudaMallocAsync" : "cudaMalloc";
  }
  const char* FreeName() const {
    return options_.allocator == CudaAllocator::kAsync ? "cudaFreeAsync" : "cudaFree";
  }
  // Records `what: <CUDA error>` and clears the error if it is not sticky.
  bool Fail(const std::string& what, cudaError_t e, std::string* err) {
    *err = what + ": " + CudaText(e);
    cudaGetLastError();
    return false;
  }

  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool timed_ = false;
  double last_op_us_ = 0;
  AllocationCounter counter_;
};

}  // namespace

bool ProbeCudaDevice(std::string* err) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *err = "no CUDA GPU: " + CudaText(e);
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    *err = "no CUDA GPU: the driver reports no device";
    return false;
  }
  return true;
}

bool DescribeCudaDevice(CudaDeviceInfo* info, std::string* err) {
  if (!ProbeCudaDevice(err)) return false;
  cudaError_t e = cudaSetDevice(0);
  cudaDeviceProp prop{};
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, 0);
  int driver = 0, runtime = 0;
  if (e == cudaSuccess) e = cudaDriverGetVersion(&driver);
  if (e == cudaSuccess) e = cudaRuntimeGetVersion(&runtime);
  if (e != cudaSuccess) {
    *err = "no CUDA GPU: " + CudaText(e);
    cudaGetLastError();
    return false;
  }
  info->device = "cuda:0";
  info->name = prop.name;
  info->driver_version = VersionText(driver);
  info->runtime_version = VersionText(runtime);
  info->total_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  return true;
}

bool OpenCudaBackend(const CudaBackendOptions& options, std::unique_ptr<Backend>* backend,
                     CudaDeviceInfo* info, std::string* err) {
  if (!DescribeCudaDevice(info, err)) return false;
  if (options.allocator == CudaAllocator::kAsync) {
    int pools = 0;
    cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0);
    if (!pools) {
      *err = "no CUDA GPU: device 0 has no stream-ordered allocator (cudaMallocAsync)";
      return false;
    }
  }
  auto b = std::make_unique<CudaBackend>(options);
  if (!b->Init(err)) return false;
  *backend = std::move(b);
  return true;
}

}  // namespace memplan
