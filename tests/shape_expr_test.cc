// Dimension expressions (analyzer/ir/shape_expr.h): values and error text.
#include "analyzer/ir/shape_expr.h"

#include <doctest/doctest.h>

namespace memplan {
namespace {

const SymbolValues kSymbols = {{"batch", 8}, {"seq", 128}, {"seq-len", 7}};

int64_t Eval(const std::string& text) {
  int64_t v = -1;
  std::string err;
  CHECK_MESSAGE(EvalShapeExpr(text, kSymbols, &v, nullptr, &err), err);
  return v;
}

std::string Err(const std::string& text, const SymbolValues& symbols = kSymbols) {
  int64_t v = 0;
  std::string err;
  CHECK(!EvalShapeExpr(text, symbols, &v, nullptr, &err));
  return err;
}

}  // namespace

TEST_CASE("shape_expr: names, integers, products and sums") {
  CHECK(Eval("batch") == 8);
  CHECK(Eval("64") == 64);
  CHECK(Eval("batch*seq") == 1024);
  CHECK(Eval("2*batch+1") == 17);
  CHECK(Eval(" batch * seq + 3 * batch ") == 1048);
  CHECK(Eval("0*batch") == 0);
  CHECK(Eval("batch*seq-1") == 1023);
  CHECK(Eval("batch-8") == 0);
  CHECK(Eval("seq-len") == 7);  // a declared name wins over parsing
}

TEST_CASE("shape_expr: the names read are reported") {
  int64_t v = 0;
  std::string err;
  std::vector<std::string> used;
  CHECK(EvalShapeExpr("batch*seq+batch", kSymbols, &v, &used, &err));
  CHECK(used == std::vector<std::string>{"batch", "seq", "batch"});
}

TEST_CASE("shape_expr: errors") {
  CHECK(Err("btach*seq") ==
        "unknown symbol \"btach\"; expected one of the names in /symbols (batch, seq, seq-len)");
  CHECK(Err("batch", {}) ==
        "unknown symbol \"batch\"; expected one of the names in /symbols (none declared)");
  CHECK(Err("batch*") ==
        "bad dimension expression \"batch*\"; expected a name or an integer after \"*\"");
  CHECK(Err("batch+") ==
        "bad dimension expression \"batch+\"; expected a name or an integer after \"+\"");
  CHECK(Err("") == "bad dimension expression \"\"; expected a name or an integer");
  CHECK(Err("batch/2") ==
        "bad dimension expression \"batch/2\"; expected \"+\", \"-\" or \"*\" at \"/2\"");
  CHECK(Err("batch-") ==
        "bad dimension expression \"batch-\"; expected a name or an integer after \"-\"");
  CHECK(Err("batch-9") == "dimension \"batch-9\" is negative (-1)");
  CHECK(Err("4294967296*4294967296") ==
        "dimension \"4294967296*4294967296\" overflows 64-bit arithmetic");
  CHECK(Err("99999999999999999999") ==
        "dimension \"99999999999999999999\" overflows 64-bit arithmetic");
}

}  // namespace memplan
