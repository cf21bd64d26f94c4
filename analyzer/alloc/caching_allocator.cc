#include "analyzer/alloc/caching_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <iterator>

#include "analyzer/units.h"

namespace memplan::alloc {
namespace {

constexpr int64_t kLowestAddress = std::numeric_limits<int64_t>::min();

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

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

CachingAllocator::Block* CachingAllocator::FindBlock(int64_t address) {
  auto it = blocks_.find(address);
  return it == blocks_.end() ? nullptr : &it->second;
}

CachingAllocator::Block* CachingAllocator::PrevInSegment(const Block& block) {
  auto it = blocks_.find(block.address);
  if (it == blocks_.begin()) return nullptr;
  --it;
  return it->second.segment == block.segment ? &it->second : nullptr;
}

CachingAllocator::Block* CachingAllocator::NextInSegment(const Block& block) {
  auto it = std::next(blocks_.find(block.address));
  if (it == blocks_.end()) return nullptr;
  return it->second.segment == block.segment ? &it->second : nullptr;
}

bool CachingAllocator::IsSplit(const Block& block) {
  return PrevInSegment(block) != nullptr || NextInSegment(block) != nullptr;
}

bool CachingAllocator::IsExpandable(const Block& block) const {
  return segments_.at(block.segment).expandable;
}

CachingAllocator::PoolIndex CachingAllocator::PoolOf(const Block& block) const {
  return segments_.at(block.segment).pool;
}

int64_t CachingAllocator::PageSize(PoolIndex pool) const {
  return pool == kSmallPool ? config_.expandable_small_page : config_.expandable_large_page;
}

bool CachingAllocator::GcEnabled() const {
  return config_.device_capacity > 0 && config_.garbage_collection_threshold > 0.0;
}

// BlockPool::insert_into_blocks: also stamps the block's gc age base.
void CachingAllocator::InsertFree(Block* block) {
  const PoolIndex pool = PoolOf(*block);
  block->gc_count_base = get_free_block_calls_[pool];
  free_[pool].insert({block->size, block->address});
}

void CachingAllocator::EraseFree(const Block& block) {
  free_[PoolOf(block)].erase({block.size, block.address});
}

// ---- malloc path -------------------------------------------------------------

// get_free_block: best fit by (size, address), with the max_split_size rules.
CachingAllocator::Block* CachingAllocator::GetFreeBlock(PoolIndex pool, int64_t size) {
  if (GcEnabled()) ++get_free_block_calls_[pool];
  FreeSet& blocks = free_[pool];
  auto it = blocks.lower_bound({size, kLowestAddress});
  if (it == blocks.end()) return nullptr;
  if (IsExpandable(*FindBlock(it->second))) {
    // A block before the unmapped tail counts as the size it can grow to.
    auto expandable_size = [&](FreeSet::iterator at) {
      Block* b = FindBlock(at->second);
      Block* next = NextInSegment(*b);
      return b->size + (next != nullptr && !next->mapped ? next->size : 0);
    };
    auto next = std::next(it);
    while (IsExpandable(*FindBlock(it->second)) && next != blocks.end() &&
           expandable_size(next) < expandable_size(it)) {
      it = next++;
    }
  }
  const int64_t found = it->first;
  // Do not return an oversize block for a request below max_split_size.
  if (size < config_.max_split_size && found >= config_.max_split_size) return nullptr;
  // An oversize request may take an oversize block only within the slack.
  if (size >= config_.max_split_size && found >= size + config_.max_non_split_rounding) {
    return nullptr;
  }
  Block* block = FindBlock(it->second);
  blocks.erase(it);
  return block;
}

// should_split.
bool CachingAllocator::ShouldSplit(const Block& block, int64_t size) const {
  const int64_t remaining = block.size - size;
  if (PoolOf(block) == kSmallPool || config_.expandable_segments) {
    return remaining >= config_.min_block_size;
  }
  return size < config_.max_split_size && remaining > config_.small_size;
}

// alloc_block: a new cudaMalloc'd segment (or expandable pages). The block
// returned is not in the free set.
CachingAllocator::Block* CachingAllocator::AllocBlock(PoolIndex pool, int64_t size,
                                                      int64_t alloc_size, bool is_retry) {
  if (is_retry) ++stats_.num_alloc_retries;
  if (config_.device_capacity > 0 &&
      stats_.reserved_bytes.current + alloc_size > config_.device_capacity) {
    return nullptr;
  }
  if (config_.expandable_segments) return AllocExpandable(pool, size);
  const int64_t id = next_segment_id_++;
  segments_[id] = Segment{next_address_, alloc_size, pool, /*expandable=*/false};
  Block& block = blocks_[next_address_];
  block = Block{next_address_, alloc_size, 0, id};
  next_address_ += alloc_size;
  Grow(&stats_.segment, 1);
  Grow(&stats_.reserved_bytes, alloc_size);
  ++stats_.num_device_alloc;
  Record(TraceEntry::Action::kSegmentAlloc, block.address, alloc_size);
  return &block;
}

// try_allocate_expandable_block + find_expandable_block: the lowest address,
// over the pool's expandable segments, where a free block and/or unmapped
// pages make room for `size`; a new segment when none has room.
CachingAllocator::Block* CachingAllocator::AllocExpandable(PoolIndex pool, int64_t size) {
  auto allocatable = [](const Block* b) { return b != nullptr && !b->allocated; };
  Block* candidate = nullptr;
  for (int64_t id : expandable_segments_[pool]) {
    const Segment& segment = segments_.at(id);
    for (auto it = blocks_.lower_bound(segment.address);
         candidate == nullptr && it != blocks_.end() && it->first < segment.address + segment.size;
         ++it) {
      if (it->second.mapped) continue;
      Block* c = &it->second;
      if (Block* prev = PrevInSegment(*c); allocatable(prev)) c = prev;
      int64_t bytes = 0;
      for (Block* b = c; bytes < size && allocatable(b); b = NextInSegment(*b)) bytes += b->size;
      if (bytes >= size) candidate = c;
    }
    if (candidate != nullptr) break;
  }
  if (candidate == nullptr) {
    const int64_t id = next_segment_id_++;
    const int64_t page = PageSize(pool);
    // Whole pages of address space, at least enough for this request.
    const int64_t virtual_size = RoundUp(std::max(config_.expandable_virtual_size, size), page);
    segments_[id] = Segment{next_address_, virtual_size, pool, /*expandable=*/true};
    candidate = &blocks_[next_address_];
    *candidate = Block{next_address_, virtual_size, 0, id, false, /*mapped=*/false};
    next_address_ += virtual_size;
    expandable_segments_[pool].push_back(id);
  }
  if (!candidate->mapped && !MapBlock(candidate, std::min(candidate->size, size), &candidate)) {
    return nullptr;
  }
  while (candidate->size < size) {
    Block* next = NextInSegment(*candidate);
    if (!MapBlock(next, std::min(size - candidate->size, next->size), &candidate)) return nullptr;
  }
  EraseFree(*candidate);
  return candidate;
}

// map_block: backs the first `size` bytes (rounded up to pages) of the
// unmapped block with memory, merges with free neighbours, caches the result.
bool CachingAllocator::MapBlock(Block* to_map, int64_t size, Block** mapped) {
  const int64_t page = PageSize(segments_.at(to_map->segment).pool);
  const int64_t mapped_size = std::min(RoundUp(size, page), to_map->size);
  if (config_.device_capacity > 0 &&
      stats_.reserved_bytes.current + mapped_size > config_.device_capacity) {
    return false;  // cuMemCreate out of memory
  }
  if (mapped_size < to_map->size) {
    const int64_t rest = to_map->address + mapped_size;
    blocks_[rest] = Block{rest, to_map->size - mapped_size, 0, to_map->segment, false, false};
    to_map->size = mapped_size;
  }
  to_map->mapped = true;
  Record(TraceEntry::Action::kSegmentMap, to_map->address, mapped_size);
  TryMergeBlocks(&to_map, PrevInSegment(*to_map));
  TryMergeBlocks(&to_map, NextInSegment(*to_map));
  InsertFree(to_map);
  Grow(&stats_.reserved_bytes, mapped_size);
  ++stats_.num_device_alloc;
  *mapped = to_map;
  return true;
}

// try_merge_blocks: `src` (a neighbour) is absorbed when free and equally
// mapped; *dst then points at the merged block. Returns the bytes subsumed.
int64_t CachingAllocator::TryMergeBlocks(Block** dst, Block* src) {
  Block* d = *dst;
  if (src == nullptr || src->allocated || src->mapped != d->mapped) return 0;
  if (src->mapped) EraseFree(*src);
  const int64_t subsumed = src->size;
  if (src->address < d->address) {  // [src dst]: the lower block survives
    src->size += d->size;
    src->requested_size = d->requested_size;
    blocks_.erase(d->address);
    *dst = src;
  } else {  // [dst src]
    d->size += subsumed;
    blocks_.erase(src->address);
  }
  return subsumed;
}

// alloc_found_block: splits off the remainder when asked, updates stats.
CachingAllocator::Block* CachingAllocator::AllocFoundBlock(Block* block, int64_t size,
                                                           int64_t requested, bool split) {
  const bool already_split = IsSplit(*block);
  const bool expandable = IsExpandable(*block);
  if (split) {
    const int64_t rest = block->address + size;
    Block& remaining = blocks_[rest];
    remaining = Block{rest, block->size - size, 0, block->segment};
    block->size = size;
    InsertFree(&remaining);
    if (already_split && !expandable) {
      Shrink(&stats_.inactive_split_bytes, size);  // a split free block shrank
    } else if (!expandable) {
      Grow(&stats_.inactive_split_bytes, remaining.size);  // a new split free block
      Grow(&stats_.inactive_split, 1);
    }
  } else if (already_split && !expandable) {
    Shrink(&stats_.inactive_split_bytes, block->size);  // a split free block is used
    Shrink(&stats_.inactive_split, 1);
  }
  block->allocated = true;
  block->requested_size = requested;
  Grow(&stats_.allocation, 1);
  Grow(&stats_.allocated_bytes, block->size);
  Grow(&stats_.active, 1);
  Grow(&stats_.active_bytes, block->size);
  Grow(&stats_.requested_bytes, requested);
  return block;
}

bool CachingAllocator::Malloc(int64_t id, int64_t bytes, std::string* error) {
  if (bytes < 0) {
    *error = fmt::format("malloc of id {}: negative size {}", id, bytes);
    return false;
  }
  if (live_.count(id) != 0 || live_empty_.count(id) != 0) {
    *error = fmt::format("malloc of id {}: id is already live", id);
    return false;
  }
  if (bytes == 0) {
    live_empty_.insert(id);
    return true;
  }
  const int64_t size = RoundSize(config_, bytes);
  const PoolIndex pool = size <= config_.small_size ? kSmallPool : kLargePool;  // get_pool
  const int64_t alloc_size = AllocationSize(config_, size);

  Block* block = GetFreeBlock(pool, size);
  if (block == nullptr) {
    if (GcEnabled()) GarbageCollectCachedBlocks();
    block = AllocBlock(pool, size, alloc_size, /*is_retry=*/false);
    if (block == nullptr && ReleaseAvailableCachedBlocks(pool, size)) {
      block = AllocBlock(pool, size, alloc_size, /*is_retry=*/false);
    }
    if (block == nullptr) {
      ReleaseCachedBlocks();
      block = AllocBlock(pool, size, alloc_size, /*is_retry=*/true);
    }
  }
  if (block == nullptr) {
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
  block = AllocFoundBlock(block, size, bytes, ShouldSplit(*block, size));
  live_[id] = block->address;
  Record(TraceEntry::Action::kAlloc, block->address, bytes, id);
  NoteReservedPeak();
  return true;
}

// ---- free path ---------------------------------------------------------------

bool CachingAllocator::Free(int64_t id, std::string* error) {
  if (live_empty_.erase(id) != 0) return true;
  auto it = live_.find(id);
  if (it == live_.end()) {
    *error = fmt::format("free of id {}: id is not live", id);
    return false;
  }
  Block* block = FindBlock(it->second);
  live_.erase(it);
  Record(TraceEntry::Action::kFreeRequested, block->address, block->requested_size, id);
  Record(TraceEntry::Action::kFreeCompleted, block->address, block->requested_size, id);
  Shrink(&stats_.allocation, 1);
  Shrink(&stats_.allocated_bytes, block->size);
  FreeBlock(block);
  return true;
}

// free_block: merge with free neighbours, cache, update inactive_split.
void CachingAllocator::FreeBlock(Block* block) {
  const int64_t original_size = block->size;
  const int64_t requested = block->requested_size;
  block->allocated = false;
  block->requested_size = 0;
  int64_t net_split_blocks = 0;
  int64_t net_split_bytes = 0;
  Block* prev = PrevInSegment(*block);
  Block* next = NextInSegment(*block);
  for (Block* candidate : {prev, next}) {
    if (const int64_t subsumed = TryMergeBlocks(&block, candidate); subsumed > 0) {
      net_split_blocks -= 1;
      net_split_bytes -= subsumed;
    }
  }
  InsertFree(block);
  if (IsSplit(*block)) {
    net_split_blocks += 1;
    net_split_bytes += block->size;
  }
  if (!IsExpandable(*block)) {
    Grow(&stats_.inactive_split, net_split_blocks);
    Grow(&stats_.inactive_split_bytes, net_split_bytes);
  }
  Shrink(&stats_.active, 1);
  Shrink(&stats_.active_bytes, original_size);
  Shrink(&stats_.requested_bytes, requested);
}

// ---- releasing cached memory ---------------------------------------------------

// release_block: cudaFree of a whole, free, non-expandable segment.
void CachingAllocator::ReleaseBlock(Block* block) {
  Record(TraceEntry::Action::kSegmentFree, block->address, block->size);
  EraseFree(*block);
  Shrink(&stats_.segment, 1);
  Shrink(&stats_.reserved_bytes, block->size);
  ++stats_.num_device_free;
  segments_.erase(block->segment);
  blocks_.erase(block->address);
}

// unmap_block: unmaps the whole pages inside a free expandable block.
void CachingAllocator::UnmapBlock(Block* block) {
  const Segment& segment = segments_.at(block->segment);
  const int64_t page = PageSize(segment.pool);
  const int64_t begin = segment.address + RoundUp(block->address - segment.address, page);
  const int64_t end =
      segment.address + (block->address + block->size - segment.address) / page * page;
  if (begin >= end) return;
  EraseFree(*block);
  const int64_t block_end = block->address + block->size;
  if (block_end > end) {
    Block& after = blocks_[end];
    after = Block{end, block_end - end, 0, block->segment};
    InsertFree(&after);
  }
  Block* unmapped = block;
  if (begin > block->address) {
    block->size = begin - block->address;
    InsertFree(block);
    unmapped = &blocks_[begin];
    *unmapped = Block{begin, end - begin, 0, block->segment};
  } else {
    block->size = end - begin;
  }
  unmapped->mapped = false;
  Record(TraceEntry::Action::kSegmentUnmap, begin, end - begin);
  TryMergeBlocks(&unmapped, PrevInSegment(*unmapped));
  TryMergeBlocks(&unmapped, NextInSegment(*unmapped));
  Shrink(&stats_.reserved_bytes, end - begin);
  ++stats_.num_device_free;
}

// release_blocks: frees all unsplit free segments, unmaps expandable pages.
void CachingAllocator::ReleaseBlocks(PoolIndex pool) {
  std::vector<int64_t> to_release;
  std::vector<int64_t> to_unmap;
  for (const auto& [size, address] : free_[pool]) {
    const Block& block = blocks_.at(address);
    if (IsExpandable(block)) {
      to_unmap.push_back(address);
    } else if (!IsSplit(block)) {
      to_release.push_back(address);
    }
  }
  for (int64_t address : to_release) ReleaseBlock(FindBlock(address));
  for (int64_t address : to_unmap) {
    Block* block = FindBlock(address);
    const int64_t segment = block->segment;
    UnmapBlock(block);
    // release_expandable_segment: a segment with no page left goes away.
    const Segment& info = segments_.at(segment);
    const Block& first = blocks_.at(info.address);
    if (!first.mapped && first.size == info.size) {
      blocks_.erase(info.address);
      segments_.erase(segment);
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
    const Block& b = blocks_.at(at->second);
    return !IsExpandable(b) && !IsSplit(b);  // PyTorch assumes oversize => whole
  };
  auto it = blocks.lower_bound({key, kLowestAddress});
  if (it != blocks.end()) {
    if (!releasable(it)) return false;
    ReleaseBlock(FindBlock(it->second));
    return true;
  }
  if (it == blocks.begin()) return false;
  int64_t released = 0;
  --it;  // the largest block
  while (released < key && it->first >= config_.max_split_size && releasable(it)) {
    const auto current = it;
    released += current->first;
    const bool at_begin = it == blocks.begin();
    if (!at_begin) --it;
    ReleaseBlock(FindBlock(current->second));
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
  auto age = [&](const Block& b) { return get_free_block_calls_[kLargePool] - b.gc_count_base; };
  auto freeable = [&](const Block& b) { return !IsExpandable(b) && !IsSplit(b); };
  int64_t total_age = 0;
  int64_t freeable_count = 0;
  for (const auto& [size, address] : free_[kLargePool]) {
    const Block& b = blocks_.at(address);
    if (freeable(b)) {
      total_age += age(b);
      ++freeable_count;
    }
  }
  int64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && freeable_count > 0) {
    const double age_threshold =
        static_cast<double>(total_age) / static_cast<double>(freeable_count);
    freed = false;
    std::vector<int64_t> addresses;
    for (const auto& [size, address] : free_[kLargePool]) addresses.push_back(address);
    for (int64_t address : addresses) {
      Block* b = FindBlock(address);
      if (freeable(*b) && static_cast<double>(age(*b)) >= age_threshold) {
        freed = true;
        reclaimed += b->size;
        total_age -= age(*b);
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
    if (!blocks.empty()) largest = std::max(largest, blocks.rbegin()->first);
  }
  return largest;
}

std::vector<SegmentInfo> CachingAllocator::Segments() const {
  std::vector<SegmentInfo> result;
  std::vector<std::pair<int64_t, int64_t>> by_address;  // (address, id)
  for (const auto& [id, segment] : segments_) by_address.push_back({segment.address, id});
  std::sort(by_address.begin(), by_address.end());
  for (const auto& [address, id] : by_address) {
    const Segment& segment = segments_.at(id);
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
    for (auto it = blocks_.lower_bound(address);
         it != blocks_.end() && it->first < address + segment.size; ++it) {
      const Block& b = it->second;
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

const char* TraceActionName(TraceEntry::Action action) {
  switch (action) {
    case TraceEntry::Action::kAlloc:
      return "alloc";
    case TraceEntry::Action::kFreeRequested:
      return "free_requested";
    case TraceEntry::Action::kFreeCompleted:
      return "free_completed";
    case TraceEntry::Action::kSegmentAlloc:
      return "segment_alloc";
    case TraceEntry::Action::kSegmentFree:
      return "segment_free";
    case TraceEntry::Action::kSegmentMap:
      return "segment_map";
    case TraceEntry::Action::kSegmentUnmap:
      return "segment_unmap";
    case TraceEntry::Action::kOom:
      return "oom";
  }
  return "?";
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
