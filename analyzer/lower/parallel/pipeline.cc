#include "analyzer/lower/parallel/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "analyzer/ir/scope.h"
#include "analyzer/sim/program.h"
#include "analyzer/sim/simulator.h"

namespace memplan::parallel {

bool ParseSchedule(std::string_view name, PipelineSchedule* out) {
  return ParseEnum(kScheduleNames, name, out);
}

namespace {

// The deepest module depth the balanced split considers, and the most cut
// candidates it weighs at one depth.
constexpr int kMaxSplitDepth = 4;
constexpr size_t kMaxSplitCandidates = 2048;

std::vector<int> ForwardOps(const Graph& g) {
  std::vector<int> fwd;
  for (size_t o = 0; o < g.ops.size(); ++o)
    if (g.ops[o].phase == Phase::kForward) fwd.push_back(static_cast<int>(o));
  return fwd;
}

// Parameter bytes first read at each forward position, as prefix sums.
std::vector<int64_t> ParameterPrefix(const Graph& g, const std::vector<int>& fwd) {
  std::vector<bool> seen(g.tensors.size(), false);
  std::vector<int64_t> prefix(fwd.size() + 1, 0);
  for (size_t p = 0; p < fwd.size(); ++p) {
    int64_t bytes = 0;
    for (int t : g.ops[fwd[p]].inputs) {
      if (g.tensors[t].kind != TensorKind::kParameter || seen[t]) continue;
      seen[t] = true;
      bytes += g.tensors[t].bytes;
    }
    prefix[p + 1] = prefix[p] + bytes;
  }
  return prefix;
}

// Forward positions where a module at `depth` is first entered (position 0
// always), with the module's name.
std::vector<std::pair<int, std::string>> Candidates(const Graph& g, const std::vector<int>& fwd,
                                                    int depth) {
  std::vector<std::pair<int, std::string>> out;
  std::set<std::string> seen;
  std::string previous;
  for (size_t p = 0; p < fwd.size(); ++p) {
    const std::string unit = ScopePrefix(g.ops[fwd[p]].scope, depth);
    if (p == 0) {
      out.emplace_back(0, unit.empty() ? g.ops[fwd[0]].id : unit);
    } else if (!unit.empty() && unit != previous && !seen.count(unit)) {
      out.emplace_back(static_cast<int>(p), unit);
    }
    if (!unit.empty()) {
      seen.insert(unit);
      previous = unit;
    }
  }
  return out;
}

// The cut (indices into `cand`, 0 first) into `stages` runs with the least
// largest parameter bytes; its largest in *worst.
std::vector<int> BalancedCut(const std::vector<std::pair<int, std::string>>& cand,
                             const std::vector<int64_t>& prefix, int stages, int64_t* worst) {
  const int c = static_cast<int>(cand.size());
  auto at = [&](int i) { return i == c ? prefix.back() : prefix[cand[i].first]; };
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  // best[k][j]: the least largest run of k runs covering candidates [0, j).
  std::vector<std::vector<int64_t>> best(stages + 1, std::vector<int64_t>(c + 1, kInf));
  std::vector<std::vector<int>> from(stages + 1, std::vector<int>(c + 1, -1));
  for (int j = 1; j <= c; ++j) best[1][j] = at(j) - at(0);
  for (int k = 2; k <= stages; ++k)
    for (int j = k; j <= c; ++j)
      for (int i = k - 1; i < j; ++i) {
        const int64_t v = std::max(best[k - 1][i], at(j) - at(i));
        if (v < best[k][j]) {
          best[k][j] = v;
          from[k][j] = i;
        }
      }
  *worst = best[stages][c];
  std::vector<int> cut(stages);
  for (int k = stages, j = c; k >= 1; --k) {
    const int i = k == 1 ? 0 : from[k][j];
    cut[k - 1] = i;
    j = i;
  }
  return cut;
}

struct Assignment {
  std::vector<int> op_stage;      // by op
  std::vector<int> tensor_stage;  // by tensor: its producer's, or its readers' (-2: several)
  std::vector<int> stage_start_op;
};

bool Assign(const Graph& g, const std::vector<int>& starts, int64_t stages, Assignment* a,
            std::string* err) {
  const std::vector<int> fwd = ForwardOps(g);
  a->op_stage.assign(g.ops.size(), -1);
  a->tensor_stage.assign(g.tensors.size(), -1);
  a->stage_start_op.clear();
  for (int p : starts) a->stage_start_op.push_back(fwd[p]);
  std::map<std::string, int> scope_stage;  // -2: forward ops of several stages
  for (size_t p = 0, k = 0; p < fwd.size(); ++p) {
    while (k + 1 < starts.size() && static_cast<int>(p) >= starts[k + 1]) ++k;
    const Op& op = g.ops[fwd[p]];
    a->op_stage[fwd[p]] = static_cast<int>(k);
    auto [it, added] = scope_stage.emplace(op.scope, static_cast<int>(k));
    if (!added && it->second != static_cast<int>(k)) it->second = -2;
    for (int t : op.inputs) {
      if (!g.IsResidentTensor(t)) continue;
      int& s = a->tensor_stage[t];
      if (s == -1)
        s = static_cast<int>(k);
      else if (s != static_cast<int>(k))
        s = -2;
    }
  }
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const int p = g.tensors[t].producer;
    if (p >= 0 && a->op_stage[p] >= 0) a->tensor_stage[t] = a->op_stage[p];
  }
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    if (op.phase != Phase::kBackward) continue;
    int s = -1;
    for (int t : op.inputs) {
      const int p = g.tensors[t].producer;
      const bool forward_made = p >= 0 && g.ops[p].phase == Phase::kForward;
      if ((forward_made || g.IsResidentTensor(t)) && a->tensor_stage[t] >= 0)
        s = std::max(s, a->tensor_stage[t]);
    }
    // Only gradients. A sum of gradient contributions runs where they are
    // made (autograd sums a later stage's before it sends them); any other
    // op backpropagates through the maker of the tensor whose gradient it
    // reads; else the earliest stage that made an input.
    auto earliest = [&](auto stage_of) {
      int low = -1;
      for (int t : op.inputs) {
        const int v = stage_of(t);
        if (v >= 0) low = low < 0 ? v : std::min(low, v);
      }
      return low;
    };
    auto maker = [&](int t) {
      const int p = g.tensors[t].producer;
      return p >= 0 ? a->op_stage[p] : -1;
    };
    if (s < 0 && !op.accumulate)
      s = earliest([&](int t) {
        const int of = g.tensors[t].grad_of;
        return of >= 0 ? a->tensor_stage[of] : -1;
      });
    if (s < 0) s = earliest(maker);
    if (s < 0) {
      auto it = scope_stage.find(op.scope.str());
      if (it != scope_stage.end() && it->second >= 0) s = it->second;
    }
    if (s < 0) s = static_cast<int>(stages) - 1;
    a->op_stage[o] = s;
    for (int t : op.outputs) a->tensor_stage[t] = s;
  }
  const std::vector<int> grad = g.FinalParameterGradients();
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    if (op.phase != Phase::kOptimizer) continue;
    int s = op.inputs.empty() ? 0 : a->tensor_stage[op.inputs[0]];
    if (s < 0 && !op.inputs.empty() && grad[op.inputs[0]] >= 0)
      s = a->tensor_stage[grad[op.inputs[0]]];
    a->op_stage[o] = std::max(s, 0);
    for (int t : op.outputs) a->tensor_stage[t] = a->op_stage[o];
  }
  // What crosses stages must cross as the pipeline sends it.
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    const int c = a->op_stage[o];
    for (int t : op.inputs) {
      const Tensor& tensor = g.tensors[t];
      if (tensor.kind == TensorKind::kParameter && a->tensor_stage[t] != c) {
        *err = a->tensor_stage[t] == -2
                   ? fmt::format(
                         "parameter \"{}\" is read by the forward ops of two stages: "
                         "stages cannot share parameters (tied weights live on one stage)",
                         tensor.id)
                   : fmt::format(
                         "parameter \"{}\" belongs to stage {}, and op \"{}\" of stage {} "
                         "reads it: stages cannot share parameters",
                         tensor.id, a->tensor_stage[t], op.id, c);
        return false;
      }
      const int p = tensor.producer;
      if (p < 0) continue;
      const int from = a->op_stage[p];
      const bool forward_made = g.ops[p].phase == Phase::kForward;
      if (from < c && !forward_made) {
        *err = fmt::format(
            "op \"{}\" (stage {}) reads \"{}\", a gradient made on the earlier stage {}: "
            "gradients flow to earlier stages only; move the split off this module",
            op.id, c, tensor.id, from);
        return false;
      }
      if (from > c && (forward_made || op.phase != Phase::kBackward)) {
        *err = fmt::format("op \"{}\" (stage {}) reads \"{}\", made on the later stage {}", op.id,
                           c, tensor.id, from);
        return false;
      }
    }
  }
  return true;
}

