// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// torch 2.x, class DeviceCachingAllocator) for one device and one stream.
//
// What it sees: an ordered sequence of Malloc(id, bytes) / Free(id) events
// (plus optional EmptyCache()) issued on a single stream. It never sees the
// graph, tensors, kernels or timing.
//
// What it returns: after every event, the allocator's state (segments and the
// blocks inside them) and DeviceStats-style counters: allocated / reserved /
// active / inactive-split bytes with peaks, segment count, retries, OOMs, the
// largest cached free block and the reserved - allocated gap at the reserved
// peak. Malloc fails (false + message) on a simulated out-of-memory when a
// device capacity is configured.
//
// Recipe (each step names the PyTorch function it follows):
//   Malloc: round_size -> get_pool (small if <= kSmallSize) ->
//     get_allocation_size -> get_free_block (best fit by (size, address)) ->
//     else [garbage_collect_cached_blocks] -> alloc_block (new segment, or
//     map pages of the pool's expandable segment) -> else
//     release_available_cached_blocks + alloc_block -> else
//     release_cached_blocks + alloc_block (a "retry") -> else OOM.
//     Then should_split / alloc_found_block splits the found block.
//   Free: free_block merges the block with free neighbours in its segment
//     (try_merge_blocks) and caches it; memory is never returned to the device.
//   EmptyCache: release_cached_blocks: cudaFree every unsplit free segment and
//     unmap every fully free page of expandable segments.
//
// Complexity: Malloc/Free are O(log f) in the number f of the pool's cached
// free blocks (a std::set by (size, address)); neighbours, splits and merges
// are O(1) (blocks link prev/next within their segment, as PyTorch's do), and
// so is finding a caller id's block (a flat table while ids come densely from
// 0, else a hash map). Exceptions: the rare release paths (O(n) in the number
// of blocks n) and, with expandable segments, the search for an unmapped
// range (O(blocks in the pool's expandable segments)). Memory O(n) plus the
// flat id table: 4 B per id up to the largest one in it, at most 16 B per
// malloc + 256 KiB.
//
// Where it falls short of the real allocator:
//   - One stream, no recordStream/events: a block is free the moment Free is
//     called. No CUDA graph private pools, no IPC, no MemPool.
//   - Device addresses are synthetic (a bump counter, never reused), so ties
//     between equal-size free blocks in different segments resolve by
//     segment creation order; cudaMalloc's real addresses may order them
//     differently.
//   - device_capacity stands for setMemoryFraction's allowed_memory_maximum:
//     a new segment fails when reserved + alloc_size > capacity (alloc_block).
//     Memory held by the CUDA context, other processes or the driver is not
//     modelled; subtract it from the capacity yourself.
//   - garbage_collection_threshold runs only when device_capacity is set
//     (PyTorch: only after setMemoryFraction), with block ages counted in
//     get_free_block calls per pool exactly as PyTorch does.
//   - Expandable segments: per pool, segments of expandable_virtual_size
//     address space (PyTorch: 9/8 of device memory), a new one only when no
//     existing one has room; pages are 2 MiB (small pool) / 20 MiB (large
//     pool) as in find_expandable_block. Pages are unmapped only by
//     EmptyCache or the OOM retry path, which also drop a segment with no
//     page left. IPC and peer access are not modelled. Expandable pages are not counted in
//     `segment` (PyTorch's map_block does not count them either).
//   - FreeCudaMemoryCallbacks, oversize_* stats and per-pool stat arrays are
//     not modelled; stats are the AGGREGATE row only.
#ifndef MEMPLAN_ANALYZER_ALLOC_CACHING_ALLOCATOR_H_
#define MEMPLAN_ANALYZER_ALLOC_CACHING_ALLOCATOR_H_

#include <array>
#include <cstdint>
#include <limits>
#include <memory_resource>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memplan::alloc {

inline constexpr int64_t kMiB = 1024 * 1024;

