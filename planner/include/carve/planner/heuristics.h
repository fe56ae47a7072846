// Factories for carve's heuristic strategies (make_strategy(name) returns the same objects).
//
// Shared behaviour of every heuristic:
//  - the problem is checked with check_problem (kInvalidArgument naming the buffer), and
//    rejected with kInvalidArgument when sum(size + alignment - 1) overflows int64;
//  - 0-byte buffers get offset 0 and take no space;
//  - offsets honour each buffer's alignment (any value >= 1, not only powers of two);
//  - arena_bytes = max(offset + size); optimal = (arena_bytes == lower_bound_bytes);
//  - PlanOptions time limit / deadline: read every 256 placements; once it has passed, the
//    buffers not placed yet are stacked above all placed ones (valid, not good), so a plan
//    comes back in time whenever the O(n log n) sorting and indexing fit in the limit;
//  - cost (n buffers, P <= n distinct start times), stated per strategy below. The
//    best-fit engine (greedy-size, greedy-breadth, greedy-xla) keeps the placed buffers'
//    byte ranges, merged, in a segment tree over time (planner/src/occupancy_tree.h). A
//    placement inserts into O(log P) merged lists (up to 8 per level for the lists kept
//    every 4th level) and reads k = O(log P) lists, each intersecting buffer in exactly
//    one of them; their F merged ranges are union-merged in O(F log k). F is about the
//    number of holes in the occupied space during the buffer's lifetime, and best fit
//    must look at every hole that fits, so F is the true per-placement cost: small on
//    dense plans (O(log^2 P)-ish), ~100-250 on hole-riddled ones (1M trace-like buffers
//    with thousands of live buffers per step), and O(n) in the worst case.
//  - PlanOptions::capacity: a heuristic cannot prove infeasibility, but a plan above the
//    capacity is not an answer either, so they return kInfeasible with a message saying
//    whether it is proven (capacity < lower bound) or only "the heuristic did not fit".
#pragma once

#include <memory>

#include "carve/planner/strategy.h"

namespace carve::planner {

// Bump allocation in input order, no reuse. The baseline. O(n); never reads the clock.
std::unique_ptr<Strategy> make_naive_strategy();
// TFLite arena rule: size descending (ties: earlier start, input order); best-fitting gap
// among the placed buffers that overlap in time, else on top of the highest of them.
// O(n log n) sort + n placements of the best-fit engine (above). Measured (CPU, loaded
// machine; docs/benchmarks.md): 85.6k real-shaped buffers in ~0.2 s, 1M trace-like in
// 7.4-8.2 s.
std::unique_ptr<Strategy> make_greedy_size_strategy();
// TFLite GPU "greedy by breadth", offset variant: steps by live bytes descending, and at
// each step its unplaced buffers longest-lived first (TFLite GPU: largest first), each
// by the best-fit rule (details in greedy_breadth.cpp). O(n log n) for the order
// (range-min segment tree) + the best-fit engine. On training traces this is the
// strongest heuristic: IOPDDL S_1 at 1.0026 of the lower bound (greedy-size 1.0158).
std::unique_ptr<Strategy> make_greedy_breadth_strategy();
// XLA heap simulator (GlobalDecreasingSizeBestFitHeap): best fit where the free space
// between the highest overlapping buffer and the current heap top also counts as a chunk;
// runs a size-major and a duration-major order and keeps the smaller arena. Twice the
// best-fit engine; under a time limit the first order gets half of it.
std::unique_ptr<Strategy> make_greedy_xla_strategy();
// ggml-alloc style online simulation in execution order: free list with best fit,
// adjacent free blocks merged, the arena grows when no free block fits. O(n log n)
// (ordered free lists by offset and by size).
std::unique_ptr<Strategy> make_online_strategy();
// Runs greedy-breadth, greedy-size, greedy-xla, online, naive (in that order; once the
// deadline has passed the rest are skipped), then -- when no heuristic reached the lower
// bound -- an improvement step with exact; keeps the smallest validated plan (ties: the
// earlier). PlanResult::strategy is "best(<winner>)"; optimal is also set when exact proved
// the winner's size optimal. Time shares (the whole run keeps time_limit_seconds): the
// heuristics run first (O(n log n) each, milliseconds to a few seconds at 1M buffers);
// exact gets all the time left on problems of at most kBestExactMaxBuffers non-empty
// buffers (Session::compile's graphs: the search often proves the optimum), and on bigger
// ones kBestLargeExactShare of it, at most kBestLargeExactMaxSeconds -- enough for its
// greedy orders (its preference order -- fullest section, lifetime, area -- then area and
// size) and what search fits. With a capacity: the smallest heuristic plan is returned if
// it fits; otherwise exact decides (its kInfeasible / kTimeout are passed on; without
// exact, kInfeasible "not a proof").
std::unique_ptr<Strategy> make_best_strategy();
inline constexpr size_t kBestExactMaxBuffers = 2000;
inline constexpr double kBestLargeExactShare = 0.5;
inline constexpr double kBestLargeExactMaxSeconds = 10.0;

}  // namespace carve::planner
