// Hazard checks for a Schedule (schedule.h): dynamic (what a run did) and static (what
// the DAG allows).
//  - find_hazards: from per-task execution intervals (RunRecord::timings), every pair of
//    tasks of different launches whose intervals overlapped and whose ranges conflict.
//    ParallelExecutor::run calls it when ParallelRunOptions::check_hazards is set.
//  - verify_schedule: every pair of conflicting tasks (different launches) must be ordered
//    by the DAG, the earlier one (program order) reaching the later one. Independent of
//    timing, so it catches a missing edge that a lucky run would not show.
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "carve/runtime/program.h"
#include "carve/runtime/schedule.h"
#include "carve/status.h"

namespace carve::runtime {

// Intervals overlap when a.start < b.end && b.start < a.end (touching is not overlap).
// kInvalidArgument when `timings` does not have one entry per task.
Result<std::vector<Hazard>> find_hazards(const Program& program, const Schedule& schedule,
                                         std::span<const TaskTiming> timings);

// A pair of conflicting tasks the DAG leaves unordered.
struct OrderViolation {
  int32_t first_task = 0, second_task = 0;  // program order
  int32_t first_launch = 0, second_launch = 0;
  std::string first_name, second_name;
  HazardKinds kinds = 0;
  std::vector<RangeConflict> conflicts;
  std::string ranges;  // the conflicting ranges named by view, handle or value

  std::string to_string() const;
};

// Every violation (empty when the schedule is sound). Cost: launches^2 range checks plus
// tasks^2/8 bytes of reachability bitsets; kUnsupported above `max_tasks` tasks.
// kInvalidArgument when the schedule was built for another launch count.
Result<std::vector<OrderViolation>> verify_schedule(const Program& program, const Schedule& schedule,
                                                    int64_t max_tasks = 20000);

}  // namespace carve::runtime
