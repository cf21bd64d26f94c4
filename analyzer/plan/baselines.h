// Hand-written checkpoint sets: what users apply by hand, scored like any
// plan (ScoreCheckpointSet, analyzer/plan/planner.h) so the planner can be held to
// them. Each returns keep[t] by tensor index over CheckpointCandidates(g):
// true only for candidates. A chosen tensor that is a view stands for its base
// (views are never candidates: they are kept with their base), and a chosen
// tensor that is not a candidate (resident, kept to the end anyway, not needed
// by the backward) is skipped. None of them looks at bytes, costs or a budget:
// they are the fixed recipes the planner must never do worse than.
#ifndef MEMPLAN_ANALYZER_PLAN_BASELINES_H_
#define MEMPLAN_ANALYZER_PLAN_BASELINES_H_

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/ir/graph.h"

namespace memplan {

// Keep every candidate: the baseline program's memory (no recomputation).
// O(ops x arity + tensors).
std::vector<bool> SaveAllCheckpoints(const Graph& g);

// Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost", sqrt(n)
// recipe. Recipe: the n forward ops in file order are split into k contiguous
// segments (k = ceil(sqrt(n)) when k <= 0, clamped to [1, n]; segment i holds
// ops [i*n/k, (i+1)*n/k)), and only the outputs of each segment's last op are
// kept; everything else the backward needs is recomputed from them.
// O(ops x arity + tensors). Not optimal: it ignores bytes and costs (a
// boundary may fall on a cheap small tensor or inside an expensive op run),
// and on a graph that is not a chain a tensor that crosses a boundary other
// than the last op's output (a residual, a skip connection) is recomputed
// from further back, so memory is sqrt(n)-like only for chains.
std::vector<bool> SqrtCheckpoints(const Graph& g, int k = 0);

// The block of an op at `depth`: the first `depth` dot-separated components of
// its scope ("h.0.attn" at depth 2 -> "h.0"; a scope with fewer components is
// its own block); "" for an op without scope (each such op is a block alone).
std::string_view ScopeBlock(std::string_view scope, int depth);

// torch.utils.checkpoint around every block (jax.checkpoint, Zygote's
// checkpointed likewise). Recipe: forward ops are grouped into blocks by
// ScopeBlock(op.scope, depth) (depth < 1 counts as 1; ops without scope form
// one block each); a candidate is kept iff some forward op outside its
// producer's block reads it or a view of it (a view, in whatever block, being
// read in place of its base): exactly the tensors that cross a block
// boundary, i.e. each block's inputs from other blocks. Everything a block
// makes and reads itself is recomputed when the backward needs it.
// O(ops x arity + tensors). Not optimal: everything inside a block is
// dropped and every boundary kept, whatever their bytes and costs (a block's
// one large cheap intermediate could be dropped alone), and the blocks are
// what the scopes say, not sized to the budget; with few large blocks the
// recomputation of one block can itself be the peak.
std::vector<bool> BlockCheckpoints(const Graph& g, int depth = 1);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_PLAN_BASELINES_H_
