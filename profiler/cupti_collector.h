// CUPTI collection for the CUDA backend: the Activity API with MEMORY2
// (CUpti_ActivityMemory4: every device allocation and release), CONCURRENT_KERNEL,
// MEMCPY and MEMSET, plus RUNTIME, DRIVER and EXTERNAL_CORRELATION to tag each
// record with the step that caused it: BeginStep/EndStep push and pop the id,
// and CUPTI writes an external-correlation record ahead of each runtime or
// driver API record, whose correlation id the memory and kernel records
// share (without RUNTIME/DRIVER there would be none). A release record frees
// what was allocated at its address. Buffers are 8-byte aligned, 8 MiB each;
// Stop synchronizes the device, then flushes. Dropped records are counted,
// never hidden.
//
// CUPTI itself is loaded at run time (profiler/cupti_api.h). One collector
// per process at a time (CUPTI's callbacks are global). Only built when
// MEMPLAN_CUDA_ENABLED; this header needs no CUPTI headers.
#ifndef MEMPLAN_PROFILER_CUPTI_COLLECTOR_H_
#define MEMPLAN_PROFILER_CUPTI_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/backend.h"
#include "profiler/cupti_records.h"

namespace memplan {

struct KernelRecord {
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
  StepTag tag;
};

// Invariants: every vector is sorted by time (memory: ts_ns; kernels and
// transfers: start_ns); untagged_memory counts the memory records whose tag
// has repeat -1.
struct CuptiRecords {
  std::vector<MemoryRecord> memory;   // device memory only
  std::vector<KernelRecord> kernels;  // kernels, memcpys and memsets ("[memset]")
  int64_t dropped = 0;                // records CUPTI could not store
  int64_t untagged_memory = 0;        // memory records without a step tag
  int64_t api_records = 0;            // runtime and driver API records
  int64_t external_records = 0;       // external-correlation records of memplan's kind
};

struct CuptiInfo {
  std::string library;  // the libcupti loaded
  uint32_t version = 0, built_version = 0;
};

class CuptiCollector : public StepObserver {
 public:
  // Loads CUPTI, registers the buffer callbacks and enables the activity
  // kinds. Call before the first CUDA allocation. On failure *err starts
  // with "CUPTI unavailable: " and names the library or the CUPTI call.
  bool Start(std::string* err);
  // Tags what follows with repeat r (0-based).
  void SetRepeat(int r) { repeat_ = r; }
  void BeginStep(int step) override;
  void EndStep(int step) override;
  // cudaDeviceSynchronize, cuptiActivityFlushAll, disables the kinds and
  // returns every record since Start.
  bool Stop(CuptiRecords* out, std::string* err);
  // Which CUPTI was loaded (after a successful Start).
  const CuptiInfo& info() const { return info_; }

  // CUPTI's clock (the time base of its records), in integer nanoseconds.
  static int64_t NowNs();

 private:
  int repeat_ = 0;
  bool started_ = false;
  CuptiInfo info_;
};

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_CUPTI_COLLECTOR_H_
