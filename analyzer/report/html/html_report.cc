// The HTML memory report of `memplan report --html` (analyzer/report/html/html_report.h):
// inline SVG, stacked bands per tensor kind, integer-derived coordinates
// printed with fixed precision so that the page is byte-for-byte stable.
#include "analyzer/report/html/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "analyzer/base/json_util.h"
#include "analyzer/base/units.h"
#include "analyzer/base/version.h"
#include "analyzer/report/analyze_report.h"
#include "analyzer/report/html/html_util.h"

namespace memplan {
namespace {

using json_util::Found;
using ojson = nlohmann::ordered_json;

// Bottom to top: what is resident, then what the step makes.
constexpr TensorKind kStackOrder[] = {
    TensorKind::kParameter,  TensorKind::kBuffer,   TensorKind::kOptimizerState, TensorKind::kInput,
    TensorKind::kActivation, TensorKind::kGradient, TensorKind::kTemporary,
};

const char* KindColor(TensorKind k) {
  switch (k) {
    case TensorKind::kInput:
      return "#8c8c8c";
    case TensorKind::kParameter:
      return "#4c72b0";
    case TensorKind::kBuffer:
      return "#64b5cd";
    case TensorKind::kActivation:
      return "#dd8452";
    case TensorKind::kGradient:
      return "#55a868";
    case TensorKind::kOptimizerState:
      return "#8172b3";
    case TensorKind::kTemporary:
      return "#c44e52";
  }
  return "#000000";
}

std::string Bytes(int64_t b) { return fmt::format("{} ({} bytes)", FormatBytes(b), b); }

// The op a step runs, or "" for a free step / the resident set.
std::string StepOp(const Graph& g, const Program& p, int step) {
  if (step < 0 || step >= static_cast<int>(p.steps.size()) || !p.steps[step].IsRun()) return "";
  return g.ops[p.steps[step].op].id;
}

std::string StepWhat(const Graph& g, const Program& p, const SimResult& sim, int step) {
  if (step < 0) return "the resident set before the first step";
  if (step >= static_cast<int>(p.steps.size())) return fmt::format("step {}", step);
  const Step& s = p.steps[step];
  if (!s.IsRun()) return fmt::format("step {} (free)", step);
  const Op& op = g.ops[s.op];
  const char* phase = sim.recompute[step] ? "recompute" : PhaseName(op.phase);
  return fmt::format("step {}, while \"{}\" runs ({})", step, op.id, phase);
}

struct Chart {
  static constexpr double kLeft = 96, kTop = 20, kWidth = 980, kHeight = 340;
  int columns = 0;
  double ymax = 1;
  double X(int col) const {
    return columns <= 1 ? kLeft + kWidth / 2 : kLeft + col * kWidth / (columns - 1);
  }
  double Y(int64_t b) const { return kTop + kHeight - static_cast<double>(b) * kHeight / ymax; }
};

// A horizontal line across the chart at height y, labelled at its left
// (or right) end: <g ATTRS><line/><text>label</text></g>.
std::string LevelLine(const std::string& attrs, double y, const char* stroke, const char* text_fill,
                      bool label_right, const std::string& label) {
  return fmt::format(
      "<g {}><line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
      "stroke-width=\"2\" shape-rendering=\"crispEdges\"/><text x=\"{:.1f}\" y=\"{:.1f}\"{} "
      "fill=\"{}\">{}</text></g>\n",
      attrs, Chart::kLeft, y, Chart::kLeft + Chart::kWidth, y, stroke,
      label_right ? Chart::kLeft + Chart::kWidth - 4 : Chart::kLeft + 4, y - 4,
      label_right ? " text-anchor=\"end\"" : "", text_fill, Escape(label));
}

}  // namespace

std::vector<std::array<int64_t, kNumTensorKinds>> LiveBytesByKind(const Graph& g,
                                                                  const Program& program,
                                                                  const SimResult& sim) {
  const size_t n = program.steps.size();
  // Difference arrays: a buffer counts while steps alloc_step..free_step run.
  std::vector<std::array<int64_t, kNumTensorKinds>> rows(n + 1);
  for (auto& r : rows) r.fill(0);
  for (const BufferInterval& b : sim.intervals) {
    int k = static_cast<int>(g.tensors[b.owner].kind);
    size_t from = b.alloc_step < 0 ? 0 : static_cast<size_t>(b.alloc_step);
    size_t to = b.free_step < 0 ? n : std::min(n, static_cast<size_t>(b.free_step) + 1);
    if (from >= to) continue;
    rows[from][k] += b.bytes;
    rows[to][k] -= b.bytes;
  }
  for (size_t s = 1; s <= n; ++s)
    for (int k = 0; k < kNumTensorKinds; ++k) rows[s][k] += rows[s - 1][k];
  rows.pop_back();
  constexpr int kTemp = static_cast<int>(TensorKind::kTemporary);
  for (size_t s = 0; s < n; ++s)
    if (program.steps[s].IsRun()) rows[s][kTemp] += g.ops[program.steps[s].op].workspace_bytes;
  return rows;
}

bool RenderHtmlReport(const HtmlReportInput& in, std::string* html, std::string* err) {
  if (!in.jg || !in.program || !in.sim) {
    *err = "html report: missing graph, program or simulation";
    return false;
  }
  const Graph& g = in.jg->graph;
  const Program& p = *in.program;
  const SimResult& sim = *in.sim;
  const MeasuredProfile* m = in.measured;
  const int n = static_cast<int>(p.steps.size());
  if (static_cast<int>(sim.live_during.size()) != n) {
    *err = "html report: the simulation does not match the program";
    return false;
  }
  std::vector<std::array<int64_t, kNumTensorKinds>> by_kind = LiveBytesByKind(g, p, sim);
  for (int s = 0; s < n; ++s) {
    int64_t sum = 0;
    for (int64_t b : by_kind[s]) sum += b;
    if (sum != sim.live_during[s]) {
      *err = fmt::format("html report: step {}: bands sum to {} bytes, the simulator says {}", s,
                         sum, sim.live_during[s]);
      return false;
    }
  }
  const bool measured_curve = m && !m->during.empty() && static_cast<int>(m->during.size()) == n;

  // Columns: each shows the step of its bucket with the most live bytes, so
  // the peak step is always drawn.
  Chart c;
  c.columns = std::min(n, std::max(2, in.max_columns));
  std::vector<int> rep(c.columns), col_of(n);
  std::vector<int64_t> measured_col(c.columns, 0);
  for (int col = 0; col < c.columns; ++col) {
    int from = static_cast<int>(static_cast<int64_t>(col) * n / c.columns);
    int to = static_cast<int>(static_cast<int64_t>(col + 1) * n / c.columns);
    rep[col] = from;
    for (int s = from; s < to; ++s) {
      col_of[s] = col;
      if (sim.live_during[s] > sim.live_during[rep[col]]) rep[col] = s;
      if (measured_curve) measured_col[col] = std::max(measured_col[col], m->during[s]);
    }
  }
  int64_t top_bytes = std::max<int64_t>(sim.peak_bytes, 1);
  if (m) top_bytes = std::max(top_bytes, m->peak_bytes);
  for (int64_t b : measured_col) top_bytes = std::max(top_bytes, b);
  // The baseline in the same columns: its steps scaled to the chart's width.
  const std::vector<int64_t>& base = in.baseline_during;
  std::vector<int64_t> baseline_col;
  int64_t baseline_peak = 0;
  if (!base.empty() && c.columns > 0) {
    baseline_col.assign(c.columns, -1);
    const int64_t nb = static_cast<int64_t>(base.size());
    for (int64_t s = 0; s < nb; ++s) {
      int col = static_cast<int>(s * c.columns / nb);
      baseline_col[col] = std::max(baseline_col[col], base[s]);
      baseline_peak = std::max(baseline_peak, base[s]);
    }
    for (int col = 0; col < c.columns; ++col)  // fewer steps than columns: hold the value
      if (baseline_col[col] < 0) baseline_col[col] = col > 0 ? baseline_col[col - 1] : base[0];
    top_bytes = std::max(top_bytes, baseline_peak);
  }
  if (in.budget_bytes >= 0) top_bytes = std::max(top_bytes, in.budget_bytes);
  // Reserved bytes in the same columns (the max of each column's steps).
  const bool reserved_curve = static_cast<int>(in.reserved_during.size()) == n && n > 0;
  std::vector<int64_t> reserved_col;
  int64_t reserved_peak = 0;
  if (reserved_curve) {
    reserved_col.assign(c.columns, 0);
    for (int s = 0; s < n; ++s) {
      reserved_col[col_of[s]] = std::max(reserved_col[col_of[s]], in.reserved_during[s]);
      reserved_peak = std::max(reserved_peak, in.reserved_during[s]);
    }
    top_bytes = std::max(top_bytes, reserved_peak);
  }
  if (in.device_total_bytes >= 0) top_bytes = std::max(top_bytes, in.device_total_bytes);
  const int64_t ytick = ByteTickStep(top_bytes);
  c.ymax = static_cast<double>((top_bytes + ytick - 1) / ytick * ytick);

  const int peak = sim.peak_step;
  const std::string peak_op = StepOp(g, p, peak);
  std::array<int64_t, kNumTensorKinds> peak_kind{};
  if (peak >= 0)
    peak_kind = by_kind[peak];
  else
    peak_kind = sim.peak_by_kind;

  std::string o;
  auto add = [&](const std::string& s) { o += s; };
  const std::string title =
      fmt::format("memplan report: {}", g.name.empty() ? std::string("(unnamed)") : g.name);
  add(PageHead(title, ".note{color:#8a5a00}\n"));

  // Summary.
  add("<table id=\"summary\">\n");
  auto row = [&](const std::string& k, const std::string& v) {
    add("<tr><th>" + Escape(k) + "</th><td>" + Escape(v) + "</td></tr>\n");
  };
  row("graph",
      fmt::format("{}: {} ops, {} tensors ({})", in.jg->file, g.ops.size(), g.tensors.size(),
                  in.jg->lowered ? "lowered from forward-only" : "joint"));
  if (g.outputs_held) row("loop", OutputsHeldPhrase(g.outputs_held));
  row("program", fmt::format("{}, {} steps", in.program_label, n));
  row("predicted peak", Bytes(sim.peak_bytes) + " at " + StepWhat(g, p, sim, peak));
  row("resident", Bytes(sim.start_bytes));
  if (m) {
    row("measured peak", fmt::format("{} at {} ({}{}{}, {})", Bytes(m->peak_bytes),
                                     StepWhat(g, p, sim, m->peak_step),
                                     m->backend.empty() ? "backend ?" : m->backend,
                                     m->device_name.empty() ? "" : " ", m->device_name, m->file));
    int64_t diff = m->peak_bytes - sim.peak_bytes;
    row("measured - predicted",
        fmt::format("{}{} bytes ({:+.3f}%)", diff >= 0 ? "+" : "", diff,
                    100.0 * static_cast<double>(diff) /
                        static_cast<double>(std::max<int64_t>(sim.peak_bytes, 1))));
  }
  add("</table>\n");
  if (m && !measured_curve) {
    if (m->during.empty())
      add("<p class=\"note\" id=\"measured-note\">The profile report carries no per-step bytes: "
          "only its measured peak is drawn (dashed line).</p>\n");
    else
      add(
          fmt::format("<p class=\"note\" id=\"measured-note\">The profile report has {} per-step "
                      "values for a program of {} steps: only its measured peak is drawn (dashed "
                      "line).</p>\n",
                      m->during.size(), n));
  }
  if (m && m->steps >= 0 && m->steps != n)
    add(
        fmt::format("<p class=\"note\">The profile measured a program of {} steps; this one has "
                    "{}: was it made with the same --plan?</p>\n",
                    m->steps, n));
  if (c.columns < n)
    add(
        fmt::format("<p>{} steps in {} columns: each column shows the step of its range with the "
                    "most live bytes.</p>\n",
                    n, c.columns));

  // Chart.
  add("<h2>Memory over time</h2>\n");
  const int svg_w = static_cast<int>(Chart::kLeft + Chart::kWidth + 24);
  const int svg_h = static_cast<int>(Chart::kTop + Chart::kHeight + 44);
  add(
      fmt::format("<svg id=\"chart\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                  "role=\"img\">\n",
                  svg_w, svg_h, svg_w, svg_h));
  add(fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", svg_w,
                  svg_h));
  // Grid and y labels.
  for (int64_t b = 0; static_cast<double>(b) <= c.ymax; b += ytick) {
    double y = c.Y(b);
    add(
        fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                    "stroke=\"#e0e0e0\"/>\n",
                    Chart::kLeft, y, Chart::kLeft + Chart::kWidth, y));
    add(fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                    Chart::kLeft - 6, y + 4, Escape(FormatBytes(b))));
    if (b > INT64_MAX - ytick) break;
  }
  // X labels: step indices.
  if (n > 0) {
    int64_t xtick = TickStep(std::max(n - 1, 1));
    for (int64_t s = 0; s < n; s += xtick) {
      int col = col_of[s];
      add(fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                      c.X(col), Chart::kTop + Chart::kHeight + 16, s));
    }
  }
  add(fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">step</text>\n",
                  Chart::kLeft + Chart::kWidth / 2, Chart::kTop + Chart::kHeight + 34));
  // Bands.
  std::vector<int64_t> below(c.columns, 0);
  for (TensorKind kind : kStackOrder) {
    int k = static_cast<int>(kind);
    bool any = false;
    for (int col = 0; col < c.columns && !any; ++col) any = by_kind[rep[col]][k] > 0;
    if (!any) continue;
    std::string d;
    for (int col = 0; col < c.columns; ++col)
      d += (col ? " L" : "M") + Pt(c.X(col), c.Y(below[col] + by_kind[rep[col]][k]));
    for (int col = c.columns - 1; col >= 0; --col) d += " L" + Pt(c.X(col), c.Y(below[col]));
    d += " Z";
    add(
        fmt::format("<path class=\"band\" data-kind=\"{}\" data-peak-bytes=\"{}\" fill=\"{}\" "
                    "fill-opacity=\"0.85\" stroke=\"none\" d=\"{}\"><title>{}</title></path>\n",
                    TensorKindName(kind), peak_kind[k], KindColor(kind), d, TensorKindName(kind)));
    for (int col = 0; col < c.columns; ++col) below[col] += by_kind[rep[col]][k];
  }
  // The baseline, faintly behind.
  if (!baseline_col.empty()) {
    std::string pts;
    for (int col = 0; col < c.columns; ++col)
      pts += (col ? " " : "") + Pt(c.X(col), c.Y(baseline_col[col]));
    add(
        fmt::format("<polyline id=\"baseline\" data-peak-bytes=\"{}\" fill=\"none\" "
                    "stroke=\"#b39ddb\" stroke-width=\"2\" shape-rendering=\"crispEdges\" "
                    "points=\"{}\"/>\n",
                    baseline_peak, pts));
  }
  // Predicted total.
  if (c.columns > 0) {
    std::string pts;
    for (int col = 0; col < c.columns; ++col)
      pts += (col ? " " : "") + Pt(c.X(col), c.Y(sim.live_during[rep[col]]));
    add("<polyline id=\"predicted\" fill=\"none\" stroke=\"#222222\" stroke-width=\"1.5\" "
        "points=\"" +
        pts + "\"/>\n");
  }
  if (reserved_curve) {
    std::string pts;
    for (int col = 0; col < c.columns; ++col)
      pts += (col ? " " : "") + Pt(c.X(col), c.Y(reserved_col[col]));
    add(fmt::format(
        "<g id=\"reserved\" data-peak-bytes=\"{}\"><polyline fill=\"none\" stroke=\"#d81b60\" "
        "stroke-width=\"2\" shape-rendering=\"crispEdges\" points=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d81b60\">reserved {} (steady state)</text>"
        "</g>\n",
        reserved_peak, pts, Chart::kLeft + 4, c.Y(reserved_peak) - 4,
        Escape(FormatBytes(reserved_peak))));
  }
  if (in.device_total_bytes >= 0) {
    add(LevelLine(
        fmt::format("id=\"device\" data-bytes=\"{}\" data-device=\"{}\"", in.device_total_bytes,
                    Escape(in.device_name)),
        c.Y(in.device_total_bytes), "#17becf", "#0e7c86", /*label_right=*/false,
        fmt::format("device total {} on {}{}", FormatBytes(in.device_total_bytes), in.device_name,
                    in.device_estimate.empty() ? "" : " (estimate: " + in.device_estimate + ")")));
  }
  if (measured_curve) {
    std::string pts;
    for (int col = 0; col < c.columns; ++col)
      pts += (col ? " " : "") + Pt(c.X(col), c.Y(measured_col[col]));
    add("<polyline id=\"measured\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"2,2\" points=\"" +
        pts + "\"/>\n");
  }
  if (m) {
    double y = c.Y(m->peak_bytes);
    add(
        fmt::format("<g id=\"measured-peak\" data-bytes=\"{}\" data-step=\"{}\">"
                    "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                    "stroke=\"#d62728\" stroke-dasharray=\"6,4\"/>"
                    "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d62728\">"
                    "measured peak {}</text></g>\n",
                    m->peak_bytes, m->peak_step, Chart::kLeft, y, Chart::kLeft + Chart::kWidth, y,
                    Chart::kLeft + 4, y - 4, Escape(FormatBytes(m->peak_bytes))));
  }
  if (in.budget_bytes >= 0) {
    add(LevelLine(fmt::format("id=\"budget\" data-bytes=\"{}\"", in.budget_bytes),
                  c.Y(in.budget_bytes), "#ff7f0e", "#b35900", /*label_right=*/true,
                  "budget " + FormatBytes(in.budget_bytes)));
  }
  // The peak.
  {
    int col = peak >= 0 && peak < n ? col_of[peak] : 0;
    double x = c.columns > 0 ? c.X(col) : Chart::kLeft, y = c.Y(sim.peak_bytes);
    std::string label = fmt::format("peak {} at step {}{}", FormatBytes(sim.peak_bytes), peak,
                                    peak_op.empty() ? "" : " (" + peak_op + ")");
    bool right = x > Chart::kLeft + Chart::kWidth * 0.6;
    add(
        fmt::format("<g id=\"peak\" data-step=\"{}\" data-op=\"{}\" data-bytes=\"{}\">"
                    "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                    "stroke=\"#000000\" stroke-dasharray=\"3,3\"/>"
                    "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#000000\"/>"
                    "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">{}</text></g>\n",
                    peak, Escape(peak_op), sim.peak_bytes, x, y, x, Chart::kTop + Chart::kHeight, x,
                    y, right ? x - 6 : x + 6, std::max(y - 6, Chart::kTop + 10),
                    right ? "end" : "start", Escape(label)));
  }
  add("</svg>\n");
  // Legend, as HTML.
  add("<p id=\"legend\">");
  for (TensorKind kind : kStackOrder) {
    int k = static_cast<int>(kind);
    bool any = false;
    for (int col = 0; col < c.columns && !any; ++col) any = by_kind[rep[col]][k] > 0;
    if (any)
      add(fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>{} &nbsp; ",
                      KindColor(kind), TensorKindName(kind)));
  }
  add("<span class=\"swatch\" style=\"background:#222222\"></span>predicted total");
  if (!baseline_col.empty())
    add(" &nbsp; <span class=\"swatch\" style=\"background:#b39ddb\"></span>baseline (without "
        "the plan, scaled to the same width)");
  if (in.budget_bytes >= 0)
    add(" &nbsp; <span class=\"swatch\" style=\"background:#ff7f0e\"></span>budget");
  if (reserved_curve)
    add(" &nbsp; <span class=\"swatch\" style=\"background:#d81b60\"></span>reserved by "
        "PyTorch's caching allocator (second step: it starts with the first's segments)");
  if (in.device_total_bytes >= 0)
    add(fmt::format(
        " &nbsp; <span class=\"swatch\" style=\"background:#17becf\"></span>device total "
        "(reserved + CUDA context{})",
        in.device_estimate.empty() ? "" : Escape("; an estimate: " + in.device_estimate)));
  if (measured_curve)
    add(" &nbsp; <span class=\"swatch\" style=\"background:#d62728\"></span>measured");
  else if (m)
    add(" &nbsp; <span class=\"swatch\" style=\"background:#d62728\"></span>measured peak");
  add("</p>\n");

  // The peak by kind.
  add("<h2>At the peak, by kind</h2>\n<table id=\"peak-by-kind\">\n"
      "<tr><th>kind</th><th>bytes</th><th></th></tr>\n");
  int64_t peak_sum = 0;
  for (TensorKind kind : kStackOrder) {
    int k = static_cast<int>(kind);
    peak_sum += peak_kind[k];
    if (peak_kind[k] == 0) continue;
    add(
        fmt::format("<tr data-kind=\"{}\" data-bytes=\"{}\"><td>{}</td><td class=\"n\">{}</td>"
                    "<td>{}</td></tr>\n",
                    TensorKindName(kind), peak_kind[k], TensorKindName(kind), peak_kind[k],
                    Escape(FormatBytes(peak_kind[k]))));
  }
  add(fmt::format("<tr><th>total</th><td class=\"n\">{}</td><td>{}</td></tr>\n</table>\n", peak_sum,
                  Escape(FormatBytes(peak_sum))));

  // Live at the peak.
  const int top = std::max(in.top, 0);
  ojson live = LiveAtPeakJson(g, sim, top);
  add(fmt::format("<h2>Alive at the peak ({} of {} buffers, largest first)</h2>\n", live.size(),
                  sim.live_at_peak.size()));
  add("<table id=\"live-at-peak\">\n<tr><th>tensor</th><th>bytes</th><th></th><th>kind</th>"
      "<th>producer</th><th>scope</th></tr>\n");
  for (const ojson& e : live) {
    std::string name = e["tensor"].get<std::string>();
    if (e.contains("held_by")) name += " (held by " + e["held_by"].get<std::string>() + ")";
    int64_t b = e["bytes"].get<int64_t>();
    add(fmt::format(
        "<tr data-bytes=\"{}\"><td>{}</td><td class=\"n\">{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
        b, Escape(name), b, Escape(FormatBytes(b)), Escape(e["kind"].get<std::string>()),
        Escape(e["producer"].is_null() ? "" : e["producer"].get<std::string>()),
        Escape(e["scope"].get<std::string>())));
  }
  add("</table>\n");

  // The plan.
  if (in.plan) {
    const Plan& plan = *in.plan;
    add(fmt::format("<h2>Plan {}</h2>\n", Escape(in.plan_file)));
    add(fmt::format(
        "<p>budget {}, {}; predicted peak {} (baseline {}), recompute cost {:.4g} {}</p>\n",
        Escape(Bytes(plan.budget_bytes)), plan.feasible ? "fits" : "does not fit",
        Escape(Bytes(plan.predicted.peak_bytes)), Escape(Bytes(plan.predicted.baseline_peak_bytes)),
        plan.predicted.recompute_cost, Escape(plan.predicted.cost_unit)));
    if (!plan.modules.empty()) {
      add("<p>Modules to wrap in checkpoint():</p>\n<ul id=\"modules\">\n");
      for (const std::string& mod : plan.modules) add("<li>" + Escape(mod) + "</li>\n");
      add("</ul>\n");
    }
    add(fmt::format("<h3>Recomputed ({} tensors)</h3>\n", plan.recomputed.size()));
    add("<table id=\"recomputed\">\n<tr><th>tensor</th><th>bytes</th><th>kind</th>"
        "<th>producer</th><th>scope</th></tr>\n");
    for (int t : plan.recomputed) {
      const Tensor& ten = g.tensors[t];
      const Op* prod = ten.producer >= 0 ? &g.ops[ten.producer] : nullptr;
      add(
          fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td>"
                      "</tr>\n",
                      Escape(ten.id), ten.bytes, TensorKindName(ten.kind),
                      Escape(prod ? prod->id : ""), Escape(prod ? prod->scope : "")));
    }
    add("</table>\n");
  }
  add(fmt::format("<p>memplan {}</p>\n</body>\n</html>\n", Escape(MemplanVersion())));
  *html = std::move(o);
  return true;
}

}  // namespace memplan
