// Chrome / Perfetto trace-event JSON for a parallel run (trace.h).
#include "carve/runtime/trace.h"
#include "carve/file.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace carve::runtime {

namespace {

std::string storage_id(const MemoryRef& r) { return fmt::format("{}:{}", region_name(r.region), r.slot); }

nlohmann::json ranges_json(const Program& program, const std::vector<MemoryRef>& refs,
                           std::set<std::string>& storages) {
  nlohmann::json list = nlohmann::json::array();
  for (const MemoryRef& r : refs) {
    storages.insert(storage_id(r));
    list.push_back({{"storage", storage_id(r)},
                    {"region", std::string(region_name(r.region))},
                    {"slot", r.slot},
                    {"begin", r.offset},
                    {"end", r.offset + r.bytes},
                    {"buffer", r.buffer},
                    {"view", describe_range(program, r)}});
  }
  return list;
}

}  // namespace

Result<std::string> trace_json(const Program& program, const Schedule& schedule, const RunRecord& record) {
  if (record.timings.empty() && schedule.task_count() > 0)
    return Status(ErrorCode::kInvalidArgument,
                  "trace_json: the run recorded no timings (set ParallelRunOptions::record_trace)");
  if (record.timings.size() != static_cast<size_t>(schedule.task_count()))
    return Status(ErrorCode::kInvalidArgument, fmt::format("trace_json: {} timings for {} tasks",
                                                           record.timings.size(), schedule.task_count()));
  if (schedule.launch_count() != static_cast<int64_t>(program.launches.size()))
    return Status(ErrorCode::kInvalidArgument, "trace_json: schedule built for another program");

  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 0},
                    {"args", {{"name", record.parallel ? "carve parallel run" : "carve sequential run"}}}});
  std::set<int32_t> workers;
  for (const TaskTiming& t : record.timings) workers.insert(t.worker);
  for (int32_t w : workers)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", w + 1},
                      {"args", {{"name", w == 0 ? std::string("worker 0 (caller)") : fmt::format("worker {}", w)}}}});
  const auto& tasks = schedule.tasks();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ScheduleTask& task = tasks[i];
    const TaskTiming& t = record.timings[i];
    const Launch& launch = program.launches[static_cast<size_t>(task.launch)];
    std::set<std::string> storages;
    nlohmann::json args = {{"task", static_cast<int64_t>(i)},
                           {"launch", task.launch},
                           {"chunk", task.chunk},
                           {"kind", std::string(launch_kind_name(launch.kind))},
                           {"tiles", {task.tile_begin, task.tile_end}},
                           {"predecessors", schedule.predecessor_count(static_cast<int32_t>(i))},
                           {"successors", schedule.successors(static_cast<int32_t>(i)).size()}};
    args["reads"] = ranges_json(program, launch.reads, storages);
    args["writes"] = ranges_json(program, launch.writes, storages);
    args["storages"] = storages;
    events.push_back({{"name", launch.name.empty() ? fmt::format("launch {}", task.launch) : launch.name},
                      {"cat", std::string(launch_kind_name(launch.kind))},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", t.worker + 1},
                      {"ts", static_cast<double>(t.start_ns - record.start_ns) / 1000.0},
                      {"dur", static_cast<double>(std::max<int64_t>(0, t.end_ns - t.start_ns)) / 1000.0},
                      {"args", std::move(args)}});
  }
  const ScheduleStats& st = schedule.stats();
  nlohmann::json doc = {{"traceEvents", std::move(events)},
                        {"displayTimeUnit", "ns"},
                        {"otherData",
                         {{"schedule", st.to_string()},
                          {"parallel", record.parallel},
                          {"fallback_reason", record.fallback_reason},
                          {"threads", record.threads},
                          {"hazards", record.hazards.size()}}}};
  return doc.dump(1);
}

Status write_trace_json(const std::string& path, const Program& program, const Schedule& schedule,
                        const RunRecord& record) {
  CARVE_ASSIGN_OR_RETURN(std::string text, trace_json(program, schedule, record));
  return write_file(path, text);
}

}  // namespace carve::runtime
