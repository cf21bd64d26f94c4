// PYTORCH_CUDA_ALLOC_CONF text -> allocator Config.
//
// Grammar (c10/core/AllocatorConfig.cpp, AllocatorConfig::lexArgs/parseArgs):
// spaces are dropped; ',' ':' '[' ']' are tokens; options are
// `key:value` separated by ','. Accepted keys are PyTorch's:
//   max_split_size_mb:N            N >= 20 (kLargeBuffer / 1 MiB)
//   max_non_split_rounding_mb:N    N >= 20
//   garbage_collection_threshold:X 0 < X < 1
//   roundup_power2_divisions:D     D a power of two, or the list form
//                                  [64:8,256:4,>:1] (MiB interval: D, D may be 0)
//   expandable_segments:True|False
//   backend:native                 (cudaMallocAsync is rejected: not modelled)
// and, checked but without effect on the model: release_lock_on_cudamalloc,
// pinned_use_cuda_host_register, pinned_num_register_threads,
// pinned_use_background_threads, pinned_reserve_segment_size_mb,
// graph_capture_record_stream_reuse (and the hip spellings).
//
// Stricter than PyTorch: numbers must be whole tokens ("128abc" is rejected;
// PyTorch's stoi would read 128).
#ifndef MEMPLAN_ANALYZER_ALLOC_ALLOC_CONF_H_
#define MEMPLAN_ANALYZER_ALLOC_ALLOC_CONF_H_

#include <string>
#include <string_view>

#include "analyzer/alloc/caching_allocator.h"

namespace memplan::alloc {

// Parses `text` into *config. The options the text controls are first reset
// to PyTorch's defaults; other fields (device_capacity, constants) are kept.
// On error *config is unchanged and *error names the key, e.g.
// `max_split_size_mb: expected a number of MiB >= 20, found "abc"`.
bool ParseAllocConf(std::string_view text, Config* config, std::string* error);

}  // namespace memplan::alloc

#endif  // MEMPLAN_ANALYZER_ALLOC_ALLOC_CONF_H_
