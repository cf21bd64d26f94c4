// SmallVector<T, N>: a vector of trivially destructible T that holds up to N
// elements in itself and allocates only beyond that. A step program's free
// and in-place lists hold one or two entries: with std::vector each was a heap
// block, allocated when a program was built and freed when it was dropped,
// thousands per program in a plan search.
//
// Contract: the std::vector operations memplan uses (construction from a
// range, push_back, emplace_back, assign, clear, erase, reserve, size, empty, back,
// [], iteration over T*, comparison), with the same meaning; iterators and
// references are invalidated by any change of size, as std::vector's by a
// reallocation.
// Same size as std::vector for N * sizeof(T) <= 16.
#ifndef MEMPLAN_ANALYZER_BASE_SMALL_VECTOR_H_
#define MEMPLAN_ANALYZER_BASE_SMALL_VECTOR_H_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace memplan {

template <class T, uint32_t N>
class SmallVector {
  static_assert(std::is_trivially_destructible_v<T> && std::is_nothrow_copy_constructible_v<T>,
                "SmallVector holds trivially destructible types such as int or pair<int, int>");
  static_assert(N > 0);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { Take(&other); }
  ~SmallVector() { Release(); }

  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      Release();
      Take(&other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }

  template <class It>
  void assign(It first, It last) {
    const auto n = static_cast<uint32_t>(std::distance(first, last));
    size_ = 0;
    reserve(n);
    std::uninitialized_copy(first, last, data());
    size_ = n;
  }
  void reserve(uint32_t n) {
    if (n <= capacity_) return;
    T* grown = static_cast<T*>(::operator new(n * sizeof(T)));
    std::uninitialized_copy_n(data(), size_, grown);
    Release();
    storage_.heap = grown;
    capacity_ = n;
  }
  void push_back(const T& value) {
    const T copy = value;  // value may be an element that reserve moves
    if (size_ == capacity_) reserve(2 * capacity_);
    ::new (static_cast<void*>(data() + size_)) T(copy);
    ++size_;
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void clear() { size_ = 0; }
  // Removes [first, last); returns the position after the removed ones.
  T* erase(const T* first, const T* last) {
    T* to = data() + (first - data());
    T* end_now = std::copy(const_cast<T*>(last), end(), to);
    size_ = static_cast<uint32_t>(end_now - data());
    return to;
  }

  T* data() { return OnHeap() ? storage_.heap : storage_.local; }
  const T* data() const { return OnHeap() ? storage_.heap : storage_.local; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  std::vector<T> ToVector() const { return std::vector<T>(begin(), end()); }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool OnHeap() const { return capacity_ > N; }
  void Release() {
    if (OnHeap()) ::operator delete(storage_.heap);
    capacity_ = N;
  }
  // Moves other's elements here (this holds none and no heap block).
  void Take(SmallVector* other) {
    if (other->OnHeap()) {
      storage_.heap = other->storage_.heap;
      capacity_ = other->capacity_;
    } else {
      std::uninitialized_copy_n(other->storage_.local, other->size_, storage_.local);
    }
    size_ = other->size_;
    other->capacity_ = N;
    other->size_ = 0;
  }

  union Storage {
    T local[N];
    T* heap;
    Storage() {}
  } storage_;
  uint32_t size_ = 0;
  uint32_t capacity_ = N;
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_SMALL_VECTOR_H_