std::string Suffix(const std::string& id, int m, int64_t micro_batches) {
  return micro_batches == 1 ? id : fmt::format("{}.mb{}", id, m);
}

// The events of stage s: (forward?, micro-batch), in schedule order.
std::vector<std::pair<bool, int>> Schedule(PipelineSchedule schedule, int64_t stages, int64_t s,
                                           int64_t m) {
  std::vector<std::pair<bool, int>> events;
  if (schedule == PipelineSchedule::kGPipe) {
    for (int i = 0; i < m; ++i) events.emplace_back(true, i);
    for (int i = 0; i < m; ++i) events.emplace_back(false, i);
    return events;
  }
  const int warmup = static_cast<int>(std::min(m, stages - s));
  int f = 0, b = 0;
  for (; f < warmup; ++f) events.emplace_back(true, f);
  while (b < m) {
    events.emplace_back(false, b++);
    if (f < m) events.emplace_back(true, f++);
  }
  return events;
}

// Stage s's step (BuildStage): the tensors it uses, cloned per micro-batch,
// and its ops in schedule order with the markers for what the runtime holds.
class StageBuilder {
 public:
  StageBuilder(const Graph& g, const PipelineOptions& o, const Assignment& a, int s)
      : g_(g),
        o_(o),
        a_(a),
        s_(s),
        micro_(o.micro_batches),
        last_(static_cast<int>(o.stages) - 1),
        nt_(g.tensors.size()) {}

