#include "analyzer/base/small_vector.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace memplan {
namespace {

using Ints = SmallVector<int, 2>;

TEST_CASE("small_vector: holds N inline, grows onto the heap, keeps order") {
  Ints v;
  CHECK(v.empty());
  for (int i = 0; i < 9; ++i) {
    v.push_back(i * 10);
    CHECK(v.size() == static_cast<size_t>(i + 1));
    CHECK(v.back() == i * 10);
  }
  CHECK(v.ToVector() == std::vector<int>{0, 10, 20, 30, 40, 50, 60, 70, 80});
  v.clear();
  CHECK(v.empty());
  v.push_back(7);
  CHECK(v.ToVector() == std::vector<int>{7});
}

TEST_CASE("small_vector: built from an iterator range, inline and on the heap") {
  const std::vector<int> source = {4, 5, 6, 7, 8};
  CHECK(Ints(source.begin(), source.begin() + 2).ToVector() == std::vector<int>{4, 5});
  CHECK(Ints(source.begin(), source.end() - 1).ToVector() == std::vector<int>{4, 5, 6, 7});
  CHECK(Ints(source.begin(), source.begin()).empty());
}

TEST_CASE("small_vector: erase removes a range and keeps the rest in order") {
  for (int n : {2, 6}) {  // inline and on the heap
    CAPTURE(n);
    Ints v;
    for (int i = 0; i < n; ++i) v.push_back(i % 2 ? -1 : i);
    v.erase(std::remove(v.begin(), v.end(), -1), v.end());
    std::vector<int> want;
    for (int i = 0; i < n; i += 2) want.push_back(i);
    CHECK(v == want);
  }
  Ints w = {1, 2, 3};
  CHECK(w.erase(w.begin(), w.begin() + 1) == w.begin());
  CHECK(w == std::vector<int>{2, 3});
}

TEST_CASE("small_vector: copies and moves, inline and on the heap") {
  for (int n : {0, 1, 2, 3, 17}) {
    CAPTURE(n);
    Ints a;
    for (int i = 0; i < n; ++i) a.push_back(i);
    const std::vector<int> want = a.ToVector();
    Ints copy(a);
    CHECK(copy.ToVector() == want);
    CHECK(copy == a);
    Ints assigned = {5, 6, 7};
    assigned = a;
    CHECK(assigned.ToVector() == want);
    Ints moved(std::move(a));
    CHECK(moved.ToVector() == want);
    CHECK(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
    a.push_back(42);   // and usable
    CHECK(a.ToVector() == std::vector<int>{42});
    Ints target = {1, 2, 3, 4};
    target = std::move(moved);
    CHECK(target.ToVector() == want);
    copy.push_back(99);
    CHECK_FALSE(copy == target);  // the copy owns its elements
    target = target;              // self-assignment keeps them
    CHECK(target.ToVector() == want);
  }
}

TEST_CASE("small_vector: push_back of its own element survives the growth") {
  Ints v = {3, 4};
  v.push_back(v[0]);  // full inline: grows while reading v[0]
  v.push_back(v[2]);
  CHECK(v.ToVector() == std::vector<int>{3, 4, 3, 3});
}

TEST_CASE("small_vector: assign, emplace_back and pairs") {
  const std::vector<int> source = {9, 8, 7, 6, 5};
  Ints v = {1};
  v.assign(source.begin() + 1, source.end());
  CHECK(v.ToVector() == std::vector<int>{8, 7, 6, 5});
  v.assign(source.begin(), source.begin() + 1);
  CHECK(v.ToVector() == std::vector<int>{9});
  SmallVector<std::pair<int, int>, 1> pairs;
  pairs.emplace_back(1, 2);
  pairs.emplace_back(3, 4);
  CHECK(pairs.size() == 2);
  CHECK(pairs[1].first == 3);
  CHECK(pairs[1].second == 4);
  CHECK(pairs == SmallVector<std::pair<int, int>, 1>{{1, 2}, {3, 4}});
}

}  // namespace
}  // namespace memplan
