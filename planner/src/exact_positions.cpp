// Subset-sum positions for the `exact` offset search; see exact_positions.h.
#include "exact_positions.h"

#include <algorithm>

namespace carve::planner::exact_detail {

void SectionPositions::build(const Prepared& p, int64_t capacity, std::span<const int> comp,
                             int lo, int hi, const std::vector<int64_t>& slack) {
  const int64_t g = p.gran;
  words_ = static_cast<int>(capacity / g) / 64 + 1;
  const size_t need = static_cast<size_t>(p.num_sections) * words_;
  if (bits_.size() < need) bits_.resize(need);
  if (tight_.size() < static_cast<size_t>(p.num_sections)) tight_.resize(p.num_sections);
  for (int s = lo; s < hi; ++s) {
    tight_[s] = slack[s] != kInf && slack[s] * 8 <= capacity;
    if (!tight_[s]) continue;
    uint64_t* w = set(s);
    std::fill(w, w + words_, 0);
    w[0] = 1;
  }
  for (int b : comp) {
    const int shift = static_cast<int>(p.size[b] / g);
    for (int s = p.s0[b]; s < p.s1[b]; ++s) {
      if (tight_[s]) shift_or(set(s), shift);
    }
  }
}

bool SectionPositions::ok(const Prepared& p, int b, int64_t at, const std::vector<int64_t>& low,
                          const std::vector<int64_t>& slack) const {
  const int64_t g = p.gran;
  for (int s = p.s0[b]; s < p.s1[b]; ++s) {
    if (!tight_[s]) continue;
    const int64_t rel = at - low[s];
    if (rel < 0) return false;
    if (!any_bit(set(s), (rel - slack[s] + g - 1) / g, rel / g)) return false;
  }
  return true;
}

// bits |= bits << shift, over words_ words (bits past the capacity fall off).
void SectionPositions::shift_or(uint64_t* w, int shift) const {
  if (shift <= 0) return;
  const int ws = shift / 64, bs = shift % 64;
  for (int i = words_ - 1; i >= ws; --i) {
    uint64_t v = w[i - ws] << bs;
    if (bs != 0 && i - ws - 1 >= 0) v |= w[i - ws - 1] >> (64 - bs);
    w[i] |= v;
  }
}

// Any bit set in [a, b] (clamped)?
bool SectionPositions::any_bit(const uint64_t* w, int64_t a, int64_t b) const {
  a = std::max<int64_t>(a, 0);
  b = std::min<int64_t>(b, static_cast<int64_t>(words_) * 64 - 1);
  for (int64_t i = a; i <= b;) {
    const int64_t word = i / 64, bit = i % 64;
    uint64_t v = w[word] >> bit;
    const int64_t span = std::min<int64_t>(64 - bit, b - i + 1);
    if (span < 64) v &= (uint64_t{1} << span) - 1;
    if (v != 0) return true;
    i += span;
  }
  return false;
}

}  // namespace carve::planner::exact_detail
