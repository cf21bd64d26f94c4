"""An independent Python model of PyTorch's CUDA caching allocator.

Written from PyTorch's source, not from memplan's C++ model
(analyzer/alloc/caching_allocator.cc), so that tests/alloc/differential_test.py
can check one against the other. Sources read (pytorch/pytorch):

  c10/cuda/CUDACachingAllocator.cpp, class DeviceCachingAllocator (torch 2.x;
    read at commit 001074d2): malloc, round_size,
    roundup_power2_next_division, get_pool, get_allocation_size,
    get_free_block, should_split, alloc_found_block, free, free_block,
    try_merge_blocks, alloc_block, release_available_cached_blocks,
    release_cached_blocks, release_blocks, release_block,
    garbage_collect_cached_blocks, find_expandable_block,
    try_allocate_expandable_block, map_block, unmap_block,
    release_expandable_segment, ExpandableSegment::map/unmap, snapshot,
    cacheInfo. Newer code where it changed: pytorch/pytorch#134338 (torch
    2.5) makes release_available_cached_blocks and
    garbage_collect_cached_blocks skip blocks of expandable segments instead
    of handing them to release_block; get_free_block's oversize slack is
    max_non_split_rounding_mb (older releases: kLargeBuffer, its default).
    release_available_cached_blocks counts a block's size before releasing it
    (PyTorch reads it after release_block deleted it, issue #159567).
  c10/core/AllocatorConfig.cpp, AcceleratorAllocatorConfig (torch 2.9+):
    parseArgs (max_split_size_mb, max_non_split_rounding_mb,
    garbage_collection_threshold, roundup_power2_divisions in both forms,
    expandable_segments) and roundup_power2_divisions(size).

Data structures differ on purpose from the C++ model: blocks form a doubly
linked list per segment (Block.prev / Block.next, as in PyTorch); each pool
keeps its cached free blocks as a sorted Python list of (size, address) keys
searched with bisect, and its unmapped expandable ranges as a sorted list of
addresses.

Like memplan's model (and unlike a real GPU) it simplifies:
  - One device, one stream; no recordStream / CUDA events (a block is free
    the moment free() is called), no CUDA graph private pools, no MemPool, no
    IPC, no FreeCudaMemoryCallbacks (trigger_free_memory_callbacks frees
    nothing).
  - Addresses are synthetic: a bump counter starting at 1 << 32 that is never
    reused; a cudaMalloc'd segment takes alloc_size bytes of it and an
    expandable segment its whole virtual size. Best-fit ties between equal
    sizes therefore resolve by segment creation order.
  - `capacity` (bytes) is a device with that much free memory, limited to it
    by setMemoryFraction: set_fraction is true, allowed_memory_maximum ==
    capacity, and cuMemCreate (ExpandableSegment::map) fails when its pages
    would take reserved memory past capacity. alloc_block's fraction check
    (reserved + alloc_size) already keeps cudaMalloc within capacity. Memory
    held by the driver or by other processes is not modelled; without a
    capacity nothing OOMs.
  - An expandable segment reserves capacity * 9 / 8 of address space
    (PyTorch: totalGlobalMem * 9 / 8), or 1 TiB without a capacity, rounded up
    to whole pages, and at least the request.
  - DeviceStats: the AGGREGATE row only; no oversize_* stats, no
    num_sync_all_streams. Stats.unallocated_at_reserved_peak is memplan's own
    metric (reserved - allocated after the event that first reached the
    current reserved peak), not PyTorch's.
  - Snapshot reporting: PyTorch keeps a stale requested_size on free blocks;
    segments() reports 0 for them (memplan's convention).
"""

import bisect

KIB = 1024
MIB = 1024 * KIB

# Constants at the top of CUDACachingAllocator.cpp.
MIN_BLOCK_SIZE = 512  # kMinBlockSize
SMALL_SIZE = 1 * MIB  # kSmallSize: largest request served by the small pool
SMALL_BUFFER = 2 * MIB  # kSmallBuffer: small pool segment (and page) size
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc
ROUND_LARGE = 2 * MIB  # kRoundLarge
LARGE_BUFFER = 20 * MIB  # kLargeBuffer: 1..10 MiB requests' segment, large page

