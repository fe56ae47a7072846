// JIT elementwise benchmarks: compile time per kernel (cold codegen, in-memory cache hit,
// disk cache hit in a fresh JitCompiler) and the throughput of a JIT f32 add against
// memcpy, on L1-sized (8 KiB per array) and DRAM-sized (64 MiB per array) buffers.
// Bytes processed count every byte read and written: add = 3 x array bytes (two loads,
// one store), memcpy = 2 x array bytes.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/jit/fusion.h"
#include "carve/jit/jit.h"

namespace {

using carve::ir::DType;

carve::ir::Graph add_graph(int64_t n) {
  carve::ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {n});
  auto y = b.input("y", DType::kF32, {n});
  b.output(b.add(x, y));
  return std::move(b.build()).value();
}

// relu(x * w + b) -- a typical small fused kernel for the compile-time benchmarks.
carve::ir::Graph chain_graph(int64_t n) {
  carve::ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {n});
  auto w = b.input("w", DType::kF32, {n});
  auto c = b.input("c", DType::kF32, {1});
  b.output(b.relu(b.add(b.mul(x, w), c)));
  return std::move(b.build()).value();
}

std::vector<carve::jit::KernelGroup> groups(const carve::ir::Graph& g, int64_t per_tile = 1 << 30) {
  auto order = carve::ir::execution_order(g);
  carve::jit::FusionOptions o;
  o.elements_per_tile = per_tile;  // one tile: single-threaded throughput
  return std::move(carve::jit::form_kernel_groups(g, *order, o)).value();
}

std::unique_ptr<carve::jit::JitCompiler> make_jit(const std::string& dir = {}) {
  carve::jit::JitOptions o;
  o.disk_cache = !dir.empty();
  o.cache_dir = dir;
  auto j = carve::jit::JitCompiler::create(o);
  return j.ok() ? std::move(j).value() : nullptr;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/carve_bench_cache_XXXXXX";
  const char* p = ::mkdtemp(tmpl);
  return p ? p : "/tmp";
}

void BM_CompileCold(benchmark::State& state) {
  auto jit = make_jit();
  if (!jit) return state.SkipWithError("no CPU JIT");
  int64_t n = 1000;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = chain_graph(++n);  // a new shape: new IR, new key
    auto gs = groups(g);
    state.ResumeTiming();
    auto k = jit->compile(g, gs);
    benchmark::DoNotOptimize(k);
  }
  auto s = jit->stats();
  state.counters["codegen"] = static_cast<double>(s.codegen_count);
  state.counters["codegen_ms_avg"] = 1e3 * s.codegen_seconds / static_cast<double>(std::max<int64_t>(1, s.codegen_count));
}
BENCHMARK(BM_CompileCold)->Unit(benchmark::kMillisecond)->Iterations(40);

void BM_CompileMemoryHit(benchmark::State& state) {
  auto jit = make_jit();
  if (!jit) return state.SkipWithError("no CPU JIT");
  auto g = chain_graph(4096);
  auto gs = groups(g);
  (void)jit->compile(g, gs);
  for (auto _ : state) {
    auto k = jit->compile(g, gs);  // emits IR + hashes it, then hits the cache
    benchmark::DoNotOptimize(k);
  }
  state.counters["codegen"] = static_cast<double>(jit->stats().codegen_count);
}
BENCHMARK(BM_CompileMemoryHit)->Unit(benchmark::kMicrosecond);

void BM_CompileDiskHit(benchmark::State& state) {
  std::string dir = temp_dir();
  auto g = chain_graph(4096);
  auto gs = groups(g);
  {
    auto warm = make_jit(dir);
    if (!warm) return state.SkipWithError("no CPU JIT");
    (void)warm->compile(g, gs);
  }
  int64_t codegen = 0, disk_hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto jit = make_jit(dir);  // fresh LLJIT, empty memory cache
    state.ResumeTiming();
    auto k = jit->compile(g, gs);
    benchmark::DoNotOptimize(k);
    state.PauseTiming();
    codegen += jit->stats().codegen_count;
    disk_hits += jit->stats().disk_hits;
    jit.reset();
    state.ResumeTiming();
  }
  state.counters["codegen"] = static_cast<double>(codegen);
  state.counters["disk_hits"] = static_cast<double>(disk_hits);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
BENCHMARK(BM_CompileDiskHit)->Unit(benchmark::kMillisecond)->Iterations(20);

void BM_JitAddF32(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const int64_t n = bytes / 4;
  auto jit = make_jit();
  if (!jit) return state.SkipWithError("no CPU JIT");
  auto g = add_graph(n);
  auto gs = groups(g);
  auto k = jit->compile(g, gs);
  if (!k.ok()) return state.SkipWithError(k.status().to_string().c_str());
  std::vector<float> x(static_cast<size_t>(n), 1.5f), y(static_cast<size_t>(n), 2.25f), z(static_cast<size_t>(n));
  void* ops[] = {x.data(), y.data(), z.data()};
  const auto& kernel = (*k)[0];
  for (auto _ : state) {
    kernel.fn(ops, 0, kernel.group.num_tiles);
    benchmark::ClobberMemory();
  }
  if (z[static_cast<size_t>(n - 1)] != 3.75f) state.SkipWithError("wrong result");
  state.SetBytesProcessed(state.iterations() * 3 * bytes);
}
BENCHMARK(BM_JitAddF32)->Arg(8 << 10)->Arg(64 << 20)->Unit(benchmark::kMicrosecond);

void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<char> src(static_cast<size_t>(bytes), 1), dst(static_cast<size_t>(bytes));
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), static_cast<size_t>(bytes));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}
BENCHMARK(BM_Memcpy)->Arg(8 << 10)->Arg(64 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
