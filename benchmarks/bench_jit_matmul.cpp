// JIT compute kernels: f32 matmul GFLOP/s for carve vs single-threaded OpenBLAS
// (cblas_sgemm) at 256/512/1024 in the same run, and conv2d timings (regular 3x3,
// pointwise 1x1, depthwise 3x3). Every kernel runs single-threaded over all its tiles.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/jit/fusion.h"
#include "carve/jit/jit.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using carve::ir::DType;
using carve::ir::GraphBuilder;

carve::jit::JitCompiler* jit() {
  static std::unique_ptr<carve::jit::JitCompiler> j = [] {
    carve::jit::JitOptions o;
    o.disk_cache = false;
    auto r = carve::jit::JitCompiler::create(o);
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  return j.get();
}

// A compiled single-kernel graph with its buffers (one per value, random inputs).
struct Prepared {
  carve::ir::Graph graph;
  carve::jit::CompiledKernel kernel;
  std::vector<std::vector<float>> buffers;
  std::vector<unsigned char> scratch;
  std::vector<void*> ops;
  bool ok = false;
};

std::unique_ptr<Prepared> prepare(GraphBuilder& b) {
  auto p = std::make_unique<Prepared>();
  auto g = b.build();
  if (!g.ok() || jit() == nullptr) return p;
  p->graph = std::move(g).value();
  auto order = carve::ir::execution_order(p->graph);
  auto groups = carve::jit::form_kernel_groups(p->graph, *order);
  if (!groups.ok() || groups->size() != 1) return p;
  auto k = jit()->compile_group(p->graph, groups->front());
  if (!k.ok()) {
    std::fprintf(stderr, "compile: %s\n", k.status().to_string().c_str());
    return p;
  }
  p->kernel = *k;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  for (const auto& v : p->graph.values) {
    std::vector<float> buf(static_cast<size_t>(*v.type.shape.num_elements()));
    for (float& x : buf) x = d(rng);
    p->buffers.push_back(std::move(buf));
  }
  p->scratch.resize(static_cast<size_t>(p->kernel.group.scratch_bytes) + 64);
  for (const auto& op : p->kernel.group.operands) {
    if (op.role == carve::jit::OperandRole::kScratch) {
      p->ops.push_back(p->scratch.data());
    } else {
      p->ops.push_back(p->buffers[static_cast<size_t>(op.value)].data());
    }
  }
  p->ok = true;
  return p;
}

void run(Prepared& p) { p.kernel.fn(p.ops.data(), 0, p.kernel.group.num_tiles); }

void BM_carve_matmul_f32(benchmark::State& state) {
  const int64_t n = state.range(0);
  GraphBuilder b;
  auto x = b.input("a", DType::kF32, {n, n});
  auto y = b.input("b", DType::kF32, {n, n});
  b.output(b.matmul(x, y));
  auto p = prepare(b);
  if (!p->ok) {
    state.SkipWithError("JIT unavailable or compile failed");
    return;
  }
  for (auto _ : state) {
    run(*p);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_openblas_sgemm_1thread(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  openblas_set_num_threads(1);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> a(static_cast<size_t>(n) * n), bm(a.size()), c(a.size());
  for (float& v : a) v = d(rng);
  for (float& v : bm) v = d(rng);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, bm.data(),
                n, 0.0f, c.data(), n);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n) * n * n,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// conv2d NCHW: args (channels in, channels out, spatial, kernel, groups).
void BM_carve_conv2d_f32(benchmark::State& state) {
  const int64_t c = state.range(0), o = state.range(1), hw = state.range(2), k = state.range(3),
                groups = state.range(4);
  GraphBuilder b;
  auto x = b.input("x", DType::kF32, {1, c, hw, hw});
  auto w = b.input("w", DType::kF32, {o, c / groups, k, k});
  auto bias = b.input("bias", DType::kF32, {o});
  carve::ir::Conv2dOptions opt;
  opt.groups = groups;
  opt.pads = {k / 2, k / 2, k / 2, k / 2};
  b.output(b.conv2d(x, w, bias, opt));
  auto p = prepare(b);
  if (!p->ok) {
    state.SkipWithError("JIT unavailable or compile failed");
    return;
  }
  for (auto _ : state) {
    run(*p);
    benchmark::ClobberMemory();
  }
  double flops = 2.0 * static_cast<double>(o * hw * hw * (c / groups) * k * k);
  state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

}  // namespace

BENCHMARK(BM_carve_matmul_f32)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_openblas_sgemm_1thread)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_carve_conv2d_f32)
    ->ArgNames({"cin", "cout", "hw", "k", "groups"})
    ->Args({64, 64, 56, 3, 1})     // regular 3x3
    ->Args({128, 128, 28, 1, 1})   // pointwise 1x1
    ->Args({256, 256, 56, 3, 256}) // depthwise 3x3
    ->Args({32, 64, 56, 3, 4})     // grouped 3x3
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
