// The hazard scheduler: a dependency DAG over a Program's launches, and a parallel
// executor on oneTBB that runs it.
//
//   auto schedule = build_schedule(program, {.threads = 8});      // once, after compile
//   ParallelExecutor executor(schedule->threads());               // once, keeps a task_arena
//   LaunchOperands operands(program, bases);                      // kernel pointers (executor.h)
//   Status s = executor.run(program, *schedule, operands);        // each run (operands.bind() when
//                                                                 // the caller's buffers change)
//
// DAG. Every kernel launch whose tile range has more than one tile is split into up to
// `chunks_per_launch` (default 2 x threads) tasks over contiguous, disjoint tile ranges;
// other launches (copies, one-tile kernels) are one task. Each task carries its launch's
// whole read/write byte ranges (a Program has no per-tile footprints). Two tasks of
// different launches get an edge, in program order, when one writes bytes the other
// reads or writes (RAW, WAR, WAW). Conflicts are decided from storage byte ranges only
// (region + slot + [offset, offset + bytes)), never from buffer or value ids, so two
// planned buffers that share arena bytes over time are ordered. Tasks of one launch
// never depend on each other (jit/kernel.h: tiles never write the same byte; scratch is
// per tile). Transitively implied edges are removed (computed on launches, then
// expanded to tasks; skipped above `reduction_limit` launches, see ScheduleStats).
//
// Fallback. build_schedule decides per program whether parallel execution can gain; when
// not, the schedule is marked sequential (ScheduleStats::fallback_reason) and the
// executor runs execute_sequential. Thresholds are options (ScheduleOptions).
//
// Determinism. Kernels are deterministic and every conflicting pair of tasks is ordered,
// so a parallel run writes exactly the bytes a sequential run writes.
//
// Errors: Status/Result, never exceptions (kInvalidArgument for a malformed Program or a
// schedule that does not belong to the program; kNotFound from remove_edge; kInternal
// when a TBB call fails or, with fail_on_hazard, when the checker finds a race).
//
// Thread-safety: a Schedule is immutable after build_schedule except for remove_edge (a
// test/debug hook; not concurrently with runs). Runs keep all per-run state on their own,
// so any number of runs may read one Schedule at once; the Program's arena is what
// limits a program to one run at a time (the caller serialises, as CompiledProgram::run
// does). ParallelExecutor::run may be called concurrently; those runs share its threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "carve/runtime/executor.h"
#include "carve/runtime/program.h"
#include "carve/status.h"

