#include "analyzer/sim/program.h"

#include <algorithm>
#include <array>
#include <memory>
#include <span>

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

namespace {

// The views made directly of each tensor, flat: of(t) = [start[t], start[t + 1]).
struct ViewLists {
  std::vector<int> start, views;
  explicit ViewLists(const Topology& topo) : start(topo.alias_of.size() + 1, 0) {
    const size_t nt = topo.alias_of.size();
    for (size_t t = 0; t < nt; ++t)
      if (topo.alias_of[t] >= 0) ++start[topo.alias_of[t] + 1];
    for (size_t t = 0; t < nt; ++t) start[t + 1] += start[t];
    views.resize(start[nt]);
    std::vector<int> fill(start.begin(), start.end() - 1);
    for (size_t t = 0; t < nt; ++t)
      if (topo.alias_of[t] >= 0) views[fill[topo.alias_of[t]]++] = static_cast<int>(t);
  }
  void PushViews(int t, std::vector<int>* out) const {
    out->insert(out->end(), views.begin() + start[t], views.begin() + start[t + 1]);
  }
};

// An accumulate step that may take over its running sum's buffer, with what
// is known while the instances are made; decided once their last uses are.
struct TakeOverCandidate {
  int step, out, in, instance;  // the sum `in` and its instance at `step`
  int views_begin, views_end;   // instances of its live views at `step`
};

}  // namespace

