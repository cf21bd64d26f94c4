#include "analyzer/lower/lower.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <span>
#include <unordered_set>

#include "analyzer/ir/op_table.h"

namespace memplan {
namespace {

// Lowers in place: the forward graph's tensors stay where they are (same
// indices, same index map) and the backward is appended.
class Lowering {
 public:
  explicit Lowering(Graph* g) : g_(*g) {}

  bool Run(std::vector<std::string>* warnings, std::string* err) {
    if (g_.joint) {
      *err = "graph already has a backward (phase \"backward\"); nothing to lower";
      return false;
    }
    n_fwd_tensors_ = g_.tensors.size();
    // Forward ops stay where they are (positions, index entries) and the
    // backward is appended, unless the graph has optimizer ops: then every op
    // is moved out and pushed back, the optimizer ops after the backward.
    bool stable = true;
    for (const Op& op : g_.ops) stable = stable && op.phase != Phase::kOptimizer;
    if (stable) {
      fwd_ops_ = g_.ops;
    } else {
      moved_ops_ = std::move(g_.ops);
      g_.ops.clear();
      fwd_ops_ = moved_ops_;
      // Rebuilt as ops are pushed; meanwhile the optimizer ops' ids stay taken.
      g_.op_index.Clear();
      for (const Op& op : fwd_ops_)
        if (op.phase == Phase::kOptimizer) reserved_op_ids_.insert(op.id);
    }

    PropagateRequiresGrad();
    CountContributions();
    Reserve();
    if (stable) fwd_ops_ = std::span<Op>(g_.ops.data(), fwd_ops_.size());  // Reserve moved them
    EmitForward(stable);
    EmitSeeds();
    EmitBackward();
    reserved_op_ids_.clear();  // every generated op is named: the optimizer ops come back
    for (Op& op : moved_ops_)  // empty when stable
      if (op.phase == Phase::kOptimizer) PushOp(std::move(op), /*index=*/true);
    Warn(warnings);
    if (seeds_ == 0)
      warnings->push_back("no graph output depends on a parameter; the backward is empty");
    return g_.Finalize(err);
  }

 private:
  void PropagateRequiresGrad() {
    rg_.assign(n_fwd_tensors_, false);
    for (size_t t = 0; t < n_fwd_tensors_; ++t)
      rg_[t] = g_.tensors[t].kind == TensorKind::kParameter;
    rules_.resize(fwd_ops_.size());
    for (size_t o = 0; o < fwd_ops_.size(); ++o) {
      const Op& op = fwd_ops_[o];
      if (op.phase != Phase::kForward) continue;
      rules_[o] = RuleFor(g_, op, rg_);
      bool any = false;
      for (size_t i = 0; i < op.inputs.size(); ++i)
        any = any || (rg_[op.inputs[i]] && rules_[o].input_grad[i] != GradFlow::kNone);
      for (int out : op.outputs) rg_[out] = any && IsFloating(g_.tensors[out].dtype);
    }
  }

  bool GetsGrad(const Op& op, size_t o, size_t i) const {
    return rg_[op.inputs[i]] && rules_[o].input_grad[i] != GradFlow::kNone;
  }

  void CountContributions() {
    count_.assign(n_fwd_tensors_, 0);
    for (int out : g_.outputs)
      if (rg_[out]) ++count_[out];
    needs_bw_.assign(fwd_ops_.size(), false);
    for (size_t o = fwd_ops_.size(); o-- > 0;) {
      const Op& op = fwd_ops_[o];
      if (op.phase != Phase::kForward) continue;
      bool out_grad = false;
      for (int out : op.outputs) out_grad = out_grad || count_[out] > 0;
      bool in_grad = false;
      for (size_t i = 0; i < op.inputs.size(); ++i) in_grad = in_grad || GetsGrad(op, o, i);
      if (!out_grad || !in_grad) continue;
      needs_bw_[o] = true;
      for (size_t i = 0; i < op.inputs.size(); ++i)
        if (GetsGrad(op, o, i)) ++count_[op.inputs[i]];
    }
  }

  // What the backward adds, so the vectors grow at most once (not at all
  // when the parser reserved room): a tensor per gradient contribution and
  // per partial sum (count - 1 of each accumulated gradient), saved extras;
  // an op per backward, per sum and per seed (at most one per output).
  void Reserve() {
    size_t contributions = 0, sums = 0, extras = 0, backward_ops = 0;
    for (size_t o = 0; o < fwd_ops_.size(); ++o) {
      if (!needs_bw_[o]) continue;
      ++backward_ops;
      extras += rules_[o].extras.size();
    }
    for (int c : count_) {
      contributions += c;
      sums += c > 1 ? c - 1 : 0;
    }
    const size_t seeds = g_.outputs.size();
    g_.tensors.reserve(n_fwd_tensors_ + contributions + sums + extras);
    g_.ops.reserve(fwd_ops_.size() + backward_ops + sums + seeds);
    g_.tensor_index.Reserve(g_.tensors.capacity());
    g_.op_index.Reserve(g_.ops.capacity());
  }

