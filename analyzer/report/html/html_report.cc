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

using KindBytes = std::array<int64_t, kNumTensorKinds>;

// One page: the input, the chart's columns and scale, the HTML written so far.
// Render() writes the sections in page order.
class ReportPage {
 public:
  ReportPage(const HtmlReportInput& in, std::vector<KindBytes> by_kind)
      : in_(in),
        g_(in.jg->graph),
        p_(*in.program),
        sim_(*in.sim),
        m_(in.measured),
        n_(static_cast<int>(p_.steps.size())),
        by_kind_(std::move(by_kind)) {}

  std::string Render() {
    measured_curve_ = m_ && !m_->during.empty() && static_cast<int>(m_->during.size()) == n_;
    LayOutColumns();
    BaselineColumns();
    ReservedColumns();
    ScaleY();
    peak_ = sim_.peak_step;
    peak_op_ = StepOp(g_, p_, peak_);
    peak_kind_ = peak_ >= 0 ? by_kind_[peak_] : sim_.peak_by_kind;

    const std::string title =
        fmt::format("memplan report: {}", g_.name.empty() ? std::string("(unnamed)") : g_.name);
    Add(PageHead(title, ".note{color:#8a5a00}\n"));
    Summary();
    Notes();
    Add("<h2>Memory over time</h2>\n");
    ChartFrame();
    Bands();
    Curves();
    LevelLines();
    PeakMark();
    Add("</svg>\n");
    Legend();
    PeakByKindTable();
    LiveAtPeakTable();
    if (in_.plan) PlanSection();
    Add(fmt::format("<p>memplan {}</p>\n</body>\n</html>\n", Escape(MemplanVersion())));
    return std::move(o_);
  }

 private:
  void Add(const std::string& s) { o_ += s; }

  // Columns: each shows the step of its bucket with the most live bytes, so
  // the peak step is always drawn.
  void LayOutColumns() {
    c_.columns = std::min(n_, std::max(2, in_.max_columns));
    rep_.assign(c_.columns, 0);
    col_of_.assign(n_, 0);
    measured_col_.assign(c_.columns, 0);
    for (int col = 0; col < c_.columns; ++col) {
      int from = static_cast<int>(static_cast<int64_t>(col) * n_ / c_.columns);
      int to = static_cast<int>(static_cast<int64_t>(col + 1) * n_ / c_.columns);
      rep_[col] = from;
      for (int s = from; s < to; ++s) {
        col_of_[s] = col;
        if (sim_.live_during[s] > sim_.live_during[rep_[col]]) rep_[col] = s;
        if (measured_curve_) measured_col_[col] = std::max(measured_col_[col], m_->during[s]);
      }
    }
  }

  // The baseline in the same columns: its steps scaled to the chart's width.
  void BaselineColumns() {
    const std::vector<int64_t>& base = in_.baseline_during;
    if (base.empty() || c_.columns <= 0) return;
    baseline_col_.assign(c_.columns, -1);
    const int64_t nb = static_cast<int64_t>(base.size());
    for (int64_t s = 0; s < nb; ++s) {
      int col = static_cast<int>(s * c_.columns / nb);
      baseline_col_[col] = std::max(baseline_col_[col], base[s]);
      baseline_peak_ = std::max(baseline_peak_, base[s]);
    }
    for (int col = 0; col < c_.columns; ++col)  // fewer steps than columns: hold the value
      if (baseline_col_[col] < 0) baseline_col_[col] = col > 0 ? baseline_col_[col - 1] : base[0];
  }

  // Reserved bytes in the same columns (the max of each column's steps).
  void ReservedColumns() {
    reserved_curve_ = static_cast<int>(in_.reserved_during.size()) == n_ && n_ > 0;
    if (!reserved_curve_) return;
    reserved_col_.assign(c_.columns, 0);
    for (int s = 0; s < n_; ++s) {
      reserved_col_[col_of_[s]] = std::max(reserved_col_[col_of_[s]], in_.reserved_during[s]);
      reserved_peak_ = std::max(reserved_peak_, in_.reserved_during[s]);
    }
  }

