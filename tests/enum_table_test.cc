// One constexpr table per enum gives its parse and its name function
// (analyzer/base/enum_table.h).
#include "analyzer/base/enum_table.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <string_view>

#include "analyzer/alloc/caching_allocator.h"
#include "analyzer/drivers/reserved_plan.h"
#include "analyzer/ir/graph.h"
#include "analyzer/lower/optimizer_state.h"
#include "analyzer/lower/parallel/pipeline.h"
#include "analyzer/lower/parallel/rank_step.h"
#include "analyzer/plan/planner.h"
#include "analyzer/report/check.h"
#include "analyzer/report/memviz/pickle.h"
#include "analyzer/report/plan_report.h"
#include "analyzer/sim/program.h"
#include "profiler/profile.h"

namespace memplan {
namespace {

enum class Color { kRed, kGreen, kBlue, kUnnamed };

constexpr EnumName<Color> kColors[] = {
    {Color::kRed, "red"},
    {Color::kGreen, "green"},
    {Color::kBlue, "blue"},
    {Color::kGreen, "verde"},  // an alias: parsed, never named
};

// The table is usable at compile time.
static_assert([] {
  Color c = Color::kRed;
  return ParseEnum(kColors, "blue", &c) && c == Color::kBlue;
}());
static_assert(std::string_view(NameOf(kColors, Color::kGreen)) == "green");

TEST_CASE("ParseEnum finds each name's value") {
  Color c = Color::kUnnamed;
  CHECK(ParseEnum(kColors, "red", &c));
  CHECK(c == Color::kRed);
  CHECK(ParseEnum(kColors, "green", &c));
  CHECK(c == Color::kGreen);
  CHECK(ParseEnum(kColors, "blue", &c));
  CHECK(c == Color::kBlue);
}

TEST_CASE("ParseEnum refuses an unknown name and leaves the output as it was") {
  Color c = Color::kBlue;
  for (std::string_view bad : {"", "Red", "red ", "re", "reds", "purple"}) {
    CAPTURE(bad);
    CHECK_FALSE(ParseEnum(kColors, bad, &c));
    CHECK(c == Color::kBlue);
  }
  // A string_view that is a prefix of a longer buffer compares by its length.
  const char buffer[] = "greenish";
  CHECK(ParseEnum(kColors, std::string_view(buffer, 5), &c));
  CHECK(c == Color::kGreen);
}

TEST_CASE("an alias parses to its value; the name is the first entry's") {
  Color c = Color::kRed;
  CHECK(ParseEnum(kColors, "verde", &c));
  CHECK(c == Color::kGreen);
  CHECK(std::string_view(NameOf(kColors, Color::kGreen)) == "green");
}

TEST_CASE("NameOf returns the table's literal, or the fallback for a value not listed") {
  CHECK(NameOf(kColors, Color::kRed) == kColors[0].name);
  CHECK(std::string_view(NameOf(kColors, Color::kUnnamed)) == "?");
  CHECK(std::string_view(NameOf(kColors, Color::kUnnamed, "none")) == "none");
  CHECK(std::string_view(NameOf(kColors, static_cast<Color>(42), "out")) == "out");
}

TEST_CASE("every table entry round-trips: the name parses back to the value") {
  for (const EnumName<Color>& entry : kColors) {
    CAPTURE(entry.name);
    Color c = Color::kUnnamed;
    REQUIRE(ParseEnum(kColors, entry.name, &c));
    CHECK(c == entry.value);
    Color again = Color::kUnnamed;
    REQUIRE(ParseEnum(kColors, NameOf(kColors, c), &again));
    CHECK(again == c);
  }
}

// The analyzer's enums: each name parses back to its value.
template <class E, class Parse, class Name>
void CheckRoundTrip(int count, Parse parse, Name name) {
  for (int i = 0; i < count; ++i) {
    const E value = static_cast<E>(i);
    const char* text = name(value);
    CAPTURE(text);
    REQUIRE(text != nullptr);
    E parsed = static_cast<E>(count);
    CHECK(parse(text, &parsed));
    CHECK(parsed == value);
  }
  E untouched = static_cast<E>(0);
  CHECK_FALSE(parse("no such name", &untouched));
}

TEST_CASE("the analyzer's enums round-trip through their parse and name functions") {
  CheckRoundTrip<DType>(13, ParseDType, DTypeName);
  CheckRoundTrip<TensorKind>(kNumTensorKinds, ParseTensorKind, TensorKindName);
  CheckRoundTrip<Phase>(3, ParsePhase, PhaseName);
  CheckRoundTrip<AccumulationMode>(3, ParseAccumulationMode, AccumulationModeName);
  CheckRoundTrip<PlanAlgorithm>(4, ParsePlanAlgorithm, PlanAlgorithmName);
  CheckRoundTrip<Granularity>(3, ParseGranularity, GranularityName);
  CheckRoundTrip<OptimizerKind>(5, ParseOptimizerKind, OptimizerKindName);
  CheckRoundTrip<BudgetOf>(3, ParseBudgetOf, BudgetOfName);
  CheckRoundTrip<parallel::Strategy>(5, parallel::ParseStrategy, parallel::StrategyName);
  CheckRoundTrip<parallel::PipelineSchedule>(2, parallel::ParseSchedule, parallel::ScheduleName);
  CHECK(DTypeList().find("float64, float32, float16, bfloat16") == 0);
}

TEST_CASE("the parse-only and name-only enums") {
  CheckFormat format = CheckFormat::kText;
  CHECK(ParseCheckFormat("markdown", &format));
  CHECK(format == CheckFormat::kMarkdown);
  CHECK(ParseCheckFormat("github", &format));
  CHECK(format == CheckFormat::kGithub);
  CHECK_FALSE(ParseCheckFormat("json", &format));
  CHECK(format == CheckFormat::kGithub);

  BackendChoice backend = BackendChoice::kAuto;
  CHECK(ParseBackendChoice("cuda", &backend));
  CHECK(backend == BackendChoice::kCuda);
  CHECK(ParseBackendChoice("cpu", &backend));
  CHECK(backend == BackendChoice::kCpu);
  CHECK_FALSE(ParseBackendChoice("rocm", &backend));

  CHECK(std::string_view(SacDispatchSourceName(SacDispatchSource::kGiven)) == "given");
  CHECK(std::string_view(SacDispatchSourceName(SacDispatchSource::kMeasured)) == "measured");
  CHECK(std::string_view(SacDispatchSourceName(SacDispatchSource::kUnmeasuredDefault)) ==
        "unmeasured_default");
  CHECK(std::string_view(SacDispatchSourceName(static_cast<SacDispatchSource>(99))) ==
        "unmeasured_default");

  using Action = alloc::TraceEntry::Action;
  CHECK(std::string_view(alloc::TraceActionName(Action::kAlloc)) == "alloc");
  CHECK(std::string_view(alloc::TraceActionName(Action::kSegmentUnmap)) == "segment_unmap");
  CHECK(std::string_view(alloc::TraceActionName(Action::kOom)) == "oom");
  CHECK(std::string_view(alloc::TraceActionName(static_cast<Action>(99))) == "?");

  using Kind = memviz::PickleValue::Kind;
  CHECK(std::string_view(memviz::PickleKindName(Kind::kNone)) == "None");
  CHECK(std::string_view(memviz::PickleKindName(Kind::kString)) == "str");
  CHECK(std::string_view(memviz::PickleKindName(Kind::kSet)) == "set");
  CHECK(std::string_view(memviz::PickleKindName(static_cast<Kind>(99))) == "?");
}

TEST_CASE("the old fallbacks for a value out of range are kept") {
  CHECK(std::strcmp(AccumulationModeName(static_cast<AccumulationMode>(99)), "?") == 0);
  CHECK(std::strcmp(PlanAlgorithmName(static_cast<PlanAlgorithm>(99)), "?") == 0);
  CHECK(std::strcmp(GranularityName(static_cast<Granularity>(99)), "?") == 0);
  CHECK(std::strcmp(BudgetOfName(static_cast<BudgetOf>(99)), "?") == 0);
  CHECK(std::strcmp(OptimizerKindName(static_cast<OptimizerKind>(99)), "none") == 0);
  CHECK(std::strcmp(parallel::StrategyName(static_cast<parallel::Strategy>(99)), "none") == 0);
  CHECK(std::strcmp(parallel::ScheduleName(static_cast<parallel::PipelineSchedule>(99)), "1f1b") ==
        0);
}

}  // namespace
}  // namespace memplan
