#include "analyzer/report/verify_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analyzer/base/json_util.h"
#include "analyzer/base/units.h"
#include "analyzer/report/analyze_report.h"

namespace memplan {

std::string VerifyReportJson(const JointGraph& jg, const std::string& plan_file, const Plan& plan,
                             const Verification& v) {
  using ojson = nlohmann::ordered_json;
  ojson r = ReportHeader("verify", jg);
  r["plan"] = plan_file;
  r["valid"] = v.valid;
  r["error"] = v.valid ? ojson(nullptr) : ojson(v.error);
  r["peak_bytes"] = v.valid ? ojson(v.sim.peak_bytes) : ojson(nullptr);
  r["recompute_cost"] = v.valid ? ojson(v.sim.recompute_cost) : ojson(nullptr);
  r["recomputed_runs"] = v.valid ? ojson(v.sim.recompute_runs) : ojson(nullptr);
  r["predicted_peak_bytes"] = plan.predicted.peak_bytes;
  r["graph_sha256_matches"] = v.sha_matches;
  r["budget_bytes"] = plan.budget_bytes;
  r["within_budget"] = v.within_budget < 0 ? ojson(nullptr) : ojson(v.within_budget == 1);
  return json_util::Dump(r, 2) + "\n";
}

std::string VerifySummary(const JointGraph& jg, const std::string& plan_file, const Plan& plan,
                          const Verification& v) {
  const Graph& g = jg.graph;
  const SimResult& sim = v.sim;
  std::string name = g.name.empty() ? "(unnamed)" : g.name;
  std::string out = fmt::format("memplan verify {} {}\n", jg.file, plan_file);
  if (jg.lowered)
    out += fmt::format(
        "  graph     {}: {} ops, {} tensors, forward-only; lowered to {} ops, {} tensors\n", name,
        jg.input_ops, jg.input_tensors, g.ops.size(), g.tensors.size());
  else
    out += fmt::format("  graph     {}: {} ops, {} tensors, joint\n", name, g.ops.size(),
                       g.tensors.size());
  out += LoopLine(g);
  out += ParallelLine(jg);
  out += fmt::format("  plan      {} steps, made for \"{}\"; graph_sha256 {}\n",
                     plan.program.steps.size(), plan.graph,
                     v.sha_matches ? "matches the graph file" : "DOES NOT MATCH the graph file");
  if (!v.valid) {
    out += fmt::format("  result    INVALID: {}\n", v.error);
    out +=
        fmt::format("  predicted {} (not replayed)\n", FormatBytesExact(plan.predicted.peak_bytes));
  } else {
    out += "  result    valid\n";
    if (sim.peak_step >= 0) {
      const Op& op = g.ops[plan.program.steps[sim.peak_step].op];
      out += fmt::format("  peak      {} at step {}, while \"{}\" runs ({})\n",
                         FormatBytesExact(sim.peak_bytes), sim.peak_step, op.id,
                         sim.recompute[sim.peak_step] ? "recompute" : PhaseName(op.phase));
    } else {
      out +=
          fmt::format("  peak      {} before the first step\n", FormatBytesExact(sim.peak_bytes));
    }
    int64_t diff = plan.predicted.peak_bytes - sim.peak_bytes;
    out += fmt::format("  predicted {}, {}\n", FormatBytesExact(plan.predicted.peak_bytes),
                       diff == 0 ? std::string("as replayed")
                                 : fmt::format("{} bytes {} than replayed", diff < 0 ? -diff : diff,
                                               diff < 0 ? "less" : "more"));
    out += fmt::format("  recompute {} runs, cost {:g} flops\n", sim.recompute_runs,
                       sim.recompute_cost);
  }
  if (plan.budget_bytes == 0)
    out += "  budget    none (budget_bytes 0)\n";
  else if (v.within_budget < 0)
    out += fmt::format("  budget    {}\n", FormatBytesExact(plan.budget_bytes));
  else
    out += fmt::format("  budget    {}: {}\n", FormatBytesExact(plan.budget_bytes),
                       v.within_budget ? "the replayed peak is within it" : "OVER BUDGET");
  return out;
}

}  // namespace memplan
