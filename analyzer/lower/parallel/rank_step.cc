#include "analyzer/lower/parallel/rank_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "analyzer/ir/scope.h"
#include "analyzer/lower/optimizer_state.h"

namespace memplan::parallel {

bool ParseStrategy(std::string_view name, Strategy* out) {
  return ParseEnum(kStrategyNames, name, out);
}

namespace {

int AddTensor(Graph* g, Tensor t, std::string* err) {
  g->tensors.push_back(std::move(t));
  const int index = static_cast<int>(g->tensors.size()) - 1;
  if (g->IndexTensor(index) >= 0) {
    *err = fmt::format("tensor id \"{}\" is already taken", g->tensors[index].id);
    return -1;
  }
  return index;
}

// Rebuilds the op list with `before[i]` ahead of op i and `after[i]` behind
// it; the op index is rebuilt by Finalize.
void InsertOps(Graph* g, std::vector<std::vector<Op>>& before,
               std::vector<std::vector<Op>>& after) {
  std::vector<Op> ops;
  ops.reserve(g->ops.size() * 2);
  for (size_t i = 0; i < g->ops.size(); ++i) {
    for (Op& op : before[i]) ops.push_back(std::move(op));
    ops.push_back(std::move(g->ops[i]));
    for (Op& op : after[i]) ops.push_back(std::move(op));
  }
  g->ops = std::move(ops);
  g->op_index.Clear();
}

// Drops the tensors marked in `drop` (nothing may still refer to them) and
// renumbers the rest.
void RemoveTensors(Graph* g, const std::vector<bool>& drop) {
  std::vector<int> index(g->tensors.size(), -1);
  std::vector<Tensor> kept;
  for (size_t t = 0; t < g->tensors.size(); ++t) {
    if (drop[t]) continue;
    index[t] = static_cast<int>(kept.size());
    kept.push_back(std::move(g->tensors[t]));
  }
  auto remap = [&](int& t) {
    if (t >= 0) t = index[t];
  };
  for (Tensor& t : kept) {
    remap(t.alias_of);
    remap(t.grad_of);
  }
  for (Op& op : g->ops) {
    for (int& t : op.inputs) remap(t);
    for (int& t : op.outputs) remap(t);
    for (int& t : op.saves) remap(t);
  }
  for (int& t : g->outputs) remap(t);
  g->tensors = std::move(kept);
  g->tensor_index.Clear();
}

int64_t Bytes(const Graph& g, int t) { return g.tensors[t].bytes; }

// A flat buffer of a collective, in bytes.
int AddFlat(Graph* g, const std::string& id, int64_t bytes, std::string* err) {
  Tensor flat;
  flat.id = id;
  flat.shape = {Dim{bytes, ""}};
  flat.dtype = DType::kUInt8;
  flat.kind = TensorKind::kTemporary;
  return AddTensor(g, std::move(flat), err);
}

// DDP's buckets: parameters with a gradient in reverse order, grouped by
// dtype, each bucket closed once it reaches its cap (the first 1 MiB).
bool AddBuckets(const ParallelOptions& options, Graph* g, RankStats* stats, std::string* err) {
  const std::vector<int> grad = g->FinalParameterGradients();
  struct Open {
    int64_t numel = 0, bytes = 0;
    std::vector<int> params;
    int closed = 0;
  };
  std::map<DType, Open> open;
  std::vector<std::pair<DType, std::vector<int>>> buckets;
  std::vector<int64_t> bucket_numel;
  auto close = [&](DType dtype, Open& b) {
    buckets.emplace_back(dtype, b.params);
    bucket_numel.push_back(b.numel);
    b = Open{0, 0, {}, b.closed + 1};
  };
  for (int p = static_cast<int>(g->tensors.size()) - 1; p >= 0; --p) {
    if (grad[p] < 0) continue;
    const DType dtype = g->tensors[grad[p]].dtype;
    Open& b = open[dtype];
    b.params.push_back(p);
    b.numel += g->tensors[grad[p]].numel;
    b.bytes += Bytes(*g, grad[p]);
    const int64_t cap = b.closed == 0 ? kDdpFirstBucketBytes : options.bucket_cap_bytes;
    if (b.bytes >= cap) close(dtype, b);
  }
  for (auto& [dtype, b] : open)
    if (!b.params.empty()) close(dtype, b);
  if (buckets.empty()) {
    *err = "the graph has no parameter gradients for DDP to reduce";
    return false;
  }
  std::vector<int> bucket_of(g->tensors.size(), -1), bucket_tensors;
  for (size_t k = 0; k < buckets.size(); ++k) {
    Tensor t;
    t.id = fmt::format("ddp.bucket.{}", k);
    t.shape = {Dim{bucket_numel[k], ""}};
    t.dtype = buckets[k].first;
    t.kind = TensorKind::kBuffer;
    const int index = AddTensor(g, std::move(t), err);
    if (index < 0) return false;
    bucket_tensors.push_back(index);
    for (int p : buckets[k].second) bucket_of[p] = index;
  }
  stats->buckets = static_cast<int64_t>(buckets.size());
  if (!g->Finalize(err)) return false;
  for (int t : bucket_tensors) stats->bucket_bytes += g->tensors[t].bytes;
  if (!options.gradient_as_bucket_view) return true;
  // Gradients as bucket views: each final gradient is copied into its
  // bucket right after it is made and freed; the optimizer reads the bucket.
  std::vector<std::vector<Op>> before(g->ops.size()), after(g->ops.size());
  std::vector<int> bucket_for_grad(g->tensors.size(), -1);
  for (size_t p = 0; p < grad.size(); ++p) {
    if (grad[p] < 0) continue;
    const int gt = grad[p];
    Op copy;
    copy.id = fmt::format("ddp.copy_to_bucket.{}", g->tensors[p].id);
    copy.type = "ddp_copy_to_bucket";
    copy.phase = Phase::kBackward;
    copy.inputs = {gt, bucket_of[p]};
    after[g->tensors[gt].producer].push_back(std::move(copy));
    bucket_for_grad[gt] = bucket_of[p];
  }
  for (Op& op : g->ops) {
    if (op.phase != Phase::kOptimizer) continue;
    for (int& t : op.inputs)
      if (bucket_for_grad[t] >= 0) t = bucket_for_grad[t];
  }
  for (size_t p = 0; p < grad.size(); ++p)
    if (grad[p] >= 0) g->tensors[grad[p]].grad_of = -1;  // no longer kept to the end
  InsertOps(g, before, after);
  return true;
}

// ZeroRedundancyOptimizer's partition; keeps the state and update ops of
// `rank`'s parameters.
bool ShardOptimizerState(const ParallelOptions& options, Graph* g, RankStats* stats,
                         std::string* err) {
  std::vector<int> params;  // updated parameters, in op order
  for (const Op& op : g->ops)
    if (op.phase == Phase::kOptimizer && !op.inputs.empty()) params.push_back(op.inputs[0]);
  if (params.empty()) {
    *err = "it shards the optimizer state, and the step has none: give --optimizer";
    return false;
  }
  std::vector<int> sorted = params;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](int a, int b) { return g->tensors[a].numel > g->tensors[b].numel; });
  std::vector<int64_t> numel(options.world_size, 0), state(options.world_size, 0);
  std::vector<int> owner(g->tensors.size(), -1);
  for (int p : sorted) {
    const int r = static_cast<int>(std::min_element(numel.begin(), numel.end()) - numel.begin());
    owner[p] = r;
    numel[r] += g->tensors[p].numel;
  }
  for (const Op& op : g->ops) {
    if (op.phase != Phase::kOptimizer || op.inputs.empty()) continue;
    for (int t : op.inputs)
      if (g->tensors[t].kind == TensorKind::kOptimizerState)
        state[owner[op.inputs[0]]] += g->tensors[t].bytes;
  }
  int64_t rank = options.rank;
  if (rank < 0) rank = std::max_element(state.begin(), state.end()) - state.begin();
  stats->rank = rank;
  // The rank's update ops run where the first one stood, in the order
  // ZeroRedundancyOptimizer hands its local optimizer the parameters:
  // descending numel, stable (_partition_parameters).
  std::vector<int> rank_of_sorted(g->tensors.size(), 0);
  for (size_t i = 0; i < sorted.size(); ++i) rank_of_sorted[sorted[i]] = static_cast<int>(i);
  std::vector<bool> drop(g->tensors.size(), false);
  std::vector<Op> ops, kept_updates;
  size_t updates_at = std::string::npos;
  for (Op& op : g->ops) {
    if (op.phase == Phase::kOptimizer && !op.inputs.empty()) {
      if (updates_at == std::string::npos) updates_at = ops.size();
      if (owner[op.inputs[0]] != rank) {
        for (int t : op.inputs)
          if (g->tensors[t].kind == TensorKind::kOptimizerState) drop[t] = true;
      } else {
        kept_updates.push_back(std::move(op));
      }
      continue;
    }
    ops.push_back(std::move(op));
  }
  std::stable_sort(kept_updates.begin(), kept_updates.end(), [&](const Op& a, const Op& b) {
    return rank_of_sorted[a.inputs[0]] < rank_of_sorted[b.inputs[0]];
  });
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(updates_at),
             std::make_move_iterator(kept_updates.begin()),
             std::make_move_iterator(kept_updates.end()));
  g->ops = std::move(ops);
  g->op_index.Clear();
  RemoveTensors(g, drop);
  if (!g->Finalize(err)) return false;
  SetOptimizerWorkspaces(g);  // the previous parameter is now the rank's
  return g->Finalize(err);    // checks the workspaces' sum, lays them out again
}

