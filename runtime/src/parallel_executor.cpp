// ParallelExecutor: dependency counting on a Schedule inside a tbb::task_arena.
//
// Each run allocates one atomic counter per task (its predecessor count). Sources are
// handed to a tbb::task_group in ranges (split in halves down to a grain); a finished task decrements its successors' counters,
// spawns every successor that reaches zero except one, which it runs itself next (saves a
// spawn on chains). A task's end stamp is written before its successors are released, so
// with the checker on a correctly ordered successor always starts after it ended.
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <algorithm>
#include <memory>
#include <new>
#include <thread>

#include "carve/runtime/hazard_check.h"
#include "carve/runtime/schedule.h"

namespace carve::runtime {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct RunContext {
  const Program& program;
  const Schedule& schedule;
  const LaunchOperands& operands;
  std::atomic<int32_t>* pending = nullptr;
  TaskTiming* timings = nullptr;  // null: no recording
  int64_t stretch_us = 0;
  tbb::task_group* group = nullptr;
};

void run_task(const RunContext& c, int32_t t) {
  const ScheduleTask& task = c.schedule.tasks()[static_cast<size_t>(t)];
  if (c.timings == nullptr) {
    execute_launch(c.program, c.operands, task.launch, task.tile_begin, task.tile_end);
    return;
  }
  TaskTiming& timing = c.timings[static_cast<size_t>(t)];
  const int slot = tbb::this_task_arena::current_thread_index();
  timing.worker = slot == tbb::task_arena::not_initialized ? 0 : slot;
  timing.start_ns = now_ns();
  if (c.stretch_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(c.stretch_us));
  execute_launch(c.program, c.operands, task.launch, task.tile_begin, task.tile_end);
  timing.end_ns = now_ns();
}

// Runs `t`, then keeps running one newly ready successor while spawning the others.
void run_from(const RunContext& c, int32_t t) {
  while (t >= 0) {
    run_task(c, t);
    int32_t next = -1;
    for (int32_t s : c.schedule.successors(t)) {
      if (c.pending[s].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
      if (next < 0) {
        next = s;
      } else {
        c.group->run([&c, s] { run_from(c, s); });
      }
    }
    t = next;
  }
}

// Runs sources [lo, hi): halves are handed to the task_group until a range is at most
// `grain` long, which runs here one after another (a wide graph costs ~threads spawns
// instead of one per source; successors released on the way are spawned as usual).
void run_sources(const RunContext& c, size_t lo, size_t hi, size_t grain) {
  const std::vector<int32_t>& sources = c.schedule.sources();
  if (grain <= 1) {
    // One task per source, oldest first: thieves take sources in order while the caller
    // runs the first (what the stretched checker runs rely on to overlap neighbours).
    for (size_t i = lo + 1; i < hi; ++i) {
      const int32_t s = sources[i];
      c.group->run([&c, s] { run_from(c, s); });
    }
    if (lo < hi) run_from(c, sources[lo]);
    return;
  }
  while (hi - lo > grain) {
    const size_t mid = lo + (hi - lo) / 2;
    c.group->run([&c, mid, hi, grain] { run_sources(c, mid, hi, grain); });
    hi = mid;
  }
  for (size_t i = lo; i < hi; ++i) run_from(c, sources[i]);
}

}  // namespace

struct ParallelExecutor::Impl {
  explicit Impl(int n) : threads(n), arena(n) {}
  int threads;
  tbb::task_arena arena;
};

ParallelExecutor::ParallelExecutor(int threads)
    : impl_(std::make_unique<Impl>(threads > 0 ? threads
                                               : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())))) {}
ParallelExecutor::~ParallelExecutor() = default;
ParallelExecutor::ParallelExecutor(ParallelExecutor&&) noexcept = default;
ParallelExecutor& ParallelExecutor::operator=(ParallelExecutor&&) noexcept = default;

int ParallelExecutor::threads() const { return impl_->threads; }

