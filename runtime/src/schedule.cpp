// build_schedule: launch-level dependences from per-storage byte segments, transitive
// reduction on launches, expansion to tile-range tasks, statistics, fallback decision.
#include "carve/runtime/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <thread>
#include <utility>

namespace carve::runtime {

std::string hazard_kinds_name(HazardKinds kinds) {
  std::string s;
  auto add = [&](HazardKind k, const char* name) {
    if (kinds & static_cast<HazardKinds>(k)) {
      if (!s.empty()) s += '+';
      s += name;
    }
  };
  add(HazardKind::kRaw, "RAW");
  add(HazardKind::kWar, "WAR");
  add(HazardKind::kWaw, "WAW");
  return s.empty() ? "none" : s;
}

std::string describe_range(const MemoryRef& ref) {
  return fmt::format("{}:{}[{},{})", region_name(ref.region), ref.slot, ref.offset, ref.offset + ref.bytes);
}

std::string describe_range(const Program& program, const MemoryRef& ref) {
  const std::string range = fmt::format("[{}, {})", ref.offset, ref.offset + ref.bytes);
  const auto slot = static_cast<size_t>(ref.slot);
  auto value_name = [&](const std::vector<ir::ValueId>& values) {
    return slot < values.size() ? program.graph.value(values[slot]).name : fmt::format("#{}", ref.slot);
  };
  switch (ref.region) {
    case Region::kArena: {
      if (!program.arena || ref.view < 0 || static_cast<size_t>(ref.view) >= program.arena->views().size())
        return fmt::format("arena {}", range);
      const ArenaView& v = program.arena->views()[static_cast<size_t>(ref.view)];
      return fmt::format("buffer #{} '{}' = storage #{} {}", v.buffer.id().value, v.name, v.buffer.storage_id().value,
                         range);
    }
    case Region::kHandle:
      if (slot < program.handles.size() && program.handles[slot])
        return fmt::format("handle '{}' = storage #{} {}", program.handles[slot]->name(),
                           program.handles[slot]->memory().storage_id().value, range);
      return fmt::format("handle #{} {}", ref.slot, range);
    case Region::kInput: return fmt::format("input '{}' {}", value_name(program.inputs), range);
    case Region::kOutput: return fmt::format("output '{}' {}", value_name(program.outputs), range);
    case Region::kConstant: return fmt::format("constant '{}' {}", value_name(program.constants), range);
    default: return describe_range(ref);
  }
}

std::vector<RangeConflict> range_conflicts(const Launch& earlier, const Launch& later) {
  std::vector<RangeConflict> out;
  for (const MemoryRef& w : earlier.writes) {
    for (const MemoryRef& r : later.reads)
      if (w.overlaps(r)) out.push_back({HazardKind::kRaw, w, r});
    for (const MemoryRef& w2 : later.writes)
      if (w.overlaps(w2)) out.push_back({HazardKind::kWaw, w, w2});
  }
  for (const MemoryRef& r : earlier.reads)
    for (const MemoryRef& w : later.writes)
      if (r.overlaps(w)) out.push_back({HazardKind::kWar, r, w});
  return out;
}

bool conflicts_from_arena_reuse_only(std::span<const RangeConflict> conflicts) {
  if (conflicts.empty()) return false;
  for (const RangeConflict& c : conflicts) {
    if (c.earlier.region != Region::kArena || c.later.region != Region::kArena) return false;
    if (c.earlier.buffer < 0 || c.later.buffer < 0 || c.earlier.buffer == c.later.buffer) return false;
  }
  return true;
}

std::string ScheduleStats::to_string() const {
  std::string s = fmt::format(
      "{} launches -> {} tasks ({} split), {} edges (RAW {}, WAR {}, WAW {}; {} from arena reuse only), "
      "launch edges {} -> {}, critical path {} tasks, max width {}, {} bytes, {} threads",
      launches, tasks, split_launches, edges, raw_edges, war_edges, waw_edges, reuse_only_edges,
      launch_edges_before_reduction, launch_edges, critical_path, max_width, total_bytes, threads);
  if (!reduced) s += fmt::format("; not reduced: {}", reduction_note);
  s += sequential_fallback ? fmt::format("; sequential: {}", fallback_reason) : std::string("; parallel");
  if (removed_edges > 0) s += fmt::format("; {} edges removed by hand", removed_edges);
  return s;
}

std::span<const int32_t> Schedule::successors(int32_t task) const {
  const auto t = static_cast<size_t>(task);
  return std::span<const int32_t>(succ_.data() + succ_offsets_[t], succ_.data() + succ_offsets_[t + 1]);
}

std::pair<int32_t, int32_t> Schedule::launch_tasks(int32_t launch) const {
  const auto l = static_cast<size_t>(launch);
  return {launch_first_task_[l], launch_first_task_[l + 1]};
}

namespace {
bool edge_less(const ScheduleEdge& e, std::pair<int32_t, int32_t> key) {
  return std::pair(e.from, e.to) < key;
}
}  // namespace

bool Schedule::has_edge(int32_t from, int32_t to) const {
  auto it = std::lower_bound(edges_.begin(), edges_.end(), std::pair(from, to), edge_less);
  return it != edges_.end() && it->from == from && it->to == to;
}

Status Schedule::remove_edge(int32_t from, int32_t to) {
  auto it = std::lower_bound(edges_.begin(), edges_.end(), std::pair(from, to), edge_less);
  if (it == edges_.end() || it->from != from || it->to != to)
    return Status(ErrorCode::kNotFound, fmt::format("schedule has no edge task {} -> task {}", from, to));
  edges_.erase(it);
  ++stats_.removed_edges;
  rebuild_adjacency();
  compute_edge_stats();
  return Status();
}

void Schedule::rebuild_adjacency() {
  const size_t n = tasks_.size();
  succ_offsets_.assign(n + 1, 0);
  pred_count_.assign(n, 0);
  for (const ScheduleEdge& e : edges_) {
    ++succ_offsets_[static_cast<size_t>(e.from) + 1];
    ++pred_count_[static_cast<size_t>(e.to)];
  }
  for (size_t i = 0; i < n; ++i) succ_offsets_[i + 1] += succ_offsets_[i];
  succ_.resize(edges_.size());
  // edges_ is sorted by from, so CSR order equals edge order.
  for (size_t i = 0; i < edges_.size(); ++i) succ_[i] = edges_[i].to;
  sources_.clear();
  for (size_t i = 0; i < n; ++i)
    if (pred_count_[i] == 0) sources_.push_back(static_cast<int32_t>(i));
}

void Schedule::compute_edge_stats() {
  ScheduleStats& s = stats_;
  s.edges = static_cast<int64_t>(edges_.size());
  s.raw_edges = s.war_edges = s.waw_edges = s.reuse_only_edges = 0;
  for (const ScheduleEdge& e : edges_) {
    s.raw_edges += (e.kinds & static_cast<HazardKinds>(HazardKind::kRaw)) ? 1 : 0;
    s.war_edges += (e.kinds & static_cast<HazardKinds>(HazardKind::kWar)) ? 1 : 0;
    s.waw_edges += (e.kinds & static_cast<HazardKinds>(HazardKind::kWaw)) ? 1 : 0;
    s.reuse_only_edges += e.arena_reuse_only ? 1 : 0;
  }
  // ASAP levels; task indices are a topological order (edges go forward).
  std::vector<int64_t> level(tasks_.size(), 0);
  int64_t max_level = -1;
  for (size_t t = 0; t < tasks_.size(); ++t) {
    max_level = std::max(max_level, level[t]);
    for (int32_t s2 : successors(static_cast<int32_t>(t)))
      level[static_cast<size_t>(s2)] = std::max(level[static_cast<size_t>(s2)], level[t] + 1);
  }
  s.critical_path = max_level + 1;
  std::vector<int64_t> width(static_cast<size_t>(max_level + 1), 0);
  for (int64_t l : level) ++width[static_cast<size_t>(l)];
  s.max_width = width.empty() ? 0 : *std::max_element(width.begin(), width.end());
}

namespace {

// Arena bytes are reached through views (executor.h): an arena range must lie inside the
// view it names. Empty when it does.
std::string arena_view_error(const Program& program, const MemoryRef& r) {
  if (r.region != Region::kArena) return {};
  const size_t views = program.arena ? program.arena->views().size() : 0;
  if (r.view < 0 || static_cast<size_t>(r.view) >= views)
    return fmt::format("arena range {} names no view (view {} of {})", describe_range(r), r.view, views);
  const Buffer& v = program.arena->views()[static_cast<size_t>(r.view)].buffer;
  const auto begin = static_cast<int64_t>(v.offset());
  if (r.offset < begin || r.offset + r.bytes > begin + static_cast<int64_t>(v.size()))
    return fmt::format("arena range {} is outside its view {}", describe_range(r), v.describe());
  return {};
}

Status validate_launch(const Program& program, const Launch& launch, size_t index) {
  auto bad = [&](std::string_view why) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("launch {} '{}': {}", index, launch.name, why));
  };
  if (launch.kind == LaunchKind::kKernel) {
    if (launch.kernel < 0 || static_cast<size_t>(launch.kernel) >= program.kernels.size())
      return bad(fmt::format("kernel index {} out of range ({} kernels)", launch.kernel, program.kernels.size()));
    if (!program.on_device && !program.kernels[static_cast<size_t>(launch.kernel)].has_code())
      return bad("kernel has no code");
    if (launch.tile_begin < 0 || launch.tile_end < launch.tile_begin)
      return bad(fmt::format("bad tile range [{},{})", launch.tile_begin, launch.tile_end));
  } else if (launch.operands.size() != 2) {
    return bad(fmt::format("a {} needs {{source, destination}} operands", launch_kind_name(launch.kind)));
  }
  for (const auto* list : {&launch.reads, &launch.writes, &launch.operands})
    for (const MemoryRef& r : *list)
    for (const MemoryRef& r : *list) {
      if (r.offset < 0 || r.bytes < 0 || r.slot < 0) return bad(fmt::format("bad range {}", describe_range(r)));
      if (std::string why = arena_view_error(program, r); !why.empty()) return bad(why);
    }
  // Tiles of a launch run in any order and at once (and a kernel reads and writes element
  // by element), so a write may share bytes with a read only as the very same range (in
  // place). Anything else is a planning bug that would race inside the launch.
  for (const MemoryRef& w : launch.writes)
    for (const MemoryRef& r : launch.reads)
      if (w.overlaps(r) && (w.offset != r.offset || w.bytes != r.bytes))
        return bad(fmt::format("writes {} over part of what it reads ({}): not in place, tiles would race",
                               describe_range(w), describe_range(r)));
  return Status();
}

