#include "analyzer/program.h"

#include <algorithm>

namespace memplan {

bool ParseAccumulationMode(std::string_view name, AccumulationMode* out) {
  if (name == "inplace")
    *out = AccumulationMode::kInplace;
  else if (name == "out_of_place")
    *out = AccumulationMode::kOutOfPlace;
  else if (name == "deferred")
    *out = AccumulationMode::kDeferred;
  else
    return false;
  return true;
}

const char* AccumulationModeName(AccumulationMode m) {
  switch (m) {
    case AccumulationMode::kInplace:
      return "inplace";
    case AccumulationMode::kOutOfPlace:
      return "out_of_place";
    case AccumulationMode::kDeferred:
      return "deferred";
  }
  return "?";
}

std::vector<bool> KeptToEnd(const Graph& g) {
  std::vector<bool> kept(g.tensors.size(), false);
  for (size_t t = 0; t < g.tensors.size(); ++t)
    kept[t] = g.IsResidentTensor(static_cast<int>(t)) || g.IsParameterGradient(static_cast<int>(t));
  for (int t : g.outputs) kept[t] = true;
  return kept;
}

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

Program BuildBaselineProgram(const Graph& g, AccumulationMode mode) {
  const std::vector<int> order = OpOrder(g, mode);
  const int steps = static_cast<int>(order.size());
  const std::vector<bool> kept = KeptToEnd(g);
  std::vector<int> last_use(g.tensors.size(), -1);
  for (int p = 0; p < steps; ++p) {
    const Op& op = g.ops[order[p]];
    for (int t : op.outputs) {
      last_use[t] = std::max(last_use[t], p);
      // A view is made from its base, so the base lives at least until then.
      int base = g.tensors[t].alias_of;
      if (base >= 0) last_use[base] = std::max(last_use[base], p);
    }
    for (int t : op.inputs) last_use[t] = std::max(last_use[t], p);
  }
  std::vector<std::vector<int>> views(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].alias_of >= 0) views[g.tensors[t].alias_of].push_back(static_cast<int>(t));

  // May `in` be taken over by op order[p]? See the header for the rule.
  std::vector<int> stack;
  auto can_take_over = [&](const Op& op, int in, int out, int p) {
    if (g.IsView(in) || g.IsView(out) || kept[in] || last_use[in] != p) return false;
    if (g.tensors[in].bytes != g.tensors[out].bytes) return false;
    if (std::count(op.inputs.begin(), op.inputs.end(), in) != 1) return false;
    stack.assign(views[in].begin(), views[in].end());
    while (!stack.empty()) {
      int w = stack.back();
      stack.pop_back();
      if (kept[w] || last_use[w] >= p) return false;
      stack.insert(stack.end(), views[w].begin(), views[w].end());
    }
    return true;
  };

  std::vector<bool> consumed(g.tensors.size(), false);
  Program program;
  std::vector<Step> runs(steps);
  for (int p = 0; p < steps; ++p) {
    const Op& op = g.ops[order[p]];
    runs[p].op = order[p];
    if (mode == AccumulationMode::kInplace && op.accumulate && op.outputs.size() == 1) {
      for (int in : op.inputs) {
        if (can_take_over(op, in, op.outputs[0], p)) {
          runs[p].inplace.emplace_back(op.outputs[0], in);
          consumed[in] = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int>> frees(steps);
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (last_use[t] >= 0 && !kept[t] && !consumed[t]) frees[last_use[t]].push_back(int(t));
  program.steps.reserve(2 * steps);
  for (int p = 0; p < steps; ++p) {
    program.steps.push_back(std::move(runs[p]));
    if (!frees[p].empty()) {
      Step f;
      f.free = std::move(frees[p]);
      program.steps.push_back(std::move(f));
    }
  }
  return program;
}

}  // namespace memplan
