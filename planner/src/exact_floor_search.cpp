// The default `exact` search: branching on the lowest free point ("floor").
//
// State. Every time section s has a floor F(s): everything below it in s is decided
// (occupied by a placed item, or left empty). An unplaced item b can start no lower than
// lb(b) = align_up(max F over its sections). A state is *consistent* when some plan
// places the placed items where they are and every unplaced item at or above the floors.
//
// Branching. Take a section s* of lowest floor f (which one: FloorTie) and
// ask what is at the point (s*, f):
//   * an unplaced item b covering s* with lb(b) = f starts there: place it, F := f +
//     size(b) over its sections;
//   * nothing starts there ("waste"): raise F(s*) to L, the lowest offset any item
//     covering s* can still take: lb(b) when that is above f, otherwise the lowest top
//     lb(d) + size(d) of an unplaced item d conflicting with b (b must sit on top of
//     something unplaced).
// Completeness: from a consistent state, lower every unplaced item as far as its lb and
// the items below allow; in the result each unplaced item sits at lb(b) or on the top of
// an unplaced conflicting item. If an item starts at (s*, f) it is a candidate above;
// otherwise every item covering s* starts at or above L. So one branch stays consistent.
//
// Inference, every node: lb(b) + size(b) <= C; per section, for every item b covering
// it, lb(b) + (bytes of covering items with lb >= lb(b)) <= C; and F(s) is raised to the
// lowest lb of the items covering s (nothing can use the space below).
// Dominance: identical items are placed in rank order; a candidate b is "free" when every
// unplaced item conflicting with b has lb >= f + size(b) (the space b takes is of no use
// to anyone else), and then it is the only branch. Decomposition: when no unplaced item
// spans a section boundary the two sides share nothing (floors are per section) and are
// solved separately, tightest first. Failed states -- (unplaced items, floors over their
// sections) -- do not depend on the branching order, so one cache serves every restart.
// The waste branch is the last one and loops in the same frame, so recursion depth is at
// most 2 * items.
#include <algorithm>
#include <numeric>
#include <span>

#include "exact_internal.h"

namespace carve::planner::exact_detail {
namespace {

class FloorSearch {
 public:
  FloorSearch(const Prepared& p, const ExactOptions& opt, const SearchLimits& lim,
              FailCache* cache, FloorTie tie)
      : p_(p), opt_(opt), lim_(lim), cap_(lim.capacity), cache_(cache),
        tie_(tie) {
    const int n = p.n();
    const int ns = p.num_sections;
    floor_.assign(ns + 1, 0);
    usum_.assign(ns + 1, 0);
    low_.assign(ns + 1, 0);
    slack_.assign(ns + 1, 0);
    lb_.assign(n, 0);
    offset_.assign(n, -1);
    placed_.assign(n, 0);
    scratch_.resize(2 * static_cast<size_t>(n) + 4);
  }

  Outcome run(std::vector<int64_t>* offsets) {
    if (dfs(items_by_start(p_), 0)) {
      *offsets = offset_;
      return Outcome::kFound;
    }
    return budget_.failure();
  }

  int64_t nodes() const { return budget_.nodes(); }

 private:
  struct Scratch {
    std::vector<uint64_t> sort_keys;
    std::vector<int> order;   // comp by (lb, rank)
    std::vector<int> branch;  // candidates in branching order
    std::vector<int> child;
    std::vector<std::pair<uint64_t, uint64_t>> fail_keys;  // states visited by this frame
  };

  void set_floor(int s, int64_t v) {
    ftrail_.emplace_back(s, floor_[s]);
    floor_[s] = v;
  }
  void undo_to(size_t fmark, size_t pmark) {
    while (ftrail_.size() > fmark) {
      floor_[ftrail_.back().first] = ftrail_.back().second;
      ftrail_.pop_back();
    }
    while (ptrail_.size() > pmark) {
      const int b = ptrail_.back();
      ptrail_.pop_back();
      placed_[b] = 0;
      offset_[b] = -1;
    }
  }
  void place(int b, int64_t at) {
    placed_[b] = 1;
    offset_[b] = at;
    ptrail_.push_back(b);
    for (int s = p_.s0[b]; s < p_.s1[b]; ++s) set_floor(s, at + p_.size[b]);
  }


