#include "analyzer/report/check.h"

#include <fmt/format.h>

#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>

#include "analyzer/base/enum_table.h"
#include "analyzer/base/file_io.h"
#include "analyzer/base/json_util.h"
#include "analyzer/base/units.h"
#include "analyzer/report/analyze_report.h"

namespace memplan {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxToleranceDecimals = 9;

}  // namespace

bool ParseTolerance(std::string_view text, Tolerance* out, std::string* err) {
  auto fail = [&] {
    *err = fmt::format(
        "invalid tolerance \"{}\"; expected a percentage like 2% or a fraction like 0.02 "
        "(from 0 to 1000%)",
        text);
    return false;
  };
  std::string_view number = text;
  bool percent = !number.empty() && number.back() == '%';
  if (percent) number.remove_suffix(1);
  size_t dot = number.find('.');
  std::string_view whole = number.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? "" : number.substr(dot + 1);
  auto digits = [](std::string_view s) {
    for (char c : s)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
  };
  if (number.empty() || (whole.empty() && frac.empty()) || !digits(whole) || !digits(frac) ||
      whole.size() > 6 || frac.size() > kMaxToleranceDecimals)
    return fail();
  int64_t num = 0, den = 1;
  for (char c : whole) num = num * 10 + (c - '0');
  for (char c : frac) {
    num = num * 10 + (c - '0');
    den *= 10;
  }
  if (percent) den *= 100;
  if (num > 10 * den) return fail();  // over 1000%
  out->text = std::string(text);
  out->numerator = num;
  out->denominator = den;
  return true;
}

int64_t RegressionLimit(int64_t baseline_bytes, const Tolerance& tolerance) {
  __int128 growth =
      static_cast<__int128>(baseline_bytes) * tolerance.numerator / tolerance.denominator;
  __int128 limit = baseline_bytes + growth;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return limit > kMax ? kMax : static_cast<int64_t>(limit);
}

std::string BaselinePointer(std::string_view command) {
  if (command == "analyze" || command == "check" || command == "verify") return "/peak_bytes";
  if (command == "plan") return "/predicted/peak_bytes";
  if (command == "profile") return "/predicted_peak_bytes";
  return "";
}

bool ParseBaselineReport(const std::string& text, const std::string& file, BaselinePeak* out,
                         std::string* err) {
  using json_util::Found;
  nlohmann::json doc;
  if (!json_util::ParseJsonFile(text, file, "a memplan.report/1 JSON report", &doc, err))
    return false;
  if (!doc.is_object()) {
    *err =
        fmt::format("{}: (root): found {}; expected a memplan.report/1 object", file, Found(doc));
    return false;
  }
  auto format = doc.find("format");
  if (format == doc.end() || *format != "memplan.report/1") {
    *err = fmt::format("{}: /format: found {}; expected \"memplan.report/1\"", file,
                       format == doc.end() ? "nothing" : Found(*format));
    return false;
  }
  auto command = doc.find("command");
  std::string pointer;
  if (command != doc.end() && command->is_string())
    pointer = BaselinePointer(command->get<std::string>());
  if (pointer.empty()) {
    *err = fmt::format(
        "{}: /command: found {}; expected the report of analyze, check, plan, verify or profile",
        file, command == doc.end() ? "nothing" : Found(*command));
    return false;
  }
  const nlohmann::json* value = &doc;
  nlohmann::json::json_pointer ptr(pointer);
  if (doc.contains(ptr)) value = &doc.at(ptr);
  if (!doc.contains(ptr) || !json_util::IsNonNegativeInteger(*value)) {
    *err = fmt::format("{}: {}: found {}; expected the peak as an integer number of bytes", file,
                       pointer, doc.contains(ptr) ? Found(*value) : "nothing");
    return false;
  }
  out->file = file;
  out->command = command->get<std::string>();
  out->pointer = pointer;
  out->peak_bytes = value->get<int64_t>();
  out->graph.clear();
  auto graph = doc.find("graph");
  if (graph != doc.end() && graph->is_object() && graph->contains("name") &&
      (*graph)["name"].is_string())
    out->graph = (*graph)["name"].get<std::string>();
  return true;
}

bool LoadBaselineReport(const std::string& path, BaselinePeak* out, std::string* err) {
  std::string text;
  if (!ReadFile(path, &text, err)) return false;
  return ParseBaselineReport(text, path, out, err);
}

