#include "analyzer/ir/shape.h"

#include <algorithm>
#include <array>
#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_set>

namespace memplan {
namespace {

struct DimsHash {
  using is_transparent = void;
  size_t operator()(std::span<const Dim> dims) const {
    size_t h = dims.size();
    for (const Dim& d : dims) {
      h = h * 0x9E3779B97F4A7C15ULL + static_cast<size_t>(d.value);
      h = h * 0x9E3779B97F4A7C15ULL + std::hash<const void*>{}(d.symbol.view().data());
    }
    return h ^ (h >> 29);
  }
  size_t operator()(const std::vector<Dim>& dims) const {
    return (*this)(std::span<const Dim>(dims));
  }
};

struct DimsEqual {
  using is_transparent = void;
  static bool Same(std::span<const Dim> a, std::span<const Dim> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  bool operator()(const std::vector<Dim>& a, const std::vector<Dim>& b) const { return a == b; }
  bool operator()(std::span<const Dim> a, const std::vector<Dim>& b) const { return Same(a, b); }
  bool operator()(const std::vector<Dim>& a, std::span<const Dim> b) const { return Same(a, b); }
};

struct Pool {
  std::mutex mutex;
  // Node-based: an element's address never changes.
  std::unordered_set<std::vector<Dim>, DimsHash, DimsEqual> shapes;
};

Pool& ThePool() {
  static Pool* pool = new Pool();  // never destroyed: handles outlive static destructors
  return *pool;
}

const std::vector<Dim>* FindOrAdd(std::span<const Dim> dims) {
  Pool& pool = ThePool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  auto it = pool.shapes.find(dims);
  if (it == pool.shapes.end()) it = pool.shapes.emplace(dims.begin(), dims.end()).first;
  return &*it;
}

}  // namespace

Shape::Shape(std::span<const Dim> dims) {
  if (dims.empty()) return;
  // A per-thread cache of recent shapes spares the lock and the pool's lookup.
  constexpr size_t kCacheSlots = 1024;
  thread_local std::array<const std::vector<Dim>*, kCacheSlots> cache{};
  const std::vector<Dim>*& slot = cache[DimsHash{}(dims) % kCacheSlots];
  if (slot == nullptr || !DimsEqual::Same(*slot, dims)) slot = FindOrAdd(dims);
  dims_ = slot;
}

}  // namespace memplan
