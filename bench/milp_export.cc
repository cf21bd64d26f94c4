// memplan_milp_export: what bench/checkmate_milp.py needs to build its MILP
// over memplan's own graphs, and the way back from a MILP solution to a
// memplan.plan/1 step program. A benchmark helper, not part of memplan.
//
//   memplan_milp_export GRAPH [--set k=v]... [--objective time|flops] [--device NAME]
//                       -o OUT.json
//   memplan_milp_export GRAPH [--set k=v]... [--objective time|flops] [--device NAME]
//                       --runs RUNS.json [--budget BYTES] -o PLAN.json
//
// The graph is loaded and lowered as `memplan plan` loads it (LoadJointGraph,
// then AddOptimizerState with --optimizer none), op costs are OpCosts under
// the same CostModel (objective time by default, device h100), gradient
// accumulation in place (plan's auto).
//
// Export mode writes one JSON object: tensors (bytes, base, alias_of,
// producer, resident, kept to the end, candidate), ops (phase, inputs,
// outputs, cost, workspace, view-only, accumulate), the baseline schedule
// order (ScheduleOrder), the checkpoint candidates (CheckpointCandidates),
// the baseline peak, PeakLowerBound, the cost of one step, and for each op
// of the baseline program (which runs every op once, in that order, and is
// the save-all checkpoint program): the live bytes while it runs, and the
// part of them, and of those alive just before it, held by buffers whose
// owner is not a candidate (resident, kept to the end, backward-made: the
// bytes no recomputation decision changes).
//
// Runs mode reads {"runs": ["OP", ...]} (forward ops, then reruns and
// backward ops: any op sequence) and writes the memplan.plan/1 document of
// BuildProgram(runs, inplace, no keep set): each production a new instance,
// freed right after its last use, accumulations in place where legal, i.e.
// what `memplan plan` would write for that run order. Its "predicted" block
// is this program's simulation; `memplan verify` replays it independently.
//
// Exit status: 0 ok, 2 bad usage or input, 1 the run sequence is invalid.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/base/file_io.h"
#include "analyzer/base/sha256.h"
#include "analyzer/drivers/analysis.h"
#include "analyzer/import/graph_json.h"
#include "analyzer/lower/optimizer_state.h"
#include "analyzer/plan/cost_model.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/sim/checkpoint.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan {
namespace {

using json = nlohmann::ordered_json;

int Usage(const std::string& message) {
  std::fprintf(stderr,
               "memplan_milp_export: %s\n"
               "usage: memplan_milp_export GRAPH [--set k=v]... [--objective time|flops] "
               "[--device NAME] [--runs RUNS.json [--budget BYTES]] -o OUT.json\n",
               message.c_str());
  return 2;
}

bool WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

json Export(const Graph& g, const std::vector<double>& costs, const CostModel& model,
            const std::string& graph_file) {
  const std::vector<int> order = ScheduleOrder(g, AccumulationMode::kInplace);
  const std::vector<int> candidates = CheckpointCandidates(g);
  std::vector<bool> is_candidate(g.tensors.size(), false);
  for (int t : candidates) is_candidate[t] = true;

  // The baseline program: every op once in schedule order, each buffer freed
  // after its last use; the save-all checkpoint program.
  const Program baseline = BuildBaselineProgram(g, AccumulationMode::kInplace);
  SimOptions so;
  so.require_complete = true;
  so.op_cost = costs;
  so.collect_live_at_peak = false;
  SimResult sim;
  std::string err;
  if (!Simulate(g, baseline, so, &sim, &err)) {
    std::fprintf(stderr, "memplan_milp_export: baseline program invalid: %s\n", err.c_str());
    std::exit(1);
  }
  const int nsteps = static_cast<int>(baseline.steps.size());
  // Candidate-owned bytes alive while step s runs (alloc <= s < free) and
  // just before it (alloc < s <= free), by difference arrays.
  std::vector<int64_t> during(nsteps + 2, 0), before(nsteps + 2, 0);
  for (const BufferInterval& iv : sim.intervals) {
    if (iv.owner < 0 || !is_candidate[g.tensors[iv.owner].base]) continue;
    const int a = std::max(iv.alloc_step, 0), f = std::min(iv.free_step, nsteps);
    if (a < f || iv.alloc_step == iv.free_step) {  // during: [a, f) (a fresh copy: [a, a])
      during[a] += iv.bytes;
      during[std::max(f, a + 1)] -= iv.bytes;
    }
    const int b0 = iv.alloc_step + 1, b1 = std::min(iv.free_step, nsteps);
    if (b0 <= b1) {  // before: [alloc + 1, free]
      before[b0] += iv.bytes;
      before[b1 + 1] -= iv.bytes;
    }
  }
  for (int s = 1; s <= nsteps + 1; ++s) {
    during[s] += during[s - 1];
    before[s] += before[s - 1];
  }

  json steps = json::array();
  for (int s = 0; s < nsteps; ++s) {
    const Step& step = baseline.steps[s];
    if (!step.IsRun()) continue;
    const int64_t live_before = s == 0 ? sim.start_bytes : sim.live_after[s - 1];
    json inplace = json::array();
    for (auto [out, in] : step.inplace) inplace.push_back({out, in});
    steps.push_back({{"op", step.op},
                     {"live_during", sim.live_during[s]},
                     {"live_before", live_before},
                     {"other_during", sim.live_during[s] - during[s]},
                     {"other_before", live_before - before[s]},
                     {"inplace", inplace}});
  }

  json tensors = json::array();
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const Tensor& x = g.tensors[t];
    tensors.push_back({{"id", x.id},
                       {"bytes", x.bytes},
                       {"owned_bytes", g.OwnedBytes(static_cast<int>(t))},
                       {"base", x.base},
                       {"alias_of", x.alias_of},
                       {"producer", x.producer},
                       {"kind", TensorKindName(x.kind)},
                       {"resident", g.IsResidentTensor(static_cast<int>(t))},
                       {"kept_to_end", static_cast<bool>(g.kept_to_end[t])},
                       {"candidate", static_cast<bool>(is_candidate[t])}});
  }
  json ops = json::array();
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    ops.push_back({{"id", op.id},
                   {"type", op.type},
                   {"phase", PhaseName(op.phase)},
                   {"inputs", op.inputs},
                   {"outputs", op.outputs},
                   {"cost", costs[o]},
                   {"workspace_bytes", op.workspace_bytes},
                   {"view_only", IsViewOnly(g, op)},
                   {"accumulate", op.accumulate}});
  }
  double step_cost = 0;
  for (double c : costs) step_cost += c;
  json out;
  out["format"] = "memplan.milp_export/1";
  out["graph"] = g.name;
  out["graph_file"] = graph_file;
  out["objective"] = model.objective == Objective::kTime ? "time" : "flops";
  out["device"] = model.device.name;
  out["cost_unit"] = CostUnit(model);
  out["accumulation"] = "inplace";
  out["resident_bytes"] = g.ResidentBytes();
  out["baseline_peak_bytes"] = sim.peak_bytes;
  out["lower_bound_bytes"] = PeakLowerBound(g);
  out["step_cost"] = step_cost;
  out["order"] = order;
  out["candidates"] = candidates;
  out["outputs"] = g.outputs;
  out["tensors"] = std::move(tensors);
  out["ops"] = std::move(ops);
  out["baseline_steps"] = std::move(steps);
  return out;
}

