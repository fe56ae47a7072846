// Stream plan (stream_plan.h): greedy stream assignment + vector-clock wait pruning.
#include "carve/runtime/stream_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace carve::runtime {
namespace {

using Clock = std::vector<int32_t>;  // per stream: highest position known complete (-1: none)

void merge(Clock& into, const Clock& from) {
  for (size_t s = 0; s < into.size(); ++s) into[s] = std::max(into[s], from[s]);
}

Status check_edges(int32_t tasks, std::span<const std::pair<int32_t, int32_t>> edges) {
  for (const auto& [from, to] : edges)
    if (from < 0 || to >= tasks || from >= to)
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("stream plan: edge ({}, {}) is not a forward edge among {} tasks", from, to, tasks));
  return Status();
}

}  // namespace

std::string StreamPlan::to_string() const {
  return fmt::format("{} streams ({} used), {} edges, {} cross-stream, {} waits, {} events", streams, streams_used,
                     edges, cross_stream_edges, waits_total, events);
}

Result<StreamPlan> plan_streams(int32_t tasks, std::span<const std::pair<int32_t, int32_t>> edges,
                                const StreamPlanOptions& options) {
  if (options.streams < 1)
    return Status(ErrorCode::kInvalidArgument, fmt::format("stream plan: {} streams (< 1)", options.streams));
  if (tasks < 0) return Status(ErrorCode::kInvalidArgument, fmt::format("stream plan: {} tasks", tasks));
  CARVE_RETURN_IF_ERROR(check_edges(tasks, edges));
  const auto n = static_cast<size_t>(tasks);
  if (!options.host.empty() && options.host.size() != n)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("stream plan: host mask of {} for {} tasks", options.host.size(), tasks));
  const bool has_host = std::find(options.host.begin(), options.host.end(), 1) != options.host.end();
  const auto devices = static_cast<size_t>(options.streams);
  const size_t k = devices + (has_host ? 1 : 0);  // the host stream last
  std::vector<std::vector<int32_t>> preds(n);
  for (const auto& [from, to] : edges) preds[static_cast<size_t>(to)].push_back(from);

  StreamPlan plan;
  plan.streams = options.streams;
  plan.stream_of.assign(n, 0);
  plan.position.assign(n, 0);
  plan.waits.assign(n, {});
  plan.records.assign(n, 0);
  plan.edges = static_cast<int64_t>(edges.size());
  plan.host_stream = has_host ? options.streams : -1;
  std::vector<Clock> clock(n);
  std::vector<Clock> current(k, Clock(k, -1));  // clock of each stream's last task
  std::vector<int32_t> tail(k, -1), count(k, 0);

  for (size_t t = 0; t < n; ++t) {
    auto& ps = preds[t];
    std::sort(ps.begin(), ps.end(), std::greater<>());  // later predecessors first: their clocks cover more
    ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
    const bool host = has_host && options.host[t] != 0;
    int32_t s = host ? plan.host_stream : -1;
    for (int32_t p : ps) {
      const int32_t ps_stream = plan.stream_of[static_cast<size_t>(p)];
      if (s >= 0) break;
      if (ps_stream != plan.host_stream && tail[static_cast<size_t>(ps_stream)] == p) s = ps_stream;
    }
    if (s < 0)
      s = static_cast<int32_t>(std::min_element(count.begin(), count.begin() + static_cast<std::ptrdiff_t>(devices)) -
                               count.begin());
    const auto su = static_cast<size_t>(s);
    Clock known = current[su];
    for (int32_t p : ps) {
      const auto pu = static_cast<size_t>(p);
      const auto ps_stream = static_cast<size_t>(plan.stream_of[pu]);
      if (ps_stream == su) continue;  // FIFO order on the stream
      ++plan.cross_stream_edges;
      if (known[ps_stream] >= plan.position[pu]) continue;  // implied by an earlier wait
      plan.waits[t].push_back(p);
      plan.records[pu] = 1;
      merge(known, clock[pu]);
    }
    std::sort(plan.waits[t].begin(), plan.waits[t].end());
    plan.stream_of[t] = s;
    plan.position[t] = count[su]++;
    known[su] = plan.position[t];
    clock[t] = known;
    current[su] = std::move(known);
    tail[su] = static_cast<int32_t>(t);
    plan.waits_total += static_cast<int64_t>(plan.waits[t].size());
  }
  for (uint8_t r : plan.records) plan.events += r;
  for (size_t d = 0; d < devices; ++d) plan.streams_used += count[d] > 0;
  return plan;
}

Result<StreamPlan> plan_streams(const Schedule& schedule, const StreamPlanOptions& options) {
  std::vector<std::pair<int32_t, int32_t>> edges;
  edges.reserve(schedule.edges().size());
  for (const ScheduleEdge& e : schedule.edges()) edges.emplace_back(e.from, e.to);
  return plan_streams(schedule.task_count(), edges, options);
}

Status verify_stream_plan(int32_t tasks, std::span<const std::pair<int32_t, int32_t>> edges, const StreamPlan& plan) {
  CARVE_RETURN_IF_ERROR(check_edges(tasks, edges));
  const auto n = static_cast<size_t>(tasks);
  if (plan.stream_of.size() != n || plan.position.size() != n || plan.waits.size() != n || plan.records.size() != n)
    return Status(ErrorCode::kInternal, fmt::format("stream plan has the wrong size for {} tasks", tasks));
  const auto k = static_cast<size_t>(std::max(plan.streams, 1)) + (plan.host_stream >= 0 ? 1 : 0);
  if (plan.host_stream >= 0 && plan.host_stream != plan.streams)
    return Status(ErrorCode::kInternal, fmt::format("host stream {} is not stream {}", plan.host_stream, plan.streams));
  std::vector<Clock> clock(n);
  std::vector<Clock> current(k, Clock(k, -1));
  std::vector<int32_t> count(k, 0);
  for (size_t t = 0; t < n; ++t) {
    const int32_t s = plan.stream_of[t];
    if (s < 0 || static_cast<size_t>(s) >= k)
      return Status(ErrorCode::kInternal, fmt::format("task {} is on stream {} of {}", t, s, k));
    const auto su = static_cast<size_t>(s);
    if (plan.position[t] != count[su])
      return Status(ErrorCode::kInternal, fmt::format("task {}: position {} on stream {}, expected {}", t,
                                                      plan.position[t], s, count[su]));
    Clock known = current[su];
    for (int32_t w : plan.waits[t]) {
      if (w < 0 || static_cast<size_t>(w) >= t || plan.stream_of[static_cast<size_t>(w)] == s ||
          !plan.records[static_cast<size_t>(w)])
        return Status(ErrorCode::kInternal, fmt::format("task {} waits for task {}, which is not an earlier, "
                                                        "recorded task of another stream", t, w));
      merge(known, clock[static_cast<size_t>(w)]);
    }
    known[su] = count[su]++;
    clock[t] = known;
    current[su] = known;
  }
  for (const auto& [from, to] : edges) {
    const auto f = static_cast<size_t>(from);
    if (clock[static_cast<size_t>(to)][static_cast<size_t>(plan.stream_of[f])] < plan.position[f])
      return Status(ErrorCode::kInternal,
                    fmt::format("edge ({}, {}) is not ordered: task {} (stream {}) may run before task {} "
                                "(stream {}) completes", from, to, to, plan.stream_of[static_cast<size_t>(to)], from,
                                plan.stream_of[f]));
  }
  return Status();
}

}  // namespace carve::runtime
