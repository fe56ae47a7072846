// The `exact` strategy: complete search over canonical placements (MiniMalloc-style).
//
// Model. Buffers of size > 0 are "items"; the distinct start/end times cut time into
// sections, and item i covers sections [s0, s1). Two items conflict iff their section
// ranges intersect. Zero-size buffers never conflict and sit at offset 0.
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
//  * failed states are remembered by a 128-bit hash of (unplaced items and their
//    candidates, last offset, last rank);
//  * restarts: search times are heavy-tailed in the branching order, so feasibility
//    runs cycle through several static preference orders (and jittered variants) with
//    geometrically growing node limits; a run that ends within its limit is a proof.
// The search recurses at most 2 * items deep (one placement or one split per level);
// large problems run on a thread with a big enough stack.
#include "carve/planner/exact.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_set>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "carve/planner/problem.h"

namespace carve::planner {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kNoLast = std::numeric_limits<int64_t>::min();
constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

int64_t align_up(int64_t x, int64_t a) {
  if (a <= 1) return x;
  const int64_t r = x % a;
  return r == 0 ? x : x + (a - r);
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The problem restricted to buffers of size > 0, on section indices.
struct Prepared {
  std::vector<int> orig;  // item -> index in Problem::buffers
  std::vector<int64_t> size, align;
  std::vector<int> s0, s1;  // covered sections [s0, s1)
  int num_sections = 0;
  std::vector<int64_t> section_total;
  int64_t lower_bound = 0;
  int64_t gran = 1;  // gcd of sizes and alignments: every canonical offset is a multiple
  // Conflict graph (CSR); empty when it would be too large.
  std::vector<size_t> adj_begin;
  std::vector<int> adj;
  bool adj_ok = false;
  std::vector<int64_t> peak;   // item -> fullest section total over its interval
  std::vector<int> rank;       // item -> preference rank (0 = first)
  std::vector<int> by_rank;    // rank -> item
  std::vector<int> sym_prev;   // previous identical item in rank order, or -1

  int n() const { return static_cast<int>(orig.size()); }
};

constexpr size_t kMaxConflictPairs = size_t{64} << 20;

Prepared prepare(const Problem& problem) {
  Prepared p;
  const auto& bufs = problem.buffers;
  std::vector<int64_t> times;
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i].size <= 0) continue;
    p.orig.push_back(static_cast<int>(i));
    times.push_back(bufs[i].start);
    times.push_back(bufs[i].end);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const int n = p.n();
  p.num_sections = times.empty() ? 0 : static_cast<int>(times.size()) - 1;
  p.size.resize(n);
  p.align.resize(n);
  p.s0.resize(n);
  p.s1.resize(n);
  auto index_of = [&](int64_t t) {
    return static_cast<int>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  std::vector<int64_t> diff(p.num_sections + 1, 0);
  for (int i = 0; i < n; ++i) {
    const BufferRequest& b = bufs[p.orig[i]];
    p.size[i] = b.size;
    p.align[i] = b.alignment;
    p.s0[i] = index_of(b.start);
    p.s1[i] = index_of(b.end);
    diff[p.s0[i]] += b.size;
    diff[p.s1[i]] -= b.size;
  }
  p.gran = 0;
  for (int i = 0; i < n; ++i) {
    p.gran = std::gcd(p.gran, p.size[i]);
    if (p.align[i] > 1) p.gran = std::gcd(p.gran, p.align[i]);
  }
  if (p.gran <= 0) p.gran = 1;
  p.section_total.assign(p.num_sections, 0);
  int64_t run = 0;
  for (int s = 0; s < p.num_sections; ++s) {
    run += diff[s];
    p.section_total[s] = run;
    p.lower_bound = std::max(p.lower_bound, run);
  }

  // Conflict graph by a sweep over items sorted by start section.
  std::vector<int> by_start(n);
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](int a, int b) {
    return p.s0[a] != p.s0[b] ? p.s0[a] < p.s0[b] : a < b;
  });
  std::vector<std::vector<int>> nbrs(n);
  size_t pairs = 0;
  bool ok = true;
  for (int x = 0; x < n && ok; ++x) {
    const int a = by_start[x];
    for (int y = x + 1; y < n; ++y) {
      const int b = by_start[y];
      if (p.s0[b] >= p.s1[a]) break;
      nbrs[a].push_back(b);
      nbrs[b].push_back(a);
      if (++pairs > kMaxConflictPairs) {
        ok = false;
        break;
      }
    }
  }
  p.adj_ok = ok;
  if (ok) {
    p.adj_begin.assign(n + 1, 0);
    for (int i = 0; i < n; ++i) p.adj_begin[i + 1] = p.adj_begin[i] + nbrs[i].size();
    p.adj.reserve(p.adj_begin[n]);
    // Neighbours by size ascending: the blocked-item bound scans them in that order
    // and stops early.
    for (int i = 0; i < n; ++i) {
      std::sort(nbrs[i].begin(), nbrs[i].end(), [&](int a, int b) {
        return p.size[a] != p.size[b] ? p.size[a] < p.size[b] : a < b;
      });
      p.adj.insert(p.adj.end(), nbrs[i].begin(), nbrs[i].end());
    }
  }

  p.peak.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    for (int s = p.s0[i]; s < p.s1[i]; ++s) p.peak[i] = std::max(p.peak[i], p.section_total[s]);
  }
  return p;
}