int BuildPlan(const Graph& g, const std::vector<double>& costs, const CostModel& model,
              const std::string& graph_bytes, const std::string& runs_file, int64_t budget,
              const std::string& out_file) {
  std::string text, err;
  if (!ReadFile(runs_file, &text, &err)) return Usage(err);
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.contains("runs") || !doc["runs"].is_array())
    return Usage(runs_file + ": expected {\"runs\": [\"OP\", ...]}");
  std::vector<int> runs;
  for (const json& r : doc["runs"]) {
    const int o = r.is_string() ? g.FindOp(r.get<std::string>()) : -1;
    if (o < 0) return Usage(runs_file + ": unknown op " + r.dump());
    runs.push_back(o);
  }
  Program program = BuildProgram(g, runs, AccumulationMode::kInplace, nullptr);
  SimOptions so;
  so.require_complete = true;
  so.op_cost = costs;
  so.collect_live_at_peak = false;
  SimResult sim;
  const bool valid = Simulate(g, program, so, &sim, &err);
  if (!valid) std::fprintf(stderr, "memplan_milp_export: invalid program: %s\n", err.c_str());
  const Program base_program = BuildBaselineProgram(g, AccumulationMode::kInplace);
  SimResult base;
  std::string base_err;
  if (!Simulate(g, base_program, so, &base, &base_err)) base.peak_bytes = 0;

  Plan plan;
  plan.graph = g.name;
  plan.graph_sha256 = Sha256Hex(graph_bytes);
  plan.budget_bytes = budget;
  plan.feasible = valid && (budget <= 0 || sim.peak_bytes <= budget);
  std::vector<bool> rerun_out(g.tensors.size(), false), seen(g.ops.size(), false);
  for (const Step& step : program.steps) {
    if (!step.IsRun()) continue;
    const Op& op = g.ops[step.op];
    if (op.accumulate && op.outputs.size() == 1)
      plan.accumulation.emplace_back(op.outputs[0], step.inplace.empty()
                                                        ? AccumulationMode::kOutOfPlace
                                                        : AccumulationMode::kInplace);
    if (seen[step.op])
      for (int t : op.outputs)
        if (!g.IsView(t)) rerun_out[t] = true;
    seen[step.op] = true;
  }
  std::sort(plan.accumulation.begin(), plan.accumulation.end());
  // saved: candidates never recomputed (kept from the forward for the backward).
  for (int t : CheckpointCandidates(g)) {
    if (rerun_out[t])
      plan.recomputed.push_back(t);
    else
      plan.saved.push_back(t);
  }
  plan.predicted.peak_bytes = valid ? sim.peak_bytes : 0;
  plan.predicted.baseline_peak_bytes = base.peak_bytes;
  plan.predicted.recompute_cost = valid ? sim.recompute_cost : 0;
  plan.predicted.cost_unit = CostUnit(model);
  plan.program = std::move(program);
  if (!WriteText(out_file, PlanToJson(g, plan))) return Usage("cannot write " + out_file);
  std::printf("%s\n", json({{"valid", valid},
                            {"error", valid ? "" : err},
                            {"peak_bytes", sim.peak_bytes},
                            {"recompute_cost", sim.recompute_cost},
                            {"recompute_runs", sim.recompute_runs},
                            {"steps", plan.program.steps.size()}})
                          .dump()
                          .c_str());
  return valid ? 0 : 1;
}

