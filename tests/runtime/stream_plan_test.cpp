// Stream plan (stream_plan.h): fixed DAGs, and properties on random DAGs and random
// Programs. The Program property emulates the device's stream semantics on the CPU: each
// stream is a FIFO, a task may start once the tasks it waits for are done, and the next
// task to run is picked at random among the runnable stream heads. Whatever the choice,
// the bytes equal a sequential run ("parallel streams == sequential").
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <deque>
#include <vector>

#include "carve/runtime/stream_plan.h"
#include "schedule_random_util.h"

namespace rt = carve::runtime;
using Edges = std::vector<std::pair<int32_t, int32_t>>;

TEST_CASE("scheduler/streams/chain stays on one stream") {
  const Edges edges{{0, 1}, {1, 2}, {2, 3}};
  auto plan = rt::plan_streams(4, edges, {.streams = 4});
  REQUIRE(plan.ok());
  CHECK(plan->streams_used == 1);
  CHECK(plan->events == 0);
  CHECK(plan->cross_stream_edges == 0);
  CHECK(rt::verify_stream_plan(4, edges, *plan).ok());
}

TEST_CASE("scheduler/streams/diamond uses two streams and one join") {
  const Edges edges{{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  auto plan = rt::plan_streams(4, edges, {.streams = 4});
  REQUIRE(plan.ok());
  CHECK(plan->streams_used == 2);
  CHECK(plan->stream_of[1] == plan->stream_of[0]);
  CHECK(plan->stream_of[2] != plan->stream_of[0]);
  CHECK(plan->cross_stream_edges == 2);
  CHECK(plan->events == 2);  // 2 waits for 0 on the fork, 3 waits for the other branch
  CHECK(rt::verify_stream_plan(4, edges, *plan).ok());
  MESSAGE(plan->to_string());
}

TEST_CASE("scheduler/streams/implied waits are dropped") {
  // 0 on stream A, 1 on B after 0; 2 waits for 1 (which already waited for 0): 0 -> 2 is implied.
  const Edges edges{{0, 1}, {0, 2}, {1, 2}, {0, 3}};
  auto plan = rt::plan_streams(4, edges, {.streams = 2});
  REQUIRE(plan.ok());
  CHECK(rt::verify_stream_plan(4, edges, *plan).ok());
  CHECK(plan->waits_total <= plan->cross_stream_edges);
}

TEST_CASE("scheduler/streams/bad input is kInvalidArgument") {
  const Edges back{{2, 1}};
  CHECK(rt::plan_streams(3, back).status().code() == carve::ErrorCode::kInvalidArgument);
  CHECK(rt::plan_streams(3, Edges{}, {.streams = 0}).status().code() == carve::ErrorCode::kInvalidArgument);
  const Edges out{{0, 5}};
  CHECK(rt::plan_streams(3, out).status().code() == carve::ErrorCode::kInvalidArgument);
}

TEST_CASE("scheduler/streams/property random DAGs are ordered, a dropped wait is caught") {
  CHECK(rc::check("random DAG: every edge ordered; events <= cross edges; each wait is needed", [] {
    const int32_t n = *rc::gen::inRange(1, 40);
    const int density = *rc::gen::inRange(1, 40);
    Edges edges;
    for (int32_t b = 1; b < n; ++b)
      for (int32_t a = 0; a < b; ++a)
        if (*rc::gen::inRange(0, 100) < density) edges.emplace_back(a, b);
    const int streams = *rc::gen::inRange(1, 7);
    auto plan = rt::plan_streams(n, edges, {.streams = streams});
    RC_ASSERT(plan.ok());
    RC_ASSERT(rt::verify_stream_plan(n, edges, *plan).ok());
    RC_ASSERT(plan->events <= plan->cross_stream_edges);
    RC_ASSERT(plan->waits_total <= plan->cross_stream_edges);
    RC_ASSERT(plan->streams_used <= streams);
    if (streams == 1) RC_ASSERT(plan->events == 0);
    // Every wait is necessary: without it, its edge is no longer ordered.
    for (int32_t t = 0; t < n; ++t) {
      if (plan->waits[static_cast<size_t>(t)].empty()) continue;
      rt::StreamPlan broken = *plan;
      broken.waits[static_cast<size_t>(t)].pop_back();
      RC_ASSERT(!rt::verify_stream_plan(n, edges, broken).ok());
      break;
    }
  }));
}

TEST_CASE("scheduler/streams/property emulated streams equal sequential") {
  CHECK(rc::check("random programs on k emulated streams, random interleaving == sequential", [] {
    rt::testing::TestProgram tp = rt::testing::random_program();
    rt::ScheduleOptions so;
    so.threads = 1;
    so.chunks_per_launch = 1;  // one task per launch, as on the GPU
    so.allow_fallback = false;
    auto schedule = rt::build_schedule(tp.program, so);
    RC_ASSERT(schedule.ok());
    auto plan = rt::plan_streams(*schedule, {.streams = *rc::gen::inRange(1, 5)});
    RC_ASSERT(plan.ok());

    const auto seed = *rc::gen::arbitrary<uint32_t>();
    tp.fill(seed);
    rt::execute_sequential(tp.program, tp.operands());
    const auto expected = tp.snapshot();

    tp.fill(seed);
    const auto operands = tp.operands();
    std::vector<std::deque<int32_t>> queues(static_cast<size_t>(plan->streams));
    for (int32_t t = 0; t < schedule->task_count(); ++t)
      queues[static_cast<size_t>(plan->stream_of[static_cast<size_t>(t)])].push_back(t);
    std::vector<uint8_t> done(static_cast<size_t>(schedule->task_count()), 0);
    for (int32_t ran = 0; ran < schedule->task_count(); ++ran) {
      std::vector<size_t> runnable;
      for (size_t s = 0; s < queues.size(); ++s) {
        if (queues[s].empty()) continue;
        bool ready = true;
        for (int32_t w : plan->waits[static_cast<size_t>(queues[s].front())]) ready = ready && done[static_cast<size_t>(w)];
        if (ready) runnable.push_back(s);
      }
      RC_ASSERT(!runnable.empty());  // no deadlock
      const size_t s = runnable[static_cast<size_t>(*rc::gen::inRange<int>(0, static_cast<int>(runnable.size())))];
      const int32_t t = queues[s].front();
      queues[s].pop_front();
      const auto& task = schedule->tasks()[static_cast<size_t>(t)];
      rt::execute_launch(tp.program, operands, task.launch, task.tile_begin, task.tile_end);
      done[static_cast<size_t>(t)] = 1;
    }
    RC_ASSERT(tp.snapshot() == expected);
  }));
}

TEST_CASE("scheduler/streams/host tasks take the host stream and wait only on device events") {
  // 0 -> 1(host) -> 2 ; 0 -> 3 ; 3 -> 4(host) ; 2 -> 5, 4 -> 5
  const Edges edges{{0, 1}, {1, 2}, {0, 3}, {3, 4}, {2, 5}, {4, 5}};
  auto plan = rt::plan_streams(6, edges, {.streams = 2, .host = {0, 1, 0, 0, 1, 0}});
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  CHECK(plan->host_stream == 2);
  CHECK(plan->on_host(1));
  CHECK(plan->on_host(4));
  for (int32_t t : {0, 2, 3, 5}) CHECK(!plan->on_host(t));
  CHECK(plan->streams_used <= 2);
  CHECK(plan->waits[1] == std::vector<int32_t>{0});  // the host syncs on task 0's event only
  CHECK(rt::verify_stream_plan(6, edges, *plan).ok());
  CHECK(rt::plan_streams(6, edges, {.streams = 2, .host = {1, 0}}).status().code() ==
        carve::ErrorCode::kInvalidArgument);
}

// The executor's model of a mixed program: one host thread walks the tasks in order,
// enqueueing device tasks on their streams (waits on host tasks dropped: those ran before)
// and running host tasks itself once the device tasks they wait for are done; the device
// runs any stream head whose waits are done, interleaved at random with the host. Every
// DAG edge must finish its source before its target starts.
TEST_CASE("scheduler/streams/property mixed host and device tasks run every edge in order") {
  CHECK(rc::check("random DAG, random host tasks, random interleaving: every edge ordered", [] {
    const int32_t n = *rc::gen::inRange(1, 30);
    const int density = *rc::gen::inRange(1, 40);
    Edges edges;
    for (int32_t b = 1; b < n; ++b)
      for (int32_t a = 0; a < b; ++a)
        if (*rc::gen::inRange(0, 100) < density) edges.emplace_back(a, b);
    std::vector<uint8_t> host(static_cast<size_t>(n));
    for (auto& h : host) h = *rc::gen::inRange(0, 3) == 0 ? 1 : 0;
    const int streams = *rc::gen::inRange(1, 5);
    auto plan = rt::plan_streams(n, edges, {.streams = streams, .host = host});
    RC_ASSERT(plan.ok());
    RC_ASSERT(rt::verify_stream_plan(n, edges, *plan).ok());
    for (int32_t t = 0; t < n; ++t) RC_ASSERT(plan->on_host(t) == (host[static_cast<size_t>(t)] != 0));

    std::vector<std::deque<int32_t>> queues(static_cast<size_t>(streams));
    std::vector<int32_t> finished_at(static_cast<size_t>(n), -1), started_at(static_cast<size_t>(n), -1);
    int32_t clock = 0, next = 0;
    auto waits_done = [&](int32_t t) {
      for (int32_t w : plan->waits[static_cast<size_t>(t)])
        if (!plan->on_host(w) && finished_at[static_cast<size_t>(w)] < 0) return false;
      return true;
    };
    auto run = [&](int32_t t) {
      started_at[static_cast<size_t>(t)] = clock++;
      finished_at[static_cast<size_t>(t)] = clock++;
    };
    for (int32_t steps = 0; steps < 4 * n + 8; ++steps) {
      std::vector<int> choices;  // -1: the host advances; s: stream s runs its head
      const bool host_can = next < n && (!plan->on_host(next) || waits_done(next));
      if (host_can) choices.push_back(-1);
      for (size_t s = 0; s < queues.size(); ++s)
        if (!queues[s].empty() && waits_done(queues[s].front())) choices.push_back(static_cast<int>(s));
      if (choices.empty()) break;
      const int pick = choices[static_cast<size_t>(*rc::gen::inRange<int>(0, static_cast<int>(choices.size())))];
      if (pick < 0) {
        if (plan->on_host(next)) run(next);
        else queues[static_cast<size_t>(plan->stream_of[static_cast<size_t>(next)])].push_back(next);
        ++next;
      } else {
        run(queues[static_cast<size_t>(pick)].front());
        queues[static_cast<size_t>(pick)].pop_front();
      }
    }
    for (int32_t t = 0; t < n; ++t) RC_ASSERT(finished_at[static_cast<size_t>(t)] >= 0);  // no deadlock
    for (const auto& [from, to] : edges)
      RC_ASSERT(finished_at[static_cast<size_t>(from)] < started_at[static_cast<size_t>(to)]);
  }));
}
