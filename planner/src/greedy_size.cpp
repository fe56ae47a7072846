// greedy-size: TFLite's ArenaPlanner / SimpleMemoryArena rule ("Greedy by Size",
// Pisarchyk & Lee 2020). Buffers are visited by size, largest first (ties: earlier start,
// then input order); each goes into the smallest gap, among the already placed buffers
// whose intervals intersect its own, that holds it at an aligned offset; when no gap does,
// it goes on top of the highest such buffer.
#include <algorithm>

#include "carve/planner/heuristics.h"
#include "plan_common.h"

namespace carve::planner {

namespace {

std::vector<int64_t> greedy_size_offsets(const Problem& problem, const detail::Deadline& deadline) {
  const auto& bufs = problem.buffers;
  std::vector<int32_t> order = detail::nonempty_indices(problem);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (bufs[a].size != bufs[b].size) return bufs[a].size > bufs[b].size;
    if (bufs[a].start != bufs[b].start) return bufs[a].start < bufs[b].start;
    return a < b;
  });
  return detail::place_best_fit(problem, order, detail::FitRule::kTflite, deadline);
}

}  // namespace

std::unique_ptr<Strategy> make_greedy_size_strategy() {
  return detail::make_offsets_strategy("greedy-size", &greedy_size_offsets);
}

}  // namespace carve::planner
