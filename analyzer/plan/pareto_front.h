// Pareto fronts of the chain planner (chain_dp.h): points of (dropped bytes,
// cost), where more dropped and less cost are better.
//
// MergeFronts. Recipe: a node's front is the union of runs, each a prefix of
// an earlier node's front shifted by one move's dropped bytes and cost; the
// points are merged pairwise, level by level, most dropped first, then
// cheapest, ties in run order, and every point that a point before it beats
// on cost (ties included) is dropped at every level. A point beaten within a
// group of runs is beaten in all of them, and the survivors keep their order,
// so the result is what one stable merge of all runs and one scan for falling
// costs give. The merge is branch-free: its order is data-dependent, so
// branches would mispredict. O(P log R) for P points in R runs, in two
// buffers of P points.
// Falls short: every point of every run is read and moved log R times, even
// where the runs' fronts hardly differ from node to node (a sliding window
// over the runs could reuse the merge of the previous node).
//
// ThinFront. Past 2 x max_points points, the range of dropped bytes is cut
// into max_points equal buckets, each keeping its first point (most dropped:
// what feasibility needs) and its cheapest. O(P).
#ifndef MEMPLAN_ANALYZER_PLAN_PARETO_FRONT_H_
#define MEMPLAN_ANALYZER_PLAN_PARETO_FRONT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memplan {

// A way to reach a node. A front holds points with dropped and cost both
// strictly falling.
struct FrontPoint {
  int64_t dropped = 0;
  double cost = 0;
  int from_node = -1, from_point = -1;  // the point of fronts[from_node] it extends
};

// The first `size` points of fronts[from_node], each shifted by add_dropped
// and add_cost (from_node and from_point name the point it came from).
struct FrontRun {
  int from_node = 0;
  int size = 0;
  int64_t add_dropped = 0;
  double add_cost = 0;
};

// Reused buffers, so that one DP allocates them once.
struct FrontScratch {
  std::vector<FrontPoint> buffer, spare;
  std::vector<std::size_t> ends, next_ends;
};

// out: the points of the runs no other beats, most dropped first (a front).
// out must not be one of fronts.
void MergeFronts(const std::vector<std::vector<FrontPoint>>& fronts,
                 const std::vector<FrontRun>& runs, std::vector<FrontPoint>* out,
                 FrontScratch* scratch);

// Thins front (as MergeFronts leaves it) to at most 2 x max_points points;
// max_points <= 0: no bound.
void ThinFront(std::vector<FrontPoint>* front, int max_points);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_PLAN_PARETO_FRONT_H_
