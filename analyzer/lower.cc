#include "analyzer/lower.h"

#include <fmt/format.h>

#include <map>
#include <unordered_set>

#include "analyzer/op_table.h"

namespace memplan {
namespace {

class Lowering {
 public:
  Lowering(const Graph& fwd, Graph* joint) : fwd_(fwd), g_(joint) {}

  bool Run(std::vector<std::string>* warnings, std::string* err) {
    if (fwd_.joint) {
      *err = "graph already has a backward (phase \"backward\"); nothing to lower";
      return false;
    }
    *g_ = Graph();
    g_->name = fwd_.name;
    g_->source = fwd_.source;
    g_->symbols = fwd_.symbols;
    g_->tensors = fwd_.tensors;
    g_->outputs = fwd_.outputs;
    for (const Tensor& t : g_->tensors) names_.insert(t.id);
    for (const Op& op : fwd_.ops) op_names_.insert(op.id);

    PropagateRequiresGrad();
    CountContributions();
    EmitForward();
    EmitSeeds();
    EmitBackward();
    for (const Op& op : fwd_.ops)
      if (op.phase == Phase::kOptimizer) g_->ops.push_back(op);
    Warn(warnings);
    if (seeds_ == 0)
      warnings->push_back("no graph output depends on a parameter; the backward is empty");
    return g_->Finalize(err);
  }

 private:
  void PropagateRequiresGrad() {
    rg_.assign(fwd_.tensors.size(), false);
    for (size_t t = 0; t < fwd_.tensors.size(); ++t)
      rg_[t] = fwd_.tensors[t].kind == TensorKind::kParameter;
    rules_.resize(fwd_.ops.size());
    for (size_t o = 0; o < fwd_.ops.size(); ++o) {
      const Op& op = fwd_.ops[o];
      if (op.phase != Phase::kForward) continue;
      rules_[o] = RuleFor(fwd_, op, rg_);
      bool any = false;
      for (size_t i = 0; i < op.inputs.size(); ++i)
        any = any || (rg_[op.inputs[i]] && rules_[o].input_grad[i] != GradFlow::kNone);
      for (int out : op.outputs) rg_[out] = any && IsFloating(fwd_.tensors[out].dtype);
    }
  }

  bool GetsGrad(const Op& op, size_t o, size_t i) const {
    return rg_[op.inputs[i]] && rules_[o].input_grad[i] != GradFlow::kNone;
  }