CheckResult EvaluateCheck(const CheckInput& in) {
  CheckResult r;
  if (!in.plan_valid) {
    CheckCondition c;
    c.name = "plan";
    c.condition = "the plan replays on the graph";
    c.bytes = false;
    c.expected_text = "valid";
    c.actual_text = in.plan_error;
    c.message = fmt::format("{}: invalid program: {}", in.plan_file, in.plan_error);
    r.conditions.push_back(c);
    r.passed = false;
    return r;  // no peak to compare
  }
  if (in.has_budget) {
    // The field the budget bounds and what the message calls it.
    const char* field = "peak_bytes";
    const char* what = "allocated peak";
    int64_t actual = in.peak_bytes;
    if (in.budget_of == BudgetOf::kReserved) {
      field = "reserved_peak_bytes";
      what = "reserved peak";
      actual = in.reserved_peak_bytes;
    } else if (in.budget_of == BudgetOf::kDevice) {
      field = "device_total_bytes";
      what = "device total";
      actual = in.device_total_bytes;
    }
    CheckCondition budget;
    budget.name = "budget";
    budget.condition = fmt::format("{} <= budget_bytes", field);
    budget.expected_bytes = in.budget_bytes;
    budget.actual_bytes = actual;
    budget.passed = actual <= in.budget_bytes;
    budget.message =
        budget.passed
            ? fmt::format("{} {} fits the budget {} ({} to spare)", what, FormatBytesExact(actual),
                          FormatBytesExact(in.budget_bytes), FormatBytes(in.budget_bytes - actual))
            : fmt::format("{} {} is over the budget {} by {}", what, FormatBytesExact(actual),
                          FormatBytesExact(in.budget_bytes),
                          FormatBytesExact(actual - in.budget_bytes));
    r.conditions.push_back(budget);
  }
  if (in.has_baseline) {
    r.limit_bytes = RegressionLimit(in.baseline.peak_bytes, in.tolerance);
    CheckCondition reg;
    reg.name = "regression";
    reg.condition = "peak_bytes <= baseline_peak_bytes + floor(baseline_peak_bytes * tolerance)";
    reg.expected_bytes = r.limit_bytes;
    reg.actual_bytes = in.peak_bytes;
    reg.passed = in.peak_bytes <= r.limit_bytes;
    int64_t delta = in.peak_bytes - in.baseline.peak_bytes;
    double pct = in.baseline.peak_bytes > 0 ? 100.0 * delta / in.baseline.peak_bytes : 0.0;
    reg.message = fmt::format(
        "peak {} bytes is {}{} bytes ({:+.3f}%) from the baseline {} bytes ({} {}), {} the "
        "limit {} bytes (tolerance {})",
        in.peak_bytes, delta >= 0 ? "+" : "", delta, pct, in.baseline.peak_bytes, in.baseline.file,
        in.baseline.pointer, reg.passed ? "within" : "over", r.limit_bytes, in.tolerance.text);
    r.conditions.push_back(reg);
  }
  for (const CheckCondition& c : r.conditions) r.passed = r.passed && c.passed;
  return r;
}

namespace {

constexpr EnumName<CheckFormat> kCheckFormats[] = {
    {CheckFormat::kText, "text"},
    {CheckFormat::kGithub, "github"},
    {CheckFormat::kMarkdown, "markdown"},
};

}  // namespace

bool ParseCheckFormat(std::string_view name, CheckFormat* out) {
  return ParseEnum(kCheckFormats, name, out);
}

std::string CheckReportJson(const JointGraph& jg, const CheckInput& in, const CheckResult& r,
                            const std::vector<std::string>& warnings) {
  auto value = [](const CheckCondition& c, bool expected) {
    if (c.bytes) return ojson(expected ? c.expected_bytes : c.actual_bytes);
    return ojson(expected ? c.expected_text : c.actual_text);
  };
  ojson doc = ReportHeader("check", jg);
  ojson symbols = ojson::object();
  for (const auto& [name, v] : jg.graph.symbols) symbols[name] = v;
  doc["symbols"] = symbols;
  doc["program"] = {{"source", in.plan_file.empty() ? "baseline" : "plan"},
                    {"plan", in.plan_file.empty() ? ojson(nullptr) : ojson(in.plan_file)},
                    {"accumulation", in.accumulation}};
  doc["optimizer"] = in.optimizer;
  doc["passed"] = r.passed;
  ojson failures = ojson::array(), conditions = ojson::array();
  for (const CheckCondition& c : r.conditions) {
    ojson item = {{"name", c.name},
                  {"condition", c.condition},
                  {"expected", value(c, true)},
                  {"actual", value(c, false)},
                  {"passed", c.passed},
                  {"message", c.message}};
    conditions.push_back(item);
    if (!c.passed) {
      item.erase("passed");
      failures.push_back(item);
    }
  }
  doc["failures"] = failures;
  doc["conditions"] = conditions;
  doc["budget_bytes"] = in.has_budget ? ojson(in.budget_bytes) : ojson(nullptr);
  doc["budget_of"] = in.has_budget ? ojson(BudgetOfName(in.budget_of)) : ojson(nullptr);
  auto or_null = [](int64_t v) { return v >= 0 ? ojson(v) : ojson(nullptr); };
  doc["reserved_peak_bytes"] = or_null(in.plan_valid ? in.reserved_peak_bytes : -1);
  doc["device_total_bytes"] = or_null(in.plan_valid ? in.device_total_bytes : -1);
  doc["peak_bytes"] = in.plan_valid ? ojson(in.peak_bytes) : ojson(nullptr);
  doc["peak_step"] = in.plan_valid ? ojson(in.peak_step) : ojson(nullptr);
  doc["peak_op"] = in.plan_valid && !in.peak_op.empty() ? ojson(in.peak_op) : ojson(nullptr);
  if (in.has_baseline) {
    doc["baseline"] = {
        {"file", in.baseline.file},       {"command", in.baseline.command},
        {"pointer", in.baseline.pointer}, {"peak_bytes", in.baseline.peak_bytes},
        {"tolerance", in.tolerance.text}, {"tolerance_fraction", in.tolerance.value()},
        {"limit_bytes", r.limit_bytes}};
  } else {
    doc["baseline"] = nullptr;
  }
  doc["warnings"] = warnings;
  return json_util::Dump(doc, 2) + "\n";
}

