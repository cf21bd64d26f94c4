#include "analyzer/sim/checkpoint.h"

#include <algorithm>
#include <cstdint>

namespace memplan {

std::vector<int> CheckpointCandidates(const Graph& g) {
  const std::vector<bool>& kept = KeptToEnd(g);
  std::vector<bool> needed(g.tensors.size(), false);
  std::vector<int> work;
  auto need = [&](int t) {
    if (!needed[t]) {
      needed[t] = true;
      work.push_back(t);
    }
  };
  for (const Op& op : g.ops)
    if (op.phase != Phase::kForward)
      for (int t : op.inputs) need(t);
  while (!work.empty()) {
    int t = work.back();
    work.pop_back();
    if (g.tensors[t].alias_of >= 0) need(g.tensors[t].alias_of);
    int p = g.tensors[t].producer;
    if (p >= 0 && g.ops[p].phase == Phase::kForward)
      for (int u : g.ops[p].inputs) need(u);
  }
  std::vector<int> candidates;
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const Tensor& tensor = g.tensors[t];
    if (!needed[t] || kept[t] || tensor.alias_of >= 0 || IsResident(tensor.kind)) continue;
    if (tensor.producer < 0 || g.ops[tensor.producer].phase != Phase::kForward) continue;
    candidates.push_back(static_cast<int>(t));
  }
  return candidates;
}

std::vector<bool> EachUseMatters(const Graph& g) {
  std::vector<int> readers(g.tensors.size(), 0), last_reader(g.tensors.size(), -1);
  std::vector<bool> forward_reader(g.tensors.size(), false);
  for (size_t o = 0; o < g.ops.size(); ++o) {
    for (int u : g.ops[o].inputs) {
      const int base = g.tensors[u].base;
      if (last_reader[base] == static_cast<int>(o)) continue;
      last_reader[base] = static_cast<int>(o);
      ++readers[base];
      if (g.ops[o].phase == Phase::kForward) forward_reader[base] = true;
    }
  }
  std::vector<bool> matters(g.tensors.size(), false);
  for (int t : CheckpointCandidates(g)) matters[t] = readers[t] > 1 || forward_reader[t];
  return matters;
}

std::vector<bool> OrderMatters(const Graph& g) {
  std::vector<bool> candidate(g.tensors.size(), false);
  for (int t : CheckpointCandidates(g)) candidate[t] = true;
  std::vector<bool> matters(g.ops.size(), false);
  std::vector<int> bases;
  for (size_t o = 0; o < g.ops.size(); ++o) {
    bases.clear();
    for (int u : g.ops[o].inputs) {
      const int base = g.tensors[u].base;
      if (candidate[base] && std::find(bases.begin(), bases.end(), base) == bases.end())
        bases.push_back(base);
    }
    matters[o] = bases.size() >= 2;
  }
  return matters;
}

namespace {

// One BuildCheckpointProgram call: the state its steps share. The steps, in
// order: which tensors continue past the forward (the constructor), the
// recompute groups (PlanGroups), then the schedule (Build), each backward op
// making its inputs alive first (TriggerGroups, EnsureInputs).
class ProgramBuilder {
 public:
  ProgramBuilder(const Graph& g, const std::vector<bool>& keep,
                 const CheckpointProgramOptions& options)
      : g_(g),
        topo_(g.topology),
        mode_(options.mode),
        recompute_group_(options.recompute_group ? *options.recompute_group : NoGroups()),
        each_use_(options.each_use ? *options.each_use : NoFlags()),
        reverse_order_(options.reverse_order ? *options.reverse_order : NoFlags()),
        order_(ScheduleOrder(g, options.mode)),
        alive_(g.tensors.size(), false),
        continues_(g.tensors.size(), false),
        rerun_(g.ops.size(), false),
        max_reruns_(kMaxRerunFactor * static_cast<int64_t>(g.ops.size())) {
    const std::vector<bool>& kept = KeptToEnd(g);
    runs_.reserve(order_.size() + order_.size() / 2);
    // Alive when the backward starts: resident, kept to the end, or kept.
    for (size_t t = 0; t < g.tensors.size(); ++t)
      continues_[t] = kept[t] || (t < keep.size() && keep[t]);
    // A view of a kept buffer costs nothing to keep: it lives with its base.
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      int base = topo_.base[t];
      if (base != static_cast<int>(t) && (continues_[base] || topo_.resident[base]))
        continues_[t] = true;
    }
    SetAlive();
  }

