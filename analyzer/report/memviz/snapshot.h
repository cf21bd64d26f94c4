// PyTorch's memory snapshot (torch.cuda.memory._snapshot(), the file that
// torch.cuda.memory._dump_snapshot writes and pytorch.org/memory_viz opens),
// as plain structs, written to and read from its pickle.
//
// What it sees: a Snapshot (segments with their blocks, one device's trace
// entries, frames) or pickle bytes. It never sees a graph or an allocator.
//
// What it returns: SnapshotToPickle writes the dict PyTorch 2.x writes:
//   {"segments": [{"device", "address", "total_size", "allocated_size",
//     "active_size", "requested_size", "stream", "segment_type",
//     "segment_pool_id", "is_expandable", "frames", "blocks": [{"address",
//     "size", "requested_size", "state", "frames"}]}],
//    "device_traces": [[{"action", "addr", "size", "stream", "time_us",
//     "frames"[, "device_free"]}]],
//    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ...}}
// with frames as [{"filename", "line", "name"}], innermost first. ParseSnapshot
// reads such a pickle (any device with a trace or segments; the first such
// device) back, keeping what a comparison needs, and names the path of the
// first field that is missing or of the wrong type.
//
// Complexity: O(segments + blocks + trace entries + frames) both ways.
//
// Where it falls short: one device and one stream; fields of newer or older
// PyTorch versions that a comparison does not need (history, categories,
// user_metadata, compile_context) are neither written nor read.
#ifndef MEMPLAN_ANALYZER_REPORT_MEMVIZ_SNAPSHOT_H_
#define MEMPLAN_ANALYZER_REPORT_MEMVIZ_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::memviz {

struct Frame {
  std::string filename;
  int64_t line = 0;
  std::string name;
};

struct SnapshotBlock {
  int64_t address = 0;
  int64_t size = 0;
  int64_t requested_size = 0;
  std::string state;  // "active_allocated", "active_pending_free" or "inactive"
  std::vector<Frame> frames;
};

// Invariant (as PyTorch writes them): blocks are contiguous from address and
// their sizes sum to total_size.
struct SnapshotSegment {
  int64_t address = 0;
  int64_t total_size = 0;
  bool is_small = false;  // segment_type "small"
  bool is_expandable = false;
  std::vector<SnapshotBlock> blocks;
};

struct TraceRecord {
  std::string action;  // "alloc", "free_requested", "free_completed", "segment_*", "oom", ...
  int64_t address = 0;
  int64_t size = 0;
  int64_t time_us = 0;
  int64_t device_free = 0;  // "oom" only
  std::vector<Frame> frames;
};

struct Snapshot {
  int device = 0;
  std::string alloc_conf;  // allocator_settings' PYTORCH_CUDA_ALLOC_CONF
  std::vector<SnapshotSegment> segments;
  std::vector<TraceRecord> trace;
};

// The pickle (protocol 2) of `snapshot` as PyTorch 2.x lays it out.
std::string SnapshotToPickle(const Snapshot& snapshot);

// Reads a snapshot pickle. False with "<where>: <what was expected>" in *err
// when the bytes are no pickle (see pickle.h) or the pickle is no snapshot;
// <where> is a path such as /device_traces/0/12/size.
bool ParseSnapshot(std::string_view bytes, Snapshot* snapshot, std::string* err);

}  // namespace memplan::memviz

#endif  // MEMPLAN_ANALYZER_REPORT_MEMVIZ_SNAPSHOT_H_