// Constants of CUDACachingAllocator.cpp (top of file, namespace Native).
inline constexpr int64_t kMinBlockSize = 512;         // all sizes rounded to >= 512 B
inline constexpr int64_t kSmallSize = 1 * kMiB;       // largest "small" request
inline constexpr int64_t kSmallBuffer = 2 * kMiB;     // small pool segment size
inline constexpr int64_t kMinLargeAlloc = 10 * kMiB;  // below: use a kLargeBuffer
inline constexpr int64_t kRoundLarge = 2 * kMiB;      // large segments rounded to this
inline constexpr int64_t kLargeBuffer = 20 * kMiB;    // 1..10 MiB requests' segment
// c10/core/AllocatorConfig.cpp: roundup_power2_divisions has 16 intervals,
// one per power of two from 1 MiB (index 0, also all smaller sizes) to 64 GiB.
inline constexpr int kRoundupPower2Intervals = 16;
inline constexpr int kRoundupPower2StartLog2 = 20;  // log2(1 MiB)
// max_split_size when unset (AllocatorConfig: std::numeric_limits max).
inline constexpr int64_t kNoMaxSplitSize = std::numeric_limits<int64_t>::max();
// Virtual size of an expandable segment when no capacity is set (PyTorch
// reserves totalGlobalMem * 9/8; 1 TiB is "effectively unbounded" here).
inline constexpr int64_t kDefaultExpandableVirtualSize = int64_t{1} << 40;

// Allocator settings. Defaults are PyTorch's defaults with unlimited memory.
// Invariants (checked by ValidateConfig): every size > 0; min_block_size is a
// power of two; small_size < small_buffer; max_split_size >= large_buffer;
// each roundup_power2_divisions entry is 0 or a power of two;
// 0 <= garbage_collection_threshold < 1; device_capacity >= 0.
struct Config {
  int64_t min_block_size = kMinBlockSize;
  int64_t small_size = kSmallSize;
  int64_t small_buffer = kSmallBuffer;
  int64_t min_large_alloc = kMinLargeAlloc;
  int64_t round_large = kRoundLarge;
  int64_t large_buffer = kLargeBuffer;
  // max_split_size_mb: blocks >= this are never split, and are used only for
  // requests >= this that waste less than max_non_split_rounding.
  int64_t max_split_size = kNoMaxSplitSize;
  // max_non_split_rounding_mb (get_free_block's "+ kLargeBuffer" slack).
  int64_t max_non_split_rounding = kLargeBuffer;
  // roundup_power2_divisions per interval; 0 or 1 = plain 512 B rounding.
  std::array<int64_t, kRoundupPower2Intervals> roundup_power2_divisions{};
  // garbage_collection_threshold: fraction of device_capacity; 0 = off.
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;
  // Page sizes of expandable segments (find_expandable_block).
  int64_t expandable_small_page = kSmallBuffer;
  int64_t expandable_large_page = kLargeBuffer;
  // 0 = derived: device_capacity * 9/8, or kDefaultExpandableVirtualSize.
  int64_t expandable_virtual_size = 0;
  // Bytes the allocator may reserve; 0 = unlimited.
  int64_t device_capacity = 0;
};

// False with a message naming the field when `config` breaks an invariant.
bool ValidateConfig(const Config& config, std::string* error);

// round_size: the bytes a request of `bytes` occupies (>= min_block_size).
int64_t RoundSize(const Config& config, int64_t bytes);
// get_allocation_size: the segment size cudaMalloc'd for a rounded request.
int64_t AllocationSize(const Config& config, int64_t rounded_bytes);

// One DeviceStats counter: the current value and its high-water mark.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
};

// DeviceStats, AGGREGATE row. Invariants: every current >= 0 and <= peak;
// allocated_bytes.current <= reserved_bytes.current.
struct Stats {
  Stat allocation;                // live blocks handed out
  Stat segment;                   // cudaMalloc'd segments (not expandable pages)
  Stat active;                    // == allocation (no stream events modelled)
  Stat inactive_split;            // free blocks inside partly used segments
  Stat allocated_bytes;           // sum of rounded sizes of live blocks
  Stat reserved_bytes;            // bytes held from the device
  Stat active_bytes;              // == allocated_bytes here
  Stat inactive_split_bytes;      // bytes of inactive_split blocks
  Stat requested_bytes;           // sum of the callers' unrounded sizes
  int64_t num_alloc_retries = 0;  // mallocs that had to free all cache
  int64_t num_ooms = 0;
  int64_t num_device_alloc = 0;  // cudaMalloc calls / page mappings
  int64_t num_device_free = 0;   // cudaFree calls / page unmappings
  // reserved - allocated right after the event that first set the current
  // reserved_bytes.peak (the fragmentation PyTorch users see at the peak).
  int64_t unallocated_at_reserved_peak = 0;
};

// A block as reported by Segments(). `mapped` is false only for the
// unbacked address range of an expandable segment.
struct BlockInfo {
  int64_t address = 0;
  int64_t size = 0;
  int64_t requested_size = 0;  // 0 when free
  bool allocated = false;
  bool mapped = true;
};

