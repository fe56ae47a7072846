// The offset search of the `exact` portfolio: canonical (offset, rank) placement
// sequences (model: see exact.cpp).
//
// Canonical solutions. Lower every buffer as far as it goes ("gravity"): each offset is
// then align_up(max top of the conflicting buffers below it) (or 0). Sorting such a
// solution by (offset, rank) gives a placement sequence in which every item lands on
// its *candidate* offset cand(i) = align_up(max top of already placed conflicting
// items). The search enumerates exactly these sequences: the next item must have
// (cand, rank) lexicographically above the last placed (offset, rank). Items whose cand
// fell below the last offset are "blocked": they can only be placed after a conflicting
// item is put under them. This covers every gravity solution, so the search is complete.
//
// Inference / pruning at every node (all sound for the canonical sequence):
//  * an item whose lowest possible offset plus its size exceeds the capacity: prune;
//  * a blocked item with no unplaced conflicting item can never be placed: prune; a
//    blocked item's lowest offset is the lowest top any unplaced neighbour can reach;
//  * cross-section inference: in every section s the unplaced items covering it stack
//    without overlap, each at or above its own lowest offset eff, so for every such b:
//    eff(b) + (bytes of items in s with eff >= eff(b)) <= capacity (with b the lowest
//    this is the "unallocated floor" bound, which also folds in the offset order);
//  * subset-sum positions: in a section with little slack, an item's bottom must sit at
//    L(s) + (a subset sum of the unplaced sizes there) + (at most the slack); an open
//    item whose candidate is no such position is not branched on;
//  * dynamic decomposition: when the unplaced items split at a time no unplaced item
//    spans, the parts share nothing (placed items act only through candidates), so each
//    part is solved on its own, tightest first, and a failing part fails the node
//    without re-searching the others;
//  * dominance: once a "free" item is tried (every unplaced neighbour must end up at or
//    above its top), later branches are skipped (a sum-of-offsets-minimal plan places
//    it first); identical items (interval, size, alignment) go in rank order, and equal
//    offsets in rank order (the tie-break above);
//  * gap dominance (MiniMalloc's): nothing is placed at or above min_height, the lowest
//    cand + size of an unplaced item y: everything placed later would start above y's
//    room at cand(y), so y could be lowered into it and the plan would not be
//    sum-of-offsets-minimal; a node whose last offset reached min_height fails;
//  * failed states are remembered by a 128-bit hash of (unplaced items and their
//    candidates, last offset, last rank);
//  * restarts: search times are heavy-tailed in the branching order, so feasibility
//    runs cycle through several static preference orders (and jittered variants) with
//    geometrically growing node limits; a run that ends within its limit is a proof.
// The search recurses at most 2 * items deep (one placement or one split per level);
// large problems run on a thread with a big enough stack.
#include <algorithm>
#include <numeric>
#include <span>

#include "exact_internal.h"
#include "exact_positions.h"

namespace carve::planner::exact_detail {
namespace {

class Search {
 public:
  Search(const Prepared& p, const ExactOptions& opt, const SearchLimits& lim, FailCache* cache, uint64_t salt)
      : p_(p), opt_(opt), cap_(lim.capacity), budget_(lim), cache_(cache), salt_(salt) {
    const int n = p.n();
    cand_.assign(n, 0);
    eff_.assign(n, 0);
    offset_.assign(n, -1);
    placed_.assign(n, 0);
    open_.assign(n, 0);
    unplaced_deg_.resize(n);
    for (int i = 0; i < n; ++i) {
      unplaced_deg_[i] = static_cast<int>(p.adj_begin[i + 1] - p.adj_begin[i]);
    }
    scratch_.resize(2 * static_cast<size_t>(n) + 4);
    lfloor_.assign(p.num_sections + 1, 0);
    usum_.assign(p.num_sections + 1, 0);
    paint_.assign(p.num_sections + 1, 0);
    slack_.assign(p.num_sections + 1, 0);
    for (int i = 0; i < n; ++i) flip(i, 0);
  }

  Outcome run(std::vector<int64_t>* offsets) {
    if (dfs(items_by_start(p_), kNoLast, -1, 0)) {
      *offsets = offset_;
      return Outcome::kFound;
    }
    return budget_.failure();
  }

  int64_t nodes() const { return budget_.nodes(); }

