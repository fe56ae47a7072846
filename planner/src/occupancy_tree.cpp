// OccupancyTree: see occupancy_tree.h for the structure and why it is complete.
#include "occupancy_tree.h"

#include <algorithm>

namespace carve::planner::detail {

void RangeUnion::add(ByteRange r) {
  // First range that could touch r: the last one beginning at or before r.begin.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), r.begin,
                             [](int64_t v, const ByteRange& x) { return v < x.begin; });
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

OccupancyTree::OccupancyTree(const Problem& problem) {
  const auto& bufs = problem.buffers;
  std::vector<int64_t> points;
  points.reserve(bufs.size());
  for (const BufferRequest& b : bufs) {
    if (b.size > 0) points.push_back(b.start);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  while (leaves_ < points.size()) leaves_ *= 2;
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
  cover_.resize(2 * leaves_);
  sub_.resize(2 * leaves_);
}

void OccupancyTree::insert(int32_t i, ByteRange bytes) {
  for (size_t l = lo_[i] + leaves_, r = hi_[i] + leaves_; l < r; l >>= 1, r >>= 1) {
    if (l & 1) {
      cover_[l].add(bytes);
      sub_[l++].add(bytes);
    }
    if (r & 1) {
      cover_[--r].add(bytes);
      sub_[r].add(bytes);
    }
  }
  // Every ancestor of a canonical node lies on one of the two boundary paths.
  size_t a = lo_[i] + leaves_, b = hi_[i] - 1 + leaves_;
  for (; a >= 1; a >>= 1, b >>= 1) {
    sub_[a].add(bytes);
    if (b != a) sub_[b].add(bytes);
  }
}

const std::vector<ByteRange>& OccupancyTree::occupied_during(int32_t i) {
  scratch_.clear();
  auto take = [&](const RangeUnion& u) {
    scratch_.insert(scratch_.end(), u.ranges().begin(), u.ranges().end());
  };
  for (size_t l = lo_[i] + leaves_, r = hi_[i] + leaves_; l < r; l >>= 1, r >>= 1) {
    if (l & 1) take(sub_[l++]);
    if (r & 1) take(sub_[--r]);
  }
  size_t a = (lo_[i] + leaves_) >> 1, b = (hi_[i] - 1 + leaves_) >> 1;
  for (; a >= 1; a >>= 1, b >>= 1) {
    take(cover_[a]);
    if (b != a) take(cover_[b]);
  }
  std::sort(scratch_.begin(), scratch_.end(),
            [](const ByteRange& x, const ByteRange& y) { return x.begin < y.begin; });
  // Merge in place so the caller walks holes directly.
  size_t out = 0;
  for (const ByteRange& r : scratch_) {
    if (out > 0 && scratch_[out - 1].end >= r.begin) {
      scratch_[out - 1].end = std::max(scratch_[out - 1].end, r.end);
    } else {
      scratch_[out++] = r;
    }
  }
  scratch_.resize(out);
  return scratch_;
}

}  // namespace carve::planner::detail
