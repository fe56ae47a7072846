// Scheduler properties on random programs: random launches over random byte ranges of a
// small arena, two inputs and one output; random tile counts; kernels doing deterministic
// read-modify-write mixing of their operands (schedule_test_util.h).
//  - parallel output == sequential output bit for bit, and the hazard checker is silent;
//  - the static verifier accepts the DAG; with a random edge removed it reports that pair
//    (the DAG is transitively reduced, so no other path orders it);
//  - structure: tasks tile their launch exactly, edges join different launches forward and
//    always stand for a real conflict.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <string>
#include <vector>

#include "carve/runtime/hazard_check.h"
#include "carve/runtime/schedule.h"
#include "schedule_random_util.h"
#include "schedule_test_util.h"

namespace rt = carve::runtime;
using rt::testing::TestProgram;
using rt::testing::random_options;
using rt::testing::random_program;

TEST_CASE("scheduler/property/parallel_equals_sequential") {
  CHECK(rc::check("random programs: parallel == sequential, no hazards, verifier silent", [] {
    TestProgram tp = random_program();
    const auto options = random_options();
    auto schedule = rt::build_schedule(tp.program, options);
    RC_ASSERT(schedule.ok());
    auto violations = rt::verify_schedule(tp.program, *schedule);
    RC_ASSERT(violations.ok());
    RC_ASSERT(violations->empty());

    const auto seed = *rc::gen::arbitrary<uint32_t>();
    tp.fill(seed);
    rt::execute_sequential(tp.program, tp.operands());
    const auto expected = tp.snapshot();

    tp.fill(seed);
    rt::ParallelRunOptions po;
    po.check_hazards = true;
    rt::RunRecord rec;
    RC_ASSERT(rt::execute_parallel(tp.program, *schedule, tp.operands(), po, &rec).ok());
    RC_ASSERT(rec.parallel);
    RC_ASSERT(rec.hazards.empty());
    RC_ASSERT(tp.snapshot() == expected);
  }));
}

TEST_CASE("scheduler/property/removed_edge_is_reported_by_verifier") {
  CHECK(rc::check("random programs: structure, and a removed edge is an unordered conflict", [] {
    TestProgram tp = random_program();
    auto schedule = rt::build_schedule(tp.program, random_options());
    RC_ASSERT(schedule.ok());
    const rt::Schedule& s = *schedule;

    // Tasks tile their launch exactly, in order.
    for (size_t l = 0; l < tp.program.launches.size(); ++l) {
      const auto& launch = tp.program.launches[l];
      const auto [b, e] = s.launch_tasks(static_cast<int32_t>(l));
      RC_ASSERT(b < e);
      int64_t tile = launch.tile_begin;
      for (int32_t t = b; t < e; ++t) {
        const auto& task = s.tasks()[static_cast<size_t>(t)];
        RC_ASSERT(task.launch == static_cast<int32_t>(l));
        RC_ASSERT(task.tile_begin == tile);
        tile = task.tile_end;
      }
      RC_ASSERT(tile == launch.tile_end);
    }
    // Edges: forward, between different launches, each a real conflict of its kinds.
    for (const auto& edge : s.edges()) {
      RC_ASSERT(edge.from < edge.to);
      const int32_t la = s.tasks()[static_cast<size_t>(edge.from)].launch;
      const int32_t lb = s.tasks()[static_cast<size_t>(edge.to)].launch;
      RC_ASSERT(la < lb);
      const auto conflicts = rt::range_conflicts(tp.program.launches[static_cast<size_t>(la)],
                                                 tp.program.launches[static_cast<size_t>(lb)]);
      RC_ASSERT(!conflicts.empty());
      rt::HazardKinds kinds = 0;
      for (const auto& c : conflicts) kinds |= static_cast<rt::HazardKinds>(c.kind);
      RC_ASSERT(kinds == edge.kinds);
      RC_ASSERT(edge.arena_reuse_only == rt::conflicts_from_arena_reuse_only(conflicts));
    }
    RC_ASSERT(s.stats().edges == static_cast<int64_t>(s.edges().size()));
    RC_ASSERT(s.stats().critical_path >= 1);
    RC_ASSERT(s.stats().max_width >= 1);
    RC_ASSERT(s.stats().critical_path <= s.stats().tasks);

    if (s.edges().empty()) return;
    const auto pick = *rc::gen::inRange<size_t>(0, s.edges().size());
    const auto removed = s.edges()[pick];
    rt::Schedule broken = s;
    RC_ASSERT(broken.remove_edge(removed.from, removed.to).ok());
    auto violations = rt::verify_schedule(tp.program, broken);
    RC_ASSERT(violations.ok());
    // The pair itself is reported (other pairs that were ordered only through it may be too).
    RC_ASSERT(std::any_of(violations->begin(), violations->end(), [&](const rt::OrderViolation& v) {
      return v.first_task == removed.from && v.second_task == removed.to && v.kinds == removed.kinds;
    }));
  }));
}