  // The y axis reaches the highest value drawn, rounded up to a tick.
  void ScaleY() {
    int64_t top_bytes = std::max<int64_t>(sim_.peak_bytes, 1);
    if (m_) top_bytes = std::max(top_bytes, m_->peak_bytes);
    for (int64_t b : measured_col_) top_bytes = std::max(top_bytes, b);
    if (!baseline_col_.empty()) top_bytes = std::max(top_bytes, baseline_peak_);
    if (in_.budget_bytes >= 0) top_bytes = std::max(top_bytes, in_.budget_bytes);
    if (reserved_curve_) top_bytes = std::max(top_bytes, reserved_peak_);
    if (in_.device_total_bytes >= 0) top_bytes = std::max(top_bytes, in_.device_total_bytes);
    ytick_ = ByteTickStep(top_bytes);
    c_.ymax = static_cast<double>((top_bytes + ytick_ - 1) / ytick_ * ytick_);
  }

  void Row(const std::string& k, const std::string& v) {
    Add("<tr><th>" + Escape(k) + "</th><td>" + Escape(v) + "</td></tr>\n");
  }

  void Summary() {
    Add("<table id=\"summary\">\n");
    Row("graph",
        fmt::format("{}: {} ops, {} tensors ({})", in_.jg->file, g_.ops.size(), g_.tensors.size(),
                    in_.jg->lowered ? "lowered from forward-only" : "joint"));
    if (g_.outputs_held) Row("loop", OutputsHeldPhrase(g_.outputs_held));
    Row("program", fmt::format("{}, {} steps", in_.program_label, n_));
    Row("predicted peak",
        FormatBytesExact(sim_.peak_bytes) + " at " + StepWhat(g_, p_, sim_, peak_));
    Row("resident", FormatBytesExact(sim_.start_bytes));
    if (m_) {
      Row("measured peak",
          fmt::format("{} at {} ({}{}{}, {})", FormatBytesExact(m_->peak_bytes),
                      StepWhat(g_, p_, sim_, m_->peak_step),
                      m_->backend.empty() ? "backend ?" : m_->backend,
                      m_->device_name.empty() ? "" : " ", m_->device_name, m_->file));
      int64_t diff = m_->peak_bytes - sim_.peak_bytes;
      Row("measured - predicted",
          fmt::format("{}{} bytes ({:+.3f}%)", diff >= 0 ? "+" : "", diff,
                      100.0 * static_cast<double>(diff) /
                          static_cast<double>(std::max<int64_t>(sim_.peak_bytes, 1))));
    }
    Add("</table>\n");
  }

  // What the page could not draw as asked, and how steps map to columns.
  void Notes() {
    if (m_ && !measured_curve_) {
      if (m_->during.empty())
        Add("<p class=\"note\" id=\"measured-note\">The profile report carries no per-step bytes: "
            "only its measured peak is drawn (dashed line).</p>\n");
      else
        Add(
            fmt::format("<p class=\"note\" id=\"measured-note\">The profile report has {} per-step "
                        "values for a program of {} steps: only its measured peak is drawn (dashed "
                        "line).</p>\n",
                        m_->during.size(), n_));
    }
    if (m_ && m_->steps >= 0 && m_->steps != n_)
      Add(
          fmt::format("<p class=\"note\">The profile measured a program of {} steps; this one has "
                      "{}: was it made with the same --plan?</p>\n",
                      m_->steps, n_));
    if (c_.columns < n_)
      Add(
          fmt::format("<p>{} steps in {} columns: each column shows the step of its range with the "
                      "most live bytes.</p>\n",
                      n_, c_.columns));
  }

