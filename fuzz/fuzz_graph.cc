// libFuzzer target: the graph importer, then what `memplan analyze` does with
// a graph that parses: lowering (forward-only input), the baseline program
// under each accumulation mode, its simulation, the lower bound and the
// reports. Any crash, sanitizer report, hang or broken invariant is a bug;
// a refused input (false + message) is fine.
#include <cstddef>
#include <cstdint>
#include <string>

#include "analyzer/import/graph_json.h"
#include "fuzz/analyze_checks.h"
#include "fuzz/fuzz_check.h"

using namespace memplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  Graph input;
  std::string err;
  GraphLoadOptions options;
  if (!ParseGraph(text, "fuzz.json", options, &input, &err)) {
    Check(!err.empty());
    return 0;
  }
  CheckAnalyze(std::move(input), "fuzz.json");
  return 0;
}
