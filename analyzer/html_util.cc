#include "analyzer/html_util.h"

#include <fmt/format.h>

#include <cstdint>

namespace memplan {

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A tick step of 1, 2 or 5 times a power of ten giving at most ~6 ticks.
int64_t TickStep(int64_t max) {
  int64_t step = 1;
  while (true) {
    for (int64_t m : {1, 2, 5})
      if (max / (step * m) <= 6) return step * m;
    if (step > INT64_MAX / 100) return step * 10;
    step *= 10;
  }
}

// Y ticks at round multiples of B, KiB, MiB, GiB or TiB, so labels read well.
int64_t ByteTickStep(int64_t max) {
  int64_t unit = 1;
  while (unit <= (int64_t{1} << 40) / 1024 && max / (unit * 1024) >= 1) unit *= 1024;
  return TickStep((max + unit - 1) / unit) * unit;
}

std::string Pt(double x, double y) { return fmt::format("{:.1f},{:.1f}", x, y); }

}  // namespace memplan
