// Small pieces shared by memplan's HTML pages (html_report, sweep_html):
// escaping text for HTML and choosing axis ticks that read well.
#ifndef MEMPLAN_ANALYZER_HTML_UTIL_H_
#define MEMPLAN_ANALYZER_HTML_UTIL_H_

#include <cstdint>
#include <string>

namespace memplan {

// & < > " ' as entities: safe in text and in quoted attributes.
std::string Escape(const std::string& s);

// A tick step of 1, 2 or 5 times a power of ten giving at most ~6 ticks up
// to `max` (> 0).
int64_t TickStep(int64_t max);

// Ticks at round multiples of B, KiB, MiB, GiB or TiB, so labels read well.
int64_t ByteTickStep(int64_t max);

// "{:.1f},{:.1f}": one SVG point.
std::string Pt(double x, double y);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_HTML_UTIL_H_
