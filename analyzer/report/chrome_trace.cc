#include "analyzer/report/chrome_trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analyzer/base/json_util.h"

namespace memplan {

using ojson = nlohmann::ordered_json;

const char* StepPhase(const Graph& g, const Program& p, const SimResult& sim, int step) {
  if (step < 0) return nullptr;
  const Step& s = p.steps[step];
  if (!s.IsRun()) return "free";
  if (sim.recompute[step]) return "recompute";
  return PhaseName(g.ops[s.op].phase);
}

std::string ChromeTraceJson(const Graph& g, const Program& program, const SimResult& sim,
                            const MeasuredTrace* measured) {
  static constexpr const char* kTracks[] = {"forward",   "recompute", "backward",
                                            "optimizer", "free",      "gpu"};
  constexpr int kStepUs = 10;
  const size_t n = program.steps.size();
  const bool has_measured =
      measured && measured->live_during.size() == n && measured->live_after.size() == n;
  const bool wall_time =
      has_measured && measured->step_begin_us.size() == n && measured->step_end_us.size() == n;
  const bool gpu_track = wall_time && !measured->kernels.empty();
  ojson events = ojson::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 0},
                    {"args", {{"name", "memplan: " + g.name}}}});
  for (int i = 0; i < (gpu_track ? 6 : 5); ++i) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", i + 1},
                      {"args", {{"name", kTracks[i]}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", i + 1},
                      {"args", {{"sort_index", i + 1}}}});
  }
  // Step-index times are integers; wall times are not.
  auto time = [&](double t) { return wall_time ? ojson(t) : ojson(static_cast<int64_t>(t)); };
  auto counter = [&](double ts, int64_t predicted, const int64_t* measured_bytes) {
    ojson args = {{"predicted", predicted}};
    if (measured_bytes) args["measured"] = *measured_bytes;
    events.push_back(
        {{"name", "live bytes"}, {"ph", "C"}, {"pid", 1}, {"ts", time(ts)}, {"args", args}});
  };
  counter(0, sim.start_bytes, has_measured ? &measured->start_bytes : nullptr);
  for (size_t s = 0; s < n; ++s) {
    const Step& step = program.steps[s];
    const std::string phase = StepPhase(g, program, sim, static_cast<int>(s));
    int tid = 1;
    for (int i = 0; i < 5; ++i)
      if (phase == kTracks[i]) tid = i + 1;
    double ts = static_cast<double>(s) * kStepUs, dur = kStepUs - 1;
    if (wall_time) {
      ts = measured->step_begin_us[s];
      dur = std::max(0.0, measured->step_end_us[s] - ts);
    }
    ojson args = {{"step", s}, {"live_bytes", sim.live_during[s]}};
    if (has_measured) args["measured_live_bytes"] = measured->live_during[s];
    std::string name;
    if (step.IsRun()) {
      const Op& op = g.ops[step.op];
      name = op.id;
      args["type"] = op.type;
      if (!op.scope.empty()) args["scope"] = op.scope;
    } else {
      name = fmt::format("free {}", step.free.size());
      args["released_bytes"] = sim.live_during[s] - sim.live_after[s];
    }
    ojson event = {{"name", name}, {"cat", phase}, {"ph", "X"}, {"pid", 1}, {"tid", tid}};
    event["ts"] = time(ts);
    event["dur"] = time(dur);
    event["args"] = args;
    events.push_back(event);
    counter(ts, sim.live_during[s], has_measured ? &measured->live_during[s] : nullptr);
    counter(ts + dur, sim.live_after[s], has_measured ? &measured->live_after[s] : nullptr);
  }
  if (gpu_track) {
    for (const MeasuredTrace::Kernel& k : measured->kernels) {
      ojson args = ojson::object();
      if (k.step >= 0 && static_cast<size_t>(k.step) < n) {
        args["step"] = k.step;
        const Step& step = program.steps[k.step];
        if (step.IsRun()) args["op"] = g.ops[step.op].id;
      }
      events.push_back({{"name", k.name},
                        {"cat", "gpu"},
                        {"ph", "X"},
                        {"pid", 1},
                        {"tid", 6},
                        {"ts", k.start_us},
                        {"dur", k.dur_us},
                        {"args", args}});
    }
  }
  ojson doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return json_util::Dump(doc) + "\n";
}

}  // namespace memplan