  bool Build(Graph* out, int64_t* received_bytes, std::string* err) {
    h_.name = g_.name;
    h_.source = g_.source;
    h_.target_device = g_.target_device;
    h_.outputs_held = g_.outputs_held;
    h_.symbols = g_.symbols;
    FindUsedSentAndOutputs();
    std::vector<int> grad = g_.FinalParameterGradients();
    param_of_grad_.assign(nt_, -1);
    for (size_t p = 0; p < nt_; ++p)
      if (grad[p] >= 0) param_of_grad_[grad[p]] = static_cast<int>(p);
    CloneTensors(received_bytes);
    LinkClones();
    SplitSent();
    EmitSchedule();
    EmitSendsDone();
    if (s_ == last_) EmitMergeOutputs();
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (a_.op_stage[i] == s_ && g_.ops[i].phase == Phase::kOptimizer)
        h_.ops.push_back(Clone(static_cast<int>(i), 0));
    for (int m = 0; m < micro_; ++m)
      for (int t : g_.outputs)
        if (used_[t] && a_.tensor_stage[t] == s_) h_.outputs.push_back(map_[m][t]);
    if (!h_.Finalize(err)) return false;
    *out = std::move(h_);
    return true;
  }

 private:
  // The tensors the stage's ops use, those it makes and another stage
  // reads (sent), and on the last stage the model output.
  void FindUsedSentAndOutputs() {
    used_.assign(nt_, false);
    sent_.assign(nt_, false);
    model_output_.assign(nt_, false);
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const Op& op = g_.ops[i];
      if (a_.op_stage[i] != s_) {
        // Made here, read there: sent.
        for (int t : op.inputs)
          if (a_.tensor_stage[t] == s_ && !g_.IsResidentTensor(t)) sent_[t] = true;
        continue;
      }
      for (int t : op.inputs) used_[t] = true;
      for (int t : op.outputs) used_[t] = true;
      // The last stage's model output: what its "loss" ops read from others.
      if (s_ == last_ && o_.return_outputs && op.phase == Phase::kForward &&
          InScope(op.scope, "loss"))
        for (int t : op.inputs) {
          const int p = g_.tensors[t].producer;
          if (p >= 0 && g_.ops[p].phase == Phase::kForward && !InScope(g_.ops[p].scope, "loss"))
            model_output_[t] = true;
        }
    }
  }

  int AddTensor(Tensor t) {
    h_.tensors.push_back(std::move(t));
    return static_cast<int>(h_.tensors.size()) - 1;
  }

  // map_[m][t]: tensor t's clone for micro-batch m. The stage's parameters,
  // buffers and optimizer state are shared; inputs, what the stage makes and
  // what it receives are per micro-batch.
  void CloneTensors(int64_t* received_bytes) {
    map_.assign(micro_, std::vector<int>(nt_, -1));
    for (size_t t = 0; t < nt_; ++t) {
      if (!used_[t] || !g_.IsResidentTensor(static_cast<int>(t)) ||
          g_.tensors[t].kind == TensorKind::kInput)
        continue;
      const int index = AddTensor(g_.tensors[t]);
      for (int m = 0; m < micro_; ++m) map_[m][t] = index;
    }
    for (int m = 0; m < micro_; ++m) {
      for (size_t t = 0; t < nt_; ++t) {
        if (!used_[t] || map_[m][t] >= 0) continue;
        Tensor copy = g_.tensors[t];
        const int p = copy.producer;
        const int from = a_.tensor_stage[t];
        if (p >= 0 && from != s_) {
          const bool forward_made = g_.ops[p].phase == Phase::kForward;
          copy.id = Suffix((forward_made ? "pp.recv." : "pp.recv_grad.") + copy.id, m, micro_);
          copy.kind = TensorKind::kBuffer;
          copy.alias_of = copy.grad_of = -1;
          map_[m][t] = AddTensor(std::move(copy));
          *received_bytes += g_.tensors[t].bytes;
          continue;
        }
        copy.id = Suffix(copy.id, m, micro_);
        map_[m][t] = AddTensor(std::move(copy));
      }
    }
  }

  // A clone's alias_of and grad_of point at clones of the same micro-batch;
  // a parameter's gradient of m > 0 is no final gradient (it is accumulated).
  void LinkClones() {
    for (int m = 0; m < micro_; ++m)
      for (size_t t = 0; t < nt_; ++t) {
        const int c = map_[m][t];
        if (c < 0 || (m > 0 && map_[0][t] == c)) continue;
        Tensor& copy = h_.tensors[c];
        if (copy.kind == TensorKind::kBuffer && g_.tensors[t].kind != TensorKind::kBuffer) continue;
        copy.alias_of = copy.alias_of >= 0 ? map_[m][copy.alias_of] : -1;
        if (copy.grad_of >= 0) {
          const bool of_parameter = g_.tensors[copy.grad_of].kind == TensorKind::kParameter;
          copy.grad_of = (m > 0 && of_parameter) ? -1 : map_[m][copy.grad_of];
        }
      }
  }

  Op Clone(int i, int m) const {
    Op op = g_.ops[i];
    op.id = Suffix(op.id, m, micro_);
    for (int& t : op.inputs) t = map_[m][t];
    for (int& t : op.outputs) t = map_[m][t];
    for (int& t : op.saves) t = map_[m][t];
    op.saves.erase(std::remove(op.saves.begin(), op.saves.end(), -1), op.saves.end());
    return op;
  }

  // An op standing for what the runtime does: "pp.X..." has type pipeline_X.
  static Op Marker(const std::string& id, Phase phase, const std::vector<int>& inputs) {
    Op op;
    op.id = id;
    op.type = "pipeline_" + id.substr(3, id.find('.', 3) - 3);
    op.phase = phase;
    op.inputs.assign(inputs.begin(), inputs.end());
    return op;
  }

  // What the stage sends: activations forward, input gradients back.
  void SplitSent() {
    for (size_t t = 0; t < nt_; ++t) {
      if (!sent_[t]) continue;
      const bool forward_made = g_.ops[g_.tensors[t].producer].phase == Phase::kForward;
      (forward_made ? sent_activations_ : sent_gradients_).push_back(static_cast<int>(t));
    }
  }

  std::vector<int> SentOf(int m, bool activations) const {
    std::vector<int> out;
    for (int t : activations ? sent_activations_ : sent_gradients_) out.push_back(map_[m][t]);
    return out;
  }

  // F(m) and B(m) in schedule order; B(m) accumulates the parameter
  // gradients of m > 0 and ends with pp.backward_done.
  void EmitSchedule() {
    const bool gpipe = o_.schedule == PipelineSchedule::kGPipe;
    for (auto [forward, m] : Schedule(o_.schedule, o_.stages, s_, micro_)) {
      for (size_t i = 0; i < g_.ops.size(); ++i) {
        const Op& op = g_.ops[i];
        if (a_.op_stage[i] != s_ || (op.phase == Phase::kForward) != forward ||
            op.phase == Phase::kOptimizer)
          continue;
        h_.ops.push_back(Clone(static_cast<int>(i), m));
        if (forward || m == 0) continue;
        for (int t : op.outputs) {
          if (param_of_grad_[t] < 0) continue;
          h_.ops.push_back(
              Marker(Suffix("pp.accumulate_grad." + g_.tensors[param_of_grad_[t]].id, m, micro_),
                     Phase::kBackward, {map_[m][t], map_[0][t]}));
        }
      }
      if (forward) continue;
      // The end of B(m): its sent activations leave the fwd_cache; under 1F1B
      // the input gradients B(m-1) sent are released.
      std::vector<int> done = SentOf(m, true);
      if (!gpipe && m > 0)
        for (int t : SentOf(m - 1, false)) done.push_back(t);
      if (!done.empty())
        h_.ops.push_back(Marker(Suffix("pp.backward_done", m, micro_), Phase::kForward, done));
    }
  }

  // The sends still pending at the end: under 1F1B the last B's input
  // gradients, under GPipe every send.
  void EmitSendsDone() {
    const bool gpipe = o_.schedule == PipelineSchedule::kGPipe;
    std::vector<int> pending;
    for (int m = gpipe ? 0 : static_cast<int>(micro_) - 1; m < micro_; ++m) {
      for (int t : SentOf(m, false)) pending.push_back(t);
      if (gpipe)
        for (int t : SentOf(m, true)) pending.push_back(t);
    }
    if (!pending.empty()) h_.ops.push_back(Marker("pp.sends_done", Phase::kForward, pending));
  }

  // The last stage concatenates every micro-batch's model output.
  void EmitMergeOutputs() {
    std::vector<int> outputs;
    int64_t bytes = 0;
    for (int m = 0; m < micro_; ++m)
      for (size_t t = 0; t < nt_; ++t)
        if (model_output_[t]) {
          outputs.push_back(map_[m][t]);
          bytes += g_.tensors[t].bytes;
        }
    if (outputs.empty()) return;
    Op merge = Marker("pp.merge_outputs", Phase::kForward, outputs);
    merge.workspace_bytes = bytes;
    h_.ops.push_back(std::move(merge));
    for (int t : outputs) h_.outputs.push_back(t);
  }

  const Graph& g_;
  const PipelineOptions& o_;
  const Assignment& a_;
  const int s_;
  const int64_t micro_;
  const int last_;
  const size_t nt_;
  Graph h_;
  std::vector<bool> used_, sent_, model_output_;  // by tensor of g_
  std::vector<int> param_of_grad_;                // by tensor of g_
  std::vector<std::vector<int>> map_;             // [micro-batch][tensor of g_]: in h_
  std::vector<int> sent_activations_, sent_gradients_;
};

