// Pluggable planning strategies (a small interface, after TFLite Micro's planner):
// a strategy takes a Problem and returns a MemoryPlan. Strategies are stateless
// between calls; one instance may be used from one thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "carve/planner/problem.h"

namespace carve::planner {

struct PlanOptions {
  // exact: find a plan with arena <= capacity (feasibility); unset = minimise.
  std::optional<int64_t> capacity;
  // exact (and best): stop searching after this many seconds, returning the best plan found.
  double time_limit_seconds = 10.0;
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
  // plan fits (exact proved it), kTimeout when the limit passed before any plan within capacity.
  virtual Result<PlanResult> plan(const Problem& problem, const PlanOptions& options) const = 0;
};

// Names: naive, greedy-size, greedy-breadth, greedy-xla, online, exact, best.
std::vector<std::string> strategy_names();
Result<std::unique_ptr<Strategy>> make_strategy(std::string_view name);

}  // namespace carve::planner
