#include "analyzer/ir/shape.h"

#include <algorithm>
#include <functional>
#include <string_view>

#include "analyzer/base/intern_pool.h"

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

// 1024 recent shapes per thread.
using ShapePool = InternPool<std::vector<Dim>, DimsHash, DimsEqual, 1024>;

}  // namespace

Shape::Shape(std::span<const Dim> dims) {
  if (!dims.empty()) dims_ = ShapePool::Intern(dims);
}

}  // namespace memplan