namespace carve::runtime {

// ---------------------------------------------------------------------------------------
// Conflicts between two launches' byte ranges.

enum class HazardKind : uint8_t { kRaw = 1, kWar = 2, kWaw = 4 };
using HazardKinds = uint8_t;  // bit set of HazardKind
// "RAW", "WAR+WAW", ... ("none" for 0).
std::string hazard_kinds_name(HazardKinds kinds);

struct RangeConflict {
  HazardKind kind = HazardKind::kRaw;
  MemoryRef earlier, later;  // the two ranges; `earlier` belongs to the launch first in program order
};

// Every conflicting pair of ranges between `earlier` and `later` (program order): RAW for
// an earlier write and a later read, WAR for an earlier read and a later write, WAW for
// two writes. Empty when the launches are independent.
std::vector<RangeConflict> range_conflicts(const Launch& earlier, const Launch& later);
// True when every conflict is arena bytes of two different, known (>= 0) planned buffers:
// the dependence exists only because the plan reuses bytes. False for an empty list.
bool conflicts_from_arena_reuse_only(std::span<const RangeConflict> conflicts);

// "arena:0[64,128)" (region, slot, byte range).
std::string describe_range(const MemoryRef& ref);
// The same range named in `program`: "buffer #17 'x' = storage #3 [4096, 8192)" for an
// arena range (its view's BufferId and name, the arena's storage_id), "handle 'kv' =
// storage #5 [0, 64)", "input 'x' [0, 64)", "output 'y' ...", "constant 'w' ...".
std::string describe_range(const Program& program, const MemoryRef& ref);

// ---------------------------------------------------------------------------------------
// The DAG.

struct ScheduleOptions {
  int threads = 0;            // 0 = std::thread::hardware_concurrency()
  int chunks_per_launch = 0;  // most tasks one launch splits into; 0 = 2 x threads
  // Sequential fallback: run execute_sequential when parallelism cannot gain. It is
  // chosen, first matching reason wins, for: 1 thread; fewer than `min_tasks` tasks; a
  // chain (max width 1); fewer than `min_total_bytes` bytes read + written by all
  // launches together (too little work to pay for task dispatch, in the spirit of XLA's
  // CPU thresholds). allow_fallback = false always runs in parallel.
  bool allow_fallback = true;
  // Always run sequentially (the DAG is still built, for statistics and the checker): the
  // one switch for sequential execution (CompileOptions::schedule, `carve run --sequential`).
  bool sequential = false;
  int64_t min_tasks = 4;
  int64_t min_total_bytes = 256 * 1024;
  // Transitive reduction runs up to this many launches (bitset reachability, launches^2/8
  // bytes); above it the executor follows the unreduced edges (still correct; more
  // counter updates) and ScheduleStats::reduction_note says so.
  int64_t reduction_limit = 20000;
  // Test/debug hook: task edges (from, to) to remove after the DAG is built, as by
  // Schedule::remove_edge. A missing edge fails build_schedule with kNotFound. The runs
  // race by design: generated kernels then compute wrong values, while library kernels
  // (CompileOptions::library_kernels) keep pointers in their scratch and may crash.
  // Compile without them to watch the checker.
  std::vector<std::pair<int32_t, int32_t>> drop_edges{};
};

struct ScheduleTask {
  int32_t launch = 0;  // index into Program::launches
  int32_t chunk = 0;   // 0 .. chunks of its launch - 1
  int64_t tile_begin = 0, tile_end = 1;
};

struct ScheduleEdge {
  int32_t from = 0, to = 0;  // task indices, from < to
  HazardKinds kinds = 0;     // every kind of conflict between the two tasks' ranges
  bool arena_reuse_only = false;  // see conflicts_from_arena_reuse_only
};

struct ScheduleStats {
  int threads = 1;
  int64_t launches = 0;
  int64_t tasks = 0;
  int64_t split_launches = 0;  // launches split into more than one task
  // Task edges the executor follows (after transitive reduction). An edge with several
  // kinds counts under each kind; `edges` counts it once.
  int64_t edges = 0, raw_edges = 0, war_edges = 0, waw_edges = 0;
  int64_t reuse_only_edges = 0;  // edges that exist only because of arena reuse
  // Launch-level dependences: before and after transitive reduction. A launch edge
  // becomes chunks(from) x chunks(to) task edges.
  int64_t launch_edges_before_reduction = 0, launch_edges = 0;
  bool reduced = false;
  std::string reduction_note;  // why the reduction was skipped, when it was
  int64_t critical_path = 0;   // tasks on the longest dependency path
  // Most tasks on one ASAP level (level of a task = tasks on the longest path from a
  // source to it, minus one): an upper bound on useful parallelism.
  int64_t max_width = 0;
  int64_t total_bytes = 0;  // read + write bytes over all launches
  bool sequential_fallback = false;
  std::string fallback_reason;  // empty when parallel
  int64_t removed_edges = 0;    // by remove_edge / drop_edges (debug)

  // One line for logs and `--explain`.
  std::string to_string() const;
};

class Schedule {
 public:
  int threads() const { return stats_.threads; }
  bool sequential() const { return stats_.sequential_fallback; }
  const ScheduleStats& stats() const { return stats_; }
  int32_t task_count() const { return static_cast<int32_t>(tasks_.size()); }
  int64_t launch_count() const { return static_cast<int64_t>(launch_first_task_.size()) - 1; }
  const std::vector<ScheduleTask>& tasks() const { return tasks_; }
  // All edges, sorted by (from, to).
  const std::vector<ScheduleEdge>& edges() const { return edges_; }
  std::span<const int32_t> successors(int32_t task) const;
  int32_t predecessor_count(int32_t task) const { return pred_count_[static_cast<size_t>(task)]; }
  // Tasks with no predecessor.
  const std::vector<int32_t>& sources() const { return sources_; }
  // The tasks of launch `launch`: [first, second).
  std::pair<int32_t, int32_t> launch_tasks(int32_t launch) const;
  bool has_edge(int32_t from, int32_t to) const;

  // Test/debug hook: drop one edge on purpose (the DAG then under-orders its program; the
  // hazard checker and verify_schedule find the race). Recomputes the edge statistics;
  // keeps the fallback decision. kNotFound when there is no such edge. Not concurrently
  // with a run.
  Status remove_edge(int32_t from, int32_t to);