// Static preference orders tried in turn by the restarts; keys compared descending:
// T = fullest section the item lives in, S = size, W = lifetime width, A = S * W.
constexpr const char* kOrderings[] = {"TWA", "TAW", "LSTW", "ALS", "TLS", "WAT", "TSW", "SWT"};
constexpr int kNumOrderings = sizeof(kOrderings) / sizeof(kOrderings[0]);

// Sets rank / by_rank / sym_prev for ordering `which`; a nonzero seed jitters ties and
// swaps near neighbours so later restarts differ.
void apply_ordering(Prepared& p, int which, uint64_t seed) {
  const int n = p.n();
  const char* keys = kOrderings[which % kNumOrderings];
  p.by_rank.resize(n);
  std::iota(p.by_rank.begin(), p.by_rank.end(), 0);
  auto key = [&](int a, char c) -> int64_t {
    switch (c) {
      case 'T': return p.peak[a];
      case 'S': return p.size[a];
      case 'W': return p.s1[a] - p.s0[a];
      case 'L': return -p.s0[a];
      case 'R': return p.s1[a];
      default: return p.size[a] * (p.s1[a] - p.s0[a]);
    }
  };
  std::vector<uint64_t> tie(n);
  for (int i = 0; i < n; ++i) tie[i] = seed == 0 ? static_cast<uint64_t>(i) : mix64(seed ^ i);
  std::sort(p.by_rank.begin(), p.by_rank.end(), [&](int a, int b) {
    for (const char* c = keys; *c; ++c) {
      const int64_t va = key(a, *c), vb = key(b, *c);
      if (va != vb) return va > vb;
    }
    return tie[a] < tie[b];
  });
  if (seed != 0) {
    for (int r = 0; r + 1 < n; ++r) {
      if (mix64(seed * 31 + r) % 4 == 0) std::swap(p.by_rank[r], p.by_rank[r + 1]);
    }
  }
  p.rank.resize(n);
  for (int r = 0; r < n; ++r) p.rank[p.by_rank[r]] = r;

  // Identical items, chained in rank order.
  p.sym_prev.assign(n, -1);
  std::vector<int> ident = p.by_rank;
  std::stable_sort(ident.begin(), ident.end(), [&](int a, int b) {
    return std::tie(p.s0[a], p.s1[a], p.size[a], p.align[a]) <
           std::tie(p.s0[b], p.s1[b], p.size[b], p.align[b]);
  });
  for (int x = 1; x < n; ++x) {
    const int a = ident[x - 1], b = ident[x];
    if (p.s0[a] == p.s0[b] && p.s1[a] == p.s1[b] && p.size[a] == p.size[b] &&
        p.align[a] == p.align[b]) {
      p.sym_prev[b] = a;
    }
  }
}

