// greedy-breadth: TFLite GPU's GreedyByBreadthAssignment, offset variant.
//
// TFLite GPU (delegates/gpu/common/memory_management/greedy_by_breadth_assignment.cc)
// computes each task's breadth — the total size of the tensors live at it — and visits
// the tasks in decreasing breadth; at each task it assigns that task's still-unassigned
// tensors, largest first, to the best-fitting shared object. carve plans offsets in one
// arena rather than shared objects, so the rule here is:
//   1. Steps are the elementary time segments between consecutive distinct interval
//      endpoints; breadth(step) = bytes of the non-empty buffers live in it.
//   2. Steps are visited by breadth descending (ties: earlier step first).
//   3. At each step, its live buffers that have no offset yet are placed longest-lived
//      first (lifetime in steps; ties: larger, earlier start, then input order), each at
//      the best-fitting offset among the already placed buffers that intersect it in
//      time (TFLite arena best fit: smallest gap that holds it aligned, else on top of
//      the highest overlapping buffer).
// Step 3 differs from TFLite GPU, which takes the largest first: putting the buffers that
// stay longest at the bottom of the peak leaves the space above them to the short-lived
// ones, whose holes close again soon. On IOPDDL S_1 (28.5k buffers) that is 1.0026x the
// lower bound against 1.358x largest-first (docs/benchmarks.md).
// A buffer is therefore placed at the first visited step it is live in. Implementation:
// visit rank per step, then each buffer's key = min rank over its steps (a range-min
// segment tree), then one sort by (key, steps desc, size desc, start, index) and the
// shared best-fit placement. O(n log n) + n placements of the best-fit engine.
#include <algorithm>
#include <limits>

#include "carve/planner/heuristics.h"
#include "plan_common.h"

namespace carve::planner {

namespace {

std::vector<int64_t> greedy_breadth_offsets(const Problem& problem, const detail::Deadline& deadline) {
  const auto& bufs = problem.buffers;
  std::vector<int32_t> items = detail::nonempty_indices(problem);
  if (items.empty()) return std::vector<int64_t>(bufs.size(), 0);

  std::vector<int64_t> times;
  times.reserve(items.size() * 2);
  for (int32_t i : items) {
    times.push_back(bufs[i].start);
    times.push_back(bufs[i].end);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const size_t steps = times.size() - 1;  // segment s = [times[s], times[s+1])
  auto index_of = [&](int64_t t) {
    return static_cast<size_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  std::vector<size_t> seg_lo(bufs.size()), seg_hi(bufs.size());
  std::vector<int64_t> breadth(steps + 1, 0);  // difference array, then prefix sums
  for (int32_t i : items) {
    seg_lo[i] = index_of(bufs[i].start);
    seg_hi[i] = index_of(bufs[i].end);
    breadth[seg_lo[i]] += bufs[i].size;
    breadth[seg_hi[i]] -= bufs[i].size;
  }
  for (size_t s = 1; s <= steps; ++s) breadth[s] += breadth[s - 1];

  std::vector<int32_t> by_breadth(steps);
  for (size_t s = 0; s < steps; ++s) by_breadth[s] = static_cast<int32_t>(s);
  std::stable_sort(by_breadth.begin(), by_breadth.end(),
                   [&](int32_t a, int32_t b) { return breadth[a] > breadth[b]; });
  // Range-min segment tree over the visit rank of each step.
  std::vector<int32_t> tree(2 * steps, std::numeric_limits<int32_t>::max());
  for (size_t r = 0; r < steps; ++r) tree[steps + by_breadth[r]] = static_cast<int32_t>(r);
  for (size_t n = steps - 1; n >= 1; --n) tree[n] = std::min(tree[2 * n], tree[2 * n + 1]);
  std::vector<int32_t> key(bufs.size(), 0);
  for (int32_t i : items) {
    int32_t best = std::numeric_limits<int32_t>::max();
    for (size_t l = seg_lo[i] + steps, r = seg_hi[i] + steps; l < r; l >>= 1, r >>= 1) {
      if (l & 1) best = std::min(best, tree[l++]);
      if (r & 1) best = std::min(best, tree[--r]);
    }
    key[i] = best;
  }
  std::sort(items.begin(), items.end(), [&](int32_t a, int32_t b) {
    if (key[a] != key[b]) return key[a] < key[b];
    const size_t steps_a = seg_hi[a] - seg_lo[a], steps_b = seg_hi[b] - seg_lo[b];
    if (steps_a != steps_b) return steps_a > steps_b;
    if (bufs[a].size != bufs[b].size) return bufs[a].size > bufs[b].size;
    if (bufs[a].start != bufs[b].start) return bufs[a].start < bufs[b].start;
    return a < b;
  });
  return detail::place_best_fit(problem, items, detail::FitRule::kTflite, deadline);
}

}  // namespace

std::unique_ptr<Strategy> make_greedy_breadth_strategy() {
  return detail::make_offsets_strategy("greedy-breadth", &greedy_breadth_offsets);
}

}  // namespace carve::planner
