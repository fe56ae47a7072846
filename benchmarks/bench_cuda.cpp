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
//  - Gemm/<path>/n:<n>: an n x n x n f32 matmul through a Session with device-resident
//    buffers, path cublaslt (SessionOptions::cuda_gemm = kCublasLt), generated (the NVRTC
//    kernel) or cublaslt_tf32; Gemm/direct/n:<n>: the same GEMM as one LtPlan::run on a
//    stream, synchronised (what an engine calling cuBLASLt itself gets). Counter TFLOPS.
//  - Model/resnet_blocks/<path>: a ResNet-18-style network (7x7 stem, max pool, 8 basic
//    blocks of 3x3 convs with residual adds, global pool, classifier) at batch 1, 224x224,
//    run end to end with device-resident input and output.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/runtime/cuda/cublaslt.h"
#include "carve/runtime/cuda/cuda_allocator.h"
#include "carve/runtime/cuda/cuda_device.h"
#include "carve/runtime/session.h"

namespace rt = carve::runtime;
namespace cu = carve::runtime::cuda;
using carve::ir::DType;

namespace {

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
    return make(graph, device_options(streams, graphs), false);
  }
  static carve::Result<DeviceRun> make(const carve::ir::Graph& graph, const rt::SessionOptions& session_options,
                                       bool fuse) {
    DeviceRun r;
    CARVE_ASSIGN_OR_RETURN(r.session, rt::Session::create(session_options));
    rt::CompileOptions options;
    options.fuse = fuse;
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

carve::Result<carve::ir::Graph> add_graph(int64_t elems) {
  carve::ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {elems});
  auto y = b.input("y", DType::kF32, {elems});
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
  const int64_t bytes = state.range(0) << 20;
  auto graph = add_graph(bytes / 4);
  if (skip_if(state, graph.status())) return;
  auto r = DeviceRun::make(*graph, 1, true);
  if (skip_if(state, r.status())) return;
  if (skip_if(state, r->run())) return;  // warm-up: capture the graph
  for (auto _ : state)
    if (skip_if(state, r->run())) break;
  state.SetBytesProcessed(state.iterations() * 3 * bytes);
}

void BM_BandwidthMemcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  auto alloc = cu::CudaAllocator::create(0);
  if (skip_if(state, alloc.status())) return;
  const auto& ctx = (*alloc)->context();
  auto src = ctx->allocate(static_cast<size_t>(bytes));
  if (skip_if(state, src.status())) return;
  auto dst = ctx->allocate(static_cast<size_t>(bytes));
  if (skip_if(state, dst.status())) return;
  carve::Status s = ctx->memset(*src, 1, static_cast<size_t>(bytes));
  for (auto _ : state) {
    if (s.ok()) s = ctx->copy_device(*dst, *src, static_cast<size_t>(bytes));
    if (s.ok()) s = ctx->synchronize();
    if (skip_if(state, s)) break;
  }
  (void)ctx->free(*src);
  (void)ctx->free(*dst);
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
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

carve::Result<carve::ir::Graph> matmul_graph(int64_t n) {
  carve::ir::GraphBuilder b;
  b.output(b.matmul(b.input("a", DType::kF32, {n, n}), b.input("b", DType::kF32, {n, n})));
  return b.build();
}

void set_flops(benchmark::State& state, int64_t n) {
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) / 1e12,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// Compiles `graph` (fused) for the GEMM path and runs it as the benchmark's loop.
void run_model(benchmark::State& state, const carve::Result<carve::ir::Graph>& graph, int streams, rt::CudaGemm path,
               bool tf32) {
  if (skip_if(state, graph.status())) return;
  rt::SessionOptions options = device_options(streams, true);
  options.cuda_gemm = path;
  options.cuda_tf32 = tf32;
  auto r = DeviceRun::make(*graph, options, true);
  if (skip_if(state, r.status())) return;
  if (skip_if(state, r->run())) return;  // warm-up (and graph capture)
  for (auto _ : state)
    if (skip_if(state, r->run())) break;
}

void BM_Gemm(benchmark::State& state, rt::CudaGemm path, bool tf32) {
  const int64_t n = state.range(0);
  run_model(state, matmul_graph(n), 1, path, tf32);
  set_flops(state, n);
}

