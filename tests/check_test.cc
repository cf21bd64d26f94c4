// memplan check: tolerances, the inclusive regression limit, baseline reports.
#include "analyzer/report/check.h"

#include <doctest/doctest.h>

#include <string>

namespace memplan {
namespace {

Tolerance Tol(const std::string& text) {
  Tolerance t;
  std::string err;
  REQUIRE_MESSAGE(ParseTolerance(text, &t, &err), err);
  return t;
}

std::string RejectTolerance(const std::string& text) {
  Tolerance t;
  std::string err;
  CHECK_MESSAGE(!ParseTolerance(text, &t, &err), "accepted \"" << text << "\"");
  return err;
}

TEST_CASE("ParseTolerance: percentages and fractions are exact decimals") {
  CHECK(Tol("2%").numerator == 2);
  CHECK(Tol("2%").denominator == 100);
  CHECK(Tol("0.02").numerator == 2);
  CHECK(Tol("0.02").denominator == 100);
  CHECK(Tol("2.5%").value() == doctest::Approx(0.025));
  CHECK(Tol("0").value() == 0.0);
  CHECK(Tol("0%").value() == 0.0);
  CHECK(Tol(".5").value() == doctest::Approx(0.5));
  CHECK(Tol("1000%").value() == doctest::Approx(10.0));
  for (const char* bad : {"", "%", "abc", "-1%", "2 %", "2%%", "1e-2", "0.0.2", "1001%", "10.5",
                          "0.0000000001", "+2%", "."})
    CHECK(RejectTolerance(bad).find(std::string("\"") + bad + "\"") != std::string::npos);
}

TEST_CASE("RegressionLimit: baseline + floor(baseline * tolerance)") {
  CHECK(RegressionLimit(1000, Tol("2%")) == 1020);
  CHECK(RegressionLimit(1000, Tol("0.02")) == 1020);
  CHECK(RegressionLimit(1049, Tol("2%")) == 1069);  // 20.98 -> 20
  CHECK(RegressionLimit(1000, Tol("0")) == 1000);
  CHECK(RegressionLimit(3, Tol("33.333333333%")) == 3);  // 0.99999 -> 0
  // No double rounding: 0.1 + 0.2 style errors cannot move the limit.
  CHECK(RegressionLimit(100000000000000000, Tol("0.000000001")) == 100000000100000000);
  CHECK(RegressionLimit(INT64_MAX, Tol("1000%")) == INT64_MAX);
}

CheckInput Input(int64_t peak, int64_t budget) {
  CheckInput in;
  in.graph_file = "g.json";
  in.peak_bytes = peak;
  in.budget_bytes = budget;
  return in;
}

TEST_CASE("EvaluateCheck: budget and regression are inclusive") {
  CHECK(EvaluateCheck(Input(100, 100)).passed);
  CheckResult over = EvaluateCheck(Input(101, 100));
  CHECK(!over.passed);
  REQUIRE(over.conditions.size() == 1);
  CHECK(over.conditions[0].expected_bytes == 100);
  CHECK(over.conditions[0].actual_bytes == 101);

  CheckInput in = Input(1020, 1 << 20);
  in.has_baseline = true;
  in.baseline.peak_bytes = 1000;
  in.baseline.file = "base.json";
  in.baseline.pointer = "/peak_bytes";
  in.tolerance = Tol("2%");
  CheckResult at = EvaluateCheck(in);
  CHECK(at.passed);
  CHECK(at.limit_bytes == 1020);
  in.peak_bytes = 1021;  // one byte over the limit
  CheckResult one_over = EvaluateCheck(in);
  CHECK(!one_over.passed);
  REQUIRE(one_over.conditions.size() == 2);
  CHECK(one_over.conditions[0].passed);
  CHECK(!one_over.conditions[1].passed);
  CHECK(one_over.conditions[1].expected_bytes == 1020);
  CHECK(one_over.conditions[1].actual_bytes == 1021);
  in.budget_bytes = 10;  // both fail
  CheckResult both = EvaluateCheck(in);
  CHECK(!both.conditions[0].passed);
  CHECK(!both.conditions[1].passed);

  CheckInput bad = Input(0, 100);
  bad.plan_valid = false;
  bad.plan_file = "p.json";
  bad.plan_error = "step 3: x is not alive";
  CheckResult invalid = EvaluateCheck(bad);
  CHECK(!invalid.passed);
  REQUIRE(invalid.conditions.size() == 1);
  CHECK(invalid.conditions[0].actual_text == "step 3: x is not alive");
}

TEST_CASE("EvaluateCheck: a regression-only gate has no budget condition") {
  CheckInput in = Input(1021, 0);
  in.has_budget = false;
  in.has_baseline = true;
  in.baseline.peak_bytes = 1000;
  in.tolerance = Tol("2%");
  CheckResult r = EvaluateCheck(in);
  CHECK(!r.passed);
  REQUIRE(r.conditions.size() == 1);
  CHECK(r.conditions[0].name == "regression");
  in.peak_bytes = 1020;
  CHECK(EvaluateCheck(in).passed);
}

std::string BaselineError(const std::string& text) {
  BaselinePeak b;
  std::string err;
  CHECK_MESSAGE(!ParseBaselineReport(text, "base.json", &b, &err), text);
  return err;
}

TEST_CASE("ParseBaselineReport: the peak field of each report kind") {
  BaselinePeak b;
  std::string err;
  REQUIRE(ParseBaselineReport(
      R"({"format":"memplan.report/1","command":"analyze","graph":{"name":"g"},"peak_bytes":42})",
      "a.json", &b, &err));
  CHECK(b.peak_bytes == 42);
  CHECK(b.pointer == "/peak_bytes");
  CHECK(b.graph == "g");
  REQUIRE(ParseBaselineReport(
      R"({"format":"memplan.report/1","command":"plan","peak_bytes":1,"predicted":{"peak_bytes":7}})",
      "p.json", &b, &err));
  CHECK(b.peak_bytes == 7);
  CHECK(b.pointer == "/predicted/peak_bytes");
  REQUIRE(ParseBaselineReport(
      R"({"format":"memplan.report/1","command":"profile","predicted_peak_bytes":9})", "r.json", &b,
      &err));
  CHECK(b.peak_bytes == 9);

  CHECK(BaselineError("{").find("base.json: not JSON") == 0);
  CHECK(BaselineError("[]") ==
        "base.json: (root): found an array; expected a memplan.report/1 object");
  CHECK(BaselineError(R"({"format":"memplan.plan/1"})") ==
        "base.json: /format: found \"memplan.plan/1\"; expected \"memplan.report/1\"");
  CHECK(BaselineError(R"({"format":"memplan.report/1","command":"lower"})")
            .find("base.json: /command: found \"lower\"") == 0);
  CHECK(BaselineError(R"({"format":"memplan.report/1","command":"analyze"})") ==
        "base.json: /peak_bytes: found nothing; expected the peak as an integer number of bytes");
  CHECK(BaselineError(R"({"format":"memplan.report/1","command":"verify","peak_bytes":null})") ==
        "base.json: /peak_bytes: found null; expected the peak as an integer number of bytes");
  CHECK(BaselineError(
            R"({"format":"memplan.report/1","command":"plan","predicted":{"peak_bytes":-1}})")
            .find("base.json: /predicted/peak_bytes: found -1") == 0);
}

TEST_CASE("CheckOutput: the text names the loop convention when the graph states it") {
  CheckInput in = Input(100, 200);
  in.graph_file = "g.json";
  const std::string line = "  loop      output held through the backward (source.outputs_held)\n";
  CHECK(CheckOutput(in, EvaluateCheck(in), CheckFormat::kText).find("  loop  ") ==
        std::string::npos);
  in.outputs_held = true;
  std::string out = CheckOutput(in, EvaluateCheck(in), CheckFormat::kText);
  CHECK(out.rfind("memplan check g.json\n" + line + "  program   ", 0) == 0);
  in.outputs_held = false;
  out = CheckOutput(in, EvaluateCheck(in), CheckFormat::kText);
  CHECK(out.find("\n  loop      output freed once the loss is computed (source.outputs_held "
                 "false)\n") != std::string::npos);
}

TEST_CASE("GithubEscape: workflow-command data") {
  CHECK(GithubEscape("100% ok\nnext\r") == "100%25 ok%0Anext%0D");
}

}  // namespace
}  // namespace memplan
