// alloc_replay: replays allocator events on memplan::alloc::CachingAllocator
// and prints the resulting state as JSON, for tests/alloc/differential_test.py.
//
// stdin:
//   line 1          PYTORCH_CUDA_ALLOC_CONF text (may be empty)
//   [capacity N]    optional: Config::device_capacity in bytes
//   m ID BYTES      Malloc(ID, BYTES)
//   f ID            Free(ID)
//   e               EmptyCache()
// stdout: one JSON object with "stats" ([current, peak] per Stat, plain
// numbers for counters), "largest_free_block", "segments" (address order;
// addresses as offsets from the first synthetic address, 1 << 32), "failed"
// (indices of events that returned false) and "per_event" ([allocated,
// reserved] current bytes after each event).
// Exit status: 0 after a replay (failed events included), 2 on bad input.
#include <cstdint>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/alloc/caching_allocator.h"

namespace {

using memplan::alloc::CachingAllocator;
using memplan::alloc::Config;
using memplan::alloc::Stat;
using memplan::alloc::Stats;

// The first synthetic device address the model hands out.
constexpr int64_t kFirstAddress = int64_t{1} << 32;

nlohmann::json StatJson(const Stat& stat) { return {stat.current, stat.peak}; }

nlohmann::json StatsJson(const Stats& stats) {
  return {
      {"allocation", StatJson(stats.allocation)},
      {"segment", StatJson(stats.segment)},
      {"active", StatJson(stats.active)},
      {"inactive_split", StatJson(stats.inactive_split)},
      {"allocated_bytes", StatJson(stats.allocated_bytes)},
      {"reserved_bytes", StatJson(stats.reserved_bytes)},
      {"active_bytes", StatJson(stats.active_bytes)},
      {"inactive_split_bytes", StatJson(stats.inactive_split_bytes)},
      {"requested_bytes", StatJson(stats.requested_bytes)},
      {"num_alloc_retries", stats.num_alloc_retries},
      {"num_ooms", stats.num_ooms},
      {"num_device_alloc", stats.num_device_alloc},
      {"num_device_free", stats.num_device_free},
      {"unallocated_at_reserved_peak", stats.unallocated_at_reserved_peak},
  };
}

nlohmann::json SegmentsJson(const CachingAllocator& allocator) {
  nlohmann::json segments = nlohmann::json::array();
  for (const auto& segment : allocator.Segments()) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& block : segment.blocks) {
      blocks.push_back({block.size, block.allocated, block.requested_size, block.mapped,
                        block.address - kFirstAddress});
    }
    segments.push_back({{"address", segment.address - kFirstAddress},
                        {"total_size", segment.total_size},
                        {"allocated_size", segment.allocated_size},
                        {"is_small", segment.is_small},
                        {"is_expandable", segment.is_expandable},
                        {"blocks", std::move(blocks)}});
  }
  return segments;
}

int Fail(const std::string& message) {
  std::cerr << "alloc_replay: " << message << "\n";
  return 2;
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  std::getline(std::cin, line);  // an empty or missing first line is the default config
  Config config;
  std::string error;
  if (!memplan::alloc::ParseAllocConf(line, &config, &error)) return Fail(error);

  std::vector<std::string> event_lines;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    if (line.rfind("capacity ", 0) == 0) {
      if (!event_lines.empty()) return Fail("capacity must come before the events");
      config.device_capacity = std::stoll(line.substr(9));
      continue;
    }
    event_lines.push_back(line);
  }
  if (!memplan::alloc::ValidateConfig(config, &error)) return Fail(error);

  CachingAllocator allocator(config);
  nlohmann::json failed = nlohmann::json::array();
  nlohmann::json per_event = nlohmann::json::array();
  for (size_t index = 0; index < event_lines.size(); ++index) {
    std::istringstream fields(event_lines[index]);
    std::string kind;
    int64_t id = 0;
    int64_t bytes = 0;
    fields >> kind;
    bool ok = true;
    if (kind == "m" && (fields >> id >> bytes)) {
      ok = allocator.Malloc(id, bytes, &error);
    } else if (kind == "f" && (fields >> id)) {
      ok = allocator.Free(id, &error);
    } else if (kind == "e") {
      allocator.EmptyCache();
    } else {
      return Fail("bad event line " + std::to_string(index + 1) + ": " + event_lines[index]);
    }
    if (!ok) failed.push_back(index);
    per_event.push_back(
        {allocator.stats().allocated_bytes.current, allocator.stats().reserved_bytes.current});
  }

  nlohmann::json out;
  out["stats"] = StatsJson(allocator.stats());
  out["largest_free_block"] = allocator.LargestFreeBlock();
  out["segments"] = SegmentsJson(allocator);
  out["failed"] = std::move(failed);
  out["per_event"] = std::move(per_event);
  std::cout << out.dump() << "\n";
  return 0;
}
