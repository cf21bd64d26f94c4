// Tests of the HTML memory report (analyzer/report/html/html_report.h): well-formed,
// self-contained pages whose drawn numbers match the simulator's.
#include "analyzer/report/html/html_report.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/report/analyze_report.h"
#include "tests/test_util.h"

namespace memplan {
namespace {

JointGraph MustLoad(const std::string& name) {
  JointGraph jg;
  std::string err;
  bool ok = LoadJointGraph(std::string(MEMPLAN_SOURCE_DIR) + "/examples/" + name, {}, &jg, &err);
  INFO(err);
  REQUIRE(ok);
  return jg;
}

struct Page {
  JointGraph jg;
  Analysis a;
  std::string html;
};

Page Render(const std::string& name, const MeasuredProfile* measured = nullptr,
            int max_columns = 1200, AccumulationMode mode = AccumulationMode::kInplace) {
  Page p;
  p.jg = MustLoad(name);
  std::string err;
  REQUIRE(AnalyzeBaseline(p.jg.graph, mode, &p.a, &err));
  HtmlReportInput in;
  in.jg = &p.jg;
  in.program = &p.a.program;
  in.sim = &p.a.sim;
  in.program_label = "baseline";
  in.measured = measured;
  in.max_columns = max_columns;
  bool ok = RenderHtmlReport(in, &p.html, &err);
  INFO(err);
  REQUIRE(ok);
  return p;
}

// Every element opened is closed in order; "<x .../>" and <meta> stand alone.
std::string TagError(const std::string& html) {
  std::vector<std::string> open;
  for (size_t i = html.find('<'); i != std::string::npos; i = html.find('<', i + 1)) {
    size_t end = html.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    std::string tag = html.substr(i + 1, end - i - 1);
    if (tag.empty()) return "empty tag";
    if (tag[0] == '!') continue;
    bool closing = tag[0] == '/';
    std::string name = tag.substr(closing, tag.find_first_of(" />", closing) - closing);
    if (closing) {
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes <" + (open.empty() ? "" : open.back()) + ">";
      open.pop_back();
    } else if (tag.back() != '/' && name != "meta") {
      open.push_back(name);
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

// The integer value of attribute `attr` in the element starting at `from`.
int64_t AttrAt(const std::string& html, size_t from, const std::string& attr) {
  size_t end = html.find('>', from);
  size_t at = html.find(" " + attr + "=\"", from);
  REQUIRE(at < end);
  return std::stoll(html.substr(at + attr.size() + 3));
}

std::string StrAttrAt(const std::string& html, size_t from, const std::string& attr) {
  size_t at = html.find(" " + attr + "=\"", from);
  REQUIRE(at < html.find('>', from));
  size_t start = at + attr.size() + 3;
  return html.substr(start, html.find('"', start) - start);
}

// data-kind -> data-peak-bytes of each band.
std::map<std::string, int64_t> Bands(const std::string& html) {
  std::map<std::string, int64_t> out;
  for (size_t i = html.find("<path class=\"band\""); i != std::string::npos;
       i = html.find("<path class=\"band\"", i + 1))
    out[StrAttrAt(html, i, "data-kind")] = AttrAt(html, i, "data-peak-bytes");
  return out;
}

TEST_CASE("html report: well formed, self-contained, one chart") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json"}) {
    CAPTURE(name);
    Page p = Render(name);
    CHECK(TagError(p.html) == "");
    CHECK(Count(p.html, "<svg") == 1);
    CHECK(Count(p.html, "</svg>") == 1);
    CHECK(p.html.find("http") == std::string::npos);
    CHECK(p.html.find("<script") == std::string::npos);
    CHECK(p.html.find("<link") == std::string::npos);
    CHECK(p.html.find("url(") == std::string::npos);
    CHECK(p.html.rfind("<!DOCTYPE html>", 0) == 0);
  }
}

TEST_CASE("reports: source.outputs_held in the summary, the graph block and the page") {
  JointGraph jg = MustLoad("mlp.graph.json");
  Analysis a;
  std::string err;
  REQUIRE(AnalyzeBaseline(jg.graph, AccumulationMode::kInplace, &a, &err));
  auto page = [&] {
    HtmlReportInput in;
    in.jg = &jg;
    in.program = &a.program;
    in.sim = &a.sim;
    in.program_label = "baseline";
    std::string html;
    REQUIRE(RenderHtmlReport(in, &html, &err));
    return html;
  };
  // Not stated: no line, no row, null in JSON.
  CHECK(AnalyzeSummary(jg, a, 5).find("  loop  ") == std::string::npos);
  CHECK(GraphReportJson(jg)["outputs_held"].is_null());
  CHECK(page().find("<th>loop</th>") == std::string::npos);
  CHECK(LoopLine(jg.graph).empty());

  jg.graph.outputs_held = true;
  const std::string held = "output held through the backward (source.outputs_held)";
  CHECK(LoopLine(jg.graph) == "  loop      " + held + "\n");
  std::string summary = AnalyzeSummary(jg, a, 5);
  // Right after the graph line.
  CHECK(summary.find("tensors\n  loop      " + held + "\n  program   ") != std::string::npos);
  CHECK(GraphReportJson(jg)["outputs_held"] == true);
  CHECK(page().find("<tr><th>loop</th><td>" + held + "</td></tr>") != std::string::npos);

  jg.graph.outputs_held = false;
  const std::string freed = "output freed once the loss is computed (source.outputs_held false)";
  CHECK(LoopLine(jg.graph) == "  loop      " + freed + "\n");
  CHECK(AnalyzeSummary(jg, a, 5).find("\n  loop      " + freed + "\n") != std::string::npos);
  CHECK(GraphReportJson(jg)["outputs_held"] == false);
  CHECK(page().find("<tr><th>loop</th><td>" + freed + "</td></tr>") != std::string::npos);
}

TEST_CASE("html report: the peak, its op and the largest live tensor are shown") {
  Page p = Render("gpt_tiny.graph.json");
  const SimResult& sim = p.a.sim;
  REQUIRE(sim.peak_step >= 0);
  size_t peak = p.html.find("<g id=\"peak\"");
  REQUIRE(peak != std::string::npos);
  CHECK(AttrAt(p.html, peak, "data-step") == sim.peak_step);
  CHECK(AttrAt(p.html, peak, "data-bytes") == sim.peak_bytes);
  const std::string op = p.jg.graph.ops[p.a.program.steps[sim.peak_step].op].id;
  CHECK(StrAttrAt(p.html, peak, "data-op") == op);
  CHECK(p.html.find(std::to_string(sim.peak_bytes) + " bytes") != std::string::npos);
  auto live = LiveAtPeakJson(p.jg.graph, sim, 1);
  REQUIRE(live.size() == 1);
  size_t table = p.html.find("<table id=\"live-at-peak\">");
  REQUIRE(table != std::string::npos);
  size_t first_row = p.html.find("<tr data-bytes=", table);
  REQUIRE(first_row != std::string::npos);
  CHECK(AttrAt(p.html, first_row, "data-bytes") == live[0]["bytes"].get<int64_t>());
  CHECK(p.html.find("<td>" + live[0]["tensor"].get<std::string>() + "</td>", first_row) ==
        p.html.find("<td>", first_row));
}

TEST_CASE("html report: the bands sum to the predicted total at the peak step") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json"}) {
    for (AccumulationMode mode :
         {AccumulationMode::kInplace, AccumulationMode::kOutOfPlace, AccumulationMode::kDeferred}) {
      CAPTURE(name);
      CAPTURE(AccumulationModeName(mode));
      Page p = Render(name, nullptr, 1200, mode);
      std::map<std::string, int64_t> bands = Bands(p.html);
      int64_t sum = 0;
      for (const auto& [kind, bytes] : bands) sum += bytes;
      CHECK(sum == p.a.sim.peak_bytes);
      // Per kind, as the simulator's own snapshot at the peak.
      for (int k = 0; k < kNumTensorKinds; ++k) {
        const char* kind = TensorKindName(static_cast<TensorKind>(k));
        CAPTURE(kind);
        CHECK((bands.count(kind) ? bands[kind] : 0) == p.a.sim.peak_by_kind[k]);
      }
      // Every step: the stacked rows are the simulator's live bytes.
      auto rows = LiveBytesByKind(p.jg.graph, p.a.program, p.a.sim);
      REQUIRE(rows.size() == p.a.sim.live_during.size());
      for (size_t s = 0; s < rows.size(); ++s) {
        int64_t total = 0;
        for (int64_t b : rows[s]) total += b;
        CHECK(total == p.a.sim.live_during[s]);
      }
    }
  }
}

TEST_CASE("html report: deterministic, and bucketed columns keep the peak") {
  Page a = Render("gpt_tiny.graph.json");
  Page b = Render("gpt_tiny.graph.json");
  CHECK(a.html == b.html);
  Page small = Render("gpt_tiny.graph.json", nullptr, 10);
  CHECK(small.html.find("steps in 10 columns") != std::string::npos);
  CHECK(TagError(small.html) == "");
  int64_t sum = 0;
  for (const auto& [kind, bytes] : Bands(small.html)) sum += bytes;
  CHECK(sum == small.a.sim.peak_bytes);
  size_t line = small.html.find("<polyline id=\"predicted\"");
  REQUIRE(line != std::string::npos);
  std::string points = StrAttrAt(small.html, line, "points");
  CHECK(Count(points, ",") == 10);
}

TEST_CASE("html report: the measured peak, and a measured curve when given per step") {
  MeasuredProfile m;
  m.file = "p.json";
  m.peak_bytes = 123456789;
  m.peak_step = 3;
  Page p = Render("mlp.graph.json", &m);
  size_t line = p.html.find("<g id=\"measured-peak\"");
  REQUIRE(line != std::string::npos);
  CHECK(AttrAt(p.html, line, "data-bytes") == 123456789);
  CHECK(p.html.find("id=\"measured-note\"") != std::string::npos);
  CHECK(p.html.find("<polyline id=\"measured\"") == std::string::npos);
  CHECK(TagError(p.html) == "");

  Page base = Render("mlp.graph.json");
  m.during = base.a.sim.live_during;
  m.peak_bytes = base.a.sim.peak_bytes;
  Page q = Render("mlp.graph.json", &m);
  CHECK(q.html.find("<polyline id=\"measured\"") != std::string::npos);
  CHECK(q.html.find("id=\"measured-note\"") == std::string::npos);
  CHECK(TagError(q.html) == "");
}

TEST_CASE("html report: profile report errors name the file, the pointer and what was expected") {
  MeasuredProfile m;
  std::string err;
  const std::string good =
      R"({"format": "memplan.report/1", "command": "profile", "program": {"steps": 4},
          "backend": "cpu", "measured_peak_bytes": 100, "measured_peak_step": 2})";
  REQUIRE(ParseProfileReport(good, "p.json", &m, &err));
  CHECK(m.peak_bytes == 100);
  CHECK(m.peak_step == 2);
  CHECK(m.steps == 4);
  CHECK(m.during.empty());
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {"{", "p.json: not JSON"},
      {"[]", "p.json: (root): found an array; expected a memplan.report/1 object"},
      {R"({"format": "x"})", "p.json: /format: found \"x\"; expected \"memplan.report/1\""},
      {R"({"format": "memplan.report/1", "command": "analyze"})",
       "p.json: /command: found \"analyze\"; expected \"profile\""},
      {R"({"format": "memplan.report/1", "command": "profile", "measured_peak_bytes": "1"})",
       "p.json: /measured_peak_bytes: found \"1\"; expected the measured peak"},
      {R"({"format": "memplan.report/1", "command": "profile", "measured_peak_bytes": 1,
           "measured_peak_step": -2})",
       "p.json: /measured_peak_step: found -2; expected a step index"},
      {R"({"format": "memplan.report/1", "command": "profile", "measured_peak_bytes": 1,
           "measured_peak_step": 0, "measured_during": [1, -1]})",
       "p.json: /measured_during/1: found -1; expected an integer number of bytes"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    CHECK_FALSE(ParseProfileReport(c.text, "p.json", &m, &err));
    CAPTURE(err);
    CHECK(err.rfind(c.message, 0) == 0);
  }
}

