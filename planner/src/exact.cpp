// The `exact` strategy: complete search over canonical placements (MiniMalloc-style).
//
// Model. Buffers of size > 0 are "items"; the distinct start/end times cut time into
// sections, and item i covers sections [s0, s1). Two items conflict iff their section
// ranges intersect. Zero-size buffers never conflict and sit at offset 0.
//
// Two complete searches (exact_internal.h): the floor search (exact_floor_search.cpp),
// which branches on what starts at the lowest free point of a section, and the offset
// search (exact_offset_search.cpp), which enumerates placements in (offset, rank) order.
// Search times are heavy-tailed in the branching order and differ a lot between the two,
// so a feasibility probe runs a portfolio -- floor search (three rules for the
// section), then offset search -- over several static preference orders (and jittered
// variants): first every run with a short node limit, then with geometrically growing
// limits. A run that ends within its limit is a proof either way, so the loop is
// complete. Independent parts of the problem (split where no item spans a section
// boundary) get a portfolio each: different parts often fall to different runs (the
// MiniMalloc instance E does only this way). Failure caches: one shared by all floor
// runs of a part (their states do not depend on the order), one for the plain-order
// offset runs. Without a capacity the arena is minimised by probes between the lower
// bound and the best plan so far (greedy first).
#include "carve/planner/exact.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "carve/planner/problem.h"
#include "exact_internal.h"

