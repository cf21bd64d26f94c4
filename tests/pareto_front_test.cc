#include "analyzer/plan/pareto_front.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace memplan {
namespace {

// A front of n points: dropped and cost strictly falling, small integers so
// that points of different runs tie.
std::vector<FrontPoint> RandomFront(std::mt19937* rng, int n) {
  std::uniform_int_distribution<int> step(1, 3);
  std::vector<FrontPoint> front;
  int64_t dropped = 40;
  double cost = 40;
  for (int i = 0; i < n; ++i) {
    front.push_back(FrontPoint{dropped, cost, -1, -1});
    dropped -= step(*rng);
    cost -= step(*rng);
  }
  return front;
}

// What MergeFronts must equal: all shifted points, stably sorted (most
// dropped, then cheapest, then run order), each kept when cheaper than all
// before it.
std::vector<FrontPoint> Reference(const std::vector<std::vector<FrontPoint>>& fronts,
                                  const std::vector<FrontRun>& runs) {
  std::vector<FrontPoint> all;
  for (const FrontRun& run : runs)
    for (int p = 0; p < run.size; ++p) {
      const FrontPoint& q = fronts[run.from_node][p];
      all.push_back(
          FrontPoint{q.dropped + run.add_dropped, q.cost + run.add_cost, run.from_node, p});
    }
  std::stable_sort(all.begin(), all.end(), [](const FrontPoint& a, const FrontPoint& b) {
    return a.dropped != b.dropped ? a.dropped > b.dropped : a.cost < b.cost;
  });
  std::vector<FrontPoint> kept;
  for (const FrontPoint& p : all)
    if (kept.empty() || p.cost < kept.back().cost) kept.push_back(p);
  return kept;
}

bool Same(const std::vector<FrontPoint>& a, const std::vector<FrontPoint>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dropped != b[i].dropped || a[i].cost != b[i].cost ||
        a[i].from_node != b[i].from_node || a[i].from_point != b[i].from_point)
      return false;
  return true;
}

TEST_CASE("pareto front: the merge equals one stable sort and a scan, ties in run order") {
  std::mt19937 rng(7);
  FrontScratch scratch;
  int tied = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const int num_fronts = 1 + static_cast<int>(rng() % 9);
    std::vector<std::vector<FrontPoint>> fronts;
    for (int f = 0; f < num_fronts; ++f)
      fronts.push_back(RandomFront(&rng, static_cast<int>(rng() % 12)));
    std::vector<FrontRun> runs;
    for (int f = num_fronts - 1; f >= 0; --f) {
      const int size = fronts[f].empty() ? 0 : static_cast<int>(rng() % (fronts[f].size() + 1));
      runs.push_back(
          FrontRun{f, size, static_cast<int64_t>(rng() % 5), static_cast<double>(rng() % 5)});
    }
    std::vector<FrontPoint> out;
    MergeFronts(fronts, runs, &out, &scratch);
    const std::vector<FrontPoint> want = Reference(fronts, runs);
    REQUIRE(Same(out, want));
    for (size_t i = 1; i < out.size(); ++i) {
      CHECK(out[i].dropped < out[i - 1].dropped);
      CHECK(out[i].cost < out[i - 1].cost);
    }
    // Count the trials where two runs offered the same point.
    for (size_t i = 0; i < want.size(); ++i)
      for (const FrontRun& run : runs)
        for (int p = 0; p < run.size; ++p) {
          const FrontPoint& q = fronts[run.from_node][p];
          tied += run.from_node != want[i].from_node &&
                  q.dropped + run.add_dropped == want[i].dropped &&
                  q.cost + run.add_cost == want[i].cost;
        }
  }
  CHECK(tied > 50);  // the ties above were exercised
}

TEST_CASE("pareto front: a point another beats goes, whichever run comes first") {
  std::vector<std::vector<FrontPoint>> fronts = {{{10, 5, -1, -1}, {8, 2, -1, -1}},
                                                 {{9, 6, -1, -1}, {8, 2, -1, -1}}};
  FrontScratch scratch;
  std::vector<FrontPoint> out;
  // (9, 6) is beaten by (10, 5); the tie at (8, 2) goes to the first run.
  MergeFronts(fronts, {{1, 2, 0, 0}, {0, 2, 0, 0}}, &out, &scratch);
  REQUIRE(out.size() == 2);
  CHECK(out[0].from_node == 0);
  CHECK(out[0].from_point == 0);
  CHECK(out[1].from_node == 1);
  CHECK(out[1].from_point == 1);
  MergeFronts(fronts, {}, &out, &scratch);
  CHECK(out.empty());
  MergeFronts(fronts, {{0, 0, 0, 0}}, &out, &scratch);
  CHECK(out.empty());
}

TEST_CASE("pareto front: thinning keeps each bucket's first and cheapest point") {
  std::vector<FrontPoint> front;
  for (int i = 0; i < 10; ++i) front.push_back(FrontPoint{100 - 10 * i, 50.0 - i, -1, i});
  std::vector<FrontPoint> small = front;
  ThinFront(&small, 5);  // 10 points: not past 2 x 5
  CHECK(small.size() == 10);
  ThinFront(&front, 2);  // dropped 100..10, buckets of width 46: 100..55, 54..10
  REQUIRE(front.size() == 4);
  CHECK(front[0].from_point == 0);
  CHECK(front[1].from_point == 4);
  CHECK(front[2].from_point == 5);
  CHECK(front[3].from_point == 9);
}

}  // namespace
}  // namespace memplan
