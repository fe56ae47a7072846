// The CUDA device path on a GPU (every case skips with "no CUDA device: ..." without one):
// every op family's graphs through Session(cuda) equal the reference interpreter (graph
// replay and plain streams); 4 streams == 1 stream bit for bit; a graph replay with new
// caller device pointers; the KV decoder's logits within 1e-3 of the CPU reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>

#include "cuda_cases.h"
#include "carve/runtime/cuda/cuda_allocator.h"
#include "carve/runtime/session.h"
#include "kv_decoder/decoder_runner.h"

namespace carve::jit::cuda {

using namespace carve::runtime::cuda;
using namespace carve::reference;
namespace {

namespace rt = carve::runtime;

bool skip_without_gpu() {
  Status s = driver_status();
  if (!s.ok()) carve::test::skip(s.message());
  return !s.ok();
}

rt::SessionOptions device_options(int streams, bool graphs, rt::CudaGemm gemm = rt::CudaGemm::kAuto,
                                  bool tf32 = false) {
  rt::SessionOptions o;
  o.device = {rt::DeviceType::kCuda, 0};
  o.streams = streams;
  o.cuda_graphs = graphs;
  o.cuda_gemm = gemm;
  o.cuda_tf32 = tf32;
  return o;
}

// run_graph's contract through a Session on the device: host inputs and handles.
GpuRunner session_runner(rt::Session& session) {
  return [&session](const ir::Graph& g, std::span<const HostTensor> in,
                    ReferenceHandles* handles) -> Result<std::vector<HostTensor>> {
    rt::CompileOptions options;
    for (const ir::Handle& h : g.handles) {
      CARVE_ASSIGN_OR_RETURN(auto bh, rt::BufferHandle::create(h.name, h.type.dtype, h.type.shape));
      options.handles.push_back(bh);
    }
    CARVE_ASSIGN_OR_RETURN(auto program, session.compile(g, options));
    std::vector<rt::Buffer> inputs;
    for (const HostTensor& t : in) {
      std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(t.bytes.data()), t.bytes.size());
      CARVE_ASSIGN_OR_RETURN(rt::Buffer b, rt::Buffer::borrow(bytes, t.type.dtype, t.type.shape));
      inputs.push_back(std::move(b));
    }
    CARVE_ASSIGN_OR_RETURN(auto outputs, program->run(inputs));
    std::vector<HostTensor> result;
    for (const rt::Buffer& b : outputs) {
      HostTensor t;
      t.type = ir::TensorType{b.dtype(), b.shape()};
      t.bytes.resize(b.size());
      CARVE_ASSIGN_OR_RETURN(auto bytes, b.bytes());
      std::memcpy(t.bytes.data(), bytes.data(), b.size());
      result.push_back(std::move(t));
    }
    if (handles != nullptr)
      for (const auto& h : options.handles) {
        CARVE_ASSIGN_OR_RETURN(rt::Buffer value, h->read());
        HostTensor t;
        t.type = h->type();
        t.bytes.resize(value.size());
        CARVE_ASSIGN_OR_RETURN(auto bytes, value.bytes());
        std::memcpy(t.bytes.data(), bytes.data(), value.size());
        (*handles)[h->name()] = std::move(t);
      }
    return result;
  };
}

void run_session_families(int streams, bool graphs) {
  if (skip_without_gpu()) return;
  auto session = rt::Session::create(device_options(streams, graphs));
  REQUIRE_MESSAGE(session.ok(), session.status().to_string());
  const GpuRunner runner = session_runner(**session);
  for (const auto& cases : {elementwise_cases(), layout_cases(), reduction_cases(), pool_cases(), matmul_cases(),
                            conv_cases()})
    run_gpu_family(cases, runner);
}

}  // namespace

TEST_CASE("cuda/gpu/session/every op family matches the reference with graph replay") { run_session_families(4, true); }
TEST_CASE("cuda/gpu/session/every op family matches the reference with streams") { run_session_families(4, false); }