  // The <svg> element, its background, the grid with byte labels and the
  // step labels.
  void ChartFrame() {
    const int svg_w = static_cast<int>(Chart::kLeft + Chart::kWidth + 24);
    const int svg_h = static_cast<int>(Chart::kTop + Chart::kHeight + 44);
    Add(
        fmt::format("<svg id=\"chart\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                    "role=\"img\">\n",
                    svg_w, svg_h, svg_w, svg_h));
    Add(fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", svg_w,
                    svg_h));
    // Grid and y labels.
    for (int64_t b = 0; static_cast<double>(b) <= c_.ymax; b += ytick_) {
      double y = c_.Y(b);
      Add(
          fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                      "stroke=\"#e0e0e0\"/>\n",
                      Chart::kLeft, y, Chart::kLeft + Chart::kWidth, y));
      Add(fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                      Chart::kLeft - 6, y + 4, Escape(FormatBytes(b))));
      if (b > INT64_MAX - ytick_) break;
    }
    // X labels: step indices.
    if (n_ > 0) {
      int64_t xtick = TickStep(std::max(n_ - 1, 1));
      for (int64_t s = 0; s < n_; s += xtick) {
        int col = col_of_[s];
        Add(fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                        c_.X(col), Chart::kTop + Chart::kHeight + 16, s));
      }
    }
    Add(fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">step</text>\n",
                    Chart::kLeft + Chart::kWidth / 2, Chart::kTop + Chart::kHeight + 34));
  }

  // Whether kind k has bytes in any column (and so a band and a legend entry).
  bool KindDrawn(int k) const {
    bool any = false;
    for (int col = 0; col < c_.columns && !any; ++col) any = by_kind_[rep_[col]][k] > 0;
    return any;
  }

  // The stacked bands, one per tensor kind, in kStackOrder.
  void Bands() {
    std::vector<int64_t> below(c_.columns, 0);
    for (TensorKind kind : kStackOrder) {
      int k = static_cast<int>(kind);
      if (!KindDrawn(k)) continue;
      std::string d;
      for (int col = 0; col < c_.columns; ++col)
        d += (col ? " L" : "M") + Pt(c_.X(col), c_.Y(below[col] + by_kind_[rep_[col]][k]));
      for (int col = c_.columns - 1; col >= 0; --col) d += " L" + Pt(c_.X(col), c_.Y(below[col]));
      d += " Z";
      Add(fmt::format(
          "<path class=\"band\" data-kind=\"{}\" data-peak-bytes=\"{}\" fill=\"{}\" "
          "fill-opacity=\"0.85\" stroke=\"none\" d=\"{}\"><title>{}</title></path>\n",
          TensorKindName(kind), peak_kind_[k], KindColor(kind), d, TensorKindName(kind)));
      for (int col = 0; col < c_.columns; ++col) below[col] += by_kind_[rep_[col]][k];
    }
  }

  // A polyline's points: one per column, at the bytes `at(col)`.
  template <class F>
  std::string Points(F at) const {
    std::string pts;
    for (int col = 0; col < c_.columns; ++col)
      pts += (col ? " " : "") + Pt(c_.X(col), c_.Y(at(col)));
    return pts;
  }

  // The baseline (faintly behind), the predicted total, reserved bytes, the
  // device total and the measured curve.
  void Curves() {
    if (!baseline_col_.empty()) {
      Add(
          fmt::format("<polyline id=\"baseline\" data-peak-bytes=\"{}\" fill=\"none\" "
                      "stroke=\"#b39ddb\" stroke-width=\"2\" shape-rendering=\"crispEdges\" "
                      "points=\"{}\"/>\n",
                      baseline_peak_, Points([&](int col) { return baseline_col_[col]; })));
    }
    if (c_.columns > 0) {
      Add("<polyline id=\"predicted\" fill=\"none\" stroke=\"#222222\" stroke-width=\"1.5\" "
          "points=\"" +
          Points([&](int col) { return sim_.live_during[rep_[col]]; }) + "\"/>\n");
    }
    if (reserved_curve_) {
      Add(fmt::format(
          "<g id=\"reserved\" data-peak-bytes=\"{}\"><polyline fill=\"none\" stroke=\"#d81b60\" "
          "stroke-width=\"2\" shape-rendering=\"crispEdges\" points=\"{}\"/>"
          "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d81b60\">reserved {} (steady state)</text>"
          "</g>\n",
          reserved_peak_, Points([&](int col) { return reserved_col_[col]; }), Chart::kLeft + 4,
          c_.Y(reserved_peak_) - 4, Escape(FormatBytes(reserved_peak_))));
    }
    if (in_.device_total_bytes >= 0) DeviceLine();
    if (measured_curve_) {
      Add("<polyline id=\"measured\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" "
          "stroke-dasharray=\"2,2\" points=\"" +
          Points([&](int col) { return measured_col_[col]; }) + "\"/>\n");
    }
  }

  void DeviceLine() {
    Add(LevelLine(
        fmt::format("id=\"device\" data-bytes=\"{}\" data-device=\"{}\"", in_.device_total_bytes,
                    Escape(in_.device_name)),
        c_.Y(in_.device_total_bytes), "#17becf", "#0e7c86", /*label_right=*/false,
        fmt::format(
            "device total {} on {}{}", FormatBytes(in_.device_total_bytes), in_.device_name,
            in_.device_estimate.empty() ? "" : " (estimate: " + in_.device_estimate + ")")));
  }

  // The measured peak and the budget, across the chart.
  void LevelLines() {
    if (m_) {
      double y = c_.Y(m_->peak_bytes);
      Add(
          fmt::format("<g id=\"measured-peak\" data-bytes=\"{}\" data-step=\"{}\">"
                      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                      "stroke=\"#d62728\" stroke-dasharray=\"6,4\"/>"
                      "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d62728\">"
                      "measured peak {}</text></g>\n",
                      m_->peak_bytes, m_->peak_step, Chart::kLeft, y, Chart::kLeft + Chart::kWidth,
                      y, Chart::kLeft + 4, y - 4, Escape(FormatBytes(m_->peak_bytes))));
    }
    if (in_.budget_bytes >= 0) {
      Add(LevelLine(fmt::format("id=\"budget\" data-bytes=\"{}\"", in_.budget_bytes),
                    c_.Y(in_.budget_bytes), "#ff7f0e", "#b35900", /*label_right=*/true,
                    "budget " + FormatBytes(in_.budget_bytes)));
    }
  }

  // The peak: a dashed drop line, a dot and its label.
  void PeakMark() {
    int col = peak_ >= 0 && peak_ < n_ ? col_of_[peak_] : 0;
    double x = c_.columns > 0 ? c_.X(col) : Chart::kLeft, y = c_.Y(sim_.peak_bytes);
    std::string label = fmt::format("peak {} at step {}{}", FormatBytes(sim_.peak_bytes), peak_,
                                    peak_op_.empty() ? "" : " (" + peak_op_ + ")");
    bool right = x > Chart::kLeft + Chart::kWidth * 0.6;
    Add(
        fmt::format("<g id=\"peak\" data-step=\"{}\" data-op=\"{}\" data-bytes=\"{}\">"
                    "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                    "stroke=\"#000000\" stroke-dasharray=\"3,3\"/>"
                    "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#000000\"/>"
                    "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">{}</text></g>\n",
                    peak_, Escape(peak_op_), sim_.peak_bytes, x, y, x, Chart::kTop + Chart::kHeight,
                    x, y, right ? x - 6 : x + 6, std::max(y - 6, Chart::kTop + 10),
                    right ? "end" : "start", Escape(label)));
  }

  // The legend, as HTML below the chart.
  void Legend() {
    Add("<p id=\"legend\">");
    for (TensorKind kind : kStackOrder)
      if (KindDrawn(static_cast<int>(kind)))
        Add(fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>{} &nbsp; ",
                        KindColor(kind), TensorKindName(kind)));
    Add("<span class=\"swatch\" style=\"background:#222222\"></span>predicted total");
    if (!baseline_col_.empty())
      Add(" &nbsp; <span class=\"swatch\" style=\"background:#b39ddb\"></span>baseline (without "
          "the plan, scaled to the same width)");
    if (in_.budget_bytes >= 0)
      Add(" &nbsp; <span class=\"swatch\" style=\"background:#ff7f0e\"></span>budget");
    if (reserved_curve_)
      Add(" &nbsp; <span class=\"swatch\" style=\"background:#d81b60\"></span>reserved by "
          "PyTorch's caching allocator (second step: it starts with the first's segments)");
    if (in_.device_total_bytes >= 0)
      Add(fmt::format(
          " &nbsp; <span class=\"swatch\" style=\"background:#17becf\"></span>device total "
          "(reserved + CUDA context{})",
          in_.device_estimate.empty() ? "" : Escape("; an estimate: " + in_.device_estimate)));
    if (measured_curve_)
      Add(" &nbsp; <span class=\"swatch\" style=\"background:#d62728\"></span>measured");
    else if (m_)
      Add(" &nbsp; <span class=\"swatch\" style=\"background:#d62728\"></span>measured peak");
    Add("</p>\n");
  }

  void PeakByKindTable() {
    Add("<h2>At the peak, by kind</h2>\n<table id=\"peak-by-kind\">\n"
        "<tr><th>kind</th><th>bytes</th><th></th></tr>\n");
    int64_t peak_sum = 0;
    for (TensorKind kind : kStackOrder) {
      int k = static_cast<int>(kind);
      peak_sum += peak_kind_[k];
      if (peak_kind_[k] == 0) continue;
      Add(
          fmt::format("<tr data-kind=\"{}\" data-bytes=\"{}\"><td>{}</td><td class=\"n\">{}</td>"
                      "<td>{}</td></tr>\n",
                      TensorKindName(kind), peak_kind_[k], TensorKindName(kind), peak_kind_[k],
                      Escape(FormatBytes(peak_kind_[k]))));
    }
    Add(fmt::format("<tr><th>total</th><td class=\"n\">{}</td><td>{}</td></tr>\n</table>\n",
                    peak_sum, Escape(FormatBytes(peak_sum))));
  }

  void LiveAtPeakTable() {
    const int top = std::max(in_.top, 0);
    ojson live = LiveAtPeakJson(g_, sim_, top);
    Add(fmt::format("<h2>Alive at the peak ({} of {} buffers, largest first)</h2>\n", live.size(),
                    sim_.live_at_peak.size()));
    Add("<table id=\"live-at-peak\">\n<tr><th>tensor</th><th>bytes</th><th></th><th>kind</th>"
        "<th>producer</th><th>scope</th></tr>\n");
    for (const ojson& e : live) {
      std::string name = e["tensor"].get<std::string>();
      if (e.contains("held_by")) name += " (held by " + e["held_by"].get<std::string>() + ")";
      int64_t b = e["bytes"].get<int64_t>();
      Add(fmt::format(
          "<tr data-bytes=\"{}\"><td>{}</td><td class=\"n\">{}</td><td>{}</td>"
          "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
          b, Escape(name), b, Escape(FormatBytes(b)), Escape(e["kind"].get<std::string>()),
          Escape(e["producer"].is_null() ? "" : e["producer"].get<std::string>()),
          Escape(e["scope"].get<std::string>())));
    }
    Add("</table>\n");
  }

  // The plan: its figures, the modules to wrap and the recompute list.
  void PlanSection() {
    const Plan& plan = *in_.plan;
    Add(fmt::format("<h2>Plan {}</h2>\n", Escape(in_.plan_file)));
    Add(fmt::format(
        "<p>budget {}, {}; predicted peak {} (baseline {}), recompute cost {:.4g} {}</p>\n",
        Escape(FormatBytesExact(plan.budget_bytes)), plan.feasible ? "fits" : "does not fit",
        Escape(FormatBytesExact(plan.predicted.peak_bytes)),
        Escape(FormatBytesExact(plan.predicted.baseline_peak_bytes)), plan.predicted.recompute_cost,
        Escape(plan.predicted.cost_unit)));
    if (!plan.modules.empty()) {
      Add("<p>Modules to wrap in checkpoint():</p>\n<ul id=\"modules\">\n");
      for (const std::string& mod : plan.modules) Add("<li>" + Escape(mod) + "</li>\n");
      Add("</ul>\n");
    }
    Add(fmt::format("<h3>Recomputed ({} tensors)</h3>\n", plan.recomputed.size()));
    Add("<table id=\"recomputed\">\n<tr><th>tensor</th><th>bytes</th><th>kind</th>"
        "<th>producer</th><th>scope</th></tr>\n");
    for (int t : plan.recomputed) {
      const Tensor& ten = g_.tensors[t];
      const Op* prod = ten.producer >= 0 ? &g_.ops[ten.producer] : nullptr;
      Add(
          fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td>"
                      "</tr>\n",
                      Escape(ten.id), ten.bytes, TensorKindName(ten.kind),
                      Escape(prod ? prod->id : ""), Escape(prod ? prod->scope.str() : "")));
    }
    Add("</table>\n");
  }

  const HtmlReportInput& in_;
  const Graph& g_;
  const Program& p_;
  const SimResult& sim_;
  const MeasuredProfile* m_;
  const int n_;
  const std::vector<KindBytes> by_kind_;
  Chart c_;
  std::vector<int> rep_, col_of_;  // the step each column shows; the column of each step
  bool measured_curve_ = false, reserved_curve_ = false;
  std::vector<int64_t> measured_col_, baseline_col_, reserved_col_;
  int64_t baseline_peak_ = 0, reserved_peak_ = 0, ytick_ = 1;
  int peak_ = -1;
  std::string peak_op_;
  KindBytes peak_kind_{};
  std::string o_;
};

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
  const int n = static_cast<int>(p.steps.size());
  if (static_cast<int>(sim.live_during.size()) != n) {
    *err = "html report: the simulation does not match the program";
    return false;
  }
  std::vector<KindBytes> by_kind = LiveBytesByKind(g, p, sim);
  for (int s = 0; s < n; ++s) {
    int64_t sum = 0;
    for (int64_t b : by_kind[s]) sum += b;
    if (sum != sim.live_during[s]) {
      *err = fmt::format("html report: step {}: bands sum to {} bytes, the simulator says {}", s,
                         sum, sim.live_during[s]);
      return false;
    }
  }
  *html = ReportPage(in, std::move(by_kind)).Render();
  return true;
}

}  // namespace memplan
