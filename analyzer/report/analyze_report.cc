#include "analyzer/report/analyze_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "analyzer/base/json_util.h"
#include "analyzer/base/units.h"
#include "analyzer/base/version.h"
#include "analyzer/report/chrome_trace.h"

namespace memplan {
namespace {

using ojson = nlohmann::ordered_json;

// A buffer is named by the tensor holding it, or by the tensor that
// allocated it when only views of it are alive (they are listed as held_by).
std::string EntryName(const Graph& g, const LiveBuffer& lb) {
  if (lb.workspace_of >= 0) return g.ops[lb.workspace_of].id + ":workspace";
  return g.tensors[g.IsView(lb.tensor) ? lb.owner : lb.tensor].id;
}

std::string HeldBy(const Graph& g, const LiveBuffer& lb) {
  return lb.tensor >= 0 && g.IsView(lb.tensor) ? g.tensors[lb.tensor].id : std::string();
}

int EntryProducer(const Graph& g, const LiveBuffer& lb) {
  return lb.workspace_of >= 0 ? lb.workspace_of : g.tensors[lb.owner].producer;
}

TensorKind EntryKind(const Graph& g, const LiveBuffer& lb) {
  return lb.owner >= 0 ? g.tensors[lb.owner].kind : TensorKind::kTemporary;
}

}  // namespace

nlohmann::ordered_json ReportHeader(const char* command, const JointGraph& jg) {
  nlohmann::ordered_json r;
  r["format"] = "memplan.report/1";
  r["command"] = command;
  r["memplan_version"] = MemplanVersion();
  r["graph"] = GraphReportJson(jg);
  return r;
}

nlohmann::ordered_json GraphReportJson(const JointGraph& jg) {
  const Graph& g = jg.graph;
  const ojson held = g.outputs_held ? ojson(*g.outputs_held) : ojson(nullptr);
  nlohmann::ordered_json r = {{"name", g.name},
                              {"file", jg.file},
                              {"style", jg.lowered ? "forward" : "joint"},
                              {"ops", jg.input_ops},
                              {"tensors", jg.input_tensors},
                              {"joint_ops", g.ops.size()},
                              {"joint_tensors", g.tensors.size()},
                              {"outputs_held", held}};  // null: the graph does not say
  if (!g.compile.empty()) r["compile"] = g.compile;
  const parallel::RankStats& p = jg.parallel;
  if (p.strategy != parallel::Strategy::kNone) {
    nlohmann::ordered_json block = {{"strategy", parallel::StrategyName(p.strategy)},
                                    {"world_size", p.world_size},
                                    {"rank", p.rank},
                                    {"parameter_bytes", p.parameter_bytes},
                                    {"optimizer_state_bytes", p.optimizer_state_bytes}};
    if (p.strategy == parallel::Strategy::kFsdp) {
      block["reshard_after_forward"] = p.reshard_after_forward;
      block["units"] = p.units;
      if (!p.param_dtype.empty()) block["param_dtype"] = p.param_dtype;
      if (!p.reduce_dtype.empty()) block["reduce_dtype"] = p.reduce_dtype;
    } else if (p.strategy == parallel::Strategy::kPipeline) {
      block["schedule"] = parallel::ScheduleName(p.schedule);
      block["micro_batches"] = p.micro_batches;
      block["in_flight"] = p.in_flight;
      block["received_buffer_bytes"] = p.received_buffer_bytes;
      block["stage_starts"] = p.stage_starts;
    } else {
      block["gradient_as_bucket_view"] = p.gradient_as_bucket_view;
      block["buckets"] = p.buckets;
      block["bucket_bytes"] = p.bucket_bytes;
    }
    r["parallel"] = block;
  }
  return r;
}

std::string OutputsHeldPhrase(std::optional<bool> outputs_held) {
  if (!outputs_held) return "";
  return *outputs_held ? "output held through the backward (source.outputs_held)"
                       : "output freed once the loss is computed (source.outputs_held false)";
}

std::string LoopLine(const Graph& g) {
  std::string out;
  if (!g.compile.empty())
    out += "  compiled  torch.compile, backend " + g.compile +
           " (source.compile): its forward and backward graphs as they run\n";
  if (g.outputs_held) out += "  loop      " + OutputsHeldPhrase(g.outputs_held) + "\n";
  return out;
}

std::string ParallelLine(const JointGraph& jg) {
  const parallel::RankStats& p = jg.parallel;
  if (p.strategy == parallel::Strategy::kNone) return "";
  if (p.strategy == parallel::Strategy::kPipeline)
    return fmt::format(
        "  stage     {} of {} (from {}), {} x {} micro-batches, {} in flight: parameters {}, "
        "optimizer state {}, receive buffers {}\n",
        p.rank, p.world_size, p.stage_starts[p.rank], parallel::ScheduleName(p.schedule),
        p.micro_batches, p.in_flight, FormatBytes(p.parameter_bytes),
        FormatBytes(p.optimizer_state_bytes), FormatBytes(p.received_buffer_bytes));
  std::string out =
      fmt::format("  rank      {} of {} under {}: parameters {}, optimizer state {}", p.rank,
                  p.world_size, parallel::StrategyName(p.strategy), FormatBytes(p.parameter_bytes),
                  FormatBytes(p.optimizer_state_bytes));
  if (p.strategy == parallel::Strategy::kFsdp)
    out += fmt::format(", {} sharded units{}", p.units.size(),
                       p.reshard_after_forward ? ", resharded after forward" : "") +
           (p.param_dtype.empty() ? "" : ", gathered as " + p.param_dtype) +
           (p.reduce_dtype.empty() ? "" : ", reduced as " + p.reduce_dtype);
  else
    out += fmt::format(", {} gradient buckets {}{}", p.buckets, FormatBytes(p.bucket_bytes),
                       p.gradient_as_bucket_view ? " (gradients are views of them)" : "");
  return out + "\n";
}

nlohmann::ordered_json LiveAtPeakJson(const Graph& g, const SimResult& sim, int top) {
  ojson live = ojson::array();
  for (size_t i = 0; i < sim.live_at_peak.size() && static_cast<int>(i) < top; ++i) {
    const LiveBuffer& lb = sim.live_at_peak[i];
    int producer = EntryProducer(g, lb);
    live.push_back({{"tensor", EntryName(g, lb)},
                    {"bytes", lb.bytes},
                    {"kind", TensorKindName(EntryKind(g, lb))},
                    {"producer", producer >= 0 ? ojson(g.ops[producer].id) : ojson(nullptr)},
                    {"scope", producer >= 0 ? g.ops[producer].scope : std::string()}});
    std::string held_by = HeldBy(g, lb);
    if (!held_by.empty()) live.back()["held_by"] = held_by;
  }
  return live;
}

std::string AnalyzeReportJson(const JointGraph& jg, const Analysis& a, int top) {
  const Graph& g = jg.graph;
  const SimResult& sim = a.sim;
  ojson r = ReportHeader("analyze", jg);
  r["accumulation"] = AccumulationModeName(a.accumulation);
  ojson symbols = ojson::object();
  for (const auto& [name, value] : g.symbols) symbols[name] = value;
  r["symbols"] = symbols;
  r["peak_bytes"] = sim.peak_bytes;
  r["peak_step"] = sim.peak_step;
  const int peak_op = sim.peak_step >= 0 ? a.program.steps[sim.peak_step].op : -1;
  r["peak_op"] = peak_op >= 0 ? ojson(g.ops[peak_op].id) : ojson(nullptr);
  const char* phase = StepPhase(g, a.program, sim, sim.peak_step);
  r["peak_phase"] = phase ? ojson(phase) : ojson(nullptr);
  r["lower_bound_bytes"] = a.lower_bound_bytes;
  r["resident_bytes"] = sim.start_bytes;
  r["steps"] = a.program.steps.size();
  if (a.has_reserved) r["reserved"] = ReservedJson(a.reserved);
  if (a.has_device) r["device_memory"] = DeviceJson(a.device, a.device_total);
  ojson by_kind = ojson::object();
  for (int k = 0; k < kNumTensorKinds; ++k)
    by_kind[TensorKindName(static_cast<TensorKind>(k))] = sim.peak_by_kind[k];
  r["by_category"] = by_kind;
  r["live_at_peak"] = LiveAtPeakJson(g, sim, top);
  r["live_at_peak_count"] = sim.live_at_peak.size();
  r["warnings"] = jg.warnings;
  return json_util::Dump(r, 2) + "\n";
}

ojson ReservedJson(const alloc::ReservedReport& rr) {
  return {{"alloc_conf", rr.alloc_conf},
          {"peak_bytes", rr.reserved_peak_bytes},
          {"allocated_peak_bytes", rr.allocated_peak_bytes},
          {"reserved_minus_allocated_bytes", rr.reserved_minus_allocated_at_reserved_peak},
          {"largest_free_block_bytes", rr.largest_free_block_at_reserved_peak},
          {"segments", rr.segments},
          {"iterations", rr.iterations}};
}

// Against the allocation-level peak: what the caching allocator holds beyond
// it (the gap at the reserved peak's own moment is in the JSON report).
std::string ReservedLine(const alloc::ReservedReport& rr, int64_t peak_bytes) {
  return fmt::format(
      "  reserved  {} at most by PyTorch's caching allocator (steady state, {} steps): {} above "
      "the peak, {} segment{}{}\n",
      FormatBytes(rr.reserved_peak_bytes), rr.iterations,
      FormatBytes(std::max<int64_t>(0, rr.reserved_peak_bytes - peak_bytes)), rr.segments,
      rr.segments == 1 ? "" : "s",
      rr.alloc_conf.empty() ? "" : "; PYTORCH_CUDA_ALLOC_CONF=" + rr.alloc_conf);
}

DeviceDefaults DeviceDefaultsOf(const alloc::DeviceMemory& d) {
  DeviceDefaults out;
  out.context = d.cuda_context_is_estimate;
  alloc::DeviceMemory preset;
  if (!alloc::FindDeviceMemory(d.name, &preset)) return out;
  out.capacity = d.capacity_bytes == preset.capacity_bytes;
  out.workspace = d.cublas_workspace_bytes == preset.cublas_workspace_bytes &&
                  d.cublaslt_workspace_bytes == preset.cublaslt_workspace_bytes;
  return out;
}

ojson DeviceJson(const alloc::DeviceMemory& d, const alloc::DeviceTotal& t) {
  const DeviceDefaults defaults = DeviceDefaultsOf(d);
  return {{"preset", d.name},
          {"capacity_bytes", t.capacity_bytes},
          {"capacity_is_preset", defaults.capacity},
          {"context_bytes", t.cuda_context_bytes},
          {"context_is_estimate", d.cuda_context_is_estimate},
          {"workspace_bytes", d.cublas_workspace_bytes + d.cublaslt_workspace_bytes},
          {"cublas_workspace_bytes", d.cublas_workspace_bytes},
          {"cublaslt_workspace_bytes", d.cublaslt_workspace_bytes},
          {"workspace_is_default", defaults.workspace},
          {"reserved_peak_bytes", t.reserved_peak_bytes},
          {"total_peak_bytes", t.total_bytes},
          {"fits", t.fits}};
}

std::string DeviceLine(const alloc::DeviceMemory& d, const alloc::DeviceTotal& t) {
  const int64_t workspaces = d.cublas_workspace_bytes + d.cublaslt_workspace_bytes;
  std::string verdict =
      t.fits ? fmt::format("fits, {} to spare", FormatBytes(t.capacity_bytes - t.total_bytes))
             : fmt::format("does NOT fit, {} over", FormatBytes(t.total_bytes - t.capacity_bytes));
  return fmt::format(
      "  device    {} of {} on {}: reserved {} (with {} of cuBLAS workspaces) + CUDA context {}{}: "
      "{}\n",
      FormatBytes(t.total_bytes), FormatBytes(t.capacity_bytes), d.name,
      FormatBytes(t.reserved_peak_bytes), FormatBytes(workspaces),
      FormatBytes(t.cuda_context_bytes), d.cuda_context_is_estimate ? " (estimate)" : "", verdict);
}

std::string AnalyzeSummary(const JointGraph& jg, const Analysis& a, int top) {
  const Graph& g = jg.graph;
  const SimResult& sim = a.sim;
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  line(fmt::format("memplan analyze {}", jg.file));
  if (jg.lowered)
    line(
        fmt::format("  graph     {}: {} ops, {} tensors, forward-only; lowered to {} ops, {} "
                    "tensors",
                    g.name.empty() ? "(unnamed)" : g.name, jg.input_ops, jg.input_tensors,
                    g.ops.size(), g.tensors.size()));
  else
    line(fmt::format("  graph     {}: {} ops, {} tensors, joint",
                     g.name.empty() ? "(unnamed)" : g.name, g.ops.size(), g.tensors.size()));
  out += LoopLine(g);
  out += ParallelLine(jg);
  line(fmt::format("  program   baseline, {} steps, gradient accumulation {}",
                   a.program.steps.size(), AccumulationModeName(a.accumulation)));
  if (sim.peak_step >= 0) {
    const Op& op = g.ops[a.program.steps[sim.peak_step].op];
    line(fmt::format("  peak      {} ({} bytes) at step {}, while \"{}\" runs ({})",
                     FormatBytes(sim.peak_bytes), sim.peak_bytes, sim.peak_step, op.id,
                     StepPhase(g, a.program, sim, sim.peak_step)));
  } else {
    line(fmt::format("  peak      {} ({} bytes) before the first step", FormatBytes(sim.peak_bytes),
                     sim.peak_bytes));
  }
  if (a.has_reserved) out += ReservedLine(a.reserved, sim.peak_bytes);
  if (a.has_device) out += DeviceLine(a.device, a.device_total);
  line(fmt::format("  floor     {}: no schedule or recomputation can go lower",
                   FormatBytes(a.lower_bound_bytes)));
  line(fmt::format("  resident  {} (inputs, parameters, buffers, optimizer state)",
                   FormatBytes(sim.start_bytes)));
  line("");
  line("alive at the peak, by kind:");
  for (int k = 0; k < kNumTensorKinds; ++k) {
    int64_t b = sim.peak_by_kind[k];
    if (b == 0) continue;
    double pct = sim.peak_bytes > 0 ? 100.0 * static_cast<double>(b) / sim.peak_bytes : 0.0;
    line(fmt::format("  {:<16}{:>12}  {:5.1f}%", TensorKindName(static_cast<TensorKind>(k)),
                     FormatBytes(b), pct));
  }
  line("");
  size_t shown = std::min<size_t>(sim.live_at_peak.size(), static_cast<size_t>(std::max(top, 0)));
  line(
      fmt::format("largest buffers alive at the peak ({} of {}):", shown, sim.live_at_peak.size()));
  line(fmt::format("  {:>12}  {:<15} {:<28} {:<24} {}", "bytes", "kind", "tensor", "producer",
                   "scope"));
  for (size_t i = 0; i < shown; ++i) {
    const LiveBuffer& lb = sim.live_at_peak[i];
    int producer = EntryProducer(g, lb);
    std::string held_by = HeldBy(g, lb);
    std::string name = EntryName(g, lb) + (held_by.empty() ? "" : " (via " + held_by + ")");
    line(fmt::format("  {:>12}  {:<15} {:<28} {:<24} {}", FormatBytes(lb.bytes),
                     TensorKindName(EntryKind(g, lb)), name,
                     producer >= 0 ? g.ops[producer].id : "-",
                     producer >= 0 ? g.ops[producer].scope : ""));
  }
  return out;
}

}  // namespace memplan
