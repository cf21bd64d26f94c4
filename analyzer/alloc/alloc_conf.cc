#include "analyzer/alloc/alloc_conf.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "analyzer/base/units.h"

namespace memplan::alloc {
namespace {

constexpr const char* kKnownKeys[] = {
    "backend",
    "expandable_segments",
    "garbage_collection_threshold",
    "graph_capture_record_stream_reuse",
    "max_non_split_rounding_mb",
    "max_split_size_mb",
    "pinned_num_register_threads",
    "pinned_reserve_segment_size_mb",
    "pinned_use_background_threads",
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "roundup_power2_divisions",
};

// AllocatorConfig::lexArgs.
std::vector<std::string> Lex(std::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) tokens.push_back(std::move(word));
      word.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      word.push_back(c);
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

// A whole-token unsigned integer that fits in int64_t.
bool ParseCount(const std::string& token, int64_t* value) {
  if (token.empty() || token.size() > 18) return false;
  int64_t v = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *value = v;
  return true;
}

class Parser {
 public:
  Parser(std::string_view text, Config* config, std::string* error)
      : tokens_(Lex(text)), config_(config), error_(error) {}

  bool Run() {
    for (i_ = 0; i_ < tokens_.size(); ++i_) {
      const std::string key = tokens_[i_];
      if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), key) == std::end(kKnownKeys)) {
        std::string known;
        for (const char* k : kKnownKeys) known += known.empty() ? k : std::string(", ") + k;
        return Fail(fmt::format("unknown key \"{}\"; expected one of {}", key, known));
      }
      if (Token(i_ + 1) != ":") return Fail(fmt::format("{}: expected ':' after the key", key));
      i_ += 2;
      if (!ParseValue(key)) return false;
      if (i_ + 1 < tokens_.size()) {
        if (tokens_[i_ + 1] != ",") {
          return Fail(
              fmt::format("{}: expected ',' after the value, found {}", key, Found(i_ + 1)));
        }
        ++i_;
        if (i_ + 1 == tokens_.size()) return Fail("expected an option after the last ','");
      }
    }
    return true;
  }

 private:
  std::string Token(size_t i) const { return i < tokens_.size() ? tokens_[i] : std::string(); }
  std::string Found(size_t i) const {
    return i < tokens_.size() ? "\"" + tokens_[i] + "\"" : "end of text";
  }
  bool Fail(const std::string& message) {
    *error_ = message;
    return false;
  }

  bool ParseValue(const std::string& key) {
    const std::string value = Token(i_);
    int64_t number = 0;
    if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
      // parseMaxSplitSize: val >= kLargeBuffer / kMB.
      const int64_t min_mb = kLargeBuffer / kMiB;
      if (!ParseCount(value, &number) || number < min_mb) {
        return Fail(
            fmt::format("{}: expected a number of MiB >= {}, found {}", key, min_mb, Found(i_)));
      }
      const int64_t bytes = std::min(number, kNoMaxSplitSize / kMiB) * kMiB;
      (key == "max_split_size_mb" ? config_->max_split_size : config_->max_non_split_rounding) =
          bytes;
      return true;
    }
    if (key == "garbage_collection_threshold") {
      char* end = nullptr;
      errno = 0;
      const double x = value.empty() ? 0.0 : std::strtod(value.c_str(), &end);
      if (value.empty() || errno != 0 || *end != '\0' || !(x > 0.0 && x < 1.0)) {
        return Fail(fmt::format("{}: expected a number in (0, 1), found {}", key, Found(i_)));
      }
      config_->garbage_collection_threshold = x;
      return true;
    }
    if (key == "roundup_power2_divisions") return ParseRoundupDivisions(key);
    if (key == "expandable_segments" || key == "release_lock_on_cudamalloc" ||
        key == "release_lock_on_hipmalloc" || key == "pinned_use_cuda_host_register" ||
        key == "pinned_use_hip_host_register" || key == "pinned_use_background_threads" ||
        key == "graph_capture_record_stream_reuse") {
      if (value != "True" && value != "False") {
        return Fail(fmt::format("{}: expected True or False, found {}", key, Found(i_)));
      }
      if (key == "expandable_segments") config_->expandable_segments = value == "True";
      return true;
    }
    if (key == "backend") {
      if (value == "native") return true;
      if (value == "cudaMallocAsync") {
        return Fail("backend: cudaMallocAsync is not modelled; only the native caching allocator");
      }
      return Fail(fmt::format("backend: expected native or cudaMallocAsync, found {}", Found(i_)));
    }
    if (key == "pinned_num_register_threads") {
      if (!ParseCount(value, &number) || !IsPowerOfTwo(number)) {
        return Fail(fmt::format("{}: expected a power of 2, found {}", key, Found(i_)));
      }
      return true;
    }
    // pinned_reserve_segment_size_mb
    if (!ParseCount(value, &number) || number <= 0) {
      return Fail(fmt::format("{}: expected a number of MiB > 0, found {}", key, Found(i_)));
    }
    return true;
  }

  // parseRoundUpPower2Divisions: "4" for every interval, or
  // "[64:8,256:4,>:1]" (interval start in MiB, a power of 2, or '>' for all
  // the intervals after the last one named; divisions 0 or a power of 2).
  bool ParseRoundupDivisions(const std::string& key) {
    auto& divisions = config_->roundup_power2_divisions;
    int64_t number = 0;
    if (Token(i_) != "[") {
      if (!ParseCount(Token(i_), &number) || !IsPowerOfTwo(number)) {
        return Fail(
            fmt::format("{}: expected a power of 2 or a [interval:divisions,...] list, "
                        "found {}",
                        key, Found(i_)));
      }
      divisions.fill(number);
      return true;
    }
    bool first = true;
    size_t last_index = 0;
    ++i_;
    while (Token(i_) != "]") {
      if (i_ >= tokens_.size()) return Fail(fmt::format("{}: missing ']'", key));
      const std::string interval = Token(i_);
      if (Token(i_ + 1) != ":") {
        return Fail(fmt::format("{}: expected ':' after interval {}", key, Found(i_)));
      }
      i_ += 2;
      if (!ParseCount(Token(i_), &number) || (number != 0 && !IsPowerOfTwo(number))) {
        return Fail(
            fmt::format("{}: expected divisions 0 or a power of 2, found {}", key, Found(i_)));
      }
      if (interval == ">") {
        // AllocatorConfig.cpp: '>' sets the intervals above the last one named.
        std::fill(divisions.begin() + static_cast<std::ptrdiff_t>(last_index + 1), divisions.end(),
                  number);
      } else {
        int64_t mib = 0;
        if (!ParseCount(interval, &mib) || !IsPowerOfTwo(mib)) {
          return Fail(
              fmt::format("{}: expected an interval in MiB that is a power of 2 or '>', "
                          "found \"{}\"",
                          key, interval));
        }
        const size_t index =
            std::min<size_t>(std::bit_width(static_cast<uint64_t>(mib)) - 1, divisions.size() - 1);
        if (first) {
          std::fill(divisions.begin(), divisions.begin() + static_cast<std::ptrdiff_t>(index),
                    number);
          first = false;
        }
        divisions[index] = number;
        last_index = index;
      }
      ++i_;
      if (Token(i_) == ",") {
        ++i_;
      } else if (Token(i_) != "]") {
        return Fail(fmt::format("{}: expected ',' or ']' in the list, found {}", key, Found(i_)));
      }
    }
    return true;
  }

  std::vector<std::string> tokens_;
  size_t i_ = 0;
  Config* config_;
  std::string* error_;
};

}  // namespace

bool ParseAllocConf(std::string_view text, Config* config, std::string* error) {
  Config parsed = *config;
  const Config defaults;
  parsed.max_split_size = defaults.max_split_size;
  parsed.max_non_split_rounding = defaults.max_non_split_rounding;
  parsed.roundup_power2_divisions = defaults.roundup_power2_divisions;
  parsed.garbage_collection_threshold = defaults.garbage_collection_threshold;
  parsed.expandable_segments = defaults.expandable_segments;
  if (!Parser(text, &parsed, error).Run()) return false;
  *config = parsed;
  return true;
}

}  // namespace memplan::alloc
