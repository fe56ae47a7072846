// Hazard scheduler: DAG edges and statistics, fallback, parallel == sequential, hazard
// checker, static verifier, trace JSON. Synthetic programs (schedule_test_util.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "carve/runtime/hazard_check.h"
#include "carve/runtime/schedule.h"
#include "carve/runtime/trace.h"
#include "schedule_test_util.h"

namespace rt = carve::runtime;
using carve::ErrorCode;
using rt::HazardKind;
using rt::HazardKinds;
using rt::Region;
using rt::testing::arena_ref;
using rt::testing::kCopy;
using rt::testing::kMix1;
using rt::testing::kMix2;
using rt::testing::kSet;
using rt::testing::ref;
using rt::testing::TestProgram;

namespace {

constexpr HazardKinds kRaw = static_cast<HazardKinds>(HazardKind::kRaw);
constexpr HazardKinds kWar = static_cast<HazardKinds>(HazardKind::kWar);
constexpr HazardKinds kWaw = static_cast<HazardKinds>(HazardKind::kWaw);

rt::ScheduleOptions parallel_options(int threads, int chunks = 0) {
  rt::ScheduleOptions o;
  o.threads = threads;
  o.chunks_per_launch = chunks;
  o.allow_fallback = false;
  return o;
}

rt::Schedule build(const TestProgram& tp, const rt::ScheduleOptions& o) {
  auto s = rt::build_schedule(tp.program, o);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  return std::move(s).value();
}

const rt::ScheduleEdge* find_edge(const rt::Schedule& s, int32_t from, int32_t to) {
  for (const auto& e : s.edges())
    if (e.from == from && e.to == to) return &e;
  return nullptr;
}

// 50 independent chains of 4 launches (4 tiles each, 32 bytes); in each chain the third
// launch reuses the arena bytes of the first one's result (another buffer id).
TestProgram wide_chains(int chains = 50) {
  constexpr int64_t kBytes = 4 * rt::testing::kTileBytes;
  TestProgram tp(chains * 2 * kBytes, {chains * kBytes}, {chains * kBytes});
  for (int c = 0; c < chains; ++c) {
    const int64_t base = c * 2 * kBytes;
    const auto t1 = arena_ref(base, kBytes, 3 * c);
    const auto t2 = arena_ref(base + kBytes, kBytes, 3 * c + 1);
    const auto t3 = arena_ref(base, kBytes, 3 * c + 2);  // reuses t1's bytes
    const auto in = ref(Region::kInput, 0, c * kBytes, kBytes);
    const auto out = ref(Region::kOutput, 0, c * kBytes, kBytes);
    std::string n = "c";  // += : g++ 12 warns (-Wrestrict) on "c" + std::string
    n += std::to_string(c);
    tp.kernel(n + ".a", kCopy, 4, {in, t1});
    tp.kernel(n + ".b", kCopy, 4, {t1, t2});
    tp.kernel(n + ".c", kMix1, 4, {t2, t3});
    tp.kernel(n + ".d", kMix2, 4, {t3, t2, out});
  }
  return tp;
}

std::vector<uint8_t> run_sequential(TestProgram& tp, uint32_t seed) {
  tp.fill(seed);
  rt::execute_sequential(tp.program, tp.operands());
  return tp.snapshot();
}

}  // namespace

