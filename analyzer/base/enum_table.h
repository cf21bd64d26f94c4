// EnumName tables: one constexpr table per enum gives both its parse and its
// name function, so the two never disagree.
//
//   constexpr EnumName<Phase> kPhaseNames[] = {
//       {Phase::kForward, "forward"}, {Phase::kBackward, "backward"}};
//   bool ParsePhase(std::string_view name, Phase* out) {
//     return ParseEnum(kPhaseNames, name, out);
//   }
//   const char* PhaseName(Phase p) { return NameOf(kPhaseNames, p); }
//
// A value may have several entries: parsing accepts each, naming returns the
// first (list the canonical spelling first, its aliases after it). Names are
// const char* so that NameOf hands out the literal itself, NUL-terminated.
#ifndef MEMPLAN_ANALYZER_BASE_ENUM_TABLE_H_
#define MEMPLAN_ANALYZER_BASE_ENUM_TABLE_H_

#include <cstddef>
#include <string_view>

namespace memplan {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The value of the first entry named `name` into *out (untouched on a miss).
template <class E, size_t N>
constexpr bool ParseEnum(const EnumName<E> (&table)[N], std::string_view name, E* out) {
  for (const EnumName<E>& entry : table) {
    if (name == entry.name) {
      *out = entry.value;
      return true;
    }
  }
  return false;
}

// The name of the first entry for `value`, or `unknown` when none has it.
template <class E, size_t N>
constexpr const char* NameOf(const EnumName<E> (&table)[N], E value, const char* unknown = "?") {
  for (const EnumName<E>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_ENUM_TABLE_H_
