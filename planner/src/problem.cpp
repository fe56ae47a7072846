// check_problem, lower_bound_bytes and the independent plan validator.
//
// None of this code shares anything with the strategies: the validator is the
// referee for every strategy's output, so it must not reuse their placement logic.
#include "carve/planner/problem.h"

#include "id_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

namespace carve::planner {

namespace {

std::string describe(const BufferRequest& b, int64_t offset) {
  return fmt::format("'{}' interval [{},{}) bytes [{},{})", b.id, b.start, b.end, offset,
                     offset + b.size);
}

}  // namespace

Status check_problem(const Problem& problem) {
  detail::IdTable seen(problem.buffers, problem.buffers.size());
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const BufferRequest& b = problem.buffers[i];
    if (b.size < 0) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("buffer '{}' (#{}): negative size {}", b.id, i, b.size));
    }
    if (b.alignment < 1) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("buffer '{}' (#{}): alignment {} < 1", b.id, i, b.alignment));
    }
    if (b.start >= b.end) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("buffer '{}' (#{}): empty interval [{},{}) (start must be < end)",
                                b.id, i, b.start, b.end));
    }
    if (const size_t earlier = seen.insert(i); earlier != detail::IdTable::kNone) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("duplicate buffer id '{}' (#{} and #{})", b.id, earlier, i));
    }
  }
  return Status();
}

int64_t lower_bound_bytes(const Problem& problem) {
  // Events (time, delta); at equal times frees (negative deltas) sort first because
  // intervals are half-open: [0,2) and [2,4) are never live together.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(problem.buffers.size() * 2);
  for (const BufferRequest& b : problem.buffers) {
    if (b.size <= 0 || b.start >= b.end) continue;
    events.emplace_back(b.start, b.size);
    events.emplace_back(b.end, -b.size);
  }
  std::sort(events.begin(), events.end());
  // 128-bit running sum: the live bytes of a pathological problem may exceed int64;
  // the result then saturates at INT64_MAX (no plan could exist anyway).
  __int128 live = 0;
  __int128 best = 0;
  for (const auto& [time, delta] : events) {
    live += delta;
    best = std::max(best, live);
  }
  return best > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max()
                                                    : static_cast<int64_t>(best);
}

Status validate_plan(const Problem& problem, const MemoryPlan& plan) {
  CARVE_RETURN_IF_ERROR(check_problem(problem));
  const auto& buffers = problem.buffers;
  if (plan.offsets.size() != buffers.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("plan has {} offsets for {} buffers", plan.offsets.size(),
                              buffers.size()));
  }
  if (plan.arena_bytes < 0) {
    return Status(ErrorCode::kOutOfBounds,
                  fmt::format("negative arena size {}", plan.arena_bytes));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferRequest& b = buffers[i];
    const int64_t off = plan.offsets[i];
    if (off < 0) {
      return Status(ErrorCode::kOutOfBounds,
                    fmt::format("buffer '{}' has negative offset {}", b.id, off));
    }
    if (off % b.alignment != 0) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("buffer '{}' offset {} is not a multiple of its alignment {}",
                                b.id, off, b.alignment));
    }
    if (off > std::numeric_limits<int64_t>::max() - b.size) {
      return Status(ErrorCode::kOutOfBounds,
                    fmt::format("buffer '{}' at offset {} with size {} overflows int64", b.id, off,
                                b.size));
    }
    if (off + b.size > plan.arena_bytes) {
      return Status(ErrorCode::kOutOfBounds,
                    fmt::format("buffer '{}' bytes [{},{}) exceed the arena of {} bytes", b.id,
                                off, off + b.size, plan.arena_bytes));
    }
  }

  // Sweep over time. `active` holds the live non-empty buffers ordered by (offset, index);
  // it is kept pairwise disjoint (we stop at the first conflict), so a new buffer can only
  // collide with its immediate neighbours in offset order. O(n log n).
  struct Event {
    int64_t time;
    int kind;  // 0 = end (processed first at equal times), 1 = start
    size_t index;
  };
  std::vector<Event> events;
  events.reserve(buffers.size() * 2);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].size == 0) continue;  // a 0-byte buffer owns no byte
    events.push_back({buffers[i].start, 1, i});
    events.push_back({buffers[i].end, 0, i});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.index < b.index;
  });
  std::set<std::pair<int64_t, size_t>> active;
  auto conflict = [&](size_t a, size_t b) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("buffers overlap: {} and {}", describe(buffers[a], plan.offsets[a]),
                              describe(buffers[b], plan.offsets[b])));
  };
  for (const Event& e : events) {
    const int64_t off = plan.offsets[e.index];
    if (e.kind == 0) {
      active.erase({off, e.index});
      continue;
    }
    const int64_t end = off + buffers[e.index].size;
    auto [it, inserted] = active.emplace(off, e.index);
    (void)inserted;
    if (it != active.begin()) {
      auto prev = std::prev(it);
      if (prev->first + buffers[prev->second].size > off) return conflict(prev->second, e.index);
    }
    auto next = std::next(it);
    if (next != active.end() && next->first < end) return conflict(e.index, next->second);
  }
  return Status();
}

}  // namespace carve::planner
