// Pluggable planning strategies (a small interface, after TFLite Micro's planner):
// a strategy takes a Problem and returns a MemoryPlan. Strategies are stateless
// between calls; one instance may be used from one thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "carve/planner/problem.h"

namespace carve::planner {

struct PlanOptions {
  using Clock = std::chrono::steady_clock;
  // exact: find a plan with arena <= capacity (feasibility); unset = minimise.
  std::optional<int64_t> capacity;
  // Every strategy returns its best valid plan within this many seconds of plan()'s start
  // (heuristics that run out of time stack the buffers they have not placed yet above
  // the others: valid, not good). Work that must precede any plan -- checking the input,
  // sorting, building the index, O(n log n) -- is not interruptible, so the promise
  // holds for limits above that (well under a second for a million buffers).
  double time_limit_seconds = 10.0;
  // An absolute stop time for callers whose clock started earlier (carve plan counts from
  // process start); the earlier of this and start + time_limit_seconds applies.
  std::optional<Clock::time_point> deadline;
  // The clock every time check reads; tests inject one. Null: Clock::now.
  std::function<Clock::time_point()> clock;
};

struct PlanResult {
  std::string strategy;
  MemoryPlan plan;
  bool optimal = false;      // proven: equals the lower bound, or the exact search finished
  double plan_seconds = 0.0; // wall time of plan()
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view name() const = 0;
  // Errors: invalid problem (check_problem), kInfeasible when a capacity is given and no
  // plan fits (exact proved it), kTimeout when the limit passed before any plan within
  // capacity, kOutOfMemory when memory ran out (no exception escapes).
  Result<PlanResult> plan(const Problem& problem, const PlanOptions& options) const;

 protected:
  // What each strategy implements; plan() calls it with exceptions turned into a Status.
  virtual Result<PlanResult> plan_impl(const Problem& problem, const PlanOptions& options) const = 0;
};

// Names: naive, greedy-size, greedy-breadth, greedy-xla, online, exact, best.
std::vector<std::string> strategy_names();
Result<std::unique_ptr<Strategy>> make_strategy(std::string_view name);

}  // namespace carve::planner
