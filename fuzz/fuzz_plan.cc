// libFuzzer target: what `memplan verify` does with a plan file: ParsePlan
// against a joint graph, then Simulate the step program and write the
// reports. The graph is one of the examples, lowered once at start-up: the
// ones whose name the plan's "graph" member names, else gpt_tiny. A parsed
// plan also round-trips through PlanToJson.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/plan/cost_model.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/report/verify_report.h"
#include "analyzer/sim/simulator.h"
#include "fuzz/fuzz_check.h"

using namespace memplan;

namespace {

struct Loaded {
  JointGraph jg;
  std::vector<double> costs;
};

std::vector<std::unique_ptr<Loaded>>* Graphs() {
  static auto* graphs = [] {
    auto* out = new std::vector<std::unique_ptr<Loaded>>;
    for (const char* name : {"gpt_tiny.graph.json", "mlp.graph.json", "densenet_toy.graph.json",
                             "cnn_small.joint.graph.json", "mlp_torch.joint.graph.json"}) {
      auto l = std::make_unique<Loaded>();
      std::string err;
      std::string path = std::string(MEMPLAN_SOURCE_DIR) + "/examples/" + name;
      if (!LoadJointGraph(path, GraphLoadOptions{}, &l->jg, &err)) {
        std::fprintf(stderr, "fuzz_plan: cannot load %s: %s\n", path.c_str(), err.c_str());
        std::abort();
      }
      CostModel flops;  // the report unit of `memplan verify`
      flops.objective = Objective::kFlops;
      l->costs = OpCosts(l->jg.graph, flops);
      out->push_back(std::move(l));
    }
    return out;
  }();
  return graphs;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Graphs();
  return 0;
}

namespace {

void VerifyAgainst(const std::string& text, const Loaded* g) {
  const JointGraph& jg = g->jg;
  Plan plan;
  std::string err;
  if (!ParsePlan(text, "fuzz.plan.json", jg.graph, &plan, &err)) {
    Check(!err.empty());
    return;
  }
  // Round trip: what PlanToJson writes parses back and is written the same.
  {
    std::string written = PlanToJson(jg.graph, plan);
    Plan again;
    std::string err2;
    if (!ParsePlan(written, "written.plan.json", jg.graph, &again, &err2)) {
      std::fprintf(stderr, "written plan does not parse: %s\n", err2.c_str());
      std::abort();
    }
    Check(PlanToJson(jg.graph, again) == written);
  }
  Verification v;
  SimOptions sim_options;
  sim_options.require_complete = true;
  sim_options.op_cost = g->costs;
  v.valid = Simulate(jg.graph, plan.program, sim_options, &v.sim, &v.error);
  if (!v.valid) Check(!v.error.empty());
  if (v.valid && plan.budget_bytes > 0) v.within_budget = v.sim.peak_bytes <= plan.budget_bytes;
  if (v.valid) {
    Check(v.sim.peak_bytes >= v.sim.start_bytes);
    Check(v.sim.live_during.size() == plan.program.steps.size());
    int64_t sum = 0;
    for (const LiveBuffer& b : v.sim.live_at_peak) sum += b.bytes;
    Check(sum == v.sim.peak_bytes);
    // No valid program goes below the floor, in-place takeovers included.
    Check(v.sim.peak_bytes >= PeakLowerBound(jg.graph));
  }
  std::string report = VerifyReportJson(jg, "fuzz.plan.json", plan, v);
  std::string summary = VerifySummary(jg, "fuzz.plan.json", plan, v);
  Check(!report.empty() && !summary.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  bool any = false;
  for (const auto& l : *Graphs()) {
    // Two examples are named "mlp": a plan naming it is tried on both.
    if (text.find("\"graph\": \"" + l->jg.graph.name + "\"") != std::string::npos) {
      VerifyAgainst(text, l.get());
      any = true;
    }
  }
  if (!any) VerifyAgainst(text, (*Graphs())[0].get());
  return 0;
}
