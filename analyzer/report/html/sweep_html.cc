#include "analyzer/report/html/sweep_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analyzer/base/units.h"
#include "analyzer/report/html/html_util.h"

namespace memplan {
namespace {

constexpr double kLeft = 96, kTop = 24, kWidth = 900, kHeight = 340;
constexpr const char* kCurveColor = "#1f77b4";
constexpr const char* kChosenColor = "#ff7f0e";
constexpr const char* kFloorColor = "#2ca02c";
constexpr const char* kBaselineColor = "#d62728";

// A cost tick step of 1, 2 or 5 times a power of ten, at most ~6 ticks.
double CostTick(double max) {
  double step = std::pow(10.0, std::floor(std::log10(std::max(max, 1e-12))));
  for (double m : {0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0})
    if (max / (step * m) <= 6) return step * m;
  return step * 10;
}

}  // namespace

bool RenderSweepHtml(const SweepHtmlInput& in, std::string* html, std::string* err) {
  if (in.points.empty()) {
    *err = "sweep page: no sweep points";
    return false;
  }
  std::vector<SweepPoint> pts = in.points;
  bool chosen_in_sweep = std::any_of(pts.begin(), pts.end(), [&](const SweepPoint& p) {
    return p.budget_bytes == in.chosen.budget_bytes;
  });
  if (!chosen_in_sweep) pts.push_back(in.chosen);
  std::sort(pts.begin(), pts.end(), [](const SweepPoint& a, const SweepPoint& b) {
    return a.budget_bytes < b.budget_bytes;
  });
  // X: from a little under the floor to a little over the baseline peak.
  int64_t xmin = std::min(in.floor_bytes, pts.front().budget_bytes);
  int64_t xmax = std::max(in.baseline_peak_bytes, pts.back().budget_bytes);
  int64_t pad = std::max<int64_t>((xmax - xmin) / 20, 1);
  xmin = std::max<int64_t>(0, xmin - pad);
  xmax += pad;
  int64_t xtick = ByteTickStep(std::max<int64_t>(xmax - xmin, 1));
  xmin = xmin / xtick * xtick;
  double ymax = 0;
  for (const SweepPoint& p : pts)
    if (p.feasible) ymax = std::max(ymax, p.recompute_cost);
  const double ytick = CostTick(ymax > 0 ? ymax : 1);
  ymax = std::max(ytick, std::ceil(ymax / ytick) * ytick);
  auto X = [&](int64_t b) {
    return kLeft + static_cast<double>(b - xmin) * kWidth / static_cast<double>(xmax - xmin);
  };
  auto Y = [&](double c) { return kTop + kHeight - c * kHeight / ymax; };
  auto overhead = [&](double c) {
    return in.step_cost > 0 ? fmt::format("{:.1f}%", 100.0 * c / in.step_cost) : std::string("-");
  };

  std::string o;
  auto add = [&](const std::string& s) { o += s; };
  std::string title = fmt::format("memplan budget sweep: {}",
                                  in.graph_name.empty() ? std::string("(unnamed)") : in.graph_name);
  add(PageHead(title, "tr.chosen td{background:#fff1e0;font-weight:bold}\n"));
  add(fmt::format(
      "<p>{}: recompute cost ({}) of the cheapest plan found under each budget. A smaller "
      "budget never costs less. No plan goes under the floor {}; the baseline keeps "
      "everything and peaks at {}.</p>\n",
      Escape(in.graph_file), Escape(in.cost_unit), Escape(FormatBytes(in.floor_bytes)),
      Escape(FormatBytes(in.baseline_peak_bytes))));

  const int w = static_cast<int>(kLeft + kWidth + 24), h = static_cast<int>(kTop + kHeight + 48);
  add(
      fmt::format("<svg id=\"sweep\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                  "xmlns=\"http://www.w3.org/2000/svg\">\n",
                  w, h, w, h));
  add(fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", w, h));
  for (double c = 0; c <= ymax * 1.0000001; c += ytick)
    add(
        fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                    "stroke=\"#e6e6e6\"/><text x=\"{:.1f}\" y=\"{:.1f}\" "
                    "text-anchor=\"end\">{:.4g}</text>\n",
                    kLeft, Y(c), kLeft + kWidth, Y(c), kLeft - 6, Y(c) + 4, c));
  for (int64_t b = xmin; b <= xmax; b += xtick)
    add(fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", X(b),
                    kTop + kHeight + 16, Escape(FormatBytes(b))));
  add(fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">budget</text>\n",
                  kLeft + kWidth / 2, kTop + kHeight + 36));
  add(
      fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"start\">recompute cost ({})"
                  "</text>\n",
                  kLeft, kTop - 8, Escape(in.cost_unit)));
  auto vline = [&](const char* id, int64_t b, const char* color, const std::string& label,
                   double ty) {
    bool right = X(b) > kLeft + kWidth * 0.75;  // label on the left of the line
    add(
        fmt::format("<g id=\"{}\" data-bytes=\"{}\"><line x1=\"{:.1f}\" y1=\"{:.1f}\" "
                    "x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\" "
                    "shape-rendering=\"crispEdges\" stroke-dasharray=\"6,4\"/>"
                    "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" text-anchor=\"{}\">{}</text>"
                    "</g>\n",
                    id, b, X(b), kTop, X(b), kTop + kHeight, color, right ? X(b) - 4 : X(b) + 4, ty,
                    color, right ? "end" : "start", Escape(label)));
  };
  vline("floor", in.floor_bytes, kFloorColor, "floor " + FormatBytes(in.floor_bytes), kTop + 12);
  vline("baseline-peak", in.baseline_peak_bytes, kBaselineColor,
        "baseline " + FormatBytes(in.baseline_peak_bytes), kTop + 26);

  // The curve: a step function (the cost holds until the next budget).
  std::string path, data;
  bool first = true;
  double last_y = 0;
  for (const SweepPoint& p : pts) {
    if (!p.feasible) continue;
    double x = X(p.budget_bytes), y = Y(p.recompute_cost);
    path += first ? fmt::format("M{}", Pt(x, y)) : fmt::format(" L{} L{}", Pt(x, last_y), Pt(x, y));
    data += fmt::format("{}{}:{:.6g}", first ? "" : " ", p.budget_bytes, p.recompute_cost);
    first = false;
    last_y = y;
  }
  if (!first) path += fmt::format(" L{}", Pt(kLeft + kWidth, last_y));
  add(
      fmt::format("<path id=\"curve\" data-points=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" "
                  "stroke-width=\"2\" shape-rendering=\"crispEdges\"/>\n",
                  data, path, kCurveColor));
  for (const SweepPoint& p : pts) {
    if (!p.feasible) {
      add(
          fmt::format("<text class=\"nofit\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
                      "fill=\"#888888\">no fit</text>\n",
                      X(p.budget_bytes), kTop + kHeight - 4));
      continue;
    }
    add(fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n",
                    X(p.budget_bytes), Y(p.recompute_cost), kCurveColor));
  }
  const SweepPoint& c = in.chosen;
  double cy = c.feasible ? Y(c.recompute_cost) : kTop + kHeight;
  add(fmt::format(
      "<g id=\"chosen\" data-budget-bytes=\"{}\" data-cost=\"{:.6g}\" "
      "data-feasible=\"{}\"><circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"7\" fill=\"none\" "
      "stroke=\"{}\" stroke-width=\"3\"/><text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">"
      "--budget {}: {}</text></g>\n",
      c.budget_bytes, c.recompute_cost, c.feasible ? "true" : "false", X(c.budget_bytes), cy,
      kChosenColor, X(c.budget_bytes) + 10, cy - 10, "#b35900", Escape(FormatBytes(c.budget_bytes)),
      c.feasible
          ? Escape(fmt::format("cost {:.4g} ({})", c.recompute_cost, overhead(c.recompute_cost)))
          : std::string("no plan fits")));
  add("</svg>\n");
  add(fmt::format(
      "<p id=\"legend\"><span class=\"swatch\" style=\"background:{}\"></span>cheapest plan "
      "found &nbsp; <span class=\"swatch\" style=\"background:{}\"></span>the chosen budget "
      "&nbsp; <span class=\"swatch\" style=\"background:{}\"></span>floor &nbsp; "
      "<span class=\"swatch\" style=\"background:{}\"></span>baseline peak</p>\n",
      kCurveColor, kChosenColor, kFloorColor, kBaselineColor));

  add(
      fmt::format("<table id=\"points\">\n<tr><th>budget</th><th>fits</th><th>peak</th>"
                  "<th>cost ({})</th><th>overhead</th></tr>\n",
                  Escape(in.cost_unit)));
  for (const SweepPoint& p : pts) {
    bool chosen = p.budget_bytes == c.budget_bytes;
    add(
        fmt::format("<tr{}><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td>"
                    "<td class=\"n\">{:.4g}</td><td class=\"n\">{}</td></tr>\n",
                    chosen ? " class=\"chosen\"" : "", Escape(FormatBytesExact(p.budget_bytes)),
                    p.feasible ? "yes" : "no", Escape(FormatBytes(p.peak_bytes)), p.recompute_cost,
                    overhead(p.recompute_cost)));
  }
  add("</table>\n</body>\n</html>\n");
  *html = std::move(o);
  return true;
}

}  // namespace memplan
