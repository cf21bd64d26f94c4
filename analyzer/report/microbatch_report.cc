#include "analyzer/report/microbatch_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analyzer/base/json_util.h"
#include "analyzer/base/units.h"
#include "analyzer/report/analyze_report.h"
#include "analyzer/report/plan_report.h"

namespace memplan {

std::string LossScale(int64_t micro, int64_t global_batch) {
  return fmt::format("{}/{} = {:.6g}", micro, global_batch,
                     static_cast<double>(micro) / static_cast<double>(global_batch));
}

namespace {

using ojson = nlohmann::ordered_json;

ojson BytesOrNull(int64_t bytes) { return bytes >= 0 ? ojson(bytes) : ojson(nullptr); }

ojson ChoiceJson(const MicroBatchChoice& c) {
  auto or_null = [&](int64_t v) { return c.found ? ojson(v) : ojson(nullptr); };
  ojson doc = {
      {"found", c.found},
      {"micro_batch", or_null(c.micro_batch)},
      {"accumulation_steps", or_null(c.accumulation_steps)},
      {"last_micro_batch", or_null(c.last_micro_batch)},
      {"balanced_micro_batch", or_null(c.balanced_micro_batch)},
      {"peak_bytes", or_null(c.peak_bytes)},
      {"last_peak_bytes", or_null(c.last_peak_bytes)},
      {"next_peak_bytes",
       c.found && c.next_peak_bytes >= 0 ? ojson(c.next_peak_bytes) : ojson(nullptr)},
      {"recompute_cost", c.recompute_cost},
      {"recompute_overhead", c.recompute_overhead},
      {"global_batch_cost", c.found ? ojson(c.global_batch_cost) : ojson(nullptr)},
      {"lowest_peak_bytes", c.found ? ojson(nullptr) : ojson(c.lowest_peak_bytes)},
      {"reserved_peak_bytes", BytesOrNull(c.found ? c.reserved_peak_bytes : -1)},
      {"next_reserved_peak_bytes",
       BytesOrNull(c.found && c.next_peak_bytes >= 0 ? c.next_reserved_peak_bytes : -1)},
      {"lowest_reserved_peak_bytes", BytesOrNull(c.found ? -1 : c.lowest_reserved_peak_bytes)}};
  if (!c.found && c.lowest_is_floor) doc["lowest_is_floor"] = true;  // only where it is
  return doc;
}

const MicroBatchChoice& Chosen(const MicroBatchResult& r) {
  return r.checkpointed_recommended ? r.checkpointed : r.baseline;
}

}  // namespace

std::string MicroBatchReportJson(const JointGraph& jg, const std::string& batch_symbol,
                                 const PlannerOptions& options, const MicroBatchResult& r) {
  const MicroBatchChoice& c = Chosen(r);
  const BatchPoint* at = c.found ? FindPoint(r, c.micro_batch) : nullptr;
  ojson doc = ReportHeader("plan", jg);
  doc["batch_symbol"] = batch_symbol;
  doc["global_batch"] = r.global_batch;
  doc["budget_bytes"] = r.budget_bytes;
  doc["budget_of"] = BudgetOfName(r.budget_of);
  doc["feasible"] = c.found;
  doc["recommended"] =
      c.found ? ojson(r.checkpointed_recommended ? "checkpointed" : "baseline") : ojson(nullptr);
  doc["micro_batch"] = c.found ? ojson(c.micro_batch) : ojson(nullptr);
  doc["accumulation_steps"] = c.found ? ojson(c.accumulation_steps) : ojson(nullptr);
  doc["last_micro_batch"] = c.found ? ojson(c.last_micro_batch) : ojson(nullptr);
  doc["loss_scale"] =
      c.found ? ojson(static_cast<double>(c.micro_batch) / r.global_batch) : ojson(nullptr);
  doc["last_loss_scale"] =
      c.found ? ojson(static_cast<double>(c.last_micro_batch) / r.global_batch) : ojson(nullptr);
  doc["recompute_overhead"] = c.recompute_overhead;
  doc["min_feasible_peak_bytes"] = c.found ? c.peak_bytes : r.checkpointed.lowest_peak_bytes;
  doc["predicted"] = {{"peak_bytes", c.found ? c.peak_bytes : r.checkpointed.lowest_peak_bytes},
                      {"baseline_peak_bytes", at ? at->baseline_peak_bytes : 0},
                      {"recompute_cost", c.recompute_cost},
                      {"cost_unit", CostUnit(options.cost)},
                      {"reserved_peak_bytes", BytesOrNull(r.reserved_peak_bytes)}};
  if (r.has_device && r.reserved_peak_bytes >= 0)
    doc["device_memory"] =
        DeviceJson(r.device, alloc::TotalOnDevice(r.device, r.reserved_peak_bytes));
  doc["parameter_gradient_bytes"] = r.parameter_gradient_bytes;
  doc["baseline"] = ChoiceJson(r.baseline);
  doc["checkpointed"] = ChoiceJson(r.checkpointed);
  doc["search"] = {
      {"method", r.search}, {"monotone", r.monotone}, {"evaluations", r.evaluated.size()}};
  ojson points = ojson::array();
  for (const BatchPoint& p : r.evaluated) {
    points.push_back({{"batch", p.batch},
                      {"baseline_peak_bytes", p.baseline_peak_bytes},
                      {"baseline_fits", p.baseline_fits},
                      {"planned", p.planned},
                      {"plan_peak_bytes", p.plan_peak_bytes},
                      {"plan_fits", p.plan_fits},
                      {"recompute_cost", p.recompute_cost},
                      {"step_cost", p.step_cost},
                      {"baseline_reserved_peak_bytes", BytesOrNull(p.baseline_reserved_bytes)},
                      {"plan_reserved_peak_bytes", BytesOrNull(p.plan_reserved_bytes)}});
    if (p.over_floor) points.back()["over_floor"] = true;  // only where it is
  }
  doc["evaluated"] = points;
  doc["warnings"] = jg.warnings;
  return json_util::Dump(doc, 2) + "\n";
}

std::string MicroBatchSummary(const JointGraph& jg, const std::string& batch_symbol,
                              const PlannerOptions& options, const MicroBatchResult& r) {
  std::string out;
  const char* unit = CostUnit(options.cost);
  out += fmt::format("memplan plan {} --global-batch {}\n", jg.file, r.global_batch);
  out += LoopLine(jg.graph);
  out += ParallelLine(jg);
  out += fmt::format("  budget    {} ({} bytes) {}, micro-batches over symbol \"{}\"\n",
                     FormatBytes(r.budget_bytes), r.budget_bytes, BudgetOfPhrase(r.budget_of),
                     batch_symbol);
  // The bytes the budget bounded, given a peak and a reserved peak.
  const bool of_device = r.budget_of == BudgetOf::kDevice;
  const char* bounded_name = of_device ? "on the device" : "reserved";
  auto bounded = [&](int64_t peak, int64_t reserved) {
    if (r.budget_of == BudgetOf::kAllocated) return FormatBytes(peak);
    return FormatBytes(of_device ? alloc::TotalOnDevice(r.device, reserved).total_bytes : reserved);
  };
  auto line = [&](const char* name, const MicroBatchChoice& c) {
    if (!c.found && c.lowest_is_floor) {
      out += fmt::format("  {:<9} no micro-batch fits: no program goes below {} at 1 (its floor)\n",
                         name, FormatBytes(c.lowest_peak_bytes));
      return;
    }
    if (!c.found) {
      out +=
          fmt::format("  {:<9} no micro-batch fits: {}{} at 1\n", name,
                      bounded(c.lowest_peak_bytes, c.lowest_reserved_peak_bytes),
                      r.budget_of == BudgetOf::kAllocated ? "" : std::string(" ") + bounded_name);
      return;
    }
    std::string last = c.last_micro_batch == c.micro_batch
                           ? std::string()
                           : fmt::format(", the last of {}", c.last_micro_batch);
    std::string next =
        c.next_peak_bytes >= 0
            ? fmt::format(" ({} at {})", bounded(c.next_peak_bytes, c.next_reserved_peak_bytes),
                          c.micro_batch + 1)
            : std::string();
    std::string bytes = r.budget_of == BudgetOf::kAllocated
                            ? fmt::format("peak {}{}", FormatBytes(c.peak_bytes), next)
                            : fmt::format("{} {}{}, peak {}", bounded_name,
                                          bounded(c.peak_bytes, c.reserved_peak_bytes), next,
                                          FormatBytes(c.peak_bytes));
    out += fmt::format("  {:<9} micro-batch {} x {} step{}{}: {}; recompute {:.1f}%\n", name,
                       c.micro_batch, c.accumulation_steps, c.accumulation_steps == 1 ? "" : "s",
                       last, bytes, 100 * c.recompute_overhead);
  };
  line("baseline", r.baseline);
  line("planned", r.checkpointed);
  const MicroBatchChoice& c = Chosen(r);
  if (c.found) {
    out += fmt::format(
        "  choose    {}: micro-batch {}, {} accumulation step{}, cost {:.4g} {} per global batch "
        "(baseline {}, checkpointed {})\n",
        r.checkpointed_recommended ? "checkpointed" : "baseline", c.micro_batch,
        c.accumulation_steps, c.accumulation_steps == 1 ? "" : "s", c.global_batch_cost, unit,
        r.baseline.found ? fmt::format("{:.4g}", r.baseline.global_batch_cost) : "-",
        r.checkpointed.found ? fmt::format("{:.4g}", r.checkpointed.global_batch_cost) : "-");
    if (r.reserved_peak_bytes >= 0)
      out += OverBudgetLine(r.budget_of, r.budget_bytes, r.reserved_peak_bytes,
                            r.has_device ? &r.device : nullptr, jg.graph.target_device,
                            fmt::format(" at micro-batch {}", c.micro_batch));
    out += fmt::format("  loss      scale each micro-batch's mean loss by {}",
                       LossScale(c.micro_batch, r.global_batch));
    if (c.last_micro_batch != c.micro_batch)
      out += fmt::format(", the last by {}", LossScale(c.last_micro_batch, r.global_batch));
    out += "\n";
    if (c.balanced_micro_batch != c.micro_batch)
      out += fmt::format(
          "  balance   micro-batches of {} take as many steps ({}) with sizes within one\n",
          c.balanced_micro_batch, c.accumulation_steps);
  }
  out += fmt::format(
      "  grads     {} of parameter gradients stay alive across micro-batches (they do not "
      "scale with the micro-batch)\n",
      FormatBytes(r.parameter_gradient_bytes));
  out += fmt::format("  search    {}, {} batch values evaluated{}\n", r.search, r.evaluated.size(),
                     r.monotone ? ""
                                : "; WARNING: peaks are not monotone in the batch, the "
                                  "micro-batch may not be the largest");
  return out;
}

}  // namespace memplan
