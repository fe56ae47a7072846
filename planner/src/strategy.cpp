// strategy_names / make_strategy: the registry of planning strategies.
#include "carve/planner/strategy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "carve/planner/exact.h"
#include "carve/planner/heuristics.h"

namespace carve::planner {

std::vector<std::string> strategy_names() {
  return {"naive", "greedy-size", "greedy-breadth", "greedy-xla", "online", "exact", "best"};
}

Result<PlanResult> Strategy::plan(const Problem& problem, const PlanOptions& options) const {
  return no_exceptions(fmt::format("planner strategy '{}'", name()), [&] { return plan_impl(problem, options); });
}

Result<std::unique_ptr<Strategy>> make_strategy(std::string_view name) {
  if (name == "naive") return make_naive_strategy();
  if (name == "greedy-size") return make_greedy_size_strategy();
  if (name == "greedy-breadth") return make_greedy_breadth_strategy();
  if (name == "greedy-xla") return make_greedy_xla_strategy();
  if (name == "online") return make_online_strategy();
  if (name == "exact") return make_exact_strategy();
  if (name == "best") return make_best_strategy();
  return Status(ErrorCode::kNotFound, fmt::format("unknown planner strategy '{}'; valid: {}", name,
                                                  fmt::join(strategy_names(), ", ")));
}

}  // namespace carve::planner
