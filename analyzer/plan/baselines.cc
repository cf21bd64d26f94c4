#include "analyzer/plan/baselines.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "analyzer/sim/checkpoint.h"

namespace memplan {

namespace {

// keep[] over the candidates, with a setter that maps a view to its base and
// skips non-candidates.
class KeepSet {
 public:
  explicit KeepSet(const Graph& g) : g_(g), keep_(g.tensors.size(), false) {
    is_candidate_.assign(g.tensors.size(), false);
    for (int t : CheckpointCandidates(g)) is_candidate_[t] = true;
  }
  void Keep(int t) {
    int base = g_.tensors[t].base;
    if (base >= 0 && is_candidate_[base]) keep_[base] = true;
  }
  bool IsCandidate(int t) const { return is_candidate_[t]; }
  std::vector<bool> Take() { return std::move(keep_); }

 private:
  const Graph& g_;
  std::vector<bool> keep_;
  std::vector<bool> is_candidate_;
};

}  // namespace

std::vector<bool> SaveAllCheckpoints(const Graph& g) {
  KeepSet keep(g);
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (keep.IsCandidate(static_cast<int>(t))) keep.Keep(static_cast<int>(t));
  return keep.Take();
}

std::vector<bool> SqrtCheckpoints(const Graph& g, int k) {
  KeepSet keep(g);
  std::vector<int> forward;
  for (size_t o = 0; o < g.ops.size(); ++o)
    if (g.ops[o].phase == Phase::kForward) forward.push_back(static_cast<int>(o));
  const int64_t n = static_cast<int64_t>(forward.size());
  if (n == 0) return keep.Take();
  int64_t segments = k > 0 ? k : static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  segments = std::clamp<int64_t>(segments, 1, n);
  for (int64_t i = 0; i < segments; ++i) {
    int64_t last = (i + 1) * n / segments - 1;  // segment i: [i*n/k, (i+1)*n/k)
    for (int t : g.ops[forward[last]].outputs) keep.Keep(t);
  }
  return keep.Take();
}

std::string_view ScopeBlock(std::string_view scope, int depth) {
  size_t pos = 0;
  for (int d = 1;; ++d) {
    size_t dot = scope.find('.', pos);
    if (dot == std::string_view::npos) return scope;
    if (d >= depth) return scope.substr(0, dot);
    pos = dot + 1;
  }
}

std::vector<bool> BlockCheckpoints(const Graph& g, int depth) {
  KeepSet keep(g);
  // Block id of every forward op: one per distinct block name, a fresh one
  // for each op without scope.
  std::vector<int> block(g.ops.size(), -1);
  std::unordered_map<std::string_view, int> ids;
  int next = 0;
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    if (op.phase != Phase::kForward) continue;
    if (op.scope.empty()) {
      block[o] = next++;
    } else {
      auto [it, added] = ids.emplace(ScopeBlock(op.scope, depth), next);
      if (added) ++next;
      block[o] = it->second;
    }
  }
  for (size_t o = 0; o < g.ops.size(); ++o) {
    if (g.ops[o].phase != Phase::kForward) continue;
    for (int u : g.ops[o].inputs) {
      int base = g.tensors[u].base;
      if (base < 0 || !keep.IsCandidate(base)) continue;
      int p = g.tensors[base].producer;
      if (p >= 0 && block[p] != block[o]) keep.Keep(base);
    }
  }
  return keep.Take();
}

}  // namespace memplan
