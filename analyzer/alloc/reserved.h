// The bytes PyTorch's caching allocator reserves for a training step: the
// buffer lifetimes of a simulated program replayed through CachingAllocator.
//
// What it sees: plain BufferIntervals (bytes, the step that allocates each
// buffer, the step that frees it) and the number of steps; never the graph,
// tensors, kernels or timing. Callers that want op workspaces counted append
// them as intervals of their own (alloc_step == free_step == the op's step).
//
// What it returns: a ReservedReport: the allocated and reserved peaks, the
// cached-but-unallocated bytes and the largest cached free block at the
// reserved peak, segments, retries and OOMs, and each iteration's reserved
// peak.
//
// Recipe: one CachingAllocator(config); resident buffers (alloc_step -1) are
// malloc'd first, in interval order; then, for each step s in order, the
// mallocs of the buffers with alloc_step == s (interval order), then the
// frees of the buffers with free_step == s. The steps are replayed
// `iterations` times with fresh ids: before iteration k > 0, every
// non-resident buffer still alive at the end of iteration k-1 is freed (the
// gradients zero_grad(set_to_none=True) drops, the loss); resident buffers
// stay. A malloc that fails (only with config.device_capacity set) counts as
// an OOM and its free is skipped. The steady state, what users see from the
// second step on, is the maximum over the iterations.
//
// Complexity: O(n + num_steps) to bucket the events, then `iterations` * n
// allocator events of O(log cached free blocks) each (caching_allocator.h);
// memory O(iterations * n + num_steps + blocks).
//
// Where it falls short:
//   - Everything caching_allocator.h lists (one stream, synthetic addresses).
//   - The order of mallocs inside a step is the interval order, and all frees
//     of a step come after all its mallocs; PyTorch's order inside an op
//     (outputs vs. workspace vs. freed inputs) can differ.
//   - Resident buffers are allocated once and never again: one freed during
//     the step (e.g. an input batch) is not reallocated for later iterations.
//   - No data loader, CUDA context, cuBLAS workspace or NCCL buffers.
#ifndef MEMPLAN_ANALYZER_ALLOC_RESERVED_H_
#define MEMPLAN_ANALYZER_ALLOC_RESERVED_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/alloc/caching_allocator.h"
#include "analyzer/ir/buffer_interval.h"

namespace memplan::alloc {

inline constexpr int kDefaultReservedIterations = 2;

// Invariants: reserved_peak_bytes >= allocated_peak_bytes; allocated_peak_bytes
// >= the simulator's peak of the same intervals (every request is rounded up
// to >= 512 B); reserved_peak_bytes == max(iteration_reserved_peaks);
// 0 <= reserved_minus_allocated_at_reserved_peak <= reserved_peak_bytes;
// largest_free_block_at_reserved_peak <=
// reserved_minus_allocated_at_reserved_peak; iteration_reserved_peaks.size()
// == iterations.
struct ReservedReport {
  // The PYTORCH_CUDA_ALLOC_CONF text the config came from ("" = PyTorch's
  // defaults). Set by the caller; PredictReserved leaves it as it is.
  std::string alloc_conf;
  int iterations = 0;
  int64_t allocated_peak_bytes = 0;  // sum of rounded live blocks, at its peak
  int64_t reserved_peak_bytes = 0;   // bytes held from the device, at its peak
  // reserved - allocated right after the event that first set the reserved
  // peak: memory cached but handed to no tensor.
  int64_t reserved_minus_allocated_at_reserved_peak = 0;
  // The largest cached free block right after that event.
  int64_t largest_free_block_at_reserved_peak = 0;
  int64_t segments = 0;  // cudaMalloc'd segments held at the end
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  // The reserved peak within each iteration (iteration 0 includes the
  // resident buffers' mallocs).
  std::vector<int64_t> iteration_reserved_peaks;
};

// The replay's allocator history (PredictReserved's optional output): every
// TraceEntry with the iteration, step and interval whose malloc or free caused
// it, and the segments held at the end.
struct ReplayEvent {
  TraceEntry entry;
  int iteration = 0;
  // -1: resident buffers' mallocs before the first step; num_steps: the frees
  // of buffers still alive at the end of an iteration (before the next one).
  int step = 0;
  int interval = 0;
};
struct ReplayTrace {
  std::vector<ReplayEvent> events;
  std::vector<SegmentInfo> segments_at_end;
};

// Replays `intervals` (steps 0..num_steps-1) `iterations` times on a
// CachingAllocator(config) as the header describes. False, with a message,
// when config fails ValidateConfig, iterations < 1, or an interval is
// malformed (bytes < 0, alloc_step outside [-1, num_steps), free_step outside
// [max(alloc_step, 0), num_steps]). Out-of-memory is not an error: it is
// counted in num_ooms.
bool PredictReserved(const std::vector<BufferInterval>& intervals, int num_steps,
                     const Config& config, int iterations, ReservedReport* out, std::string* err,
                     ReplayTrace* trace = nullptr);

}  // namespace memplan::alloc

#endif  // MEMPLAN_ANALYZER_ALLOC_RESERVED_H_
