// memplan profile: runs a step program on a backend (repeatedly), collects
// what it measured (allocation counter, CUPTI records, driver memory), and
// summarizes it per step and per op, ready to set against the prediction.
//
// Backend choice: "cpu" always works; "cuda" needs a build with CUDA
// (BuiltWithCuda) and a GPU at run time, else kUnavailable with one line
// saying which ("no CUDA GPU: <CUDA error>" or "this memplan was built
// without CUDA"). "auto" takes cuda when both hold, else cpu, and says why in
// ProfileResult::notes.
#ifndef MEMPLAN_PROFILER_PROFILE_H_
#define MEMPLAN_PROFILER_PROFILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/sim/program.h"
#include "profiler/cpu_backend.h"
#include "profiler/cupti_records.h"

namespace memplan {

// Whether the CUDA backend and CUPTI collection were compiled in.
bool BuiltWithCuda();

enum class BackendChoice { kAuto, kCpu, kCuda };
bool ParseBackendChoice(std::string_view name, BackendChoice* out);

struct ProfileOptions {
  BackendChoice backend = BackendChoice::kAuto;
  bool async_allocator = false;  // cuda: cudaMallocAsync/cudaFreeAsync
  bool cupti = true;             // cuda: collect CUPTI activity records
  int repeat = 1;                // >= 1
  CpuBackendOptions cpu;
  std::vector<double> op_flops;  // compute spent per run (cuda), by op index
};

enum class ProfileStatus {
  kOk,
  kUnavailable,  // the backend cannot be used (exit 4)
  kRunFailed,    // the program failed on the device (out of memory, CUDA error)
};

// Measured time of one op, over every run in every repeat.
struct OpTiming {
  int op = -1;
  int runs = 0;            // per repeat
  int recompute_runs = 0;  // per repeat
  double time_us = 0;      // median time of one run
};

// A device activity (kernel, memset, memcpy) of the last repeat, relative to
// that repeat's start; step -1 when CUPTI could not tell which step.
struct KernelSpan {
  std::string name;
  int step = -1;
  double start_us = 0, dur_us = 0;
};

// Invariants: measured_during/after have one entry per program step;
// measured_peak_bytes = max(measured_start_bytes, max(measured_during)) and
// measured_peak_step is the first step reaching it (-1: the resident set);
// ops is by op index, only ops that ran.
struct ProfileResult {
  std::string backend;    // "cpu" | "cuda"
  std::string allocator;  // "host" | "default" | "async"
  std::string device;     // "cpu" | "cuda:0"
  std::string device_name;
  std::string driver_version, cuda_version;  // empty for cpu
  bool cupti = false;
  int repeat = 1;
  // Where the measured series come from: "allocator" (the backend's counting
  // allocator) or "cupti" (CUPTI memory records). Element-wise maxima over
  // the repeats.
  std::string measured_source = "allocator";
  int64_t measured_start_bytes = 0;
  std::vector<int64_t> measured_during, measured_after;
  int64_t measured_peak_bytes = 0;
  int measured_peak_step = -1;
  int64_t allocator_peak_bytes = 0;  // the backend's own count, whatever the source
  // cudaMemGetInfo at step boundaries over the start, after a warm-up, over
  // the repeats after the first when there are several; -1: none.
  int64_t device_peak_bytes = -1;
  int64_t dropped_records = 0;
  int64_t memory_records = 0, kernel_records = 0, untagged_memory_records = 0;
  // CUPTI only: which library, how the memory records were attributed
  // (correlated + time_attributed + outside = memory_records), the API and
  // external-correlation records seen, and the allocation records against
  // the backend's requests (async_expected: cudaMallocAsync calls made).
  std::string cupti_library;
  uint32_t cupti_version = 0, cupti_built_version = 0;
  int64_t correlated_memory_records = 0, time_attributed_memory_records = 0,
          outside_memory_records = 0;
  int64_t api_records = 0, external_correlation_records = 0;
  RecordSizeCheck size_check;
  int64_t async_expected = 0;
  std::vector<OpTiming> ops;
  double run_us = 0;   // median over repeats of the summed op times
  double wall_us = 0;  // median over repeats of the wall time of one run
  std::vector<double> step_begin_us, step_end_us;  // of the last repeat
  std::vector<KernelSpan> kernels;                 // of the last repeat
  std::vector<std::string> notes;
};

ProfileStatus RunProfile(const Graph& g, const Program& program, const ProfileOptions& options,
                         ProfileResult* result, std::string* err);

// The first step whose measured live bytes (during or after) differ from the
// prediction, or -2 when every step agrees (-1: the resident set differs).
int FirstDivergentStep(int64_t predicted_start, const std::vector<int64_t>& predicted_during,
                       const std::vector<int64_t>& predicted_after, int64_t measured_start,
                       const std::vector<int64_t>& measured_during,
                       const std::vector<int64_t>& measured_after);

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_PROFILE_H_
