// Dispatch overhead of the executors and parallel speedup of the hazard scheduler.
//
//  - Dispatch/<graph>/<executor>: 1000 launches of an empty kernel, as a chain (each
//    launch read-modify-writes the same 8 bytes) or as a wide graph (each launch writes
//    its own 8 bytes). Executors: a plain loop of direct kernel calls, execute_sequential,
//    and ParallelExecutor (kept across iterations, fallback off) with 1/2/4 threads.
//    Counter per_launch = time per launch (seconds; printed with an SI prefix).
//  - Branches/<executor>: two independent chains of 4 launches, each launch a pass over
//    its own 4 MiB of floats (16 x (x = x * a + b) per element); sequential vs parallel with 2 threads.
//    Speedup = Branches/sequential time / Branches/parallel time.
//  - Build/<graph>: build_schedule for the 1000-launch graphs.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "carve/runtime/arena.h"
#include "carve/runtime/executor.h"
#include "carve/runtime/program.h"
#include "carve/runtime/schedule.h"

namespace rt = carve::runtime;

namespace {

constexpr int kLaunches = 1000;
constexpr int64_t kWorkFloats = int64_t{1} << 20;  // 4 MiB per branch pass

void empty_kernel(void* const*, int64_t, int64_t) {}

void scale_kernel(void* const* operands, int64_t, int64_t) {
  auto* x = static_cast<float*>(operands[0]);
  for (int64_t i = 0; i < kWorkFloats; ++i) {
    float v = x[i];
    for (int r = 0; r < 16; ++r) v = v * 0.999f + 0.5f;  // some compute per byte
    x[i] = v;
  }
}

// Like a compiled Program: one arena, launches reach its bytes through views.
struct BenchProgram {
  rt::Program program;
  std::map<std::pair<int64_t, int64_t>, int32_t> views;  // (offset, bytes) -> view

