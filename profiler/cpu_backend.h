// The CPU backend: real host allocations through a counting allocator, and
// ops that really read their inputs and write their outputs and workspace,
// so every byte the program holds is committed memory. It runs everywhere
// (CI included) and its measured peak is the simulator's prediction exactly.
#ifndef MEMPLAN_PROFILER_CPU_BACKEND_H_
#define MEMPLAN_PROFILER_CPU_BACKEND_H_

#include <cstdint>
#include <string>

#include "profiler/backend.h"

namespace memplan {

struct CpuBackendOptions {
  // Read every input byte and write every output byte (off: allocate only;
  // counting is the same, tests run faster).
  bool touch = true;
  // Refuse an allocation that would take live bytes above this (0: no cap),
  // as a device of that size would. RunProfile caps at 90% of physical memory.
  int64_t capacity_bytes = 0;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options = {}) : options_(options) {}

  const char* Name() const override { return "cpu"; }
  bool Allocate(int64_t bytes, void** ptr, std::string* err) override;
  bool Free(void* ptr, int64_t bytes, std::string* err) override;
  bool Fill(void* ptr, int64_t bytes, std::string* err) override;
  bool RunOp(const OpLaunch& launch, std::string* err) override;
  bool Sync(std::string* err) override { return true; }
  double LastOpUs() const override { return last_op_us_; }
  int64_t NowNs() override;
  AllocationCounter& Counter() override { return counter_; }

  // A checksum of everything read, so the reads cannot be optimized away.
  uint64_t checksum() const { return checksum_; }
  // Host allocations made and not freed (by count, for leak checks).
  int64_t outstanding() const { return outstanding_; }

 private:
  CpuBackendOptions options_;
  AllocationCounter counter_;
  double last_op_us_ = 0;
  uint64_t checksum_ = 0;
  int64_t outstanding_ = 0;
};

// Physical memory of this machine in bytes, or 0 when unknown.
int64_t PhysicalMemoryBytes();

// The model name from /proc/cpuinfo, or "unknown CPU".
std::string CpuDeviceName();

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_CPU_BACKEND_H_
