// Shared machinery of the heuristic strategies: input checks, result assembly, and the
// best-fit placement engine used by greedy-size, greedy-breadth and greedy-xla.
#include "plan_common.h"

#include "occupancy_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace carve::planner::detail {

Status check_plannable(const Problem& problem) {
  CARVE_RETURN_IF_ERROR(check_problem(problem));
  if (problem.buffers.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("too many buffers ({}); the planner supports < 2^31",
                              problem.buffers.size()));
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const BufferRequest& b : problem.buffers) {
    // size >= 0 and alignment >= 1 were checked above.
    if (b.size > kMax - total) goto overflow;
    total += b.size;
    if (b.alignment - 1 > kMax - total) goto overflow;
    total += b.alignment - 1;
  }
  return Status();
overflow:
  return Status(ErrorCode::kInvalidArgument,
                "the sum over buffers of size + alignment - 1 overflows int64; offsets could not "
                "be represented");
}

int64_t arena_of(const Problem& problem, const std::vector<int64_t>& offsets) {
  int64_t arena = 0;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    arena = std::max(arena, offsets[i] + problem.buffers[i].size);
  }
  return arena;
}

Result<PlanResult> finish_heuristic(std::string_view name, const Problem& problem,
                                    std::vector<int64_t> offsets, const PlanOptions& options,
                                    Clock::time_point t0) {
  PlanResult result;
  result.strategy = std::string(name);
  result.plan.arena_bytes = arena_of(problem, offsets);
  result.plan.offsets = std::move(offsets);
  const int64_t lb = lower_bound_bytes(problem);
  result.optimal = result.plan.arena_bytes == lb;
  if (options.capacity && result.plan.arena_bytes > *options.capacity) {
    if (*options.capacity < lb) {
      return Status(ErrorCode::kInfeasible,
                    fmt::format("{}: capacity {} is below the lower bound {} (proven infeasible)",
                                name, *options.capacity, lb));
    }
    return Status(ErrorCode::kInfeasible,
                  fmt::format("{}: the heuristic's arena {} exceeds capacity {} (lower bound {}; "
                              "not a proof of infeasibility, try 'exact')",
                              name, result.plan.arena_bytes, *options.capacity, lb));
  }
  result.plan_seconds = seconds_since(t0);
  return result;
}

Deadline Deadline::from(const PlanOptions& options) {
  Deadline d;
  d.clock_ = options.clock;
  const Clock::time_point start = d.now();
  // Limits beyond ~30 years (or NaN/inf) mean "no limit"; keeps the arithmetic finite.
  const double limit = options.time_limit_seconds;
  if (limit >= 0 && limit < 1e9) {
    d.at_ = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit));
  } else if (!(limit >= 1e9)) {
    d.at_ = start;  // negative or NaN: no time at all
  }
  if (options.deadline) d.at_ = std::min(d.at_, *options.deadline);
  return d;
}

Deadline Deadline::share(double fraction) const {
  Deadline d = *this;
  if (at_ == Clock::time_point::max()) return d;
  const Clock::time_point t = now();
  if (t >= at_) return d;
  d.at_ = t + std::chrono::duration_cast<Clock::duration>((at_ - t) * fraction);
  return d;
}

void stack_above(const Problem& problem, const std::vector<int32_t>& order, size_t first,
                 int64_t top, std::vector<int64_t>& offsets) {
  for (size_t k = first; k < order.size(); ++k) {
    const BufferRequest& b = problem.buffers[order[k]];
    if (b.size == 0) continue;
    offsets[order[k]] = align_up(top, b.alignment);  // check_plannable: no overflow
    top = offsets[order[k]] + b.size;
  }
}

std::vector<int32_t> nonempty_indices(const Problem& problem) {
  std::vector<int32_t> out;
  out.reserve(problem.buffers.size());
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    if (problem.buffers[i].size > 0) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

std::vector<int64_t> place_best_fit(const Problem& problem, const std::vector<int32_t>& order,
                                    FitRule rule, const Deadline& deadline) {
  const auto& bufs = problem.buffers;
  std::vector<int64_t> offsets(bufs.size(), 0);
  OccupancyTree tree(problem);
  int64_t heap_top = 0;  // max offset + size so far (kXla)
  constexpr int64_t kNone = -1;

  for (size_t k = 0; k < order.size(); ++k) {
    if (k % kPlacementsPerClockRead == 0 && deadline.passed()) {
      stack_above(problem, order, k, heap_top, offsets);
      break;
    }
    const int32_t i = order[k];
    const BufferRequest& b = bufs[i];
    if (b.size == 0) continue;
    // Merged and sorted, so the holes between consecutive ranges are exactly the gaps
    // between the overlapping placed buffers that the TFLite/XLA rules choose among.
    const std::vector<ByteRange>& occupied = tree.occupied_during(i);
    int64_t best = kNone;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    int64_t prev_end = 0;
    for (const ByteRange& r : occupied) {
      const int64_t cand = align_up(prev_end, b.alignment);
      if (cand + b.size <= r.begin && r.begin - cand < best_gap) {
        best_gap = r.begin - cand;
        best = cand;
        if (best_gap == b.size) break;  // exact fit cannot be beaten
      }
      prev_end = r.end;
    }
    if (best == kNone || best_gap != b.size) {
      const int64_t top = occupied.empty() ? 0 : occupied.back().end;
      if (rule == FitRule::kXla && top < heap_top) {
        const int64_t cand = align_up(top, b.alignment);
        if (cand + b.size <= heap_top && heap_top - cand < best_gap) {
          best_gap = heap_top - cand;
          best = cand;
        }
      }
      if (best == kNone) best = align_up(top, b.alignment);
    }
    offsets[i] = best;
    heap_top = std::max(heap_top, best + b.size);
    tree.insert(i, ByteRange{best, best + b.size});
  }
  return offsets;
}

}  // namespace carve::planner::detail

namespace carve::planner::detail {

namespace {

class OffsetsStrategy final : public Strategy {
 public:
  OffsetsStrategy(std::string_view name, OffsetsFn fn) : name_(name), fn_(fn) {}
  std::string_view name() const override { return name_; }
  Result<PlanResult> plan_impl(const Problem& problem, const PlanOptions& options) const override {
    const Clock::time_point t0 = Clock::now();
    const Deadline deadline = Deadline::from(options);
    CARVE_RETURN_IF_ERROR(check_plannable(problem).with_context(name_));
    return finish_heuristic(name_, problem, fn_(problem, deadline), options, t0);
  }

 private:
  std::string name_;
  OffsetsFn fn_;
};

}  // namespace

std::unique_ptr<Strategy> make_offsets_strategy(std::string_view name, OffsetsFn fn) {
  return std::make_unique<OffsetsStrategy>(name, fn);
}

}  // namespace carve::planner::detail
