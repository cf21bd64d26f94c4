#include "analyzer/drivers/analysis.h"

#include <chrono>
#include <future>

#include "analyzer/base/mapped_file.h"
#include "analyzer/import/onnx_import.h"
#include "analyzer/lower/lower.h"

namespace memplan {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

bool LoadGraphAnyFormat(const std::string& path, const GraphLoadOptions& options, Graph* graph,
                        std::vector<std::string>* warnings, std::string* err) {
  MappedFile file;
  if (!file.Open(path, err)) return false;
  const std::string_view bytes = file.view();
  const bool json_name = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  // A .json file that does not start with '{' is broken JSON: say so in JSON's words.
  if (LooksLikeJson(bytes) || json_name) return ParseGraph(bytes, path, options, graph, err);
  return ImportOnnx(bytes, path, options, graph, warnings, err);
}

bool LoadJointGraph(const std::string& path, const GraphLoadOptions& options, JointGraph* out,
                    std::string* err) {
  out->file = path;
  auto start = std::chrono::steady_clock::now();
  Graph input;
  out->warnings.clear();
  if (!LoadGraphAnyFormat(path, options, &input, &out->warnings, err)) return false;
  out->parse_seconds = SecondsSince(start);
  start = std::chrono::steady_clock::now();
  out->input_ops = input.ops.size();
  out->input_tensors = input.tensors.size();
  out->lowered = !input.joint;
  if (input.joint) {
    out->graph = std::move(input);
    return true;
  }
  std::string lower_err;
  if (!LowerToJoint(std::move(input), &out->graph, &out->warnings, &lower_err)) {
    *err = path + ": " + lower_err;
    return false;
  }
  out->lower_seconds = SecondsSince(start);
  return true;
}

bool AnalyzeBaseline(const Graph& joint, AccumulationMode mode, Analysis* out, std::string* err) {
  auto start = std::chrono::steady_clock::now();
  out->accumulation = mode;
  // The bound needs no program: compute it on the second core meanwhile.
  std::future<int64_t> bound =
      std::async(std::launch::async, [&joint] { return PeakLowerBound(joint); });
  out->program = BuildBaselineProgram(joint, mode);
  SimOptions options;
  bool ok = Simulate(joint, out->program, options, &out->sim, err);
  out->lower_bound_bytes = bound.get();
  if (!ok) {
    *err = "baseline program is invalid: " + *err;
    return false;
  }
  out->seconds = SecondsSince(start);
  return true;
}

std::vector<BufferInterval> IntervalsWithWorkspaces(const Graph& g, const Program& program,
                                                    const SimResult& sim,
                                                    const std::vector<int64_t>& persistent) {
  std::vector<BufferInterval> intervals = sim.intervals;
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step& step = program.steps[s];
    if (!step.IsRun() || g.ops[step.op].workspace_bytes <= 0) continue;
    const int at = static_cast<int>(s);
    intervals.push_back({-1, g.ops[step.op].workspace_bytes, at, at});
  }
  const int end = static_cast<int>(program.steps.size());
  for (int64_t bytes : persistent) intervals.push_back({-1, bytes, -1, end});
  return intervals;
}

bool PredictBaselineReserved(const Graph& joint, const alloc::Config& config,
                             const std::string& alloc_conf, int iterations, Analysis* a,
                             std::string* err, const std::vector<int64_t>& persistent) {
  a->has_reserved = false;
  a->reserved.alloc_conf = alloc_conf;
  if (!alloc::PredictReserved(IntervalsWithWorkspaces(joint, a->program, a->sim, persistent),
                              static_cast<int>(a->program.steps.size()), config, iterations,
                              &a->reserved, err))
    return false;
  a->has_reserved = true;
  return true;
}

}  // namespace memplan
