// The interface between the executor and a device: allocate and free
// buffers, run one op over its buffers, synchronize, read a clock, and count
// allocated bytes. The executor decides what is allocated when (SPEC section
// 2); a backend only does it and measures it.
#ifndef MEMPLAN_PROFILER_BACKEND_H_
#define MEMPLAN_PROFILER_BACKEND_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace memplan {

// Allocation-level byte counting, as a perfect allocator sees it.
// Invariants: 0 <= live <= window_peak <= peak.
class AllocationCounter {
 public:
  void Add(int64_t bytes) {
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    window_peak_ = std::max(window_peak_, live_);
  }
  void Remove(int64_t bytes) { live_ -= bytes; }
  // Starts a new window: window_peak becomes the live bytes now.
  void ResetWindow() { window_peak_ = live_; }
  void Reset() { live_ = peak_ = window_peak_ = 0; }
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  int64_t window_peak() const { return window_peak_; }

 private:
  int64_t live_ = 0, peak_ = 0, window_peak_ = 0;
};

// One buffer an op reads or writes: `bytes` from `ptr` (bytes > 0).
struct Operand {
  void* ptr = nullptr;
  int64_t bytes = 0;
};

// One run of an op. Every buffer appears at most once in inputs and at most
// once in outputs (an in-place output is in both: read, then written).
struct OpLaunch {
  int step = -1;
  int op = -1;
  const char* name = "";
  std::vector<Operand> inputs;   // distinct buffers read
  std::vector<Operand> outputs;  // buffers written: new, taken over, fresh copies
  Operand workspace;             // scratch, written (ptr null when none)
  double flops = 0;              // compute to spend, >= 0
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual const char* Name() const = 0;
  // Allocates `bytes` (> 0). On failure *err says what and how much.
  virtual bool Allocate(int64_t bytes, void** ptr, std::string* err) = 0;
  // Frees a buffer from Allocate; `bytes` is what was asked for.
  virtual bool Free(void* ptr, int64_t bytes, std::string* err) = 0;
  // Writes a buffer once (resident tensors: inputs, parameters).
  virtual bool Fill(void* ptr, int64_t bytes, std::string* err) = 0;
  // Runs one op: reads its inputs, writes its outputs and workspace, spends
  // its flops. May be asynchronous until Sync.
  virtual bool RunOp(const OpLaunch& launch, std::string* err) = 0;
  // Waits for all work. After it, LastOpUs is the time of the last RunOp.
  virtual bool Sync(std::string* err) = 0;
  virtual double LastOpUs() const = 0;
  // A monotonic clock, in integer nanoseconds.
  virtual int64_t NowNs() = 0;
  // Bytes allocated through this backend (allocation level).
  virtual AllocationCounter& Counter() = 0;
  // Device memory in use as the driver sees it; false when there is no
  // such notion (the CPU backend).
  virtual bool DeviceUsedBytes(int64_t* used) { return false; }
  // Runs each kind of work once (allocate, fill, an op, free) so that lazy
  // initialisation (module loading, the profiler's buffers) happens before a
  // measurement starts. The allocation counter is left as it was.
  virtual bool WarmUp(std::string* err) { return true; }
};

// Hooks around each step, for profilers that tag device activity by step
// (CUPTI external correlation). Step -1 is the set-up of the resident
// tensors, steps.size() the final teardown.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void BeginStep(int step) = 0;
  virtual void EndStep(int step) = 0;
};

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_BACKEND_H_