  void CountContributions() {
    count_.assign(fwd_.tensors.size(), 0);
    for (int out : fwd_.outputs)
      if (rg_[out]) ++count_[out];
    needs_bw_.assign(fwd_.ops.size(), false);
    for (size_t o = fwd_.ops.size(); o-- > 0;) {
      const Op& op = fwd_.ops[o];
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

  std::string UniqueTensorName(std::string name) {
    std::string candidate = name;
    for (int k = 1; names_.count(candidate); ++k) candidate = fmt::format("{}~{}", name, k);
    names_.insert(candidate);
    return candidate;
  }
  std::string UniqueOpName(std::string name) {
    std::string candidate = name;
    for (int k = 1; op_names_.count(candidate); ++k) candidate = fmt::format("{}~{}", name, k);
    op_names_.insert(candidate);
    return candidate;
  }

  int AddTensor(std::string id, std::vector<Dim> shape, DType dtype, TensorKind kind) {
    Tensor t;
    t.id = UniqueTensorName(std::move(id));
    t.shape = std::move(shape);
    t.dtype = dtype;
    t.kind = kind;
    g_->tensors.push_back(std::move(t));
    return static_cast<int>(g_->tensors.size()) - 1;
  }

  void EmitForward() {
    extras_.resize(fwd_.ops.size());
    for (size_t o = 0; o < fwd_.ops.size(); ++o) {
      Op op = fwd_.ops[o];
      if (op.phase != Phase::kForward) continue;
      if (op.flops < 0) op.flops = EstimateFlops(fwd_, op);
      if (needs_bw_[o] && !op.saves_given) {
        for (const SavedExtra& e : rules_[o].extras) {
          int t = AddTensor(op.id + "." + e.suffix, e.shape, e.dtype, TensorKind::kActivation);
          op.outputs.push_back(t);
          extras_[o].push_back(t);
        }
      }
      op.saves.clear();
      op.saves_given = false;
      g_->ops.push_back(std::move(op));
    }
    arrived_.assign(fwd_.tensors.size(), 0);
    partial_.assign(fwd_.tensors.size(), -1);
    final_grad_.assign(fwd_.tensors.size(), -1);
  }

  // A new gradient contribution for forward tensor t (a view of `view_of` if >= 0).
  int NewContribution(int t, int view_of) {
    const Tensor& src = fwd_.tensors[t];
    int k = count_[t];
    int a = arrived_[t]++;
    std::string id = k == 1 ? src.id + ".grad" : fmt::format("{}.grad.c{}", src.id, a);
    int c = AddTensor(id, src.shape, src.dtype, TensorKind::kGradient);
    g_->tensors[c].alias_of = view_of;
    if (k == 1) {
      g_->tensors[c].grad_of = t;
      final_grad_[t] = c;
    }
    return c;
  }

  // After contribution number a of t arrived: for a >= 1, one binary
  // accumulate op adding it to the sum of the earlier ones.
  void EmitAccumulate(int t, int contribution, int a, const std::string& scope) {
    const Tensor& src = fwd_.tensors[t];
    int k = count_[t];
    if (a == 0) {
      partial_[t] = contribution;
      return;
    }
    bool last = a == k - 1;
    int out = AddTensor(last ? src.id + ".grad" : fmt::format("{}.grad.s{}", src.id, a), src.shape,
                        src.dtype, TensorKind::kGradient);
    if (last) {
      g_->tensors[out].grad_of = t;
      final_grad_[t] = out;
    }
    Op acc;
    acc.id = UniqueOpName(fmt::format("{}.grad.acc{}", src.id, a));
    acc.type = "add";
    acc.phase = Phase::kBackward;
    acc.accumulate = true;
    acc.inputs = {partial_[t], contribution};
    acc.outputs = {out};
    acc.flops = static_cast<double>(src.numel);
    acc.scope = scope;
    g_->ops.push_back(std::move(acc));
    partial_[t] = out;
  }

  void EmitSeeds() {
    for (int out : fwd_.outputs) {
      if (!rg_[out] || arrived_[out] > 0) continue;
      const Tensor& src = fwd_.tensors[out];
      Op seed;
      seed.id = UniqueOpName(src.id + ".grad.seed");
      seed.type = "ones_like";
      seed.phase = Phase::kBackward;
      seed.inputs = {out};
      int a = arrived_[out];
      int c = NewContribution(out, -1);
      seed.outputs = {c};
      seed.flops = static_cast<double>(src.numel);
      g_->ops.push_back(std::move(seed));
      EmitAccumulate(out, c, a, "");
      ++seeds_;
    }
  }

  void EmitBackward() {
    for (size_t o = fwd_.ops.size(); o-- > 0;) {
      if (!needs_bw_[o]) continue;
      const Op& f = fwd_.ops[o];
      const BackwardRule& rule = rules_[o];
      Op bw;
      bw.id = UniqueOpName(f.id + ".bw");
      bw.type = CanonicalOpType(f.type) + "_backward";
      bw.phase = Phase::kBackward;
      bw.scope = f.scope;
      double fwd_flops = EstimateFlops(fwd_, f);
      bw.flops = rule.cost_factor * fwd_flops;
      if (f.time_us >= 0) bw.time_us = rule.cost_factor * f.time_us;
      std::unordered_set<int> seen;
      auto read = [&](int t) {
        if (seen.insert(t).second) bw.inputs.push_back(t);
      };
      for (int out : f.outputs)
        if (final_grad_[out] >= 0) read(final_grad_[out]);
      if (f.saves_given) {
        for (int t : f.saves) read(t);
      } else {
        for (int i : rule.saved_inputs) read(f.inputs[i]);
        for (int j : rule.saved_outputs) read(f.outputs[j]);
        for (int t : extras_[o]) read(t);
      }
      if (!rule.known) unknown_[CanonicalOpType(f.type)].push_back(f.id);
      int out_grad = f.outputs.empty() ? -1 : final_grad_[f.outputs[0]];
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
      g_->ops.push_back(std::move(bw));
      for (const Produced& p : produced)
        EmitAccumulate(p.tensor, p.contribution, p.arrival, f.scope);
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

  const Graph& fwd_;
  Graph* g_;
  std::unordered_set<std::string> names_, op_names_;
  std::vector<bool> rg_, needs_bw_;
  std::vector<BackwardRule> rules_;
  std::vector<std::vector<int>> extras_;
  std::vector<int> count_, arrived_, partial_, final_grad_;
  std::map<std::string, std::vector<std::string>> unknown_;
  int seeds_ = 0;
};

}  // namespace

bool LowerToJoint(const Graph& forward, Graph* joint, std::vector<std::string>* warnings,
                  std::string* err) {
  Lowering lowering(forward, joint);
  return lowering.Run(warnings, err);
}

}  // namespace memplan
