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
  auto produce = [&](int step, const Op& op) {
    for (int t : op.outputs) {
      if (current[t] < 0 || !continues(t))
        start(t, step);
      else
        remade.push_back({step, t, current[t]});
      int base = g.tensors[t].alias_of;  // a view is made from its base
      if (base >= 0) use(base, step);
    }
  };
  for (int p = 0; p < steps; ++p) {
    const Op& op = g.ops[runs[p]];
    for (int t : op.inputs) use(t, p);
    produce(p, op);
  }

  // Pass 2: replay the instances to decide in-place takeovers and frees.
  std::vector<std::vector<int>> views(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].alias_of >= 0) views[g.tensors[t].alias_of].push_back(static_cast<int>(t));
  std::fill(current.begin(), current.end(), -1);
  size_t next_instance = 0;
  std::vector<int> stack;
  // May op (at step p) take over `in`'s buffer for `out`? See the header.
  auto can_take_over = [&](const Op& op, int in, int out, int p) {
    if (g.IsView(in) || g.IsView(out) || continues(in) || current[in] < 0) return false;
    if (instances[current[in]].last != p) return false;
    if (g.tensors[in].bytes != g.tensors[out].bytes) return false;
    if (std::count(op.inputs.begin(), op.inputs.end(), in) != 1) return false;
    stack.assign(views[in].begin(), views[in].end());
    while (!stack.empty()) {
      int w = stack.back();
      stack.pop_back();
      if (kept[w] || (current[w] >= 0 && instances[current[w]].last >= p)) return false;
      stack.insert(stack.end(), views[w].begin(), views[w].end());
    }
    return true;
  };
  std::vector<Step> run_steps(steps);
  for (int p = 0; p < steps; ++p) {
    const Op& op = g.ops[runs[p]];
    run_steps[p].op = runs[p];
    // Only the running sum (the first input) is taken over, as PyTorch's
    // InputBuffer does for dense gradients: a contribution never is.
    if (mode == AccumulationMode::kInplace && op.accumulate && op.outputs.size() == 1 &&
        !op.inputs.empty() && can_take_over(op, op.inputs[0], op.outputs[0], p)) {
      run_steps[p].inplace.emplace_back(op.outputs[0], op.inputs[0]);
      instances[current[op.inputs[0]]].consumed = true;
    }
    for (int t : op.outputs)  // replay pass 1's instance starts
      if (next_instance < instances.size() && instances[next_instance].tensor == t &&
          (current[t] < 0 || !continues(t)))
        current[t] = static_cast<int>(next_instance++);
  }
  std::vector<std::vector<int>> frees(steps);
  for (const Instance& inst : instances)
    if (!kept[inst.tensor] && !inst.consumed && inst.last >= 0)
      frees[inst.last].push_back(inst.tensor);
  // A kept copy last used before the rerun is freed by then: the rerun
  // allocates a copy nothing reads, freed right after it.
  for (const auto& [step, t, inst] : remade)
    if (!kept[t] && instances[inst].last < step) frees[step].push_back(t);
  Program program;
  program.steps.reserve(2 * steps);
  for (int p = 0; p < steps; ++p) {
    program.steps.push_back(std::move(run_steps[p]));
    if (!frees[p].empty()) {
      std::sort(frees[p].begin(), frees[p].end());
      Step f;
      f.free = std::move(frees[p]);
      program.steps.push_back(std::move(f));
    }
  }
  return program;
}

Program BuildBaselineProgram(const Graph& g, AccumulationMode mode) {
  return BuildProgram(g, OpOrder(g, mode), mode, nullptr);
}

}  // namespace memplan
