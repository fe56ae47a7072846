// online: ggml-alloc style simulation in execution order (ggml/src/ggml-alloc.c's
// dynamic tensor allocator). Time advances over interval endpoints; at each time the
// buffers whose interval ended are freed first (intervals are half-open), then the
// buffers starting there are allocated in input order. Free memory is a list of
// disjoint blocks inside [0, top) plus the unbounded tail [top, inf). Allocation takes
// the best-fitting block (smallest block that holds the buffer at an aligned offset;
// lowest offset on ties); if none fits it is carved from the tail, growing the arena.
// A freed range is merged with adjacent free blocks, and given back to the tail when it
// reaches `top`. O(n log n) plus the alignment-rejected candidates scanned.
#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "carve/planner/heuristics.h"
#include "plan_common.h"

namespace carve::planner {

namespace {

class FreeList {
 public:
  int64_t allocate(int64_t size, int64_t alignment) {
    for (auto it = by_size_.lower_bound({size, 0}); it != by_size_.end(); ++it) {
      const auto [block_size, block_off] = *it;
      const int64_t at = detail::align_up(block_off, alignment);
      if (at + size > block_off + block_size) continue;
      erase(block_off, block_size);
      if (at > block_off) insert(block_off, at - block_off);
      if (at + size < block_off + block_size) insert(at + size, block_off + block_size - at - size);
      return at;
    }
    const int64_t at = detail::align_up(top_, alignment);
    if (at > top_) insert(top_, at - top_);
    top_ = at + size;
    return at;
  }

  void release(int64_t off, int64_t size) {
    int64_t begin = off, end = off + size;
    auto next = by_offset_.lower_bound(off);
    if (next != by_offset_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == begin) {
        begin = prev->first;
        erase(prev->first, prev->second);
      }
    }
    next = by_offset_.lower_bound(end);
    if (next != by_offset_.end() && next->first == end) {
      end = next->first + next->second;
      erase(next->first, next->second);
    }
    if (end == top_) {
      top_ = begin;
    } else {
      insert(begin, end - begin);
    }
  }

 private:
  void insert(int64_t off, int64_t size) {
    by_offset_.emplace(off, size);
    by_size_.emplace(size, off);
  }
  void erase(int64_t off, int64_t size) {
    by_offset_.erase(off);
    by_size_.erase({size, off});
  }

  std::map<int64_t, int64_t> by_offset_;          // offset -> size
  std::set<std::pair<int64_t, int64_t>> by_size_;  // (size, offset): best fit, lowest offset
  int64_t top_ = 0;                                // [top_, inf) is free
};

std::vector<int64_t> online_offsets(const Problem& problem, const detail::Deadline& deadline) {
  const auto& bufs = problem.buffers;
  std::vector<int64_t> offsets(bufs.size(), 0);
  std::vector<int32_t> allocs = detail::nonempty_indices(problem);
  std::vector<int32_t> frees = allocs;
  std::stable_sort(allocs.begin(), allocs.end(),
                   [&](int32_t a, int32_t b) { return bufs[a].start < bufs[b].start; });
  std::stable_sort(frees.begin(), frees.end(),
                   [&](int32_t a, int32_t b) { return bufs[a].end < bufs[b].end; });
  FreeList free_list;
  size_t next_free = 0;
  int64_t top = 0;  // max offset + size so far: the fallback stacks above it
  for (size_t k = 0; k < allocs.size(); ++k) {
    if (k % detail::kPlacementsPerClockRead == 0 && deadline.passed()) {
      detail::stack_above(problem, allocs, k, top, offsets);
      break;
    }
    const int32_t i = allocs[k];
    while (next_free < frees.size() && bufs[frees[next_free]].end <= bufs[i].start) {
      const int32_t f = frees[next_free++];
      free_list.release(offsets[f], bufs[f].size);
    }
    offsets[i] = free_list.allocate(bufs[i].size, bufs[i].alignment);
    top = std::max(top, offsets[i] + bufs[i].size);
  }
  return offsets;
}

}  // namespace

std::unique_ptr<Strategy> make_online_strategy() {
  return detail::make_offsets_strategy("online", &online_offsets);
}

}  // namespace carve::planner
