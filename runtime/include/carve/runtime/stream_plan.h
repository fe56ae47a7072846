// Stream plan: maps the hazard DAG (schedule.h) onto k in-order device streams with events
// for the edges that cross streams. Pure logic (no CUDA): the CUDA backend enqueues by it,
// and tests check it on the CPU.
//
//   auto plan = plan_streams(schedule, {.streams = 4});
//   // host: for t in plan.order: for w in plan.waits[t]: wait(stream_of[t], event[w]);
//   //       enqueue t on stream_of[t]; if (plan.records[t]) record event[t] on that stream
//
// Semantics assumed (CUDA streams): the host enqueues tasks in increasing task index (a
// topological order, since every edge goes from a lower to a higher index); work on one
// stream runs in enqueue order; a wait makes the stream wait until the recorded task has
// completed (cuStreamWaitEvent on an event recorded right after it).
//
// Assignment (greedy, in task order): a task continues the stream of a predecessor that is
// currently the last task on its stream (the edge then costs nothing); otherwise it takes
// the stream with the fewest tasks (ties: lowest index). Waits: for each predecessor on
// another stream, unless that predecessor is already known complete through the stream's
// own order and earlier waits (vector clocks, so transitively implied waits are dropped).
// Hence events <= cross-stream edges, and every DAG edge is ordered (verify_stream_plan).
//
// Host tasks (mixed programs: kernels placed on the CPU): StreamPlanOptions::host marks
// them; they go on one extra in-order "stream", index `streams` (StreamPlan::host_stream),
// which models the calling thread running them in task order. Their waits are the device
// tasks they must see complete (the host synchronises on those events only, never on whole
// streams); a device task's wait on a host task needs no event (the host runs a host task
// before it enqueues anything later), and device tasks never land on the host stream.
//
// Errors: kInvalidArgument for streams < 1, an edge out of range or not forward, a host
// mask of the wrong size.
// Thread-safety: pure functions; a StreamPlan is a plain value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "carve/runtime/schedule.h"
#include "carve/status.h"

namespace carve::runtime {

struct StreamPlanOptions {
  int streams = 4;  // >= 1; 1 = everything in order on one stream (no events)
  std::vector<uint8_t> host{};  // per task (or empty: none): 1 = runs on the host (above)
};

struct StreamPlan {
  int streams = 1;
  std::vector<int32_t> stream_of;             // per task
  std::vector<int32_t> position;              // per task: index within its stream
  std::vector<std::vector<int32_t>> waits;    // per task: earlier tasks (other streams) to wait for
  std::vector<uint8_t> records;               // per task: 1 = record an event after it
  int64_t edges = 0;                          // DAG edges
  int64_t cross_stream_edges = 0;             // edges whose ends are on different streams
  int64_t waits_total = 0;                    // sum of waits[t].size()
  int64_t events = 0;                         // tasks with records[t]
  int32_t streams_used = 0;                   // device streams with a task
  int32_t host_stream = -1;                   // == streams when there are host tasks
  bool on_host(int32_t task) const { return host_stream >= 0 && stream_of[static_cast<size_t>(task)] == host_stream; }

  std::string to_string() const;  // "4 streams (3 used), 12 edges, 5 cross, 4 waits, 4 events"
};

// A DAG of `tasks` tasks; edges (from, to) with from < to.
Result<StreamPlan> plan_streams(int32_t tasks, std::span<const std::pair<int32_t, int32_t>> edges,
                                const StreamPlanOptions& options = {});
// The schedule's tasks and edges.
Result<StreamPlan> plan_streams(const Schedule& schedule, const StreamPlanOptions& options = {});

// Replays the plan's stream semantics (FIFO per stream + waits) and returns kInternal naming
// the first edge (from, to) whose order the plan does not guarantee, or a wait that is not
// on an earlier task of another stream / lacks its record. OK when everything is ordered.
Status verify_stream_plan(int32_t tasks, std::span<const std::pair<int32_t, int32_t>> edges,
                          const StreamPlan& plan);

}  // namespace carve::runtime
