// Internal: the free-space index behind the best-fit heuristics (not public API).
//
// The best-fit rule needs, for a buffer about to be placed, the holes in the union of the
// byte ranges of the already placed buffers whose lifetimes intersect its own. Listing
// those buffers one by one costs the number of overlapping pairs, which on real traces
// (long-lived buffers beside tens of thousands of short ones) is quadratic. This index
// stores *merged* byte ranges instead, so a query costs merged ranges, not buffers:
//
//  - time is compressed to the P distinct start times ("points"); buffer j covers the
//    points [lo_j, hi_j), and two buffers intersect in time iff they share a point
//    (the later start is one);
//  - a perfect binary tree over the points; every node x keeps two merged range lists:
//      cover(x):  buffers whose point range has x as one of its O(log P) canonical nodes,
//                 kept only at every kCoverDepthStride-th depth (and the leaves): a
//                 canonical node in between hands the buffer to its descendants at the
//                 next kept depth, so a root path reads log P / stride cover lists, each
//                 the union of more buffers (fewer holes in all than many small lists);
//      starts(x): buffers whose first point lies under x;
//  - the placed buffers j intersecting buffer i are exactly those with
//      lo_j <= lo_i < hi_j   (live at i's first point: cover of the root path of lo_i), or
//      lo_i < lo_j < hi_i    (start later during i: starts of the canonical nodes of
//                             [lo_i + 1, hi_i)).
//    Each such buffer sits in exactly one of those O(log P) lists (one canonical node of
//    j contains lo_i; j's first point lies under one canonical node), so no buffer is
//    read twice and nothing outside i's lifetime is read.
//
// insert: O(2^stride log P) list insertions. query: the k <= log P / stride + 2 log P
// non-empty lists holding F merged ranges in all are union-merged pairwise, O(F log k).
// F is the holes of those lists (+1 each), at most the number of intersecting buffers and
// usually far fewer; a plan riddled with holes makes it large.
#pragma once

#include <cstdint>
#include <memory_resource>
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
  RangeUnion() = default;
  explicit RangeUnion(std::pmr::memory_resource* memory) : ranges_(memory) {}
  void add(ByteRange r);
  const std::pmr::vector<ByteRange>& ranges() const { return ranges_; }

 private:
  std::pmr::vector<ByteRange> ranges_;
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
  static constexpr int kCoverDepthStride = 4;
  bool keeps_cover(int depth) const;
  void add_cover(size_t node, ByteRange bytes);

  size_t leaves_ = 1;               // points rounded up to a power of two
  int leaf_depth_ = 0;              // log2(leaves_)
  std::vector<int32_t> lo_, hi_;    // point range [lo, hi) of each buffer
  // Millions of small lists that only grow: one pool, freed at once, instead of a
  // malloc/free each (that was a fifth of the time on 85k-buffer traces).
  std::pmr::monotonic_buffer_resource pool_;
  std::vector<RangeUnion> cover_, starts_;
  // Query scratch: the lists read, then merged ranges back to back (run k ends at
  // run_end_[k]), merged pairwise into the other buffer until one run is left.
  std::vector<const std::pmr::vector<ByteRange>*> lists_;
  std::vector<ByteRange> runs_, merged_;
  std::vector<size_t> run_end_, merged_end_;
};

}  // namespace carve::planner::detail
