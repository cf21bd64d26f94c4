#include "analyzer/alloc/caching_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <utility>
#include <vector>

#include "analyzer/base/enum_table.h"
#include "analyzer/base/units.h"

namespace memplan::alloc {
namespace {

constexpr int64_t kLowestAddress = std::numeric_limits<int64_t>::min();

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

int Log2Floor(int64_t v) { return 63 - std::countl_zero(static_cast<uint64_t>(v)); }

// roundup_power2_next_division: the next of `divisions` equal steps between
// the powers of two around `size` (1200 B, 4 divisions -> 1280 B).
int64_t RoundupPower2NextDivision(int64_t size, int64_t divisions) {
  if (IsPowerOfTwo(size)) return size;
  const int64_t power2_floor = int64_t{1} << Log2Floor(size);
  const int64_t division = power2_floor >> Log2Floor(divisions);
  if (division == 0) return power2_floor << 1;
  const int64_t floor = size & ~(division - 1);
  return floor == size ? size : floor + division;
}

}  // namespace

bool ValidateConfig(const Config& c, std::string* error) {
  auto fail = [&](const std::string& why) {
    *error = "invalid allocator config: " + why;
    return false;
  };
  const std::pair<const char*, int64_t> sizes[] = {
      {"min_block_size", c.min_block_size},
      {"small_size", c.small_size},
      {"small_buffer", c.small_buffer},
      {"min_large_alloc", c.min_large_alloc},
      {"round_large", c.round_large},
      {"large_buffer", c.large_buffer},
      {"max_split_size", c.max_split_size},
      {"max_non_split_rounding", c.max_non_split_rounding},
      {"expandable_small_page", c.expandable_small_page},
      {"expandable_large_page", c.expandable_large_page}};
  for (const auto& [name, value] : sizes) {
    if (value <= 0) return fail(fmt::format("{} must be > 0, found {}", name, value));
  }
  if (!IsPowerOfTwo(c.min_block_size)) {
    return fail(fmt::format("min_block_size must be a power of two, found {}", c.min_block_size));
  }
  if (c.small_size >= c.small_buffer) {
    return fail("small_size must be < small_buffer");
  }
  if (c.max_split_size < c.large_buffer) {
    return fail(fmt::format("max_split_size must be >= large_buffer ({}), found {}", c.large_buffer,
                            c.max_split_size));
  }
  for (int64_t d : c.roundup_power2_divisions) {
    if (d != 0 && !IsPowerOfTwo(d)) {
      return fail(fmt::format("roundup_power2_divisions must be 0 or a power of two, found {}", d));
    }
  }
  if (!(c.garbage_collection_threshold >= 0.0 && c.garbage_collection_threshold < 1.0)) {
    return fail("garbage_collection_threshold must be in [0, 1)");
  }
  if (c.device_capacity < 0 || c.expandable_virtual_size < 0) {
    return fail("device_capacity and expandable_virtual_size must be >= 0");
  }
  return true;
}

int64_t RoundSize(const Config& config, int64_t bytes) {
  if (bytes < config.min_block_size) return config.min_block_size;
  // AllocatorConfig::roundup_power2_divisions(size): interval by log2(size).
  const int index =
      std::clamp(Log2Floor(bytes) - kRoundupPower2StartLog2, 0, kRoundupPower2Intervals - 1);
  const int64_t divisions = config.roundup_power2_divisions[index];
  if (divisions > 1 && bytes > config.min_block_size * divisions) {
    return RoundupPower2NextDivision(bytes, divisions);
  }
  return RoundUp(bytes, config.min_block_size);
}

int64_t AllocationSize(const Config& config, int64_t rounded_bytes) {
  if (rounded_bytes <= config.small_size) return config.small_buffer;
  if (rounded_bytes < config.min_large_alloc) return config.large_buffer;
  return RoundUp(rounded_bytes, config.round_large);
}

CachingAllocator::CachingAllocator(const Config& config) : config_(config) {
  if (config_.expandable_virtual_size == 0) {
    config_.expandable_virtual_size = config_.device_capacity > 0
                                          ? config_.device_capacity + config_.device_capacity / 8
                                          : kDefaultExpandableVirtualSize;
  }
}

// ---- stats -----------------------------------------------------------------

void CachingAllocator::Grow(Stat* stat, int64_t amount) {
  stat->current += amount;
  stat->peak = std::max(stat->peak, stat->current);
}

void CachingAllocator::Shrink(Stat* stat, int64_t amount) { stat->current -= amount; }

void CachingAllocator::NoteReservedPeak() {
  const Stat& reserved = stats_.reserved_bytes;
  if (reserved.current == reserved.peak && reserved.peak > gap_noted_for_peak_) {
    gap_noted_for_peak_ = reserved.peak;
    stats_.unallocated_at_reserved_peak = reserved.current - stats_.allocated_bytes.current;
  }
}

// ---- block bookkeeping -------------------------------------------------------

CachingAllocator::BlockId CachingAllocator::LiveIds::Find(int64_t id) const {
  if (id >= 0 && id < static_cast<int64_t>(dense_.size()) && dense_[id] != kNoBlock) {
    return dense_[id];
  }
  if (sparse_.empty()) return kNoBlock;
  auto it = sparse_.find(id);
  return it == sparse_.end() ? kNoBlock : it->second;
}

void CachingAllocator::LiveIds::Insert(int64_t id, BlockId block) {
  constexpr int64_t kMinDenseSize = int64_t{1} << 16;
  const auto size = static_cast<int64_t>(dense_.size());
  // At most 4 slots per id ever put in the table, + kMinDenseSize.
  const int64_t limit = 4 * (dense_inserts_ + 1) + kMinDenseSize;
  if (id >= size && id < limit)
    dense_.resize(std::min(std::max(id + 1, 2 * size), limit), kNoBlock);
  if (id >= 0 && id < static_cast<int64_t>(dense_.size())) {
    dense_[id] = block;
    ++dense_inserts_;
  } else {
    sparse_[id] = block;
  }
}

void CachingAllocator::LiveIds::Erase(int64_t id) {
  if (id >= 0 && id < static_cast<int64_t>(dense_.size()) && dense_[id] != kNoBlock) {
    dense_[id] = kNoBlock;
  } else {
    sparse_.erase(id);
  }
}

void* CachingAllocator::NodeRecycler::do_allocate(size_t bytes, size_t alignment) {
  if (node_bytes_ == 0) node_bytes_ = bytes;
  if (bytes != node_bytes_ || free_nodes_ == nullptr) return arena_.allocate(bytes, alignment);
  void* node = free_nodes_;
  free_nodes_ = *static_cast<void**>(node);
  return node;
}

void CachingAllocator::NodeRecycler::do_deallocate(void* node, size_t bytes, size_t) {
  if (bytes != node_bytes_) return;  // the arena frees it at the end
  *static_cast<void**>(node) = free_nodes_;
  free_nodes_ = node;
}

CachingAllocator::BlockId CachingAllocator::NewBlock(const Block& block) {
  if (free_block_slots_.empty()) {
    blocks_.push_back(block);
    return static_cast<BlockId>(blocks_.size() - 1);
  }
  const BlockId id = free_block_slots_.back();
  free_block_slots_.pop_back();
  blocks_[id] = block;
  return id;
}

void CachingAllocator::DeleteBlock(BlockId block) { free_block_slots_.push_back(block); }

// Cuts `block` at `lower_size`: it keeps the lower part; the upper part, a
// new unallocated block linked after it, is returned (not in a free set).
CachingAllocator::BlockId CachingAllocator::SplitBlock(BlockId block, int64_t lower_size) {
  Block upper = blocks_[block];
  upper.address += lower_size;
  upper.size -= lower_size;
  upper.requested_size = 0;
  upper.gc_count_base = 0;
  upper.allocated = false;
  upper.prev = block;
  const BlockId id = NewBlock(upper);
  Block& lower = blocks_[block];
  if (lower.next != kNoBlock) blocks_[lower.next].prev = id;
  lower.next = id;
  lower.size = lower_size;
  return id;
}

// Unlinks `block` from its segment and deletes it.
void CachingAllocator::UnlinkBlock(BlockId block) {
  const Block& b = blocks_[block];
  if (b.prev != kNoBlock) blocks_[b.prev].next = b.next;
  if (b.next != kNoBlock) blocks_[b.next].prev = b.prev;
  DeleteBlock(block);
}

CachingAllocator::SegmentId CachingAllocator::NewSegment(const Segment& segment) {
  SegmentId id;
  if (free_segment_slots_.empty()) {
    id = static_cast<SegmentId>(segments_.size());
    segments_.push_back(segment);
  } else {
    id = free_segment_slots_.back();
    free_segment_slots_.pop_back();
    segments_[id] = segment;
  }
  segments_[id].live = true;
  return id;
}

void CachingAllocator::DeleteSegment(SegmentId segment) {
  segments_[segment].live = false;
  free_segment_slots_.push_back(segment);
}

bool CachingAllocator::IsSplit(BlockId block) const {
  return blocks_[block].prev != kNoBlock || blocks_[block].next != kNoBlock;
}

int64_t CachingAllocator::PageSize(PoolIndex pool) const {
  return pool == kSmallPool ? config_.expandable_small_page : config_.expandable_large_page;
}

bool CachingAllocator::GcEnabled() const {
  return config_.device_capacity > 0 && config_.garbage_collection_threshold > 0.0;
}

// BlockPool::insert_into_blocks: also stamps the block's gc age base.
void CachingAllocator::InsertFree(BlockId block) {
  Block& b = blocks_[block];
  b.gc_count_base = get_free_block_calls_[b.pool];
  free_[b.pool].insert({b.size, b.address, block});
}

void CachingAllocator::EraseFree(BlockId block) {
  const Block& b = blocks_[block];
  free_[b.pool].erase({b.size, b.address, block});
}

// ---- malloc path -------------------------------------------------------------

// get_free_block: best fit by (size, address), with the max_split_size rules.
CachingAllocator::BlockId CachingAllocator::GetFreeBlock(PoolIndex pool, int64_t size) {
  if (GcEnabled()) ++get_free_block_calls_[pool];
  FreeSet& blocks = free_[pool];
  auto it = blocks.lower_bound({size, kLowestAddress, kNoBlock});
  if (it == blocks.end()) return kNoBlock;
  if (blocks_[it->block].expandable) {
    // A block before the unmapped tail counts as the size it can grow to.
    auto expandable_size = [&](FreeSet::iterator at) {
      const Block& b = blocks_[at->block];
      const bool unmapped_next = b.next != kNoBlock && !blocks_[b.next].mapped;
      return b.size + (unmapped_next ? blocks_[b.next].size : 0);
    };
    auto next = std::next(it);
    while (blocks_[it->block].expandable && next != blocks.end() &&
           expandable_size(next) < expandable_size(it)) {
      it = next++;
    }
  }
  const int64_t found = it->size;
  // Do not return an oversize block for a request below max_split_size.
  if (size < config_.max_split_size && found >= config_.max_split_size) return kNoBlock;
  // An oversize request may take an oversize block only within the slack.
  if (size >= config_.max_split_size && found >= size + config_.max_non_split_rounding) {
    return kNoBlock;
  }
  const BlockId block = it->block;
  blocks.erase(it);
  return block;
}

// should_split.
bool CachingAllocator::ShouldSplit(BlockId block, int64_t size) const {
  const Block& b = blocks_[block];
  const int64_t remaining = b.size - size;
  if (b.pool == kSmallPool || config_.expandable_segments) {
    return remaining >= config_.min_block_size;
  }
  return size < config_.max_split_size && remaining > config_.small_size;
}

// alloc_block: a new cudaMalloc'd segment (or expandable pages). The block
// returned is not in the free set.
CachingAllocator::BlockId CachingAllocator::AllocBlock(PoolIndex pool, int64_t size,
                                                       int64_t alloc_size, bool is_retry) {
  if (is_retry) ++stats_.num_alloc_retries;
  if (config_.device_capacity > 0 &&
      stats_.reserved_bytes.current + alloc_size > config_.device_capacity) {
    return kNoBlock;
  }
  if (config_.expandable_segments) return AllocExpandable(pool, size);
  const SegmentId segment =
      NewSegment({.address = next_address_, .size = alloc_size, .pool = pool});
  const BlockId block =
      NewBlock({.address = next_address_, .size = alloc_size, .segment = segment, .pool = pool});
  segments_[segment].head = block;
  Record(TraceEntry::Action::kSegmentAlloc, next_address_, alloc_size);
  next_address_ += alloc_size;
  Grow(&stats_.segment, 1);
  Grow(&stats_.reserved_bytes, alloc_size);
  ++stats_.num_device_alloc;
  return block;
}

// try_allocate_expandable_block + find_expandable_block: the lowest address,
// over the pool's expandable segments, where a free block and/or unmapped
// pages make room for `size`; a new segment when none has room.
CachingAllocator::BlockId CachingAllocator::AllocExpandable(PoolIndex pool, int64_t size) {
  auto allocatable = [&](BlockId b) { return b != kNoBlock && !blocks_[b].allocated; };
  BlockId candidate = kNoBlock;
  for (SegmentId segment : expandable_segments_[pool]) {
    for (BlockId at = segments_[segment].head; candidate == kNoBlock && at != kNoBlock;
         at = blocks_[at].next) {
      if (blocks_[at].mapped) continue;
      BlockId c = at;
      if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
      int64_t bytes = 0;
      for (BlockId b = c; bytes < size && allocatable(b); b = blocks_[b].next) {
        bytes += blocks_[b].size;
      }
      if (bytes >= size) candidate = c;
    }
    if (candidate != kNoBlock) break;
  }
  if (candidate == kNoBlock) {
    const int64_t page = PageSize(pool);
    // Whole pages of address space, at least enough for this request.
    const int64_t virtual_size = RoundUp(std::max(config_.expandable_virtual_size, size), page);
    const SegmentId segment = NewSegment(
        {.address = next_address_, .size = virtual_size, .pool = pool, .expandable = true});
    candidate = NewBlock({.address = next_address_,
                          .size = virtual_size,
                          .segment = segment,
                          .pool = pool,
                          .expandable = true,
                          .mapped = false});
    segments_[segment].head = candidate;
    next_address_ += virtual_size;
    expandable_segments_[pool].push_back(segment);
  }
  if (!blocks_[candidate].mapped &&
      !MapBlock(candidate, std::min(blocks_[candidate].size, size), &candidate)) {
    return kNoBlock;
  }
  while (blocks_[candidate].size < size) {
    const BlockId next = blocks_[candidate].next;
    if (!MapBlock(next, std::min(size - blocks_[candidate].size, blocks_[next].size), &candidate)) {
      return kNoBlock;
    }
  }
  EraseFree(candidate);
  return candidate;
}

// map_block: backs the first `size` bytes (rounded up to pages) of the
// unmapped block with memory, merges with free neighbours, caches the result.
bool CachingAllocator::MapBlock(BlockId to_map, int64_t size, BlockId* mapped) {
  const int64_t page = PageSize(blocks_[to_map].pool);
  const int64_t mapped_size = std::min(RoundUp(size, page), blocks_[to_map].size);
  if (config_.device_capacity > 0 &&
      stats_.reserved_bytes.current + mapped_size > config_.device_capacity) {
    return false;  // cuMemCreate out of memory
  }
  if (mapped_size < blocks_[to_map].size) SplitBlock(to_map, mapped_size);  // rest: unmapped
  blocks_[to_map].mapped = true;
  Record(TraceEntry::Action::kSegmentMap, blocks_[to_map].address, mapped_size);
  TryMergeBlocks(&to_map, blocks_[to_map].prev);
  TryMergeBlocks(&to_map, blocks_[to_map].next);
  InsertFree(to_map);
  Grow(&stats_.reserved_bytes, mapped_size);
  ++stats_.num_device_alloc;
  *mapped = to_map;
  return true;
}

// try_merge_blocks: `src` (a neighbour) is absorbed when free and equally
// mapped; *dst then names the merged block. Returns the bytes subsumed.
int64_t CachingAllocator::TryMergeBlocks(BlockId* dst, BlockId src) {
  if (src == kNoBlock) return 0;
  Block& s = blocks_[src];
  Block& d = blocks_[*dst];
  if (s.allocated || s.mapped != d.mapped) return 0;
  if (s.mapped) EraseFree(src);
  const int64_t subsumed = s.size;
  if (s.address < d.address) {  // [src dst]: the lower block survives
    s.size += d.size;
    s.requested_size = d.requested_size;
    UnlinkBlock(*dst);
    *dst = src;
  } else {  // [dst src]
    d.size += subsumed;
    UnlinkBlock(src);
  }
  return subsumed;
}

// alloc_found_block: splits off the remainder when asked, updates stats.
void CachingAllocator::AllocFoundBlock(BlockId block, int64_t size, int64_t requested, bool split) {
  const bool already_split = IsSplit(block);
  const bool expandable = blocks_[block].expandable;
  if (split) {
    const BlockId remaining = SplitBlock(block, size);
    InsertFree(remaining);
    if (already_split && !expandable) {
      Shrink(&stats_.inactive_split_bytes, size);  // a split free block shrank
    } else if (!expandable) {
      Grow(&stats_.inactive_split_bytes, blocks_[remaining].size);  // a new split free block
      Grow(&stats_.inactive_split, 1);
    }
  } else if (already_split && !expandable) {
    Shrink(&stats_.inactive_split_bytes, blocks_[block].size);  // a split free block is used
    Shrink(&stats_.inactive_split, 1);
  }
  Block& b = blocks_[block];
  b.allocated = true;
  b.requested_size = requested;
  Grow(&stats_.allocation, 1);
  Grow(&stats_.allocated_bytes, b.size);
  Grow(&stats_.active, 1);
  Grow(&stats_.active_bytes, b.size);
  Grow(&stats_.requested_bytes, requested);
}

bool CachingAllocator::Malloc(int64_t id, int64_t bytes, std::string* error) {
  if (bytes < 0) {
    *error = fmt::format("malloc of id {}: negative size {}", id, bytes);
    return false;
  }
  if (live_.Find(id) != kNoBlock) {
    *error = fmt::format("malloc of id {}: id is already live", id);
    return false;
  }
  if (bytes == 0) {
    live_.Insert(id, kZeroBytes);
    return true;
  }
  const int64_t size = RoundSize(config_, bytes);
  const PoolIndex pool = size <= config_.small_size ? kSmallPool : kLargePool;  // get_pool
  const int64_t alloc_size = AllocationSize(config_, size);

  BlockId block = GetFreeBlock(pool, size);
  if (block == kNoBlock) {
    if (GcEnabled()) GarbageCollectCachedBlocks();
    block = AllocBlock(pool, size, alloc_size, /*is_retry=*/false);
    if (block == kNoBlock && ReleaseAvailableCachedBlocks(pool, size)) {
      block = AllocBlock(pool, size, alloc_size, /*is_retry=*/false);
    }
    if (block == kNoBlock) {
      ReleaseCachedBlocks();
      block = AllocBlock(pool, size, alloc_size, /*is_retry=*/true);
    }
  }
  if (block == kNoBlock) {
    ++stats_.num_ooms;
    Record(TraceEntry::Action::kOom,
           std::max<int64_t>(0, config_.device_capacity - stats_.reserved_bytes.current), size);
    *error = fmt::format(
        "malloc of id {}: out of memory: tried to allocate {} (request {}); capacity {}, "
        "reserved {}, allocated {}",
        id, FormatBytes(alloc_size), FormatBytes(bytes), FormatBytes(config_.device_capacity),
        FormatBytes(stats_.reserved_bytes.current), FormatBytes(stats_.allocated_bytes.current));
    NoteReservedPeak();
    return false;
  }
  AllocFoundBlock(block, size, bytes, ShouldSplit(block, size));
  live_.Insert(id, block);
  Record(TraceEntry::Action::kAlloc, blocks_[block].address, bytes, id);
  NoteReservedPeak();
  return true;
}

// ---- free path ---------------------------------------------------------------

bool CachingAllocator::Free(int64_t id, std::string* error) {
  const BlockId block = live_.Find(id);
  if (block == kNoBlock) {
    *error = fmt::format("free of id {}: id is not live", id);
    return false;
  }
  live_.Erase(id);
  if (block == kZeroBytes) return true;
  const Block& b = blocks_[block];
  Record(TraceEntry::Action::kFreeRequested, b.address, b.requested_size, id);
  Record(TraceEntry::Action::kFreeCompleted, b.address, b.requested_size, id);
  Shrink(&stats_.allocation, 1);
  Shrink(&stats_.allocated_bytes, b.size);
  FreeBlock(block);
  return true;
}

// free_block: merge with free neighbours, cache, update inactive_split.
void CachingAllocator::FreeBlock(BlockId block) {
  Block& b = blocks_[block];
  const int64_t original_size = b.size;
  const int64_t requested = b.requested_size;
  b.allocated = false;
  b.requested_size = 0;
  int64_t net_split_blocks = 0;
  int64_t net_split_bytes = 0;
  for (const BlockId candidate : {b.prev, b.next}) {
    if (const int64_t subsumed = TryMergeBlocks(&block, candidate); subsumed > 0) {
      net_split_blocks -= 1;
      net_split_bytes -= subsumed;
    }
  }
  InsertFree(block);
  if (IsSplit(block)) {
    net_split_blocks += 1;
    net_split_bytes += blocks_[block].size;
  }
  if (!blocks_[block].expandable) {
    Grow(&stats_.inactive_split, net_split_blocks);
    Grow(&stats_.inactive_split_bytes, net_split_bytes);
  }
  Shrink(&stats_.active, 1);
  Shrink(&stats_.active_bytes, original_size);
  Shrink(&stats_.requested_bytes, requested);
}

// ---- releasing cached memory ---------------------------------------------------

// release_block: cudaFree of a whole, free, non-expandable segment.
void CachingAllocator::ReleaseBlock(BlockId block) {
  const Block& b = blocks_[block];
  Record(TraceEntry::Action::kSegmentFree, b.address, b.size);
  EraseFree(block);
  Shrink(&stats_.segment, 1);
  Shrink(&stats_.reserved_bytes, b.size);
  ++stats_.num_device_free;
  DeleteSegment(b.segment);
  DeleteBlock(block);
}

// unmap_block: unmaps the whole pages inside a free expandable block.
void CachingAllocator::UnmapBlock(BlockId block) {
  const Segment& segment = segments_[blocks_[block].segment];
  const int64_t page = PageSize(segment.pool);
  const int64_t address = blocks_[block].address;
  const int64_t block_end = address + blocks_[block].size;
  const int64_t begin = segment.address + RoundUp(address - segment.address, page);
  const int64_t end = segment.address + (block_end - segment.address) / page * page;
  if (begin >= end) return;
  EraseFree(block);
  if (block_end > end) InsertFree(SplitBlock(block, end - address));  // mapped tail
  BlockId unmapped = block;
  if (begin > address) {
    unmapped = SplitBlock(block, begin - address);
    InsertFree(block);  // mapped head
  }
  blocks_[unmapped].mapped = false;
  Record(TraceEntry::Action::kSegmentUnmap, begin, end - begin);
  TryMergeBlocks(&unmapped, blocks_[unmapped].prev);
  TryMergeBlocks(&unmapped, blocks_[unmapped].next);
  Shrink(&stats_.reserved_bytes, end - begin);
  ++stats_.num_device_free;
}

// release_blocks: frees all unsplit free segments, unmaps expandable pages.
void CachingAllocator::ReleaseBlocks(PoolIndex pool) {
  std::vector<BlockId> to_release;
  std::vector<BlockId> to_unmap;
  for (const FreeEntry& entry : free_[pool]) {
    if (blocks_[entry.block].expandable) {
      to_unmap.push_back(entry.block);
    } else if (!IsSplit(entry.block)) {
      to_release.push_back(entry.block);
    }
  }
  for (BlockId block : to_release) ReleaseBlock(block);
  for (BlockId block : to_unmap) {
    const SegmentId segment = blocks_[block].segment;
    UnmapBlock(block);
    // release_expandable_segment: a segment with no page left goes away.
    const Segment& info = segments_[segment];
    const Block& first = blocks_[info.head];
    if (!first.mapped && first.size == info.size) {
      DeleteBlock(info.head);
      DeleteSegment(segment);
      std::erase(expandable_segments_[pool], segment);
    }
  }
}

// release_cached_blocks (the large pool first, as in PyTorch).
void CachingAllocator::ReleaseCachedBlocks() {
  ReleaseBlocks(kLargePool);
  ReleaseBlocks(kSmallPool);
}

void CachingAllocator::EmptyCache() { ReleaseCachedBlocks(); }

// release_available_cached_blocks: with max_split_size set, free the oversize
// block that fits the request, or else oversize blocks from the largest down.
bool CachingAllocator::ReleaseAvailableCachedBlocks(PoolIndex pool, int64_t size) {
  if (config_.max_split_size == kNoMaxSplitSize) return false;
  FreeSet& blocks = free_[pool];
  const int64_t key = std::max(size, config_.max_split_size);
  auto releasable = [&](FreeSet::iterator at) {
    // PyTorch assumes oversize => whole.
    return !blocks_[at->block].expandable && !IsSplit(at->block);
  };
  auto it = blocks.lower_bound({key, kLowestAddress, kNoBlock});
  if (it != blocks.end()) {
    if (!releasable(it)) return false;
    ReleaseBlock(it->block);
    return true;
  }
  if (it == blocks.begin()) return false;
  int64_t released = 0;
  --it;  // the largest block
  while (released < key && it->size >= config_.max_split_size && releasable(it)) {
    const BlockId current = it->block;
    released += it->size;
    const bool at_begin = it == blocks.begin();
    if (!at_begin) --it;
    ReleaseBlock(current);
    if (at_begin) break;
  }
  return released >= key;
}

// garbage_collect_cached_blocks: above threshold * capacity, free unsplit
// large-pool blocks whose age (get_free_block calls since cached) is at least
// the average, repeatedly, until the excess is reclaimed.
void CachingAllocator::GarbageCollectCachedBlocks() {
  const auto threshold = static_cast<int64_t>(config_.garbage_collection_threshold *
                                              static_cast<double>(config_.device_capacity));
  const int64_t reserved = stats_.reserved_bytes.current;
  if (reserved <= threshold) return;
  const int64_t target = reserved - threshold;
  auto age = [&](BlockId b) {
    return get_free_block_calls_[kLargePool] - blocks_[b].gc_count_base;
  };
  auto freeable = [&](BlockId b) { return !blocks_[b].expandable && !IsSplit(b); };
  int64_t total_age = 0;
  int64_t freeable_count = 0;
  for (const FreeEntry& entry : free_[kLargePool]) {
    if (freeable(entry.block)) {
      total_age += age(entry.block);
      ++freeable_count;
    }
  }
  int64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && freeable_count > 0) {
    const double age_threshold =
        static_cast<double>(total_age) / static_cast<double>(freeable_count);
    freed = false;
    std::vector<BlockId> cached;
    for (const FreeEntry& entry : free_[kLargePool]) cached.push_back(entry.block);
    for (BlockId b : cached) {
      if (freeable(b) && static_cast<double>(age(b)) >= age_threshold) {
        freed = true;
        reclaimed += blocks_[b].size;
        total_age -= age(b);
        --freeable_count;
        ReleaseBlock(b);
      }
    }
  }
}