  // Computes lb for comp, sorts it into sc.order, checks the per-item and per-section
  // bounds and raises floors to the lowest lb in each section; fills usum_ / slack_
  // over [lo, hi). False when the state is infeasible.
  bool infer(std::span<const int> comp, int lo, int hi, Scratch& sc) {
    sc.sort_keys.clear();
    for (int b : comp) {
      int64_t m = 0;
      for (int s = p_.s0[b]; s < p_.s1[b]; ++s) m = std::max(m, floor_[s]);
      const int64_t e = align_up(m, p_.align[b]);
      if (e > cap_ || p_.size[b] > cap_ - e) return false;  // e + size > cap, without overflow
      lb_[b] = e;
      sc.sort_keys.push_back((static_cast<uint64_t>(e) << 20) |
                             static_cast<uint64_t>(p_.rank[b]));
    }
    sc.order.clear();
    if (packed_keys_) {
      std::sort(sc.sort_keys.begin(), sc.sort_keys.end());
      for (uint64_t k : sc.sort_keys) sc.order.push_back(p_.by_rank[k & ((1u << 20) - 1)]);
    } else {
      sc.order.assign(comp.begin(), comp.end());
      std::sort(sc.order.begin(), sc.order.end(), [&](int a, int b) {
        return lb_[a] != lb_[b] ? lb_[a] < lb_[b] : p_.rank[a] < p_.rank[b];
      });
    }
    for (int s = lo; s < hi; ++s) {
      usum_[s] = 0;
      low_[s] = kInf;
    }
    for (auto it = sc.order.rbegin(); it != sc.order.rend(); ++it) {
      const int b = *it;
      const int64_t e = lb_[b], sz = p_.size[b];
      for (int s = p_.s0[b]; s < p_.s1[b]; ++s) {
        if (sz > cap_ - e - usum_[s]) return false;  // e + usum + sz > cap (e + usum <= cap so far)
        usum_[s] += sz;
        low_[s] = e;
      }
    }
    // Raising F(s) to the lowest lb there changes no lb (each covering lb is >= it).
    for (int s = lo; s < hi; ++s) {
      if (low_[s] != kInf && low_[s] > floor_[s]) set_floor(s, low_[s]);
      slack_[s] = cap_ - floor_[s] - usum_[s];
    }
    return true;
  }

  std::pair<uint64_t, uint64_t> state_key(std::span<const int> comp, int lo, int hi) const {
    uint64_t a = 0x243f6a8885a308d3ULL, b = 0x13198a2e03707344ULL;
    for (int i : comp) {
      a += mix64(static_cast<uint64_t>(i) * 2 + 1);
      b ^= mix64(static_cast<uint64_t>(i) ^ 0xa4093822299f31d0ULL);
    }
    for (int s = lo; s < hi; ++s) {
      const uint64_t k = (static_cast<uint64_t>(s) << 44) ^ static_cast<uint64_t>(floor_[s]);
      a += mix64(k ^ 0x082efa98ec4e6c89ULL);
      b += mix64(k) * 3;
    }
    return {a, b};
  }

  // Free: nothing else can use the space b would take at f.
  bool is_free(int b, int64_t f) const {
    const int64_t top = f + p_.size[b];
    for (size_t k = p_.adj_begin[b]; k < p_.adj_begin[b + 1]; ++k) {
      const int d = p_.adj[k];
      if (!placed_[d] && lb_[d] < top) return false;
    }
    return true;
  }

  // Lowest offset any item covering s* can take when nothing starts at (s*, f).
  int64_t waste_level(std::span<const int> comp, int ss, int64_t f) const {
    int64_t level = kInf;
    for (int b : comp) {
      if (p_.s0[b] > ss || p_.s1[b] <= ss) continue;
      int64_t next = lb_[b];
      if (next <= f) {
        int64_t lowest_top = kInf;
        for (size_t k = p_.adj_begin[b]; k < p_.adj_begin[b + 1]; ++k) {
          const int d = p_.adj[k];
          if (!placed_[d]) lowest_top = std::min(lowest_top, lb_[d] + p_.size[d]);
        }
        if (lowest_top == kInf) return kInf;  // b can only ever start at f
        next = align_up(lowest_top, p_.align[b]);
      }
      level = std::min(level, next);
    }
    return level;
  }

  // Among the sections of lowest floor f, the leftmost with the fewest branches (items
  // that can start at f there, plus "left empty" when the section has slack).
  int fewest_choices(const Scratch& sc, int lo, int hi, int64_t f) {
    for (int s = lo; s < hi; ++s) low_[s] = slack_[s] > 0 ? 1 : 0;
    for (int b : sc.order) {
      if (lb_[b] != f) break;
      if (opt_.symmetry && p_.sym_prev[b] >= 0 && !placed_[p_.sym_prev[b]]) continue;
      for (int s = p_.s0[b]; s < p_.s1[b]; ++s) ++low_[s];
    }
    int best = -1;
    for (int s = lo; s < hi; ++s) {
      if (usum_[s] > 0 && floor_[s] == f && (best < 0 || low_[s] < low_[best])) best = s;
    }
    return best;
  }