// The same GEMM as an engine calling cuBLASLt itself would run it: one plan, one stream.
void BM_GemmDirect(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto alloc = cu::CudaAllocator::create(0);
  if (skip_if(state, alloc.status())) return;
  const auto& ctx = (*alloc)->context();
  auto lt = cu::CublasLt::create(ctx);
  if (skip_if(state, lt.status())) return;
  auto plan = (*lt)->plan({.m = n, .n = n, .k = n, .lda = n, .ldb = n, .ldd = n});
  if (skip_if(state, plan.status())) return;
  auto stream = cu::CudaStream::create(ctx);
  if (skip_if(state, stream.status())) return;
  const auto bytes = static_cast<size_t>(n * n * 4);
  std::vector<cu::DevicePtr> blocks;
  for (size_t size : {bytes, bytes, bytes, static_cast<size_t>(cu::CublasLt::kWorkspaceBytes)}) {
    auto p = ctx->allocate(size);
    if (skip_if(state, p.status())) return;
    blocks.push_back(*p);
  }
  carve::Status s = ctx->memset(blocks[0], 0, bytes);
  if (s.ok()) s = ctx->memset(blocks[1], 0, bytes);
  for (auto _ : state) {
    if (s.ok()) s = (*plan)->run(blocks[0], blocks[1], blocks[2], blocks[3], stream->get());
    if (s.ok()) s = (*stream)->synchronize();
    if (skip_if(state, s)) break;
  }
  for (cu::DevicePtr p : blocks) (void)ctx->free(p);
  set_flops(state, n);
}

// ResNet-18's layer structure at batch 1, 224x224 (random weights; BatchNorm folded away).
carve::Result<carve::ir::Graph> resnet_graph() {
  carve::ir::GraphBuilder b;
  int weights = 0;
  auto conv = [&](carve::ir::ValueId x, int64_t in, int64_t out, int64_t k, int64_t stride) {
    carve::ir::Conv2dOptions o;
    o.strides = {stride, stride};
    const int64_t pad = k / 2;
    o.pads = {pad, pad, pad, pad};
    const std::string id = std::to_string(weights++);
    return b.conv2d(x, b.input("w" + id, DType::kF32, {out, in, k, k}), b.input("b" + id, DType::kF32, {out}), o);
  };
  auto x = b.input("image", DType::kF32, {1, 3, 224, 224});
  auto t = b.relu(conv(x, 3, 64, 7, 2));
  carve::ir::PoolOptions pool;
  pool.kernel = {3, 3};
  pool.strides = {2, 2};
  pool.pads = {1, 1, 1, 1};
  t = b.max_pool(t, pool);
  int64_t channels = 64;
  for (int64_t out : {64, 128, 256, 512}) {
    for (int block = 0; block < 2; ++block) {
      const int64_t stride = (block == 0 && out != 64) ? 2 : 1;
      auto y = b.relu(conv(t, channels, out, 3, stride));
      y = conv(y, out, out, 3, 1);
      auto skip = stride == 1 && channels == out ? t : conv(t, channels, out, 1, stride);
      t = b.relu(b.add(y, skip));
      channels = out;
    }
  }
  auto pooled = b.reshape(b.global_avg_pool(t), {1, 512});
  b.output(b.rename(b.gemm(pooled, b.input("fc", DType::kF32, {1000, 512}), b.input("fc_b", DType::kF32, {1000}),
                           false, true), "logits"));
  return b.build();
}

void BM_Resnet(benchmark::State& state, rt::CudaGemm path, bool tf32) {
  run_model(state, resnet_graph(), 4, path, tf32);
}

}  // namespace

BENCHMARK(BM_BandwidthAdd)->Name("Bandwidth/add")->ArgName("MiB")->Arg(64)->Arg(256)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BandwidthMemcpy)->Name("Bandwidth/memcpy_dtod")->ArgName("MiB")->Arg(64)->Arg(256)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Gemm, cublaslt, rt::CudaGemm::kCublasLt, false)->Name("Gemm/cublaslt")->ArgName("n")
    ->Arg(1024)->Arg(2048)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmDirect)->Name("Gemm/direct")->ArgName("n")->Arg(1024)->Arg(2048)->Arg(4096)->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Gemm, generated, rt::CudaGemm::kGenerated, false)->Name("Gemm/generated")->ArgName("n")
    ->Arg(1024)->Arg(2048)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Gemm, cublaslt_tf32, rt::CudaGemm::kCublasLt, true)->Name("Gemm/cublaslt_tf32")->ArgName("n")
    ->Arg(1024)->Arg(2048)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Resnet, cublaslt, rt::CudaGemm::kCublasLt, false)->Name("Model/resnet_blocks/cublaslt")
    ->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Resnet, generated, rt::CudaGemm::kGenerated, false)->Name("Model/resnet_blocks/generated")
    ->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Resnet, cublaslt_tf32, rt::CudaGemm::kCublasLt, true)->Name("Model/resnet_blocks/cublaslt_tf32")
    ->UseRealTime()->Unit(benchmark::kMicrosecond);
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
