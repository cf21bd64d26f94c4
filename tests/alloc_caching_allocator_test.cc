// The caching allocator model, one rule per test, with the segments and
// bytes worked out by hand from c10/cuda/CUDACachingAllocator.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/alloc/caching_allocator.h"

namespace memplan::alloc {
namespace {

constexpr int64_t kKiB = 1024;

void MustMalloc(CachingAllocator& a, int64_t id, int64_t bytes) {
  std::string error;
  REQUIRE_MESSAGE(a.Malloc(id, bytes, &error), error);
}

void MustFree(CachingAllocator& a, int64_t id) {
  std::string error;
  REQUIRE_MESSAGE(a.Free(id, &error), error);
}

// The sizes of a segment's blocks, in address order; allocated ones negative
// so one vector says both.
std::vector<int64_t> Layout(const SegmentInfo& segment) {
  std::vector<int64_t> sizes;
  for (const BlockInfo& b : segment.blocks) sizes.push_back(b.allocated ? -b.size : b.size);
  return sizes;
}

TEST_CASE("alloc.round_size: 512 B minimum and multiples of kMinBlockSize") {
  Config config;
  CHECK(RoundSize(config, 1) == 512);
  CHECK(RoundSize(config, 512) == 512);
  CHECK(RoundSize(config, 1000) == 1024);
  CHECK(RoundSize(config, 1025) == 1536);
}

TEST_CASE("alloc.round_size: roundup_power2_divisions") {
  Config config;
  config.roundup_power2_divisions.fill(4);
  // 1 MiB + 1 lies in [1 MiB, 2 MiB), cut in 4 steps of 256 KiB.
  CHECK(RoundSize(config, kMiB + 1) == kMiB + 256 * kKiB);
  CHECK(RoundSize(config, 2 * kMiB) == 2 * kMiB);  // powers of two stay
  // Below kMinBlockSize * divisions (2048 B) plain rounding applies.
  CHECK(RoundSize(config, 1500) == 1536);
  // 5000 B: floor 4096, step 1024 -> 5120.
  CHECK(RoundSize(config, 5000) == 5120);
}

TEST_CASE("alloc.get_allocation_size: 2 MiB small, 20 MiB mid, 2 MiB-rounded large") {
  Config config;
  CHECK(AllocationSize(config, 512) == 2 * kMiB);
  CHECK(AllocationSize(config, kMiB) == 2 * kMiB);
  CHECK(AllocationSize(config, kMiB + 512) == 20 * kMiB);
  CHECK(AllocationSize(config, 10 * kMiB - 512) == 20 * kMiB);
  CHECK(AllocationSize(config, 10 * kMiB) == 10 * kMiB);
  CHECK(AllocationSize(config, 11 * kMiB) == 12 * kMiB);
}

TEST_CASE("alloc.small pool: 1000 B takes 1024 B of one 2 MiB segment") {
  CachingAllocator a{Config{}};
  MustMalloc(a, 1, 1000);
  const Stats& s = a.stats();
  CHECK(s.allocated_bytes.current == 1024);
  CHECK(s.requested_bytes.current == 1000);
  CHECK(s.reserved_bytes.current == 2 * kMiB);
  CHECK(s.segment.current == 1);
  CHECK(s.inactive_split.current == 1);
  CHECK(s.inactive_split_bytes.current == 2 * kMiB - 1024);
  const auto segments = a.Segments();
  REQUIRE(segments.size() == 1);
  CHECK(segments[0].is_small);
  CHECK(Layout(segments[0]) == std::vector<int64_t>{-1024, 2 * kMiB - 1024});
  // A second small request packs into the same segment.
  MustMalloc(a, 2, kMiB);
  CHECK(a.stats().segment.current == 1);
  CHECK(Layout(a.Segments()[0]) == std::vector<int64_t>{-1024, -kMiB, kMiB - 1024});
}

TEST_CASE("alloc.get_pool: up to 1 MiB is small, above is large") {
  CachingAllocator a{Config{}};
  MustMalloc(a, 1, kMiB);
  MustMalloc(a, 2, kMiB + 1);  // rounds to 1 MiB + 512 B: a 20 MiB segment
  const auto segments = a.Segments();
  REQUIRE(segments.size() == 2);
  CHECK(segments[0].is_small);
  CHECK(segments[0].total_size == 2 * kMiB);
  CHECK_FALSE(segments[1].is_small);
  CHECK(Layout(segments[1]) == std::vector<int64_t>{-(kMiB + 512), 19 * kMiB - 512});
}

TEST_CASE("alloc.large pool: 5 MiB splits a 20 MiB segment, 15 MiB stays cached") {
  CachingAllocator a{Config{}};
  MustMalloc(a, 1, 5 * kMiB);
  CHECK(a.stats().allocated_bytes.current == 5 * kMiB);
  CHECK(a.stats().reserved_bytes.current == 20 * kMiB);
  CHECK(a.LargestFreeBlock() == 15 * kMiB);
  CHECK(a.stats().inactive_split_bytes.current == 15 * kMiB);
  const auto segments = a.Segments();
  REQUIRE(segments.size() == 1);
  CHECK_FALSE(segments[0].is_small);
  CHECK(Layout(segments[0]) == std::vector<int64_t>{-5 * kMiB, 15 * kMiB});
  // The next mid-size request is carved from the cached remainder.
  MustMalloc(a, 2, 3 * kMiB);
  CHECK(a.stats().reserved_bytes.current == 20 * kMiB);
  CHECK(Layout(a.Segments()[0]) == std::vector<int64_t>{-5 * kMiB, -3 * kMiB, 12 * kMiB});
  CHECK(a.stats().inactive_split.current == 1);
  CHECK(a.stats().inactive_split_bytes.current == 12 * kMiB);
}

TEST_CASE("alloc.large pool: 11 MiB gets a 12 MiB segment, unsplit remainder is allocated") {
  CachingAllocator a{Config{}};
  MustMalloc(a, 1, 11 * kMiB);
  // remaining 1 MiB is not > kSmallSize: no split, the block is 12 MiB.
  CHECK(a.stats().reserved_bytes.current == 12 * kMiB);
  CHECK(a.stats().allocated_bytes.current == 12 * kMiB);
  CHECK(a.stats().requested_bytes.current == 11 * kMiB);
  CHECK(Layout(a.Segments()[0]) == std::vector<int64_t>{-12 * kMiB});
  // 10.5 MiB: 12 MiB segment, remaining 1.5 MiB > 1 MiB is split off.
  MustMalloc(a, 2, 10 * kMiB + 512 * kKiB);
  CHECK(Layout(a.Segments()[1]) ==
        std::vector<int64_t>{-(10 * kMiB + 512 * kKiB), kMiB + 512 * kKiB});
}

TEST_CASE("alloc.free merges free neighbours back into one block") {
  CachingAllocator a{Config{}};
  MustMalloc(a, 1, 1000);
  MustMalloc(a, 2, 1000);
  MustMalloc(a, 3, 1000);
  const int64_t rest = 2 * kMiB - 3 * 1024;
  MustFree(a, 2);
  CHECK(Layout(a.Segments()[0]) == std::vector<int64_t>{-1024, 1024, -1024, rest});
  CHECK(a.stats().inactive_split.current == 2);
  CHECK(a.stats().inactive_split_bytes.current == 1024 + rest);
  MustFree(a, 1);
  CHECK(Layout(a.Segments()[0]) == std::vector<int64_t>{2048, -1024, rest});
  CHECK(a.stats().inactive_split.current == 2);
  CHECK(a.stats().inactive_split_bytes.current == 2048 + rest);
  MustFree(a, 3);
  CHECK(Layout(a.Segments()[0]) == std::vector<int64_t>{2 * kMiB});
  CHECK(a.stats().inactive_split.current == 0);
  CHECK(a.stats().inactive_split_bytes.current == 0);
  CHECK(a.stats().allocated_bytes.current == 0);
  CHECK(a.stats().reserved_bytes.current == 2 * kMiB);  // cached, not returned
}

TEST_CASE("alloc.best fit: smallest block that fits, then the lowest address") {
  CachingAllocator a{Config{}};
  MustMalloc(a, 1, 12 * kMiB);  // segment A, 12 MiB
  MustMalloc(a, 2, 14 * kMiB);  // segment B, 14 MiB
  MustMalloc(a, 3, 12 * kMiB);  // segment C, 12 MiB
  MustFree(a, 1);
  MustFree(a, 2);
  MustFree(a, 3);
  auto allocated = [&] {
    std::vector<int64_t> sizes;
    for (const SegmentInfo& s : a.Segments()) sizes.push_back(s.allocated_size);
    return sizes;
  };
  MustMalloc(a, 4, 11 * kMiB);
  CHECK(allocated() == std::vector<int64_t>{12 * kMiB, 0, 0});
  MustMalloc(a, 5, 11 * kMiB);
  CHECK(allocated() == std::vector<int64_t>{12 * kMiB, 0, 12 * kMiB});
  MustMalloc(a, 6, 11 * kMiB);  // 14 MiB block: remaining 3 MiB is split off
  CHECK(allocated() == std::vector<int64_t>{12 * kMiB, 11 * kMiB, 12 * kMiB});
  CHECK(a.stats().reserved_bytes.current == 38 * kMiB);
}

TEST_CASE("alloc.max_split_size: oversize blocks are whole and kept from small requests") {
  Config config;
  config.max_split_size = 20 * kMiB;
  CachingAllocator a{config};
  MustMalloc(a, 1, 40 * kMiB);
  MustFree(a, 1);  // a cached 40 MiB oversize block
  // 5 MiB < max_split_size may not use the oversize block: new 20 MiB segment.
  MustMalloc(a, 2, 5 * kMiB);
  CHECK(a.stats().reserved_bytes.current == 60 * kMiB);
  // 30 MiB may: 40 < 30 + 20 (kLargeBuffer slack), and it is not split.
  MustMalloc(a, 3, 30 * kMiB);
  CHECK(a.stats().reserved_bytes.current == 60 * kMiB);
  CHECK(a.stats().allocated_bytes.current == 5 * kMiB + 40 * kMiB);
  MustFree(a, 3);
  // 20 MiB may not: 40 >= 20 + 20, so a new 20 MiB segment is made.
  MustMalloc(a, 4, 20 * kMiB);
  CHECK(a.stats().reserved_bytes.current == 80 * kMiB);
  CHECK(a.stats().allocated_bytes.current == 25 * kMiB);
}

TEST_CASE("alloc.a repeated step reuses the cached segments") {
  CachingAllocator a{Config{}};
  auto step = [&] {
    MustMalloc(a, 1, 5 * kMiB);
    MustMalloc(a, 2, 300 * kKiB);
    MustMalloc(a, 3, 50 * kMiB);
    MustFree(a, 2);
    MustMalloc(a, 4, 2 * kMiB);
    MustMalloc(a, 5, 700 * kKiB);
    MustFree(a, 1);
    MustFree(a, 3);
    MustFree(a, 4);
    MustFree(a, 5);
  };
  step();
  const Stats first = a.stats();
  // 2 MiB small segment + 20 MiB (5 MiB, then 2 MiB) + 50 MiB.
  CHECK(first.reserved_bytes.peak == 72 * kMiB);
  // After id 2 is freed: 5 MiB + 50 MiB + 2 MiB + 700 KiB.
  CHECK(first.allocated_bytes.peak == 57 * kMiB + 700 * kKiB);
  step();
  CHECK(a.stats().reserved_bytes.current == first.reserved_bytes.current);
  CHECK(a.stats().reserved_bytes.peak == first.reserved_bytes.peak);
  CHECK(a.stats().segment.current == 3);
  CHECK(a.stats().num_device_alloc == 3);
  CHECK(a.stats().allocated_bytes.current == 0);
}

TEST_CASE("alloc.empty_cache releases only unsplit free segments") {
  CachingAllocator a{Config{}};
  MustMalloc(a, 1, 1000);      // small segment, stays partly used
  MustMalloc(a, 2, 5 * kMiB);  // 20 MiB segment
  MustMalloc(a, 3, 1000);
  MustFree(a, 2);
  MustFree(a, 3);
  CHECK(a.stats().reserved_bytes.current == 22 * kMiB);
  a.EmptyCache();
  CHECK(a.stats().reserved_bytes.current == 2 * kMiB);
  CHECK(a.stats().segment.current == 1);
  CHECK(a.stats().num_device_free == 1);
  CHECK(a.stats().reserved_bytes.peak == 22 * kMiB);
}

TEST_CASE("alloc.capacity: free cached segments and retry, else out of memory") {
  Config config;
  config.device_capacity = 40 * kMiB;
  CachingAllocator a{config};
  MustMalloc(a, 1, 12 * kMiB);
  MustFree(a, 1);  // 12 MiB cached
  // 12 + 30 > 40: release_cached_blocks frees the 12 MiB, the retry fits.
  MustMalloc(a, 2, 30 * kMiB);
  CHECK(a.stats().num_alloc_retries == 1);
  CHECK(a.stats().reserved_bytes.current == 30 * kMiB);
  CHECK(a.stats().num_device_free == 1);
  std::string error;
  CHECK_FALSE(a.Malloc(3, 12 * kMiB, &error));
  CHECK(error ==
        "malloc of id 3: out of memory: tried to allocate 12.00 MiB (request 12.00 MiB); "
        "capacity 40.00 MiB, reserved 30.00 MiB, allocated 30.00 MiB");
  CHECK(a.stats().num_ooms == 1);
  CHECK(a.stats().num_alloc_retries == 2);
  // Nothing changed; the id can be used later.
  MustFree(a, 2);
  MustMalloc(a, 3, 12 * kMiB);
}

TEST_CASE("alloc.capacity with max_split_size: oversize blocks are released first") {
  Config config;
  config.device_capacity = 50 * kMiB;
  config.max_split_size = 20 * kMiB;
  CachingAllocator a{config};
  MustMalloc(a, 1, 40 * kMiB);
  MustFree(a, 1);
  // 18 MiB may not use the oversize block and 40 + 18 > 50:
  // release_available_cached_blocks frees it (no retry counted), then the
  // 18 MiB segment fits.
  MustMalloc(a, 2, 18 * kMiB);
  CHECK(a.stats().num_alloc_retries == 0);
  CHECK(a.stats().num_device_free == 1);
  CHECK(a.stats().reserved_bytes.current == 18 * kMiB);
}

TEST_CASE("alloc.garbage_collection_threshold frees the oldest cached blocks") {
  Config config;
  config.device_capacity = 100 * kMiB;
  config.garbage_collection_threshold = 0.5;  // 50 MiB
  CachingAllocator a{config};
  MustMalloc(a, 1, 30 * kMiB);  // large-pool get_free_block call 1
  MustFree(a, 1);               // age base 1
  MustMalloc(a, 2, 32 * kMiB);  // call 2: 30 MiB does not fit; 30 <= 50, no gc
  MustFree(a, 2);               // age base 2
  // Call 3: nothing fits; reserved 62 > 50 so gc reclaims >= 12 MiB from
  // blocks at least the average age 1.5: the 30 MiB block (age 2) only.
  MustMalloc(a, 3, 40 * kMiB);
  CHECK(a.stats().reserved_bytes.current == 72 * kMiB);
  CHECK(a.stats().segment.current == 2);
  CHECK(a.stats().num_alloc_retries == 0);
}

TEST_CASE("alloc.expandable_segments: one growing segment mapped in pages") {
  Config config;
  config.expandable_segments = true;
  CachingAllocator a{config};
  MustMalloc(a, 1, 5 * kMiB);  // maps one 20 MiB large page
  CHECK(a.stats().reserved_bytes.current == 20 * kMiB);
  CHECK(a.stats().segment.current == 0);  // map_block does not count segments
  // 30 MiB: the free 15 MiB tail grows by one more 20 MiB page.
  MustMalloc(a, 2, 30 * kMiB);
  CHECK(a.stats().reserved_bytes.current == 40 * kMiB);  // 50 MiB without
  auto segments = a.Segments();
  REQUIRE(segments.size() == 1);
  CHECK(segments[0].is_expandable);
  CHECK(Layout(segments[0]) == std::vector<int64_t>{-5 * kMiB, -30 * kMiB, 5 * kMiB});
  MustMalloc(a, 3, 1000);  // the small pool has its own, 2 MiB pages
  CHECK(a.stats().reserved_bytes.current == 42 * kMiB);
  MustFree(a, 1);
  MustFree(a, 2);
  MustFree(a, 3);
  CHECK(a.stats().reserved_bytes.current == 42 * kMiB);  // kept until empty_cache
  CHECK(a.stats().inactive_split_bytes.current == 0);
  a.EmptyCache();
  CHECK(a.stats().reserved_bytes.current == 0);
  CHECK(a.Segments().empty());
  MustMalloc(a, 4, 45 * kMiB);  // remapped from the segment start: 3 pages
  CHECK(a.stats().reserved_bytes.current == 60 * kMiB);
}

TEST_CASE("alloc.expandable_segments: best fit skips the growable tail block") {
  Config config;
  config.expandable_segments = true;
  CachingAllocator a{config};
  MustMalloc(a, 1, 5 * kMiB);   // [5][15 free] on one 20 MiB page
  MustMalloc(a, 2, 12 * kMiB);  // [5][12][3 free]
  MustMalloc(a, 3, 35 * kMiB);  // 3 free + two more pages: [5][12][35][8 free]
  CHECK(a.stats().reserved_bytes.current == 60 * kMiB);
  MustFree(a, 2);  // free blocks: 8 MiB at the tail, 12 MiB in the middle
  // The tail counts as 8 MiB + the unmapped rest, so the 12 MiB block wins.
  MustMalloc(a, 4, 7 * kMiB);
  CHECK(Layout(a.Segments()[0]) ==
        std::vector<int64_t>{-5 * kMiB, -7 * kMiB, 5 * kMiB, -35 * kMiB, 8 * kMiB});
  CHECK(a.stats().reserved_bytes.current == 60 * kMiB);
}

TEST_CASE("alloc.stats: gap between reserved and allocated at the reserved peak") {
  CachingAllocator a{Config{}};
  MustMalloc(a, 1, 5 * kMiB);
  CHECK(a.stats().unallocated_at_reserved_peak == 15 * kMiB);
  MustMalloc(a, 2, 50 * kMiB);
  CHECK(a.stats().unallocated_at_reserved_peak == 15 * kMiB);
  MustMalloc(a, 3, 14 * kMiB);  // fits the cached 15 MiB: peak unchanged
  CHECK(a.stats().unallocated_at_reserved_peak == 15 * kMiB);
  CHECK(a.stats().reserved_bytes.peak == 70 * kMiB);
}

// Checks what every state must satisfy: segment sums match the stats, blocks
// tile their segment, no two free neighbours are left unmerged.
void CheckInvariants(const CachingAllocator& a) {
  int64_t reserved = 0, allocated = 0, inactive_split_bytes = 0, largest_free = 0;
  int64_t segments = 0;
  for (const SegmentInfo& segment : a.Segments()) {
    reserved += segment.total_size;
    allocated += segment.allocated_size;
    if (!segment.is_expandable) ++segments;
    int64_t end = segment.blocks.front().address;
    bool previous_free = false;
    for (const BlockInfo& b : segment.blocks) {
      if (!segment.is_expandable) CHECK(b.address == end);  // expandable: gaps unmapped
      if (b.address == end) CHECK_FALSE((previous_free && !b.allocated));
      end = b.address + b.size;
      previous_free = !b.allocated;
      if (!b.allocated) {
        largest_free = std::max(largest_free, b.size);
        if (!segment.is_expandable && segment.blocks.size() > 1) inactive_split_bytes += b.size;
      }
    }
  }
  const Stats& s = a.stats();
  CHECK(s.reserved_bytes.current == reserved);
  CHECK(s.allocated_bytes.current == allocated);
  CHECK(s.segment.current == segments);
  CHECK(s.inactive_split_bytes.current == inactive_split_bytes);
  CHECK(a.LargestFreeBlock() == largest_free);
  CHECK(s.allocated_bytes.current <= s.reserved_bytes.current);
  CHECK(s.reserved_bytes.current <= s.reserved_bytes.peak);
  if (a.config().device_capacity > 0) CHECK(s.reserved_bytes.current <= a.config().device_capacity);
}

TEST_CASE("alloc.invariants hold on random event streams") {
  // 200 MiB capacities make the retry and out-of-memory paths run.
  Config capped;
  capped.device_capacity = 200 * kMiB;
  capped.garbage_collection_threshold = 0.6;
  capped.max_split_size = 64 * kMiB;
  Config rounded;
  rounded.roundup_power2_divisions.fill(4);
  Config expandable;
  expandable.expandable_segments = true;
  Config expandable_capped = expandable;
  expandable_capped.device_capacity = 200 * kMiB;
  for (const Config& config : {Config{}, capped, rounded, expandable, expandable_capped}) {
    CachingAllocator a{config};
    uint64_t state = 12345;
    auto next = [&] {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return state >> 33;
    };
    std::vector<int64_t> live;
    int64_t next_id = 0;
    for (int step = 0; step < 3000; ++step) {
      const uint64_t r = next() % 100;
      std::string error;
      if (r < 2) {
        a.EmptyCache();
      } else if (r < 50 || live.empty()) {
        // Mostly small and mid sizes, some up to 96 MiB.
        const int64_t bytes = next() % 4 == 0 ? static_cast<int64_t>(next() % (96 * kMiB)) + 1
                                              : static_cast<int64_t>(next() % (3 * kMiB)) + 1;
        if (a.Malloc(next_id, bytes, &error)) {
          live.push_back(next_id);
        } else {
          CHECK(error.find("out of memory") != std::string::npos);
        }
        ++next_id;
      } else {
        const size_t victim = next() % live.size();
        REQUIRE(a.Free(live[victim], &error));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
      }
      CheckInvariants(a);
    }
    if (config.device_capacity > 0) {
      CHECK(a.stats().num_ooms > 0);  // the stream does reach the capacity
      CHECK(a.stats().num_alloc_retries > 0);
    }
    for (int64_t id : live) {
      std::string error;
      REQUIRE(a.Free(id, &error));
    }
    a.EmptyCache();
    CHECK(a.stats().reserved_bytes.current == 0);
    CHECK(a.stats().inactive_split.current == 0);
  }
}

TEST_CASE("alloc.errors: bad ids and 0-byte requests") {
  CachingAllocator a{Config{}};
  std::string error;
  CHECK(a.Malloc(1, 0, &error));
  CHECK(a.stats().reserved_bytes.current == 0);
  CHECK_FALSE(a.Malloc(1, 10, &error));
  CHECK(error == "malloc of id 1: id is already live");
  CHECK(a.Free(1, &error));
  CHECK_FALSE(a.Free(1, &error));
  CHECK(error == "free of id 1: id is not live");
  CHECK_FALSE(a.Malloc(2, -1, &error));
  CHECK(error == "malloc of id 2: negative size -1");
}

TEST_CASE("alloc.ids: negative, huge and dense ids live in one namespace") {
  CachingAllocator a{Config{}};
  std::string error;
  const int64_t huge = int64_t{1} << 40;
  MustMalloc(a, -7, 1000);
  MustMalloc(a, huge, 1000);
  MustMalloc(a, 100000, 1000);  // above the first dense ids
  for (int64_t id = 0; id < 30000; ++id) MustMalloc(a, id, id % 2 == 0 ? 0 : 512);
  MustMalloc(a, 150000, 1000);  // now ids up to 150000 are looked up densely
  CHECK_FALSE(a.Malloc(100000, 5, &error));
  CHECK(error == "malloc of id 100000: id is already live");
  CHECK_FALSE(a.Malloc(-7, 5, &error));
  CHECK_FALSE(a.Malloc(huge, 5, &error));
  CHECK_FALSE(a.Malloc(29998, 5, &error));  // a live 0-byte id
  for (int64_t id : {int64_t{-7}, huge, int64_t{100000}, int64_t{150000}}) MustFree(a, id);
  for (int64_t id = 0; id < 30000; ++id) MustFree(a, id);
  CHECK_FALSE(a.Free(100000, &error));
  CHECK(error == "free of id 100000: id is not live");
  CHECK_FALSE(a.Free(huge, &error));
  CHECK_FALSE(a.Free(0, &error));
  MustMalloc(a, 100000, 1000);
  MustMalloc(a, huge, 1000);
  CHECK(a.stats().allocated_bytes.current == 2 * 1024);
  CHECK(a.stats().allocation.current == 2);
}

TEST_CASE("alloc.replay reports the failing event") {
  using K = Event::Kind;
  Stats stats;
  std::string error;
  CHECK(Replay(Config{}, {{K::kMalloc, 1, 1000}, {K::kFree, 1}, {K::kEmptyCache}}, &stats, &error));
  CHECK(stats.reserved_bytes.peak == 2 * kMiB);
  CHECK(stats.reserved_bytes.current == 0);
  CHECK_FALSE(Replay(Config{}, {{K::kMalloc, 1, 1000}, {K::kFree, 9}}, &stats, &error));
  CHECK(error == "event 1: free of id 9: id is not live");
  Config bad;
  bad.max_split_size = kMiB;
  CHECK_FALSE(Replay(bad, {}, &stats, &error));
  CHECK(error ==
        "invalid allocator config: max_split_size must be >= large_buffer (20971520), found "
        "1048576");
}

}  // namespace
}  // namespace memplan::alloc
