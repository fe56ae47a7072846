// naive: bump allocation in input order, no reuse — the baseline every plan must beat.
#include "carve/planner/heuristics.h"
#include "plan_common.h"

namespace carve::planner {

namespace {

// O(n) and already the fallback every other heuristic uses, so it never checks the clock.
std::vector<int64_t> naive_offsets(const Problem& problem, const detail::Deadline& /*deadline*/) {
  std::vector<int64_t> offsets(problem.buffers.size(), 0);
  int64_t top = 0;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const BufferRequest& b = problem.buffers[i];
    if (b.size == 0) continue;  // 0-byte buffers stay at offset 0
    offsets[i] = detail::align_up(top, b.alignment);
    top = offsets[i] + b.size;
  }
  return offsets;
}

}  // namespace

std::unique_ptr<Strategy> make_naive_strategy() {
  return detail::make_offsets_strategy("naive", &naive_offsets);
}

}  // namespace carve::planner