namespace {

// Both GEMM paths on the same graphs: cuBLASLt (with its im2col/epilogue kernels) and the
// generated kernels, each against the reference.
void run_gemm_families(rt::CudaGemm gemm) {
  if (skip_without_gpu()) return;
  for (bool graphs : {true, false}) {
    CAPTURE(graphs);
    auto session = rt::Session::create(device_options(4, graphs, gemm));
    REQUIRE_MESSAGE(session.ok(), session.status().to_string());
    const GpuRunner runner = session_runner(**session);
    run_gpu_family(matmul_cases(), runner);
    run_gpu_family(conv_cases(), runner);
  }
}

// A layer mix big enough to matter: how many groups went through cuBLASLt (explain) and
// the worst relative error against the reference.
struct GemmMix {
  std::string explain;
  double worst = 0;
};

GemmMix run_gemm_mix(const rt::SessionOptions& options) {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {2, 32, 20, 20});
  ir::Conv2dOptions pad1;
  pad1.pads = {1, 1, 1, 1};
  auto c3 = b.relu(b.conv2d(x, b.input("w3", DType::kF32, {48, 32, 3, 3}), b.input("b3", DType::kF32, {48}), pad1));
  auto c1 = b.conv2d(c3, b.input("w1", DType::kF32, {64, 48, 1, 1}));
  b.output(b.rename(c1, "features"));
  auto m = b.matmul(b.input("a", DType::kF32, {256, 384}), b.input("w", DType::kF32, {384, 320}));
  b.output(b.rename(b.add(m, b.input("bias", DType::kF32, {320})), "linear"));
  // Big enough for the generated kernel's 128x128 tiles, ragged at both edges.
  b.output(b.rename(b.matmul(b.input("tall", DType::kF32, {2100, 64}), b.input("wide", DType::kF32, {64, 2000})), "outer"));
  auto graph = b.build();
  REQUIRE_MESSAGE(graph.ok(), graph.status().to_string());
  auto session = rt::Session::create(options);
  REQUIRE_MESSAGE(session.ok(), session.status().to_string());
  auto program = (*session)->compile(*graph, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  std::mt19937_64 rng(7);
  std::vector<HostTensor> in;
  std::vector<rt::Buffer> buffers;
  for (const ir::Value& v : graph->values)
    if (v.kind == ir::ValueKind::kInput) in.push_back(random_tensor(rng, v.type, -1, 1));
  for (const HostTensor& t : in) {
    auto bytes = std::span(reinterpret_cast<const std::byte*>(t.bytes.data()), t.bytes.size());
    auto buffer = rt::Buffer::borrow(bytes, t.type.dtype, t.type.shape);
    REQUIRE(buffer.ok());
    buffers.push_back(std::move(*buffer));
  }
  auto want = run_reference(*graph, in, nullptr);
  REQUIRE(want.ok());
  GemmMix mix{(*program)->explain(), 0};
  for (int run = 0; run < 2; ++run) {  // the second run replays the captured graph
    auto got = (*program)->run(buffers);
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    for (size_t i = 0; i < got->size(); ++i) {
      const HostTensor& w = (*want)[i];
      auto bytes = (*got)[i].bytes();
      REQUIRE(bytes.ok());
      const auto* g = reinterpret_cast<const float*>(bytes->data());
      const auto* r = reinterpret_cast<const float*>(w.bytes.data());
      double scale = 0, err = 0;
      for (size_t e = 0; e < w.bytes.size() / 4; ++e) {
        scale = std::max(scale, std::abs(double(r[e])));
        err = std::max(err, std::abs(double(g[e]) - double(r[e])));
      }
      mix.worst = std::max(mix.worst, err / std::max(scale, 1.0));
    }
  }
  return mix;
}

}  // namespace

TEST_CASE("cuda/gpu/session/matmul and conv through cuBLASLt match the reference") {
  run_gemm_families(rt::CudaGemm::kCublasLt);
}
TEST_CASE("cuda/gpu/session/matmul and conv with generated kernels match the reference") {
  run_gemm_families(rt::CudaGemm::kGenerated);
}

TEST_CASE("cuda/gpu/session/cuBLASLt runs every f32 GEMM group of a layer mix, TF32 only when asked") {
  if (skip_without_gpu()) return;
  const GemmMix f32 = run_gemm_mix(device_options(4, true, rt::CudaGemm::kCublasLt));
  MESSAGE(f32.explain);
  CHECK(f32.explain.find("GEMM groups: 4 through cuBLASLt") != std::string::npos);
  CHECK(f32.explain.find("(f32)") != std::string::npos);
  CHECK(f32.worst <= 1e-5);
  const GemmMix generated = run_gemm_mix(device_options(4, true, rt::CudaGemm::kGenerated));
  CHECK(generated.explain.find("GEMM groups: generated kernels") != std::string::npos);
  CHECK(generated.worst <= 1e-5);
  const GemmMix tf32 = run_gemm_mix(device_options(4, true, rt::CudaGemm::kCublasLt, true));
  CHECK(tf32.explain.find("TF32 allowed") != std::string::npos);
  MESSAGE("worst relative error: f32 " << f32.worst << ", generated " << generated.worst << ", tf32 " << tf32.worst);
  CHECK(tf32.worst <= 1e-2);
}