// Byte segments of one storage: who last wrote them and who read them since.
struct Segment {
  int64_t end = 0;
  int32_t writer = -1;
  std::vector<int32_t> readers;  // launches, ascending, since the last write
};
using SegmentMap = std::map<int64_t, Segment>;  // keyed by begin; disjoint

void split_at(SegmentMap& m, int64_t x) {
  auto it = m.upper_bound(x);
  if (it == m.begin()) return;
  --it;
  if (it->first < x && x < it->second.end) {
    Segment right = it->second;
    it->second.end = x;
    m.emplace(x, std::move(right));
  }
}

// Calls f(segment) for each existing segment overlapping [b, e).
template <typename F>
void for_overlapping(const SegmentMap& m, int64_t b, int64_t e, F&& f) {
  auto it = m.upper_bound(b);
  if (it != m.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > b) it = prev;
  }
  for (; it != m.end() && it->first < e; ++it) f(it->second);
}

// Makes [b, e) covered by segments whose boundaries include b and e.
void cover(SegmentMap& m, int64_t b, int64_t e) {
  split_at(m, b);
  split_at(m, e);
  int64_t pos = b;
  auto it = m.lower_bound(b);
  while (pos < e) {
    if (it == m.end() || it->first > pos) {
      const int64_t gap_end = (it == m.end()) ? e : std::min(e, it->first);
      it = m.emplace_hint(it, pos, Segment{gap_end, -1, {}});
    }
    pos = it->second.end;
    ++it;
  }
}