  // The program's recomputation, its runs in runs() and the tensors that
  // continue past the forward in continues(); no steps.
  CheckpointProgram Build() {
    if (!recompute_group_.empty()) PlanGroups();
    triggered_.assign(members_.size(), false);
    // Forward ops run where they stand (a pipeline stage interleaves
    // micro-batches' forwards and backwards); a backward op reads only
    // forward tensors made before it.
    for (int o : order_) {
      if (topo_.forward[o]) {
        runs_.push_back(o);
        continue;
      }
      if (!members_.empty()) TriggerGroups(o);  // no groups: nothing to trigger
      EnsureInputs(o);
      runs_.push_back(o);
      for (int out : topo_.Outputs(o)) alive_[out] = true;
      for (int t : topo_.Inputs(o)) Release(t);
    }
    // Sorted and distinct by a pass over the tensors (no sort: it is long).
    std::vector<int>& tensors = result_.recomputed_tensors;
    if (!tensors.empty()) {
      std::vector<uint8_t> recomputed(g_.tensors.size(), 0);
      for (int t : tensors) recomputed[t] = true;
      tensors.clear();
      for (size_t t = 0; t < recomputed.size(); ++t)
        if (recomputed[t]) tensors.push_back(static_cast<int>(t));
    }
    return std::move(result_);
  }

  const std::vector<int>& runs() const { return runs_; }
  const std::vector<bool>& continues() const { return continues_; }

 private:
  static const std::vector<int>& NoGroups() {
    static const std::vector<int> none;
    return none;
  }
  static const std::vector<bool>& NoFlags() {
    static const std::vector<bool> none;
    return none;
  }

  bool Reversed(int o) const {
    return static_cast<size_t>(o) < reverse_order_.size() && reverse_order_[o];
  }