// ---- inspection ------------------------------------------------------------------

int64_t CachingAllocator::LargestFreeBlock() const {
  int64_t largest = 0;
  for (const FreeSet& blocks : free_) {
    if (!blocks.empty()) largest = std::max(largest, blocks.rbegin()->size);
  }
  return largest;
}

std::vector<SegmentInfo> CachingAllocator::Segments() const {
  std::vector<SegmentInfo> result;
  std::vector<std::pair<int64_t, SegmentId>> by_address;
  for (SegmentId id = 0; id < static_cast<SegmentId>(segments_.size()); ++id) {
    if (segments_[id].live) by_address.push_back({segments_[id].address, id});
  }
  std::sort(by_address.begin(), by_address.end());
  for (const auto& [address, id] : by_address) {
    const Segment& segment = segments_[id];
    // snapshot(): one segment per run of contiguous mapped blocks (an
    // expandable segment with unmapped holes is several).
    SegmentInfo info;
    info.is_small = segment.pool == kSmallPool;
    info.is_expandable = segment.expandable;
    auto flush = [&] {
      if (info.blocks.empty()) return;
      info.address = info.blocks.front().address;
      result.push_back(info);
      info.blocks.clear();
      info.total_size = info.allocated_size = 0;
    };
    for (BlockId at = segment.head; at != kNoBlock; at = blocks_[at].next) {
      const Block& b = blocks_[at];
      if (!b.mapped) {
        flush();
        continue;
      }
      info.blocks.push_back(BlockInfo{b.address, b.size, b.requested_size, b.allocated, b.mapped});
      info.total_size += b.size;
      if (b.allocated) info.allocated_size += b.size;
    }
    flush();
  }
  return result;
}