std::string GithubEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else
      out += c;
  }
  return out;
}

namespace {

std::string Shown(const CheckCondition& c, bool expected) {
  if (!c.bytes) return expected ? c.expected_text : c.actual_text;
  return FormatBytesExact(expected ? c.expected_bytes : c.actual_bytes);
}

std::string Title(const CheckCondition& c) {
  if (c.name == "budget") return "peak within budget";
  if (c.name == "regression") return "no regression against the baseline";
  return "plan is valid";
}

std::string MarkdownCell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string CheckOutput(const CheckInput& in, const CheckResult& r, CheckFormat format) {
  std::string out;
  std::string program = in.plan_file.empty()
                            ? fmt::format("baseline program (accumulation {})", in.accumulation)
                            : fmt::format("plan {}", in.plan_file);
  if (in.optimizer != "none") program += fmt::format(", optimizer {}", in.optimizer);
  switch (format) {
    case CheckFormat::kText: {
      out += fmt::format("memplan check {}\n", in.graph_file);
      if (in.outputs_held)
        out += fmt::format("  loop      {}\n", OutputsHeldPhrase(in.outputs_held));
      out += fmt::format("  program   {}\n", program);
      if (in.plan_valid)
        out += fmt::format("  peak      {}{}\n", FormatBytesExact(in.peak_bytes),
                           in.peak_op.empty() ? ""
                                              : fmt::format(" at step {}, while \"{}\" runs",
                                                            in.peak_step, in.peak_op));
      if (in.plan_valid && in.reserved_peak_bytes >= 0)
        out += fmt::format("  reserved  {} at most by PyTorch's caching allocator (steady state)\n",
                           FormatBytesExact(in.reserved_peak_bytes));
      for (const CheckCondition& c : r.conditions)
        out += fmt::format("  {}      {}: {}\n", c.passed ? "ok  " : "FAIL", Title(c), c.message);
      out += fmt::format("result: {}\n", r.passed ? "passed" : "FAILED");
      break;
    }
    case CheckFormat::kGithub: {
      for (const CheckCondition& c : r.conditions)
        out +=
            fmt::format("::{} file={},title=memplan check: {}::{}\n", c.passed ? "notice" : "error",
                        in.graph_file, Title(c), GithubEscape(c.message + "; " + program));
      break;
    }
    case CheckFormat::kMarkdown: {
      out += fmt::format("### memplan check: {} `{}`\n\n", r.passed ? "passed" : "FAILED",
                         in.graph_file);
      out += fmt::format("Program: {}.", program);
      if (in.plan_valid)
        out += fmt::format(" Predicted peak: **{}**.", FormatBytesExact(in.peak_bytes));
      out += "\n\n| condition | expected | actual | result |\n|---|---:|---:|---|\n";
      for (const CheckCondition& c : r.conditions)
        out += fmt::format("| {} (`{}`) | {} | {} | {} |\n", Title(c), MarkdownCell(c.condition),
                           MarkdownCell(Shown(c, true)), MarkdownCell(Shown(c, false)),
                           c.passed ? "ok" : "**FAIL**");
      if (in.has_baseline)
        out += fmt::format(
            "\nBaseline: {} bytes from `{}` (`{}` of a `{}` report), tolerance {} (inclusive: the "
            "limit itself passes).\n",
            in.baseline.peak_bytes, in.baseline.file, in.baseline.pointer, in.baseline.command,
            in.tolerance.text);
      break;
    }
  }
  return out;
}

}  // namespace memplan
