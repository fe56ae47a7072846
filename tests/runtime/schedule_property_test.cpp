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
#include "schedule_test_util.h"

namespace rt = carve::runtime;
using rt::Region;
using rt::testing::kTileBytes;
using rt::testing::TestProgram;

namespace {

constexpr int64_t kArena = 192, kInput = 64, kOutput = 64;

int64_t storage_bytes(Region region) {
  switch (region) {
    case Region::arena: return kArena;
    case Region::input: return kInput;
    default: return kOutput;
  }
}

// A random range of `bytes` in `region`/`slot`; arena ranges get a buffer id in 0..3.
rt::MemoryRef random_range(Region region, int32_t slot, int64_t bytes) {
  const int64_t offset = *rc::gen::inRange<int64_t>(0, storage_bytes(region) - bytes + 1);
  const int32_t buffer = region == Region::arena ? *rc::gen::inRange(0, 4) : -1;
  return rt::MemoryRef{region, slot, offset, bytes, buffer};
}

rt::MemoryRef random_writable(int64_t bytes) {
  return *rc::gen::inRange(0, 4) == 0 ? random_range(Region::output, 0, bytes) : random_range(Region::arena, 0, bytes);
}

rt::MemoryRef random_readable(int64_t bytes) {
  switch (*rc::gen::inRange(0, 5)) {
    case 0: return random_range(Region::input, 0, bytes);
    case 1: return random_range(Region::input, 1, bytes);
    case 2: return random_range(Region::output, 0, bytes);
    default: return random_range(Region::arena, 0, bytes);
  }
}

// A kernel input: the output's own bytes (in place) or a range that does not overlap the
// output, so that tiles stay independent (a tile reads only what no other tile writes).
rt::MemoryRef random_input(const rt::MemoryRef& out) {
  if (*rc::gen::inRange(0, 5) == 0) return out;
  for (int attempt = 0; attempt < 16; ++attempt) {
    rt::MemoryRef in = random_readable(out.bytes);
    if (!in.overlaps(out)) return in;
  }
  return out;
}

TestProgram random_program() {
  TestProgram tp(kArena, {kInput, kInput}, {kOutput});
  const int launches = *rc::gen::inRange(1, 15);
  for (int i = 0; i < launches; ++i) {
    std::string name = "l";  // += : g++ 12 warns (-Wrestrict) on "l" + std::string
    name += std::to_string(i);
    if (*rc::gen::inRange(0, 6) == 0) {
      const int64_t bytes = *rc::gen::inRange<int64_t>(1, 33);
      rt::MemoryRef dst = random_writable(bytes);
      rt::MemoryRef src = random_readable(bytes);
      // A copy's source and destination never share bytes (build_schedule rejects it).
      for (int attempt = 0; attempt < 16 && src.overlaps(dst); ++attempt) src = random_readable(bytes);
      if (!src.overlaps(dst)) tp.copy(name, src, dst);
      continue;
    }
    const int64_t tiles = *rc::gen::inRange<int64_t>(1, 5);
    const rt::MemoryRef out = random_writable(tiles * kTileBytes);
    switch (*rc::gen::inRange(0, 4)) {
      case 0: tp.kernel(name, rt::testing::kSet, tiles, {out}); break;
      case 1: tp.kernel(name, rt::testing::kCopy, tiles, {random_input(out), out}); break;
      case 2: tp.kernel(name, rt::testing::kMix1, tiles, {random_input(out), out}); break;
      default: tp.kernel(name, rt::testing::kMix2, tiles, {random_input(out), random_input(out), out}); break;
    }
  }
  return tp;
}

rt::ScheduleOptions random_options() {
  rt::ScheduleOptions o;
  o.threads = *rc::gen::inRange(1, 5);
  o.chunks_per_launch = *rc::gen::inRange(0, 5);
  o.allow_fallback = false;
  return o;
}

}  // namespace

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
    rt::execute_sequential(tp.program, tp.bases());
    const auto expected = tp.snapshot();

    tp.fill(seed);
    rt::ParallelRunOptions po;
    po.check_hazards = true;
    rt::RunRecord rec;
    RC_ASSERT(rt::execute_parallel(tp.program, *schedule, tp.bases(), po, &rec).ok());
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