  // Places every item of comp (unplaced, sorted by s0). On false, state is as on entry.
  bool dfs(std::span<const int> comp, int depth) {
    if (comp.empty()) return true;
    const size_t fmark = ftrail_.size(), pmark = ptrail_.size();
    Scratch& sc = scratch_[depth];
    sc.fail_keys.clear();
    auto fail = [&]() {
      undo_to(fmark, pmark);
      if (!budget_.stopped() && cache_ != nullptr) {
        for (const auto& [a, b] : sc.fail_keys) cache_->insert(a, b);
      }
      return false;
    };
    int lo = std::numeric_limits<int>::max(), hi = 0;
    for (int b : comp) {
      lo = std::min(lo, p_.s0[b]);
      hi = std::max(hi, p_.s1[b]);
    }

    for (bool first = true;; first = false) {
      if (budget_.spend()) return fail();
      if (!infer(comp, lo, hi, sc)) return fail();
      if (comp.size() == 1) {
        place(comp[0], lb_[comp[0]]);
        return true;
      }
      if (cache_ != nullptr) {
        const auto key = state_key(comp, lo, hi);
        if (cache_->contains(key.first, key.second)) return fail();
        sc.fail_keys.push_back(key);
      }

      if (first && opt_.decompose) {
        const int split = solve_parts(comp, depth);
        if (split == 1) return true;
        if (split == 0) return fail();
      }

      // The lowest point: a section of lowest floor, chosen by tie_.
      int ss = -1;
      for (int s = lo; s < hi; ++s) {
        if (usum_[s] == 0) continue;  // no unplaced item covers s (without decomposition)
        if (ss < 0 || floor_[s] < floor_[ss]) {
          ss = s;
        } else if (floor_[s] == floor_[ss] && tie_ == FloorTie::kLeastSlack &&
                   slack_[s] < slack_[ss]) {
          ss = s;
        }
      }
      if (tie_ == FloorTie::kFewestChoices) ss = fewest_choices(sc, lo, hi, floor_[ss]);
      const int64_t f = floor_[ss];

      // (lb, rank) order: candidates are a prefix with lb == f.
      sc.branch.clear();
      bool forced = false;
      for (int b : sc.order) {
        if (lb_[b] != f) break;
        if (p_.s0[b] > ss || p_.s1[b] <= ss) continue;
        if (opt_.symmetry && p_.sym_prev[b] >= 0 && !placed_[p_.sym_prev[b]]) continue;
        if (opt_.dominance && is_free(b, f)) {
          sc.branch.assign(1, b);
          forced = true;
          break;
        }
        sc.branch.push_back(b);
      }
      // Computed before the children overwrite lb_.
      const int64_t level = forced ? kInf : waste_level(comp, ss, f);
      const int64_t used = usum_[ss];
      const size_t fm = ftrail_.size(), pm = ptrail_.size();
      for (size_t x = 0; x < sc.branch.size(); ++x) {
        const int b = sc.branch[x];
        sc.child.clear();
        for (int c : comp) {
          if (c != b) sc.child.push_back(c);
        }
        place(b, f);
        if (dfs(sc.child, depth + 1)) return true;
        undo_to(fm, pm);
        if (budget_.stopped()) return fail();
      }
      if (level == kInf || used > cap_ || level > cap_ - used) return fail();  // no overflow on huge sizes
      // Children used deeper scratch only; lb_ of comp is recomputed by infer().
      set_floor(ss, level);
    }
  }

  // Splits comp at sections no item spans; 2 = no split, 1 = all parts placed, 0 = a
  // part failed (state restored).
  int solve_parts(std::span<const int> comp, int depth) {
    parts_.clear();
    int max_end = -1;
    size_t begin = 0;
    for (size_t x = 0; x < comp.size(); ++x) {
      const int b = comp[x];
      if (x > 0 && p_.s0[b] >= max_end) {
        parts_.push_back({0, {begin, x}});
        begin = x;
      }
      max_end = std::max(max_end, p_.s1[b]);
    }
    if (begin == 0) return 2;
    parts_.push_back({0, {begin, comp.size()}});
    for (auto& [tight, part] : parts_) {
      tight = kInf;
      for (size_t x = part.first; x < part.second; ++x) {
        const int b = comp[x];
        for (int s = p_.s0[b]; s < p_.s1[b]; ++s) tight = std::min(tight, slack_[s]);
      }
    }
    std::stable_sort(parts_.begin(), parts_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const auto parts = parts_;  // the children reuse parts_
    const size_t fmark = ftrail_.size(), pmark = ptrail_.size();
    for (const auto& [tight, part] : parts) {
      (void)tight;
      if (!dfs(comp.subspan(part.first, part.second - part.first), depth + 1)) {
        undo_to(fmark, pmark);
        return 0;
      }
    }
    return 1;
  }

  const Prepared& p_;
  const ExactOptions& opt_;
  const SearchLimits lim_;
  const int64_t cap_;
  FailCache* const cache_;
  const FloorTie tie_;
  std::vector<int64_t> floor_, usum_, low_, slack_, lb_, offset_;
  std::vector<char> placed_;
  std::vector<std::pair<int, int64_t>> ftrail_;
  std::vector<int> ptrail_;
  std::vector<Scratch> scratch_;
  std::vector<std::pair<int64_t, std::pair<size_t, size_t>>> parts_;
  SearchBudget budget_{lim_};
  // (lb << 20 | rank) sorts when every lb that passes the capacity check is < 2^43.
  const bool packed_keys_ = cap_ < (int64_t{1} << 43) && p_.n() < (1 << 20);
};

}  // namespace

Outcome floor_search(const Prepared& p, const ExactOptions& opt, const SearchLimits& lim,
                     FailCache* cache, FloorTie tie, std::vector<int64_t>* offsets,
                     int64_t* nodes) {
  FloorSearch search(p, opt, lim, cache, tie);
  const Outcome out = search.run(offsets);
  *nodes += search.nodes();
  return out;
}

}  // namespace carve::planner::exact_detail