TEST_CASE("cuda/gpu/session/a missing cuBLASLt is an error only when asked for") {
  if (skip_without_gpu()) return;
  ::setenv("CARVE_CUBLASLT_LIBRARY", "/nonexistent/libcublasLt.so", 1);
  // The loader runs once per process: this case only holds when it is the first to load it.
  auto forced = rt::Session::create(device_options(1, false, rt::CudaGemm::kCublasLt));
  auto automatic = rt::Session::create(device_options(1, false, rt::CudaGemm::kAuto));
  ::unsetenv("CARVE_CUBLASLT_LIBRARY");
  REQUIRE(automatic.ok());
  if (forced.ok()) {
    carve::test::skip("cuBLASLt was already loaded in this process");
    return;
  }
  CHECK(forced.status().code() == ErrorCode::kUnavailable);
  CHECK(forced.status().message().find("cuBLASLt not available") != std::string::npos);
}

TEST_CASE("cuda/gpu/session/parallel streams equal one stream, graph replay with new pointers") {
  if (skip_without_gpu()) return;
  auto parallel = rt::Session::create(device_options(4, true));
  auto single = rt::Session::create(device_options(1, false));
  REQUIRE(parallel.ok());
  REQUIRE(single.ok());
  std::mt19937_64 rng(99);
  for (const auto& c : matmul_cases()) {
    CAPTURE(c.name);
    auto g = build(c);
    REQUIRE(g.ok());
    std::vector<HostTensor> in;
    for (const ir::Value& v : g->values)
      if (v.kind == ir::ValueKind::kInput) in.push_back(random_tensor(rng, v.type, c.lo, c.hi));
    auto a = session_runner(**parallel)(*g, in, nullptr);
    auto b = session_runner(**single)(*g, in, nullptr);
    REQUIRE_MESSAGE(a.ok(), a.status().to_string());
    REQUIRE_MESSAGE(b.ok(), b.status().to_string());
    for (size_t i = 0; i < a->size(); ++i) CHECK(compare((*a)[i], (*b)[i], 0, 0) == "");
  }
  // Caller device pointers: two different device inputs through one captured graph.
  ir::GraphBuilder gb;
  auto x = gb.input("x", DType::kF32, {256});
  gb.output(gb.rename(gb.relu(gb.add(x, x)), "y"));
  auto graph = gb.build();
  REQUIRE(graph.ok());
  auto program = (*parallel)->compile(*graph, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto alloc = (*parallel)->allocator();
  for (float scale : {1.0f, -2.0f, 3.0f}) {
    std::vector<float> host(256);
    for (size_t i = 0; i < host.size(); ++i) host[i] = scale * (static_cast<float>(i) - 100.0f);
    auto dx = rt::Buffer::allocate(alloc, DType::kF32, {256});  // a new device pointer every time
    REQUIRE(dx.ok());
    REQUIRE(dx->copy_in(std::as_bytes(std::span<const float>(host))).ok());
    std::vector<rt::Buffer> inputs{*dx};
    auto out = (*program)->run(inputs);
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    auto y = *out->at(0).span<float>();
    for (size_t i = 0; i < host.size(); ++i) CHECK(y[i] == std::max(0.0f, host[i] + host[i]));
  }
}

TEST_CASE("cuda/gpu/session/float4 elementwise kernels take device pointers at any 4-byte offset") {
  if (skip_without_gpu()) return;
  auto session = rt::Session::create(device_options(1, true));
  REQUIRE(session.ok());
  constexpr int64_t n = 4096;  // vectorised: f32, same shape, a multiple of 4
  ir::GraphBuilder gb;
  auto x = gb.input("x", DType::kF32, {n});
  gb.output(gb.rename(gb.relu(gb.add(x, x)), "y"));
  auto graph = gb.build();
  REQUIRE(graph.ok());
  auto program = (*session)->compile(*graph, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto alloc = (*session)->allocator();
  auto block = rt::Buffer::allocate(alloc, DType::kF32, {n + 4});
  auto out_block = rt::Buffer::allocate(alloc, DType::kF32, {n + 4});
  REQUIRE(block.ok());
  REQUIRE(out_block.ok());
  for (size_t offset : {0, 4, 8, 12}) {  // 16-byte aligned first (float4 loop), then not (scalar loop)
    CAPTURE(offset);
    std::vector<float> host(n + 4);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 97) - 48.0f + static_cast<float>(offset);
    REQUIRE(block->copy_in(std::as_bytes(std::span<const float>(host))).ok());
    auto dx = block->view(offset, DType::kF32, {n});
    auto dy = out_block->view(offset, DType::kF32, {n});
    REQUIRE_MESSAGE(dx.ok(), dx.status().to_string());
    REQUIRE_MESSAGE(dy.ok(), dy.status().to_string());
    std::vector<rt::Buffer> inputs{*dx}, outputs{*dy};
    auto ran = (*program)->run(inputs, outputs);
    REQUIRE_MESSAGE(ran.ok(), ran.to_string());
    auto y = rt::Buffer::allocate(rt::cpu_allocator(), DType::kF32, {n});
    REQUIRE(y.ok());
    REQUIRE(y->copy_from(*dy).ok());
    auto values = *y->span<float>();
    const size_t first = offset / 4;
    int wrong = 0;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i)
      wrong += values[i] != std::max(0.0f, host[first + i] + host[first + i]) ? 1 : 0;
    CHECK(wrong == 0);
  }
}

