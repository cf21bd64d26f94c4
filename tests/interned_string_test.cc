#include "analyzer/base/interned_string.h"

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace memplan {
namespace {

static_assert(sizeof(InternedString) == sizeof(void*));
static_assert(std::is_trivially_copyable_v<InternedString>);
static_assert(std::is_trivially_destructible_v<InternedString>);

TEST_CASE("interned_string: equal texts share one handle, the empty text is null") {
  const std::string built = std::string("batch") + "*seq";
  InternedString a("batch*seq"), b(built), c("batch");
  CHECK(a == b);
  CHECK_FALSE(a == c);
  CHECK(a.view().data() == b.view().data());
  CHECK(a == "batch*seq");
  CHECK(a.str() == "batch*seq");
  InternedString none, empty("");
  CHECK(none.empty());
  CHECK(empty.empty());
  CHECK(none == empty);
  CHECK(none.view().empty());
  a.clear();
  CHECK(a.empty());
  CHECK(b == "batch*seq");  // clearing one handle leaves the text
}

TEST_CASE("interned_string: more texts than the per-thread cache holds keep their own handles") {
  std::vector<InternedString> first;
  for (int k = 0; k < 3000; ++k) first.push_back(InternedString("scope." + std::to_string(k)));
  for (int k = 2999; k >= 0; --k) {
    const InternedString again("scope." + std::to_string(k));
    CHECK(again == first[k]);
    CHECK(again.view() == "scope." + std::to_string(k));
  }
  CHECK_FALSE(first[1] == first[2]);
}

TEST_CASE("interned_string: threads interning the same texts get the same handles") {
  constexpr int kThreads = 4, kTexts = 200;
  std::vector<std::vector<InternedString>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&got, i] {
      for (int k = 0; k < kTexts; ++k) got[i].push_back(InternedString("sym" + std::to_string(k)));
    });
  for (std::thread& t : threads) t.join();
  for (int i = 1; i < kThreads; ++i) CHECK(got[i] == got[0]);
  CHECK(got[0][7] == "sym7");
}

}  // namespace
}  // namespace memplan
