#include "analyzer/base/interned_string.h"

#include <array>
#include <functional>
#include <mutex>
#include <unordered_set>

namespace memplan {
namespace {

struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Pool {
  std::mutex mutex;
  // Node-based: an element's address never changes.
  std::unordered_set<std::string, TextHash, std::equal_to<>> texts;
};

Pool& ThePool() {
  static Pool* pool = new Pool();  // never destroyed: handles outlive static destructors
  return *pool;
}

const std::string* FindOrAdd(std::string_view text) {
  Pool& pool = ThePool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  auto it = pool.texts.find(text);
  if (it == pool.texts.end()) it = pool.texts.emplace(text).first;
  return &*it;
}

}  // namespace

InternedString::InternedString(std::string_view text) {
  if (text.empty()) return;
  // A per-thread cache of recent texts spares the lock and the pool's lookup:
  // an importer interns the same few types and scopes over and over.
  constexpr size_t kCacheSlots = 256;
  thread_local std::array<const std::string*, kCacheSlots> cache{};
  const size_t hash = TextHash{}(text);
  const std::string*& slot = cache[hash % kCacheSlots];
  if (slot == nullptr || *slot != text) slot = FindOrAdd(text);
  text_ = slot;
}

}  // namespace memplan
