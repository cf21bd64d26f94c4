// InternedString: a pointer-sized handle to an immutable string kept in a
// process-wide pool, so a value that repeats across millions of records (a
// shape's dimension expression such as "batch*seq") is stored once and the
// record that names it stays trivially copyable.
//
// Contract: two handles are equal exactly when their texts are; the empty
// text is the null handle (empty() is true). Interning takes a lock and one
// hash lookup; reading a handle is free and needs no lock. The pool only
// grows (texts are never freed), so intern only values drawn from a small
// set: dimension expressions, not ids.
#ifndef MEMPLAN_ANALYZER_BASE_INTERNED_STRING_H_
#define MEMPLAN_ANALYZER_BASE_INTERNED_STRING_H_

#include <string>
#include <string_view>

namespace memplan {

class InternedString {
 public:
  InternedString() = default;
  InternedString(std::string_view text);  // NOLINT: implicit, as std::string's
  InternedString(const char* text) : InternedString(std::string_view(text)) {}         // NOLINT
  InternedString(const std::string& text) : InternedString(std::string_view(text)) {}  // NOLINT

  bool empty() const { return text_ == nullptr; }
  void clear() { text_ = nullptr; }
  std::string_view view() const { return text_ ? std::string_view(*text_) : std::string_view(); }
  std::string str() const { return std::string(view()); }
  operator std::string_view() const { return view(); }  // NOLINT

  friend bool operator==(InternedString a, InternedString b) { return a.text_ == b.text_; }
  friend bool operator==(InternedString a, std::string_view b) { return a.view() == b; }
  friend bool operator==(InternedString a, const char* b) { return a.view() == b; }
  friend bool operator==(InternedString a, const std::string& b) { return a.view() == b; }

 private:
  const std::string* text_ = nullptr;  // owned by the pool; null for ""
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_INTERNED_STRING_H_