TEST_CASE("scheduler/edges/raw_war_waw") {
  TestProgram tp(256, {}, {64});
  const auto x = arena_ref(0, 64, 0);
  const auto y = arena_ref(64, 64, 1);
  tp.kernel("write_x", kSet, 1, {x});     // 0
  tp.kernel("x_to_y", kCopy, 1, {x, y});  // 1: RAW on x (0)
  tp.kernel("rewrite_x", kSet, 1, {x});   // 2: WAR on x (1); WAW on x (0) is implied
  tp.kernel("mix_y", kMix1, 1, {x, y});   // 3: RAW on x (2); RAW+WAW on y (1) is implied
  const auto s = build(tp, parallel_options(2));
  REQUIRE(s.task_count() == 4);
  const auto* e01 = find_edge(s, 0, 1);
  REQUIRE(e01);
  CHECK(e01->kinds == kRaw);
  const auto* e12 = find_edge(s, 1, 2);
  REQUIRE(e12);
  CHECK(e12->kinds == kWar);
  CHECK_FALSE(find_edge(s, 0, 2));  // WAW implied by 0 -> 1 -> 2
  const auto* e23 = find_edge(s, 2, 3);
  REQUIRE(e23);
  CHECK(e23->kinds == kRaw);
  CHECK_FALSE(find_edge(s, 1, 3));  // implied via 1 -> 2 -> 3
  CHECK(s.stats().launch_edges_before_reduction == 5);
  CHECK(s.stats().edges == 3);
  CHECK(s.stats().raw_edges == 2);
  CHECK(s.stats().war_edges == 1);
  CHECK(s.stats().waw_edges == 0);

  // A pure WAW pair with nothing in between; kinds combine on one edge.
  TestProgram w(128, {}, {});
  w.kernel("a", kSet, 1, {arena_ref(0, 64, 0)});
  w.kernel("b", kMix1, 1, {arena_ref(64, 64, 1), arena_ref(0, 64, 0)});  // reads+writes a's bytes
  const auto sw = build(w, parallel_options(2));
  REQUIRE(sw.edges().size() == 1);
  CHECK(sw.edges()[0].kinds == (kRaw | kWaw));
  CHECK(rt::hazard_kinds_name(sw.edges()[0].kinds) == "RAW+WAW");
  CHECK(sw.stats().raw_edges == 1);
  CHECK(sw.stats().waw_edges == 1);
  CHECK(sw.stats().edges == 1);
  CHECK(sw.stats().reuse_only_edges == 0);  // same buffer: a true dependence
}

TEST_CASE("scheduler/edges/arena_reuse_between_different_buffers") {
  TestProgram tp(128, {}, {});
  // Buffer 7 lives in [0,64); later buffer 9 reuses [32,96). Byte ranges decide, not ids.
  tp.kernel("make_7", kSet, 1, {arena_ref(0, 64, 7)});
  tp.kernel("make_9", kSet, 1, {arena_ref(32, 64, 9)});
  const auto s = build(tp, parallel_options(2));
  REQUIRE(s.edges().size() == 1);
  CHECK(s.edges()[0].kinds == kWaw);
  CHECK(s.edges()[0].arena_reuse_only);
  CHECK(s.stats().reuse_only_edges == 1);

  // Same id, disjoint bytes: no edge (ids are never used for conflicts).
  TestProgram d(128, {}, {});
  d.kernel("p", kSet, 1, {arena_ref(0, 64, 1)});
  d.kernel("q", kSet, 1, {arena_ref(64, 64, 1)});
  CHECK(build(d, parallel_options(2)).edges().empty());

  // Unknown buffer ids: a dependence, but not counted as reuse-only.
  TestProgram u(128, {}, {});
  u.kernel("p", kSet, 1, {arena_ref(0, 64)});
  u.kernel("q", kSet, 1, {arena_ref(0, 64)});
  const auto su = build(u, parallel_options(2));
  CHECK(su.stats().edges == 1);
  CHECK(su.stats().reuse_only_edges == 0);
}

TEST_CASE("scheduler/edges/none_between_disjoint_ranges") {
  TestProgram tp(128, {64, 64}, {128, 64});
  tp.kernel("a", kCopy, 1, {ref(Region::kInput, 0, 0, 64), arena_ref(0, 64)});
  tp.kernel("b", kCopy, 1, {ref(Region::kInput, 0, 0, 64), arena_ref(64, 64)});  // touching, not overlapping
  tp.kernel("c", kCopy, 1, {ref(Region::kInput, 1, 0, 64), ref(Region::kOutput, 0, 0, 64)});
  tp.kernel("d", kCopy, 1, {ref(Region::kInput, 1, 0, 64), ref(Region::kOutput, 1, 0, 64)});  // another slot
  tp.copy("e", ref(Region::kInput, 0, 0, 32), ref(Region::kOutput, 0, 64, 32));  // reads shared with a, b
  const auto s = build(tp, parallel_options(2));
  CHECK(s.edges().empty());
  CHECK(s.stats().max_width == 5);
  CHECK(s.stats().critical_path == 1);
  CHECK(s.sources().size() == 5);
  // A copy whose destination overlaps c's and e's outputs: WAW with both.
  tp.copy("f", ref(Region::kInput, 0, 0, 16), ref(Region::kOutput, 0, 60, 16));
  const auto s2 = build(tp, parallel_options(2));
  REQUIRE(s2.edges().size() == 2);  // c -> f, e -> f (both write output 0 bytes f writes)
  CHECK(find_edge(s2, 2, 5));
  CHECK(find_edge(s2, 4, 5));
}