 private:
  struct Scratch {
    std::vector<int> order;  // items sorted by (eff, rank)
    std::vector<uint64_t> keys;
    std::vector<int> branch;  // open items in branching order
    std::vector<int> child;   // comp minus the branched item
  };
  struct Placement {
    int item;
    size_t cand_mark;
  };

  void place(int b, int64_t off) {
    offset_[b] = off;
    placed_[b] = 1;
    trail_.push_back({b, cand_trail_.size()});
    const int64_t top = off + p_.size[b];
    flip(b, cand_[b]);
    for (size_t k = p_.adj_begin[b]; k < p_.adj_begin[b + 1]; ++k) {
      const int c = p_.adj[k];
      if (placed_[c]) continue;
      --unplaced_deg_[c];
      const int64_t nc = align_up(top, p_.align[c]);
      if (nc > cand_[c]) {
        cand_trail_.emplace_back(c, cand_[c]);
        flip(c, cand_[c]);
        cand_[c] = nc;
        flip(c, nc);
      }
    }
  }

  void undo_to(size_t mark) {
    while (trail_.size() > mark) {
      const Placement pl = trail_.back();
      trail_.pop_back();
      while (cand_trail_.size() > pl.cand_mark) {
        const auto [c, old] = cand_trail_.back();
        flip(c, cand_[c]);
        cand_[c] = old;
        flip(c, old);
        cand_trail_.pop_back();
      }
      const int b = pl.item;
      flip(b, cand_[b]);
      placed_[b] = 0;
      offset_[b] = -1;
      for (size_t k = p_.adj_begin[b]; k < p_.adj_begin[b + 1]; ++k) {
        const int c = p_.adj[k];
        if (!placed_[c]) ++unplaced_deg_[c];
      }
    }
  }

  // State hash: over unplaced items of (item, cand), and the placed set; two
  // independent 64-bit hashes.
  void flip(int item, int64_t cand) {
    const uint64_t k = (static_cast<uint64_t>(item) << 40) ^ static_cast<uint64_t>(cand);
    h1_ ^= mix64(k);
    h2_ ^= mix64(k ^ 0x5851f42d4c957f2dULL) * 3 + 1;
  }

  // Dominance: b is "free" when every unplaced conflicting item must end up at or above
  // cand(b) + size(b). Then b at cand(b) hurts nobody, so a plan minimising the sum of
  // offsets has b exactly there, and its sequence places nothing after b in
  // (offset, rank) order first: later branches need not be tried.
  bool is_free(int b) const {
    const int64_t top = cand_[b] + p_.size[b];
    for (size_t k = p_.adj_begin[b]; k < p_.adj_begin[b + 1]; ++k) {
      const int d = p_.adj[k];
      if (!placed_[d] && eff_[d] < top) return false;
    }
    return true;
  }

  int find_paint(int s) {
    int r = s;
    while (paint_[r] != r) r = paint_[r];
    while (paint_[s] != r) {
      const int nx = paint_[s];
      paint_[s] = r;
      s = nx;
    }
    return r;
  }

  // Places every item of `comp` (unplaced, sorted by s0, connected or not) so that the
  // sequence continues canonically after (last, last_rank). On false, state is as on
  // entry.
  bool dfs(std::span<const int> comp, int64_t last, int last_rank, int depth) {
    if (comp.empty()) return true;
    if (cache_ != nullptr) {
      const uint64_t salt =
          salt_ ^ mix64(static_cast<uint64_t>(last) ^ (static_cast<uint64_t>(last_rank) << 40));
      const uint64_t k1 = h1_ ^ salt, k2 = h2_ ^ mix64(salt);
      if (cache_->contains(k1, k2)) return false;
      const bool ok = dfs_impl(comp, last, last_rank, depth);
      if (!ok && !budget_.stopped()) cache_->insert(k1, k2);
      return ok;
    }
    return dfs_impl(comp, last, last_rank, depth);
  }