// Failed search states (128-bit hashes), open addressing, grows to a fixed cap and then
// stops recording. Only sound failures (not cut off by a limit) are recorded.
class FailCache {
 public:
  bool contains(uint64_t a, uint64_t b) const {
    if (slots_.empty()) return false;
    a |= 1;  // 0 marks an empty slot
    for (size_t i = a & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].first == 0) return false;
      if (slots_[i].first == a && slots_[i].second == b) return true;
    }
  }
  void insert(uint64_t a, uint64_t b) {
    if ((used_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots) return;
      grow();
    }
    a |= 1;
    for (size_t i = a & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].first == 0) {
        slots_[i] = {a, b};
        ++used_;
        return;
      }
      if (slots_[i].first == a && slots_[i].second == b) return;
    }
  }
  size_t size() const { return used_; }

 private:
  static constexpr size_t kMaxSlots = size_t{1} << 21;  // 32 MiB at most
  void grow() {
    std::vector<std::pair<uint64_t, uint64_t>> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 4096 : old.size() * 2, {0, 0});
    mask_ = slots_.size() - 1;
    used_ = 0;
    for (const auto& e : old) {
      if (e.first != 0) insert(e.first, e.second);
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> slots_;
  size_t mask_ = 0;
  size_t used_ = 0;
};

// ---------------------------------------------------------------------------------
// Greedy upper bound: best-fit over a few orders (smallest gap that fits, else on top).

std::vector<int64_t> greedy_best_fit(const Prepared& p, const std::vector<int>& order,
                                     int64_t* arena) {
  const int n = p.n();
  std::vector<int64_t> off(n, -1);
  std::vector<std::pair<int64_t, int64_t>> busy;  // (offset, top) of placed conflicts
  int64_t top_all = 0;
  for (int b : order) {
    busy.clear();
    if (p.adj_ok) {
      for (size_t k = p.adj_begin[b]; k < p.adj_begin[b + 1]; ++k) {
        const int c = p.adj[k];
        if (off[c] >= 0) busy.emplace_back(off[c], off[c] + p.size[c]);
      }
    } else {
      for (int c = 0; c < n; ++c) {
        if (c != b && off[c] >= 0 && p.s0[c] < p.s1[b] && p.s0[b] < p.s1[c]) {
          busy.emplace_back(off[c], off[c] + p.size[c]);
        }
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t cur = 0, best = -1, best_gap = kInf;
    for (const auto& [o, t] : busy) {
      const int64_t at = align_up(cur, p.align[b]);
      if (at + p.size[b] <= o && o - cur < best_gap) {
        best_gap = o - cur;
        best = at;
      }
      cur = std::max(cur, t);
    }
    if (best < 0) best = align_up(cur, p.align[b]);
    off[b] = best;
    top_all = std::max(top_all, best + p.size[b]);
  }
  *arena = top_all;
  return off;
}

std::vector<int64_t> best_greedy(const Prepared& p, int64_t* arena) {
  const int n = p.n();
  std::vector<std::vector<int>> orders;
  std::vector<int> o(n);
  std::iota(o.begin(), o.end(), 0);
  std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return p.size[a] > p.size[b]; });
  orders.push_back(o);
  std::stable_sort(o.begin(), o.end(), [&](int a, int b) {
    const int64_t aa = p.size[a] * (p.s1[a] - p.s0[a]), ab = p.size[b] * (p.s1[b] - p.s0[b]);
    return aa > ab;
  });
  orders.push_back(o);
  orders.push_back(p.by_rank);
  std::vector<int64_t> best;
  int64_t best_arena = kInf;
  for (const auto& order : orders) {
    int64_t a = 0;
    auto off = greedy_best_fit(p, order, &a);
    if (a < best_arena) {
      best_arena = a;
      best = std::move(off);
    }
  }
  *arena = n == 0 ? 0 : best_arena;
  return best;
}

// ---------------------------------------------------------------------------------
// The feasibility search.

enum class Outcome { kFound, kInfeasible, kTimeout, kNodeLimit };

class Search {
 public:
  Search(const Prepared& p, const ExactOptions& opt, int64_t capacity,
         Clock::time_point deadline, int64_t node_limit, FailCache* cache, uint64_t salt)
      : p_(p), opt_(opt), cap_(capacity), deadline_(deadline), node_limit_(node_limit),
        cache_(cache), salt_(salt) {
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
    tight_.assign(p.num_sections + 1, 0);
    slack_.assign(p.num_sections + 1, 0);
    for (int i = 0; i < n; ++i) flip(i, 0);
  }

