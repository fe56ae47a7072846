// `exact` at capacity 1048576 on each MiniMalloc challenging instance (A-K), one
// iteration each. Counters: arena (bytes of the plan found, 0 when none), buffers,
// found (1 = plan within capacity), nodes (search nodes over all restarts).
// Time limit per instance: CARVE_EXACT_BENCH_LIMIT seconds (default 60). Data from
// $CARVE_SHARED_DIR/data/minimalloc when set, else the repository's tests/data/minimalloc.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "carve/planner/csv.h"
#include "carve/planner/exact.h"
#include "carve/planner/problem.h"

namespace {

// $CARVE_SHARED_DIR/data/minimalloc, or the copy in the repository (this file is
// <repo>/benchmarks/bench_exact.cpp; the data <repo>/tests/data/minimalloc).
std::string minimalloc_dir() {
  if (const char* env = std::getenv("CARVE_SHARED_DIR")) return std::string(env) + "/data/minimalloc";
  std::string file = __FILE__;
  for (int up = 0; up < 2; ++up) {
    const size_t slash = file.find_last_of('/');
    file = slash == std::string::npos ? "." : file.substr(0, slash);
  }
  return file + "/tests/data/minimalloc";
}

std::string data_path(char which) {
  return minimalloc_dir() + "/challenging__" + std::string(1, which) + ".1048576.csv";
}

void BM_ExactChallenging(benchmark::State& state) {
  const char which = static_cast<char>('A' + state.range(0));
  auto problem = carve::planner::read_minimalloc_csv(data_path(which));
  if (!problem.ok()) {
    state.SkipWithError(problem.status().to_string().c_str());
    return;
  }
  carve::planner::PlanOptions options;
  options.capacity = 1048576;
  const char* limit = std::getenv("CARVE_EXACT_BENCH_LIMIT");
  options.time_limit_seconds = limit != nullptr ? std::atof(limit) : 60.0;
  carve::planner::ExactStats stats;
  int64_t arena = 0;
  bool found = false;
  for (auto _ : state) {
    auto result = carve::planner::plan_exact(*problem, options, {}, &stats);
    found = result.ok() && carve::planner::validate_plan(*problem, result->plan).ok();
    arena = found ? result->plan.arena_bytes : 0;
    benchmark::DoNotOptimize(arena);
  }
  state.SetLabel(std::string(1, which) + (found ? "" : " (no plan)"));
  state.counters["arena"] = static_cast<double>(arena);
  state.counters["buffers"] = static_cast<double>(problem->buffers.size());
  state.counters["found"] = found ? 1.0 : 0.0;
  state.counters["nodes"] = static_cast<double>(stats.nodes);
}

BENCHMARK(BM_ExactChallenging)
    ->DenseRange(0, 10)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
