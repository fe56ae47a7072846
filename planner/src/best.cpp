// best: a portfolio. Runs every heuristic (until the deadline), validates each plan with
// the independent validator, keeps the smallest (ties: the earlier in kPortfolio), and --
// when no heuristic reached the lower bound -- gives `exact` its share of the time left
// (heuristics.h). PlanResult::strategy names the winner: "best(greedy-breadth)".
#include <fmt/format.h>

#include <array>
#include <limits>
#include <optional>
#include <string>

#include "carve/planner/exact.h"
#include "carve/planner/heuristics.h"
#include "plan_common.h"

namespace carve::planner {

namespace {

// Strongest on training traces first (greedy-breadth: 1.0026 of the lower bound on IOPDDL
// S_1, greedy-size 1.0158), so a deadline that cuts the portfolio short keeps it.
constexpr std::array<std::unique_ptr<Strategy> (*)(), 5> kPortfolio = {
    &make_greedy_breadth_strategy, &make_greedy_size_strategy, &make_greedy_xla_strategy,
    &make_online_strategy,         &make_naive_strategy,
};

class BestStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "best"; }

  Result<PlanResult> plan_impl(const Problem& problem, const PlanOptions& options) const override {
    const detail::Clock::time_point t0 = detail::Clock::now();
    const detail::Deadline deadline = detail::Deadline::from(options);
    CARVE_RETURN_IF_ERROR(check_plannable_here(problem));
    const int64_t lb = lower_bound_bytes(problem);
    if (options.capacity && *options.capacity < lb) {
      return Status(ErrorCode::kInfeasible,
                    fmt::format("best: capacity {} is below the lower bound {} (proven infeasible)",
                                *options.capacity, lb));
    }

    std::optional<PlanResult> best;
    auto consider = [&](PlanResult r) {
      if (!validate_plan(problem, r.plan).ok()) return;  // a buggy strategy never wins
      if (!best || r.plan.arena_bytes < best->plan.arena_bytes) {
        best = std::move(r);
      } else if (r.optimal && r.plan.arena_bytes == best->plan.arena_bytes) {
        best->optimal = true;  // an exact proof that the incumbent's size is optimal
      }
    };
    // No capacity: we want the plan either way. The whole run shares one deadline.
    PlanOptions heuristic_options;
    heuristic_options.time_limit_seconds = std::numeric_limits<double>::infinity();
    heuristic_options.deadline = deadline.at();
    heuristic_options.clock = options.clock;
    for (auto make : kPortfolio) {
      // Past the deadline a heuristic would still sort, index and be validated (about a
      // second at 1M buffers each) only to stack its buffers: keep the plan we have.
      if (best && deadline.passed()) break;
      Result<PlanResult> r = make()->plan(problem, heuristic_options);
      if (r.ok()) consider(std::move(r).value());
    }
    if (!best) return Status(ErrorCode::kInternal, "best: no heuristic produced a valid plan");

    const bool fits = !options.capacity || best->plan.arena_bytes <= *options.capacity;
    const double remaining = deadline.seconds_left();
    const size_t nonempty = detail::nonempty_indices(problem).size();
    const bool try_exact = best->plan.arena_bytes > lb && remaining > 0 && !(options.capacity && fits);
    if (try_exact) {
      PlanOptions exact_options = options;
      exact_options.deadline = deadline.at();
      if (nonempty > kBestExactMaxBuffers) {
        // Big problems: a bounded improvement step, not a search to the end.
        const detail::Deadline share = deadline.share(kBestLargeExactShare);
        exact_options.time_limit_seconds = kBestLargeExactMaxSeconds;
        exact_options.deadline = share.at();
      }
      Result<PlanResult> r = make_exact_strategy()->plan(problem, exact_options);
      if (r.ok()) {
        consider(std::move(r).value());
      } else if (options.capacity) {
        return r.status().with_context("best (heuristics exceeded the capacity; exact)");
      }
    }
    if (options.capacity && best->plan.arena_bytes > *options.capacity) {
      return Status(ErrorCode::kInfeasible,
                    fmt::format("best: smallest arena found {} exceeds capacity {} (lower bound "
                                "{}; not a proof of infeasibility)",
                                best->plan.arena_bytes, *options.capacity, lb));
    }
    PlanResult out = std::move(*best);
    out.strategy = fmt::format("best({})", out.strategy);
    out.optimal = out.optimal || out.plan.arena_bytes == lb;
    out.plan_seconds = detail::seconds_since(t0);
    return out;
  }

 private:
  static Status check_plannable_here(const Problem& problem) {
    return detail::check_plannable(problem).with_context("best");
  }
};

}  // namespace

std::unique_ptr<Strategy> make_best_strategy() { return std::make_unique<BestStrategy>(); }

}  // namespace carve::planner