  template <class Taken>
  static std::string UniqueName(std::string name, Taken taken) {
    if (!taken(name)) return name;
    for (int k = 1;; ++k) {
      std::string candidate = fmt::format("{}~{}", name, k);
      if (!taken(candidate)) return candidate;
    }
  }

  // New ids are almost never taken, so index first and rename on a clash.
  int AddTensor(std::string id, Shape shape, DType dtype) {
    int index = static_cast<int>(g_.tensors.size());
    Tensor& t = g_.tensors.emplace_back();
    t.id = std::move(id);
    t.shape = std::move(shape);
    t.dtype = dtype;
    t.kind = TensorKind::kGradient;
    if (g_.IndexTensor(index) >= 0) {
      t.id = UniqueName(t.id, [&](const std::string& n) { return g_.FindTensor(n) >= 0; });
      g_.IndexTensor(index);
    }
    return index;
  }

  void PushOp(Op op, bool index) {
    if (!reserved_op_ids_.empty() && reserved_op_ids_.count(op.id))
      op.id = UniqueName(op.id, [&](const std::string& n) {
        return g_.FindOp(n) >= 0 || reserved_op_ids_.count(n) > 0;
      });
    int position = static_cast<int>(g_.ops.size());
    g_.ops.push_back(std::move(op));
    if (index && g_.IndexOp(position) >= 0) {
      Op& pushed = g_.ops.back();
      pushed.id = UniqueName(pushed.id, [&](const std::string& n) {
        return g_.FindOp(n) >= 0 || reserved_op_ids_.count(n) > 0;
      });
      g_.IndexOp(position);
    }
  }

  Op NewOp(std::string id, std::string type) {
    Op op;
    op.id = std::move(id);
    op.type = std::move(type);
    op.phase = Phase::kBackward;
    return op;
  }

  // Completes each forward op (flops, saved extras) where it stands, or
  // moves it into the joint graph when !stable; EmitBackward reads it there.
  // From here on g_.ops grows: fwd_ops_ is only sized, not read.
  void EmitForward(bool stable) {
    extras_.resize(fwd_ops_.size());
    position_.assign(fwd_ops_.size(), -1);
    num_outputs_.assign(fwd_ops_.size(), 0);
    saves_.resize(fwd_ops_.size());
    had_saves_.assign(fwd_ops_.size(), false);
    for (size_t o = 0; o < fwd_ops_.size(); ++o) {
      if (fwd_ops_[o].phase != Phase::kForward) continue;
      Op& op = fwd_ops_[o];
      if (op.flops < 0) op.flops = EstimateFlops(g_, op);
      num_outputs_[o] = op.outputs.size();
      if (op.saves_given) saves_[o] = std::move(op.saves);
      if (needs_bw_[o] && !op.saves_given) {
        for (const SavedExtra& e : rules_[o].extras) {
          int t = AddTensor(op.id + "." + e.suffix, e.shape, e.dtype);
          g_.tensors[t].kind = TensorKind::kActivation;
          op.outputs.push_back(t);
          extras_[o].push_back(t);
        }
      }
      op.saves.clear();
      had_saves_[o] = op.saves_given;
      op.saves_given = false;
      if (stable) {
        position_[o] = static_cast<int>(o);
        continue;
      }
      position_[o] = static_cast<int>(g_.ops.size());
      PushOp(std::move(op), /*index=*/true);
    }
    arrived_.assign(n_fwd_tensors_, 0);
    partial_.assign(n_fwd_tensors_, -1);
    final_grad_.assign(n_fwd_tensors_, -1);
  }

  // A new gradient contribution for forward tensor t (a view of `view_of` if >= 0).
  int NewContribution(int t, int view_of) {
    int k = count_[t];
    int a = arrived_[t]++;
    const Tensor& src = g_.tensors[t];
    std::string id = k == 1 ? src.id + ".grad" : fmt::format("{}.grad.c{}", src.id, a);
    int c = AddTensor(std::move(id), src.shape, src.dtype);  // copies before growing
    g_.tensors[c].alias_of = view_of;
    if (k == 1) {
      g_.tensors[c].grad_of = t;
      final_grad_[t] = c;
    }
    return c;
  }

  // After contribution number a of t arrived: for a >= 1, one binary
  // accumulate op adding it to the sum of the earlier ones.
  void EmitAccumulate(int t, int contribution, int a, InternedString scope) {
    int k = count_[t];
    if (a == 0) {
      partial_[t] = contribution;
      return;
    }
    bool last = a == k - 1;
    const Tensor& src = g_.tensors[t];
    std::string id = last ? src.id + ".grad" : fmt::format("{}.grad.s{}", src.id, a);
    Op acc = NewOp(fmt::format("{}.grad.acc{}", src.id, a), "add");
    acc.flops = static_cast<double>(src.numel);
    int out = AddTensor(std::move(id), src.shape, src.dtype);
    if (last) {
      g_.tensors[out].grad_of = t;
      final_grad_[t] = out;
    }
    acc.accumulate = true;
    acc.inputs = {partial_[t], contribution};
    acc.outputs = {out};
    acc.scope = scope;
    PushOp(std::move(acc), /*index=*/true);
    partial_[t] = out;
  }