// Stage s's step; *received_bytes: its receive buffers, all micro-batches.
bool BuildStage(const Graph& g, const PipelineOptions& o, const Assignment& a, int s, Graph* out,
                int64_t* received_bytes, std::string* err) {
  return StageBuilder(g, o, a, s).Build(out, received_bytes, err);
}

}  // namespace

bool SplitStages(const Graph& g, const PipelineOptions& options, std::vector<int>* starts,
                 std::string* err) {
  const std::vector<int> fwd = ForwardOps(g);
  const int64_t stages = options.stages;
  starts->assign(1, 0);
  if (fwd.empty()) {
    *err = "the graph has no forward ops to split into stages";
    return false;
  }
  if (!options.split.empty()) {
    if (static_cast<int64_t>(options.split.size()) != stages - 1) {
      *err = fmt::format(
          "--pp-split names {} modules; --pp-stages {} needs {} (where stages 1 to {} begin)",
          options.split.size(), stages, stages - 1, stages - 1);
      return false;
    }
    for (size_t k = 0; k < options.split.size(); ++k) {
      const std::string& module = options.split[k];
      int at = -1;
      for (size_t p = 0; p < fwd.size() && at < 0; ++p)
        if (InScope(g.ops[fwd[p]].scope, module)) at = static_cast<int>(p);
      if (at < 0) {
        *err = fmt::format("--pp-split: no forward op of the graph is scoped in module \"{}\"",
                           module);
        return false;
      }
      if (at <= starts->back()) {
        *err = k == 0 ? fmt::format(
                            "--pp-split: stage 0 would be empty: module \"{}\" begins at "
                            "the first forward op",
                            module)
                      : fmt::format(
                            "--pp-split: stage {} would be empty: module \"{}\" does not "
                            "begin after module \"{}\" in the forward",
                            k, module, options.split[k - 1]);
        return false;
      }
      starts->push_back(at);
    }
    return true;
  }
  if (stages == 1) return true;
  const std::vector<int64_t> prefix = ParameterPrefix(g, fwd);
  int64_t best = std::numeric_limits<int64_t>::max();
  size_t most = 0;
  std::string most_names;
  for (int depth = 1; depth <= kMaxSplitDepth; ++depth) {
    const auto cand = Candidates(g, fwd, depth);
    if (cand.size() > most) {
      most = cand.size();
      most_names.clear();
      for (size_t i = 0; i < cand.size() && i < 6; ++i)
        most_names += (i ? ", " : "") + cand[i].second;
      if (cand.size() > 6) most_names += ", ...";
    }
    if (static_cast<int64_t>(cand.size()) < stages || cand.size() > kMaxSplitCandidates) continue;
    int64_t worst = 0;
    const std::vector<int> cut = BalancedCut(cand, prefix, static_cast<int>(stages), &worst);
    if (worst >= best) continue;
    best = worst;
    starts->clear();
    for (int i : cut) starts->push_back(cand[i].first);
  }
  if (best == std::numeric_limits<int64_t>::max()) {
    *err = fmt::format(
        "--pp-stages {}: stage {} would be empty: a stage begins where a module begins, and the "
        "forward enters at most {} ({}); give at most {} stages, or --pp-split",
        stages, most, most, most_names, most);
    return false;
  }
  return true;
}

