// The CUDA device path (Session with SessionOptions::device = cuda). Without a driver or a
// device every benchmark reports SkipWithError("no CUDA device: <why>") and measures nothing.
//
//  - Bandwidth/add: z = x + y on 64 MiB f32 tensors (16 Mi elements each), JIT'd by NVRTC
//    and run through CompiledProgram::run with DeviceResident inputs/outputs (no host
//    copies); bytes = 3 x 64 MiB per run (two reads, one write). cuda_graphs on.
//  - Bandwidth/memcpy_dtod: cuMemcpyDtoD of 64 MiB through the dlopen'ed driver
//    (CudaContext::copy_device + synchronize); bytes = 2 x 64 MiB (read + write).
//    bytes_per_second of add / memcpy = how close the generated kernel gets to a copy.
//  - Launch/<graph>/streams:<n>/graphs:<0|1>: 256 tiny kernels (neg over 256 floats, fusion
//    off so each node is one kernel) as a chain (each reads the previous) or wide (256
//    independent kernels reading one input, 256 outputs); device-resident inputs/outputs,
//    run() synchronises. Counter per_kernel = wall time per kernel (the launch overhead).
//    streams 1 vs 4, CUDA graph replay off (streams + events) vs on (one cuGraphLaunch).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/runtime/cuda/cuda_allocator.h"
#include "carve/runtime/cuda/cuda_device.h"
#include "carve/runtime/session.h"

namespace rt = carve::runtime;
namespace cu = carve::runtime::cuda;
using carve::ir::DType;

namespace {

constexpr int64_t kBandwidthElems = int64_t{16} << 20;  // 64 MiB of f32
constexpr int64_t kBandwidthBytes = kBandwidthElems * 4;
constexpr int kKernels = 256;
constexpr int64_t kTinyElems = 256;

// Skips the benchmark with the status message ("no CUDA device: ..." without a GPU).
bool skip_if(benchmark::State& state, const carve::Status& s) {
  if (s.ok()) return false;
  state.SkipWithError(s.message().c_str());
  return true;
}

rt::SessionOptions device_options(int streams, bool graphs) {
  rt::SessionOptions o;
  o.device = {rt::DeviceType::kCuda, 0};
  o.streams = streams;
  o.cuda_graphs = graphs;
  return o;
}

// A compiled device program with device-resident inputs and outputs.
struct DeviceRun {
  std::unique_ptr<rt::Session> session;
  std::unique_ptr<rt::CompiledProgram> program;
  std::vector<rt::Buffer> inputs, outputs;

  static carve::Result<DeviceRun> make(const carve::ir::Graph& graph, int streams, bool graphs) {
    DeviceRun r;
    CARVE_ASSIGN_OR_RETURN(r.session, rt::Session::create(device_options(streams, graphs)));
    rt::CompileOptions options;
    options.fuse = false;
    CARVE_ASSIGN_OR_RETURN(r.program, r.session->compile(graph, options));
    for (const auto& t : r.program->input_types()) {
      CARVE_ASSIGN_OR_RETURN(rt::Buffer b, rt::Buffer::allocate(r.session->allocator(), t.dtype, t.shape));
      r.inputs.push_back(std::move(b));
    }
    for (const auto& t : r.program->output_types()) {
      CARVE_ASSIGN_OR_RETURN(rt::Buffer b, rt::Buffer::allocate(r.session->allocator(), t.dtype, t.shape));
      r.outputs.push_back(std::move(b));
    }
    return r;
  }
  carve::Status run() { return program->run(inputs, outputs); }
};

carve::Result<carve::ir::Graph> add_graph() {
  carve::ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {kBandwidthElems});
  auto y = b.input("y", DType::kF32, {kBandwidthElems});
  b.output(b.add(x, y));
  return b.build();
}

carve::Result<carve::ir::Graph> launch_graph(bool wide) {
  carve::ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {kTinyElems});
  auto t = x;
  for (int i = 0; i < kKernels; ++i) {
    if (wide) {
      b.output(b.neg(x));
    } else {
      t = b.neg(t);
    }
  }
  if (!wide) b.output(t);
  return b.build();
}

void BM_BandwidthAdd(benchmark::State& state) {
  auto graph = add_graph();
  if (skip_if(state, graph.status())) return;
  auto r = DeviceRun::make(*graph, 1, true);
  if (skip_if(state, r.status())) return;
  if (skip_if(state, r->run())) return;  // warm-up: capture the graph
  for (auto _ : state)
    if (skip_if(state, r->run())) break;
  state.SetBytesProcessed(state.iterations() * 3 * kBandwidthBytes);
}

void BM_BandwidthMemcpy(benchmark::State& state) {
  auto alloc = cu::CudaAllocator::create(0);
  if (skip_if(state, alloc.status())) return;
  const auto& ctx = (*alloc)->context();
  auto src = ctx->allocate(static_cast<size_t>(kBandwidthBytes));
  if (skip_if(state, src.status())) return;
  auto dst = ctx->allocate(static_cast<size_t>(kBandwidthBytes));
  if (skip_if(state, dst.status())) return;
  carve::Status s = ctx->memset(*src, 1, static_cast<size_t>(kBandwidthBytes));
  for (auto _ : state) {
    if (s.ok()) s = ctx->copy_device(*dst, *src, static_cast<size_t>(kBandwidthBytes));
    if (s.ok()) s = ctx->synchronize();
    if (skip_if(state, s)) break;
  }
  (void)ctx->free(*src);
  (void)ctx->free(*dst);
  state.SetBytesProcessed(state.iterations() * 2 * kBandwidthBytes);
}

void BM_Launch(benchmark::State& state, bool wide) {
  const int streams = static_cast<int>(state.range(0));
  const bool graphs = state.range(1) != 0;
  auto graph = launch_graph(wide);
  if (skip_if(state, graph.status())) return;
  auto r = DeviceRun::make(*graph, streams, graphs);
  if (skip_if(state, r.status())) return;
  if (skip_if(state, r->run())) return;  // warm-up (and graph capture)
  for (auto _ : state)
    if (skip_if(state, r->run())) break;
  state.counters["per_kernel"] = benchmark::Counter(
      static_cast<double>(kKernels), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["streams_used"] = r->program->stream_plan() ? r->program->stream_plan()->streams_used : 0;
}

}  // namespace

BENCHMARK(BM_BandwidthAdd)->Name("Bandwidth/add")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BandwidthMemcpy)->Name("Bandwidth/memcpy_dtod")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Launch, chain, false)
    ->Name("Launch/chain")
    ->ArgNames({"streams", "graphs"})
    ->ArgsProduct({{1, 4}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Launch, wide, true)
    ->Name("Launch/wide")
    ->ArgNames({"streams", "graphs"})
    ->ArgsProduct({{1, 4}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
