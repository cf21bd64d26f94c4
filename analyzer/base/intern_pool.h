#ifndef MEMPLAN_ANALYZER_BASE_INTERN_POOL_H_
#define MEMPLAN_ANALYZER_BASE_INTERN_POOL_H_

// A process-wide pool of immutable values, one copy of each: InternedString's
// texts and Shape's dimension lists.
//
// Contract: Intern(key) returns the address of the pooled Value equal to key
// (a view: std::string_view for std::string, std::span<const Dim> for a list
// of dimensions), adding Value(key.begin(), key.end()) when absent. Equal
// keys give the same address, on every thread, for the life of the process
// (the pool is never destroyed, so handles outlive static destructors).
// Thread-safe: a mutex guards the pool, and a per-thread cache of
// kCacheSlots recent values, indexed by hash, spares the lock and the lookup
// where an importer interns the same few values over and over.
//
// Hash and Equal are transparent: Hash takes a key, Equal a (Value, key) pair.

#include <array>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_set>

namespace memplan {

// The transparent hash of a pool of texts, looked up by std::string_view.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename Value, typename Hash, typename Equal, size_t kCacheSlots>
class InternPool {
 public:
  template <typename Key>
  static const Value* Intern(const Key& key) {
    thread_local std::array<const Value*, kCacheSlots> cache{};
    const Value*& slot = cache[Hash{}(key) % kCacheSlots];
    if (slot == nullptr || !Equal{}(*slot, key)) slot = FindOrAdd(key);
    return slot;
  }

 private:
  struct State {
    std::mutex mutex;
    // Node-based: an element's address never changes.
    std::unordered_set<Value, Hash, Equal> values;
  };

  static State& TheState() {
    static State* state = new State();  // never destroyed (see the contract)
    return *state;
  }

  template <typename Key>
  static const Value* FindOrAdd(const Key& key) {
    State& state = TheState();
    std::lock_guard<std::mutex> lock(state.mutex);
    auto it = state.values.find(key);
    if (it == state.values.end()) it = state.values.emplace(key.begin(), key.end()).first;
    return &*it;
  }
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_INTERN_POOL_H_
