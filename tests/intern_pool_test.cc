#include "analyzer/base/intern_pool.h"

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace memplan {
namespace {

// Two cache slots: most lookups below miss the cache and go to the pool.
using TinyPool = InternPool<std::string, TextHash, std::equal_to<>, 2>;

TEST_CASE("intern_pool: equal keys give one address, different keys different ones") {
  const std::string built = std::string("layer") + ".0";
  const std::string* a = TinyPool::Intern(std::string_view("layer.0"));
  const std::string* b = TinyPool::Intern(std::string_view(built));
  const std::string* c = TinyPool::Intern(std::string_view("layer.1"));
  CHECK(a == b);
  CHECK(a != c);
  CHECK(*a == "layer.0");
  CHECK(*c == "layer.1");
}

TEST_CASE("intern_pool: values evicted from the per-thread cache keep their address") {
  std::vector<const std::string*> first;
  for (int k = 0; k < 100; ++k)
    first.push_back(TinyPool::Intern(std::string_view("key" + std::to_string(k))));
  for (int k = 99; k >= 0; --k) {
    const std::string key = "key" + std::to_string(k);
    CHECK(TinyPool::Intern(std::string_view(key)) == first[k]);
    CHECK(*first[k] == key);
  }
}

TEST_CASE("intern_pool: threads interning the same keys get the same addresses") {
  constexpr int kThreads = 4, kKeys = 100;
  std::vector<std::vector<const std::string*>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&got, i] {
      for (int k = 0; k < kKeys; ++k)
        got[i].push_back(TinyPool::Intern(std::string_view("t" + std::to_string(k))));
    });
  for (std::thread& t : threads) t.join();
  for (int i = 1; i < kThreads; ++i) CHECK(got[i] == got[0]);
  CHECK(*got[0][42] == "t42");
}

}  // namespace
}  // namespace memplan
