// Hazard checker (overlapping execution intervals with conflicting ranges) and the static
// schedule verifier (conflicting tasks must be ordered by reachability).
#include "carve/runtime/hazard_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

namespace carve::runtime {

namespace {

// The conflicts with their ranges named by view, handle or value.
std::string conflicts_text(const Program& program, std::span<const RangeConflict> conflicts) {
  std::string s;
  for (const RangeConflict& c : conflicts) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{} {} vs {}", hazard_kinds_name(static_cast<HazardKinds>(c.kind)),
                     describe_range(program, c.earlier), describe_range(program, c.later));
  }
  return s;
}

HazardKinds kinds_of(std::span<const RangeConflict> conflicts) {
  HazardKinds k = 0;
  for (const RangeConflict& c : conflicts) k |= static_cast<HazardKinds>(c.kind);
  return k;
}

// Caches range_conflicts per ordered launch pair.
class ConflictCache {
 public:
  explicit ConflictCache(const Program& program) : program_(program) {}
  const std::vector<RangeConflict>& get(int32_t earlier, int32_t later) {
    auto [it, inserted] = cache_.try_emplace({earlier, later});
    if (inserted)
      it->second = range_conflicts(program_.launches[static_cast<size_t>(earlier)],
                                   program_.launches[static_cast<size_t>(later)]);
    return it->second;
  }

 private:
  const Program& program_;
  std::map<std::pair<int32_t, int32_t>, std::vector<RangeConflict>> cache_;
};

}  // namespace

std::string Hazard::to_string() const {
  return fmt::format(
      "{} race between '{}' (task {}, worker {}, [{}, {}) ns) and '{}' (task {}, worker {}, [{}, {}) ns): {}",
      hazard_kinds_name(kinds), first_name, first_task, first_timing.worker, first_timing.start_ns,
      first_timing.end_ns, second_name, second_task, second_timing.worker, second_timing.start_ns,
      second_timing.end_ns, ranges);
}

std::string OrderViolation::to_string() const {
  return fmt::format("{} conflict between '{}' (task {}) and '{}' (task {}) is not ordered by the schedule: {}",
                     hazard_kinds_name(kinds), first_name, first_task, second_name, second_task, ranges);
}

Result<std::vector<Hazard>> find_hazards(const Program& program, const Schedule& schedule,
                                         std::span<const TaskTiming> timings) {
  if (timings.size() != static_cast<size_t>(schedule.task_count()))
    return Status(ErrorCode::kInvalidArgument, fmt::format("find_hazards: {} timings for {} tasks", timings.size(),
                                                           schedule.task_count()));
  if (schedule.launch_count() != static_cast<int64_t>(program.launches.size()))
    return Status(ErrorCode::kInvalidArgument, "find_hazards: schedule built for another program");
  const auto& tasks = schedule.tasks();
  std::vector<int32_t> by_start(timings.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](int32_t a, int32_t b) {
    return timings[static_cast<size_t>(a)].start_ns < timings[static_cast<size_t>(b)].start_ns;
  });
  ConflictCache cache(program);
  std::vector<Hazard> hazards;
  std::vector<int32_t> active;  // started, maybe not yet ended
  for (int32_t b : by_start) {
    const TaskTiming& tb = timings[static_cast<size_t>(b)];
    std::erase_if(active, [&](int32_t a) { return timings[static_cast<size_t>(a)].end_ns <= tb.start_ns; });
    for (int32_t a : active) {
      const TaskTiming& ta = timings[static_cast<size_t>(a)];
      if (!(ta.start_ns < tb.end_ns && tb.start_ns < ta.end_ns)) continue;
      const int32_t first = std::min(a, b), second = std::max(a, b);
      const int32_t la = tasks[static_cast<size_t>(first)].launch, lb = tasks[static_cast<size_t>(second)].launch;
      if (la == lb) continue;  // tiles of one launch never conflict
      const std::vector<RangeConflict>& conflicts = cache.get(la, lb);
      if (conflicts.empty()) continue;
      Hazard h;
      h.first_task = first;
      h.second_task = second;
      h.first_launch = la;
      h.second_launch = lb;
      h.first_name = program.launches[static_cast<size_t>(la)].name;
      h.second_name = program.launches[static_cast<size_t>(lb)].name;
      h.conflicts = conflicts;
      h.ranges = conflicts_text(program, conflicts);
      h.kinds = kinds_of(conflicts);
      h.first_timing = timings[static_cast<size_t>(first)];
      h.second_timing = timings[static_cast<size_t>(second)];
      hazards.push_back(std::move(h));
    }
    active.push_back(b);
  }
  std::sort(hazards.begin(), hazards.end(), [](const Hazard& x, const Hazard& y) {
    return std::pair(x.first_task, x.second_task) < std::pair(y.first_task, y.second_task);
  });
  return hazards;
}

