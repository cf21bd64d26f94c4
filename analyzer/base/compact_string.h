// CompactString: an owned string in one pointer, for record fields that are
// almost always empty (a tensor's or op's unknown keys): null when empty,
// else one heap std::string. A std::string field costs 32 bytes in each of a
// graph's millions of records whether set or not; this costs 8.
//
// Contract: a value type (copies are deep, moves leave the source empty);
// the empty text is the null pointer, so empty() is one comparison. Setting
// a non-empty text allocates once.
#ifndef MEMPLAN_ANALYZER_BASE_COMPACT_STRING_H_
#define MEMPLAN_ANALYZER_BASE_COMPACT_STRING_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace memplan {

class CompactString {
 public:
  CompactString() = default;
  CompactString(std::string text) { Set(std::move(text)); }  // NOLINT: implicit, as std::string's
  CompactString(const CompactString& other) : CompactString(other.str()) {}
  CompactString(CompactString&&) noexcept = default;
  CompactString& operator=(const CompactString& other) {
    if (this != &other) Set(other.str());
    return *this;
  }
  CompactString& operator=(CompactString&&) noexcept = default;
  CompactString& operator=(std::string text) {
    Set(std::move(text));
    return *this;
  }

  bool empty() const { return text_ == nullptr; }
  std::string_view view() const { return text_ ? std::string_view(*text_) : std::string_view(); }
  std::string str() const { return text_ ? *text_ : std::string(); }
  operator std::string_view() const { return view(); }  // NOLINT: implicit, as std::string's

  friend bool operator==(const CompactString& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const CompactString& a, const CompactString& b) {
    return a.view() == b.view();
  }

 private:
  void Set(std::string text) {
    text_ = text.empty() ? nullptr : std::make_unique<std::string>(std::move(text));
  }

  std::unique_ptr<std::string> text_;
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_COMPACT_STRING_H_