namespace {

constexpr EnumName<TraceEntry::Action> kTraceActions[] = {
    {TraceEntry::Action::kAlloc, "alloc"},
    {TraceEntry::Action::kFreeRequested, "free_requested"},
    {TraceEntry::Action::kFreeCompleted, "free_completed"},
    {TraceEntry::Action::kSegmentAlloc, "segment_alloc"},
    {TraceEntry::Action::kSegmentFree, "segment_free"},
    {TraceEntry::Action::kSegmentMap, "segment_map"},
    {TraceEntry::Action::kSegmentUnmap, "segment_unmap"},
    {TraceEntry::Action::kOom, "oom"},
};

}  // namespace

const char* TraceActionName(TraceEntry::Action action) {
  return NameOf(kTraceActions, action, "?");
}

bool Replay(const Config& config, const std::vector<Event>& events, Stats* stats,
            std::string* error) {
  if (!ValidateConfig(config, error)) return false;
  CachingAllocator allocator(config);
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& event = events[i];
    std::string why;
    bool ok = true;
    switch (event.kind) {
      case Event::Kind::kMalloc:
        ok = allocator.Malloc(event.id, event.bytes, &why);
        break;
      case Event::Kind::kFree:
        ok = allocator.Free(event.id, &why);
        break;
      case Event::Kind::kEmptyCache:
        allocator.EmptyCache();
        break;
    }
    if (!ok) {
      *stats = allocator.stats();
      *error = fmt::format("event {}: {}", i, why);
      return false;
    }
  }
  *stats = allocator.stats();
  return true;
}

}  // namespace memplan::alloc
