// memplan verify: replays a plan's step program against the graph and says
// whether it is valid, where it peaks and whether it keeps its budget.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/plan/cost_model.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/report/verify_report.h"
#include "analyzer/sim/simulator.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memplan {
namespace {

struct VerifyFlags {
  CommonFlags common;
  StepFlags optimizer;
  std::string plan;
  std::string json;
  bool quiet = false;
};

int RunVerify(const VerifyFlags& f) {
  GraphLoadOptions options;
  StepOptions optimizer;
  std::string err;
  if (!ParseStepGraphFlags(f.common, f.optimizer, &options, &optimizer, &err)) return Error(err);
  JointGraph jg;
  if (!LoadStepGraph(f.common.graph, options, optimizer, &jg, &err)) return Error(err);
  Plan plan;
  std::vector<std::string> warnings;  // the plan's, printed after the graph's
  if (!LoadPlanFor(f.plan, f.common.graph, jg.graph, &plan, &warnings, &err)) return Error(err);
  PrintWarnings(jg.warnings);

  Verification v;
  v.sha_matches = warnings.empty();
  SimOptions sim_options;
  sim_options.require_complete = true;
  CostModel flops;  // the report's unit: flops
  flops.objective = Objective::kFlops;
  sim_options.op_cost = OpCosts(jg.graph, flops);
  v.valid = Simulate(jg.graph, plan.program, sim_options, &v.sim, &v.error);
  if (v.valid && plan.budget_bytes > 0) v.within_budget = v.sim.peak_bytes <= plan.budget_bytes;

  if (v.valid && plan.predicted.peak_bytes != v.sim.peak_bytes)
    warnings.push_back(fmt::format("{}: predicted peak_bytes {} but the program peaks at {}",
                                   f.plan, plan.predicted.peak_bytes, v.sim.peak_bytes));
  if (v.within_budget == 0)
    warnings.push_back(fmt::format("{}: the program peaks at {} bytes, over budget_bytes {}",
                                   f.plan, v.sim.peak_bytes, plan.budget_bytes));
  PrintWarnings(warnings);
  if (!v.valid)
    std::fprintf(stderr, "memplan: error: %s: invalid program: %s\n", f.plan.c_str(),
                 v.error.c_str());

  if (!f.json.empty() && !WriteFile(f.json, VerifyReportJson(jg, f.plan, plan, v), &err))
    return Error(err);
  if (!f.quiet) std::fputs(VerifySummary(jg, f.plan, plan, v).c_str(), stdout);
  ExitNow(v.valid ? kExitOk : kExitCheckFailed);
}

}  // namespace

void RegisterVerify(CLI::App* app, int* rc) {
  static VerifyFlags verify;
  CLI::App* v = app->add_subcommand("verify", "replay a plan's step program: valid? peak?");
  AddCommon(v, &verify.common);
  AddStepFlags(v, &verify.optimizer);
  v->add_option("PLAN", verify.plan, "memplan.plan/1 file made for GRAPH")->required();
  v->add_option("--json", verify.json, "write the memplan.report/1 JSON report");
  v->add_flag("-q,--quiet", verify.quiet, "no summary on stdout");
  v->footer(
      "Exit codes: 0 the program is valid, 1 it is not (the message names the step and the "
      "tensor), 2 bad usage or input.\n"
      "Example:\n"
      "  memplan verify examples/mlp.graph.json mlp.plan.json --json verify.json");
  v->callback([rc] { *rc = RunVerify(verify); });
}

}  // namespace memplan