bool MakePipelineStage(const PipelineOptions& options, Graph* g, RankStats* stats,
                       std::string* err) {
  if (options.stages < 1 || options.micro_batches < 1) {
    *err = options.stages < 1
               ? fmt::format("--pp-stages {}: expected at least 1", options.stages)
               : fmt::format("--micro-batches {}: expected at least 1", options.micro_batches);
    return false;
  }
  if (options.stage >= options.stages) {
    *err = fmt::format("--rank {}: expected a stage from 0 to {} (--pp-stages {})", options.stage,
                       options.stages - 1, options.stages);
    return false;
  }
  std::vector<int> starts;
  if (!SplitStages(*g, options, &starts, err)) return false;
  Assignment a;
  if (!Assign(*g, starts, options.stages, &a, err)) return false;
  int stage = -1;
  int64_t stage_peak = -1;
  Graph chosen;
  int64_t chosen_received = 0;
  for (int s = 0; s < options.stages; ++s) {
    if (options.stage >= 0 && s != options.stage) continue;
    Graph h;
    int64_t received = 0;
    if (!BuildStage(*g, options, a, s, &h, &received, err)) return false;
    if (options.stage < 0 && options.stages > 1) {
      // The stage with the highest baseline peak (ties: the first).
      SimOptions sim_options;
      sim_options.collect_live_at_peak = false;
      SimResult sim;
      if (!Simulate(h, BuildBaselineProgram(h, AccumulationMode::kInplace), sim_options, &sim, err))
        return false;
      if (sim.peak_bytes <= stage_peak) continue;
      stage_peak = sim.peak_bytes;
    }
    stage = s;
    chosen = std::move(h);
    chosen_received = received;
  }
  stats->stage_starts.clear();
  for (int op : a.stage_start_op) {
    const Op& first = g->ops[op];
    stats->stage_starts.push_back(first.scope.empty() ? first.id : first.scope.str());
  }
  *g = std::move(chosen);
  stats->rank = stage;
  stats->world_size = options.stages;
  stats->micro_batches = options.micro_batches;
  stats->schedule = options.schedule;
  stats->received_buffer_bytes = chosen_received;
  stats->in_flight = options.schedule == PipelineSchedule::kGPipe
                         ? options.micro_batches
                         : std::min(options.micro_batches, options.stages - stage);
  return true;
}

}  // namespace memplan::parallel