void LayOutProgram(const Graph& g, const std::vector<int>& runs, AccumulationMode mode,
                   const std::vector<bool>* keep, ProgramLayout* out) {
  const int steps = static_cast<int>(runs.size());
  const Topology& topo = g.topology;
  const std::vector<bool>& kept = KeptToEnd(g);
  auto continues = [&](int t) { return kept[t] || (keep != nullptr && (*keep)[t]); };

  // One pass: instances (one per production, except that a rerun does not
  // replace a kept tensor), the last step that uses each, and the in-place
  // candidates with the instances they depend on.
  struct Instance {
    int tensor;
    int last;
    bool consumed = false;
  };
  std::vector<Instance> instances;
  instances.reserve(g.tensors.size() + steps);
  // By tensor: its instance now (-1: none yet) and that instance's last use
  // so far, side by side (one cache line per use); written back to the
  // instance when the next one starts and after the pass.
  struct Current {
    int instance = -1;
    int last = -1;
  };
  std::vector<Current> current(g.tensors.size());
  auto write_back = [&](int t) {
    if (current[t].instance >= 0) instances[current[t].instance].last = current[t].last;
  };
  auto start = [&](int t, int step) {
    write_back(t);
    current[t] = {static_cast<int>(instances.size()), step};
    instances.push_back({t, step});
  };
  auto use = [&](int t, int step) {
    if (current[t].instance >= 0) current[t].last = std::max(current[t].last, step);
  };
  // Reruns that remake a kept tensor: (step, tensor, the kept instance).
  std::vector<std::array<int, 3>> remade;
  std::vector<TakeOverCandidate> candidates;
  std::vector<int> candidate_views, stack;
  std::unique_ptr<ViewLists> view_lists;  // made at the first candidate
  // Only the running sum (the first input) is taken over, as PyTorch's
  // InputBuffer does for dense gradients: a contribution never is. Here the
  // conditions known at step p; the last uses are checked once all are known.
  auto note_candidate = [&](int p, int o) {
    const std::span<const int> inputs = topo.Inputs(o), outputs = topo.Outputs(o);
    if (outputs.size() != 1 || inputs.empty()) return;
    const int in = inputs[0], out = outputs[0];
    if (topo.IsView(in) || topo.IsView(out) || continues(in) || current[in].instance < 0) return;
    if (topo.bytes[in] != topo.bytes[out]) return;
    if (std::count(inputs.begin(), inputs.end(), in) != 1) return;
    if (!view_lists) view_lists = std::make_unique<ViewLists>(topo);
    TakeOverCandidate c{p, out, in, current[in].instance, static_cast<int>(candidate_views.size()),
                        0};
    stack.clear();
    view_lists->PushViews(in, &stack);
    while (!stack.empty()) {
      int w = stack.back();
      stack.pop_back();
      if (kept[w]) {
        candidate_views.resize(c.views_begin);
        return;
      }
      if (current[w].instance >= 0) candidate_views.push_back(current[w].instance);
      view_lists->PushViews(w, &stack);
    }
    c.views_end = static_cast<int>(candidate_views.size());
    candidates.push_back(c);
  };
  for (int p = 0; p < steps; ++p) {
    const int o = runs[p];
    for (int t : topo.Inputs(o)) use(t, p);
    if (mode == AccumulationMode::kInplace && topo.accumulate[o]) note_candidate(p, o);
    for (int t : topo.Outputs(o)) {
      if (current[t].instance < 0 || !continues(t))
        start(t, p);
      else
        remade.push_back({p, t, current[t].instance});
      int base = topo.alias_of[t];  // a view is made from its base
      if (base >= 0) use(base, p);
    }
  }

  for (size_t t = 0; t < current.size(); ++t) write_back(static_cast<int>(t));

  // In-place takeovers: the sum's last use is this step and no view of it
  // is used here or later.
  out->runs = runs;
  out->takeover.assign(steps, {-1, -1});
  for (const TakeOverCandidate& c : candidates) {
    if (instances[c.instance].last != c.step) continue;
    bool views_dead = true;
    for (int v = c.views_begin; v < c.views_end && views_dead; ++v)
      views_dead = instances[candidate_views[v]].last < c.step;
    if (!views_dead) continue;
    out->takeover[c.step] = {c.out, c.in};
    instances[c.instance].consumed = true;
  }
  // The tensors freed after each run, by a counting sort on the run: each
  // instance last used there, and each rerun's copy of a kept tensor freed
  // before the rerun (the rerun allocates a copy nothing reads, freed right
  // after it).
  std::vector<int>& start_of = out->free_start;
  start_of.assign(steps + 1, 0);
  auto for_each_free = [&](auto&& visit) {
    for (const Instance& inst : instances)
      if (!kept[inst.tensor] && !inst.consumed && inst.last >= 0) visit(inst.last, inst.tensor);
    for (const auto& [step, t, inst] : remade)
      if (!kept[t] && instances[inst].last < step) visit(step, t);
  };
  for_each_free([&](int step, int) { ++start_of[step + 1]; });
  for (int p = 0; p < steps; ++p) start_of[p + 1] += start_of[p];
  out->frees.resize(start_of[steps]);
  std::vector<int> fill(start_of.begin(), start_of.end() - 1);
  for_each_free([&](int step, int t) { out->frees[fill[step]++] = t; });
}

Program MaterializeProgram(const ProgramLayout& layout) {
  const int steps = static_cast<int>(layout.runs.size());
  Program program;
  program.steps.reserve(2 * steps);
  for (int p = 0; p < steps; ++p) {
    Step& run = program.steps.emplace_back();
    run.op = layout.runs[p];
    if (layout.takeover[p].first >= 0) run.inplace.push_back(layout.takeover[p]);
    const int begin = layout.free_start[p], end = layout.free_start[p + 1];
    if (begin < end) {
      Step& free = program.steps.emplace_back();
      free.free.assign(layout.frees.begin() + begin, layout.frees.begin() + end);
      std::sort(free.free.begin(), free.free.end());
    }
  }
  return program;
}

Program BuildProgram(const Graph& g, const std::vector<int>& runs, AccumulationMode mode,
                     const std::vector<bool>* keep) {
  ProgramLayout layout;
  LayOutProgram(g, runs, mode, keep, &layout);
  return MaterializeProgram(layout);
}

Program BuildBaselineProgram(const Graph& g, AccumulationMode mode) {
  return BuildProgram(g, OpOrder(g, mode), mode, nullptr);
}

}  // namespace memplan
