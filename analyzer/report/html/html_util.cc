#include "analyzer/report/html/html_util.h"

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

std::string PageHead(const std::string& title, const std::string& page_css) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
         Escape(title) +
         "</title>\n<style>\n"
         "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}\n"
         "table{border-collapse:collapse;margin:8px 0 20px}\n"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}\n"
         "td.n{text-align:right;font-family:monospace}\n"
         "th{background:#f0f0f0}\n" +
         page_css +
         ".swatch{display:inline-block;width:12px;height:12px;margin-right:4px}\n"
         "svg text{font-size:11px;font-family:sans-serif}\n"
         "</style>\n</head>\n<body>\n<h1>" +
         Escape(title) + "</h1>\n";
}

}  // namespace memplan
