// Shared machinery of the heuristic strategies: input checks, result assembly, and the
// best-fit placement engine used by greedy-size, greedy-breadth and greedy-xla.
#include "plan_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
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

std::vector<int32_t> nonempty_indices(const Problem& problem) {
  std::vector<int32_t> out;
  out.reserve(problem.buffers.size());
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    if (problem.buffers[i].size > 0) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

namespace {

// Finds, for a buffer, the already inserted buffers whose intervals intersect its own.
//
// Time is compressed to the sorted distinct start times ("points") of the non-empty
// buffers. Buffer j covers the points [lo_j, hi_j): those >= start_j and < end_j.
// Inserted buffer j intersects query buffer i iff either
//   (a) start_j <= start_i < end_j  — j covers point lo_i: a stabbing query, answered by
//       an iterative segment tree (range insert into O(log P) node lists, point query
//       walks one leaf-to-root path), or
//   (b) start_i < start_j < end_i   — j starts at a point in (lo_i, hi_i): answered by an
//       ordered set of points where some inserted buffer starts.
// (a) and (b) are disjoint, so every overlapping buffer is reported exactly once.
// The lists store each inserted buffer's byte range (offset, end) by value — offsets never
// change once placed — so a query reads contiguous memory instead of chasing indices.
struct Span {
  int64_t begin;
  int64_t end;
  friend bool operator<(const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  }
};

class OverlapIndex {
 public:
  explicit OverlapIndex(const Problem& problem) {
    const auto& bufs = problem.buffers;
    for (const BufferRequest& b : bufs) {
      if (b.size > 0) points_.push_back(b.start);
    }
    std::sort(points_.begin(), points_.end());
    points_.erase(std::unique(points_.begin(), points_.end()), points_.end());
    p_ = points_.size();
    lo_.assign(bufs.size(), 0);
    hi_.assign(bufs.size(), 0);
    for (size_t i = 0; i < bufs.size(); ++i) {
      if (bufs[i].size == 0) continue;
      lo_[i] = static_cast<int32_t>(std::lower_bound(points_.begin(), points_.end(), bufs[i].start) -
                                    points_.begin());
      hi_[i] = static_cast<int32_t>(std::lower_bound(points_.begin(), points_.end(), bufs[i].end) -
                                    points_.begin());
    }
    nodes_.resize(2 * p_);
    starting_at_.resize(p_);
  }

  void insert(int32_t i, Span span) {
    for (size_t l = lo_[i] + p_, r = hi_[i] + p_; l < r; l >>= 1, r >>= 1) {
      if (l & 1) nodes_[l++].push_back(span);
      if (r & 1) nodes_[--r].push_back(span);
    }
    starting_at_[lo_[i]].push_back(span);
    nonempty_points_.insert(lo_[i]);
  }

  template <typename F>
  void for_each_overlapping(int32_t i, F&& f) const {
    for (size_t node = lo_[i] + p_; node >= 1; node >>= 1) {
      for (const Span& s : nodes_[node]) f(s);
    }
    for (auto it = nonempty_points_.upper_bound(lo_[i]); it != nonempty_points_.end() && *it < hi_[i];
         ++it) {
      for (const Span& s : starting_at_[*it]) f(s);
    }
  }

 private:
  std::vector<int64_t> points_;
  size_t p_ = 0;
  std::vector<int32_t> lo_, hi_;
  std::vector<std::vector<Span>> nodes_;
  std::vector<std::vector<Span>> starting_at_;
  std::set<int32_t> nonempty_points_;
};

}  // namespace

std::vector<int64_t> place_best_fit(const Problem& problem, const std::vector<int32_t>& order,
                                    FitRule rule) {
  const auto& bufs = problem.buffers;
  std::vector<int64_t> offsets(bufs.size(), 0);
  OverlapIndex index(problem);
  std::vector<Span> occupied;  // byte ranges of the overlapping placed buffers
  int64_t heap_top = 0;                                // max offset + size so far (kXla)
  constexpr int64_t kNone = -1;

  for (int32_t i : order) {
    const BufferRequest& b = bufs[i];
    if (b.size == 0) continue;
    occupied.clear();
    index.for_each_overlapping(i, [&](const Span& s) { occupied.push_back(s); });
    std::sort(occupied.begin(), occupied.end());

    int64_t best = kNone;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    int64_t prev_end = 0;  // highest end among the occupied ranges seen so far
    for (const auto& [off, end] : occupied) {
      const int64_t cand = align_up(prev_end, b.alignment);
      if (cand + b.size <= off) {
        const int64_t gap = off - cand;
        if (gap < best_gap) {
          best_gap = gap;
          best = cand;
          if (gap == b.size) break;  // exact fit cannot be beaten
        }
      }
      prev_end = std::max(prev_end, end);
    }
    if (best == kNone || best_gap != b.size) {
      // prev_end may be stale after an early exit, but then best_gap == size; recompute top.
      int64_t top = 0;
      for (const Span& occ : occupied) top = std::max(top, occ.end);
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
    index.insert(i, Span{best, best + b.size});
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
  Result<PlanResult> plan(const Problem& problem, const PlanOptions& options) const override {
    const Clock::time_point t0 = Clock::now();
    CARVE_RETURN_IF_ERROR(check_plannable(problem).with_context(name_));
    return finish_heuristic(name_, problem, fn_(problem), options, t0);
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
