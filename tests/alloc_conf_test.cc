// PYTORCH_CUDA_ALLOC_CONF parsing: accepted text and the exact error messages.
#include "analyzer/alloc/alloc_conf.h"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>

namespace memplan::alloc {
namespace {

// The error for `text`, checking that *config was left alone.
std::string Reject(const std::string& text) {
  Config config;
  config.max_split_size = 64 * kMiB;
  std::string error;
  CHECK_MESSAGE(!ParseAllocConf(text, &config, &error), "accepted: " << text);
  CHECK(config.max_split_size == 64 * kMiB);
  return error;
}

TEST_CASE("alloc.conf: the usual settings") {
  Config config;
  std::string error;
  REQUIRE_MESSAGE(ParseAllocConf("expandable_segments:True,max_split_size_mb:128,"
                                 "roundup_power2_divisions:4,garbage_collection_threshold:0.6",
                                 &config, &error),
                  error);
  CHECK(config.expandable_segments);
  CHECK(config.max_split_size == 128 * kMiB);
  for (int64_t d : config.roundup_power2_divisions) CHECK(d == 4);
  CHECK(config.garbage_collection_threshold == doctest::Approx(0.6));
  std::string why;
  CHECK_MESSAGE(ValidateConfig(config, &why), why);
}

TEST_CASE("alloc.conf: spaces are ignored, 20 MiB is the smallest max_split_size_mb") {
  Config config;
  std::string error;
  REQUIRE(
      ParseAllocConf(" max_split_size_mb : 20 , max_non_split_rounding_mb:40", &config, &error));
  CHECK(config.max_split_size == 20 * kMiB);
  CHECK(config.max_non_split_rounding == 40 * kMiB);
}

TEST_CASE("alloc.conf: text resets the options it controls and keeps the rest") {
  Config config;
  config.device_capacity = 80 * kMiB;
  config.max_split_size = 64 * kMiB;
  config.expandable_segments = true;
  std::string error;
  REQUIRE(ParseAllocConf("", &config, &error));
  CHECK(config.max_split_size == kNoMaxSplitSize);
  CHECK_FALSE(config.expandable_segments);
  CHECK(config.device_capacity == 80 * kMiB);
}

TEST_CASE("alloc.conf: roundup_power2_divisions list form follows PyTorch") {
  Config config;
  std::string error;
  REQUIRE_MESSAGE(ParseAllocConf("roundup_power2_divisions:[64:8,256:4,>:1]", &config, &error),
                  error);
  // 64 MiB is interval 6: intervals 0..6 get 8. 256 MiB is interval 8 and
  // keeps 4: '>' fills the intervals above it (c10/core/AllocatorConfig.cpp,
  // last_index + 1; the older CUDAAllocatorConfig.cpp overwrote interval 8).
  // Interval 7 (128 MiB) is never named and stays 0.
  const std::array<int64_t, kRoundupPower2Intervals> expected = {8, 8, 8, 8, 8, 8, 8, 0,
                                                                 4, 1, 1, 1, 1, 1, 1, 1};
  CHECK(config.roundup_power2_divisions == expected);
}

TEST_CASE("alloc.conf: other PyTorch keys are checked and accepted") {
  Config config;
  std::string error;
  CHECK(
      ParseAllocConf("backend:native,release_lock_on_cudamalloc:True,"
                     "pinned_use_cuda_host_register:False,pinned_num_register_threads:8",
                     &config, &error));
  CHECK(Reject("backend:cudaMallocAsync") ==
        "backend: cudaMallocAsync is not modelled; only the native caching allocator");
}

TEST_CASE("alloc.conf: error messages") {
  CHECK(Reject("max_split_size_mb:abc") ==
        "max_split_size_mb: expected a number of MiB >= 20, found \"abc\"");
  CHECK(Reject("max_split_size_mb:19") ==
        "max_split_size_mb: expected a number of MiB >= 20, found \"19\"");
  CHECK(Reject("max_split_size_mb:") ==
        "max_split_size_mb: expected a number of MiB >= 20, found end of text");
  CHECK(Reject("max_split_size_mb") == "max_split_size_mb: expected ':' after the key");
  CHECK(Reject("foo:1") ==
        "unknown key \"foo\"; expected one of backend, expandable_segments, "
        "garbage_collection_threshold, graph_capture_record_stream_reuse, "
        "max_non_split_rounding_mb, max_split_size_mb, pinned_num_register_threads, "
        "pinned_reserve_segment_size_mb, pinned_use_background_threads, "
        "pinned_use_cuda_host_register, pinned_use_hip_host_register, "
        "release_lock_on_cudamalloc, release_lock_on_hipmalloc, roundup_power2_divisions");
  CHECK(Reject("garbage_collection_threshold:1.0") ==
        "garbage_collection_threshold: expected a number in (0, 1), found \"1.0\"");
  CHECK(Reject("garbage_collection_threshold:0") ==
        "garbage_collection_threshold: expected a number in (0, 1), found \"0\"");
  CHECK(Reject("roundup_power2_divisions:3") ==
        "roundup_power2_divisions: expected a power of 2 or a [interval:divisions,...] list, "
        "found \"3\"");
  CHECK(Reject("roundup_power2_divisions:[100:4]") ==
        "roundup_power2_divisions: expected an interval in MiB that is a power of 2 or '>', "
        "found \"100\"");
  CHECK(Reject("roundup_power2_divisions:[64:3]") ==
        "roundup_power2_divisions: expected divisions 0 or a power of 2, found \"3\"");
  CHECK(Reject("roundup_power2_divisions:[64:4") ==
        "roundup_power2_divisions: expected ',' or ']' in the list, found end of text");
  CHECK(Reject("roundup_power2_divisions:[64:4,") == "roundup_power2_divisions: missing ']'");
  CHECK(Reject("expandable_segments:yes") ==
        "expandable_segments: expected True or False, found \"yes\"");
  CHECK(Reject("expandable_segments:True:x") ==
        "expandable_segments: expected ',' after the value, found \":\"");
  CHECK(Reject("expandable_segments:True,") == "expected an option after the last ','");
}

}  // namespace
}  // namespace memplan::alloc
