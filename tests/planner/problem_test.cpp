// check_problem, lower_bound_bytes and validate_plan.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <rapidcheck.h>

#include "carve/planner/problem.h"
#include "planner_test_util.h"

using namespace carve;
using namespace carve::planner;
using carve::planner::testing::buf;

namespace {

Problem two(BufferRequest a, BufferRequest b) { return Problem{{std::move(a), std::move(b)}}; }
MemoryPlan plan_of(int64_t arena, std::vector<int64_t> offsets) { return MemoryPlan{arena, std::move(offsets)}; }
bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("planner/problem/check_accepts_valid") {
  CHECK(check_problem(Problem{}).ok());
  CHECK(check_problem(two(buf("a", 0, 1, 0), buf("b", 0, 5, 7, 3))).ok());
}

TEST_CASE("planner/problem/check_rejects_bad_buffers") {
  Status s = check_problem(two(buf("a", 0, 1, 4), buf("neg", 0, 1, -1)));
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(s.message(), "neg"));
  s = check_problem(two(buf("a", 0, 1, 4), buf("al", 0, 1, 4, 0)));
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(s.message(), "al"));
  s = check_problem(two(buf("a", 0, 1, 4), buf("empty", 3, 3, 4)));
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(s.message(), "empty"));
  s = check_problem(two(buf("a", 0, 1, 4), buf("rev", 5, 2, 4)));
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  s = check_problem(two(buf("dup", 0, 1, 4), buf("dup", 2, 3, 4)));
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(s.message(), "duplicate"));
  CHECK(contains(s.message(), "dup"));
}

TEST_CASE("planner/property/check_finds_any_duplicate_id") {
  // Many ids (so the id table probes past collisions), then one id repeated at a random
  // later position: the check names both positions; without the repeat it passes.
  CHECK(rc::check("a repeated id is reported wherever it is", [] {
    const int n = *rc::gen::inRange(2, 3000);
    Problem p;
    for (int i = 0; i < n; ++i) p.buffers.push_back(buf(std::to_string(i * 7919 % 100003), i, i + 1, 4));
    RC_ASSERT(check_problem(p).ok());
    const int first = *rc::gen::inRange(0, n - 1);
    const int later = *rc::gen::inRange(first + 1, n);
    p.buffers[later].id = p.buffers[first].id;
    const Status s = check_problem(p);
    RC_ASSERT(s.code() == ErrorCode::kInvalidArgument);
    RC_ASSERT(contains(s.message(), fmt::format("'{}' (#{} and #{})", p.buffers[first].id, first, later)));
  }));
}

TEST_CASE("planner/lower_bound/hand_cases") {
  CHECK(lower_bound_bytes(Problem{}) == 0);
  CHECK(lower_bound_bytes(Problem{{buf("a", 0, 1, 0)}}) == 0);
  CHECK(lower_bound_bytes(Problem{{buf("a", 3, 9, 17)}}) == 17);
  // Touching half-open intervals never coexist.
  CHECK(lower_bound_bytes(two(buf("a", 0, 2, 10), buf("b", 2, 4, 20))) == 20);
  CHECK(lower_bound_bytes(two(buf("a", 0, 3, 10), buf("b", 2, 4, 20))) == 30);
  // Peak in the middle, not at any buffer's own start alone.
  Problem p{{buf("a", 0, 10, 5), buf("b", 1, 3, 7), buf("c", 2, 6, 11), buf("d", 3, 8, 13)}};
  CHECK(lower_bound_bytes(p) == 5 + 11 + 13);
  CHECK(lower_bound_bytes(testing::paper_example()) == 124);
  // Live bytes beyond int64 saturate instead of overflowing.
  CHECK(lower_bound_bytes(two(buf("a", 0, 2, INT64_MAX / 2 + 1), buf("b", 1, 3, INT64_MAX / 2 + 1))) ==
        INT64_MAX);
  // Negative times are fine.
  CHECK(lower_bound_bytes(two(buf("a", -5, -1, 3), buf("b", -2, 0, 4))) == 7);
}

TEST_CASE("planner/lower_bound/matches_brute_force") {
  CHECK(rc::check("sweep lower bound equals the max live bytes at any start", [] {
    const Problem p = *testing::gen_problem();
    RC_ASSERT(lower_bound_bytes(p) == testing::brute_force_lower_bound(p));
  }));
}

TEST_CASE("planner/validate/accepts_valid_plans") {
  const Problem p = two(buf("a", 0, 4, 8), buf("b", 2, 6, 8));
  CHECK(validate_plan(p, plan_of(16, {0, 8})).ok());
  CHECK(validate_plan(p, plan_of(16, {8, 0})).ok());
  CHECK(validate_plan(p, plan_of(100, {0, 50})).ok());  // a larger arena is allowed
  CHECK(validate_plan(Problem{}, plan_of(0, {})).ok());
}

