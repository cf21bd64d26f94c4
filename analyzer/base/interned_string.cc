#include "analyzer/base/interned_string.h"

#include <mutex>
#include <unordered_set>

namespace memplan {
namespace {

struct Pool {
  std::mutex mutex;
  // Node-based: an element's address never changes.
  std::unordered_set<std::string> texts;
};

Pool& ThePool() {
  static Pool* pool = new Pool();  // never destroyed: handles outlive static destructors
  return *pool;
}

}  // namespace

InternedString::InternedString(std::string_view text) {
  if (text.empty()) return;
  Pool& pool = ThePool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  text_ = &*pool.texts.emplace(text).first;
}

}  // namespace memplan