struct StorageKey {
  Region region;
  int32_t slot;
  auto operator<=>(const StorageKey&) const = default;
};

// Predecessor launches of every launch: a subset of the conflicting earlier launches whose
// transitive closure equals that of all conflicts (last writer for RAW/WAW, readers since
// the last write for WAR).
std::vector<std::vector<int32_t>> launch_predecessors(const Program& program) {
  std::map<StorageKey, SegmentMap> storages;
  const size_t n = program.launches.size();
  std::vector<std::vector<int32_t>> preds(n);
  for (size_t li = 0; li < n; ++li) {
    const Launch& L = program.launches[li];
    const auto self = static_cast<int32_t>(li);
    std::vector<int32_t>& p = preds[li];
    for (const MemoryRef& r : L.reads) {
      if (r.bytes <= 0) continue;
      auto found = storages.find({r.region, r.slot});
      if (found == storages.end()) continue;
      for_overlapping(found->second, r.offset, r.offset + r.bytes, [&](const Segment& s) {
        if (s.writer >= 0 && s.writer != self) p.push_back(s.writer);
      });
    }
    for (const MemoryRef& w : L.writes) {
      if (w.bytes <= 0) continue;
      auto found = storages.find({w.region, w.slot});
      if (found == storages.end()) continue;
      for_overlapping(found->second, w.offset, w.offset + w.bytes, [&](const Segment& s) {
        if (s.writer >= 0 && s.writer != self) p.push_back(s.writer);
        for (int32_t reader : s.readers)
          if (reader != self) p.push_back(reader);
      });
    }
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    // Update: reads first, then writes (a launch that reads and writes a byte ends as its writer).
    for (const MemoryRef& r : L.reads) {
      if (r.bytes <= 0) continue;
      SegmentMap& m = storages[{r.region, r.slot}];
      cover(m, r.offset, r.offset + r.bytes);
      for (auto it = m.lower_bound(r.offset); it != m.end() && it->first < r.offset + r.bytes; ++it)
        if (it->second.readers.empty() || it->second.readers.back() != self) it->second.readers.push_back(self);
    }
    for (const MemoryRef& w : L.writes) {
      if (w.bytes <= 0) continue;
      SegmentMap& m = storages[{w.region, w.slot}];
      cover(m, w.offset, w.offset + w.bytes);
      auto first = m.lower_bound(w.offset);
      auto last = m.lower_bound(w.offset + w.bytes);
      m.erase(first, last);
      m.emplace(w.offset, Segment{w.offset + w.bytes, self, {}});
    }
  }
  return preds;
}

