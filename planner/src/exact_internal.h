// Private to the `exact` strategy (planner/src/exact*.cpp): the prepared problem, the
// failure cache and the two complete searches.
//  exact_prepare.cpp        Prepared, static preference orders, greedy upper bound
//  exact_floor_search.cpp   the default search: lowest free point ("floor") branching
//  exact_offset_search.cpp  the previous search: canonical (offset, rank) sequences
//  exact.cpp                the strategy: restarts, capacity probes, minimisation
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "carve/planner/exact.h"
#include "carve/planner/problem.h"
#include "plan_common.h"

namespace carve::planner::exact_detail {

using Clock = std::chrono::steady_clock;
constexpr int64_t kNoLast = std::numeric_limits<int64_t>::min();
constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

inline int64_t align_up(int64_t x, int64_t a) {
  if (a <= 1) return x;
  const int64_t r = x % a;
  return r == 0 ? x : x + (a - r);
}

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
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

// Stops building the conflict graph once `deadline` passes (adj_ok = false then: the
// searches give up at once, the greedy upper bound does not need it).
Prepared prepare(const Problem& problem, const detail::Deadline& deadline,
                 bool conflicts = true);
// The conflict graph alone (prepare does it unless told not to).
void build_conflicts(Prepared& p, const detail::Deadline& deadline);

// An independent part of a prepared problem: items that share no time section with the
// rest (the items split where none spans a section boundary), prepared on their own.
struct Part {
  Prepared p;
  std::vector<int> items;  // part item -> item of the whole
};
// The parts of `whole` (prepared from `problem`), fullest section first; one part when
// nothing splits.
std::vector<Part> split_parts(const Problem& problem, const Prepared& whole,
                              const detail::Deadline& deadline);

// Number of static preference orders; apply_ordering(p, which, seed) sets rank /
// by_rank / sym_prev for order `which` (a nonzero seed jitters it).
constexpr int kNumOrderings = 8;
void apply_ordering(Prepared& p, int which, uint64_t seed);

// Best greedy best-fit plan over a few orders; *arena receives its arena.
std::vector<int64_t> best_greedy(const Prepared& p, const Problem& problem,
                                 const detail::Deadline& deadline, int64_t* arena);

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

enum class Outcome { kFound, kInfeasible, kTimeout, kNodeLimit };

struct SearchLimits {
  int64_t capacity = 0;
  const detail::Deadline* deadline = nullptr;  // outlives the search
  int64_t node_limit = 0;  // nodes before kNodeLimit
  // Nodes between clock reads (a power of two): nodes on big problems take milliseconds.
  int64_t clock_every = 64;
};

// Node and deadline accounting shared by both searches. stopped() means "stopped early"
// (deadline or node limit): failures seen after it are not proofs.
class SearchBudget {
 public:
  explicit SearchBudget(const SearchLimits& lim)
      : deadline_(lim.deadline), node_limit_(lim.node_limit), clock_mask_(lim.clock_every - 1) {}
  // Counts one node; true once stopped (the clock is read every clock_every nodes).
  bool spend() {
    if ((++nodes_ & clock_mask_) == 0 && deadline_->passed()) stopped_ = true;
    if (nodes_ > node_limit_) stopped_ = hit_node_limit_ = true;
    return stopped_;
  }
  bool stopped() const { return stopped_; }
  int64_t nodes() const { return nodes_; }
  // The outcome of a search that found no plan.
  Outcome failure() const {
    if (!stopped_) return Outcome::kInfeasible;
    return hit_node_limit_ ? Outcome::kNodeLimit : Outcome::kTimeout;
  }

 private:
  const detail::Deadline* deadline_;
  const int64_t node_limit_;
  const int64_t clock_mask_;
  int64_t nodes_ = 0;
  bool hit_node_limit_ = false;
  bool stopped_ = false;
};

// Every item, by start section (ties: index): the order both searches start from.
std::vector<int> items_by_start(const Prepared& p);

// Both searches: kFound fills *offsets (per item); kInfeasible is a proof; `cache` may
// be null; *nodes is increased by the nodes searched.
// Which section of lowest floor the floor search branches at (ties: leftmost):
enum class FloorTie {
  kLeftmost,
  kLeastSlack,     // least slack C - floor - unplaced bytes
  kFewestChoices,  // fewest branches (items that can start there, + "left empty")
};
Outcome floor_search(const Prepared& p, const ExactOptions& opt, const SearchLimits& lim,
                     FailCache* cache, FloorTie tie, std::vector<int64_t>* offsets,
                     int64_t* nodes);
Outcome offset_search(const Prepared& p, const ExactOptions& opt, const SearchLimits& lim,
                      FailCache* cache, uint64_t salt, std::vector<int64_t>* offsets,
                      int64_t* nodes);

}  // namespace carve::planner::exact_detail