int Main(int argc, char** argv) {
  std::string graph_file, out_file, runs_file, objective = "time", device = "h100";
  int64_t budget = 0;
  GraphLoadOptions load;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    std::string v;
    if (a == "-o" || a == "--out") {
      if (!value(&out_file)) return Usage("-o needs a file");
    } else if (a == "--objective") {
      if (!value(&objective) || (objective != "time" && objective != "flops"))
        return Usage("--objective: time or flops");
    } else if (a == "--device") {
      if (!value(&device)) return Usage("--device needs a name");
    } else if (a == "--runs") {
      if (!value(&runs_file)) return Usage("--runs needs a file");
    } else if (a == "--budget") {
      if (!value(&v)) return Usage("--budget needs bytes");
      budget = std::strtoll(v.c_str(), nullptr, 10);
    } else if (a == "--set") {
      if (!value(&v) || v.find('=') == std::string::npos) return Usage("--set NAME=VALUE");
      load.symbol_overrides.emplace_back(v.substr(0, v.find('=')),
                                         std::strtoll(v.c_str() + v.find('=') + 1, nullptr, 10));
    } else if (!a.empty() && a[0] == '-') {
      return Usage("unknown option " + a);
    } else if (graph_file.empty()) {
      graph_file = a;
    } else {
      return Usage("one graph only");
    }
  }
  if (graph_file.empty() || out_file.empty()) return Usage("GRAPH and -o are required");

  JointGraph jg;
  std::string err;
  if (!LoadJointGraph(graph_file, load, &jg, &err)) return Usage(err);
  OptimizerStats stats;
  if (!AddOptimizerState(OptimizerOptions(), &jg.graph, &stats, &err))
    return Usage(graph_file + ": " + err);
  const Graph& g = jg.graph;
  CostModel model;
  model.objective = objective == "flops" ? Objective::kFlops : Objective::kTime;
  if (!FindDevicePreset(device, &model.device))
    return Usage("--device " + device + ": expected one of " + DevicePresetNames());
  const std::vector<double> costs = OpCosts(g, model);

  if (!runs_file.empty()) {
    std::string graph_bytes;
    if (!ReadFile(graph_file, &graph_bytes, &err)) return Usage(err);
    return BuildPlan(g, costs, model, graph_bytes, runs_file, budget, out_file);
  }
  const json out = Export(g, costs, model, graph_file);
  if (!WriteText(out_file, out.dump() + "\n")) return Usage("cannot write " + out_file);
  return 0;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) { return memplan::Main(argc, argv); }
