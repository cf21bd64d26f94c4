#include "analyzer/optimizer_state.h"

#include <fmt/format.h>

#include <vector>

namespace memplan {

bool ParseOptimizerKind(std::string_view name, OptimizerKind* out) {
  if (name == "none")
    *out = OptimizerKind::kNone;
  else if (name == "sgd")
    *out = OptimizerKind::kSgd;
  else if (name == "momentum")
    *out = OptimizerKind::kMomentum;
  else if (name == "adam")
    *out = OptimizerKind::kAdam;
  else if (name == "adamw")
    *out = OptimizerKind::kAdamW;
  else
    return false;
  return true;
}

const char* OptimizerKindName(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kNone:
      return "none";
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kMomentum:
      return "momentum";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "none";
}

std::string OptimizerLabel(const OptimizerOptions& o) {
  std::string s = OptimizerKindName(o.kind);
  if (o.kind != OptimizerKind::kNone && o.master_fp32) s += "+master_fp32";
  return s;
}

bool AddOptimizerState(const OptimizerOptions& options, Graph* g, OptimizerStats* stats,
                       std::string* err) {
  *stats = OptimizerStats();
  if (options.kind == OptimizerKind::kNone) return true;
  for (const Op& op : g->ops)
    if (op.phase == Phase::kOptimizer) {
      *err =
          fmt::format("--optimizer: the graph already has an optimizer phase (op \"{}\")", op.id);
      return false;
    }
  for (const Tensor& t : g->tensors)
    if (t.kind == TensorKind::kOptimizerState) {
      *err =
          fmt::format("--optimizer: the graph already has optimizer state (tensor \"{}\")", t.id);
      return false;
    }
  const std::vector<int> grad = g->FinalParameterGradients();
  const char* name = OptimizerKindName(options.kind);
  const size_t n_tensors = g->tensors.size();
  for (size_t p = 0; p < n_tensors; ++p) {
    if (grad[p] < 0) continue;
    const Tensor param = g->tensors[p];
    const bool master = options.master_fp32 && IsFloating(param.dtype) &&
                        DTypeSize(param.dtype) < DTypeSize(DType::kFloat32);
    const DType state_dtype = options.master_fp32 ? DType::kFloat32 : param.dtype;
    std::vector<std::string> suffixes;
    if (master) suffixes.push_back("master");
    if (options.kind == OptimizerKind::kMomentum) suffixes.push_back("momentum_buffer");
    if (options.kind == OptimizerKind::kAdam || options.kind == OptimizerKind::kAdamW) {
      suffixes.push_back("exp_avg");
      suffixes.push_back("exp_avg_sq");
    }
    Op op;
    op.id = fmt::format("{}.{}_step", param.id, name);
    op.type = fmt::format("{}_step", name);
    op.phase = Phase::kOptimizer;
    op.inputs = {static_cast<int>(p), grad[p]};
    for (const std::string& suffix : suffixes) {
      Tensor s;
      s.id = param.id + "." + suffix;
      s.shape = param.shape;
      s.dtype = suffix == "master" ? DType::kFloat32 : state_dtype;
      s.kind = TensorKind::kOptimizerState;
      int64_t bytes = 0;
      if (!CheckedMul(param.numel, DTypeSize(s.dtype), &bytes)) {
        *err = fmt::format("--optimizer: the state of \"{}\" overflows 64-bit bytes", param.id);
        return false;
      }
      g->tensors.push_back(std::move(s));
      int t = static_cast<int>(g->tensors.size()) - 1;
      if (g->IndexTensor(t) >= 0) {
        *err = fmt::format("--optimizer: tensor id \"{}\" is already taken", g->tensors[t].id);
        return false;
      }
      op.inputs.push_back(t);
      stats->state_bytes += bytes;
      if (suffix == "master") stats->master_bytes += bytes;
    }
    if (options.kind == OptimizerKind::kAdam || options.kind == OptimizerKind::kAdamW)
      op.workspace_bytes = param.numel * DTypeSize(state_dtype);
    stats->workspace_bytes = std::max(stats->workspace_bytes, op.workspace_bytes);
    g->ops.push_back(std::move(op));
    if (g->IndexOp(static_cast<int>(g->ops.size()) - 1) >= 0) {
      *err = fmt::format("--optimizer: op id \"{}\" is already taken", g->ops.back().id);
      return false;
    }
    ++stats->parameters;
  }
  return g->Finalize(err);
}

}  // namespace memplan
