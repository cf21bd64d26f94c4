#include "analyzer/base/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace memplan {

bool ParseSize(std::string_view text, int64_t* bytes, std::string* err) {
  auto fail = [&] {
    *err = fmt::format(
        "invalid size \"{}\"; expected a number of bytes with an optional unit "
        "(B KB MB GB TB KiB MiB GiB TiB), e.g. 24GiB",
        text);
    return false;
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  std::string number(text.substr(0, i));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) return fail();
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  struct Unit {
    const char* name;
    double scale;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"KiB", 1024.0},
      {"MiB", 1048576.0},
      {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0},
  };
  const Unit* found = nullptr;
  for (const Unit& u : kUnits)
    if (unit == u.name) found = &u;
  if (found == nullptr) return fail();
  bool integral = number.find('.') == std::string::npos;
  if (integral && found->scale == 1) {
    // Exact path for plain byte counts.
    int64_t value = 0;
    for (char c : number) {
      if (__builtin_mul_overflow(value, int64_t{10}, &value) ||
          __builtin_add_overflow(value, int64_t{c - '0'}, &value)) {
        *err = fmt::format("size \"{}\" is larger than 2^63-1 bytes", text);
        return false;
      }
    }
    *bytes = value;
    return true;
  }
  long double v = std::strtold(number.c_str(), nullptr) * static_cast<long double>(found->scale);
  if (!(v < 9223372036854775807.0L)) {
    *err = fmt::format("size \"{}\" is larger than 2^63-1 bytes", text);
    return false;
  }
  *bytes = static_cast<int64_t>(std::llround(v));
  return true;
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kNames[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024 && bytes > -1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  // Move up a unit whenever two decimals would print 1024.00.
  while (std::abs(v) >= 1023.995 && u < 5) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, kNames[u]);
}

std::string FormatBytesExact(int64_t bytes) {
  return fmt::format("{} ({} bytes)", FormatBytes(bytes), bytes);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&](char x, char y) { return lower(x) == lower(y); });
}

}  // namespace memplan
