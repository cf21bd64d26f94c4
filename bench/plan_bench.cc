// memplan_plan_bench: memplan's checkpoint planner against the checkpoint sets
// users write by hand (analyzer/plan/baselines.h), at budgets below the baseline
// peak. A benchmark, not a test: it reports, it does not assert.
//
//   memplan_plan_bench [--json OUT] [--budgets 90,70,50] GRAPH...
//
// For each graph (a forward-only graph is lowered first, as `memplan plan`
// does): the baseline program's peak; the peak and recompute cost of each
// hand-written set (save-all, sqrt, block depth 1 and 2 when some op has a
// scope); and for each budget (each percentage of the baseline peak, then
// the lowest peak any hand-written set but save-all reaches, labelled
// "=NAME", the tightest budget some baseline fits) PlanCheckpoints with default options (objective
// time, device h100, accumulation inplace): feasible, peak, cost, wall time and programs simulated.
// A row is worse_than_baseline when some hand-written set fits the budget and memplan's plan does
// not fit or costs more. Exit status: 0 when every graph loaded and planned (whatever the rows
// say), 2 on bad usage or a graph that does not load, 1 if the planner failed.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analyzer/drivers/analysis.h"
#include "analyzer/plan/baselines.h"
#include "analyzer/plan/cost_model.h"
#include "analyzer/plan/planner.h"
#include "analyzer/sim/checkpoint.h"
#include "analyzer/sim/simulator.h"

