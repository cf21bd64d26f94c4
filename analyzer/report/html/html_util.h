// Small pieces shared by memplan's HTML pages (html_report, sweep_html):
// the page head, escaping text for HTML and choosing axis ticks that read
// well.
#ifndef MEMPLAN_ANALYZER_REPORT_HTML_HTML_UTIL_H_
#define MEMPLAN_ANALYZER_REPORT_HTML_HTML_UTIL_H_

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

// The page up to and including its <h1>: doctype, <title>, the shared
// stylesheet with `page_css` (rules of this page, one per line, each ending in
// "\n") after the table rules, and the heading, `title` escaped in both.
std::string PageHead(const std::string& title, const std::string& page_css);

// "{:.1f},{:.1f}": one SVG point.
std::string Pt(double x, double y);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_HTML_HTML_UTIL_H_
