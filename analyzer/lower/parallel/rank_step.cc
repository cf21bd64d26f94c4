#include "analyzer/lower/parallel/rank_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "analyzer/ir/scope.h"
#include "analyzer/lower/optimizer_state.h"

namespace memplan::parallel {

bool ParseStrategy(std::string_view name, Strategy* out) {
  if (name == "none")
    *out = Strategy::kNone;
  else if (name == "ddp")
    *out = Strategy::kDdp;
  else if (name == "zero1")
    *out = Strategy::kZero1;
  else if (name == "fsdp")
    *out = Strategy::kFsdp;
  else if (name == "pipeline")
    *out = Strategy::kPipeline;
  else
    return false;
  return true;
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
  return true;
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
std::string UnitOf(const std::string& scope, const ParallelOptions& options) {
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

bool Fsdp(const ParallelOptions& options, Graph* g, RankStats* stats, std::string* err) {
  const int64_t world = options.world_size;
  for (const std::string& m : options.shard_modules) {
    bool found = false;
    for (const Op& op : g->ops) found = found || InScope(op.scope, m);
    if (!found) {
      *err = fmt::format("--fsdp-modules: no op of the graph is scoped in module \"{}\"", m);
      return false;
    }
  }
  const size_t n_tensors = g->tensors.size();
  bool any_parameter = false;
  for (size_t t = 0; t < n_tensors; ++t)
    any_parameter |= g->tensors[t].kind == TensorKind::kParameter;
  if (!any_parameter) {
    *err = "the graph has no parameters to shard";
    return false;
  }
  // MixedPrecisionPolicy(param_dtype): the forward runs on parameters and
  // inputs cast to it, so every floating tensor the step makes has it.
  if (options.param_dtype)
    for (Tensor& t : g->tensors)
      if (!IsResident(t.kind) && IsFloating(t.dtype)) t.dtype = *options.param_dtype;
  stats->param_dtype = options.param_dtype ? DTypeName(*options.param_dtype) : "";
  stats->reduce_dtype = options.reduce_dtype ? DTypeName(*options.reduce_dtype) : "";
  ParallelOptions chosen = options;
  if (options.shard_modules.empty() && options.shard_depth == kAutoShardDepth)
    chosen.shard_depth = AutoShardDepth(*g);
  const std::vector<std::string> unit_of = ParameterUnits(*g, chosen);
  std::vector<Unit> units;
  std::map<std::string, int> unit_index;
  for (size_t p = 0; p < n_tensors; ++p) {
    if (g->tensors[p].kind != TensorKind::kParameter) continue;
    auto [it, added] = unit_index.emplace(unit_of[p], static_cast<int>(units.size()));
    if (added) units.push_back(Unit{unit_of[p], {}, -1, -1, -1});
    units[it->second].params.push_back(static_cast<int>(p));
  }
  std::vector<int> unit_of_param(n_tensors, -1);
  for (size_t u = 0; u < units.size(); ++u)
    for (int p : units[u].params) unit_of_param[p] = static_cast<int>(u);
  for (size_t o = 0; o < g->ops.size(); ++o) {
    const Op& op = g->ops[o];
    if (op.phase == Phase::kOptimizer) continue;
    for (int t : op.inputs) {
      const int u = unit_of_param[g->tensors[t].base];  // a parameter or a view of one
      if (u < 0) continue;
      int& first = op.phase == Phase::kForward ? units[u].first_forward : units[u].first_backward;
      if (first < 0) first = static_cast<int>(o);
    }
  }
  // A unit's pre-backward hook runs once the gradient of its module's output
  // is made: before the first backward op scoped in the module (the root's
  // module is the model: every op but the loss's), at the latest at its first
  // backward use of a parameter. There it gathers its parameters (when
  // resharded) and prefetches the next unit's.
  for (size_t o = 0; o < g->ops.size(); ++o) {
    const Op& op = g->ops[o];
    if (op.phase != Phase::kBackward) continue;
    for (Unit& unit : units) {
      const bool in = unit.name.empty() ? !InScope(op.scope, "loss") : InScope(op.scope, unit.name);
      if (unit.pre_backward < 0 && in) unit.pre_backward = static_cast<int>(o);
    }
  }
  for (Unit& unit : units)
    if (unit.first_backward >= 0 &&
        (unit.pre_backward < 0 || unit.pre_backward > unit.first_backward))
      unit.pre_backward = unit.first_backward;
  const std::vector<int> grad = g->FinalParameterGradients();
  std::vector<std::vector<Op>> before(g->ops.size()), after(g->ops.size());
  std::vector<int> unsharded(n_tensors, -1), unsharded_bw(n_tensors, -1),
      sharded_grad(n_tensors, -1);
  // Units in the order their backward starts, for the prefetch: each unit's
  // parameters are gathered at the previous unit's pre-backward (the first
  // unit's at its own).
  std::vector<int> by_backward;
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u].pre_backward >= 0) by_backward.push_back(static_cast<int>(u));
  std::sort(by_backward.begin(), by_backward.end(),
            [&](int a, int b) { return units[a].pre_backward < units[b].pre_backward; });
  std::vector<int> gather_bw_at(units.size(), -1);  // op index the backward gather goes before
  for (size_t k = 0; k < by_backward.size(); ++k)
    gather_bw_at[by_backward[k]] = units[by_backward[k == 0 ? 0 : k - 1]].pre_backward;

  // A unit's forward all-gather or reduce-scatter, placed once all are known.
  struct Collective {
    int at;  // the op index it goes before (gathers) or after (reduces)
    int unit;
    Op op;
    int64_t flat_bytes = 0;  // the flat buffer the collective fills or reads
  };
  std::vector<Collective> forward_gathers, reduces;
  std::vector<int> resharded_at(units.size(), -1);
  for (size_t u = 0; u < units.size(); ++u) {
    Unit& unit = units[u];
    const bool root = unit.name.empty();
    const std::string label = root ? "root" : unit.name;
    stats->units.push_back(unit.name);
    Op gather;
    gather.id = fmt::format("fsdp.{}.all_gather", label);
    gather.type = "fsdp_all_gather";
    gather.phase = Phase::kForward;
    gather.scope = unit.name;
    Op gather_bw = gather;
    gather_bw.id += ".bw";
    gather_bw.phase = Phase::kBackward;
    Op reduce;
    reduce.id = fmt::format("fsdp.{}.reduce_scatter", label);
    reduce.type = "fsdp_reduce_scatter";
    reduce.phase = Phase::kBackward;
    reduce.scope = unit.name;
    // Resharded units are gathered again at their pre-backward, whether the
    // backward reads their parameters or not (an embedding's weight).
    const bool reshard =
        options.reshard_after_forward && !root && unit.first_forward >= 0 && unit.pre_backward >= 0;
    int last_grad = -1;
    int64_t gather_flat = 0, reduce_flat = 0;
    for (int p : unit.params) {
      Tensor& param = g->tensors[p];
      const Tensor full = param;
      // Mixed precision: gathered, computed and reduced in narrower dtypes;
      // the shards, their gradients and the optimizer keep the parameter's.
      const DType compute = options.param_dtype.value_or(full.dtype);
      const int64_t rows = full.shape.empty() ? 1 : full.shape[0].value;
      const int64_t shard_rows = (rows + world - 1) / world;
      const int64_t rest = rows > 0 ? full.numel / rows : 0;
      if (full.shape.empty())
        param.shape = {Dim{shard_rows, ""}};
      else
        param.shape[0] = Dim{shard_rows, ""};
      for (size_t d = 1; d < param.shape.size(); ++d) param.shape[d].symbol.clear();
      const int64_t padded_bytes = shard_rows * world * rest * DTypeSize(compute);
      gather_flat += padded_bytes;
      // The shard cast to the compute dtype, the all-gather's input.
      const int64_t cast_bytes = compute == full.dtype ? 0 : shard_rows * rest * DTypeSize(compute);
      gather.workspace_bytes += cast_bytes;
      gather.inputs.push_back(p);
      Tensor copy = full;
      copy.dtype = compute;
      copy.kind = TensorKind::kTemporary;
      copy.id = full.id + ".unsharded";
      copy.grad_of = -1;
      copy.alias_of = -1;
      unsharded[p] = AddTensor(g, copy, err);
      if (unsharded[p] < 0) return false;
      gather.outputs.push_back(unsharded[p]);
      if (reshard) {
        copy.id = full.id + ".unsharded.bw";
        unsharded_bw[p] = AddTensor(g, copy, err);
        if (unsharded_bw[p] < 0) return false;
        gather_bw.inputs.push_back(p);
        gather_bw.outputs.push_back(unsharded_bw[p]);
        gather_bw.workspace_bytes += padded_bytes + cast_bytes;
      }
      if (grad[p] >= 0) {
        const Tensor& gt = g->tensors[grad[p]];
        reduce.inputs.push_back(grad[p]);
        const DType reduce_dtype = options.reduce_dtype.value_or(gt.dtype);
        reduce_flat += shard_rows * world * rest * DTypeSize(reduce_dtype);
        last_grad = std::max(last_grad, gt.producer);
        Tensor shard = g->tensors[p];  // the sharded shape
        shard.id = gt.id + ".shard";
        shard.kind = TensorKind::kGradient;
        shard.dtype = options.param_dtype ? full.dtype : gt.dtype;
        // Reduced in another dtype: its output, cast into the sharded gradient.
        if (reduce_dtype != shard.dtype)
          reduce.workspace_bytes += shard_rows * rest * DTypeSize(reduce_dtype);
        shard.grad_of = p;
        shard.alias_of = -1;
        sharded_grad[grad[p]] = AddTensor(g, shard, err);
        if (sharded_grad[grad[p]] < 0) return false;
        reduce.outputs.push_back(sharded_grad[grad[p]]);
      }
    }
    // A unit no forward op reads is gathered at its first backward need.
    int at = root ? 0 : unit.first_forward;
    if (at < 0) {
      at = std::max(0, unit.first_backward);
      gather.phase = unit.first_backward >= 0 ? Phase::kBackward : Phase::kForward;
    }
    if (gather.phase == Phase::kForward) {
      forward_gathers.push_back({at, static_cast<int>(u), std::move(gather), gather_flat});
    } else {
      gather.workspace_bytes += gather_flat;
      before[at].push_back(std::move(gather));
    }
    if (reshard) {
      before[gather_bw_at[u]].push_back(std::move(gather_bw));
      resharded_at[u] = gather_bw_at[u];
    }
    if (last_grad >= 0) {
      // The post-backward frees the unsharded parameters first (the module
      // holds them to there, whether the backward reads them or not: an
      // embedding's weight), then reduce-scatters.
      Op free;
      free.id = fmt::format("fsdp.{}.reshard", label);
      free.type = "fsdp_reshard";
      free.phase = Phase::kBackward;
      free.scope = unit.name;
      for (int p : unit.params) free.inputs.push_back(reshard ? unsharded_bw[p] : unsharded[p]);
      after[last_grad].push_back(std::move(free));
      reduces.push_back({last_grad, static_cast<int>(u), std::move(reduce), reduce_flat});
    }
  }
  // Forward all-gathers, in order: the collective fills a flat buffer and the
  // copy-out splits it into the unsharded parameters. FSDP2 frees the flat
  // buffer at the next unit's forward all-gather (it defers the free for
  // overlap), the last one when the root's forward returns: before the first
  // "loss" op, else after the last forward op.
  auto by_position = [](const Collective& a, const Collective& b) { return a.at < b.at; };
  std::stable_sort(forward_gathers.begin(), forward_gathers.end(), by_position);
  int flat_prev = -1;
  for (Collective& fg : forward_gathers) {
    const int flat_index = AddFlat(g, fg.op.id + "_output", fg.flat_bytes, err);
    if (flat_index < 0) return false;
    Op copy_out = fg.op;
    copy_out.id += "_copy_out";
    copy_out.type = "fsdp_all_gather_copy_out";
    copy_out.workspace_bytes = 0;
    copy_out.inputs = {flat_index};
    fg.op.outputs = {flat_index};
    before[fg.at].push_back(std::move(fg.op));
    // Freed by an op of no module: a module wrapped in checkpoint() must not
    // hold the previous unit's buffer as a saved input.
    if (flat_prev >= 0) {
      Op free;
      const std::string& unit = units[fg.unit].name;
      free.id = fmt::format("fsdp.{}.free_previous_all_gather", unit.empty() ? "root" : unit);
      free.type = kFsdpFreeAllGatherOutput;
      free.phase = Phase::kForward;
      free.inputs = {flat_prev};
      before[fg.at].push_back(std::move(free));
    }
    flat_prev = flat_index;
    before[fg.at].push_back(std::move(copy_out));
  }
  if (flat_prev >= 0) {
    int end = -1;
    for (size_t o = 0; o < g->ops.size(); ++o) {
      const Op& op = g->ops[o];
      if (op.phase != Phase::kForward) continue;
      if (InScope(op.scope, "loss")) {
        end = static_cast<int>(o) - 1;
        break;
      }
      end = static_cast<int>(o);
    }
    Op post;
    post.id = "fsdp.root.post_forward";
    post.type = kFsdpPostForward;
    post.phase = Phase::kForward;
    post.inputs = {flat_prev};
    if (end < 0)
      before[0].push_back(std::move(post));
    else
      after[end].push_back(std::move(post));
  }
  // Reduce-scatters, in order: the flat input the gradients are copied into
  // is held (FSDP2's reduce_scatter_states, one buffer by default) until the
  // next unit's post-backward frees it before its own, the last one to the
  // end of the backward.
  std::stable_sort(reduces.begin(), reduces.end(), by_position);
  int input_prev = -1;
  for (Collective& rs : reduces) {
    const int flat_index = AddFlat(g, rs.op.id + "_input", rs.flat_bytes, err);
    if (flat_index < 0) return false;
    if (input_prev >= 0) {
      Op wait;
      wait.id = rs.op.id + "_wait_previous";
      wait.type = "fsdp_reduce_scatter_wait";
      wait.phase = Phase::kBackward;
      wait.scope = rs.op.scope;
      wait.inputs = {input_prev};
      after[rs.at].push_back(std::move(wait));
    }
    rs.op.outputs.push_back(flat_index);
    input_prev = flat_index;
    after[rs.at].push_back(std::move(rs.op));
  }
  if (input_prev >= 0) {
    int end = -1;
    for (size_t o = 0; o < g->ops.size(); ++o)
      if (g->ops[o].phase == Phase::kBackward) end = static_cast<int>(o);
    Op post;
    post.id = "fsdp.root.post_backward";
    post.type = "fsdp_post_backward";
    post.phase = Phase::kBackward;
    post.inputs = {input_prev};
    after[end].push_back(std::move(post));
  }
  // Views of a parameter made in the forward view its unsharded copy. With
  // resharding, the backward reads twins of them made from the copy gathered
  // again (autograd's saved views see the storage FSDP refills).
  std::vector<int> twin(n_tensors, -1);
  for (size_t o = 0; o < g->ops.size(); ++o) {
    const Op& op = g->ops[o];
    for (int v : op.outputs) {
      Tensor& view = g->tensors[v];
      const int p = view.base;
      if (view.alias_of < 0 || p < 0 || unsharded[p] < 0) continue;
      const bool backward = op.phase == Phase::kBackward;
      const int copy = backward && unsharded_bw[p] >= 0 ? unsharded_bw[p] : unsharded[p];
      if (view.alias_of == p) view.alias_of = copy;
      const int u = unit_of_param[p];
      if (backward || unsharded_bw[p] < 0 || resharded_at[u] < 0) continue;
      Tensor bw = g->tensors[v];
      bw.id += ".bw";
      bw.alias_of = bw.alias_of == unsharded[p] ? unsharded_bw[p] : twin[bw.alias_of];
      if (bw.alias_of < 0) continue;
      const int source = bw.alias_of;
      twin[v] = AddTensor(g, std::move(bw), err);
      if (twin[v] < 0) return false;
      Op make;
      make.id = "fsdp.view." + g->tensors[twin[v]].id;
      make.type = "view";
      make.phase = Phase::kBackward;
      make.scope = units[u].name;
      make.inputs = {source};
      make.outputs = {twin[v]};
      before[resharded_at[u]].push_back(std::move(make));
    }
  }
  // Readers move to the unsharded copies (the backward's to the twins); the
  // optimizer to the sharded gradients and sharded state.
  for (Op& op : g->ops) {
    for (int& t : op.inputs) {
      if (op.phase == Phase::kOptimizer) {
        if (sharded_grad[t] >= 0) t = sharded_grad[t];
        continue;
      }
      if (op.phase == Phase::kBackward && t < static_cast<int>(n_tensors) && twin[t] >= 0) {
        t = twin[t];
        continue;
      }
      if (unsharded[t] < 0) continue;
      t = op.phase == Phase::kBackward && unsharded_bw[t] >= 0 ? unsharded_bw[t] : unsharded[t];
    }
    if (op.phase == Phase::kOptimizer && !op.inputs.empty()) {
      const Tensor& param = g->tensors[op.inputs[0]];
      for (int t : op.inputs) {
        Tensor& s = g->tensors[t];
        if (s.kind != TensorKind::kOptimizerState) continue;
        s.shape = param.shape;
      }
    }
  }
  for (size_t p = 0; p < grad.size(); ++p)
    if (grad[p] >= 0 && sharded_grad[grad[p]] >= 0) g->tensors[grad[p]].grad_of = -1;
  InsertOps(g, before, after);
  return true;
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
  if (options.strategy == Strategy::kFsdp) SetOptimizerWorkspaces(g);
  for (const Tensor& t : g->tensors) {
    if (t.kind == TensorKind::kParameter) stats->parameter_bytes += t.bytes;
    if (t.kind == TensorKind::kOptimizerState) stats->optimizer_state_bytes += t.bytes;
  }
  return true;
}

}  // namespace memplan::parallel
