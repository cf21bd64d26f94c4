#include "analyzer/sim/program.h"

#include <algorithm>
#include <array>

#include "analyzer/base/enum_table.h"

namespace memplan {

namespace {

constexpr EnumName<AccumulationMode> kAccumulationModes[] = {
    {AccumulationMode::kInplace, "inplace"},
    {AccumulationMode::kOutOfPlace, "out_of_place"},
    {AccumulationMode::kDeferred, "deferred"},
};

}  // namespace

bool ParseAccumulationMode(std::string_view name, AccumulationMode* out) {
  return ParseEnum(kAccumulationModes, name, out);
}

const char* AccumulationModeName(AccumulationMode m) { return NameOf(kAccumulationModes, m, "?"); }

const std::vector<bool>& KeptToEnd(const Graph& g) { return g.kept_to_end; }

namespace {

// Op order: file order, with accumulate chains moved as late as possible in
// deferred mode (just before the first non-accumulate reader of their sum).
std::vector<int> OpOrder(const Graph& g, AccumulationMode mode) {
  const int n = static_cast<int>(g.ops.size());
  std::vector<int> order;
  order.reserve(n);
  if (mode != AccumulationMode::kDeferred) {
    for (int o = 0; o < n; ++o) order.push_back(o);
    return order;
  }
  std::vector<int> first_reader(g.tensors.size(), -1);
  for (int o = n; o-- > 0;)
    for (int t : g.ops[o].inputs) first_reader[t] = o;
  int end_anchor = n;  // before the optimizer phase, or at the very end
  for (int o = 0; o < n; ++o) {
    if (g.ops[o].phase == Phase::kOptimizer) {
      end_anchor = o;
      break;
    }
  }
  std::vector<int> anchor(n, -1);
  for (int o = n; o-- > 0;) {
    if (!g.ops[o].accumulate) continue;
    int reader = -1;
    for (int t : g.ops[o].outputs)
      if (first_reader[t] >= 0 && (reader < 0 || first_reader[t] < reader))
        reader = first_reader[t];
    if (reader < 0)
      anchor[o] = std::max(end_anchor, o + 1);
    else
      anchor[o] = g.ops[reader].accumulate ? anchor[reader] : reader;
  }
  std::vector<std::vector<int>> before(n + 1);
  for (int o = 0; o < n; ++o)
    if (g.ops[o].accumulate) before[anchor[o]].push_back(o);
  for (int o = 0; o <= n; ++o) {
    for (int a : before[o]) order.push_back(a);
    if (o < n && !g.ops[o].accumulate) order.push_back(o);
  }
  return order;
}

}  // namespace

std::vector<int> ScheduleOrder(const Graph& g, AccumulationMode mode) { return OpOrder(g, mode); }

Program BuildProgram(const Graph& g, const std::vector<int>& runs, AccumulationMode mode,
                     const std::vector<bool>* keep) {
  const int steps = static_cast<int>(runs.size());
  const Topology& topo = g.topology;
  const std::vector<bool>& kept = KeptToEnd(g);
  auto continues = [&](int t) { return kept[t] || (keep != nullptr && (*keep)[t]); };

  // Pass 1: instances (one per production, except that a rerun does not
  // replace a kept tensor) and the last step that uses each.
  struct Instance {
    int tensor;
    int last;
    bool consumed = false;
  };
  std::vector<Instance> instances;
  instances.reserve(g.tensors.size() + steps);
  std::vector<int> current(g.tensors.size(), -1);
  auto start = [&](int t, int step) {
    current[t] = static_cast<int>(instances.size());
    instances.push_back({t, step});
  };
  auto use = [&](int t, int step) {
    if (current[t] >= 0) instances[current[t]].last = std::max(instances[current[t]].last, step);
  };
  // Reruns that remake a kept tensor: (step, tensor, the kept instance).
  std::vector<std::array<int, 3>> remade;
  auto produce = [&](int step, int o) {
    for (int t : topo.Outputs(o)) {
      if (current[t] < 0 || !continues(t))
        start(t, step);
      else
        remade.push_back({step, t, current[t]});
      int base = topo.alias_of[t];  // a view is made from its base
      if (base >= 0) use(base, step);
    }
  };
  for (int p = 0; p < steps; ++p) {
    for (int t : topo.Inputs(runs[p])) use(t, p);
    produce(p, runs[p]);
  }

  // Pass 2: replay the instances to decide in-place takeovers and frees.
  // The views made directly of each tensor, flat: views_of[view_start[t]..view_start[t + 1]).
  const size_t nt = g.tensors.size();
  std::vector<int> view_start(nt + 1, 0), views_of;
  for (size_t t = 0; t < nt; ++t)
    if (topo.alias_of[t] >= 0) ++view_start[topo.alias_of[t] + 1];
  for (size_t t = 0; t < nt; ++t) view_start[t + 1] += view_start[t];
  views_of.resize(view_start[nt]);
  {
    std::vector<int> fill(view_start.begin(), view_start.end() - 1);
    for (size_t t = 0; t < nt; ++t)
      if (topo.alias_of[t] >= 0) views_of[fill[topo.alias_of[t]]++] = static_cast<int>(t);
  }
  auto push_views = [&](int t, std::vector<int>* out) {
    out->insert(out->end(), views_of.begin() + view_start[t], views_of.begin() + view_start[t + 1]);
  };
  std::fill(current.begin(), current.end(), -1);
  size_t next_instance = 0;
  std::vector<int> stack;
  // May op (at step p) take over `in`'s buffer for `out`? See the header.
  auto can_take_over = [&](const Op& op, int in, int out, int p) {
    if (topo.IsView(in) || topo.IsView(out) || continues(in) || current[in] < 0) return false;
    if (instances[current[in]].last != p) return false;
    if (topo.bytes[in] != topo.bytes[out]) return false;
    if (std::count(op.inputs.begin(), op.inputs.end(), in) != 1) return false;
    stack.clear();
    push_views(in, &stack);
    while (!stack.empty()) {
      int w = stack.back();
      stack.pop_back();
      if (kept[w] || (current[w] >= 0 && instances[current[w]].last >= p)) return false;
      push_views(w, &stack);
    }
    return true;
  };
  std::vector<Step> run_steps(steps);
  for (int p = 0; p < steps; ++p) {
    const int o = runs[p];
    run_steps[p].op = o;
    // Only the running sum (the first input) is taken over, as PyTorch's
    // InputBuffer does for dense gradients: a contribution never is.
    if (mode == AccumulationMode::kInplace && topo.accumulate[o]) {
      const Op& op = g.ops[o];
      if (op.outputs.size() == 1 && !op.inputs.empty() &&
          can_take_over(op, op.inputs[0], op.outputs[0], p)) {
        run_steps[p].inplace.emplace_back(op.outputs[0], op.inputs[0]);
        instances[current[op.inputs[0]]].consumed = true;
      }
    }
    for (int t : topo.Outputs(o))  // replay pass 1's instance starts
      if (next_instance < instances.size() && instances[next_instance].tensor == t &&
          (current[t] < 0 || !continues(t)))
        current[t] = static_cast<int>(next_instance++);
  }
  // The tensors freed after each step, flat (a counting sort by step):
  // freed[free_start[p]..free_start[p + 1]).
  std::vector<int> free_start(steps + 1, 0);
  auto freed_instance = [&](const Instance& inst) {
    return !kept[inst.tensor] && !inst.consumed && inst.last >= 0;
  };
  // A kept copy last used before the rerun is freed by then: the rerun
  // allocates a copy nothing reads, freed right after it.
  auto freed_rerun = [&](int step, int t, int inst) {
    return !kept[t] && instances[inst].last < step;
  };
  for (const Instance& inst : instances)
    if (freed_instance(inst)) ++free_start[inst.last + 1];
  for (const auto& [step, t, inst] : remade)
    if (freed_rerun(step, t, inst)) ++free_start[step + 1];
  int free_steps = 0;
  for (int p = 0; p < steps; ++p) {
    free_steps += free_start[p + 1] > 0;
    free_start[p + 1] += free_start[p];
  }
  std::vector<int> freed(free_start[steps]);
  {
    std::vector<int> fill(free_start.begin(), free_start.end() - 1);
    for (const Instance& inst : instances)
      if (freed_instance(inst)) freed[fill[inst.last]++] = inst.tensor;
    for (const auto& [step, t, inst] : remade)
      if (freed_rerun(step, t, inst)) freed[fill[step]++] = t;
  }
  Program program;
  program.steps.reserve(steps + free_steps);
  for (int p = 0; p < steps; ++p) {
    program.steps.push_back(std::move(run_steps[p]));
    if (free_start[p + 1] > free_start[p]) {
      Step& f = program.steps.emplace_back();
      f.free.assign(freed.begin() + free_start[p], freed.begin() + free_start[p + 1]);
      std::sort(f.free.begin(), f.free.end());
    }
  }
  return program;
}

Program BuildBaselineProgram(const Graph& g, AccumulationMode mode) {
  return BuildProgram(g, OpOrder(g, mode), mode, nullptr);
}

}  // namespace memplan
