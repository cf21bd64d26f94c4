#include "analyzer/ir/shape_expr.h"

#include <fmt/format.h>

#include <cctype>

#include "analyzer/base/json_util.h"
#include "analyzer/ir/graph.h"

namespace memplan {
namespace {

std::string Quoted(std::string_view s) { return json_util::Quote(std::string(s)); }

class Parser {
 public:
  Parser(std::string_view text, const SymbolValues& symbols, std::vector<std::string>* used,
         std::string* error)
      : text_(text), symbols_(symbols), used_(used), error_(error) {}

  bool Expr(int64_t* value) {
    int64_t sum = 0;
    char sign = 0;  // the operator before the next term, 0 for the first
    for (;;) {
      int64_t term = 0;
      if (!Term(sign == 0 ? "" : std::string_view(&sign, 1), &term)) return false;
      if (sign == '-' ? !CheckedAdd(sum, -term, &sum) : !CheckedAdd(sum, term, &sum))
        return Overflow();
      SkipSpaces();
      if (pos_ == text_.size()) break;
      if (text_[pos_] != '+' && text_[pos_] != '-')
        return Bad(fmt::format("expected \"+\", \"-\" or \"*\" at \"{}\"", text_.substr(pos_)));
      sign = text_[pos_++];
    }
    if (sum < 0) {
      *error_ = fmt::format("dimension {} is negative ({})", Quoted(text_), sum);
      return false;
    }
    *value = sum;
    return true;
  }

 private:
  bool Term(std::string_view after, int64_t* value) {
    int64_t product = 1;
    for (bool first = true;; first = false) {
      int64_t factor = 0;
      if (!Factor(first ? after : "*", &factor)) return false;
      if (!CheckedMul(product, factor, &product)) return Overflow();
      SkipSpaces();
      if (pos_ < text_.size() && text_[pos_] == '*') {
        ++pos_;
        continue;
      }
      break;
    }
    *value = product;
    return true;
  }

  bool Factor(std::string_view after, int64_t* value) {
    SkipSpaces();
    size_t start = pos_;
    if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      int64_t v = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (!CheckedMul(v, 10, &v) || !CheckedAdd(v, text_[pos_] - '0', &v)) return Overflow();
        ++pos_;
      }
      *value = v;
      return true;
    }
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    if (pos_ == start) {
      return Bad(after.empty() ? std::string("expected a name or an integer")
                               : fmt::format("expected a name or an integer after \"{}\"", after));
    }
    std::string name(text_.substr(start, pos_ - start));
    for (const auto& [n, v] : symbols_) {
      if (n == name) {
        if (used_) used_->push_back(name);
        *value = v;
        return true;
      }
    }
    std::string names;
    for (const auto& [n, v] : symbols_) names += (names.empty() ? "" : ", ") + n;
    *error_ = fmt::format("unknown symbol {}; expected one of the names in /symbols ({})",
                          Quoted(name), names.empty() ? "none declared" : names);
    return false;
  }

  void SkipSpaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool Bad(const std::string& what) {
    *error_ = fmt::format("bad dimension expression {}; {}", Quoted(text_), what);
    return false;
  }
  bool Overflow() {
    *error_ = fmt::format("dimension {} overflows 64-bit arithmetic", Quoted(text_));
    return false;
  }

  std::string_view text_;
  const SymbolValues& symbols_;
  std::vector<std::string>* used_;
  std::string* error_;
  size_t pos_ = 0;
};

}  // namespace

bool EvalShapeExpr(std::string_view text, const SymbolValues& symbols, int64_t* value,
                   std::vector<std::string>* used, std::string* error) {
  for (const auto& [n, v] : symbols) {  // a declared name, whatever its characters
    if (n == text) {
      if (used) used->push_back(n);
      *value = v;
      return true;
    }
  }
  return Parser(text, symbols, used, error).Expr(value);
}

}  // namespace memplan