TEST_CASE("planner/validate/rejects_overlap_by_one_byte") {
  const Problem p = two(buf("a", 0, 4, 8), buf("b", 2, 6, 8));
  const Status s = validate_plan(p, plan_of(16, {0, 7}));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "'a'"));
  CHECK(contains(s.message(), "'b'"));
  CHECK(contains(s.message(), "[0,4)"));
  CHECK(contains(s.message(), "[2,6)"));
  CHECK(contains(s.message(), "bytes [0,8)"));
  CHECK(contains(s.message(), "bytes [7,15)"));
  // Reverse: b below a, overlapping by one byte at b's top.
  CHECK_FALSE(validate_plan(p, plan_of(16, {7, 0})).ok());
  // Same offset.
  CHECK_FALSE(validate_plan(p, plan_of(16, {0, 0})).ok());
  // Containment: a small buffer inside a big one.
  const Problem q = two(buf("big", 0, 10, 100), buf("small", 3, 4, 1));
  CHECK_FALSE(validate_plan(q, plan_of(100, {0, 50})).ok());
}

TEST_CASE("planner/validate/rejects_overlap_hidden_behind_a_neighbour") {
  // c overlaps a, while b (between them in offset order) ended earlier.
  Problem p{{buf("a", 0, 10, 10), buf("b", 0, 2, 5), buf("c", 5, 8, 10)}};
  CHECK(validate_plan(p, plan_of(25, {0, 10, 15})).ok());
  CHECK_FALSE(validate_plan(p, plan_of(25, {0, 10, 5})).ok());
}

TEST_CASE("planner/validate/touching_intervals_do_not_conflict") {
  const Problem p = two(buf("a", 0, 2, 8), buf("b", 2, 4, 8));
  CHECK(validate_plan(p, plan_of(8, {0, 0})).ok());
  const Problem q = two(buf("a", 0, 3, 8), buf("b", 2, 4, 8));
  CHECK_FALSE(validate_plan(q, plan_of(8, {0, 0})).ok());
}

TEST_CASE("planner/validate/rejects_misaligned") {
  const Problem p{{buf("a", 0, 2, 8, 4), buf("b", 0, 2, 8, 3)}};
  CHECK(validate_plan(p, plan_of(20, {0, 9})).ok());
  Status s = validate_plan(p, plan_of(20, {2, 12}));
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(s.message(), "'a'"));
  CHECK(contains(s.message(), "alignment"));
  CHECK_FALSE(validate_plan(p, plan_of(20, {0, 10})).ok());
}

TEST_CASE("planner/validate/rejects_outside_arena") {
  const Problem p = two(buf("a", 0, 2, 8), buf("b", 3, 4, 8));
  Status s = validate_plan(p, plan_of(15, {0, 8}));
  CHECK(s.code() == ErrorCode::kOutOfBounds);
  CHECK(contains(s.message(), "'b'"));
  CHECK(validate_plan(p, plan_of(16, {0, 8})).ok());
  CHECK(validate_plan(p, plan_of(8, {0, 0})).ok());
  CHECK(validate_plan(p, plan_of(-1, {0, 0})).code() == ErrorCode::kOutOfBounds);
  CHECK(validate_plan(p, plan_of(8, {-8, 0})).code() == ErrorCode::kOutOfBounds);
  CHECK_FALSE(validate_plan(p, plan_of(INT64_MAX, {INT64_MAX - 2, 0})).ok());
}

TEST_CASE("planner/validate/rejects_wrong_offset_count_and_invalid_problem") {
  const Problem p = two(buf("a", 0, 2, 8), buf("b", 3, 4, 8));
  CHECK(validate_plan(p, plan_of(8, {0})).code() == ErrorCode::kInvalidArgument);
  const Problem bad = two(buf("a", 0, 2, 8), buf("a", 3, 4, 8));
  CHECK_FALSE(validate_plan(bad, plan_of(8, {0, 0})).ok());
}

TEST_CASE("planner/validate/zero_size_buffers_never_conflict") {
  const Problem p = two(buf("a", 0, 4, 8), buf("z", 0, 4, 0));
  CHECK(validate_plan(p, plan_of(8, {0, 4})).ok());
  CHECK(validate_plan(p, plan_of(8, {0, 8})).ok());
  CHECK_FALSE(validate_plan(p, plan_of(8, {0, 9})).ok());  // still inside the arena
}

TEST_CASE("planner/validate/agrees_with_all_pairs_check") {
  CHECK(rc::check("sweep validator == O(n^2) reference on random plans", [] {
    const Problem p = *testing::gen_problem(25);
    std::vector<int64_t> offsets;
    for (const auto& b : p.buffers) {
      // Small offset range so that conflicts are common; multiples of the alignment mostly.
      const int64_t slot = *rc::gen::inRange<int64_t>(0, 12);
      const bool misalign = *rc::gen::inRange(0, 20) == 0;
      offsets.push_back(slot * b.alignment * 8 + (misalign ? 1 : 0));
    }
    int64_t arena = 0;
    for (size_t i = 0; i < p.buffers.size(); ++i) arena = std::max(arena, offsets[i] + p.buffers[i].size);
    arena -= *rc::gen::element<int64_t>(0, 0, 0, 1);
    const MemoryPlan plan{arena, offsets};
    RC_ASSERT(validate_plan(p, plan).ok() == testing::brute_force_valid(p, plan));
  }));
}