  explicit BenchProgram(int64_t arena_floats, carve::jit::KernelFn fn) {
    rt::ProgramKernel k;
    k.fn = fn;
    program.kernels.push_back(std::move(k));
    auto arena = rt::Arena::create(rt::cpu_allocator(), static_cast<size_t>(arena_floats) * sizeof(float));
    if (!arena.ok()) std::abort();
    program.arena = std::make_unique<rt::Arena>(std::move(arena).value());
    auto* floats = reinterpret_cast<float*>(program.arena->arena().unsafe_data());
    std::fill(floats, floats + arena_floats, 1.0f);
  }
  int32_t view(int64_t offset, int64_t bytes) {
    auto [it, added] = views.try_emplace({offset, bytes}, -1);
    if (added) {
      auto v = program.arena->add_view(std::to_string(views.size()), offset, carve::ir::DType::kU8,
                                       carve::ir::Shape{bytes});
      if (!v.ok()) std::abort();
      it->second = *v;
    }
    return it->second;
  }
  void rmw(int64_t offset, int64_t bytes) {
    const rt::MemoryRef r{rt::Region::kArena, 0, offset, bytes, -1, view(offset, bytes)};
    rt::Launch l;
    l.name = std::to_string(program.launches.size());
    l.kernel = 0;
    l.operands = {r};
    l.reads = {r};
    l.writes = {r};
    program.launches.push_back(std::move(l));
  }
  rt::LaunchOperands operands() const { return rt::LaunchOperands(program, {}); }
};

BenchProgram dispatch_program(bool wide) {
  BenchProgram p(2 * kLaunches, &empty_kernel);
  for (int i = 0; i < kLaunches; ++i) p.rmw(wide ? int64_t{8} * i : 0, 8);
  return p;
}

BenchProgram branches_program() {
  BenchProgram p(2 * kWorkFloats, &scale_kernel);
  const int64_t bytes = kWorkFloats * 4;
  for (int i = 0; i < 4; ++i) {
    p.rmw(0, bytes);
    p.rmw(bytes, bytes);
  }
  return p;
}

rt::Schedule must_schedule(const rt::Program& program, int threads) {
  rt::ScheduleOptions o;
  o.threads = threads;
  o.allow_fallback = false;
  auto s = rt::build_schedule(program, o);
  if (!s.ok()) std::abort();
  return std::move(s).value();
}

void set_per_launch(benchmark::State& state, int64_t launches) {
  state.counters["per_launch"] = benchmark::Counter(static_cast<double>(launches),
                                                    benchmark::Counter::kIsIterationInvariantRate |
                                                        benchmark::Counter::kInvert);
}

void BM_Direct(benchmark::State& state, bool wide) {
  BenchProgram p = dispatch_program(wide);
  std::vector<void*> operands;
  for (const auto& l : p.program.launches) operands.push_back(rt::operand_address(p.program, {}, l.operands[0]));
  const carve::jit::KernelFn fn = p.program.kernels[0].fn;
  for (auto _ : state) {
    for (void*& op : operands) fn(&op, 0, 1);
    benchmark::ClobberMemory();
  }
  set_per_launch(state, kLaunches);
}

void BM_Sequential(benchmark::State& state, bool wide) {
  BenchProgram p = dispatch_program(wide);
  rt::LaunchOperands ops = p.operands();
  for (auto _ : state) {
    ops.bind(p.program, {});  // per run, as CompiledProgram::run does
    rt::execute_sequential(p.program, ops);
    benchmark::ClobberMemory();
  }
  set_per_launch(state, kLaunches);
}

void BM_Parallel(benchmark::State& state, bool wide) {
  const int threads = static_cast<int>(state.range(0));
  BenchProgram p = dispatch_program(wide);
  rt::LaunchOperands ops = p.operands();
  const rt::Schedule s = must_schedule(p.program, threads);
  rt::ParallelExecutor ex(threads);
  for (auto _ : state) {
    ops.bind(p.program, {});
    if (!ex.run(p.program, s, ops).ok()) state.SkipWithError("run failed");
  }
  set_per_launch(state, kLaunches);
  state.counters["edges"] = static_cast<double>(s.stats().edges);
}

// One-shot execute_parallel (creates a task_arena per run).
void BM_ParallelOneShot(benchmark::State& state, bool wide) {
  BenchProgram p = dispatch_program(wide);
  const rt::LaunchOperands ops = p.operands();
  const rt::Schedule s = must_schedule(p.program, 2);
  for (auto _ : state) {
    if (!rt::execute_parallel(p.program, s, ops).ok()) state.SkipWithError("run failed");
  }
  set_per_launch(state, kLaunches);
}

void BM_Build(benchmark::State& state, bool wide) {
  BenchProgram p = dispatch_program(wide);
  for (auto _ : state) benchmark::DoNotOptimize(must_schedule(p.program, 4));
  set_per_launch(state, kLaunches);
}

void BM_BranchesSequential(benchmark::State& state) {
  BenchProgram p = branches_program();
  const rt::LaunchOperands ops = p.operands();
  for (auto _ : state) {
    rt::execute_sequential(p.program, ops);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 8 * kWorkFloats * 4);
}

void BM_BranchesParallel(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  BenchProgram p = branches_program();
  const rt::LaunchOperands ops = p.operands();
  const rt::Schedule s = must_schedule(p.program, threads);
  rt::ParallelExecutor ex(threads);
  for (auto _ : state) {
    if (!ex.run(p.program, s, ops).ok()) state.SkipWithError("run failed");
  }
  state.SetBytesProcessed(state.iterations() * 8 * kWorkFloats * 4);
  state.counters["max_width"] = static_cast<double>(s.stats().max_width);
}

}  // namespace

BENCHMARK_CAPTURE(BM_Direct, chain, false);
BENCHMARK_CAPTURE(BM_Sequential, chain, false);
BENCHMARK_CAPTURE(BM_Parallel, chain, false)->Arg(1)->Arg(2)->Arg(4)->UseRealTime();
BENCHMARK_CAPTURE(BM_Direct, wide, true);
BENCHMARK_CAPTURE(BM_Sequential, wide, true);
BENCHMARK_CAPTURE(BM_Parallel, wide, true)->Arg(1)->Arg(2)->Arg(4)->UseRealTime();
BENCHMARK_CAPTURE(BM_ParallelOneShot, wide, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_Build, chain, false);
BENCHMARK_CAPTURE(BM_Build, wide, true);
BENCHMARK(BM_BranchesSequential)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BranchesParallel)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
