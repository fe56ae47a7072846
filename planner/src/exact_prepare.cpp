// The `exact` strategy's preparation: items on section indices, conflict graph, static
// preference orders, and the greedy upper bound.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "exact_internal.h"

namespace carve::planner::exact_detail {
namespace {
// Beyond this many overlapping pairs the search is not attempted: building the graph
// alone took seconds on a 28.5k-buffer training trace (and ~1 GB) and the search could
// not use the time left; the greedy plan is returned then.
constexpr size_t kMaxConflictPairs = size_t{8} << 20;

}  // namespace

std::vector<int> items_by_start(const Prepared& p) {
  std::vector<int> items(static_cast<size_t>(p.n()));
  std::iota(items.begin(), items.end(), 0);
  std::sort(items.begin(), items.end(),
            [&](int a, int b) { return p.s0[a] != p.s0[b] ? p.s0[a] < p.s0[b] : a < b; });
  return items;
}

void build_conflicts(Prepared& p, const detail::Deadline& deadline) {
  // Conflict graph by a sweep over items sorted by start section.
  const int n = p.n();
  std::vector<int> by_start(n);
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](int a, int b) {
    return p.s0[a] != p.s0[b] ? p.s0[a] < p.s0[b] : a < b;
  });
  std::vector<std::vector<int>> nbrs(n);
  size_t pairs = 0;
  bool ok = true;
  for (int x = 0; x < n && ok; ++x) {
    // The graph costs the number of overlapping pairs: on big traces it may not be done
    // in time, and the searches could not use it then anyway.
    if (x % 64 == 0 && deadline.passed()) {
      ok = false;
      break;
    }
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
      if (i % 1024 == 0 && deadline.passed()) {
        p.adj_ok = false;
        p.adj.clear();
        p.adj_begin.clear();
        return;
      }
      std::sort(nbrs[i].begin(), nbrs[i].end(), [&](int a, int b) {
        return p.size[a] != p.size[b] ? p.size[a] < p.size[b] : a < b;
      });
      p.adj.insert(p.adj.end(), nbrs[i].begin(), nbrs[i].end());
    }
  }

}

Prepared prepare(const Problem& problem, const detail::Deadline& deadline, bool conflicts) {
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

  if (conflicts) build_conflicts(p, deadline);
  // peak[i] = max section total over [s0, s1): a range-max segment tree, so that long
  // lifetimes on big traces cost O(log S) each instead of their length.
  const size_t sections = static_cast<size_t>(p.num_sections);
  std::vector<int64_t> tree(2 * sections, 0);
  for (size_t s = 0; s < sections; ++s) tree[sections + s] = p.section_total[s];
  for (size_t k = sections; k-- > 1;) tree[k] = std::max(tree[2 * k], tree[2 * k + 1]);
  p.peak.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    int64_t best = 0;
    for (size_t l = p.s0[i] + sections, r = p.s1[i] + sections; l < r; l >>= 1, r >>= 1) {
      if (l & 1) best = std::max(best, tree[l++]);
      if (r & 1) best = std::max(best, tree[--r]);
    }
    p.peak[i] = best;
  }
  return p;
}