// Removes predecessors implied through other predecessors. Launch indices are a
// topological order. Bitset ancestors: n^2/8 bytes.
void transitive_reduction(std::vector<std::vector<int32_t>>& preds) {
  const size_t n = preds.size();
  const size_t words = (n + 63) / 64;
  std::vector<uint64_t> anc(n * words, 0);
  for (size_t v = 0; v < n; ++v) {
    std::vector<int32_t>& p = preds[v];
    uint64_t* row = &anc[v * words];
    std::vector<int32_t> kept;
    // Latest predecessor first: an implied predecessor is an ancestor of a later one.
    for (auto it = p.rbegin(); it != p.rend(); ++it) {
      const auto u = static_cast<size_t>(*it);
      if ((row[u / 64] >> (u % 64)) & 1u) continue;
      kept.push_back(*it);
      const uint64_t* urow = &anc[u * words];
      for (size_t w = 0; w < words; ++w) row[w] |= urow[w];
      row[u / 64] |= uint64_t{1} << (u % 64);
    }
    std::reverse(kept.begin(), kept.end());
    p = std::move(kept);
  }
}

std::string bytes_text(int64_t b) {
  if (b >= (int64_t{1} << 20) && b % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} bytes", b);
}

}  // namespace

Result<Schedule> build_schedule(const Program& program, const ScheduleOptions& options) {
  if (options.threads < 0) return Status(ErrorCode::kInvalidArgument, "ScheduleOptions::threads < 0");
  if (options.chunks_per_launch < 0)
    return Status(ErrorCode::kInvalidArgument, "ScheduleOptions::chunks_per_launch < 0");
  const size_t n = program.launches.size();
  if (n > static_cast<size_t>(INT32_MAX / 2)) return Status(ErrorCode::kUnsupported, "too many launches");
  for (size_t i = 0; i < n; ++i) CARVE_RETURN_IF_ERROR(validate_launch(program, program.launches[i], i));

  Schedule s;
  ScheduleStats& st = s.stats_;
  st.threads = options.threads > 0 ? options.threads
                                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t max_chunks = options.chunks_per_launch > 0 ? options.chunks_per_launch : 2 * int64_t{st.threads};
  st.launches = static_cast<int64_t>(n);

  // Tasks: contiguous per launch, even tile split.
  s.launch_first_task_.assign(n + 1, 0);
  for (size_t li = 0; li < n; ++li) {
    const Launch& L = program.launches[li];
    s.launch_first_task_[li] = static_cast<int32_t>(s.tasks_.size());
    for (const MemoryRef& r : L.reads) st.total_bytes += r.bytes;
    for (const MemoryRef& r : L.writes) st.total_bytes += r.bytes;
    const int64_t tiles = L.tile_end - L.tile_begin;
    const int64_t chunks = (L.kind == LaunchKind::kKernel && tiles > 1) ? std::min(tiles, max_chunks) : 1;
    if (chunks > 1) ++st.split_launches;
    for (int64_t c = 0; c < chunks; ++c) {
      ScheduleTask t;
      t.launch = static_cast<int32_t>(li);
      t.chunk = static_cast<int32_t>(c);
      t.tile_begin = L.tile_begin + tiles * c / chunks;
      t.tile_end = L.tile_begin + tiles * (c + 1) / chunks;
      s.tasks_.push_back(t);
    }
    if (s.tasks_.size() > static_cast<size_t>(INT32_MAX / 2)) return Status(ErrorCode::kUnsupported, "too many tasks");
  }
  s.launch_first_task_[n] = static_cast<int32_t>(s.tasks_.size());
  st.tasks = static_cast<int64_t>(s.tasks_.size());

  // Launch-level dependences, then reduction.
  std::vector<std::vector<int32_t>> preds = launch_predecessors(program);
  for (const auto& p : preds) st.launch_edges_before_reduction += static_cast<int64_t>(p.size());
  if (static_cast<int64_t>(n) <= options.reduction_limit) {
    transitive_reduction(preds);
    st.reduced = true;
  } else {
    st.reduction_note = fmt::format("{} launches > reduction_limit {}: transitive reduction skipped", n,
                                    options.reduction_limit);
  }

  // Successor lists per launch with the kinds of each dependence.
  struct LaunchEdge {
    int32_t to;
    HazardKinds kinds;
    bool reuse_only;
  };
  std::vector<std::vector<LaunchEdge>> succ(n);
  for (size_t v = 0; v < n; ++v) {
    for (int32_t u : preds[v]) {
      const auto conflicts = range_conflicts(program.launches[static_cast<size_t>(u)], program.launches[v]);
      if (conflicts.empty())
        return Status(ErrorCode::kInternal,
                      fmt::format("scheduler: dependence launch {} -> {} without a conflict", u, v));
      HazardKinds kinds = 0;
      for (const RangeConflict& c : conflicts) kinds |= static_cast<HazardKinds>(c.kind);
      succ[static_cast<size_t>(u)].push_back({static_cast<int32_t>(v), kinds, conflicts_from_arena_reuse_only(conflicts)});
      ++st.launch_edges;
    }
  }
  // Expand to tasks, sorted by (from, to): successors of launch u are ascending by launch.
  for (size_t u = 0; u < n; ++u) {
    for (int32_t a = s.launch_first_task_[u]; a < s.launch_first_task_[u + 1]; ++a)
      for (const LaunchEdge& e : succ[u]) {
        const auto v = static_cast<size_t>(e.to);
        for (int32_t b = s.launch_first_task_[v]; b < s.launch_first_task_[v + 1]; ++b)
          s.edges_.push_back({a, b, e.kinds, e.reuse_only});
      }
  }
  s.rebuild_adjacency();
  s.compute_edge_stats();

  // Fallback decision.
  if (options.allow_fallback || options.sequential) {
    std::string reason;
    if (options.sequential) reason = "sequential execution requested";
    else if (st.threads <= 1) reason = "1 thread";
    else if (st.tasks < options.min_tasks)
      reason = fmt::format("{} tasks < min_tasks {}", st.tasks, options.min_tasks);
    else if (st.max_width <= 1)
      reason = "the DAG is a chain (max width 1)";
    else if (st.total_bytes < options.min_total_bytes)
      reason = fmt::format("launches touch {} in total < min_total_bytes {}", bytes_text(st.total_bytes),
                           bytes_text(options.min_total_bytes));
    st.sequential_fallback = !reason.empty();
    st.fallback_reason = std::move(reason);
  }

  for (const auto& [from, to] : options.drop_edges) CARVE_RETURN_IF_ERROR(s.remove_edge(from, to));
  return s;
}

}  // namespace carve::runtime