 private:
  friend Result<Schedule> build_schedule(const Program& program, const ScheduleOptions& options);
  void rebuild_adjacency();
  void compute_edge_stats();

  ScheduleStats stats_;
  std::vector<ScheduleTask> tasks_;
  std::vector<int32_t> launch_first_task_{0};  // launches + 1 entries
  std::vector<ScheduleEdge> edges_;
  std::vector<int32_t> succ_offsets_, succ_;  // CSR over edges_
  std::vector<int32_t> pred_count_;
  std::vector<int32_t> sources_;
};

// Builds the DAG for `program` (launches in program order). kInvalidArgument for a
// malformed launch (unknown kernel, kernel without code, bad tile range, negative range,
// a copy without two operands); kNotFound for a drop_edges entry that is not an edge.
Result<Schedule> build_schedule(const Program& program, const ScheduleOptions& options = {});

// ---------------------------------------------------------------------------------------
// Parallel execution.

struct ParallelRunOptions {
  int threads = 0;  // execute_parallel only: 0 = the schedule's threads
  // Hazard checker: record each task's execution interval and worker, and afterwards
  // report every pair of tasks (of different launches) that overlapped in time and whose
  // ranges conflict (RunRecord::hazards). Forces parallel execution (no fallback).
  bool check_hazards = false;
  // Hold each task this long after stamping its start (before its kernel), so that tasks
  // the DAG leaves unordered overlap reliably. For checker tests; 0 = off.
  int64_t stretch_us = 0;
  // Record per-task timings (RunRecord::timings) for write_trace_json.
  bool record_trace = false;
  // With check_hazards: return kInternal naming the first hazard when any is found.
  bool fail_on_hazard = false;
};

struct TaskTiming {
  int64_t start_ns = 0, end_ns = 0;  // std::chrono::steady_clock, since its epoch
  int32_t worker = -1;               // thread slot in the run's task_arena (0 = caller)
};

// Two tasks that ran at the same time although their ranges conflict.
struct Hazard {
  int32_t first_task = 0, second_task = 0;  // first_task < second_task (program order)
  int32_t first_launch = 0, second_launch = 0;
  std::string first_name, second_name;      // launch names
  HazardKinds kinds = 0;
  std::vector<RangeConflict> conflicts;
  TaskTiming first_timing, second_timing;

  // The conflicting ranges named by view/handle/value (describe_range(program, ...)).
  std::string ranges;

  // "RAW race between 'a' (task 3, ...) and 'b' (task 7, ...): RAW buffer #17 'x' = ..."
  std::string to_string() const;
};

struct RunRecord {
  bool parallel = false;        // false: the sequential fallback ran
  std::string fallback_reason;  // why, when !parallel
  int threads = 1;              // task_arena concurrency of the run
  int64_t start_ns = 0, end_ns = 0;
  std::vector<TaskTiming> timings;  // per task (index = task); empty unless check_hazards / record_trace
  bool hazards_checked = false;
  std::vector<Hazard> hazards;
  // CompiledProgram::run: each output's actual shape, output_types() except along a
  // data-dependent extent (ir/extent.h); empty when the run failed.
  std::vector<ir::Shape> output_shapes;
};

// Owns a tbb::task_arena of `threads` slots (0 = hardware concurrency) so repeated runs
// do not pay for arena creation. A Session keeps one per compiled program.
class ParallelExecutor {
 public:
  explicit ParallelExecutor(int threads = 0);
  ~ParallelExecutor();
  ParallelExecutor(ParallelExecutor&&) noexcept;
  ParallelExecutor& operator=(ParallelExecutor&&) noexcept;
  ParallelExecutor(const ParallelExecutor&) = delete;
  ParallelExecutor& operator=(const ParallelExecutor&) = delete;

  int threads() const;  // not on a moved-from executor

  // Runs `program` by `schedule` (built for this program). Sequential fallback when the
  // schedule says so and the checker is off. `record` (optional) receives what ran,
  // timings and hazards. options.threads is ignored (the arena's size is fixed).
  Status run(const Program& program, const Schedule& schedule, const LaunchOperands& operands,
             const ParallelRunOptions& options = {}, RunRecord* record = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-shot: a temporary ParallelExecutor of options.threads (0 = schedule.threads()).
Status execute_parallel(const Program& program, const Schedule& schedule, const LaunchOperands& operands,
                        const ParallelRunOptions& options = {}, RunRecord* record = nullptr);

}  // namespace carve::runtime
