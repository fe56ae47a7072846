#include "cli/plan_command.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "carve/file.h"
#include "carve/planner/csv.h"
#include "carve/planner/parallel_safe.h"
#include "carve/planner/strategy.h"
#include "carve/planner/svg.h"
#include "cli/plan_input.h"

namespace carve::cli {
namespace {

struct Row {
  planner::PlanResult result;
  Status valid;  // from the validator
};

std::vector<std::string> chosen_strategies(const std::string& name) {
  if (name != "all") return {name};
  return planner::strategy_names();
}

nlohmann::json to_json(const PlannedInput& input, int64_t lower_bound, const std::vector<Row>& rows) {
  nlohmann::json j;
  j["input"] = input.source;
  j["lower_bound_bytes"] = lower_bound;
  j["buffers"] = input.problem.buffers.size();
  for (const auto& [key, value] : input.facts) j["input_facts"][key] = value;
  j["results"] = nlohmann::json::array();
  for (const auto& row : rows) {
    const auto& r = row.result;
    j["results"].push_back({{"strategy", r.strategy},
                            {"arena_bytes", r.plan.arena_bytes},
                            {"ratio_to_lower_bound",
                             lower_bound > 0 ? double(r.plan.arena_bytes) / double(lower_bound) : 1.0},
                            {"valid", row.valid.ok()},
                            {"validation_error", row.valid.ok() ? "" : row.valid.message()},
                            {"optimal", r.optimal},
                            {"plan_seconds", r.plan_seconds}});
  }
  return j;
}

using PlanClock = planner::PlanOptions::Clock;

// --time-limit bounds the whole command, reading to written output: planning must stop
// early enough to validate and write, and a strategy notices its deadline only at its
// next clock read (a search node on a big problem takes milliseconds, more on a loaded
// machine). The tail grows with the buffers (validation, JSON, CSV, SVG: about a
// microsecond per buffer on a quiet machine) and with the machine's load, which reading
// the input has just measured (the tail is also linear in the input): reserve the larger
// of 2 us per buffer and the reading time, plus 3% of the limit, at most half the limit.
PlanClock::time_point planning_ends(PlanClock::time_point start, double limit_seconds, size_t buffers) {
  if (!(limit_seconds >= 0) || limit_seconds >= 1e9) return PlanClock::time_point::max();
  const double reading = std::chrono::duration<double>(PlanClock::now() - start).count();
  const double reserve = std::min(
      limit_seconds / 2, std::max(2e-6 * static_cast<double>(buffers), reading) + 0.03 * limit_seconds);
  return start + std::chrono::duration_cast<PlanClock::duration>(
                     std::chrono::duration<double>(limit_seconds - reserve));
}

// With `all` the strategies share the limit: each may use the time left divided by the
// strategies still to run (the heuristics take milliseconds and pass theirs on).
PlanClock::time_point share_of(PlanClock::time_point end, size_t strategies_left) {
  const PlanClock::time_point now = PlanClock::now();
  if (end == PlanClock::time_point::max() || now >= end) return end;
  return now + (end - now) / static_cast<PlanClock::rep>(strategies_left);
}

}  // namespace

int run_plan_command(const PlanCommandOptions& options, std::ostream& out, std::ostream& err) {
  const PlanClock::time_point start = PlanClock::now();
  auto input = load_plan_input(options);
  if (!input.ok()) {
    fmt::print(err, "carve plan: {}\n", input.status().to_string());
    return 1;
  }
  const planner::Problem& problem = input->problem;
  const int64_t lower_bound = planner::lower_bound_bytes(problem);
  for (const auto& line : input->notes) fmt::print(out, "{}\n", line);
  // lower_bound_bytes saturates: live bytes beyond int64 mean no plan can exist.
  const std::string bound = lower_bound == std::numeric_limits<int64_t>::max()
                                ? std::string("over 2^63 bytes (no plan can exist)")
                                : fmt::format("{} bytes", lower_bound);
  fmt::print(out, "{}: {} buffers, lower bound {}\n", input->source, problem.buffers.size(), bound);

  planner::PlanOptions plan_options;
  plan_options.capacity = options.capacity;
  plan_options.time_limit_seconds = options.time_limit_seconds;
  const PlanClock::time_point end = planning_ends(start, options.time_limit_seconds, problem.buffers.size());

  std::vector<Row> rows;
  bool failed = false;
  fmt::print(out, "{:<22} {:>14} {:>9} {:>8} {:>6} {:>11}\n", "strategy", "arena_bytes", "ratio_lb", "optimal",
             "valid", "plan_s");
  const std::vector<std::string> names = chosen_strategies(options.strategy);
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string& name = names[k];
    // Past the planning deadline a strategy could only stack its buffers, and sorting,
    // indexing and validating that still take about a second each at 1M buffers (`all`
    // ran 21 s with --time-limit 10): once a plan is in hand, skip the rest.
    if (!rows.empty() && PlanClock::now() >= end) {
      fmt::print(out, "{:<22} skipped: the time limit was reached\n", name);
      continue;
    }
    plan_options.deadline = share_of(end, names.size() - k);
    auto strategy = planner::make_strategy(name);
    if (!strategy.ok()) {
      fmt::print(err, "carve plan: {}\n", strategy.status().to_string());
      return 2;
    }
    auto result = (*strategy)->plan(problem, plan_options);
    if (!result.ok()) {
      fmt::print(out, "{:<22} {}\n", name, result.status().to_string());
      failed = true;
      continue;
    }
    Status valid = planner::validate_plan(problem, result->plan);
    const double ratio = lower_bound > 0 ? double(result->plan.arena_bytes) / double(lower_bound) : 1.0;
    fmt::print(out, "{:<22} {:>14} {:>9.4f} {:>8} {:>6} {:>11.6f}\n", result->strategy, result->plan.arena_bytes,
               ratio, result->optimal ? "yes" : "no", valid.ok() ? "yes" : "NO", result->plan_seconds);
    if (!valid.ok()) {
      fmt::print(err, "carve plan: {} produced an invalid plan: {}\n", result->strategy, valid.message());
      failed = true;
    }
    if (options.capacity && result->plan.arena_bytes > *options.capacity) failed = true;
    rows.push_back({std::move(*result), valid});
  }

