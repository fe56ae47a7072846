// Planner heuristics: scaling on model-like traces and quality on MiniMalloc's
// challenging suite. Counters: arena_over_lb (arena / lower bound), arena and lb in bytes.
//
//   PlannerScaling/<strategy>/<buffers>   — make_model_like_problem(buffers, seed 1), to 1M
//   TraceLike/<strategy>/<buffers>        — make_trace_like_problem(buffers, seed 1), to 1M:
//                                           shaped like the real training traces
//   RealTrace/<strategy>/<S_1|G_1>        — ../shared/data/traces/X.csv (alignment 1)
//   MiniMalloc/<strategy>/<A..K>          — tests/data/minimalloc/challenging__X.1048576.csv
//
// The real traces are looked up in $CARVE_SHARED_DIR/data/traces, else in ../shared beside
// the source tree (they are not in the repository); the MiniMalloc files in
// $CARVE_SHARED_DIR/data/minimalloc when set, else in tests/data/minimalloc. A missing file
// skips that benchmark with an error. The heuristics' cost per placement is stated in
// planner/include/carve/planner/heuristics.h; the 1k..1M rows show it.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <string>

#include "carve/planner/csv.h"
#include "carve/planner/strategy.h"
#include "carve/planner/synthetic.h"

namespace {

using carve::planner::Problem;

const char* const kStrategies[] = {"naive", "greedy-size", "greedy-breadth", "greedy-xla", "online"};

std::string shared_dir() {
  if (const char* env = std::getenv("CARVE_SHARED_DIR")) return env;
  // __FILE__ is <repo>/benchmarks/bench_planner_scaling.cpp; shared/ sits beside <repo>.
  return (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "shared").string();
}

std::string minimalloc_dir() {
  if (const char* env = std::getenv("CARVE_SHARED_DIR")) return std::string(env) + "/data/minimalloc";
  // __FILE__ is <repo>/benchmarks/bench_planner_scaling.cpp.
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / "tests" / "data" / "minimalloc").string();
}

const Problem& model_problem(size_t n) {
  static std::map<size_t, Problem> cache;
  auto it = cache.find(n);
  if (it == cache.end()) it = cache.emplace(n, carve::planner::make_model_like_problem(n, 1)).first;
  return it->second;
}

void run_plan(benchmark::State& state, const Problem& problem, const std::string& name);

const Problem& trace_like_problem(size_t n) {
  static std::map<size_t, Problem> cache;
  auto it = cache.find(n);
  if (it == cache.end()) it = cache.emplace(n, carve::planner::make_trace_like_problem(n, 1)).first;
  return it->second;
}

void run_file(benchmark::State& state, const std::string& path, const std::string& name) {
  auto problem = carve::planner::read_minimalloc_csv(path);
  if (!problem.ok()) {
    state.SkipWithError(problem.status().to_string().c_str());
    return;
  }
  run_plan(state, *problem, name);
}

void run_plan(benchmark::State& state, const Problem& problem, const std::string& name) {
  auto strategy = carve::planner::make_strategy(name);
  if (!strategy.ok()) {
    state.SkipWithError(strategy.status().to_string().c_str());
    return;
  }
  const int64_t lb = carve::planner::lower_bound_bytes(problem);
  int64_t arena = 0;
  // No time limit: the rows measure the whole placement (with the default 10 s a loaded
  // machine would cut the 1M rows short and time the fallback instead).
  carve::planner::PlanOptions options;
  options.time_limit_seconds = std::numeric_limits<double>::infinity();
  for (auto _ : state) {
    auto r = (*strategy)->plan(problem, options);
    if (!r.ok()) {
      state.SkipWithError(r.status().to_string().c_str());
      return;
    }
    arena = r->plan.arena_bytes;
    benchmark::DoNotOptimize(arena);
  }
  state.counters["arena"] = static_cast<double>(arena);
  state.counters["lb"] = static_cast<double>(lb);
  state.counters["arena_over_lb"] = lb > 0 ? static_cast<double>(arena) / static_cast<double>(lb) : 1.0;
  state.counters["buffers"] = static_cast<double>(problem.buffers.size());
}

struct Registrar {
  Registrar() {
    for (const char* name : kStrategies) {
      for (size_t n : {size_t{1000}, size_t{10000}, size_t{100000}, size_t{1000000}}) {
        benchmark::RegisterBenchmark(
            fmt::format("PlannerScaling/{}/{}", name, n).c_str(),
            [name, n](benchmark::State& state) { run_plan(state, model_problem(n), name); })
            ->Unit(benchmark::kMillisecond);
      }
    }
    for (const char* name : {"greedy-size", "greedy-breadth"}) {
      for (size_t n : {size_t{1000}, size_t{10000}, size_t{60000}, size_t{100000}, size_t{1000000}}) {
        benchmark::RegisterBenchmark(
            fmt::format("TraceLike/{}/{}", name, n).c_str(),
            [name, n](benchmark::State& state) { run_plan(state, trace_like_problem(n), name); })
            ->Unit(benchmark::kMillisecond);
      }
    }
    for (const char* name : kStrategies) {
      for (const char* trace : {"S_1", "G_1"}) {
        benchmark::RegisterBenchmark(
            fmt::format("RealTrace/{}/{}", name, trace).c_str(),
            [name, trace](benchmark::State& state) {
              run_file(state, fmt::format("{}/data/traces/{}.csv", shared_dir(), trace), name);
            })
            ->Unit(benchmark::kMillisecond);
      }
    }
    for (const char* name : kStrategies) {
      for (const char letter : std::string("ABCDEFGHIJK")) {
        benchmark::RegisterBenchmark(
            fmt::format("MiniMalloc/{}/{}", name, letter).c_str(),
            [name, letter](benchmark::State& state) {
              const std::string path =
                  fmt::format("{}/challenging__{}.1048576.csv", minimalloc_dir(), letter);
              auto problem = carve::planner::read_minimalloc_csv(path);
              if (!problem.ok()) {
                state.SkipWithError(problem.status().to_string().c_str());
                return;
              }
              run_plan(state, *problem, name);
            })
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
};

const Registrar registrar;

}  // namespace

BENCHMARK_MAIN();