  Outcome run(std::vector<int64_t>* offsets) {
    const int n = p_.n();
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    std::sort(all.begin(), all.end(), [&](int a, int b) {
      return p_.s0[a] != p_.s0[b] ? p_.s0[a] < p_.s0[b] : a < b;
    });
    const bool ok = dfs(all, kNoLast, -1, 0);
    if (ok) {
      *offsets = offset_;
      return Outcome::kFound;
    }
    if (!timed_out_) return Outcome::kInfeasible;
    return hit_node_limit_ ? Outcome::kNodeLimit : Outcome::kTimeout;
  }

  int64_t nodes() const { return nodes_; }

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

  // bits |= bits << shift, over words_ words (bits past the capacity fall off).
  void shift_or(uint64_t* w, int shift) {
    if (shift <= 0) return;
    const int ws = shift / 64, bs = shift % 64;
    for (int i = words_ - 1; i >= ws; --i) {
      uint64_t v = w[i - ws] << bs;
      if (bs != 0 && i - ws - 1 >= 0) v |= w[i - ws - 1] >> (64 - bs);
      w[i] |= v;
    }
  }
  // Any bit set in [a, b] (clamped)?
  bool any_bit(const uint64_t* w, int64_t a, int64_t b) const {
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
  bool position_ok(int b) const {
    const int64_t g = p_.gran;
    const int64_t at = cand_[b];
    for (int s = p_.s0[b]; s < p_.s1[b]; ++s) {
      if (!tight_[s]) continue;
      const int64_t rel = (at - lfloor_[s]);
      if (rel < 0) return false;
      const uint64_t* w = &pos_[static_cast<size_t>(s) * words_];
      if (!any_bit(w, (rel - slack_[s] + g - 1) / g, rel / g)) return false;
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

  // timed_out_ means "stopped early" (deadline or node limit); failures seen after it
  // are not proofs.
  bool out_of_time() {
    if ((++nodes_ & 63) == 0 && Clock::now() >= deadline_) timed_out_ = true;
    if (nodes_ > node_limit_) timed_out_ = hit_node_limit_ = true;
    return timed_out_;
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
      if (!ok && !timed_out_) cache_->insert(k1, k2);
      return ok;
    }
    return dfs_impl(comp, last, last_rank, depth);
  }

  bool dfs_impl(std::span<const int> comp, int64_t last, int last_rank, int depth) {
    if (out_of_time()) return false;
    const size_t mark = trail_.size();

    // Per-item bounds.
    int lo = std::numeric_limits<int>::max(), hi = 0;
    int64_t span_sum = 0;
    for (int b : comp) {
      const int64_t c = cand_[b];
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
    use_positions_ = false;
    if (opt_.section_inference && opt_.subset_sum && cap_ / p_.gran <= kMaxPositionUnits) {
      use_positions_ = true;
      const int64_t g = p_.gran;
      const int units = static_cast<int>(cap_ / g);
      words_ = units / 64 + 1;
      if (pos_.size() < static_cast<size_t>(p_.num_sections) * words_) {
        pos_.resize(static_cast<size_t>(p_.num_sections) * words_);
      }
      for (int s = lo; s < hi; ++s) {
        tight_[s] = slack_[s] != kInf && slack_[s] * 8 <= cap_;
        if (!tight_[s]) continue;
        uint64_t* w = &pos_[static_cast<size_t>(s) * words_];
        std::fill(w, w + words_, 0);
        w[0] = 1;
      }
      for (int b : comp) {
        const int shift = static_cast<int>(p_.size[b] / g);
        for (int s = p_.s0[b]; s < p_.s1[b]; ++s) {
          if (tight_[s]) shift_or(&pos_[static_cast<size_t>(s) * words_], shift);
        }
      }
    }

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
      if (!open_[b]) continue;  // blocked
      if (opt_.symmetry && p_.sym_prev[b] >= 0 && !placed_[p_.sym_prev[b]]) continue;
      if (use_positions_ && !position_ok(b)) continue;
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
      if (timed_out_) return false;
    }
    return false;
  }

  const Prepared& p_;
  const ExactOptions& opt_;
  const int64_t cap_;
  const Clock::time_point deadline_;
  std::vector<int64_t> cand_, eff_, offset_;
  std::vector<char> placed_, open_;
  std::vector<int> unplaced_deg_;
  std::vector<Placement> trail_;
  std::vector<std::pair<int, int64_t>> cand_trail_;
  std::vector<Scratch> scratch_;
  std::vector<int64_t> lfloor_, usum_, slack_;
  std::vector<int> paint_;
  static constexpr int64_t kMaxPositionUnits = 8192;
  bool use_positions_ = false;
  int words_ = 0;
  std::vector<uint64_t> pos_;
  std::vector<char> tight_;
  std::vector<std::pair<size_t, size_t>> parts_;
  const int64_t node_limit_;
  FailCache* const cache_;
  const uint64_t salt_;
  int64_t nodes_ = 0;
  uint64_t h1_ = 0, h2_ = 0;
  bool hit_node_limit_ = false;
  bool timed_out_ = false;
};

// Runs fn on a thread with at least `stack_bytes` of stack when the default might not
// do (deep recursion on big problems); otherwise inline.
void run_with_stack(size_t stack_bytes, const std::function<void()>& fn) {
  constexpr size_t kInline = size_t{4} << 20;
  if (stack_bytes <= kInline) {
    fn();
    return;
  }
  pthread_attr_t attr;
  pthread_t thread;
  bool started = false;
  if (pthread_attr_init(&attr) == 0) {
    if (pthread_attr_setstacksize(&attr, stack_bytes) == 0) {
      auto trampoline = [](void* arg) -> void* {
        (*static_cast<const std::function<void()>*>(arg))();
        return nullptr;
      };
      started = pthread_create(&thread, &attr, trampoline,
                               const_cast<std::function<void()>*>(&fn)) == 0;
    }
    pthread_attr_destroy(&attr);
  }
  if (started) {
    pthread_join(thread, nullptr);
  } else {
    fn();
  }
}

// Feasibility at `capacity`: restarts over the preference orders with geometrically
// growing node limits (search times are heavy-tailed in the order), each ordering
// keeping its own failure cache. A run that ends within its limit is a proof either
// way, so the loop is complete.
Outcome search_capacity(Prepared& p, const ExactOptions& opt, int64_t capacity,
                        Clock::time_point deadline, std::vector<int64_t>* offsets,
                        int64_t* nodes) {
  if (!p.adj_ok) return Outcome::kTimeout;  // too many conflicts to search
  Outcome out = Outcome::kTimeout;
  // Frames are small; 2 levels per item, ~1 KiB per level with sanitizer headroom.
  const size_t stack = (size_t{2} << 20) + static_cast<size_t>(p.n()) * 2 * 1024;
  run_with_stack(stack, [&] {
    FailCache cache;
    const int orderings = opt.restarts ? kNumOrderings : 1;
    int64_t limit = opt.restarts ? 2000 + 20 * static_cast<int64_t>(p.n()) : INT64_MAX;
    for (int round = 0;; ++round) {
      for (int o = 0; o < orderings; ++o) {
        // Odd rounds jitter the order (with a throw-away cache); even rounds reuse the
        // plain orders and their failures from earlier rounds.
        const uint64_t seed = round % 2 == 1 ? mix64(round * 131 + o) : 0;
        apply_ordering(p, o, seed);
        FailCache scratch_cache;
        FailCache* use = !opt.failure_cache ? nullptr : seed == 0 ? &cache : &scratch_cache;
        Search search(p, opt, capacity, deadline, limit, use, mix64(o + 1));
        out = search.run(offsets);
        *nodes += search.nodes();
        if (out != Outcome::kNodeLimit) return;
      }
      limit = limit > INT64_MAX / 4 ? INT64_MAX : limit * 2;
    }
  });
  return out;
}

MemoryPlan to_plan(const Problem& problem, const Prepared& p,
                   const std::vector<int64_t>& item_offsets) {
  MemoryPlan plan;
  plan.offsets.assign(problem.buffers.size(), 0);
  for (int i = 0; i < p.n(); ++i) {
    plan.offsets[p.orig[i]] = item_offsets[i];
    plan.arena_bytes = std::max(plan.arena_bytes, item_offsets[i] + p.size[i]);
  }
  return plan;
}

class ExactStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "exact"; }
  Result<PlanResult> plan(const Problem& problem, const PlanOptions& options) const override {
    return plan_exact(problem, options);
  }
};

}  // namespace

