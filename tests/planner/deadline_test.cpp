// PlanOptions time limits, tested with an injected clock (no timing assertions): every
// strategy must return a valid plan whenever its deadline passes.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <chrono>
#include <memory>
#include <string>

#include "../../planner/src/plan_common.h"
#include "carve/planner/exact.h"
#include "carve/planner/strategy.h"
#include "planner_test_util.h"

using namespace carve;
using namespace carve::planner;
using carve::planner::testing::buf;

namespace {

using Clock = PlanOptions::Clock;

// A clock that reads time zero `reads_before_expiry` (>= 1: the first read is the start)
// times, then an hour later: with a 1-second limit the deadline passes exactly at that
// read. Counts its reads.
struct FakeClock {
  std::shared_ptr<int> reads = std::make_shared<int>(0);
  int reads_before_expiry = 0;
  std::function<Clock::time_point()> fn() const {
    return [reads = reads, n = reads_before_expiry] {
      return (*reads)++ < n ? Clock::time_point{} : Clock::time_point{} + std::chrono::hours(1);
    };
  }
};

PlanOptions expiring_after(const FakeClock& clock) {
  PlanOptions options;
  options.time_limit_seconds = 1.0;
  options.clock = clock.fn();
  return options;
}

// n buffers of 100 bytes, each live in its own step: best fit reuses offset 0 for all.
Problem disjoint_in_time(int n) {
  Problem p;
  for (int i = 0; i < n; ++i) p.buffers.push_back(buf("b" + std::to_string(i), i, i + 1, 100));
  return p;
}

}  // namespace

TEST_CASE("planner/deadline/best_fit_stacks_the_rest_once_time_is_up") {
  const Problem p = disjoint_in_time(1000);
  std::vector<int32_t> order(1000);
  for (int i = 0; i < 1000; ++i) order[i] = i;
  // Reads: 1 for the start, 1 at placement 0, 1 at placement 256 -> expired there.
  FakeClock clock{.reads_before_expiry = 2};
  const auto deadline = detail::Deadline::from(expiring_after(clock));
  const auto offsets = detail::place_best_fit(p, order, detail::FitRule::kTflite, deadline);
  // 256 buffers share offset 0; the other 744 are stacked above them.
  CHECK(offsets[255] == 0);
  CHECK(offsets[256] == 100);
  CHECK(offsets[999] == 100 * 744);
  CHECK(validate_plan(p, MemoryPlan{100 * 745, offsets}).ok());
  CHECK(*clock.reads == 3);
}

TEST_CASE("planner/deadline/no_limit_keeps_placing") {
  const Problem p = disjoint_in_time(1000);
  PlanOptions options;
  options.time_limit_seconds = std::numeric_limits<double>::infinity();
  auto r = (*make_strategy("greedy-size"))->plan(p, options);
  REQUIRE(r.ok());
  CHECK(r->plan.arena_bytes == 100);
}

TEST_CASE("planner/deadline/absolute_deadline_wins_when_earlier") {
  FakeClock clock{.reads_before_expiry = 1000000};  // the clock itself never expires
  PlanOptions options = expiring_after(clock);
  options.deadline = Clock::time_point{};  // already reached at time zero
  CHECK(detail::Deadline::from(options).passed());
  options.deadline = Clock::time_point{} + std::chrono::seconds(5);
  CHECK_FALSE(detail::Deadline::from(options).passed());
}

TEST_CASE("planner/deadline/every_strategy_returns_a_valid_plan_when_time_is_up") {
  const Problem p = disjoint_in_time(600);
  for (const std::string& name : strategy_names()) {
    INFO(name);
    FakeClock clock{.reads_before_expiry = 1};  // expired at the first check
    auto r = (*make_strategy(name))->plan(p, expiring_after(clock));
    REQUIRE(r.ok());
    CHECK(validate_plan(p, r->plan).ok());
    if (name != "naive") CHECK(*clock.reads >= 2);  // looked at the clock (naive is O(n))
  }
}

TEST_CASE("planner/deadline/best_keeps_its_first_plan_once_time_is_up") {
  // Reads: best's start, greedy-breadth's start and its placement 0 (fewer than 256
  // placements: no more), then best's check before greedy-size -> expired there. best
  // must return greedy-breadth's full plan and run nothing else: each heuristic it
  // started would read the clock at least twice more.
  const Problem p = disjoint_in_time(100);
  FakeClock clock{.reads_before_expiry = 3};
  auto r = (*make_strategy("best"))->plan(p, expiring_after(clock));
  REQUIRE(r.ok());
  CHECK(r->strategy == "best(greedy-breadth)");
  CHECK(r->plan.arena_bytes == 100);
  CHECK(*clock.reads <= 6);
}

TEST_CASE("planner/deadline/exact_stops_without_proof") {
  // The paper example's optimum (124) is above its lower bound, so only a finished search
  // proves it; stopped at once, exact returns its greedy plan unproven.
  const Problem p = testing::paper_example();
  FakeClock clock{.reads_before_expiry = 1};
  auto r = plan_exact(p, expiring_after(clock));
  REQUIRE(r.ok());
  CHECK(validate_plan(p, r->plan).ok());
  CHECK_FALSE(r->optimal);
  auto full = plan_exact(p, {});
  REQUIRE(full.ok());
  CHECK(full->optimal);
}

TEST_CASE("planner/property/every_strategy_is_valid_under_any_deadline") {
  for (const std::string& name : strategy_names()) {
    CHECK(rc::check(name + " returns a valid plan whenever the deadline passes", [name] {
      const Problem p = *testing::gen_problem(60);
      FakeClock clock{.reads_before_expiry = *rc::gen::inRange(1, 40)};
      auto r = (*make_strategy(name))->plan(p, expiring_after(clock));
      RC_ASSERT(r.ok());
      RC_ASSERT(validate_plan(p, r->plan).ok());
    }));
  }
}

TEST_CASE("planner/property/huge_sizes_give_a_valid_plan_or_a_status") {
  // Sizes and alignments near int64's limit: every strategy either rejects the problem
  // (offsets could overflow) or returns a valid plan; nothing crashes or wraps (UBSan).
  for (const std::string& name : strategy_names()) {
    CHECK(rc::check(name + " on huge sizes", [name] {
      Problem p;
      const int n = *rc::gen::inRange(1, 7);
      for (int i = 0; i < n; ++i) {
        const int64_t start = *rc::gen::inRange<int64_t>(0, 12);
        const int64_t len = *rc::gen::inRange<int64_t>(1, 12);
        const int shift = *rc::gen::element(0, 20, 40, 58, 59, 60, 61, 62);
        const int64_t size = (int64_t{1} << shift) + *rc::gen::inRange<int64_t>(0, 3);
        const int64_t align = *rc::gen::element<int64_t>(1, 3, 64, int64_t{1} << 40);
        p.buffers.push_back(buf("b" + std::to_string(i), start, start + len, size, align));
      }
      PlanOptions options;
      options.time_limit_seconds = 2.0;
      auto r = (*make_strategy(name))->plan(p, options);
      if (!r.ok()) {
        RC_ASSERT(r.status().code() == ErrorCode::kInvalidArgument);
        return;
      }
      RC_ASSERT(validate_plan(p, r->plan).ok());
    }));
  }
}