struct Unit {
  std::string name;         // "" for the root
  std::vector<int> params;  // in tensor order
  int first_forward = -1;   // op index
  int first_backward = -1;  // op index of the first backward op reading a parameter
  int pre_backward = -1;    // op index where its pre-backward hook runs (see Fsdp)
};

// The unit (module) a scope belongs to: the longest listed module that is a
// component-wise prefix of it, or ScopePrefix at `depth`; a scope of fewer
// components (an embedding, a final norm or head beside the blocks) is no
// module at that depth: the root's ("").
std::string UnitOf(std::string_view scope, const ParallelOptions& options) {
  if (options.shard_modules.empty()) {
    const int64_t components = scope.empty() ? 0 : 1 + std::count(scope.begin(), scope.end(), '.');
    return components < options.shard_depth ? "" : ScopePrefix(scope, options.shard_depth);
  }
  std::string best;
  for (const std::string& m : options.shard_modules)
    if (InScope(scope, m) && m.size() > best.size()) best = m;
  return best;
}

// Each parameter's unit: the module of all its forward readers, else the
// root ("").
std::vector<std::string> ParameterUnits(const Graph& g, const ParallelOptions& options) {
  std::vector<std::string> unit_of(g.tensors.size());
  std::vector<int> state(g.tensors.size(), 0);  // 0 unread, 1 one unit, 2 root
  for (const Op& op : g.ops) {
    if (op.phase != Phase::kForward) continue;
    const std::string unit = UnitOf(op.scope, options);
    for (int p : op.inputs) {
      if (g.tensors[p].kind != TensorKind::kParameter) continue;
      if (state[p] == 0) {
        unit_of[p] = unit;
        state[p] = unit.empty() ? 2 : 1;
      } else if (state[p] == 1 && unit_of[p] != unit) {
        unit_of[p] = "";
        state[p] = 2;
      }
    }
  }
  return unit_of;
}