std::vector<Part> split_parts(const Problem& problem, const Prepared& whole,
                              const detail::Deadline& deadline) {
  std::vector<int> by_start(whole.n());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](int a, int b) { return whole.s0[a] < whole.s0[b]; });
  // Nothing splits: the whole is the one part. Preparing it again would rebuild the
  // conflict graph, which on big traces takes seconds.
  bool splits = false;
  for (int x = 1, reach = whole.n() > 0 ? whole.s1[by_start[0]] : 0; x < whole.n() && !splits; ++x) {
    splits = whole.s0[by_start[x]] >= reach;
    reach = std::max(reach, whole.s1[by_start[x]]);
  }
  if (!splits) {
    std::vector<Part> one;
    if (whole.n() > 0) one.push_back(Part{whole, by_start});
    if (!one.empty()) std::sort(one[0].items.begin(), one[0].items.end());
    return one;
  }
  std::vector<Part> parts;
  std::vector<int64_t> fullest;
  int max_end = -1;
  for (size_t x = 0; x <= by_start.size(); ++x) {
    const bool cut = x == by_start.size() || (x > 0 && whole.s0[by_start[x]] >= max_end);
    if (cut && !parts.empty()) {
      // Items keep their relative order (it breaks ties in the preference orders).
      std::sort(parts.back().items.begin(), parts.back().items.end());
      Problem sub;
      for (int i : parts.back().items) sub.buffers.push_back(problem.buffers[whole.orig[i]]);
      parts.back().p = prepare(sub, deadline);  // every item has size > 0: part item k = buffer k
      fullest.push_back(parts.back().p.lower_bound);
    }
    if (x == by_start.size()) break;
    if (x == 0 || cut) parts.emplace_back();
    parts.back().items.push_back(by_start[x]);
    max_end = std::max(max_end, whole.s1[by_start[x]]);
  }
  std::vector<int> order(parts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return fullest[a] > fullest[b]; });
  std::vector<Part> sorted;
  sorted.reserve(parts.size());
  for (int k : order) sorted.push_back(std::move(parts[k]));
  return sorted;
}

// Static preference orders tried in turn by the restarts; keys compared descending:
// T = fullest section the item lives in, S = size, W = lifetime width, A = S * W.
constexpr const char* const kOrderings[] = {"TWA", "TAW", "LSTW", "ALS",
                                            "TLS", "WAT", "TSW", "SWT"};

static_assert(sizeof(kOrderings) / sizeof(kOrderings[0]) == kNumOrderings);

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
      default: {  // area, saturated: size x sections can exceed int64
        const __int128 area = static_cast<__int128>(p.size[a]) * (p.s1[a] - p.s0[a]);
        return area > INT64_MAX ? INT64_MAX : static_cast<int64_t>(area);
      }
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

// Greedy upper bound: the heuristics' best-fit engine (O(n log n), deadline-aware) over
// three orders -- the search's preference order first (fullest section, lifetime, area:
// on the real training traces it wins, IOPDDL S_1 1.0026 of the lower bound against 1.0158
// by size and 1.307 by area alone, and a short limit may leave time for one order only),
// then area (size x sections) and size.
std::vector<int64_t> best_greedy(const Prepared& p, const Problem& problem,
                                 const detail::Deadline& deadline, int64_t* arena) {
  const int n = p.n();
  std::vector<int> o(n);
  std::iota(o.begin(), o.end(), 0);
  std::vector<std::vector<int>> orders;
  orders.push_back(p.by_rank);
  std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return p.size[a] > p.size[b]; });
  std::vector<int> by_size = o;
  // 128-bit: size x sections can exceed int64. Ties keep the size order.
  auto area = [&](int i) { return static_cast<__int128>(p.size[i]) * (p.s1[i] - p.s0[i]); };
  std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return area(a) > area(b); });
  orders.push_back(o);
  orders.push_back(std::move(by_size));
  std::vector<int64_t> best;
  int64_t best_arena = kInf;
  std::vector<int32_t> buffers(n);
  for (size_t k = 0; k < orders.size(); ++k) {
    // The first order may use most of the time (it is the one that wins on real traces);
    // the others split what is left, so a short limit still yields a plan from each.
    const detail::Deadline share =
        deadline.share(k == 0 ? 0.8 : 1.0 / static_cast<double>(orders.size() - k));
    for (int j = 0; j < n; ++j) buffers[j] = p.orig[orders[k][j]];
    const std::vector<int64_t> by_buffer =
        detail::place_best_fit(problem, buffers, detail::FitRule::kTflite, share);
    std::vector<int64_t> off(n);
    int64_t a = 0;
    for (int i = 0; i < n; ++i) {
      off[i] = by_buffer[p.orig[i]];
      a = std::max(a, off[i] + p.size[i]);
    }
    if (best.empty() || a < best_arena) {  // not kInf alone: arenas may exceed it
      best_arena = a;
      best = std::move(off);
    }
  }
  *arena = n == 0 ? 0 : best_arena;
  return best;
}

}  // namespace carve::planner::exact_detail
