// Dim and Shape: a tensor's dimensions. A Shape is an interned, immutable
// list of Dims: one pointer in the Tensor, the dims kept once per distinct
// shape in a process-wide pool. A training step's millions of tensors have
// a few thousand distinct shapes, and every gradient has its tensor's shape,
// so the lowering copies a pointer instead of the dims.
//
// Contract: two Shapes are equal exactly when their dims are (value and
// expression); the empty shape (a scalar) is the null handle. Building a
// Shape interns it (a per-thread cache, else a lock and a hash lookup);
// reading one is free. To change a shape, build a new one (ToVector, edit,
// assign). The pool only grows, as InternedString's.
#ifndef MEMPLAN_ANALYZER_IR_SHAPE_H_
#define MEMPLAN_ANALYZER_IR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <vector>

#include "analyzer/base/interned_string.h"

namespace memplan {

// One dimension: a literal, or a dimension expression ("batch",
// "batch*seq") whose resolved value is in `value`. 16 bytes, trivially
// copyable.
struct Dim {
  int64_t value = 0;
  InternedString symbol;  // the expression; empty for a literal

  friend bool operator==(const Dim& a, const Dim& b) {
    return a.value == b.value && a.symbol == b.symbol;
  }
};

class Shape {
 public:
  Shape() = default;
  Shape(std::span<const Dim> dims);                                           // NOLINT: implicit
  Shape(const std::vector<Dim>& dims) : Shape(std::span<const Dim>(dims)) {}  // NOLINT
  Shape(std::initializer_list<Dim> dims) : Shape(std::span<const Dim>(dims.begin(), dims.size())) {}
  template <std::contiguous_iterator It>
  Shape(It first, It last) : Shape(std::span<const Dim>(first, last)) {}

  size_t size() const { return dims_ ? dims_->size() : 0; }
  bool empty() const { return dims_ == nullptr; }
  const Dim& operator[](size_t i) const { return (*dims_)[i]; }
  const Dim& back() const { return dims_->back(); }
  const Dim* begin() const { return dims_ ? dims_->data() : nullptr; }
  const Dim* end() const { return dims_ ? dims_->data() + dims_->size() : nullptr; }
  std::vector<Dim> ToVector() const { return std::vector<Dim>(begin(), end()); }

  friend bool operator==(Shape a, Shape b) { return a.dims_ == b.dims_; }

 private:
  const std::vector<Dim>* dims_ = nullptr;  // owned by the pool; null for a scalar
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IR_SHAPE_H_