// One segment: a cudaMalloc, or one run of contiguous mapped blocks of an
// expandable segment (as PyTorch's snapshot() reports them).
// Invariant: blocks are contiguous, in address order, and sum to total_size
// (which, for expandable segments, counts mapped bytes only).
struct SegmentInfo {
  int64_t address = 0;
  int64_t total_size = 0;
  int64_t allocated_size = 0;
  bool is_small = false;
  bool is_expandable = false;
  std::vector<BlockInfo> blocks;  // mapped blocks only
};

// One record of the allocator's history, as PyTorch's TraceEntry records it
// under torch.cuda.memory._record_memory_history. `size` is the caller's
// requested bytes for kAlloc and the frees, the segment's (or mapped or
// unmapped pages') bytes for the segment actions, and the rounded request for
// kOom, whose `address` is the bytes the device still had (PyTorch:
// device_free).
struct TraceEntry {
  enum class Action {
    kAlloc,
    kFreeRequested,
    kFreeCompleted,
    kSegmentAlloc,
    kSegmentFree,
    kSegmentMap,
    kSegmentUnmap,
    kOom
  };
  Action action = Action::kAlloc;
  int64_t address = 0;
  int64_t size = 0;
  int64_t id = -1;  // the caller's id for kAlloc and the frees, else -1
};

// PyTorch's name of an action ("alloc", "free_requested", "segment_map", ...).
const char* TraceActionName(TraceEntry::Action action);

class CachingAllocator {
 public:
  // `config` must pass ValidateConfig.
  explicit CachingAllocator(const Config& config);
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Allocates `bytes` for the caller's `id`. False (state unchanged except
  // cache released on the retry path and stats.num_ooms) when the id is live,
  // bytes < 0, or the simulated device is out of memory.
  // A 0-byte request holds no memory (PyTorch returns nullptr for it).
  bool Malloc(int64_t id, int64_t bytes, std::string* error);
  // Frees the block of `id`. False when `id` is not live.
  bool Free(int64_t id, std::string* error);
  // torch.cuda.empty_cache(): release_cached_blocks.
  void EmptyCache();

  const Stats& stats() const { return stats_; }
  const Config& config() const { return config_; }
  // The largest cached free block (cacheInfo), 0 when none.
  int64_t LargestFreeBlock() const;
  // All segments in address order (snapshot()).
  std::vector<SegmentInfo> Segments() const;
  // Appends every later event's TraceEntries to *trace (nullptr: stop).
  void set_trace(std::vector<TraceEntry>* trace) { trace_ = trace; }

