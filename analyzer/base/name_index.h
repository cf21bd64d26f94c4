// NameIndex: an open-addressing hash index from names to positions in a
// vector whose elements own the names (Tensor::id, Op::id), so no name is
// stored twice and a lookup touches one flat array plus the name it finds.
#ifndef MEMPLAN_ANALYZER_BASE_NAME_INDEX_H_
#define MEMPLAN_ANALYZER_BASE_NAME_INDEX_H_

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace memplan {

class NameIndex {
 public:
  // key_of(i) returns the name of position i.
  template <class KeyOf>
  int Find(std::string_view name, KeyOf key_of) const {
    if (slots_.empty()) return -1;
    const uint32_t h = Hash(name);
    for (size_t s = h & Mask();; s = (s + 1) & Mask()) {
      const uint64_t slot = slots_[s];
      if (slot == 0) return -1;
      const int index = static_cast<int>(static_cast<uint32_t>(slot)) - 1;
      if ((slot >> 32) == h && key_of(index) == name) return index;
    }
  }

  // Adds position `index` under `name` unless the name is present. Returns
  // the position already there, or -1 when it was added.
  template <class KeyOf>
  int Insert(std::string_view name, int index, KeyOf key_of) {
    if ((count_ + 1) * 4 > slots_.size() * 3) Grow(slots_.size() < 16 ? 16 : 2 * slots_.size());
    const uint32_t h = Hash(name);
    size_t s = h & Mask();
    for (; slots_[s] != 0; s = (s + 1) & Mask()) {
      const int existing = static_cast<int>(static_cast<uint32_t>(slots_[s])) - 1;
      if ((slots_[s] >> 32) == h && key_of(existing) == name) return existing;
    }
    slots_[s] = (uint64_t{h} << 32) | static_cast<uint32_t>(index + 1);
    ++count_;
    return -1;
  }

  void Reserve(size_t n) {
    size_t want = 16;
    while (want * 3 < n * 4) want *= 2;
    if (want > slots_.size()) Grow(want);
  }
  void Clear() {
    slots_.clear();
    count_ = 0;
  }
  size_t size() const { return count_; }

 private:
  static uint32_t Hash(std::string_view name) {
    return static_cast<uint32_t>(std::hash<std::string_view>{}(name));
  }
  size_t Mask() const { return slots_.size() - 1; }
  // Re-slots by the stored hash; names are not read again.
  void Grow(size_t capacity) {
    std::vector<uint64_t> old = std::move(slots_);
    slots_.assign(capacity, 0);
    for (uint64_t slot : old) {
      if (slot == 0) continue;
      size_t s = (slot >> 32) & Mask();
      while (slots_[s] != 0) s = (s + 1) & Mask();
      slots_[s] = slot;
    }
  }

  std::vector<uint64_t> slots_;  // (hash << 32) | (position + 1); 0 is empty
  size_t count_ = 0;
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_NAME_INDEX_H_