# AllocatorConfig.cpp: 16 roundup intervals, one per power of two from 1 MiB.
ROUNDUP_INTERVALS = 16
ROUNDUP_START_LOG2 = 20
NO_MAX_SPLIT = (1 << 64) - 1  # std::numeric_limits<size_t>::max()

FIRST_ADDRESS = 1 << 32
DEFAULT_EXPANDABLE_VIRTUAL = 1 << 40


def _is_pow2(value):
    return value > 0 and value & (value - 1) == 0


def _log2_floor(value):
    return value.bit_length() - 1


class AllocConfig:
    """The allocator settings PYTORCH_CUDA_ALLOC_CONF controls."""

    def __init__(self):
        self.max_split_size = NO_MAX_SPLIT
        self.max_non_split_rounding = LARGE_BUFFER
        self.roundup_power2_divisions = [0] * ROUNDUP_INTERVALS
        self.garbage_collection_threshold = 0.0
        self.expandable_segments = False

    @classmethod
    def parse(cls, text):
        """AcceleratorAllocatorConfig::parseArgs; ValueError on bad text.

        Options that do not change allocation (backend:native, pinned_*,
        release_lock_on_cudamalloc, ...) are accepted and ignored."""
        config = cls()
        tokens = _lex(text)
        i = 0

        def expect(index, token):
            if index >= len(tokens) or tokens[index] != token:
                raise ValueError("expected %r at token %d of %r" % (token, index, text))

        def number(index):
            if index >= len(tokens):
                raise ValueError("missing value in %r" % text)
            return int(tokens[index])

        while i < len(tokens):
            key = tokens[i]
            if key in ("max_split_size_mb", "max_non_split_rounding_mb"):
                expect(i + 1, ":")
                i += 2
                mib = number(i)
                if mib < LARGE_BUFFER // MIB:
                    raise ValueError("%s must be >= %d" % (key, LARGE_BUFFER // MIB))
                if key == "max_split_size_mb":
                    config.max_split_size = mib * MIB
                else:
                    config.max_non_split_rounding = mib * MIB
            elif key == "garbage_collection_threshold":
                expect(i + 1, ":")
                i += 2
                value = float(tokens[i])
                if not 0.0 < value < 1.0:
                    raise ValueError("garbage_collection_threshold must be in (0, 1)")
                config.garbage_collection_threshold = value
            elif key == "roundup_power2_divisions":
                expect(i + 1, ":")
                i = _parse_roundup(tokens, i + 2, config.roundup_power2_divisions)
            elif key == "expandable_segments":
                expect(i + 1, ":")
                i += 2
                if i >= len(tokens) or tokens[i] not in ("True", "False"):
                    raise ValueError("expandable_segments takes True or False")
                config.expandable_segments = tokens[i] == "True"
            else:
                # Other keys take one value token (backend:native, pinned_*).
                expect(i + 1, ":")
                i += 2
            if i + 1 < len(tokens):
                expect(i + 1, ",")
                i += 1
            i += 1
        return config

    def divisions_for(self, size):
        """AcceleratorAllocatorConfig::roundup_power2_divisions(size)."""
        index = max(0, _log2_floor(size) - ROUNDUP_START_LOG2)
        return self.roundup_power2_divisions[min(index, ROUNDUP_INTERVALS - 1)]


def _lex(text):
    """AllocatorConfig::lexArgs / ConfigTokenizer: spaces dropped, ',' ':' '['
    ']' are tokens of their own."""
    tokens, word = [], ""
    for char in text:
        if char in ",:[]":
            if word:
                tokens.append(word)
            word = ""
            tokens.append(char)
        elif char != " ":
            word += char
    if word:
        tokens.append(word)
    return tokens


def _parse_roundup(tokens, i, divisions):
    """parseRoundUpPower2Divisions from token i (the value); returns the index
    of its last token. The list form [MiB:D,...,>:D] fills every interval
    below the first boundary with its D, sets each boundary's interval, and
    '>' fills every interval above the last boundary (main branch:
    last_index + 1)."""
    if tokens[i] != "[":
        value = int(tokens[i])
        if not _is_pow2(value):
            raise ValueError("roundup_power2_divisions must be a power of 2")
        divisions[:] = [value] * ROUNDUP_INTERVALS
        return i
    first_value, last_index = True, 0
    i += 1
    while i < len(tokens) and tokens[i] != "]":
        boundary = tokens[i]
        if tokens[i + 1] != ":":
            raise ValueError("expected ':' in roundup_power2_divisions")
        value = int(tokens[i + 2])
        i += 2
        if value != 0 and not _is_pow2(value):
            raise ValueError("divisions must be 0 or a power of 2")
        if boundary == ">":
            for index in range(last_index + 1, ROUNDUP_INTERVALS):
                divisions[index] = value
        else:
            boundary_mib = int(boundary)
            if not _is_pow2(boundary_mib):
                raise ValueError("intervals must be powers of 2")
            index = min(max(_log2_floor(boundary_mib), 0), ROUNDUP_INTERVALS - 1)
            if first_value:
                for below in range(index):
                    divisions[below] = value
                first_value = False
            divisions[index] = value
            last_index = index
        if tokens[i + 1] != "]":
            if tokens[i + 1] != ",":
                raise ValueError("expected ',' in roundup_power2_divisions")
            i += 1
        i += 1
    if i >= len(tokens):
        raise ValueError("missing ']' in roundup_power2_divisions")
    return i


def roundup_power2_next_division(size, divisions):
    """DeviceCachingAllocator::roundup_power2_next_division."""
    if _is_pow2(size):
        return size
    power2_floor = 1 << _log2_floor(size)
    step = power2_floor >> _log2_floor(divisions)
    if step == 0:
        return power2_floor << 1
    floor = size & ~(step - 1)
    return size if floor == size else floor + step


def round_size(config, size):
    """DeviceCachingAllocator::round_size."""
    if size < MIN_BLOCK_SIZE:
        return MIN_BLOCK_SIZE
    divisions = config.divisions_for(size)
    if divisions > 1 and size > MIN_BLOCK_SIZE * divisions:
        return roundup_power2_next_division(size, divisions)
    return MIN_BLOCK_SIZE * ((size + MIN_BLOCK_SIZE - 1) // MIN_BLOCK_SIZE)


def get_allocation_size(size):
    """DeviceCachingAllocator::get_allocation_size."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((size + ROUND_LARGE - 1) // ROUND_LARGE)


class Stat:
    __slots__ = ("current", "peak")

    def __init__(self):
        self.current = 0
        self.peak = 0

    def increase(self, amount):
        self.current += amount
        self.peak = max(self.peak, self.current)

    def decrease(self, amount):
        self.current -= amount
        assert self.current >= 0, "negative stat (model bug)"


STAT_NAMES = ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
              "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes")
COUNTER_NAMES = ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")


class Stats:
    def __init__(self):
        for name in STAT_NAMES:
            setattr(self, name, Stat())
        for name in COUNTER_NAMES:
            setattr(self, name, 0)
        self.unallocated_at_reserved_peak = 0


class ExpandableSegment:
    """Address space of `pages` pages of `page` bytes, mapped page by page."""

    def __init__(self, base, page, pages):
        self.base = base
        self.page = page
        self.size = page * pages
        self.mapped_pages = set()

    def map(self, ptr, size, device_free):
        """ExpandableSegment::map: maps the pages covering [ptr, ptr + size);
        ptr is page aligned. Returns (ptr, bytes mapped); 0 bytes, nothing
        mapped, when cuMemCreate runs out of the device's `device_free`
        bytes (None: unlimited)."""
        begin = (ptr - self.base) // self.page
        end = -(-(ptr + size - self.base) // self.page)
        assert self.base + begin * self.page == ptr
        if device_free is not None and (end - begin) * self.page > device_free:
            return ptr, 0
        for index in range(begin, end):
            assert index not in self.mapped_pages
            self.mapped_pages.add(index)
        return self.base + begin * self.page, (end - begin) * self.page

    def unmap(self, ptr, size):
        """ExpandableSegment::unmap: unmaps the whole pages inside
        [ptr, ptr + size). Returns (ptr, bytes unmapped)."""
        begin = -(-(ptr - self.base) // self.page)
        end = (ptr + size - self.base) // self.page
        if begin >= end:
            return ptr, 0
        for index in range(begin, end):
            self.mapped_pages.remove(index)
        return self.base + begin * self.page, (end - begin) * self.page


class Block:
    __slots__ = ("addr", "size", "requested", "pool", "allocated", "mapped", "prev", "next",
                 "segment", "gc_count_base")

    def __init__(self, addr, size, pool, segment=None, mapped=True):
        self.addr = addr
        self.size = size
        self.requested = 0
        self.pool = pool
        self.allocated = False
        self.mapped = mapped
        self.prev = None
        self.next = None
        self.segment = segment  # the ExpandableSegment, or None
        self.gc_count_base = 0

    def is_split(self):
        return self.prev is not None or self.next is not None

    def splice(self, before, after):
        """Block::splice: links self between `before` and `after`."""
        if before is not None:
            assert before.next is after
            before.next = self
        self.prev = before
        if after is not None:
            assert after.prev is before
            after.prev = self
        self.next = after


class BlockPool:
    """BlockPool: cached free mapped blocks ordered by (size, address), and
    unmapped expandable ranges ordered by address."""

    def __init__(self, is_small):
        self.is_small = is_small
        self.free_keys = []  # sorted (size, addr)
        self.free = {}  # (size, addr) -> Block
        self.unmapped_addrs = []  # sorted addr
        self.unmapped = {}  # addr -> Block
        self.get_free_blocks_call_count = 0

    def insert_into_blocks(self, block):
        block.gc_count_base = self.get_free_blocks_call_count
        key = (block.size, block.addr)
        assert key not in self.free
        bisect.insort(self.free_keys, key)
        self.free[key] = block

    def erase_block(self, block):
        key = (block.size, block.addr)
        index = bisect.bisect_left(self.free_keys, key)
        assert index < len(self.free_keys) and self.free_keys[index] == key
        del self.free_keys[index]
        del self.free[key]

    def block_at(self, index):
        return self.free[self.free_keys[index]]

    def insert_unmapped(self, block):
        bisect.insort(self.unmapped_addrs, block.addr)
        self.unmapped[block.addr] = block

    def erase_unmapped(self, block):
        index = bisect.bisect_left(self.unmapped_addrs, block.addr)
        assert self.unmapped_addrs[index] == block.addr
        del self.unmapped_addrs[index]
        del self.unmapped[block.addr]


class CachingAllocatorModel:
    """DeviceCachingAllocator for one device and one stream."""

    def __init__(self, config, capacity=0):
        self.config = config
        self.stats = Stats()
        self.small = BlockPool(is_small=True)
        self.large = BlockPool(is_small=False)
        self.set_fraction = capacity > 0
        self.allowed_memory_maximum = capacity
        self.total_allocated_memory = 0
        self.expandable_virtual_size = (capacity + capacity // 8 if capacity > 0 else
                                        DEFAULT_EXPANDABLE_VIRTUAL)
        self.expandable_segments = []
        self.next_address = FIRST_ADDRESS
        self.live = {}  # caller id -> allocated Block
        self.live_empty = set()  # caller ids of 0-byte requests (nullptr)
        self.noted_reserved_peak = 0

    # ---- public API -------------------------------------------------------

    def malloc(self, caller_id, orig_size):
        """DeviceCachingAllocator::malloc. False on OOM or a bad call."""
        if caller_id in self.live or caller_id in self.live_empty or orig_size < 0:
            return False
        if orig_size == 0:  # CUDACachingAllocator::allocate: no malloc for 0 bytes
            self.live_empty.add(caller_id)
            return True
        size = round_size(self.config, orig_size)
        pool = self.small if size <= SMALL_SIZE else self.large
        alloc_size = get_allocation_size(size)
        block = self.get_free_block(pool, size)
        if block is None:
            if self.set_fraction and self.config.garbage_collection_threshold > 0.0:
                self.garbage_collect_cached_blocks()
            block = self.alloc_block(pool, size, alloc_size, is_retry=False)
            if block is None and self.release_available_cached_blocks(pool, size):
                block = self.alloc_block(pool, size, alloc_size, is_retry=False)
            if block is None:
                self.release_cached_blocks()
                block = self.alloc_block(pool, size, alloc_size, is_retry=True)
        if block is None:
            self.stats.num_ooms += 1
            return False
        block = self.alloc_found_block(pool, block, size, orig_size,
                                       self.should_split(block, size))
        self.live[caller_id] = block
        return True

    def free(self, caller_id):
        """DeviceCachingAllocator::free. False when the id is not live."""
        if caller_id in self.live_empty:
            self.live_empty.remove(caller_id)
            return True
        block = self.live.pop(caller_id, None)
        if block is None:
            return False
        block.allocated = False
        self.stats.allocation.decrease(1)
        self.stats.allocated_bytes.decrease(block.size)
        self.free_block(block)
        return True

    def empty_cache(self):
        """DeviceCachingAllocator::emptyCache."""
        self.release_cached_blocks()

    def note_event_done(self):
        """memplan's unallocated_at_reserved_peak, taken after each event."""
        stats = self.stats
        if stats.reserved_bytes.peak > self.noted_reserved_peak:
            self.noted_reserved_peak = stats.reserved_bytes.peak
            stats.unallocated_at_reserved_peak = (stats.reserved_bytes.current -
                                                  stats.allocated_bytes.current)

    def largest_free_block(self):
        """cacheInfo over both pools (0 when nothing is cached)."""
        sizes = [pool.free_keys[-1][0] for pool in (self.small, self.large) if pool.free_keys]
        return max(sizes, default=0)

    def segments(self):
        """snapshot(): one entry per cudaMalloc'd segment and per contiguous
        mapped range of an expandable segment, in address order."""
        blocks = list(self.small.free.values()) + list(self.large.free.values())
        blocks += list(self.live.values())
        result = []
        for head in blocks:
            if head.prev is not None and head.prev.mapped:
                continue
            entry = {"address": head.addr, "total_size": 0, "allocated_size": 0,
                     "is_small": head.pool.is_small, "is_expandable": head.segment is not None,
                     "blocks": []}
            block = head
            while block is not None and block.mapped:
                entry["blocks"].append((block.size, block.allocated,
                                        block.requested if block.allocated else 0, True,
                                        block.addr))
                entry["total_size"] += block.size
                if block.allocated:
                    entry["allocated_size"] += block.size
                block = block.next
            result.append(entry)
        result.sort(key=lambda entry: entry["address"])
        return result

    # ---- malloc path -------------------------------------------------------

    def get_free_block(self, pool, size):
        """get_free_block: the smallest cached block >= size (ties: lowest
        address), under the max_split_size rules. Removes it from the pool."""
        config = self.config
        if self.set_fraction and config.garbage_collection_threshold > 0.0:
            pool.get_free_blocks_call_count += 1
        index = bisect.bisect_left(pool.free_keys, (size, -1))
        if index == len(pool.free_keys):
            return None
        if pool.block_at(index).segment is not None:
            if config.expandable_segments:
                # Best fit by the size a block can grow to (itself plus the
                # unmapped range after it).
                def expandable_size(block):
                    following = block.next
                    return block.size + (following.size if following is not None and
                                         not following.mapped else 0)

                following = index + 1
                while (pool.block_at(index).segment is not None and
                       following < len(pool.free_keys) and
                       expandable_size(pool.block_at(following)) <
                       expandable_size(pool.block_at(index))):
                    index = following
                    following += 1
            else:
                index += 1
                while index < len(pool.free_keys) and pool.block_at(index).segment is not None:
                    index += 1
                if index == len(pool.free_keys):
                    return None
        block = pool.block_at(index)
        if size < config.max_split_size and block.size >= config.max_split_size:
            return None
        if size >= config.max_split_size and block.size >= size + config.max_non_split_rounding:
            return None
        pool.erase_block(block)
        return block

    def should_split(self, block, size):
        remaining = block.size - size
        if block.pool.is_small or self.config.expandable_segments:
            return remaining >= MIN_BLOCK_SIZE
        return size < self.config.max_split_size and remaining > SMALL_SIZE

    def alloc_found_block(self, pool, block, size, orig_size, split_remainder):
        stats = self.stats
        already_split = block.is_split()
        if split_remainder:
            remaining = block
            block = Block(remaining.addr, size, pool, segment=remaining.segment)
            block.prev = remaining.prev
            if block.prev is not None:
                block.prev.next = block
            block.next = remaining
            remaining.prev = block
            remaining.addr += size
            remaining.size -= size
            pool.insert_into_blocks(remaining)
            if remaining.segment is None:
                if already_split:
                    stats.inactive_split_bytes.decrease(block.size)
                else:
                    stats.inactive_split_bytes.increase(remaining.size)
                    stats.inactive_split.increase(1)
        elif already_split and block.segment is None:
            stats.inactive_split_bytes.decrease(block.size)
            stats.inactive_split.decrease(1)
        block.allocated = True
        block.requested = orig_size
        stats.allocation.increase(1)
        stats.allocated_bytes.increase(block.size)
        stats.active.increase(1)
        stats.active_bytes.increase(block.size)
        stats.requested_bytes.increase(orig_size)
        return block

    def alloc_block(self, pool, size, alloc_size, is_retry):
        """alloc_block: a new segment (cudaMalloc) or pages of an expandable
        segment. None when the memory fraction does not allow alloc_size."""
        if is_retry:
            self.stats.num_alloc_retries += 1
        if self.set_fraction and (self.total_allocated_memory + alloc_size >
                                  self.allowed_memory_maximum):
            return None
        if self.config.expandable_segments:
            return self.try_allocate_expandable_block(pool, size)
        block = Block(self.next_address, alloc_size, pool)
        self.next_address += alloc_size
        self.total_allocated_memory += alloc_size
        self.stats.segment.increase(1)
        self.stats.reserved_bytes.increase(alloc_size)
        self.stats.num_device_alloc += 1
        return block

    # ---- free path ---------------------------------------------------------

    def free_block(self, block):
        stats = self.stats
        pool = block.pool
        original_size, requested = block.size, block.requested
        net_blocks = net_bytes = 0
        for candidate in (block.prev, block.next):
            subsumed = self.try_merge_blocks(block, candidate)
            if subsumed > 0:
                net_blocks -= 1
                net_bytes -= subsumed
        pool.insert_into_blocks(block)
        if block.is_split():
            net_blocks += 1
            net_bytes += block.size
        if block.segment is None:
            if net_blocks > 0:
                stats.inactive_split.increase(net_blocks)
            elif net_blocks < 0:
                stats.inactive_split.decrease(-net_blocks)
            if net_bytes > 0:
                stats.inactive_split_bytes.increase(net_bytes)
            elif net_bytes < 0:
                stats.inactive_split_bytes.decrease(-net_bytes)
        stats.active.decrease(1)
        stats.active_bytes.decrease(original_size)
        stats.requested_bytes.decrease(requested)

    def try_merge_blocks(self, dst, src):
        """Merges free neighbour `src` into `dst`; returns src's size or 0."""
        if src is None or src.allocated or dst.mapped != src.mapped:
            return 0
        assert dst.is_split() and src.is_split()
        pool = dst.pool
        if src.mapped:
            pool.erase_block(src)
        else:
            pool.erase_unmapped(src)
        if dst.prev is src:
            dst.addr = src.addr
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
        else:
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        dst.size += src.size
        return src.size

    # ---- releasing memory -------------------------------------------------

    def release_block(self, block):
        """release_block: cudaFree of a whole cached segment."""
        assert block.segment is None and not block.is_split()
        self.stats.num_device_free += 1
        self.total_allocated_memory -= block.size
        self.stats.segment.decrease(1)
        self.stats.reserved_bytes.decrease(block.size)
        block.pool.erase_block(block)

    def release_available_cached_blocks(self, pool, size):
        """Frees one cached oversize block >= max(size, max_split_size), or
        else the largest oversize blocks until that many bytes are freed."""
        max_split = self.config.max_split_size
        if max_split == NO_MAX_SPLIT:
            return False
        key_size = max(size, max_split)
        index = bisect.bisect_left(pool.free_keys, (key_size, -1))
        if index < len(pool.free_keys) and pool.block_at(index).segment is None:
            self.release_block(pool.block_at(index))
            return True
        if index == 0:
            return False
        released = 0
        index -= 1
        while released < key_size and pool.block_at(index).size >= max_split:
            current = pool.block_at(index)
            is_first = index == 0
            if not is_first:
                index -= 1
            if current.segment is None:
                released += current.size
                self.release_block(current)
            if is_first:
                break
        return released >= key_size

    def release_cached_blocks(self):
        """release_cached_blocks: the large pool, then the small one."""
        self.release_blocks(self.large)
        self.release_blocks(self.small)
        return True

    def release_blocks(self, pool):
        """cudaFree every unsplit cached block; unmap the free pages of every
        cached expandable block and drop expandable segments left empty."""
        to_unmap = []
        for key in list(pool.free_keys):
            block = pool.free[key]
            if block.segment is not None:
                to_unmap.append(block)
            elif block.prev is None and block.next is None:
                self.release_block(block)
        for block in to_unmap:
            self.unmap_block(block)
            if block.prev is None and block.next is None:
                self.release_expandable_segment(block)

    def garbage_collect_cached_blocks(self):
        """Frees unsplit large cached blocks at least as old as the average
        (in get_free_block calls) until total memory drops under the
        garbage_collection_threshold fraction of the allowed maximum."""
        pool = self.large
        threshold = int(self.config.garbage_collection_threshold *
                        float(self.allowed_memory_maximum))
        if self.total_allocated_memory <= threshold:
            return
        target = self.total_allocated_memory - threshold
        reclaimed = 0

        def age(block):
            return pool.get_free_blocks_call_count - block.gc_count_base

        total_age = freeable = 0
        for key in pool.free_keys:
            block = pool.free[key]
            if not block.is_split():
                total_age += age(block)
                freeable += 1
        if freeable == 0:
            return
        freed = True
        while reclaimed < target and freed and freeable > 0:
            age_threshold = float(total_age) / freeable
            freed = False
            for key in list(pool.free_keys):
                block = pool.free[key]
                if (not block.is_split() and block.segment is None and
                        float(age(block)) >= age_threshold):
                    freed = True
                    reclaimed += block.size
                    total_age -= age(block)
                    freeable -= 1
                    self.release_block(block)

    # ---- expandable segments ---------------------------------------------

    def find_expandable_block(self, pool, size):
        """The lowest-address run of free and unmapped blocks with `size`
        bytes of room, or the whole of a new expandable segment."""

        def allocatable(block):
            return block is not None and not block.allocated

        def has_room(block):
            room = 0
            while room < size and allocatable(block):
                room += block.size
                block = block.next
            return room >= size

        for addr in list(pool.unmapped_addrs):
            candidate = pool.unmapped[addr]
            if allocatable(candidate.prev):
                candidate = candidate.prev
            if has_room(candidate):
                return candidate
        page = SMALL_BUFFER if pool.is_small else LARGE_BUFFER
        virtual = max(self.expandable_virtual_size, size)
        segment = ExpandableSegment(self.next_address, page, -(-virtual // page))
        self.next_address += segment.size
        self.expandable_segments.append(segment)
        candidate = Block(segment.base, segment.size, pool, segment=segment, mapped=False)
        pool.insert_unmapped(candidate)
        return candidate

    def try_allocate_expandable_block(self, pool, size):
        candidate = self.find_expandable_block(pool, size)
        if not candidate.mapped and not self.map_block(candidate, min(candidate.size, size)):
            return None
        while candidate.size < size:
            # Pages mapped by earlier map_block calls stay mapped on failure.
            following = candidate.next
            if not self.map_block(following, min(size - candidate.size, following.size)):
                return None
            candidate = following
        pool.erase_block(candidate)
        return candidate

    def map_block(self, to_map, size):
        assert not to_map.mapped and size <= to_map.size
        pool = to_map.pool
        device_free = (self.allowed_memory_maximum - self.total_allocated_memory
                       if self.set_fraction else None)
        ptr, mapped = to_map.segment.map(to_map.addr, size, device_free)
        if mapped == 0:
            return False
        assert ptr == to_map.addr and mapped >= size
        pool.erase_unmapped(to_map)
        to_map.mapped = True
        if mapped < to_map.size:
            remaining = Block(to_map.addr + mapped, to_map.size - mapped, pool,
                              segment=to_map.segment, mapped=False)
            remaining.splice(to_map, to_map.next)
            pool.insert_unmapped(remaining)
            to_map.size = mapped
        self.try_merge_blocks(to_map, to_map.prev)
        self.try_merge_blocks(to_map, to_map.next)
        pool.insert_into_blocks(to_map)
        self.total_allocated_memory += mapped
        self.stats.reserved_bytes.increase(mapped)
        self.stats.num_device_alloc += 1
        return True

    def unmap_block(self, block):
        ptr, unmapped = block.segment.unmap(block.addr, block.size)
        if unmapped == 0:
            return
        pool = block.pool
        pool.erase_block(block)
        before = ptr - block.addr
        if before > 0:
            before_free = Block(block.addr, before, pool, segment=block.segment)
            before_free.splice(block.prev, block)
            pool.insert_into_blocks(before_free)
        after = block.size - (before + unmapped)
        if after > 0:
            after_free = Block(ptr + unmapped, after, pool, segment=block.segment)
            after_free.splice(block, block.next)
            pool.insert_into_blocks(after_free)
        block.addr = ptr
        block.size = unmapped
        block.mapped = False
        self.try_merge_blocks(block, block.prev)
        self.try_merge_blocks(block, block.next)
        pool.insert_unmapped(block)
        self.total_allocated_memory -= unmapped
        self.stats.reserved_bytes.decrease(unmapped)
        self.stats.num_device_free += 1

    def release_expandable_segment(self, block):
        assert block.size == block.segment.size and not block.mapped
        self.expandable_segments.remove(block.segment)
        block.pool.erase_unmapped(block)


def replay(conf_text, capacity, events):
    """Replays events [("m", id, bytes) | ("f", id) | ("e",)] and returns the
    same JSON-shaped dict as tests/tools/alloc_replay."""
    model = CachingAllocatorModel(AllocConfig.parse(conf_text), capacity)
    failed, per_event = [], []
    for index, event in enumerate(events):
        if event[0] == "m":
            ok = model.malloc(event[1], event[2])
        elif event[0] == "f":
            ok = model.free(event[1])
        else:
            model.empty_cache()
            ok = True
        if not ok:
            failed.append(index)
        model.note_event_done()
        per_event.append([model.stats.allocated_bytes.current,
                          model.stats.reserved_bytes.current])
    stats = {name: [getattr(model.stats, name).current, getattr(model.stats, name).peak]
             for name in STAT_NAMES}
    for name in COUNTER_NAMES + ("unallocated_at_reserved_peak",):
        stats[name] = getattr(model.stats, name)
    segments = []
    for entry in model.segments():
        segments.append({
            "address": entry["address"] - FIRST_ADDRESS,
            "total_size": entry["total_size"],
            "allocated_size": entry["allocated_size"],
            "is_small": entry["is_small"],
            "is_expandable": entry["is_expandable"],
            "blocks": [[size, allocated, requested, mapped, addr - FIRST_ADDRESS]
                       for size, allocated, requested, mapped, addr in entry["blocks"]],
        })
    return {"stats": stats, "largest_free_block": model.largest_free_block(),
            "segments": segments, "failed": failed, "per_event": per_event}