// The units FSDP users wrap are the repeated blocks of a model: the
// shallowest depth at which a module holding parameters is a numbered child
// ("h.0" in a GPT, "lm.model.layers.0" in a wrapped Hugging Face Llama,
// "layer4.0" in a ResNet); without one, the shallowest depth at which no
// unit, the root included, holds more than half of the parameter bytes; else
// 2.
int AutoShardDepth(const Graph& g) {
  int64_t total = 0;
  for (const Tensor& t : g.tensors)
    if (t.kind == TensorKind::kParameter) total += t.bytes;
  auto numbered = [](const std::string& unit) {
    const size_t dot = unit.rfind('.');
    const std::string last = dot == std::string::npos ? unit : unit.substr(dot + 1);
    return !last.empty() &&
           std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  int half = -1;
  for (int depth = 1; depth <= kMaxAutoShardDepth; ++depth) {
    ParallelOptions o;
    o.shard_depth = depth;
    const std::vector<std::string> unit_of = ParameterUnits(g, o);
    std::map<std::string, int64_t> bytes;
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (g.tensors[t].kind == TensorKind::kParameter) bytes[unit_of[t]] += g.tensors[t].bytes;
    int64_t largest = 0;
    for (const auto& [unit, b] : bytes) {
      if (!unit.empty() && numbered(unit)) return depth;
      largest = std::max(largest, b);
    }
    if (half < 0 && 2 * largest <= total) half = depth;
  }
  return half > 0 ? half : 2;
}

// FSDP2 on a joint graph (rank_step.h): finds the units, adds each unit's
// collectives and moves the readers to the unsharded copies. The phases run
// in order from Run() and share the state below.
class FsdpRewrite {
 public:
  FsdpRewrite(const ParallelOptions& options, Graph* g, RankStats* stats, std::string* err)
      : options_(options),
        world_(options.world_size),
        g_(g),
        stats_(stats),
        err_(err),
        n_tensors_(g->tensors.size()) {}

  bool Run() {
    if (!CheckGraph()) return false;
    ApplyParamDtype();
    FindUnits();
    FindPreBackward();
    grad_ = g_->FinalParameterGradients();
    before_.resize(g_->ops.size());
    after_.resize(g_->ops.size());
    unsharded_.assign(n_tensors_, -1);
    unsharded_bw_.assign(n_tensors_, -1);
    sharded_grad_.assign(n_tensors_, -1);
    PlanBackwardGathers();
    resharded_at_.assign(units_.size(), -1);
    for (size_t u = 0; u < units_.size(); ++u)
      if (!ShardUnit(static_cast<int>(u))) return false;
    if (!PlaceForwardGathers() || !PlaceReduceScatters() || !RetargetViews()) return false;
    MoveReaders();
    InsertOps(g_, before_, after_);
    return true;
  }

 private:
  // A unit's forward all-gather or reduce-scatter, placed once all are known.
  struct Collective {
    int at;  // the op index it goes before (gathers) or after (reduces)
    int unit;
    Op op;
    int64_t flat_bytes = 0;  // the flat buffer the collective fills or reads
  };

  // The collectives of the unit being sharded, filled parameter by parameter.
  struct UnitOps {
    Op gather, gather_bw, reduce;
    int64_t gather_flat = 0, reduce_flat = 0;
    int last_grad = -1;  // the op making the unit's last gradient
  };

  // Every module in shard_modules scopes an op, and there are parameters.
  bool CheckGraph() {
    for (const std::string& m : options_.shard_modules) {
      bool found = false;
      for (const Op& op : g_->ops) found = found || InScope(op.scope, m);
      if (!found) {
        *err_ = fmt::format("--fsdp-modules: no op of the graph is scoped in module \"{}\"", m);
        return false;
      }
    }
    bool any_parameter = false;
    for (size_t t = 0; t < n_tensors_; ++t)
      any_parameter |= g_->tensors[t].kind == TensorKind::kParameter;
    if (!any_parameter) {
      *err_ = "the graph has no parameters to shard";
      return false;
    }
    return true;
  }

  // MixedPrecisionPolicy(param_dtype): the forward runs on parameters and
  // inputs cast to it, so every floating tensor the step makes has it.
  void ApplyParamDtype() {
    if (options_.param_dtype)
      for (Tensor& t : g_->tensors)
        if (!IsResident(t.kind) && IsFloating(t.dtype)) t.dtype = *options_.param_dtype;
    stats_->param_dtype = options_.param_dtype ? DTypeName(*options_.param_dtype) : "";
    stats_->reduce_dtype = options_.reduce_dtype ? DTypeName(*options_.reduce_dtype) : "";
  }

  // The units in the order of their first parameter, and the first forward
  // and backward op reading each.
  void FindUnits() {
    ParallelOptions chosen = options_;
    if (options_.shard_modules.empty() && options_.shard_depth == kAutoShardDepth)
      chosen.shard_depth = AutoShardDepth(*g_);
    const std::vector<std::string> unit_of = ParameterUnits(*g_, chosen);
    std::map<std::string, int> unit_index;
    for (size_t p = 0; p < n_tensors_; ++p) {
      if (g_->tensors[p].kind != TensorKind::kParameter) continue;
      auto [it, added] = unit_index.emplace(unit_of[p], static_cast<int>(units_.size()));
      if (added) units_.push_back(Unit{unit_of[p], {}, -1, -1, -1});
      units_[it->second].params.push_back(static_cast<int>(p));
    }
    unit_of_param_.assign(n_tensors_, -1);
    for (size_t u = 0; u < units_.size(); ++u)
      for (int p : units_[u].params) unit_of_param_[p] = static_cast<int>(u);
    for (size_t o = 0; o < g_->ops.size(); ++o) {
      const Op& op = g_->ops[o];
      if (op.phase == Phase::kOptimizer) continue;
      for (int t : op.inputs) {
        const int u = unit_of_param_[g_->tensors[t].base];  // a parameter or a view of one
        if (u < 0) continue;
        int& first =
            op.phase == Phase::kForward ? units_[u].first_forward : units_[u].first_backward;
        if (first < 0) first = static_cast<int>(o);
      }
    }
  }

  // A unit's pre-backward hook runs once the gradient of its module's output
  // is made: before the first backward op scoped in the module (the root's
  // module is the model: every op but the loss's), at the latest at its first
  // backward use of a parameter. There it gathers its parameters (when
  // resharded) and prefetches the next unit's.
  void FindPreBackward() {
    for (size_t o = 0; o < g_->ops.size(); ++o) {
      const Op& op = g_->ops[o];
      if (op.phase != Phase::kBackward) continue;
      for (Unit& unit : units_) {
        const bool in =
            unit.name.empty() ? !InScope(op.scope, "loss") : InScope(op.scope, unit.name);
        if (unit.pre_backward < 0 && in) unit.pre_backward = static_cast<int>(o);
      }
    }
    for (Unit& unit : units_)
      if (unit.first_backward >= 0 &&
          (unit.pre_backward < 0 || unit.pre_backward > unit.first_backward))
        unit.pre_backward = unit.first_backward;
  }

  // The prefetch: units in the order their backward starts; each unit's
  // parameters are gathered at the previous unit's pre-backward (the first
  // unit's at its own).
  void PlanBackwardGathers() {
    std::vector<int> by_backward;
    for (size_t u = 0; u < units_.size(); ++u)
      if (units_[u].pre_backward >= 0) by_backward.push_back(static_cast<int>(u));
    std::sort(by_backward.begin(), by_backward.end(),
              [&](int a, int b) { return units_[a].pre_backward < units_[b].pre_backward; });
    gather_bw_at_.assign(units_.size(), -1);
    for (size_t k = 0; k < by_backward.size(); ++k)
      gather_bw_at_[by_backward[k]] = units_[by_backward[k == 0 ? 0 : k - 1]].pre_backward;
  }

  UnitOps NewUnitOps(const Unit& unit, const std::string& label) const {
    UnitOps ops;
    ops.gather.id = fmt::format("fsdp.{}.all_gather", label);
    ops.gather.type = "fsdp_all_gather";
    ops.gather.phase = Phase::kForward;
    ops.gather.scope = unit.name;
    ops.gather_bw = ops.gather;
    ops.gather_bw.id += ".bw";
    ops.gather_bw.phase = Phase::kBackward;
    ops.reduce.id = fmt::format("fsdp.{}.reduce_scatter", label);
    ops.reduce.type = "fsdp_reduce_scatter";
    ops.reduce.phase = Phase::kBackward;
    ops.reduce.scope = unit.name;
    return ops;
  }

  // Unit u's collectives and post-backward free.
  bool ShardUnit(int u) {
    const Unit& unit = units_[u];
    const bool root = unit.name.empty();
    const std::string label = root ? "root" : unit.name;
    stats_->units.push_back(unit.name);
    UnitOps ops = NewUnitOps(unit, label);
    // Resharded units are gathered again at their pre-backward, whether the
    // backward reads their parameters or not (an embedding's weight).
    const bool reshard = options_.reshard_after_forward && !root && unit.first_forward >= 0 &&
                         unit.pre_backward >= 0;
    for (int p : unit.params)
      if (!ShardParameter(p, reshard, &ops)) return false;
    // A unit no forward op reads is gathered at its first backward need.
    int at = root ? 0 : unit.first_forward;
    if (at < 0) {
      at = std::max(0, unit.first_backward);
      ops.gather.phase = unit.first_backward >= 0 ? Phase::kBackward : Phase::kForward;
    }
    if (ops.gather.phase == Phase::kForward) {
      forward_gathers_.push_back({at, u, std::move(ops.gather), ops.gather_flat});
    } else {
      ops.gather.workspace_bytes += ops.gather_flat;
      before_[at].push_back(std::move(ops.gather));
    }
    if (reshard) {
      before_[gather_bw_at_[u]].push_back(std::move(ops.gather_bw));
      resharded_at_[u] = gather_bw_at_[u];
    }
    if (ops.last_grad >= 0) {
      // The post-backward frees the unsharded parameters first (the module
      // holds them to there, whether the backward reads them or not: an
      // embedding's weight), then reduce-scatters.
      Op free;
      free.id = fmt::format("fsdp.{}.reshard", label);
      free.type = "fsdp_reshard";
      free.phase = Phase::kBackward;
      free.scope = unit.name;
      for (int p : unit.params) free.inputs.push_back(reshard ? unsharded_bw_[p] : unsharded_[p]);
      after_[ops.last_grad].push_back(std::move(free));
      reduces_.push_back({ops.last_grad, u, std::move(ops.reduce), ops.reduce_flat});
    }
    return true;
  }

  // Shards parameter p on dim 0 and adds its unsharded copies (the forward's,
  // and the backward's when resharded) and its sharded gradient to the unit's
  // collectives.
  bool ShardParameter(int p, bool reshard, UnitOps* ops) {
    Tensor& param = g_->tensors[p];
    const Tensor full = param;
    // Mixed precision: gathered, computed and reduced in narrower dtypes;
    // the shards, their gradients and the optimizer keep the parameter's.
    const DType compute = options_.param_dtype.value_or(full.dtype);
    const int64_t rows = full.shape.empty() ? 1 : full.shape[0].value;
    const int64_t shard_rows = (rows + world_ - 1) / world_;
    const int64_t rest = rows > 0 ? full.numel / rows : 0;
    std::vector<Dim> shard_shape = param.shape.ToVector();
    if (shard_shape.empty()) shard_shape.emplace_back();
    shard_shape[0] = Dim{shard_rows, ""};
    for (size_t d = 1; d < shard_shape.size(); ++d) shard_shape[d].symbol.clear();
    param.shape = Shape(shard_shape);
    const int64_t padded_bytes = shard_rows * world_ * rest * DTypeSize(compute);
    ops->gather_flat += padded_bytes;
    // The shard cast to the compute dtype, the all-gather's input.
    const int64_t cast_bytes = compute == full.dtype ? 0 : shard_rows * rest * DTypeSize(compute);
    ops->gather.workspace_bytes += cast_bytes;
    ops->gather.inputs.push_back(p);
    Tensor copy = full;
    copy.dtype = compute;
    copy.kind = TensorKind::kTemporary;
    copy.id = full.id + ".unsharded";
    copy.grad_of = -1;
    copy.alias_of = -1;
    unsharded_[p] = AddTensor(g_, copy, err_);
    if (unsharded_[p] < 0) return false;
    ops->gather.outputs.push_back(unsharded_[p]);
    if (reshard) {
      copy.id = full.id + ".unsharded.bw";
      unsharded_bw_[p] = AddTensor(g_, copy, err_);
      if (unsharded_bw_[p] < 0) return false;
      ops->gather_bw.inputs.push_back(p);
      ops->gather_bw.outputs.push_back(unsharded_bw_[p]);
      ops->gather_bw.workspace_bytes += padded_bytes + cast_bytes;
    }
    if (grad_[p] < 0) return true;
    const Tensor& gt = g_->tensors[grad_[p]];
    ops->reduce.inputs.push_back(grad_[p]);
    const DType reduce_dtype = options_.reduce_dtype.value_or(gt.dtype);
    ops->reduce_flat += shard_rows * world_ * rest * DTypeSize(reduce_dtype);
    ops->last_grad = std::max(ops->last_grad, gt.producer);
    Tensor shard = g_->tensors[p];  // the sharded shape
    shard.id = gt.id + ".shard";
    shard.kind = TensorKind::kGradient;
    shard.dtype = options_.param_dtype ? full.dtype : gt.dtype;
    // Reduced in another dtype: its output, cast into the sharded gradient.
    if (reduce_dtype != shard.dtype)
      ops->reduce.workspace_bytes += shard_rows * rest * DTypeSize(reduce_dtype);
    shard.grad_of = p;
    shard.alias_of = -1;
    sharded_grad_[grad_[p]] = AddTensor(g_, shard, err_);
    if (sharded_grad_[grad_[p]] < 0) return false;
    ops->reduce.outputs.push_back(sharded_grad_[grad_[p]]);
    return true;
  }

  static bool ByPosition(const Collective& a, const Collective& b) { return a.at < b.at; }

  // Forward all-gathers, in order: the collective fills a flat buffer and the
  // copy-out splits it into the unsharded parameters. FSDP2 frees the flat
  // buffer at the next unit's forward all-gather (it defers the free for
  // overlap), the last one when the root's forward returns.
  bool PlaceForwardGathers() {
    std::stable_sort(forward_gathers_.begin(), forward_gathers_.end(), ByPosition);
    int flat_prev = -1;
    for (Collective& fg : forward_gathers_) {
      const int flat_index = AddFlat(g_, fg.op.id + "_output", fg.flat_bytes, err_);
      if (flat_index < 0) return false;
      Op copy_out = fg.op;
      copy_out.id += "_copy_out";
      copy_out.type = "fsdp_all_gather_copy_out";
      copy_out.workspace_bytes = 0;
      copy_out.inputs = {flat_index};
      fg.op.outputs = {flat_index};
      before_[fg.at].push_back(std::move(fg.op));
      // Freed by an op of no module: a module wrapped in checkpoint() must not
      // hold the previous unit's buffer as a saved input.
      if (flat_prev >= 0) {
        Op free;
        const std::string& unit = units_[fg.unit].name;
        free.id = fmt::format("fsdp.{}.free_previous_all_gather", unit.empty() ? "root" : unit);
        free.type = kFsdpFreeAllGatherOutput;
        free.phase = Phase::kForward;
        free.inputs = {flat_prev};
        before_[fg.at].push_back(std::move(free));
      }
      flat_prev = flat_index;
      before_[fg.at].push_back(std::move(copy_out));
    }
    if (flat_prev >= 0) {
      Op post;
      post.id = "fsdp.root.post_forward";
      post.type = kFsdpPostForward;
      post.phase = Phase::kForward;
      post.inputs = {flat_prev};
      const int end = LastModelForwardOp();
      if (end < 0)
        before_[0].push_back(std::move(post));
      else
        after_[end].push_back(std::move(post));
    }
    return true;
  }

  // Where the root's forward returns: the op before the first "loss" op,
  // else the last forward op (-1: none).
  int LastModelForwardOp() const {
    int end = -1;
    for (size_t o = 0; o < g_->ops.size(); ++o) {
      const Op& op = g_->ops[o];
      if (op.phase != Phase::kForward) continue;
      if (InScope(op.scope, "loss")) return static_cast<int>(o) - 1;
      end = static_cast<int>(o);
    }
    return end;
  }

  // Reduce-scatters, in order: the flat input the gradients are copied into
  // is held (FSDP2's reduce_scatter_states, one buffer by default) until the
  // next unit's post-backward frees it before its own, the last one to the
  // end of the backward.
  bool PlaceReduceScatters() {
    std::stable_sort(reduces_.begin(), reduces_.end(), ByPosition);
    int input_prev = -1;
    for (Collective& rs : reduces_) {
      const int flat_index = AddFlat(g_, rs.op.id + "_input", rs.flat_bytes, err_);
      if (flat_index < 0) return false;
      if (input_prev >= 0) {
        Op wait;
        wait.id = rs.op.id + "_wait_previous";
        wait.type = "fsdp_reduce_scatter_wait";
        wait.phase = Phase::kBackward;
        wait.scope = rs.op.scope;
        wait.inputs = {input_prev};
        after_[rs.at].push_back(std::move(wait));
      }
      rs.op.outputs.push_back(flat_index);
      input_prev = flat_index;
      after_[rs.at].push_back(std::move(rs.op));
    }
    if (input_prev >= 0) {
      int end = -1;
      for (size_t o = 0; o < g_->ops.size(); ++o)
        if (g_->ops[o].phase == Phase::kBackward) end = static_cast<int>(o);
      Op post;
      post.id = "fsdp.root.post_backward";
      post.type = "fsdp_post_backward";
      post.phase = Phase::kBackward;
      post.inputs = {input_prev};
      after_[end].push_back(std::move(post));
    }
    return true;
  }

  // Views of a parameter made in the forward view its unsharded copy. With
  // resharding, the backward reads twins of them made from the copy gathered
  // again (autograd's saved views see the storage FSDP refills).
  bool RetargetViews() {
    twin_.assign(n_tensors_, -1);
    for (size_t o = 0; o < g_->ops.size(); ++o) {
      const Op& op = g_->ops[o];
      for (int v : op.outputs) {
        Tensor& view = g_->tensors[v];
        const int p = view.base;
        if (view.alias_of < 0 || p < 0 || unsharded_[p] < 0) continue;
        const bool backward = op.phase == Phase::kBackward;
        const int copy = backward && unsharded_bw_[p] >= 0 ? unsharded_bw_[p] : unsharded_[p];
        if (view.alias_of == p) view.alias_of = copy;
        const int u = unit_of_param_[p];
        if (backward || unsharded_bw_[p] < 0 || resharded_at_[u] < 0) continue;
        if (!AddBackwardTwin(v, p, u)) return false;
      }
    }
    return true;
  }

  // The backward's twin of forward view v of parameter p (unit u), made
  // from its twin base at the unit's backward gather.
  bool AddBackwardTwin(int v, int p, int u) {
    Tensor bw = g_->tensors[v];
    bw.id += ".bw";
    bw.alias_of = bw.alias_of == unsharded_[p] ? unsharded_bw_[p] : twin_[bw.alias_of];
    if (bw.alias_of < 0) return true;
    const int source = bw.alias_of;
    twin_[v] = AddTensor(g_, std::move(bw), err_);
    if (twin_[v] < 0) return false;
    Op make;
    make.id = "fsdp.view." + g_->tensors[twin_[v]].id;
    make.type = "view";
    make.phase = Phase::kBackward;
    make.scope = units_[u].name;
    make.inputs = {source};
    make.outputs = {twin_[v]};
    before_[resharded_at_[u]].push_back(std::move(make));
    return true;
  }

  // Readers move to the unsharded copies (the backward's to the twins); the
  // optimizer to the sharded gradients and sharded state.
  void MoveReaders() {
    for (Op& op : g_->ops) {
      for (int& t : op.inputs) {
        if (op.phase == Phase::kOptimizer) {
          if (sharded_grad_[t] >= 0) t = sharded_grad_[t];
          continue;
        }
        if (op.phase == Phase::kBackward && t < static_cast<int>(n_tensors_) && twin_[t] >= 0) {
          t = twin_[t];
          continue;
        }
        if (unsharded_[t] < 0) continue;
        t = op.phase == Phase::kBackward && unsharded_bw_[t] >= 0 ? unsharded_bw_[t]
                                                                  : unsharded_[t];
      }
      if (op.phase == Phase::kOptimizer && !op.inputs.empty()) {
        const Tensor& param = g_->tensors[op.inputs[0]];
        for (int t : op.inputs) {
          Tensor& s = g_->tensors[t];
          if (s.kind != TensorKind::kOptimizerState) continue;
          s.shape = param.shape;
        }
      }
    }
    for (size_t p = 0; p < grad_.size(); ++p)
      if (grad_[p] >= 0 && sharded_grad_[grad_[p]] >= 0) g_->tensors[grad_[p]].grad_of = -1;
  }

  const ParallelOptions& options_;
  const int64_t world_;
  Graph* g_;
  RankStats* stats_;
  std::string* err_;
  const size_t n_tensors_;  // before the rewrite adds any
  std::vector<Unit> units_;
  std::vector<int> unit_of_param_;  // by tensor: its unit, -1 for no parameter
  std::vector<int> grad_;           // FinalParameterGradients
  std::vector<std::vector<Op>> before_, after_;
  // By tensor of the input graph: the unsharded copies of a parameter, the
  // backward's when resharded, the sharded gradient of a gradient, the
  // backward's twin of a forward view.
  std::vector<int> unsharded_, unsharded_bw_, sharded_grad_, twin_;
  std::vector<int> gather_bw_at_;  // by unit: the op index its backward gather goes before
  std::vector<int> resharded_at_;  // by unit: the same, -1 when not resharded
  std::vector<Collective> forward_gathers_, reduces_;
};

bool Fsdp(const ParallelOptions& options, Graph* g, RankStats* stats, std::string* err) {
  return FsdpRewrite(options, g, stats, err).Run();
}

}  // namespace

