// Dimension expressions in memplan.graph/1 shapes: "batch", "batch*seq",
// "2*batch+1", "batch*seq-1". Exporters write them for sizes that depend on a symbol (a
// flattened batch*seq, a concatenation 2*batch), so `--set batch=N` resizes
// every tensor of a traced graph without tracing it again.
#ifndef MEMPLAN_ANALYZER_IR_SHAPE_EXPR_H_
#define MEMPLAN_ANALYZER_IR_SHAPE_EXPR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan {

using SymbolValues = std::vector<std::pair<std::string, int64_t>>;

// Grammar (spaces allowed between tokens):
//   expr := term (('+' | '-') term)*     term := factor ('*' factor)*
//   factor := integer >= 0 | name   name := [A-Za-z_][A-Za-z0-9_]*
// A text equal to a declared name is that symbol, whatever its characters
// (ONNX dim_params). Evaluates `text` with the values in `symbols` in checked 64-bit
// arithmetic. Appends each name it reads to `used` (when given). On failure
// returns false and sets `error` to a message without location, e.g.
//   unknown symbol "btach"; expected one of the names in /symbols (batch, seq)
//   bad dimension expression "batch*"; expected a name or an integer after "*"
//   dimension "batch*seq" overflows 64-bit arithmetic
//   dimension "batch-3" is negative (-1)
bool EvalShapeExpr(std::string_view text, const SymbolValues& symbols, int64_t* value,
                   std::vector<std::string>* used, std::string* error);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IR_SHAPE_EXPR_H_
