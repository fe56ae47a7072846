// The `exact` strategy: a complete search for buffer offsets in the spirit of
// MiniMalloc (Moffitt, ASPLOS 2023); implemented in planner/src/exact*.cpp.
//
// With PlanOptions::capacity = C it decides whether a plan with arena <= C exists:
// it returns one, kInfeasible when the search finished and proved none exists, or
// kTimeout when time_limit_seconds passed first. Without a capacity it minimises the
// arena (greedy upper bound, then feasibility probes between the lower bound and the
// best plan so far) and always returns the best plan found; `optimal` is true iff the
// arena equals the lower bound or the probes proved that nothing smaller fits.
//
// Search (see planner/src/exact.cpp): a portfolio of two complete searches -- branching
// on what starts at the lowest free point of a time section (with an explicit "left
// empty" branch), and canonical placements in (offset, rank) order -- with restarts over
// static orders (a short first round, then growing node limits), run separately on each
// independent part of the problem; cross-section inference, dynamic decomposition at cut
// points, symmetry breaking for identical buffers, dominance (no gap that an unplaced
// buffer could drop into; a buffer nothing else can use the space of goes first) and
// failure caches. Stateless between calls; thread-compatible.
//
// Time limit (PlanOptions): a plan always exists first -- the greedy upper bound (three
// orders on the heuristics' best-fit engine, each with a share of the time) -- then the
// conflict graph (O(n + overlapping pairs); abandoned when time runs out, and then no
// search runs), then the probes. The search reads the clock every 64 nodes, every node
// above 4096 buffers (nodes there take milliseconds). The result is the best plan held
// when the deadline passes.
#pragma once

#include <cstdint>
#include <memory>

#include "carve/planner/strategy.h"
#include "carve/status.h"

namespace carve::planner {

// Knobs for experiments and tests; the defaults are what `exact` uses.
struct ExactOptions {
  bool floor_search = true;       // lowest-free-point branching (exact_floor_search.cpp)
  bool offset_search = true;      // with floor_search: also (offset, rank)-order runs
  bool section_inference = true;  // cross-section pruning with unallocated floors
  bool decompose = true;          // split into independent parts at cut points
  bool symmetry = true;           // identical buffers are placed in a fixed order
  bool subset_sum = true;         // candidate offsets must be reachable stack positions
  bool dominance = true;          // stop branching after a buffer nothing can go under
  bool greedy_first = true;       // with a capacity, accept a greedy plan that fits
  bool restarts = true;           // restart over several branching orders, growing limits
  bool failure_cache = true;      // remember failed search states (by 128-bit hash)
};

// Counters from the last plan_exact call (optional out-parameter).
struct ExactStats {
  int64_t nodes = 0;          // search nodes over all probes
  int probes = 0;             // feasibility searches run
  int64_t greedy_arena = 0;   // best greedy upper bound
  int64_t lower_bound = 0;    // max bytes live at one step
};

std::unique_ptr<Strategy> make_exact_strategy();

// The same search with explicit knobs; `stats` may be null.
Result<PlanResult> plan_exact(const Problem& problem, const PlanOptions& options,
                              const ExactOptions& exact_options = {},
                              ExactStats* stats = nullptr);

}  // namespace carve::planner
