// Internal helpers shared by the heuristic strategies (not installed, not public API).
#pragma once

#include <chrono>
#include <memory>
#include <cstdint>
#include <string_view>
#include <vector>

#include "carve/planner/problem.h"
#include "carve/planner/strategy.h"

namespace carve::planner::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// When a strategy must stop, read through PlanOptions::clock (injectable for tests).
class Deadline {
 public:
  Deadline() = default;  // never passes
  // The earlier of options.deadline and `start` + options.time_limit_seconds, where
  // `start` is read from the options' clock.
  static Deadline from(const PlanOptions& options);
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  Clock::time_point at() const { return at_; }
  bool passed() const { return now() >= at_; }
  double seconds_left() const { return std::chrono::duration<double>(at_ - now()).count(); }
  // A deadline no later than this one, `fraction` of the time left from now.
  Deadline share(double fraction) const;

 private:
  Clock::time_point at_ = Clock::time_point::max();
  std::function<Clock::time_point()> clock_;
};

// Smallest multiple of `a` (>= 1) that is >= x (x >= 0). Callers keep x + a within int64
// (check_plannable guarantees it for every offset a heuristic can produce).
inline int64_t align_up(int64_t x, int64_t a) {
  const int64_t r = x % a;
  return r == 0 ? x : x + (a - r);
}

// check_problem, plus: fewer than 2^31 buffers, and sum(size + alignment - 1) fits in
// int64 so that no heuristic offset can overflow.
Status check_plannable(const Problem& problem);

int64_t arena_of(const Problem& problem, const std::vector<int64_t>& offsets);

// Builds the PlanResult for a heuristic: arena, optimal flag, plan_seconds, and the
// capacity rule documented in heuristics.h.
Result<PlanResult> finish_heuristic(std::string_view name, const Problem& problem,
                                    std::vector<int64_t> offsets, const PlanOptions& options,
                                    Clock::time_point t0);

enum class FitRule {
  // TFLite SimpleMemoryArena: smallest gap between overlapping buffers that fits the
  // buffer (after aligning), lowest offset on ties; if none, on top of the highest one.
  kTflite,
  // XLA GlobalDecreasingSizeBestFitHeap: like kTflite, but the free chunk between the
  // highest overlapping buffer and the current heap top is a candidate too; if nothing
  // fits, the top chunk is extended (heap grows).
  kXla,
};

// Places the buffers listed in `order` (indices into problem.buffers; 0-byte buffers may be
// listed or not) one by one at a best-fitting offset among the already placed buffers whose
// intervals intersect. Unlisted buffers get offset 0 — list every non-empty buffer.
// The occupied space during a buffer's lifetime comes from an OccupancyTree (merged byte
// ranges in a segment tree over time): O(log n) range lists per buffer, each costing its
// holes, never a walk over the overlapping buffers themselves.
// Once `deadline` passes (checked every few hundred placements), the buffers not placed
// yet are stacked above everything placed: the plan stays valid.
std::vector<int64_t> place_best_fit(const Problem& problem, const std::vector<int32_t>& order,
                                    FitRule rule, const Deadline& deadline = {});

// The fallback once time is up: the listed buffers (from `first` on) one above another,
// starting at `top` (>= every offset + size placed so far), so nothing can collide.
void stack_above(const Problem& problem, const std::vector<int32_t>& order, size_t first,
                 int64_t top, std::vector<int64_t>& offsets);

// How many placements run between two reads of the clock: reads stay negligible, and a
// placement is microseconds, so a passed deadline is noticed within a millisecond.
inline constexpr size_t kPlacementsPerClockRead = 256;

// Indices of the non-empty buffers.
std::vector<int32_t> nonempty_indices(const Problem& problem);

}  // namespace carve::planner::detail

namespace carve::planner::detail {

// A heuristic strategy made from a function Problem -> offsets: plan() checks the problem
// (check_plannable), calls `fn`, and assembles the result with finish_heuristic.
using OffsetsFn = std::vector<int64_t> (*)(const Problem&, const Deadline&);
std::unique_ptr<Strategy> make_offsets_strategy(std::string_view name, OffsetsFn fn);

}  // namespace carve::planner::detail