 private:
  enum PoolIndex { kSmallPool = 0, kLargePool = 1 };
  // Indices into blocks_ and segments_ (2^31 blocks would be ~100 GiB).
  using BlockId = int32_t;
  using SegmentId = int32_t;
  static constexpr BlockId kNoBlock = -1;
  static constexpr BlockId kZeroBytes = -2;  // LiveIds' value for a 0-byte malloc
  struct Block {
    int64_t address = 0;
    int64_t size = 0;
    int64_t requested_size = 0;
    int64_t gc_count_base = 0;  // pool's get_free_block calls at insert
    SegmentId segment = 0;
    BlockId prev = kNoBlock;  // neighbours in the segment, by address
    BlockId next = kNoBlock;
    PoolIndex pool = kSmallPool;  // the segment's
    bool expandable = false;      // the segment's
    bool allocated = false;
    bool mapped = true;
  };
  struct Segment {
    int64_t address = 0;
    int64_t size = 0;  // virtual size for expandable segments
    PoolIndex pool = kSmallPool;
    bool expandable = false;
    bool live = false;        // false: a released slot
    BlockId head = kNoBlock;  // the block at `address`
  };
  // A free set entry: ordered by (size, address), carrying its block.
  struct FreeEntry {
    int64_t size = 0;
    int64_t address = 0;
    BlockId block = kNoBlock;
    bool operator<(const FreeEntry& o) const {
      return size != o.size ? size < o.size : address < o.address;
    }
  };
  // Recycles the free sets' tree nodes (all of one size) through a free list
  // instead of malloc/free: each Malloc and Free inserts and erases a node or
  // two (this saves ~10% of PredictReserved's time).
  class NodeRecycler : public std::pmr::memory_resource {
   private:
    void* do_allocate(size_t bytes, size_t alignment) override;
    void do_deallocate(void* node, size_t bytes, size_t alignment) override;
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
      return this == &other;
    }
    std::pmr::monotonic_buffer_resource arena_;  // released with the allocator
    size_t node_bytes_ = 0;                      // the size recycled
    void* free_nodes_ = nullptr;                 // each holds the next's address
  };
  using FreeSet = std::pmr::set<FreeEntry>;
  // Caller id -> block (or kZeroBytes): a flat table for ids that come
  // densely from 0 (PredictReserved's do), a hash map for the others. The
  // table grows to cover a new id only up to 4 slots per id ever put in it
  // (+ 64 Ki), so sparse ids cannot blow it up.
  class LiveIds {
   public:
    BlockId Find(int64_t id) const;          // kNoBlock when not live
    void Insert(int64_t id, BlockId block);  // `id` must not be live
    void Erase(int64_t id);                  // `id` must be live

   private:
    std::vector<BlockId> dense_;  // by id, kNoBlock when not live
    int64_t dense_inserts_ = 0;   // ids ever put in dense_; bound its size
    std::unordered_map<int64_t, BlockId> sparse_;
  };

  BlockId NewBlock(const Block& block);
  void DeleteBlock(BlockId block);
  BlockId SplitBlock(BlockId block, int64_t lower_size);
  void UnlinkBlock(BlockId block);
  SegmentId NewSegment(const Segment& segment);
  void DeleteSegment(SegmentId segment);
  bool IsSplit(BlockId block) const;
  bool GcEnabled() const;
  int64_t PageSize(PoolIndex pool) const;  // expandable segment page
  void InsertFree(BlockId block);
  void EraseFree(BlockId block);

  BlockId GetFreeBlock(PoolIndex pool, int64_t size);
  bool ShouldSplit(BlockId block, int64_t size) const;
  BlockId AllocBlock(PoolIndex pool, int64_t size, int64_t alloc_size, bool is_retry);
  BlockId AllocExpandable(PoolIndex pool, int64_t size);
  bool MapBlock(BlockId to_map, int64_t size, BlockId* mapped);
  void UnmapBlock(BlockId block);
  int64_t TryMergeBlocks(BlockId* dst, BlockId src);
  void AllocFoundBlock(BlockId block, int64_t size, int64_t requested, bool split);
  void FreeBlock(BlockId block);
  void ReleaseBlock(BlockId block);
  void ReleaseBlocks(PoolIndex pool);
  bool ReleaseAvailableCachedBlocks(PoolIndex pool, int64_t size);
  void ReleaseCachedBlocks();
  void GarbageCollectCachedBlocks();
  void Grow(Stat* stat, int64_t amount);
  void Shrink(Stat* stat, int64_t amount);
  void NoteReservedPeak();
  void Record(TraceEntry::Action action, int64_t address, int64_t size, int64_t id = -1) {
    if (trace_ != nullptr) trace_->push_back({action, address, size, id});
  }

  Config config_;
  Stats stats_;
  // Every block of every segment, linked prev/next per segment; slots of
  // deleted blocks are reused.
  std::vector<Block> blocks_;
  std::vector<BlockId> free_block_slots_;
  NodeRecycler node_recycler_;  // declared before free_, so it outlives it
  // Mapped free blocks per pool.
  std::array<FreeSet, 2> free_{FreeSet(&node_recycler_), FreeSet(&node_recycler_)};
  std::array<int64_t, 2> get_free_block_calls_{};              // gc ages, per pool
  std::array<std::vector<SegmentId>, 2> expandable_segments_;  // by address
  std::vector<Segment> segments_;  // slots of released segments are reused
  std::vector<SegmentId> free_segment_slots_;
  int64_t next_address_ = int64_t{1} << 32;  // synthetic, never reused
  LiveIds live_;
  int64_t gap_noted_for_peak_ = 0;  // reserved peak the gap was taken at
  std::vector<TraceEntry>* trace_ = nullptr;
};

// The event stream the allocator consumes.
struct Event {
  enum class Kind { kMalloc, kFree, kEmptyCache };
  Kind kind = Kind::kMalloc;
  int64_t id = 0;
  int64_t bytes = 0;  // kMalloc only
};

// Replays `events` on a fresh allocator. False at the first failing event,
// with "event <index>: <reason>" in *error; *stats holds the state reached.
bool Replay(const Config& config, const std::vector<Event>& events, Stats* stats,
            std::string* error);

}  // namespace memplan::alloc

#endif  // MEMPLAN_ANALYZER_ALLOC_CACHING_ALLOCATOR_H_
