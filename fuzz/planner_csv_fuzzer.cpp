// libFuzzer target: MiniMalloc CSV parsing and every planning strategy. Any text must parse
// or fail with a Status; every plan a strategy returns must pass the independent validator
// and be no smaller than the lower bound; exact with capacity = lower bound must return a
// plan within it or kInfeasible/kTimeout. Sizes and alignments near INT64_MAX are in range.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "carve/planner/csv.h"
#include "carve/planner/problem.h"
#include "carve/planner/strategy.h"

namespace planner = carve::planner;

namespace {

[[noreturn]] void fail(const std::string& strategy, const std::string& what) {
  std::fprintf(stderr, "strategy '%s': %s\n", strategy.c_str(), what.c_str());
  std::abort();
}

void check(const planner::Problem& problem, const std::string& name, const planner::PlanOptions& options) {
  auto strategy = planner::make_strategy(name);
  if (!strategy.ok()) fail(name, strategy.status().to_string());
  auto result = (*strategy)->plan(problem, options);
  if (!result.ok()) {
    const auto code = result.status().code();
    // Refusals with a reason are fine (overflowing sizes, time ran out, capacity too small).
    if (code == carve::ErrorCode::kInternal) fail(name, result.status().to_string());
    return;
  }
  const carve::Status valid = planner::validate_plan(problem, result->plan);
  if (!valid.ok()) fail(name, "invalid plan: " + valid.to_string());
  if (result->plan.arena_bytes < planner::lower_bound_bytes(problem)) fail(name, "arena below the lower bound");
  if (options.capacity && result->plan.arena_bytes > *options.capacity) fail(name, "arena above the capacity");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto problem = planner::parse_minimalloc_csv(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!problem.ok() || problem->buffers.size() > 256) return 0;  // keep each input fast
  planner::PlanOptions options;
  options.time_limit_seconds = 0.05;
  for (const std::string& name : planner::strategy_names()) check(*problem, name, options);
  options.capacity = planner::lower_bound_bytes(*problem);
  check(*problem, "exact", options);
  return 0;
}
