#include "analyzer/ir/shape.h"

#include <doctest/doctest.h>

#include <type_traits>
#include <vector>

namespace memplan {
namespace {

static_assert(sizeof(Shape) == sizeof(void*));
static_assert(std::is_trivially_copyable_v<Shape>);
static_assert(sizeof(Dim) == 16);

TEST_CASE("shape: equal dims share one handle; value and expression both count") {
  const Shape a = {Dim{8, "batch"}, Dim{64, ""}};
  const std::vector<Dim> dims = {Dim{8, "batch"}, Dim{64, ""}};
  const Shape b(dims);
  CHECK(a == b);
  CHECK(a.begin() == b.begin());                             // one copy of the dims
  CHECK_FALSE(a == Shape({Dim{8, ""}, Dim{64, ""}}));        // a literal 8 is not batch=8
  CHECK_FALSE(a == Shape({Dim{16, "batch"}, Dim{64, ""}}));  // batch=16
  CHECK_FALSE(a == Shape({Dim{8, "batch"}}));
  REQUIRE(a.size() == 2);
  CHECK(a[0].symbol == "batch");
  CHECK(a[0].value == 8);
  CHECK(a.back().value == 64);
  CHECK(a.ToVector() == dims);
  CHECK(Shape(dims.begin(), dims.end() - 1) == Shape({Dim{8, "batch"}}));
}

TEST_CASE("shape: a scalar is the empty, null shape") {
  const Shape scalar, built(std::vector<Dim>{});
  CHECK(scalar.empty());
  CHECK(built.empty());
  CHECK(scalar == built);
  CHECK(scalar.size() == 0);
  CHECK(scalar.begin() == scalar.end());
  CHECK(scalar.ToVector().empty());
}

TEST_CASE("shape: more shapes than the per-thread cache holds keep their own dims") {
  std::vector<Shape> first;
  for (int64_t k = 0; k < 5000; ++k) first.push_back(Shape({Dim{k, ""}, Dim{k % 7, "n"}}));
  for (int64_t k = 4999; k >= 0; --k) {
    const Shape again({Dim{k, ""}, Dim{k % 7, "n"}});
    CHECK(again == first[k]);
    CHECK(again[0].value == k);
    CHECK(again[1].value == k % 7);
  }
}

}  // namespace
}  // namespace memplan
