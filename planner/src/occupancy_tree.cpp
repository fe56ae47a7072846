// OccupancyTree: see occupancy_tree.h for the structure and why it is complete.
#include "occupancy_tree.h"

#include <algorithm>
#include <bit>

namespace carve::planner::detail {

namespace {

// Index of the first range beginning after v. Branch-free halving: the comparisons are
// unpredictable, and the mispredicted branches of std::upper_bound were most of add().
size_t first_beginning_after(const ByteRange* ranges, size_t n, int64_t v) {
  if (n == 0) return 0;
  const ByteRange* base = ranges;
  while (n > 1) {
    const size_t half = n / 2;
    base = base[half].begin <= v ? base + half : base;
    n -= half;
  }
  return static_cast<size_t>(base - ranges) + (base->begin <= v ? 1 : 0);
}

}  // namespace

void RangeUnion::add(ByteRange r) {
  // First range that could touch r: the last one beginning at or before r.begin.
  auto it = ranges_.begin() + static_cast<std::ptrdiff_t>(
                                  first_beginning_after(ranges_.data(), ranges_.size(), r.begin));
  if (it != ranges_.begin() && std::prev(it)->end >= r.begin) {
    --it;
    if (it->end >= r.end) return;  // already covered: the common case in dense plans
    r.begin = it->begin;
  }
  auto last = it;
  while (last != ranges_.end() && last->begin <= r.end) {
    r.end = std::max(r.end, last->end);
    ++last;
  }
  if (last == it) {
    ranges_.insert(it, r);
    return;
  }
  *it = r;
  ranges_.erase(it + 1, last);
}

namespace {

// Appends the union of the sorted merged lists [x, x_end) and [y, y_end) to `out`.
void merge_union(const ByteRange* x, const ByteRange* x_end, const ByteRange* y,
                 const ByteRange* y_end, std::vector<ByteRange>& out) {
  if (x == x_end && y == y_end) return;
  // Seed with the lower first range, so that push compares with a range of this merge.
  if (y == y_end || (x != x_end && x->begin <= y->begin)) {
    out.push_back(*x++);
  } else {
    out.push_back(*y++);
  }
  auto push = [&](const ByteRange& r) {
    if (out.back().end >= r.begin) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  };
  while (x != x_end && y != y_end) push(x->begin <= y->begin ? *x++ : *y++);
  while (x != x_end) push(*x++);
  while (y != y_end) push(*y++);
}

}  // namespace

OccupancyTree::OccupancyTree(const Problem& problem) {
  const auto& bufs = problem.buffers;
  std::vector<int64_t> points;
  points.reserve(bufs.size());
  for (const BufferRequest& b : bufs) {
    if (b.size > 0) points.push_back(b.start);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  while (leaves_ < points.size()) {
    leaves_ *= 2;
    ++leaf_depth_;
  }
  lo_.assign(bufs.size(), 0);
  hi_.assign(bufs.size(), 0);
  auto index_of = [&](int64_t t) {
    return static_cast<int32_t>(std::lower_bound(points.begin(), points.end(), t) - points.begin());
  };
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i].size == 0) continue;
    lo_[i] = index_of(bufs[i].start);
    hi_[i] = index_of(bufs[i].end);  // > lo_[i]: start < end and start is a point
  }
  cover_.reserve(2 * leaves_);
  starts_.reserve(2 * leaves_);
  for (size_t k = 0; k < 2 * leaves_; ++k) {
    cover_.emplace_back(&pool_);
    starts_.emplace_back(&pool_);
  }
}

namespace {

int depth_of(size_t node) { return std::bit_width(node) - 1; }  // root (1) is depth 0

}  // namespace

bool OccupancyTree::keeps_cover(int depth) const {
  return depth % kCoverDepthStride == 0 || depth == leaf_depth_;
}

void OccupancyTree::add_cover(size_t node, ByteRange bytes) {
  // A canonical node between kept depths hands its buffer to all its descendants at the
  // next kept depth (at most 2^(stride-1) of them): together they cover the same points.
  const int d = depth_of(node);
  const int next_kept = (d + kCoverDepthStride - 1) / kCoverDepthStride * kCoverDepthStride;
  const int kept = std::min(leaf_depth_, next_kept);
  const size_t first = node << (kept - d), last = (node + 1) << (kept - d);
  for (size_t x = first; x < last; ++x) cover_[x].add(bytes);
}

void OccupancyTree::insert(int32_t i, ByteRange bytes) {
  for (size_t l = lo_[i] + leaves_, r = hi_[i] + leaves_; l < r; l >>= 1, r >>= 1) {
    if (l & 1) add_cover(l++, bytes);
    if (r & 1) add_cover(--r, bytes);
  }
  for (size_t a = lo_[i] + leaves_; a >= 1; a >>= 1) starts_[a].add(bytes);
}

const std::vector<ByteRange>& OccupancyTree::occupied_during(int32_t i) {
  lists_.clear();
  auto take = [&](const RangeUnion& u) {
    if (!u.ranges().empty()) lists_.push_back(&u.ranges());
  };
  int d = leaf_depth_;
  for (size_t a = lo_[i] + leaves_; a >= 1; a >>= 1, --d) {
    if (keeps_cover(d)) take(cover_[a]);
  }
  for (size_t l = lo_[i] + 1 + leaves_, r = hi_[i] + leaves_; l < r; l >>= 1, r >>= 1) {
    if (l & 1) take(starts_[l++]);
    if (r & 1) take(starts_[--r]);
  }
  // First round straight from the lists, then pairwise rounds over the scratch runs:
  // every range is copied O(log k) times, and unions shrink as they go.
  runs_.clear();
  run_end_.clear();
  for (size_t k = 0; k < lists_.size(); k += 2) {
    const auto& x = *lists_[k];
    if (k + 1 == lists_.size()) {
      runs_.insert(runs_.end(), x.begin(), x.end());
    } else {
      const auto& y = *lists_[k + 1];
      merge_union(x.data(), x.data() + x.size(), y.data(), y.data() + y.size(), runs_);
    }
    run_end_.push_back(runs_.size());
  }
  while (run_end_.size() > 1) {
    merged_.clear();
    merged_end_.clear();
    const ByteRange* base = runs_.data();
    size_t begin = 0;
    for (size_t k = 0; k < run_end_.size(); k += 2) {
      if (k + 1 == run_end_.size()) {
        merged_.insert(merged_.end(), base + begin, base + run_end_[k]);
      } else {
        merge_union(base + begin, base + run_end_[k], base + run_end_[k], base + run_end_[k + 1],
                    merged_);
        begin = run_end_[k + 1];
      }
      merged_end_.push_back(merged_.size());
    }
    std::swap(runs_, merged_);
    std::swap(run_end_, merged_end_);
  }
  return runs_;
}

}  // namespace carve::planner::detail
