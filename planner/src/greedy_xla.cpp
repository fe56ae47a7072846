// greedy-xla: XLA's heap simulator (GlobalDecreasingSizeBestFitHeap + ChooseBestHeapAlgorithm).
//
// All live intervals are known up front. Two orders are tried:
//   spatial:  size descending, then duration (end - start) descending, then input order;
//   temporal: duration descending, then size descending, then input order.
// Each buffer takes the smallest free chunk that fits among the gaps between the placed
// buffers overlapping it in time, where the chunk between the highest overlapping buffer
// and the current heap top also counts; when nothing fits, that top chunk is extended
// (the heap grows). The order giving the smaller arena wins (spatial on ties).
#include <algorithm>

#include "carve/planner/heuristics.h"
#include "plan_common.h"

namespace carve::planner {

namespace {

std::vector<int64_t> greedy_xla_offsets(const Problem& problem, const detail::Deadline& deadline) {
  const auto& bufs = problem.buffers;
  auto duration = [&](int32_t i) { return bufs[i].end - bufs[i].start; };
  std::vector<int32_t> spatial = detail::nonempty_indices(problem);
  std::vector<int32_t> temporal = spatial;
  std::sort(spatial.begin(), spatial.end(), [&](int32_t a, int32_t b) {
    if (bufs[a].size != bufs[b].size) return bufs[a].size > bufs[b].size;
    if (duration(a) != duration(b)) return duration(a) > duration(b);
    return a < b;
  });
  std::sort(temporal.begin(), temporal.end(), [&](int32_t a, int32_t b) {
    if (duration(a) != duration(b)) return duration(a) > duration(b);
    if (bufs[a].size != bufs[b].size) return bufs[a].size > bufs[b].size;
    return a < b;
  });
  // Half the time each, so that a deadline cannot leave the second order unplaced.
  std::vector<int64_t> by_size =
      detail::place_best_fit(problem, spatial, detail::FitRule::kXla, deadline.share(0.5));
  std::vector<int64_t> by_time =
      detail::place_best_fit(problem, temporal, detail::FitRule::kXla, deadline);
  return detail::arena_of(problem, by_time) < detail::arena_of(problem, by_size) ? by_time : by_size;
}

}  // namespace

std::unique_ptr<Strategy> make_greedy_xla_strategy() {
  return detail::make_offsets_strategy("greedy-xla", &greedy_xla_offsets);
}

}  // namespace carve::planner