TEST_CASE("scheduler/edges/tiles_of_one_launch_are_independent") {
  TestProgram tp(1024, {}, {});
  tp.kernel("producer", kSet, 8, {arena_ref(0, 64)});
  tp.kernel("consumer", kCopy, 3, {arena_ref(0, 24), arena_ref(512, 24)});
  const auto s = build(tp, parallel_options(2, /*chunks=*/4));
  REQUIRE(s.task_count() == 4 + 3);
  CHECK(s.stats().split_launches == 2);
  const auto [pb, pe] = s.launch_tasks(0);
  CHECK(pb == 0);
  CHECK(pe == 4);
  int64_t expect = 0;
  for (int32_t t = pb; t < pe; ++t) {
    CHECK(s.tasks()[static_cast<size_t>(t)].tile_begin == expect);
    expect = s.tasks()[static_cast<size_t>(t)].tile_end;
    CHECK(expect - s.tasks()[static_cast<size_t>(t)].tile_begin == 2);
  }
  CHECK(expect == 8);
  for (const auto& e : s.edges()) CHECK(s.tasks()[static_cast<size_t>(e.from)].launch != s.tasks()[static_cast<size_t>(e.to)].launch);
  CHECK(s.edges().size() == 4 * 3);  // every producer chunk -> every consumer chunk
  CHECK(s.stats().launch_edges == 1);
  CHECK(s.stats().max_width == 4);
  CHECK(s.stats().critical_path == 2);

  // Default chunks: min(tiles, 2 x threads).
  const auto s3 = build(tp, parallel_options(3));
  CHECK(s3.launch_tasks(0).second - s3.launch_tasks(0).first == 6);
  CHECK(s3.launch_tasks(1).second - s3.launch_tasks(1).first == 3);
}

TEST_CASE("scheduler/edges/transitive_reduction") {
  TestProgram tp(256, {}, {});
  tp.kernel("a", kSet, 1, {arena_ref(0, 64)});
  tp.kernel("b", kCopy, 1, {arena_ref(0, 64), arena_ref(64, 64)});
  tp.kernel("c", kMix2, 1, {arena_ref(0, 64), arena_ref(64, 64), arena_ref(128, 64)});  // reads a and b
  tp.kernel("d", kMix2, 1, {arena_ref(0, 64), arena_ref(128, 64), arena_ref(192, 64)});  // reads a and c
  const auto s = build(tp, parallel_options(2));
  CHECK(s.stats().reduced);
  CHECK(s.stats().launch_edges_before_reduction == 5);  // a->b, a->c, b->c, a->d, c->d
  CHECK(s.stats().launch_edges == 3);
  CHECK(s.has_edge(0, 1));
  CHECK(s.has_edge(1, 2));
  CHECK(s.has_edge(2, 3));
  CHECK_FALSE(s.has_edge(0, 2));
  CHECK_FALSE(s.has_edge(0, 3));
  CHECK(s.stats().critical_path == 4);
  CHECK(s.stats().max_width == 1);

  // Above the limit the unreduced edges stay, and the stats say so.
  auto o = parallel_options(2);
  o.reduction_limit = 3;
  const auto big = build(tp, o);
  CHECK_FALSE(big.stats().reduced);
  CHECK(big.stats().reduction_note.find("reduction skipped") != std::string::npos);
  CHECK(big.stats().edges == 5);
  auto v = rt::verify_schedule(tp.program, big);
  REQUIRE(v.ok());
  CHECK(v->empty());
}