TEST_CASE("html report: a device total with the default CUDA context is marked an estimate") {
  JointGraph jg = MustLoad("mlp.graph.json");
  Analysis a;
  std::string err;
  REQUIRE(AnalyzeBaseline(jg.graph, AccumulationMode::kInplace, &a, &err));
  HtmlReportInput in;
  in.jg = &jg;
  in.program = &a.program;
  in.sim = &a.sim;
  in.program_label = "baseline";
  in.device_total_bytes = 700 << 20;
  in.device_name = "h100";
  in.device_estimate = "the CUDA context, 600.00 MiB, is the default";
  std::string html;
  REQUIRE(RenderHtmlReport(in, &html, &err));
  CHECK(TagError(html) == "");
  size_t device = html.find("<g id=\"device\"");
  REQUIRE(device != std::string::npos);
  CHECK(html.find(">device total 700.00 MiB on h100 (estimate: the CUDA context, 600.00 MiB, is "
                  "the default)</text>") != std::string::npos);
  CHECK(html.find("device total (reserved + CUDA context; an estimate: the CUDA context, 600.00 "
                  "MiB, is the default)") != std::string::npos);
  // Given with --device-conf: no estimate.
  in.device_estimate.clear();
  REQUIRE(RenderHtmlReport(in, &html, &err));
  device = html.find("<g id=\"device\"");
  REQUIRE(device != std::string::npos);
  CHECK(html.find(">device total 700.00 MiB on h100</text>") != std::string::npos);
  CHECK(html.find("(estimate") == std::string::npos);
  CHECK(html.find("an estimate") == std::string::npos);
}

