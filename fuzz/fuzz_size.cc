// libFuzzer target: ParseSize (--budget and every size on the command line).
// A parsed size is never negative, and FormatBytes of it never fails; a
// refusal quotes the text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "analyzer/base/units.h"

using namespace memplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  int64_t bytes = -1;
  std::string err;
  if (ParseSize(text, &bytes, &err)) {
    if (bytes < 0) std::abort();
    std::string shown = FormatBytes(bytes);
    if (shown.empty()) std::abort();
    // Plain decimal bytes read back exactly.
    std::string plain = std::to_string(bytes);
    int64_t again = -1;
    std::string err2;
    if (!ParseSize(plain, &again, &err2) || again != bytes) std::abort();
  } else {
    if (err.empty()) std::abort();
  }
  return 0;
}
