// The free-space index behind the best-fit heuristics (planner/src/occupancy_tree.*):
// its merged ranges and the placements made with it must equal a brute-force reading of
// the TFLite / XLA best-fit rules over all overlapping placed buffers.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "../../planner/src/occupancy_tree.h"
#include "../../planner/src/plan_common.h"
#include "planner_test_util.h"

using namespace carve;
using namespace carve::planner;
using carve::planner::testing::buf;

namespace {

bool intersect(const BufferRequest& a, const BufferRequest& b) {
  return a.start < b.end && b.start < a.end;
}

// O(n^2) reference of place_best_fit: for each buffer, scan every placed buffer.
std::vector<int64_t> brute_force_best_fit(const Problem& p, const std::vector<int32_t>& order,
                                          detail::FitRule rule) {
  std::vector<int64_t> offsets(p.buffers.size(), 0);
  std::vector<int32_t> placed;
  int64_t heap_top = 0;
  for (int32_t i : order) {
    const BufferRequest& b = p.buffers[i];
    if (b.size == 0) continue;
    std::vector<std::pair<int64_t, int64_t>> occ;
    for (int32_t j : placed) {
      if (intersect(b, p.buffers[j])) occ.emplace_back(offsets[j], offsets[j] + p.buffers[j].size);
    }
    std::sort(occ.begin(), occ.end());
    int64_t best = -1, best_gap = std::numeric_limits<int64_t>::max(), prev_end = 0;
    for (const auto& [off, end] : occ) {
      const int64_t cand = detail::align_up(prev_end, b.alignment);
      if (cand + b.size <= off && off - cand < best_gap) {
        best_gap = off - cand;
        best = cand;
      }
      prev_end = std::max(prev_end, end);
    }
    if (rule == detail::FitRule::kXla && prev_end < heap_top) {
      const int64_t cand = detail::align_up(prev_end, b.alignment);
      if (cand + b.size <= heap_top && heap_top - cand < best_gap) best = cand;
    }
    if (best < 0) best = detail::align_up(prev_end, b.alignment);
    offsets[i] = best;
    heap_top = std::max(heap_top, best + b.size);
    placed.push_back(i);
  }
  return offsets;
}

}  // namespace

TEST_CASE("planner/occupancy/range_union_merges_overlapping_and_touching") {
  detail::RangeUnion u;
  u.add({10, 20});
  u.add({30, 40});
  u.add({0, 5});
  REQUIRE(u.ranges().size() == 3);
  u.add({20, 30});  // touches both neighbours: one range [10, 40)
  REQUIRE(u.ranges().size() == 2);
  CHECK(u.ranges()[1].begin == 10);
  CHECK(u.ranges()[1].end == 40);
  u.add({12, 15});  // inside: nothing changes
  CHECK(u.ranges().size() == 2);
  u.add({3, 100});  // swallows everything after 0
  REQUIRE(u.ranges().size() == 1);
  CHECK(u.ranges()[0].begin == 0);
  CHECK(u.ranges()[0].end == 100);
}

TEST_CASE("planner/occupancy/query_sees_only_buffers_live_at_the_same_time") {
  // a [0,4) and c [6,9) never meet b [4,6); d [3,7) meets all three.
  const Problem p{{buf("a", 0, 4, 8), buf("b", 4, 6, 8), buf("c", 6, 9, 8), buf("d", 3, 7, 8)}};
  detail::OccupancyTree tree(p);
  tree.insert(0, {0, 8});
  tree.insert(2, {16, 24});
  CHECK(tree.occupied_during(1).empty());
  const auto& during_d = tree.occupied_during(3);
  REQUIRE(during_d.size() == 2);
  CHECK(during_d[0].begin == 0);
  CHECK(during_d[1].begin == 16);
}

TEST_CASE("planner/property/indexed_best_fit_equals_brute_force") {
  for (const auto rule : {detail::FitRule::kTflite, detail::FitRule::kXla}) {
    CHECK(rc::check("place_best_fit == all-pairs best fit in a random order", [rule] {
      const Problem p = *testing::gen_problem(60);
      std::vector<int32_t> order(p.buffers.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
      // A random order: sort by random keys (ties by index keep it a permutation).
      const auto keys = *rc::gen::container<std::vector<int>>(order.size(), rc::gen::inRange(0, 1000));
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return keys[a] != keys[b] ? keys[a] < keys[b] : a < b; });
      RC_ASSERT(detail::place_best_fit(p, order, rule) == brute_force_best_fit(p, order, rule));
    }));
  }
}