TEST_CASE("reports: default device constants are named in the JSON and the summary line") {
  alloc::DeviceMemory d;
  REQUIRE(alloc::FindDeviceMemory("h100", &d));
  alloc::DeviceTotal t = alloc::TotalOnDevice(d, 100 << 20);
  DeviceDefaults defaults = DeviceDefaultsOf(d);
  CHECK((defaults.context && defaults.capacity && defaults.workspace));
  nlohmann::ordered_json j = DeviceJson(d, t);
  CHECK(j["context_is_estimate"] == true);
  CHECK(j["capacity_is_preset"] == true);
  CHECK(j["workspace_is_default"] == true);
  CHECK(DeviceLine(d, t).find("CUDA context 600.00 MiB (estimate): fits") != std::string::npos);
  std::string err;
  REQUIRE(
      alloc::ParseDeviceConf("cuda_context=512MiB,capacity=80GiB,cublas_workspace=1MiB", &d, &err));
  t = alloc::TotalOnDevice(d, 100 << 20);
  j = DeviceJson(d, t);
  CHECK(j["context_is_estimate"] == false);
  CHECK(j["capacity_is_preset"] == false);
  CHECK(j["workspace_is_default"] == false);
  CHECK(DeviceLine(d, t).find("(estimate)") == std::string::npos);
}

