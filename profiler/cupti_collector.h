// CUPTI collection for the CUDA backend: the Activity API with MEMORY2
// (CUpti_ActivityMemory4: every device allocation and release), CONCURRENT_KERNEL,
// MEMCPY and MEMSET, plus RUNTIME and EXTERNAL_CORRELATION to tag each record
// with the step that caused it (BeginStep/EndStep push and pop the id). A
// release record frees what was allocated at its address. Buffers are
// 8-byte aligned, 8 MiB each; Stop synchronizes the device, then flushes.
// Dropped records are counted, never hidden.
//
// One collector per process at a time (CUPTI's callbacks are global).
// Only built when MEMPLAN_CUDA_ENABLED; this header needs no CUPTI headers.
#ifndef MEMPLAN_PROFILER_CUPTI_COLLECTOR_H_
#define MEMPLAN_PROFILER_CUPTI_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/backend.h"

namespace memplan {

// Which repeat and step a record belongs to; step -1 is the set-up of the
// resident tensors, repeat -1 an untagged record.
struct StepTag {
  int repeat = -1;
  int step = -1;
};

struct MemoryRecord {
  uint64_t ts_ns = 0;
  int64_t delta = 0;  // +bytes for an allocation, -bytes for a release
  StepTag tag;
};

struct KernelRecord {
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
  StepTag tag;
};

// Invariants: every vector is sorted by time (memory: ts_ns; kernels and
// transfers: start_ns).
struct CuptiRecords {
  std::vector<MemoryRecord> memory;   // device memory only
  std::vector<KernelRecord> kernels;  // kernels, memcpys and memsets ("[memset]")
  int64_t dropped = 0;                // records CUPTI could not store
  int64_t untagged_memory = 0;        // memory records without a step tag
};

class CuptiCollector : public StepObserver {
 public:
  // Registers the buffer callbacks and enables the activity kinds. Call
  // before the first CUDA allocation. On failure *err names the CUPTI call
  // and its result.
  bool Start(std::string* err);
  // Tags what follows with repeat r (0-based).
  void SetRepeat(int r) { repeat_ = r; }
  void BeginStep(int step) override;
  void EndStep(int step) override;
  // cudaDeviceSynchronize, cuptiActivityFlushAll, disables the kinds and
  // returns every record since Start.
  bool Stop(CuptiRecords* out, std::string* err);

  // CUPTI's clock (the time base of its records), in microseconds.
  static double NowUs();

 private:
  int repeat_ = 0;
  bool started_ = false;
};

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_CUPTI_COLLECTOR_H_