  // Alive when the backward starts: resident, or made by a forward op and
  // continuing.
  void SetAlive() {
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      const int p = topo_.producer[t];
      alive_[t] = topo_.resident[t] || (continues_[t] && p >= 0 && topo_.forward[p]);
    }
  }

  // each_use: after an op reads u (or a view of it), u's base is dead again
  // and its producer may rerun; views of it read so far keep their old
  // instance.
  void Release(int u) {
    if (each_use_.empty() || static_cast<int64_t>(result_.recomputed_ops.size()) >= max_reruns_)
      return;
    const int base = topo_.base[u];
    if (static_cast<size_t>(base) >= each_use_.size() || !each_use_[base] || continues_[base])
      return;
    for (int t : {base, u}) {
      const int p = topo_.producer[t];
      if (p < 0 || !topo_.forward[p] || !alive_[t]) continue;
      alive_[t] = false;
      rerun_[p] = false;
    }
  }

  // The first dead tensor op p needs (an input, or the base of a view it
  // makes), or -1.
  int DeadNeed(int p) const {
    const std::span<const int> inputs = topo_.Inputs(p);
    if (Reversed(p)) {
      for (auto it = inputs.rbegin(); it != inputs.rend(); ++it)
        if (!alive_[*it]) return *it;
    }
    for (int u : inputs)
      if (!alive_[u]) return u;
    const std::span<const int> outputs = topo_.Outputs(p);
    for (int t : outputs) {
      int base = topo_.alias_of[t];
      if (base >= 0 && !alive_[base] &&
          std::find(outputs.begin(), outputs.end(), base) == outputs.end())
        return base;
    }
    return -1;
  }

  // Makes t alive, rerunning its producer once its own inputs are (an
  // explicit stack, no recursion).
  void Ensure(int t) {
    if (alive_[t]) return;
    stack_.assign(1, topo_.producer[t]);
    while (!stack_.empty()) {
      int p = stack_.back();
      int u = DeadNeed(p);
      if (u >= 0) {
        stack_.push_back(topo_.producer[u]);  // a forward op: see the header
        continue;
      }
      stack_.pop_back();
      if (rerun_[p]) continue;
      rerun_[p] = true;
      runs_.push_back(p);
      result_.recomputed_ops.push_back(p);
      for (int out : topo_.Outputs(p)) {
        if (!alive_[out]) result_.recomputed_tensors.push_back(out);
        alive_[out] = true;
      }
      for (int in : topo_.Inputs(p)) Release(in);
    }
  }

  // The recompute group of t (or of its base), or -1.
  int GroupOf(int t) const {
    int base = g_.tensors[t].base;
    if (static_cast<size_t>(t) < recompute_group_.size() && recompute_group_[t] >= 0)
      return recompute_group_[t];
    if (static_cast<size_t>(base) < recompute_group_.size()) return recompute_group_[base];
    return -1;
  }

  // Recompute groups: the tensors of each group that backward ops read, in
  // the forward order of their producers (members_); which groups are
  // recomputed (wrapped_) and the forward ops each reruns (group_rerun_).
  void PlanGroups() {
    std::vector<int> position(g_.ops.size(), 0);
    for (size_t k = 0; k < order_.size(); ++k) position[order_[k]] = static_cast<int>(k);
    ListMembers(position);
    // A group is recomputed (wrapped) when one of its members is dead. Its
    // rerun: its forward ops in order up to its last member's producer (the
    // checkpoint's early stop), each unless its buffers are alive (saved).
    // Its inputs from outside (checkpoint's saved inputs) are kept.
    wrapped_.assign(members_.size(), false);
    group_rerun_.resize(members_.size());
    std::vector<int> last(members_.size(), -1);
    for (size_t grp = 0; grp < members_.size(); ++grp) {
      for (int m : members_[grp]) wrapped_[grp] = wrapped_[grp] || !alive_[m];
      if (!members_[grp].empty()) last[grp] = position[g_.tensors[members_[grp].back()].producer];
    }
    for (size_t k = 0; k < order_.size(); ++k) {
      const Op& op = g_.ops[order_[k]];
      if (op.phase != Phase::kForward || op.outputs.empty()) continue;
      const int grp = GroupOf(op.outputs[0]);
      if (grp < 0 || grp >= static_cast<int>(members_.size()) || !wrapped_[grp] ||
          static_cast<int>(k) > last[grp])
        continue;
      group_rerun_[grp].push_back(order_[k]);
      for (int t : op.inputs) {
        const int base = g_.tensors[t].base;
        if (GroupOf(t) != grp && !IsResident(g_.tensors[base].kind))
          continues_[t] = continues_[base] = true;
      }
    }
    SetAlive();
  }

  // members_: by group, the forward-made tensors of the group that backward
  // ops read, sorted by their producers' positions in the schedule.
  void ListMembers(const std::vector<int>& position) {
    std::vector<bool> listed(g_.tensors.size(), false);
    for (int o : order_) {
      if (g_.ops[o].phase == Phase::kForward) continue;
      for (int t : g_.ops[o].inputs) {
        int grp = GroupOf(t);
        int p = g_.tensors[t].producer;
        if (grp < 0 || listed[t] || p < 0 || g_.ops[p].phase != Phase::kForward) continue;
        listed[t] = true;
        if (static_cast<size_t>(grp) >= members_.size()) members_.resize(grp + 1);
        members_[grp].push_back(t);
      }
    }
    for (std::vector<int>& m : members_)
      std::stable_sort(m.begin(), m.end(), [&](int a, int b) {
        return position[g_.tensors[a].producer] < position[g_.tensors[b].producer];
      });
  }

  // Backward op o's first read of a group's tensor triggers the group: when
  // the tensor is dead, or always when o is the group's own backward.
  void TriggerGroups(int o) {
    const Op& op = g_.ops[o];
    const int own = op.outputs.empty() ? -1 : GroupOf(op.outputs[0]);
    for (int t : op.inputs) {
      int grp = GroupOf(t);
      if (grp < 0 || grp >= static_cast<int>(members_.size()) || triggered_[grp]) continue;
      if (alive_[t] && grp != own) continue;
      triggered_[grp] = true;
      if (!wrapped_[grp]) continue;
      for (int p : group_rerun_[grp])
        for (int u : g_.ops[p].outputs)
          if (g_.tensors[u].alias_of < 0) Ensure(u);
      for (int m : members_[grp]) Ensure(m);
    }
  }

  // Recomputing one input can release another (each_use): until all are
  // alive. Ensuring t releases only proper ancestors of t, so this ends.
  void EnsureInputs(int o) {
    const std::span<const int> inputs = topo_.Inputs(o);
    for (bool all_alive = false; !all_alive;) {
      all_alive = true;
      const size_t n = inputs.size();
      for (size_t i = 0; i < n; ++i) {
        const int t = inputs[Reversed(o) ? n - 1 - i : i];
        if (alive_[t]) continue;
        all_alive = false;
        Ensure(t);
      }
    }
  }

  const Graph& g_;
  const Topology& topo_;
  const AccumulationMode mode_;
  const std::vector<int>& recompute_group_;
  const std::vector<bool>& each_use_;
  const std::vector<bool>& reverse_order_;
  const std::vector<int> order_;  // ScheduleOrder
  std::vector<int> runs_;         // the program's op runs, in order
  // Bytes, not bits, where the loops test and set them most.
  std::vector<uint8_t> alive_;   // by tensor
  std::vector<bool> continues_;  // by tensor (BuildProgram's keep)
  std::vector<uint8_t> rerun_;   // by op: rerun, its outputs still alive
  std::vector<int> stack_;       // Ensure's
  const int64_t max_reruns_;
  CheckpointProgram result_;
  // Recompute groups (PlanGroups), by group.
  std::vector<std::vector<int>> members_, group_rerun_;
  std::vector<bool> wrapped_, triggered_;
};

}  // namespace

CheckpointProgram BuildCheckpointProgram(const Graph& g, const std::vector<bool>& keep,
                                         const CheckpointProgramOptions& options) {
  ProgramBuilder builder(g, keep, options);
  CheckpointProgram out = builder.Build();
  out.program = BuildProgram(g, builder.runs(), options.mode, &builder.continues());
  return out;
}

CheckpointProgram LayOutCheckpointProgram(const Graph& g, const std::vector<bool>& keep,
                                          const CheckpointProgramOptions& options,
                                          ProgramLayout* layout) {
  ProgramBuilder builder(g, keep, options);
  CheckpointProgram out = builder.Build();
  LayOutProgram(g, builder.runs(), options.mode, &builder.continues(), layout);
  return out;
}

}  // namespace memplan