namespace memplan {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

struct Baseline {
  std::string name;
  int64_t peak = 0;
  double cost = 0;
  int64_t recomputed_tensors = 0;
  double seconds = 0;  // build + score
};

// a > b beyond rounding.
bool CostsMore(double a, double b) { return a > b + 1e-9 * std::max(1.0, std::abs(b)); }

// Writes the JSON document: the graphs done, then `current` when not null.
using Flush = std::function<void(const json* current)>;

// One graph, loaded and analysed: what every row of its benchmark reads.
struct BenchInput {
  JointGraph jg;
  double load_s = 0;
  Analysis base;
  PlannerOptions options;  // objective time, device h100, inplace, auto
  std::vector<double> costs;
  double step_cost = 0;
  size_t forward_ops = 0;
  bool scoped = false;  // some forward op has a scope
  size_t candidates = 0;
};

// A budget to plan at: a percentage of the baseline peak, or the lowest
// peak of a hand-written set ("=NAME").
struct Budget {
  std::string label;
  double pct;
  int64_t bytes;
};

// Loads and analyses `path` and prints its summary; false (with *status) on
// a graph that does not load.
bool LoadBenchInput(const std::string& path, BenchInput* in, int* status) {
  std::string err;
  auto t0 = Clock::now();
  if (!LoadJointGraph(path, GraphLoadOptions(), &in->jg, &err)) {
    std::fprintf(stderr, "memplan_plan_bench: %s: %s\n", path.c_str(), err.c_str());
    *status = 2;
    return false;
  }
  in->load_s = Seconds(t0);
  const Graph& g = in->jg.graph;
  if (!AnalyzeBaseline(g, AccumulationMode::kInplace, &in->base, &err)) {
    std::fprintf(stderr, "memplan_plan_bench: %s: baseline: %s\n", path.c_str(), err.c_str());
    *status = 2;
    return false;
  }
  in->costs = OpCosts(g, in->options.cost);
  for (double c : in->costs) in->step_cost += c;
  for (const Op& op : g.ops) {
    if (op.phase != Phase::kForward) continue;
    ++in->forward_ops;
    in->scoped = in->scoped || !op.scope.empty();
  }
  in->candidates = CheckpointCandidates(g).size();

  fmt::print("{}: {} ops ({} forward), {} tensors, {} candidates{}; loaded in {:.3f} s\n", path,
             g.ops.size(), in->forward_ops, g.tensors.size(), in->candidates,
             in->jg.lowered ? " (lowered)" : "", in->load_s);
  fmt::print("  baseline peak {:.2f} MiB, floor {:.2f} MiB, step cost {:.4g} {}\n",
             MiB(in->base.sim.peak_bytes), MiB(in->base.lower_bound_bytes), in->step_cost,
             CostUnit(in->options.cost));
  return true;
}

// Scores the hand-written sets (save-all, sqrt, block1 and block2 when some
// op has a scope), printing each; false (with *status) if one fails.
bool ScoreBaselines(const std::string& path, const BenchInput& in, std::vector<Baseline>* baselines,
                    int* status) {
  const Graph& g = in.jg.graph;
  const int64_t baseline_peak = in.base.sim.peak_bytes;
  std::string err;
  auto score = [&](const std::string& name, auto make) -> bool {
    auto t = Clock::now();
    std::vector<bool> keep = make();
    ScoredPlan plan;
    if (!ScoreCheckpointSet(g, keep, in.costs, {.program = {.mode = in.options.accumulation}},
                            &plan, &err)) {
      std::fprintf(stderr, "memplan_plan_bench: %s: %s: %s\n", path.c_str(), name.c_str(),
                   err.c_str());
      *status = 1;
      return false;
    }
    Baseline b{name, plan.sim.peak_bytes, plan.recompute_cost,
               static_cast<int64_t>(plan.checkpoint.recomputed_tensors.size()), Seconds(t)};
    fmt::print("  {:<10} peak {:10.2f} MiB ({:5.1f}%)  cost {:10.4g}  recomputes {} tensors\n",
               name, MiB(b.peak), 100.0 * b.peak / baseline_peak, b.cost, b.recomputed_tensors);
    baselines->push_back(b);
    return true;
  };
  if (!score("save-all", [&] { return SaveAllCheckpoints(g); })) return false;
  if (!score("sqrt", [&] { return SqrtCheckpoints(g); })) return false;
  if (in.scoped) {
    if (!score("block1", [&] { return BlockCheckpoints(g, 1); })) return false;
    if (!score("block2", [&] { return BlockCheckpoints(g, 2); })) return false;
  }
  return true;
}

// The graph's part of the JSON document, without its rows.
json GraphJson(const std::string& path, const BenchInput& in,
               const std::vector<Baseline>& baselines) {
  const int64_t baseline_peak = in.base.sim.peak_bytes;
  json gj;
  gj["graph"] = path;
  gj["name"] = in.jg.graph.name;
  gj["lowered"] = in.jg.lowered;
  gj["input_ops"] = in.jg.input_ops;
  gj["ops"] = in.jg.graph.ops.size();
  gj["forward_ops"] = in.forward_ops;
  gj["tensors"] = in.jg.graph.tensors.size();
  gj["candidates"] = in.candidates;
  gj["load_s"] = in.load_s;
  gj["baseline_peak_bytes"] = baseline_peak;
  gj["floor_bytes"] = in.base.lower_bound_bytes;
  gj["step_cost"] = in.step_cost;
  gj["cost_unit"] = CostUnit(in.options.cost);
  json bj = json::array();
  for (const Baseline& b : baselines)
    bj.push_back({{"name", b.name},
                  {"peak_bytes", b.peak},
                  {"peak_pct", 100.0 * b.peak / baseline_peak},
                  {"recompute_cost", b.cost},
                  {"recomputed_tensors", b.recomputed_tensors},
                  {"seconds", b.seconds}});
  gj["baselines"] = bj;
  return gj;
}

// The budgets: each percentage of the baseline peak, then the lowest peak a
// hand-written set reaches (the tightest budget some baseline fits).
std::vector<Budget> Budgets(const std::vector<int>& percents, int64_t baseline_peak,
                            const std::vector<Baseline>& baselines) {
  std::vector<Budget> budgets;
  for (int pct : percents)
    budgets.push_back(
        {std::to_string(pct) + "%", static_cast<double>(pct), baseline_peak * pct / 100});
  const Baseline* lowest = nullptr;
  for (const Baseline& b : baselines)
    if (b.name != "save-all" && (!lowest || b.peak < lowest->peak)) lowest = &b;
  if (lowest && lowest->peak < baseline_peak) {
    bool seen = false;
    for (const Budget& b : budgets) seen = seen || b.bytes == lowest->peak;
    if (!seen)
      budgets.push_back({"=" + lowest->name, 100.0 * lowest->peak / baseline_peak, lowest->peak});
  }
  return budgets;
}

// Plans at one budget, prints the row and returns it as *row; false (with
// *status) if the planner failed.
bool PlanRow(const std::string& path, const BenchInput& in, const std::vector<Baseline>& baselines,
             const Budget& bud, json* row, int* status) {
  const int64_t budget = bud.bytes;
  PlanResult result;
  std::string err;
  auto t = Clock::now();
  if (!PlanCheckpoints(in.jg.graph, budget, in.options, &result, &err)) {
    std::fprintf(stderr, "memplan_plan_bench: %s: plan at %s: %s\n", path.c_str(),
                 bud.label.c_str(), err.c_str());
    *status = 1;
    return false;
  }
  const double plan_s = Seconds(t);
  json fits = json::object();
  std::vector<std::string> worse_than;
  for (const Baseline& b : baselines) {
    bool f = b.peak <= budget;
    fits[b.name] = f;
    if (f && (!result.feasible || CostsMore(result.best.recompute_cost, b.cost)))
      worse_than.push_back(b.name);
  }
  const bool worse = !worse_than.empty();
  fmt::print(
      "  budget {:>9} {:10.2f} MiB: memplan {} peak {:10.2f} MiB cost {:10.4g} "
      "({} programs, {}, {:.3f} s)",
      bud.label, MiB(budget), result.feasible ? "fits   " : "NO FIT ",
      MiB(result.best.sim.peak_bytes), result.best.recompute_cost, result.evaluations,
      PlanAlgorithmName(result.algorithm), plan_s);
  for (const Baseline& b : baselines)
    fmt::print("  {}:{}", b.name, b.peak <= budget ? "fits" : "-");
  if (worse) {
    std::string names;
    for (const std::string& n : worse_than) names += (names.empty() ? "" : ",") + n;
    fmt::print("  WORSE than {}", names);
  }
  fmt::print("\n");
  std::fflush(stdout);
  *row = {{"budget", bud.label},
          {"budget_pct", bud.pct},
          {"budget_bytes", budget},
          {"memplan",
           {{"feasible", result.feasible},
            {"peak_bytes", result.best.sim.peak_bytes},
            {"recompute_cost", result.best.recompute_cost},
            {"recomputed_tensors", result.best.checkpoint.recomputed_tensors.size()},
            {"min_peak_bytes", result.min_feasible_peak_bytes},
            {"plan_s", plan_s},
            {"evaluations", result.evaluations},
            {"algorithm", PlanAlgorithmName(result.algorithm)}}},
          {"baseline_fits", fits},
          {"worse_than_baseline", worse},
          {"worse_than", worse_than}};
  return true;
}

bool BenchGraph(const std::string& path, const std::vector<int>& percents, const Flush& flush,
                json* out, int* status) {
  BenchInput in;
  if (!LoadBenchInput(path, &in, status)) return false;
  std::vector<Baseline> baselines;
  if (!ScoreBaselines(path, in, &baselines, status)) return false;
  json gj = GraphJson(path, in, baselines);
  gj["rows"] = json::array();
  gj["complete"] = false;
  flush(&gj);
  for (const Budget& bud : Budgets(percents, in.base.sim.peak_bytes, baselines)) {
    json row;
    if (!PlanRow(path, in, baselines, bud, &row, status)) return false;
    gj["rows"].push_back(std::move(row));
    flush(&gj);
  }
  gj["complete"] = true;
  *out = std::move(gj);
  return true;
}

int Main(int argc, char** argv) {
  std::string json_path;
  std::vector<int> percents = {90, 70, 50};
  std::vector<std::string> graphs;
  const char* usage = "usage: memplan_plan_bench [--json OUT] [--budgets 90,70,50] GRAPH...\n";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--json" || a == "--budgets") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--json") {
        json_path = v;
        continue;
      }
      percents.clear();
      size_t pos = 0;
      while (pos <= v.size()) {
        size_t comma = v.find(',', pos);
        if (comma == std::string::npos) comma = v.size();
        std::string item = v.substr(pos, comma - pos);
        int p = 0;
        if (item.empty() || item.size() > 3 ||
            item.find_first_not_of("0123456789") != std::string::npos ||
            (p = std::stoi(item)) < 1 || p > 100) {
          std::fprintf(stderr, "memplan_plan_bench: --budgets: '%s' is not a percentage 1-100\n",
                       item.c_str());
          return 2;
        }
        percents.push_back(p);
        pos = comma + 1;
      }
    } else if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "memplan_plan_bench: unknown option %s\n%s", a.c_str(), usage);
      return 2;
    } else {
      graphs.push_back(a);
    }
  }
  if (graphs.empty()) {
    std::fputs(usage, stderr);
    return 2;
  }
  int status = 0;
  json all = json::array();
  // Rewritten after every row, so a run stopped by a time limit leaves the
  // rows it finished (the unfinished graph has "complete": false).
  bool write_failed = false;
  Flush flush = [&](const json* current) {
    if (json_path.empty()) return;
    json graphs_done = all;
    if (current) graphs_done.push_back(*current);
    std::ofstream f(json_path, std::ios::trunc);
    f << json(
             {{"benchmark", "memplan_plan_bench"},
              {"options", {{"objective", "time"}, {"device", "h100"}, {"accumulation", "inplace"}}},
              {"graphs", graphs_done}})
             .dump(2)
      << "\n";
    if (!f && !write_failed) {
      std::fprintf(stderr, "memplan_plan_bench: cannot write %s\n", json_path.c_str());
      write_failed = true;
    }
  };
  for (const std::string& path : graphs) {
    json gj;
    if (!BenchGraph(path, percents, flush, &gj, &status)) continue;
    all.push_back(std::move(gj));
  }
  flush(nullptr);
  return write_failed ? 2 : status;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) { return memplan::Main(argc, argv); }