  if (input->parallel_safe) {
    // Plain plans may make unordered buffers share bytes; count what that serialises.
    for (const auto& row : rows)
      fmt::print(out, "{:<22} serialises {} of {} unordered pairs\n", row.result.strategy,
                 planner::count_sharing_pairs(problem, row.result.plan, input->unordered_pairs),
                 input->unordered_pairs.size());
    const auto start = std::chrono::steady_clock::now();
    auto safe = planner::plan_with_conflicts(problem, input->unordered_pairs);
    if (!safe.ok()) {
      fmt::print(err, "carve plan: {}\n", safe.status().to_string());
      return 1;
    }
    planner::PlanResult result{"parallel-safe", std::move(*safe), false,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
    result.optimal = result.plan.arena_bytes == lower_bound;
    Status valid = planner::validate_with_conflicts(problem, result.plan, input->unordered_pairs);
    fmt::print(out, "{:<22} {:>14} {:>9.4f} {:>8} {:>6} {:>11.6f}\n", result.strategy, result.plan.arena_bytes,
               lower_bound > 0 ? double(result.plan.arena_bytes) / double(lower_bound) : 1.0,
               result.optimal ? "yes" : "no", valid.ok() ? "yes" : "NO", result.plan_seconds);
    if (!valid.ok()) failed = true;
    rows.push_back({std::move(result), valid});
  }

  // The smallest valid plan is the one written as CSV/SVG.
  const Row* best = nullptr;
  for (const auto& row : rows)
    if (row.valid.ok() && (!best || row.result.plan.arena_bytes < best->result.plan.arena_bytes)) best = &row;

  if (!options.json_path.empty()) {
    Status s = write_file(options.json_path, to_json(*input, lower_bound, rows).dump(2) + "\n");
    if (!s.ok()) { fmt::print(err, "carve plan: {}\n", s.to_string()); return 1; }
  }
  if ((!options.csv_path.empty() || !options.svg_path.empty()) && !best) {
    fmt::print(err, "carve plan: no valid plan to write\n");
    return 1;
  }
  if (!options.csv_path.empty()) {
    Status s = planner::write_minimalloc_csv_file(options.csv_path, problem, best->result.plan);
    if (!s.ok()) { fmt::print(err, "carve plan: {}\n", s.to_string()); return 1; }
  }
  if (!options.svg_path.empty()) {
    Status s = write_file(options.svg_path, planner::plan_to_svg(problem, best->result.plan, lower_bound));
    if (!s.ok()) { fmt::print(err, "carve plan: {}\n", s.to_string()); return 1; }
  }
  return failed ? 1 : 0;
}

}  // namespace carve::cli
