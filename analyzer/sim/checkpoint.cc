#include "analyzer/sim/checkpoint.h"

#include <algorithm>

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

CheckpointProgram BuildCheckpointProgram(const Graph& g, const std::vector<bool>& keep,
                                         AccumulationMode mode) {
  return BuildCheckpointProgram(g, keep, mode, {}, {});
}

CheckpointProgram BuildCheckpointProgram(const Graph& g, const std::vector<bool>& keep,
                                         AccumulationMode mode,
                                         const std::vector<int>& recompute_group) {
  return BuildCheckpointProgram(g, keep, mode, recompute_group, {});
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

CheckpointProgram BuildCheckpointProgram(const Graph& g, const std::vector<bool>& keep,
                                         AccumulationMode mode,
                                         const std::vector<int>& recompute_group,
                                         const std::vector<bool>& each_use) {
  return BuildCheckpointProgram(g, keep, mode, recompute_group, each_use, {});
}

CheckpointProgram BuildCheckpointProgram(const Graph& g, const std::vector<bool>& keep,
                                         AccumulationMode mode,
                                         const std::vector<int>& recompute_group,
                                         const std::vector<bool>& each_use,
                                         const std::vector<bool>& reverse_order) {
  auto reversed = [&](int o) {
    return static_cast<size_t>(o) < reverse_order.size() && reverse_order[o];
  };
  const std::vector<int> order = ScheduleOrder(g, mode);
  const std::vector<bool>& kept = KeptToEnd(g);
  std::vector<int> runs;
  runs.reserve(order.size() + order.size() / 2);

  // Alive when the backward starts: resident, kept to the end, or kept.
  std::vector<bool> alive(g.tensors.size(), false), continues(g.tensors.size(), false);
  for (size_t t = 0; t < g.tensors.size(); ++t)
    continues[t] = kept[t] || (t < keep.size() && keep[t]);
  // A view of a kept buffer costs nothing to keep: it lives with its base.
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    int base = g.tensors[t].base;
    if (base != static_cast<int>(t) && (continues[base] || IsResident(g.tensors[base].kind)))
      continues[t] = true;
  }
  auto set_alive = [&] {
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      const int p = g.tensors[t].producer;
      alive[t] = IsResident(g.tensors[t].kind) ||
                 (continues[t] && p >= 0 && g.ops[p].phase == Phase::kForward);
    }
  };
  set_alive();

  CheckpointProgram result;
  std::vector<bool> rerun(g.ops.size(), false);
  std::vector<int> stack;
  // each_use: after an op reads t (or a view of it), t is dead again and its
  // producer may rerun; views of t read so far keep their old instance.
  const int64_t max_reruns = kMaxRerunFactor * static_cast<int64_t>(g.ops.size());
  auto release = [&](int u) {
    if (each_use.empty() || static_cast<int64_t>(result.recomputed_ops.size()) >= max_reruns)
      return;
    const int base = g.tensors[u].base;
    if (static_cast<size_t>(base) >= each_use.size() || !each_use[base] || continues[base]) return;
    for (int t : {base, u}) {
      const int p = g.tensors[t].producer;
      if (p < 0 || g.ops[p].phase != Phase::kForward || !alive[t]) continue;
      alive[t] = false;
      rerun[p] = false;
    }
  };
  // The first dead tensor op p needs (an input, or the base of a view it
  // makes), or -1.
  auto dead_need = [&](int p) {
    const std::vector<int>& inputs = g.ops[p].inputs;
    if (reversed(p)) {
      for (auto it = inputs.rbegin(); it != inputs.rend(); ++it)
        if (!alive[*it]) return *it;
    }
    for (int u : inputs)
      if (!alive[u]) return u;
    for (int t : g.ops[p].outputs) {
      int base = g.tensors[t].alias_of;
      if (base >= 0 && !alive[base] &&
          std::find(g.ops[p].outputs.begin(), g.ops[p].outputs.end(), base) ==
              g.ops[p].outputs.end())
        return base;
    }
    return -1;
  };
  auto ensure = [&](int t) {
    if (alive[t]) return;
    stack.assign(1, g.tensors[t].producer);
    while (!stack.empty()) {
      int p = stack.back();
      int u = dead_need(p);
      if (u >= 0) {
        stack.push_back(g.tensors[u].producer);  // a forward op: see the header
        continue;
      }
      stack.pop_back();
      if (rerun[p]) continue;
      rerun[p] = true;
      runs.push_back(p);
      result.recomputed_ops.push_back(p);
      for (int out : g.ops[p].outputs) {
        if (!alive[out]) result.recomputed_tensors.push_back(out);
        alive[out] = true;
      }
      for (int u : g.ops[p].inputs) release(u);
    }
  };
  // Recompute groups: the tensors of each group that backward ops read, in
  // the forward order of their producers.
  auto group_of = [&](int t) {
    int base = g.tensors[t].base;
    if (static_cast<size_t>(t) < recompute_group.size() && recompute_group[t] >= 0)
      return recompute_group[t];
    if (static_cast<size_t>(base) < recompute_group.size()) return recompute_group[base];
    return -1;
  };
  std::vector<std::vector<int>> members, group_rerun;
  std::vector<bool> wrapped;
  if (!recompute_group.empty()) {
    std::vector<int> position(g.ops.size(), 0);
    for (size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<int>(k);
    std::vector<bool> listed(g.tensors.size(), false);
    for (int o : order) {
      if (g.ops[o].phase == Phase::kForward) continue;
      for (int t : g.ops[o].inputs) {
        int grp = group_of(t);
        int p = g.tensors[t].producer;
        if (grp < 0 || listed[t] || p < 0 || g.ops[p].phase != Phase::kForward) continue;
        listed[t] = true;
        if (static_cast<size_t>(grp) >= members.size()) members.resize(grp + 1);
        members[grp].push_back(t);
      }
    }
    for (std::vector<int>& m : members)
      std::stable_sort(m.begin(), m.end(), [&](int a, int b) {
        return position[g.tensors[a].producer] < position[g.tensors[b].producer];
      });
    // A group is recomputed (wrapped) when one of its members is dead. Its
    // rerun: its forward ops in order up to its last member's producer (the
    // checkpoint's early stop), each unless its buffers are alive (saved).
    // Its inputs from outside (checkpoint's saved inputs) are kept.
    wrapped.assign(members.size(), false);
    group_rerun.resize(members.size());
    std::vector<int> last(members.size(), -1);
    for (size_t grp = 0; grp < members.size(); ++grp) {
      for (int m : members[grp]) wrapped[grp] = wrapped[grp] || !alive[m];
      if (!members[grp].empty()) last[grp] = position[g.tensors[members[grp].back()].producer];
    }
    for (size_t k = 0; k < order.size(); ++k) {
      const Op& op = g.ops[order[k]];
      if (op.phase != Phase::kForward || op.outputs.empty()) continue;
      const int grp = group_of(op.outputs[0]);
      if (grp < 0 || grp >= static_cast<int>(members.size()) || !wrapped[grp] ||
          static_cast<int>(k) > last[grp])
        continue;
      group_rerun[grp].push_back(order[k]);
      for (int t : op.inputs) {
        const int base = g.tensors[t].base;
        if (group_of(t) != grp && !IsResident(g.tensors[base].kind))
          continues[t] = continues[base] = true;
      }
    }
    set_alive();
  }
  std::vector<bool> triggered(members.size(), false);
  // Forward ops run where they stand (a pipeline stage interleaves
  // micro-batches' forwards and backwards); a backward op reads only
  // forward tensors made before it.
  for (int o : order) {
    const Op& op = g.ops[o];
    if (op.phase == Phase::kForward) {
      runs.push_back(o);
      continue;
    }
    const int own = op.outputs.empty() ? -1 : group_of(op.outputs[0]);
    for (int t : op.inputs) {
      int grp = group_of(t);
      if (grp < 0 || grp >= static_cast<int>(members.size()) || triggered[grp]) continue;
      if (alive[t] && grp != own) continue;
      triggered[grp] = true;
      if (!wrapped[grp]) continue;
      for (int p : group_rerun[grp])
        for (int u : g.ops[p].outputs)
          if (g.tensors[u].alias_of < 0) ensure(u);
      for (int m : members[grp]) ensure(m);
    }
    // Recomputing one input can release another (each_use): until all are
    // alive. Ensuring t releases only proper ancestors of t, so this ends.
    for (bool all_alive = false; !all_alive;) {
      all_alive = true;
      const size_t n = op.inputs.size();
      for (size_t i = 0; i < n; ++i) {
        const int t = op.inputs[reversed(o) ? n - 1 - i : i];
        if (alive[t]) continue;
        all_alive = false;
        ensure(t);
      }
    }
    runs.push_back(o);
    for (int out : op.outputs) alive[out] = true;
    for (int t : op.inputs) release(t);
  }
  std::sort(result.recomputed_tensors.begin(), result.recomputed_tensors.end());
  result.recomputed_tensors.erase(
      std::unique(result.recomputed_tensors.begin(), result.recomputed_tensors.end()),
      result.recomputed_tensors.end());
  result.program = BuildProgram(g, runs, mode, &continues);
  return result;
}

}  // namespace memplan