TEST_CASE("cuda/gpu/session/kv decoder logits match the CPU reference within 1e-3") {
  if (skip_without_gpu()) return;
  auto session = rt::Session::create(device_options(4, true));
  REQUIRE(session.ok());
  examples::DecoderModel model({});
  const auto& c = model.config();
  std::vector<int64_t> tokens{5, 17, 33, 2};
  auto runner = examples::DecoderRunner::create(**session, model, static_cast<int64_t>(tokens.size()));
  REQUIRE_MESSAGE(runner.ok(), runner.status().to_string());
  auto prefill = (*runner)->prefill(tokens);
  REQUIRE_MESSAGE(prefill.ok(), prefill.status().to_string());
  int64_t next = examples::argmax(prefill->data() + (tokens.size() - 1) * c.vocab, c.vocab);
  for (int step = 0; step < 4; ++step) {
    const auto pos = static_cast<int64_t>(tokens.size());
    tokens.push_back(next);
    auto logits = (*runner)->decode(next, pos);
    REQUIRE_MESSAGE(logits.ok(), logits.status().to_string());
    auto full = model.full(static_cast<int64_t>(tokens.size()));
    REQUIRE(full.ok());
    auto want = run_reference(*full, std::vector<HostTensor>{HostTensor::from<int64_t>(
                                         {static_cast<int64_t>(tokens.size())}, tokens)});
    REQUIRE(want.ok());
    const std::vector<float> all = want->at(0).as<float>();
    const float* last = all.data() + (tokens.size() - 1) * c.vocab;
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < c.vocab; ++i) {
      diff = std::max(diff, std::fabs(double((*logits)[static_cast<size_t>(i)]) - double(last[i])));
      ref = std::max(ref, std::fabs(double(last[i])));
    }
    CAPTURE(step);
    CHECK(diff / ref < 1e-3);
    next = examples::argmax(logits->data(), c.vocab);
  }
}

TEST_CASE("cuda/gpu/session/write_handle_at out of range fails the run and marks the handle invalid") {
  if (skip_without_gpu()) return;
  ir::GraphBuilder b("kv");
  b.handle("cache", DType::kF32, {4, 2});
  auto row = b.input("row", DType::kF32, {1, 2});
  auto pos = b.input("pos", DType::kI64, {});
  b.write_handle_at("cache", row, pos, 0);
  b.output(b.rename(b.neg(row), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  for (bool graphs : {true, false}) {
    CAPTURE(graphs);
    auto session = rt::Session::create(device_options(2, graphs));
    REQUIRE_MESSAGE(session.ok(), session.status().to_string());
    auto cache = rt::BufferHandle::create("cache", DType::kF32, {4, 2});
    REQUIRE(cache.ok());
    auto program = (*session)->compile(*g, {.handles = {*cache}});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const std::vector<float> r{5.0f, 6.0f};
    auto run_at = [&](int64_t p) {
      std::span<const std::byte> row_bytes(reinterpret_cast<const std::byte*>(r.data()), 8);
      std::span<const std::byte> pos_bytes(reinterpret_cast<const std::byte*>(&p), sizeof(p));
      std::vector<rt::Buffer> inputs{*rt::Buffer::borrow(row_bytes, DType::kF32, {1, 2}),
                                     *rt::Buffer::borrow(pos_bytes, DType::kI64, {})};
      return (*program)->run(inputs);
    };
    REQUIRE(run_at(3).ok());
    for (int64_t bad : {int64_t{4}, int64_t{1000}, INT64_MAX, int64_t{-5}}) {
      CAPTURE(bad);
      auto failed = run_at(bad);
      REQUIRE_FALSE(failed.ok());
      CHECK(failed.status().code() == ErrorCode::kOutOfBounds);
      CHECK(failed.status().message().find("handle 'cache'") != std::string::npos);
      CHECK(failed.status().message().find("position " + std::to_string(bad)) != std::string::npos);
      CHECK((*cache)->read().status().code() == ErrorCode::kInvalidArgument);
      REQUIRE((*cache)->reset().ok());
      REQUIRE(run_at(1).ok());  // the error word was cleared: the next run is clean
      auto value = (*cache)->read();
      REQUIRE(value.ok());
      auto floats = value->span<float>();
      REQUIRE(floats.ok());
      CHECK(std::vector<float>(floats->begin(), floats->end()) == std::vector<float>{0, 0, 5, 6, 0, 0, 0, 0});
    }
  }
}

}  // namespace carve::jit::cuda