bool CheckOptions(const ParallelOptions& options, std::string* err) {
  if (options.world_size < 1) {
    *err = fmt::format("--world-size {}: expected at least 1", options.world_size);
    return false;
  }
  if (options.strategy == Strategy::kNone && options.world_size != 1) {
    *err = "--world-size needs --parallel ddp, zero1, fsdp or pipeline";
    return false;
  }
  if (options.strategy == Strategy::kPipeline && options.world_size != options.pipeline.stages) {
    *err = fmt::format(
        "--world-size {}: --parallel pipeline runs one stage per rank, and --pp-stages is {}",
        options.world_size, options.pipeline.stages);
    return false;
  }
  if (options.rank >= options.world_size) {
    *err = fmt::format("--rank {}: expected 0 to {} (--world-size {})", options.rank,
                       options.world_size - 1, options.world_size);
    return false;
  }
  return true;
}

bool MakeRankStep(const ParallelOptions& options, Graph* g, RankStats* stats, std::string* err) {
  *stats = RankStats();
  stats->strategy = options.strategy;
  stats->world_size = options.world_size;
  stats->gradient_as_bucket_view =
      options.gradient_as_bucket_view && options.strategy != Strategy::kFsdp;
  stats->reshard_after_forward =
      options.reshard_after_forward && options.strategy == Strategy::kFsdp;
  if (!CheckOptions(options, err)) return false;
  if (options.strategy == Strategy::kNone) return true;
  stats->rank = std::max<int64_t>(0, options.rank);
  bool ok = true;
  switch (options.strategy) {
    case Strategy::kDdp:
      ok = AddBuckets(options, g, stats, err);
      break;
    case Strategy::kZero1:
      ok = ShardOptimizerState(options, g, stats, err) && AddBuckets(options, g, stats, err);
      break;
    case Strategy::kFsdp:
      ok = Fsdp(options, g, stats, err);
      break;
    case Strategy::kPipeline: {
      PipelineOptions pipeline = options.pipeline;
      pipeline.stage = options.rank;
      ok = MakePipelineStage(pipeline, g, stats, err);
      break;
    }
    case Strategy::kNone:
      break;
  }
  if (!ok || !g->Finalize(err)) return false;
  // FSDP's optimizer updates the shards: its temporaries are shard-sized.
  if (options.strategy == Strategy::kFsdp) {
    SetOptimizerWorkspaces(g);
    if (!g->Finalize(err)) return false;  // as after AddOptimizerState's
  }
  for (const Tensor& t : g->tensors) {
    if (t.kind == TensorKind::kParameter) stats->parameter_bytes += t.bytes;
    if (t.kind == TensorKind::kOptimizerState) stats->optimizer_state_bytes += t.bytes;
  }
  return true;
}

}  // namespace memplan::parallel
