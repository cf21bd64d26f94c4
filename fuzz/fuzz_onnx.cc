// libFuzzer target: the ONNX importer (analyzer/import/onnx_import.h) on arbitrary
// bytes, then what `memplan analyze` does with a model that imports
// (fuzz/analyze_checks.h). Built only with ONNX support. Any crash, sanitizer
// report, hang or broken invariant is a bug; a refused input is fine.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/import/onnx_import.h"
#include "fuzz/analyze_checks.h"
#include "fuzz/fuzz_check.h"

using namespace memplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  Graph input;
  std::vector<std::string> warnings;
  std::string err;
  // As given, then with a symbolic batch set (a named dimension needs --set).
  GraphLoadOptions with_batch;
  with_batch.symbol_overrides.emplace_back("batch", 3);
  if (!ImportOnnx(bytes, "fuzz.onnx", GraphLoadOptions(), &input, &warnings, &err)) {
    Check(!err.empty());
    err.clear();
    input = Graph();
    if (!ImportOnnx(bytes, "fuzz.onnx", with_batch, &input, &warnings, &err)) {
      Check(!err.empty());
      return 0;
    }
  }
  Check(!input.joint);  // ONNX carries forward graphs
  CheckAnalyze(std::move(input), "fuzz.onnx");
  return 0;
}
