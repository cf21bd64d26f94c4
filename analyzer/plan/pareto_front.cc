#include "analyzer/plan/pareto_front.h"

#include <limits>
#include <utility>

namespace memplan {
namespace {

// Writes to out the merge of the sorted lists [a, a_end) and [b, b_end)
// (most dropped first, then cheapest; ties: a's first), less every point a
// point before it in the merge beats on cost; returns the end of what it
// wrote. out may be a (it never overtakes a's reads) but not b.
FrontPoint* MergeUnbeaten(const FrontPoint* a, const FrontPoint* a_end, const FrontPoint* b,
                          const FrontPoint* b_end, FrontPoint* out) {
  double least = std::numeric_limits<double>::infinity();
  while (a < a_end && b < b_end) {
    const bool take_b = b->dropped > a->dropped || (b->dropped == a->dropped && b->cost < a->cost);
    const FrontPoint* p = take_b ? b : a;
    *out = *p;
    const bool kept = p->cost < least;
    least = kept ? p->cost : least;
    out += kept;
    b += take_b;
    a += !take_b;
  }
  const FrontPoint* rest = a < a_end ? a : b;
  const FrontPoint* rest_end = a < a_end ? a_end : b_end;
  for (; rest < rest_end; ++rest) {
    *out = *rest;
    const bool kept = rest->cost < least;
    least = kept ? rest->cost : least;
    out += kept;
  }
  return out;
}

}  // namespace

void MergeFronts(const std::vector<std::vector<FrontPoint>>& fronts,
                 const std::vector<FrontRun>& runs, std::vector<FrontPoint>* out,
                 FrontScratch* scratch) {
  size_t points = 0;
  for (const FrontRun& run : runs) points += static_cast<size_t>(run.size);
  std::vector<FrontPoint>& buffer = scratch->buffer;
  std::vector<FrontPoint>& spare = scratch->spare;
  if (buffer.size() < points) buffer.resize(points);
  if (spare.size() < points) spare.resize(points);
  std::vector<size_t>& ends = scratch->ends;  // of the lists in buffer
  ends.clear();
  FrontPoint* at = buffer.data();
  for (const FrontRun& run : runs) {
    const FrontPoint* in = fronts[static_cast<size_t>(run.from_node)].data();
    for (int p = 0; p < run.size; ++p)
      *at++ =
          FrontPoint{in[p].dropped + run.add_dropped, in[p].cost + run.add_cost, run.from_node, p};
    ends.push_back(static_cast<size_t>(at - buffer.data()));
  }
  // Level by level: lists 2i and 2i + 1 of buffer become list i of spare.
  std::vector<size_t>& next = scratch->next_ends;
  while (ends.size() > 1) {
    next.clear();
    FrontPoint* to = spare.data();
    for (size_t i = 0; i < ends.size(); i += 2) {
      const FrontPoint* first = buffer.data() + (i == 0 ? 0 : ends[i - 1]);
      const FrontPoint* second = buffer.data() + ends[i];
      const FrontPoint* second_end = i + 1 < ends.size() ? buffer.data() + ends[i + 1] : second;
      to = MergeUnbeaten(first, second, second, second_end, to);
      next.push_back(static_cast<size_t>(to - spare.data()));
    }
    std::swap(buffer, spare);
    std::swap(ends, next);
  }
  out->clear();
  if (ends.empty()) return;
  // A lone run was never merged: scan it too (a front loses nothing).
  FrontPoint* end =
      MergeUnbeaten(buffer.data(), buffer.data() + ends[0], nullptr, nullptr, buffer.data());
  out->assign(buffer.data(), end);
}

void ThinFront(std::vector<FrontPoint>* front, int max_points) {
  std::vector<FrontPoint>& kept = *front;
  if (max_points <= 0 || static_cast<int>(kept.size()) <= 2 * max_points) return;
  const int64_t top = kept.front().dropped;
  const int64_t width = (top - kept.back().dropped) / max_points + 1;
  std::vector<FrontPoint> thinned;
  int64_t bucket = -1;
  bool two = false;  // the bucket holds its first and its cheapest point
  for (const FrontPoint& p : kept) {
    const int64_t b = (top - p.dropped) / width;
    if (b != bucket) {
      thinned.push_back(p);
      bucket = b;
      two = false;
    } else if (!two) {
      thinned.push_back(p);
      two = true;
    } else {
      thinned.back() = p;  // cheaper than the one it replaces
    }
  }
  kept = std::move(thinned);
}

}  // namespace memplan