namespace carve::planner {
namespace {

using namespace exact_detail;

constexpr int64_t kProbeLimit = 1500;  // nodes per run in the first restart round

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs fn on a thread with at least `stack_bytes` of stack when the default might not
// do (deep recursion on big problems); otherwise inline.
void run_with_stack(size_t stack_bytes, const std::function<void()>& fn) {
  constexpr size_t kInline = size_t{4} << 20;
  if (stack_bytes <= kInline) {
    fn();
    return;
  }
  pthread_attr_t attr;
  pthread_t thread;
  bool started = false;
  if (pthread_attr_init(&attr) == 0) {
    if (pthread_attr_setstacksize(&attr, stack_bytes) == 0) {
      auto trampoline = [](void* arg) -> void* {
        (*static_cast<const std::function<void()>*>(arg))();
        return nullptr;
      };
      started = pthread_create(&thread, &attr, trampoline,
                               const_cast<std::function<void()>*>(&fn)) == 0;
    }
    pthread_attr_destroy(&attr);
  }
  if (started) {
    pthread_join(thread, nullptr);
  } else {
    fn();
  }
}

// Feasibility at `capacity`: restarts over the preference orders with geometrically
// growing node limits (search times are heavy-tailed in the order), each ordering
// keeping its own failure cache. A run that ends within its limit is a proof either
// way, so the loop is complete.
Outcome search_part(Prepared& p, const ExactOptions& opt, int64_t capacity,
                    const detail::Deadline& deadline, std::vector<int64_t>* offsets,
                    int64_t* nodes) {
  if (!p.adj_ok) return Outcome::kTimeout;  // too many conflicts to search
  Outcome out = Outcome::kTimeout;
  // Frames are small; 2 levels per item, ~1 KiB per level with sanitizer headroom.
  const size_t stack = (size_t{2} << 20) + static_cast<size_t>(p.n()) * 2 * 1024;
  run_with_stack(stack, [&] {
    FailCache cache, floor_cache;
    const int orderings = opt.restarts ? kNumOrderings : 1;
    // Round 0 gives every run a short limit (many instances fall to some run within a
    // few hundred nodes); then limits start at `base` and double.
    const int64_t base = 2000 + 20 * static_cast<int64_t>(p.n());
    int64_t limit = opt.restarts ? kProbeLimit : INT64_MAX;
    for (int round = 0;; ++round) {
      for (int o = 0; o < orderings; ++o) {
        // Even rounds after the first jitter the order. Floor-search failures do not
        // depend on the order, so all runs share one cache; the offset search's states do
        // (through the tie-break), so it keeps one per plain order and a throw-away one
        // otherwise.
        const uint64_t seed = round > 0 && round % 2 == 0 ? mix64(round * 131 + o) : 0;
        apply_ordering(p, o, seed);
        SearchLimits lim{capacity, &deadline, limit, p.n() > 4096 ? 1 : 64};
        FailCache scratch_cache;
        // A portfolio: the floor search with three section rules, then the offset search.
        // Each solves some instances fast that the others do not.
        constexpr FloorTie kTies[] = {FloorTie::kFewestChoices, FloorTie::kLeftmost,
                                      FloorTie::kLeastSlack};
        for (int variant = 0; variant < 4; ++variant) {
          if (variant < 3 && !opt.floor_search) continue;
          if (variant == 3 && opt.floor_search && !opt.offset_search) continue;
          if (variant < 3) {
            out = floor_search(p, opt, lim, opt.failure_cache ? &floor_cache : nullptr,
                               kTies[variant], offsets, nodes);
          } else {
            FailCache* use = !opt.failure_cache ? nullptr : seed == 0 ? &cache : &scratch_cache;
            out = offset_search(p, opt, lim, use, mix64(o + 1), offsets, nodes);
          }
          if (out != Outcome::kNodeLimit) return;
        }
      }
      limit = round == 0 ? base : limit > INT64_MAX / 4 ? INT64_MAX : limit * 2;
    }
  });
  return out;
}

// Feasibility of every independent part at `capacity`, each with its own portfolio
// (different parts are often solved fast by different searches and orders); fullest
// part first, so an infeasible one tends to be found early.
Outcome search_capacity(std::vector<Part>& parts, int n, const ExactOptions& opt,
                        int64_t capacity, const detail::Deadline& deadline,
                        std::vector<int64_t>* offsets, int64_t* nodes) {
  offsets->assign(n, 0);
  std::vector<int64_t> part_offsets;
  for (Part& part : parts) {
    const Outcome out = search_part(part.p, opt, capacity, deadline, &part_offsets, nodes);
    if (out != Outcome::kFound) return out;
    for (size_t k = 0; k < part.items.size(); ++k) (*offsets)[part.items[k]] = part_offsets[k];
  }
  return Outcome::kFound;
}

// The parts searched separately: split_parts with decomposition, else the whole.
std::vector<Part> make_parts(const Problem& problem, const Prepared& p, bool decompose,
                             const detail::Deadline& deadline) {
  if (decompose) return split_parts(problem, p, deadline);
  std::vector<Part> parts;
  if (p.n() > 0) {
    parts.push_back(Part{p, std::vector<int>(p.n())});
    std::iota(parts[0].items.begin(), parts[0].items.end(), 0);
  }
  return parts;
}

MemoryPlan to_plan(const Problem& problem, const Prepared& p,
                   const std::vector<int64_t>& item_offsets) {
  MemoryPlan plan;
  plan.offsets.assign(problem.buffers.size(), 0);
  for (int i = 0; i < p.n(); ++i) {
    plan.offsets[p.orig[i]] = item_offsets[i];
    plan.arena_bytes = std::max(plan.arena_bytes, item_offsets[i] + p.size[i]);
  }
  return plan;
}

class ExactStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "exact"; }
  Result<PlanResult> plan_impl(const Problem& problem, const PlanOptions& options) const override {
    return plan_exact(problem, options);
  }
};

}  // namespace