Result<std::vector<OrderViolation>> verify_schedule(const Program& program, const Schedule& schedule,
                                                    int64_t max_tasks) {
  if (schedule.launch_count() != static_cast<int64_t>(program.launches.size()))
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("verify_schedule: schedule has {} launches, program has {}", schedule.launch_count(),
                              program.launches.size()));
  const auto n = static_cast<size_t>(schedule.task_count());
  if (static_cast<int64_t>(n) > max_tasks)
    return Status(ErrorCode::kUnsupported,
                  fmt::format("verify_schedule: {} tasks > max_tasks {}", n, max_tasks));
  // Ancestors of every task (task indices are topological: edges go forward).
  const size_t words = (n + 63) / 64;
  std::vector<uint64_t> anc(n * words, 0);
  for (const ScheduleEdge& e : schedule.edges()) {
    if (e.from >= e.to)
      return Status(ErrorCode::kInternal, fmt::format("verify_schedule: backward edge {} -> {}", e.from, e.to));
  }
  // Edges sorted by from; process targets in ascending order via predecessor lists.
  std::vector<std::vector<int32_t>> preds(n);
  for (const ScheduleEdge& e : schedule.edges()) preds[static_cast<size_t>(e.to)].push_back(e.from);
  for (size_t v = 0; v < n; ++v) {
    uint64_t* row = &anc[v * words];
    for (int32_t p : preds[v]) {
      const auto u = static_cast<size_t>(p);
      const uint64_t* urow = &anc[u * words];
      for (size_t w = 0; w < words; ++w) row[w] |= urow[w];
      row[u / 64] |= uint64_t{1} << (u % 64);
    }
  }
  std::vector<OrderViolation> out;
  const size_t launches = program.launches.size();
  for (size_t j = 0; j < launches; ++j) {
    for (size_t i = 0; i < j; ++i) {
      const auto conflicts = range_conflicts(program.launches[i], program.launches[j]);
      if (conflicts.empty()) continue;
      const auto [ib, ie] = schedule.launch_tasks(static_cast<int32_t>(i));
      const auto [jb, je] = schedule.launch_tasks(static_cast<int32_t>(j));
      for (int32_t a = ib; a < ie; ++a)
        for (int32_t b = jb; b < je; ++b) {
          const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
          if ((anc[ub * words + ua / 64] >> (ua % 64)) & 1u) continue;
          OrderViolation v;
          v.first_task = a;
          v.second_task = b;
          v.first_launch = static_cast<int32_t>(i);
          v.second_launch = static_cast<int32_t>(j);
          v.first_name = program.launches[i].name;
          v.second_name = program.launches[j].name;
          v.conflicts = conflicts;
          v.ranges = conflicts_text(program, conflicts);
          v.kinds = kinds_of(conflicts);
          out.push_back(std::move(v));
        }
    }
  }
  std::sort(out.begin(), out.end(), [](const OrderViolation& x, const OrderViolation& y) {
    return std::pair(x.first_task, x.second_task) < std::pair(y.first_task, y.second_task);
  });
  return out;
}

}  // namespace carve::runtime
