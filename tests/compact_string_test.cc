#include "analyzer/base/compact_string.h"

#include <doctest/doctest.h>

#include <string>
#include <utility>

namespace memplan {
namespace {

TEST_CASE("compact_string: one pointer; empty is null, set text reads back") {
  static_assert(sizeof(CompactString) == sizeof(void*));
  CompactString s;
  CHECK(s.empty());
  CHECK(s.view().empty());
  CHECK(s.str().empty());
  s = std::string(R"({"meta":[1,2]})");
  CHECK(!s.empty());
  CHECK(s == std::string_view(R"({"meta":[1,2]})"));
  CHECK(s.str() == R"({"meta":[1,2]})");
  s = std::string();  // setting "" frees the text
  CHECK(s.empty());
}

TEST_CASE("compact_string: copies are deep, moves leave the source empty") {
  CompactString a(std::string("note"));
  CompactString b = a;
  CHECK(b == a);
  CHECK(b.view().data() != a.view().data());  // its own text
  a = std::string("other");
  CHECK(b == std::string_view("note"));
  CompactString c = std::move(b);
  CHECK(c == std::string_view("note"));
  CHECK(b.empty());  // NOLINT(bugprone-use-after-move): the contract says so
  const CompactString& same = c;
  c = same;  // self-assignment keeps the text
  CHECK(c == std::string_view("note"));
  CompactString empty;
  c = empty;
  CHECK(c.empty());
}

}  // namespace
}  // namespace memplan