TEST_CASE("scheduler/stats/critical_path_width_and_kinds") {
  TestProgram tp(512, {}, {64});
  tp.kernel("a", kSet, 1, {arena_ref(0, 64, 0)});                          // 0
  tp.kernel("b", kCopy, 1, {arena_ref(0, 64, 0), arena_ref(64, 64, 1)});   // 1: RAW a
  tp.kernel("c", kSet, 1, {arena_ref(0, 64, 2)});                          // 2: WAR b (reuse), WAW a (implied)
  tp.kernel("d", kCopy, 1, {arena_ref(64, 64, 1), ref(Region::kOutput, 0, 0, 64)});  // 3: RAW b
  const auto s = build(tp, parallel_options(2));
  const auto& st = s.stats();
  CHECK(st.tasks == 4);
  CHECK(st.launches == 4);
  CHECK(st.launch_edges_before_reduction == 4);
  CHECK(st.edges == 3);
  CHECK(st.raw_edges == 2);
  CHECK(st.war_edges == 1);
  CHECK(st.waw_edges == 0);
  CHECK(st.reuse_only_edges == 1);
  CHECK(st.critical_path == 3);  // a, b, c (or d)
  CHECK(st.max_width == 2);      // c and d on level 2
  CHECK(st.total_bytes == 64 + 128 + 64 + 128);
  CHECK(st.to_string().find("1 from arena reuse only") != std::string::npos);

  auto wide = wide_chains(50);
  const auto sw = build(wide, parallel_options(4, 2));
  CHECK(sw.stats().tasks == 50 * 4 * 2);
  CHECK(sw.stats().critical_path == 4);
  CHECK(sw.stats().max_width == 100);
  CHECK(sw.stats().launch_edges == 50 * 3);  // a->b, b->c (WAR t1/t3 reuse + RAW t2), c->d
  CHECK(sw.stats().edges == 50 * 3 * 4);
}

TEST_CASE("scheduler/fallback/decision_and_reason") {
  rt::ScheduleOptions o;
  o.threads = 4;
  {
    TestProgram tp(256, {}, {});
    tp.kernel("a", kSet, 1, {arena_ref(0, 64)});
    tp.kernel("b", kSet, 1, {arena_ref(64, 64)});
    const auto s = build(tp, o);
    CHECK(s.sequential());
    CHECK(s.stats().fallback_reason == "2 tasks < min_tasks 4");
  }
  {
    TestProgram tp(64, {}, {});
    for (int i = 0; i < 6; ++i) tp.kernel(std::to_string(i), kMix1, 1, {arena_ref(0, 8), arena_ref(8, 8)});
    const auto s = build(tp, o);
    CHECK(s.sequential());
    CHECK(s.stats().fallback_reason == "the DAG is a chain (max width 1)");
  }
  auto tiny = wide_chains(4);
  {
    const auto s = build(tiny, o);
    CHECK(s.sequential());
    CHECK(s.stats().fallback_reason.find("< min_total_bytes 256 KiB") != std::string::npos);
    // The executor honours it and reports the reason ...
    rt::RunRecord rec;
    REQUIRE(rt::execute_parallel(tiny.program, s, tiny.operands(), {}, &rec).ok());
    CHECK_FALSE(rec.parallel);
    CHECK(rec.fallback_reason == s.stats().fallback_reason);
    // ... except under the hazard checker.
    rt::ParallelRunOptions check;
    check.check_hazards = true;
    REQUIRE(rt::execute_parallel(tiny.program, s, tiny.operands(), check, &rec).ok());
    CHECK(rec.parallel);
    CHECK(rec.hazards_checked);
    CHECK(rec.hazards.empty());
  }
  {
    auto o1 = o;
    o1.threads = 1;
    CHECK(build(tiny, o1).stats().fallback_reason == "1 thread");
    auto o2 = o;
    o2.min_total_bytes = 1024;
    const auto s = build(tiny, o2);
    CHECK_FALSE(s.sequential());
    CHECK(s.stats().fallback_reason.empty());
    CHECK(s.stats().to_string().find("parallel") != std::string::npos);
    o2.allow_fallback = false;
    o2.threads = 1;
    CHECK_FALSE(build(tiny, o2).sequential());
  }
  {
    // ScheduleOptions::sequential: sequential even where a parallel run would be chosen,
    // and whatever allow_fallback says.
    auto o3 = o;
    o3.min_total_bytes = 1024;
    o3.sequential = true;
    const auto s = build(tiny, o3);
    CHECK(s.sequential());
    CHECK(s.stats().fallback_reason == "sequential execution requested");
    o3.allow_fallback = false;
    CHECK(build(tiny, o3).stats().fallback_reason == "sequential execution requested");
  }
}