  bool dfs_impl(std::span<const int> comp, int64_t last, int last_rank, int depth) {
    if (budget_.spend()) return false;
    const size_t mark = trail_.size();

    // Per-item bounds.
    int lo = std::numeric_limits<int>::max(), hi = 0;
    int64_t span_sum = 0;
    int64_t min_height = kInf;  // lowest cand + size of an unplaced item
    for (int b : comp) {
      const int64_t c = cand_[b];
      min_height = std::min(min_height, c + p_.size[b]);
      const bool open = c > last || (c == last && p_.rank[b] > last_rank);
      if (!open && unplaced_deg_[b] == 0) return false;  // can never rise to `last`
      int64_t e = c;
      if (!open) {
        // Blocked: some unplaced conflicting item must be placed under it first, at an
        // offset >= last, so it cannot start below the lowest such top.
        int64_t lowest_top = kInf;
        for (size_t k = p_.adj_begin[b]; k < p_.adj_begin[b + 1]; ++k) {
          const int d = p_.adj[k];
          if (last + p_.size[d] >= lowest_top) break;  // sizes ascend from here
          if (!placed_[d]) lowest_top = std::min(lowest_top, std::max(cand_[d], last) + p_.size[d]);
        }
        e = align_up(std::max(last, lowest_top), p_.align[b]);
      }
      if (e + p_.size[b] > cap_) return false;
      eff_[b] = e;
      open_[b] = open;
      lo = std::min(lo, p_.s0[b]);
      hi = std::max(hi, p_.s1[b]);
      span_sum += p_.s1[b] - p_.s0[b];
    }
    // Gap dominance (see the file comment): nothing goes at or above min_height.
    if (opt_.dominance && last >= min_height) return false;
    if (comp.size() == 1) {
      const int b = comp[0];
      if (!open_[b]) return false;  // blocked (and see above)
      place(b, cand_[b]);
      return true;
    }

    Scratch& sc = scratch_[depth];
    // Items by (eff, rank): sort packed keys (eff < 2^43 when it fits the capacity
    // check below 2^43; otherwise a comparator sort).
    sc.keys.clear();
    sc.order.clear();
    if (cap_ < (int64_t{1} << 43) && p_.n() < (1 << 20)) {
      for (int b : comp) {
        sc.keys.push_back((static_cast<uint64_t>(eff_[b]) << 20) |
                          static_cast<uint64_t>(p_.rank[b]));
      }
      std::sort(sc.keys.begin(), sc.keys.end());
      for (uint64_t k : sc.keys) sc.order.push_back(p_.by_rank[k & ((1u << 20) - 1)]);
    } else {
      sc.order.assign(comp.begin(), comp.end());
      std::sort(sc.order.begin(), sc.order.end(), [&](int a, int b) {
        return eff_[a] != eff_[b] ? eff_[a] < eff_[b] : p_.rank[a] < p_.rank[b];
      });
    }

    // Cross-section inference. In section s the unplaced items covering it stack
    // without overlap, each at or above its own lowest offset eff, so for every item b
    // covering s: eff(b) + (bytes of the items covering s with eff >= eff(b)) <= C.
    // (With b the lowest this is the "unallocated floor" bound.) Exact per-section
    // check when the spans are short; otherwise only the unallocated floor bound.
    if (opt_.section_inference) {
      for (int s = lo; s <= hi; ++s) {
        usum_[s] = 0;
        lfloor_[s] = kInf;
      }
      if (span_sum <= 64 * (static_cast<int64_t>(comp.size()) + (hi - lo))) {
        for (auto it = sc.order.rbegin(); it != sc.order.rend(); ++it) {
          const int b = *it;
          const int64_t e = eff_[b], sz = p_.size[b];
          for (int s = p_.s0[b]; s < p_.s1[b]; ++s) {
            usum_[s] += sz;
            lfloor_[s] = e;
            if (e + usum_[s] > cap_) return false;
          }
        }
      } else {
        for (int s = lo; s <= hi; ++s) paint_[s] = s;
        for (int b : comp) {
          usum_[p_.s0[b]] += p_.size[b];
          usum_[p_.s1[b]] -= p_.size[b];
        }
        int64_t run = 0;
        for (int s = lo; s < hi; ++s) {
          run += usum_[s];
          usum_[s] = run;
        }
        for (int b : sc.order) {
          for (int s = find_paint(p_.s0[b]); s < p_.s1[b]; s = find_paint(s)) {
            lfloor_[s] = eff_[b];
            paint_[s] = s + 1;
          }
        }
      }
      for (int s = lo; s < hi; ++s) {
        slack_[s] = lfloor_[s] == kInf ? kInf : cap_ - lfloor_[s] - usum_[s];
        if (slack_[s] < 0) return false;
      }
    }

    // Subset-sum positions: in a section s with little slack, the bottom of any unplaced
    // item b lies at L(s) + (sizes of some unplaced items of s) + (at most slack(s)).
    // An open item whose candidate offset is no such position in one of its sections
    // cannot be placed there now, so it is not branched on.
    use_positions_ = opt_.section_inference && opt_.subset_sum &&
                     SectionPositions::usable(p_, cap_);
    if (use_positions_) positions_.build(p_, cap_, comp, lo, hi, slack_);

    // Dynamic decomposition at cut points of the unplaced items.
    if (opt_.decompose) {
      parts_.clear();
      int max_end = -1;
      size_t begin = 0;
      for (size_t x = 0; x < comp.size(); ++x) {
        const int b = comp[x];
        if (x > 0 && p_.s0[b] >= max_end) {
          parts_.push_back({begin, x});
          begin = x;
        }
        max_end = std::max(max_end, p_.s1[b]);
      }
      if (begin > 0) {
        parts_.push_back({begin, comp.size()});
        // Tightest part first.
        std::vector<std::pair<int64_t, std::pair<size_t, size_t>>> ordered;
        ordered.reserve(parts_.size());
        for (const auto& part : parts_) {
          int64_t tight = kInf;
          if (opt_.section_inference) {
            int plo = std::numeric_limits<int>::max(), phi = 0;
            for (size_t x = part.first; x < part.second; ++x) {
              plo = std::min(plo, p_.s0[comp[x]]);
              phi = std::max(phi, p_.s1[comp[x]]);
            }
            for (int s = plo; s < phi; ++s) tight = std::min(tight, slack_[s]);
          }
          ordered.push_back({tight, part});
        }
        std::stable_sort(ordered.begin(), ordered.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (const auto& [tight, part] : ordered) {
          (void)tight;
          if (!dfs(comp.subspan(part.first, part.second - part.first), kNoLast, -1,
                   depth + 1)) {
            undo_to(mark);
            return false;
          }
        }
        return true;
      }
    }

    // Branch: the next item in (offset, rank) order.
    // (open_ is overwritten by the children, so the branch list is fixed first.)
    sc.branch.clear();
    for (int b : sc.order) {
      if (opt_.dominance && cand_[b] >= min_height) break;  // gap dominance
      if (!open_[b]) continue;  // blocked
      if (opt_.symmetry && p_.sym_prev[b] >= 0 && !placed_[p_.sym_prev[b]]) continue;
      if (use_positions_ && !positions_.ok(p_, b, cand_[b], lfloor_, slack_)) continue;
      sc.branch.push_back(b);
      if (opt_.dominance && is_free(b)) break;
    }
    for (int b : sc.branch) {
      sc.child.clear();
      for (int c : comp) {
        if (c != b) sc.child.push_back(c);
      }
      const int64_t at = cand_[b];
      place(b, at);
      if (dfs(sc.child, at, p_.rank[b], depth + 1)) return true;
      undo_to(mark);
      if (budget_.stopped()) return false;
    }
    return false;
  }

  const Prepared& p_;
  const ExactOptions& opt_;
  const int64_t cap_;
  SearchBudget budget_;
  std::vector<int64_t> cand_, eff_, offset_;
  std::vector<char> placed_, open_;
  std::vector<int> unplaced_deg_;
  std::vector<Placement> trail_;
  std::vector<std::pair<int, int64_t>> cand_trail_;
  std::vector<Scratch> scratch_;
  std::vector<int64_t> lfloor_, usum_, slack_;
  std::vector<int> paint_;
  bool use_positions_ = false;
  SectionPositions positions_;
  std::vector<std::pair<size_t, size_t>> parts_;
  FailCache* const cache_;
  const uint64_t salt_;
  uint64_t h1_ = 0, h2_ = 0;
};
}  // namespace

Outcome offset_search(const Prepared& p, const ExactOptions& opt, const SearchLimits& lim,
                      FailCache* cache, uint64_t salt, std::vector<int64_t>* offsets,
                      int64_t* nodes) {
  Search search(p, opt, lim, cache, salt);
  const Outcome out = search.run(offsets);
  *nodes += search.nodes();
  return out;
}

}  // namespace carve::planner::exact_detail