Result<PlanResult> plan_exact(const Problem& problem, const PlanOptions& options,
                              const ExactOptions& exact_options, ExactStats* stats) {
  const Clock::time_point t0 = Clock::now();
  CARVE_RETURN_IF_ERROR(check_problem(problem));
  if (options.capacity && *options.capacity < 0) {
    return Status(ErrorCode::kInvalidArgument,
                  "exact: capacity " + std::to_string(*options.capacity) + " < 0");
  }
  const double limit = std::max(0.0, options.time_limit_seconds);
  const Clock::time_point deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
               std::min(limit, 1e9)));
  ExactStats local;
  ExactStats& st = stats ? *stats : local;
  st = ExactStats{};

  Prepared p = prepare(problem);
  apply_ordering(p, 0, 0);
  st.lower_bound = p.lower_bound;
  int64_t greedy_arena = 0;
  std::vector<int64_t> best = best_greedy(p, &greedy_arena);
  st.greedy_arena = greedy_arena;
  int64_t best_arena = greedy_arena;

  PlanResult result;
  result.strategy = "exact";
  auto finish = [&](const std::vector<int64_t>& offs, bool optimal) -> Result<PlanResult> {
    result.plan = to_plan(problem, p, offs);
    result.optimal = optimal || result.plan.arena_bytes == p.lower_bound;
    result.plan_seconds = seconds_since(t0);
    return result;
  };

  if (options.capacity) {
    const int64_t cap = *options.capacity;
    if (p.lower_bound > cap) {
      return Status(ErrorCode::kInfeasible,
                    "exact: " + std::to_string(p.lower_bound) +
                        " bytes are live at one step, more than capacity " +
                        std::to_string(cap));
    }
    if (exact_options.greedy_first && greedy_arena <= cap) return finish(best, false);
    std::vector<int64_t> offs;
    ++st.probes;
    switch (search_capacity(p, exact_options, cap, deadline, &offs, &st.nodes)) {
      case Outcome::kFound:
        return finish(offs, false);
      case Outcome::kInfeasible:
        return Status(ErrorCode::kInfeasible,
                      "exact: proved no plan fits in capacity " + std::to_string(cap) +
                          " (lower bound " + std::to_string(p.lower_bound) + ")");
      case Outcome::kTimeout:
      case Outcome::kNodeLimit:
        break;
    }
    return Status(ErrorCode::kTimeout, "exact: no plan within capacity " +
                                           std::to_string(cap) + " found in " +
                                           std::to_string(limit) + " s");
  }

  // Minimise: probe the lower bound first, then bisect (lo, best).
  int64_t lo = p.lower_bound;  // smallest arena not yet ruled out
  bool proven = true;
  bool first = true;
  while (lo < best_arena) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      proven = false;
      break;
    }
    const int64_t probe = first ? lo : lo + (best_arena - 1 - lo) / 2;
    first = false;
    // Leave time for later probes unless this is the last one.
    const double slice = probe == best_arena - 1 ? left : left / 2;
    const Clock::time_point probe_deadline =
        std::min(deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(slice)));
    std::vector<int64_t> offs;
    ++st.probes;
    const Outcome out = search_capacity(p, exact_options, probe, probe_deadline, &offs,
                                        &st.nodes);
    if (out == Outcome::kFound) {
      best = std::move(offs);
      best_arena = 0;
      for (int i = 0; i < p.n(); ++i) best_arena = std::max(best_arena, best[i] + p.size[i]);
    } else {
      if (out == Outcome::kTimeout) proven = false;
      lo = probe + 1;
    }
  }
  return finish(best, proven && lo >= best_arena);
}

std::unique_ptr<Strategy> make_exact_strategy() { return std::make_unique<ExactStrategy>(); }

}  // namespace carve::planner