TEST_CASE("html report: names are escaped, the plan's recompute list is shown") {
  JointGraph jg;
  jg.file = "odd<&>.json";
  jg.graph = testing::MustLower(R"({"format": "memplan.graph/1", "name": "n<a>me", "tensors": [
    {"id": "x", "shape": [2, 3], "dtype": "float32", "kind": "input"},
    {"id": "w&'q'", "shape": [3, 3], "dtype": "float32", "kind": "parameter"},
    {"id": "h<1>", "shape": [2, 3], "dtype": "float32"},
    {"id": "r\"2\"", "shape": [2, 3], "dtype": "float32"},
    {"id": "l", "shape": [], "dtype": "float32"}],
   "ops": [
    {"id": "fc<", "type": "linear", "inputs": ["x", "w&'q'"], "outputs": ["h<1>"],
     "scope": "b</td>"},
    {"id": "act", "type": "relu", "inputs": ["h<1>"], "outputs": ["r\"2\""]},
    {"id": "loss", "type": "sum", "inputs": ["r\"2\""], "outputs": ["l"]}],
   "outputs": ["l"]})");
  Analysis a;
  std::string err;
  REQUIRE(AnalyzeBaseline(jg.graph, AccumulationMode::kInplace, &a, &err));
  Plan plan;
  plan.recomputed = {jg.graph.FindTensor("h<1>")};
  plan.modules = {"b</td>"};
  HtmlReportInput in;
  in.jg = &jg;
  in.program = &a.program;
  in.sim = &a.sim;
  in.program_label = "plan <p>";
  in.plan = &plan;
  in.plan_file = "p<>.json";
  std::string html;
  REQUIRE(RenderHtmlReport(in, &html, &err));
  CHECK(TagError(html) == "");
  CHECK(html.find("h<1>") == std::string::npos);
  CHECK(html.find("b</td>") == std::string::npos);
  CHECK(html.find("<table id=\"recomputed\">") != std::string::npos);
  CHECK(html.find("<td>h&lt;1&gt;</td>") != std::string::npos);
  CHECK(html.find("<li>b&lt;/td&gt;</li>") != std::string::npos);
  CHECK(html.find("n&lt;a&gt;me") != std::string::npos);
  CHECK(html.find("p&lt;&gt;.json") != std::string::npos);
}

}  // namespace
}  // namespace memplan
