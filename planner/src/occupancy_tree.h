// Internal: the free-space index behind the best-fit heuristics (not public API).
//
// The best-fit rule needs, for a buffer about to be placed, the holes in the union of the
// byte ranges of the already placed buffers whose lifetimes intersect its own. Listing
// those buffers one by one costs the number of overlapping pairs, which on real traces
// (long-lived buffers beside tens of thousands of short ones) is quadratic. This index
// stores *merged* byte ranges instead, so a query costs the number of holes, not the
// number of buffers:
//
//  - time is compressed to the P distinct start times ("points"); buffer j covers the
//    points in [start_j, end_j), and two buffers intersect in time iff they share a point
//    (the later start is one);
//  - a perfect binary tree over the points; every node keeps two merged range lists:
//      cover(x): ranges of buffers whose point range contains all of x's points
//                (x is one of their O(log P) canonical nodes),
//      sub(x):   ranges of buffers sharing a point with x, at least all those canonical
//                at x or below it;
//  - the placed buffers intersecting buffer i are, with C = i's canonical nodes,
//      the union of sub(c) for c in C, and cover(a) for every a on the root paths of i's
//      first and last point (the parents of canonical nodes lie on those two paths).
//    Every list taken is sound (its buffers share a point with i) and together they are
//    complete, so the union of their merged ranges is exactly the occupied space.
//
// insert: O(log P) list insertions; query: O(log P) lists, cost proportional to the
// merged ranges they hold (holes + 1 each). Merged lists never shrink (no removal).
#pragma once

#include <cstdint>
#include <vector>

#include "carve/planner/problem.h"

namespace carve::planner::detail {

struct ByteRange {
  int64_t begin;
  int64_t end;
};

// A sorted list of disjoint, non-touching byte ranges; adding merges.
class RangeUnion {
 public:
  void add(ByteRange r);
  const std::vector<ByteRange>& ranges() const { return ranges_; }

 private:
  std::vector<ByteRange> ranges_;
};

class OccupancyTree {
 public:
  // Indexes the lifetimes of the non-empty buffers of `problem` (which must outlive this).
  explicit OccupancyTree(const Problem& problem);

  // Records that buffer i (non-empty) occupies `bytes` during its lifetime.
  void insert(int32_t i, ByteRange bytes);

  // The occupied byte ranges during buffer i's lifetime, merged and sorted by begin.
  // The returned reference stays valid until the next call.
  const std::vector<ByteRange>& occupied_during(int32_t i);

 private:
  size_t leaves_ = 1;               // points rounded up to a power of two
  std::vector<int32_t> lo_, hi_;    // point range [lo, hi) of each buffer
  std::vector<RangeUnion> cover_, sub_;
  std::vector<ByteRange> scratch_;  // query result
};

}  // namespace carve::planner::detail
