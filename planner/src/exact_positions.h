// Subset-sum positions for the offset search of the `exact` strategy
// (exact_offset_search.cpp). In a section s with little slack, the bottom of any unplaced
// item lies at L(s) + (sizes of some unplaced items of s) + (at most slack(s)), L(s)
// being the lowest offset an unplaced item of s can take. One bitset per tight section
// over multiples of the granularity records those subset sums.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exact_internal.h"

namespace carve::planner::exact_detail {

class SectionPositions {
 public:
  // Whether the sets are kept at this capacity (their size is capacity / granularity).
  static bool usable(const Prepared& p, int64_t capacity) {
    return capacity / p.gran <= kMaxUnits;
  }
  // Rebuilds the sets of sections [lo, hi) from the unplaced items `comp`; slack[s] is
  // kInf where no unplaced item covers s. A section is tight when slack * 8 <= capacity.
  void build(const Prepared& p, int64_t capacity, std::span<const int> comp, int lo, int hi,
             const std::vector<int64_t>& slack);
  // Whether offset `at` of item b is a possible position in every tight section of b
  // (low[s] = L(s)).
  bool ok(const Prepared& p, int b, int64_t at, const std::vector<int64_t>& low,
          const std::vector<int64_t>& slack) const;

 private:
  static constexpr int64_t kMaxUnits = 8192;
  void shift_or(uint64_t* w, int shift) const;
  bool any_bit(const uint64_t* w, int64_t a, int64_t b) const;
  uint64_t* set(int s) { return &bits_[static_cast<size_t>(s) * words_]; }
  const uint64_t* set(int s) const { return &bits_[static_cast<size_t>(s) * words_]; }

  int words_ = 0;
  std::vector<uint64_t> bits_;
  std::vector<char> tight_;
};

}  // namespace carve::planner::exact_detail
