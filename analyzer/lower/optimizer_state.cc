#include "analyzer/lower/optimizer_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "analyzer/base/enum_table.h"

namespace memplan {

namespace {

constexpr EnumName<OptimizerKind> kOptimizerKinds[] = {
    {OptimizerKind::kNone, "none"},         {OptimizerKind::kSgd, "sgd"},
    {OptimizerKind::kMomentum, "momentum"}, {OptimizerKind::kAdam, "adam"},
    {OptimizerKind::kAdamW, "adamw"},
};

}  // namespace

bool ParseOptimizerKind(std::string_view name, OptimizerKind* out) {
  return ParseEnum(kOptimizerKinds, name, out);
}

const char* OptimizerKindName(OptimizerKind k) { return NameOf(kOptimizerKinds, k, "none"); }

std::string OptimizerLabel(const OptimizerOptions& o) {
  std::string s = OptimizerKindName(o.kind);
  if (o.kind != OptimizerKind::kNone && o.master_fp32) s += "+master_fp32";
  return s;
}

OptimizerImpl ResolveOptimizerImpl(OptimizerImpl impl, std::string_view target_device) {
  if (impl != OptimizerImpl::kAuto) return impl;
  return target_device == "cuda" ? OptimizerImpl::kForeach : OptimizerImpl::kSingleTensor;
}

namespace {

const char* ImplInfix(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::kForeach:
      return "_foreach";
    case OptimizerImpl::kFused:
      return "_fused";
    default:
      return "";
  }
}

bool IsAdam(OptimizerKind k) { return k == OptimizerKind::kAdam || k == OptimizerKind::kAdamW; }

}  // namespace

int64_t SetOptimizerWorkspaces(Graph* g) {
  // The adam/adamw update ops by implementation, in op order; each one's
  // exp_avg_sq is its last input (see AddOptimizerState).
  std::vector<int> single, multi;
  for (size_t o = 0; o < g->ops.size(); ++o) {
    Op& op = g->ops[o];
    if (op.phase != Phase::kOptimizer || op.inputs.empty()) continue;
    const std::string_view type = op.type;
    if (type == "adam_step" || type == "adamw_step")
      single.push_back(static_cast<int>(o));
    else if (type == "adam_foreach_step" || type == "adamw_foreach_step")
      multi.push_back(static_cast<int>(o));
    else if (type == "adam_fused_step" || type == "adamw_fused_step")
      op.workspace_bytes = 0;
  }
  auto sq_bytes = [&](int o) { return g->tensors[g->ops[o].inputs.back()].bytes; };
  // _single_tensor_adam: sqrt + div of this parameter, the previous denom.
  int64_t previous = 0;
  for (int o : single) {
    g->ops[o].workspace_bytes = 2 * sq_bytes(o) + previous;
    previous = sq_bytes(o);
  }
  // _multi_tensor_adam: one _foreach_sqrt per (device, dtype) group, in the
  // order the groups first appear (one device per graph).
  std::vector<std::pair<DType, int64_t>> groups;  // dtype, sum of b
  std::vector<int> first;                         // each group's first op
  for (int o : multi) {
    const DType d = g->tensors[g->ops[o].inputs.back()].dtype;
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == d; });
    if (it == groups.end()) {
      groups.push_back({d, 0});
      first.push_back(o);
      it = groups.end() - 1;
    }
    it->second += sq_bytes(o);
    g->ops[o].workspace_bytes = 0;
  }
  for (size_t k = 0; k < groups.size(); ++k)
    g->ops[first[k]].workspace_bytes = groups[k].second + (k > 0 ? groups[k - 1].second : 0);
  int64_t largest = 0;
  for (const Op& op : g->ops)
    if (op.phase == Phase::kOptimizer) largest = std::max(largest, op.workspace_bytes);
  return largest;
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
  stats->impl = ResolveOptimizerImpl(options.impl, g->target_device);
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
    if (IsAdam(options.kind)) {
      suffixes.push_back("exp_avg");
      suffixes.push_back("exp_avg_sq");
    }
    Op op;
    op.id = fmt::format("{}.{}_step", param.id, name);
    op.type = fmt::format("{}{}_step", name, ImplInfix(stats->impl));
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
    g->ops.push_back(std::move(op));
    if (g->IndexOp(static_cast<int>(g->ops.size()) - 1) >= 0) {
      *err = fmt::format("--optimizer: op id \"{}\" is already taken", g->ops.back().id);
      return false;
    }
    ++stats->parameters;
  }
  if (!g->Finalize(err)) return false;
  // Workspaces need the state's bytes; the second Finalize checks their sum.
  stats->workspace_bytes = SetOptimizerWorkspaces(g);
  return g->Finalize(err);
}

}  // namespace memplan