TEST_CASE("scheduler/parallel/bit_identical_to_sequential") {
  auto tp = wide_chains(50);
  const auto expected = run_sequential(tp, 42);
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    for (int chunks : {1, 3}) {
      const auto s = build(tp, parallel_options(threads, chunks));
      for (int rep = 0; rep < 3; ++rep) {
        tp.fill(42);
        rt::RunRecord rec;
        rt::ParallelRunOptions po;
        po.check_hazards = rep == 0;
        REQUIRE(rt::execute_parallel(tp.program, s, tp.operands(), po, &rec).ok());
        CHECK(rec.parallel);
        CHECK(rec.threads == threads);
        CHECK(tp.snapshot() == expected);
        CHECK(rec.hazards.empty());
      }
      // A kept executor gives the same bytes run after run.
      rt::ParallelExecutor ex(threads);
      for (int rep = 0; rep < 3; ++rep) {
        tp.fill(42);
        REQUIRE(ex.run(tp.program, s, tp.operands()).ok());
        CHECK(tp.snapshot() == expected);
      }
    }
  }
}

TEST_CASE("scheduler/hazards/none_on_a_correct_dag") {
  auto tp = wide_chains(8);
  const auto expected = run_sequential(tp, 7);
  const auto s = build(tp, parallel_options(2, 2));
  rt::ParallelRunOptions po;
  po.check_hazards = true;
  po.stretch_us = 200;
  po.fail_on_hazard = true;
  tp.fill(7);
  rt::RunRecord rec;
  const auto st = rt::execute_parallel(tp.program, s, tp.operands(), po, &rec);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(rec.hazards_checked);
  CHECK(rec.hazards.empty());
  CHECK(tp.snapshot() == expected);
  REQUIRE(rec.timings.size() == static_cast<size_t>(s.task_count()));
  for (const auto& e : s.edges())  // every edge held in time
    CHECK(rec.timings[static_cast<size_t>(e.from)].end_ns <= rec.timings[static_cast<size_t>(e.to)].start_ns);
  for (const auto& t : rec.timings) CHECK(t.end_ns - t.start_ns >= 200'000);
}

TEST_CASE("scheduler/hazards/removed_edge_is_reported") {
  TestProgram tp(256, {}, {64});
  tp.kernel("producer", kSet, 1, {arena_ref(0, 64, 0)});
  tp.kernel("consumer", kCopy, 1, {arena_ref(0, 64, 0), ref(Region::kOutput, 0, 0, 64)});
  tp.kernel("other_a", kSet, 1, {arena_ref(128, 64, 1)});
  tp.kernel("other_b", kSet, 1, {arena_ref(192, 64, 2)});
  auto s = build(tp, parallel_options(2));
  REQUIRE(s.has_edge(0, 1));
  CHECK(rt::verify_schedule(tp.program, s)->empty());
  REQUIRE(s.remove_edge(0, 1).ok());
  CHECK(s.remove_edge(0, 1).code() == ErrorCode::kNotFound);
  CHECK(s.stats().removed_edges == 1);
  CHECK(s.stats().edges == 0);
  CHECK(s.predecessor_count(1) == 0);

  // With both tasks stretched, the two (now both sources) overlap on two threads. Retry
  // with a longer stretch if a loaded machine kept the second thread away.
  bool found = false;
  for (int64_t stretch = 20'000; stretch <= 320'000 && !found; stretch *= 2) {
    rt::ParallelRunOptions po;
    po.check_hazards = true;
    po.stretch_us = stretch;
    rt::RunRecord rec;
    REQUIRE(rt::execute_parallel(tp.program, s, tp.operands(), po, &rec).ok());
    for (const auto& h : rec.hazards) {
      if (h.first_task != 0 || h.second_task != 1) continue;
      found = true;
      CHECK(h.first_name == "producer");
      CHECK(h.second_name == "consumer");
      CHECK(h.kinds == kRaw);
      REQUIRE(h.conflicts.size() == 1);
      CHECK(rt::describe_range(h.conflicts[0].earlier) == "arena:0[0,64)");
      CHECK(rt::describe_range(h.conflicts[0].later) == "arena:0[0,64)");
      CHECK(h.to_string().find("RAW race between 'producer'") != std::string::npos);
      CHECK(h.first_timing.worker != h.second_timing.worker);
    }
    for (const auto& h : rec.hazards) CHECK(h.first_task == 0);  // nothing else conflicts
  }
  CHECK(found);

  // fail_on_hazard turns it into an error.
  rt::ParallelRunOptions po;
  po.check_hazards = true;
  po.fail_on_hazard = true;
  po.stretch_us = 100'000;
  const auto st = rt::execute_parallel(tp.program, s, tp.operands(), po);
  if (!st.ok()) {
    CHECK(st.code() == ErrorCode::kInternal);
    CHECK(st.message().find("producer") != std::string::npos);
  }
}

TEST_CASE("scheduler/hazards/find_hazards_from_timings") {
  // The checker itself, on hand-made intervals.
  TestProgram tp(256, {}, {});
  tp.kernel("w", kSet, 4, {arena_ref(0, 32)});
  tp.kernel("r", kCopy, 1, {arena_ref(0, 8), arena_ref(128, 8)});
  tp.kernel("x", kSet, 1, {arena_ref(200, 8)});
  const auto s = build(tp, parallel_options(2, 2));
  REQUIRE(s.task_count() == 4);  // w.0, w.1, r, x
  std::vector<rt::TaskTiming> t(4);
  t[0] = {0, 100, 0};
  t[1] = {50, 150, 1};   // same launch as 0: never a hazard
  t[2] = {140, 200, 0};  // overlaps w.1 (RAW) but not w.0
  t[3] = {0, 1000, 2};   // overlaps everything, conflicts with nothing
  auto h = rt::find_hazards(tp.program, s, t);
  REQUIRE(h.ok());
  REQUIRE(h->size() == 1);
  CHECK((*h)[0].first_task == 1);
  CHECK((*h)[0].second_task == 2);
  CHECK((*h)[0].kinds == kRaw);
  t[2] = {150, 200, 0};  // touching is not overlapping
  CHECK(rt::find_hazards(tp.program, s, t)->empty());
  CHECK(rt::find_hazards(tp.program, s, std::span(t).first(2)).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("scheduler/verify/static_verifier") {
  auto tp = wide_chains(3);
  auto s = build(tp, parallel_options(2, 2));
  auto v = rt::verify_schedule(tp.program, s);
  REQUIRE(v.ok());
  CHECK(v->empty());
  // Drop every edge once (on a copy): each removal is reported as exactly that pair (here
  // the other chunks keep every other conflicting pair ordered).
  for (const auto& e : s.edges()) {
    auto broken = s;
    REQUIRE(broken.remove_edge(e.from, e.to).ok());
    auto bv = rt::verify_schedule(tp.program, broken);
    REQUIRE(bv.ok());
    REQUIRE(bv->size() == 1);
    CHECK((*bv)[0].first_task == e.from);
    CHECK((*bv)[0].second_task == e.to);
    CHECK((*bv)[0].kinds == e.kinds);
    CHECK((*bv)[0].to_string().find("is not ordered") != std::string::npos);
  }
  // The drop_edges option does the same at build time.
  auto o = parallel_options(2, 2);
  o.drop_edges = {{s.edges()[0].from, s.edges()[0].to}};
  const auto dropped = build(tp, o);
  CHECK(dropped.stats().removed_edges == 1);
  CHECK(rt::verify_schedule(tp.program, dropped)->size() == 1);
  o.drop_edges = {{0, 0}};
  CHECK(rt::build_schedule(tp.program, o).status().code() == ErrorCode::kNotFound);
  CHECK(rt::verify_schedule(tp.program, s, 4).status().code() == ErrorCode::kUnsupported);
}

TEST_CASE("scheduler/errors/malformed_programs") {
  TestProgram tp(64, {}, {});
  tp.kernel("ok", kSet, 1, {arena_ref(0, 8)});
  tp.kernel("bad", kSet, 1, {arena_ref(8, 8)});
  tp.program.launches[1].kernel = 99;
  auto s = rt::build_schedule(tp.program, {});
  CHECK(s.status().code() == ErrorCode::kInvalidArgument);
  CHECK(s.status().message().find("'bad'") != std::string::npos);
  tp.program.launches[1].kernel = kSet;
  tp.program.launches[1].tile_end = -1;
  CHECK(rt::build_schedule(tp.program, {}).status().code() == ErrorCode::kInvalidArgument);
  tp.program.launches[1].tile_end = 1;
  tp.program.launches[1].writes[0].bytes = -4;
  CHECK(rt::build_schedule(tp.program, {}).status().code() == ErrorCode::kInvalidArgument);
  tp.program.launches[1].writes[0].bytes = 8;
  auto good = rt::build_schedule(tp.program, {});
  REQUIRE(good.ok());
  tp.program.launches.pop_back();
  CHECK(rt::execute_parallel(tp.program, *good, tp.operands()).code() == ErrorCode::kInvalidArgument);
  CHECK(rt::verify_schedule(tp.program, *good).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("scheduler/errors/write_over_part_of_a_read_is_rejected") {
  // A kernel whose output covers part of its input at another offset: its tiles (and its
  // elements) would overwrite bytes still to be read. Only the very same range (in
  // place) may be both read and written.
  TestProgram tp(256, {}, {});
  tp.kernel("shifted", rt::testing::kCopy, 2, {arena_ref(0, 128), arena_ref(64, 128)});
  auto s = rt::build_schedule(tp.program, {});
  CHECK(s.status().code() == ErrorCode::kInvalidArgument);
  CHECK(s.status().message().find("'shifted'") != std::string::npos);
  CHECK(s.status().message().find("not in place") != std::string::npos);
  tp.program.launches[0].reads[0] = tp.program.launches[0].writes[0];  // in place: the same view
  tp.program.launches[0].operands[0] = tp.program.launches[0].writes[0];
  CHECK(rt::build_schedule(tp.program, {}).ok());
}

TEST_CASE("scheduler/errors/arena_range_without_its_view_is_rejected") {
  // Kernel pointers come from views (executor.h): an arena range must name the view it
  // lies in.
  TestProgram tp(256, {}, {});
  tp.kernel("a", rt::testing::kSet, 1, {arena_ref(0, 64)});
  REQUIRE(rt::build_schedule(tp.program, {}).ok());
  auto& launch = tp.program.launches[0];
  launch.writes[0].view = -1;
  auto no_view = rt::build_schedule(tp.program, {});
  CHECK(no_view.status().code() == ErrorCode::kInvalidArgument);
  CHECK(no_view.status().message().find("names no view") != std::string::npos);
  launch.writes[0] = launch.operands[0];
  launch.writes[0].bytes = 128;  // past the end of its 64-byte view
  auto outside = rt::build_schedule(tp.program, {});
  CHECK(outside.status().code() == ErrorCode::kInvalidArgument);
  CHECK(outside.status().message().find("outside its view") != std::string::npos);
}

TEST_CASE("scheduler/trace/json_has_one_slice_per_task") {
  auto tp = wide_chains(5);
  const auto s = build(tp, parallel_options(2, 2));
  rt::ParallelRunOptions po;
  po.record_trace = true;
  rt::RunRecord rec;
  REQUIRE(rt::execute_parallel(tp.program, s, tp.operands(), po, &rec).ok());
  const auto path = std::filesystem::temp_directory_path() / "carve_scheduler_trace_test.json";
  REQUIRE(rt::write_trace_json(path.string(), tp.program, s, rec).ok());
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::filesystem::remove(path);
  REQUIRE_FALSE(doc.is_discarded());
  REQUIRE(doc.contains("traceEvents"));
  int slices = 0;
  std::set<int64_t> tids, named_tids, tasks_seen;
  for (const auto& ev : doc["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "thread_name") named_tids.insert(ev["tid"].get<int64_t>());
    if (ev["ph"] != "X") continue;
    ++slices;
    tids.insert(ev["tid"].get<int64_t>());
    const auto& args = ev["args"];
    tasks_seen.insert(args["task"].get<int64_t>());
    const auto& task = s.tasks()[args["task"].get<size_t>()];
    CHECK(ev["name"] == tp.program.launches[static_cast<size_t>(task.launch)].name);
    CHECK(args["reads"].is_array());
    CHECK(args["writes"].size() == 1);
    CHECK(args["writes"][0].contains("storage"));
    CHECK(args["writes"][0]["end"].get<int64_t>() > args["writes"][0]["begin"].get<int64_t>());
    CHECK(args["storages"].size() >= 1);
    CHECK(ev["dur"].get<double>() >= 0);
    CHECK(ev["ts"].get<double>() >= 0);
  }
  CHECK(slices == s.task_count());
  CHECK(tasks_seen.size() == static_cast<size_t>(s.task_count()));
  CHECK(tids == named_tids);

  rt::RunRecord empty;
  CHECK(rt::trace_json(tp.program, s, empty).status().code() == ErrorCode::kInvalidArgument);
  CHECK(rt::write_trace_json("/nonexistent-dir/x.json", tp.program, s, rec).code() == ErrorCode::kIoError);
}