Result<PlanResult> plan_exact(const Problem& problem, const PlanOptions& options,
                              const ExactOptions& exact_options, ExactStats* stats) {
  const Clock::time_point t0 = Clock::now();
  // check_plannable: the greedy upper bound needs offsets that cannot overflow.
  CARVE_RETURN_IF_ERROR(detail::check_plannable(problem).with_context("exact"));
  if (options.capacity && *options.capacity < 0) {
    return Status(ErrorCode::kInvalidArgument,
                  "exact: capacity " + std::to_string(*options.capacity) + " < 0");
  }
  const double limit = std::max(0.0, options.time_limit_seconds);
  const detail::Deadline deadline = detail::Deadline::from(options);
  ExactStats local;
  ExactStats& st = stats ? *stats : local;
  st = ExactStats{};

  // The greedy plan comes before the conflict graph: on big traces the graph (quadratic in
  // the worst case) may not finish in time, and a plan must exist whatever happens.
  Prepared p = prepare(problem, deadline, /*conflicts=*/false);
  apply_ordering(p, 0, 0);
  // Split on first use: the greedy often settles the question without a search.
  std::vector<Part> parts;
  bool split = false;
  auto get_parts = [&]() -> std::vector<Part>& {
    if (!split) parts = make_parts(problem, p, exact_options.decompose, deadline);
    split = true;
    return parts;
  };
  st.lower_bound = p.lower_bound;
  int64_t greedy_arena = 0;
  std::vector<int64_t> best = best_greedy(p, problem, deadline, &greedy_arena);
  st.greedy_arena = greedy_arena;
  build_conflicts(p, deadline);
  int64_t best_arena = greedy_arena;

  PlanResult result;
  result.strategy = "exact";
  auto finish = [&](const std::vector<int64_t>& offs, bool optimal) -> Result<PlanResult> {
    result.plan = to_plan(problem, p, offs);
    result.optimal = optimal || result.plan.arena_bytes == p.lower_bound;
    result.plan_seconds = seconds_since(t0);
    return result;
  };

  if (options.capacity) {
    const int64_t cap = *options.capacity;
    if (p.lower_bound > cap) {
      return Status(ErrorCode::kInfeasible,
                    "exact: " + std::to_string(p.lower_bound) +
                        " bytes are live at one step, more than capacity " +
                        std::to_string(cap));
    }
    if (exact_options.greedy_first && greedy_arena <= cap) return finish(best, false);
    std::vector<int64_t> offs;
    ++st.probes;
    switch (search_capacity(get_parts(), p.n(), exact_options, cap, deadline, &offs, &st.nodes)) {
      case Outcome::kFound:
        return finish(offs, false);
      case Outcome::kInfeasible:
        return Status(ErrorCode::kInfeasible,
                      "exact: proved no plan fits in capacity " + std::to_string(cap) +
                          " (lower bound " + std::to_string(p.lower_bound) + ")");
      case Outcome::kTimeout:
      case Outcome::kNodeLimit:
        break;
    }
    return Status(ErrorCode::kTimeout, "exact: no plan within capacity " +
                                           std::to_string(cap) + " found in " +
                                           std::to_string(limit) + " s");
  }

  // Minimise: probe the lower bound first, then bisect (lo, best).
  int64_t lo = p.lower_bound;  // smallest arena not yet ruled out
  bool proven = true;
  bool first = true;
  while (lo < best_arena) {
    if (deadline.passed()) {
      proven = false;
      break;
    }
    const int64_t probe = first ? lo : lo + (best_arena - 1 - lo) / 2;
    first = false;
    // Leave time for later probes unless this is the last one.
    const detail::Deadline probe_deadline = deadline.share(probe == best_arena - 1 ? 1.0 : 0.5);
    std::vector<int64_t> offs;
    ++st.probes;
    const Outcome out = search_capacity(get_parts(), p.n(), exact_options, probe, probe_deadline,
                                        &offs, &st.nodes);
    if (out == Outcome::kFound) {
      best = std::move(offs);
      best_arena = 0;
      for (int i = 0; i < p.n(); ++i) best_arena = std::max(best_arena, best[i] + p.size[i]);
    } else {
      if (out == Outcome::kTimeout) proven = false;
      lo = probe + 1;
    }
  }
  return finish(best, proven && lo >= best_arena);
}

std::unique_ptr<Strategy> make_exact_strategy() { return std::make_unique<ExactStrategy>(); }

}  // namespace carve::planner