  void EmitSeeds() {
    for (int out : g_.outputs) {
      if (!rg_[out] || arrived_[out] > 0) continue;
      Op seed = NewOp(g_.tensors[out].id + ".grad.seed", "ones_like");
      seed.inputs = {out};
      seed.flops = static_cast<double>(g_.tensors[out].numel);
      int a = arrived_[out];
      int c = NewContribution(out, -1);
      seed.outputs = {c};
      PushOp(std::move(seed), /*index=*/true);
      EmitAccumulate(out, c, a, "");
      ++seeds_;
    }
  }

  void EmitBackward() {
    for (size_t o = fwd_ops_.size(); o-- > 0;) {
      if (!needs_bw_[o]) continue;
      // Valid until the next op is pushed.
      const Op& f = g_.ops[position_[o]];
      const BackwardRule& rule = rules_[o];
      Op bw = NewOp(f.id + ".bw", CanonicalOpType(f.type) + "_backward");
      bw.scope = f.scope;
      bw.flops = rule.cost_factor * f.flops;
      if (f.time_us >= 0) bw.time_us = rule.cost_factor * f.time_us;
      auto read = [&](int t) {
        if (std::find(bw.inputs.begin(), bw.inputs.end(), t) == bw.inputs.end())
          bw.inputs.push_back(t);
      };
      for (size_t k = 0; k < num_outputs_[o]; ++k)
        if (final_grad_[f.outputs[k]] >= 0) read(final_grad_[f.outputs[k]]);
      if (had_saves_[o]) {
        for (int t : saves_[o]) read(t);
      } else {
        for (int i : rule.saved_inputs) read(f.inputs[i]);
        for (int j : rule.saved_outputs) read(f.outputs[j]);
        for (int t : extras_[o]) read(t);
      }
      if (!rule.known) unknown_[CanonicalOpType(f.type)].push_back(f.id);
      int out_grad = num_outputs_[o] == 0 ? -1 : final_grad_[f.outputs[0]];
      struct Produced {
        int tensor, contribution, arrival;
      };
      std::vector<Produced> produced;
      for (size_t i = 0; i < f.inputs.size(); ++i) {
        if (!GetsGrad(f, o, i)) continue;
        bool view = rule.input_grad[i] == GradFlow::kView && out_grad >= 0;
        int a = arrived_[f.inputs[i]];
        int c = NewContribution(f.inputs[i], view ? out_grad : -1);
        bw.outputs.push_back(c);
        produced.push_back({f.inputs[i], c, a});
      }
      const InternedString scope = f.scope;
      PushOp(std::move(bw), /*index=*/true);  // f is not used after this
      for (const Produced& p : produced) EmitAccumulate(p.tensor, p.contribution, p.arrival, scope);
    }
  }

  void Warn(std::vector<std::string>* warnings) const {
    for (const auto& [type, ops] : unknown_) {
      std::string more = ops.size() > 1 ? fmt::format(" and {} more op{}", ops.size() - 1,
                                                      ops.size() > 2 ? "s" : "")
                                        : "";
      warnings->push_back(fmt::format(
          "op \"{}\"{} of unknown type \"{}\": lowered conservatively (its backward saves every "
          "input and costs 2x its forward)",
          ops[0], more, type));
    }
  }

  Graph& g_;
  // The forward's ops: in g_.ops (stable), else in moved_ops_.
  std::span<Op> fwd_ops_;
  std::vector<Op> moved_ops_;
  std::unordered_set<std::string> reserved_op_ids_;
  size_t n_fwd_tensors_ = 0;
  std::vector<bool> rg_, needs_bw_;
  std::vector<BackwardRule> rules_;
  std::vector<std::vector<int>> extras_;
  // Per forward op: its position in the joint graph, its outputs before the
  // extras were appended, and its explicit "saves" if it had any.
  std::vector<int> position_;
  std::vector<size_t> num_outputs_;
  std::vector<TensorIds> saves_;
  std::vector<bool> had_saves_;
  std::vector<int> count_, arrived_, partial_, final_grad_;
  std::map<std::string, std::vector<std::string>> unknown_;
  int seeds_ = 0;
};

}  // namespace

bool LowerToJoint(Graph forward, Graph* joint, std::vector<std::string>* warnings,
                  std::string* err) {
  *joint = std::move(forward);
  Lowering lowering(joint);
  return lowering.Run(warnings, err);
}

}  // namespace memplan
