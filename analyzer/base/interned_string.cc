#include "analyzer/base/interned_string.h"

#include <functional>

#include "analyzer/base/intern_pool.h"

namespace memplan {
namespace {

// 256 recent texts per thread: an importer interns the same few op types and
// scopes over and over.
using TextPool = InternPool<std::string, TextHash, std::equal_to<>, 256>;

}  // namespace

InternedString::InternedString(std::string_view text) {
  if (!text.empty()) text_ = TextPool::Intern(text);
}

}  // namespace memplan