Status ParallelExecutor::run(const Program& program, const Schedule& schedule, const LaunchOperands& operands,
                             const ParallelRunOptions& options, RunRecord* record) {
  if (schedule.launch_count() != static_cast<int64_t>(program.launches.size()))
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("schedule has {} launches, program has {}: built for another program",
                              schedule.launch_count(), program.launches.size()));
  if (options.stretch_us < 0) return Status(ErrorCode::kInvalidArgument, "ParallelRunOptions::stretch_us < 0");
  RunRecord local;
  RunRecord& rec = record != nullptr ? *record : local;
  rec = RunRecord{};
  const bool timed = options.check_hazards || options.record_trace;
  const auto n = static_cast<size_t>(schedule.task_count());
  if (timed) rec.timings.assign(n, TaskTiming{});

  rec.start_ns = now_ns();
  if (schedule.sequential() && !options.check_hazards) {
    rec.parallel = false;
    rec.fallback_reason = schedule.stats().fallback_reason;
    rec.threads = 1;
    if (timed) {
      // Task by task (same bytes as whole launches: tiles are independent) for the trace.
      for (size_t t = 0; t < n; ++t) {
        const ScheduleTask& task = schedule.tasks()[t];
        rec.timings[t].worker = 0;
        rec.timings[t].start_ns = now_ns();
        execute_launch(program, operands, task.launch, task.tile_begin, task.tile_end);
        rec.timings[t].end_ns = now_ns();
      }
    } else {
      execute_sequential(program, operands);
    }
    rec.end_ns = now_ns();
    return operands.failed_check(program);
  }

  rec.parallel = true;
  rec.threads = impl_->threads;
  if (n > 0) {
    try {
      std::unique_ptr<std::atomic<int32_t>[]> pending(new std::atomic<int32_t>[n]);
      for (size_t t = 0; t < n; ++t)
        pending[t].store(schedule.predecessor_count(static_cast<int32_t>(t)), std::memory_order_relaxed);
      RunContext ctx{program, schedule, operands, pending.get(), timed ? rec.timings.data() : nullptr, options.stretch_us,
                     nullptr};
      impl_->arena.execute([&] {
        tbb::task_group group;
        ctx.group = &group;
        const size_t sources = schedule.sources().size();
        // Every source its own task when the checker stretches tasks (so unordered tasks
        // overlap); otherwise ~4 ranges per thread.
        const size_t per_thread_ranges = 4 * static_cast<size_t>(impl_->threads);
        const size_t grain =
            timed && options.stretch_us > 0 ? 1 : std::max<size_t>(1, sources / per_thread_ranges);
        group.run_and_wait([&ctx, sources, grain] { run_sources(ctx, 0, sources, grain); });
      });
    } catch (const std::bad_alloc&) {
      return Status(ErrorCode::kOutOfMemory, "parallel executor: out of memory");
    } catch (const std::exception& e) {
      return Status(ErrorCode::kInternal, fmt::format("parallel executor: {}", e.what()));
    } catch (...) {
      return Status(ErrorCode::kInternal, "parallel executor: unknown exception");
    }
  }
  rec.end_ns = now_ns();

  if (options.check_hazards) {
    CARVE_ASSIGN_OR_RETURN(rec.hazards, find_hazards(program, schedule, rec.timings));
    rec.hazards_checked = true;
    if (options.fail_on_hazard && !rec.hazards.empty())
      return Status(ErrorCode::kInternal, fmt::format("hazard checker: {} race(s); first: {}", rec.hazards.size(),
                                                      rec.hazards.front().to_string()));
  }
  return operands.failed_check(program);
}

Status execute_parallel(const Program& program, const Schedule& schedule, const LaunchOperands& operands,
                        const ParallelRunOptions& options, RunRecord* record) {
  if (options.threads < 0) return Status(ErrorCode::kInvalidArgument, "ParallelRunOptions::threads < 0");
  ParallelExecutor executor(options.threads > 0 ? options.threads : schedule.threads());
  return executor.run(program, schedule, operands, options, record);
}

}  // namespace carve::runtime
