// Session end to end: JIT + plan + arena + executor against the reference interpreter.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "carve/ir/builder.h"
#include "carve/jit/host_target.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "test_support.h"

using namespace carve;
using ir::DType;

namespace {

std::vector<uint8_t> random_f32_bytes(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    float v = dist(rng);
    std::memcpy(bytes.data() + i * 4, &v, 4);
  }
  return bytes;
}

reference::HostTensor random_tensor(ir::Shape shape, uint32_t seed) {
  reference::HostTensor t;
  t.type = {DType::kF32, shape};
  t.bytes = random_f32_bytes(*t.type.shape.num_elements(), seed);
  return t;
}

runtime::Buffer borrow(const reference::HostTensor& t) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(t.bytes.data()), t.bytes.size());
  return *runtime::Buffer::borrow(bytes, t.type.dtype, t.type.shape);
}

double max_rel_error(const runtime::Buffer& got, const reference::HostTensor& want) {
  auto g = *got.span<float>();
  auto w = want.as<float>();
  REQUIRE(g.size() == w.size());
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(g[i]) - double(w[i])));
    max_ref = std::max(max_ref, std::fabs(double(w[i])));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

// x[4,16] -> layer_norm -> matmul+bias -> gelu -> matmul+bias -> +x -> reshape -> softmax
ir::Graph mlp_block() {
  ir::GraphBuilder b("mlp");
  auto x = b.input("x", DType::kF32, {4, 16});
  auto c = [&](const char* name, ir::Shape shape, uint32_t seed) {
    return b.constant(name, DType::kF32, shape, random_f32_bytes(*shape.num_elements(), seed));
  };
  auto h = b.layer_norm(x, c("ln_s", {16}, 1), c("ln_b", {16}, 2));
  auto up = b.gelu(b.add(b.matmul(h, c("w1", {16, 32}, 3)), c("b1", {32}, 4)));
  auto down = b.add(b.matmul(up, c("w2", {32, 16}, 5)), c("b2", {16}, 6));
  auto y = b.softmax(b.reshape(b.add(x, down), {2, 32}), -1);
  b.output(b.rename(y, "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

std::unique_ptr<runtime::Session> session_or_skip() {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return nullptr;
  }
  auto s = runtime::Session::create();
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  return std::move(*s);
}

}  // namespace

TEST_CASE("runtime/session/mlp block matches the reference interpreter") {
  auto session = session_or_skip();
  if (!session) return;
  ir::Graph g = mlp_block();
  reference::HostTensor x = random_tensor({4, 16}, 42);
  auto want = reference::run_reference(g, std::vector<reference::HostTensor>{x});
  REQUIRE(want.ok());
  for (const char* strategy : {"naive", "greedy-size", "online"})
    for (bool fuse : {true, false})
      for (bool inplace : {true, false}) {
        CAPTURE(strategy);
        CAPTURE(fuse);
        CAPTURE(inplace);
        auto program = session->compile(g, {.strategy = strategy, .inplace = inplace, .fuse = fuse});
        REQUIRE_MESSAGE(program.ok(), program.status().to_string());
        std::vector<runtime::Buffer> inputs{borrow(x)};
        auto out = (*program)->run(inputs);
        REQUIRE_MESSAGE(out.ok(), out.status().to_string());
        CHECK(max_rel_error(out->at(0), want->at(0)) < 1e-5);
      }
}

TEST_CASE("runtime/session/caller outputs and repeated runs") {
  auto session = session_or_skip();
  if (!session) return;
  ir::Graph g = mlp_block();
  auto program = session->compile(g, {});
  REQUIRE(program.ok());
  std::vector<float> out_memory(64, -7.0f);
  std::span<std::byte> out_bytes(reinterpret_cast<std::byte*>(out_memory.data()), out_memory.size() * 4);
  std::vector<runtime::Buffer> outputs{*runtime::Buffer::borrow(out_bytes, DType::kF32, {2, 32}, true)};
  for (uint32_t seed : {1u, 2u, 3u}) {
    reference::HostTensor x = random_tensor({4, 16}, seed);
    std::vector<runtime::Buffer> inputs{borrow(x)};
    REQUIRE((*program)->run(inputs, outputs).ok());
    auto want = reference::run_reference(g, std::vector<reference::HostTensor>{x});
    CHECK(max_rel_error(outputs[0], want->at(0)) < 1e-5);
  }
}

TEST_CASE("runtime/session/schedule.sequential runs one launch after another and says so") {
  auto session = session_or_skip();
  if (!session) return;
  ir::Graph g = mlp_block();
  runtime::CompileOptions options;
  options.schedule.sequential = true;
  options.schedule.allow_fallback = false;  // sequential wins over "never fall back"
  auto program = session->compile(g, options);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  CHECK((*program)->schedule().sequential());
  CHECK((*program)->schedule().stats().fallback_reason == "sequential execution requested");
  reference::HostTensor x = random_tensor({4, 16}, 9);
  std::vector<runtime::Buffer> inputs{borrow(x)};
  runtime::RunRecord record;
  auto out = (*program)->run(inputs, {}, &record);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK_FALSE(record.parallel);
  CHECK(record.fallback_reason == "sequential execution requested");
  auto want = reference::run_reference(g, std::vector<reference::HostTensor>{x});
  REQUIRE(want.ok());
  CHECK(max_rel_error(out->at(0), want->at(0)) < 1e-5);
}

TEST_CASE("runtime/session/run argument errors name the input or output") {
  auto session = session_or_skip();
  if (!session) return;
  auto program = session->compile(mlp_block(), {});
  REQUIRE(program.ok());
  reference::HostTensor x = random_tensor({4, 16}, 1);
  reference::HostTensor wrong_shape = random_tensor({16, 4}, 1);
  std::vector<runtime::Buffer> none;
  CHECK((*program)->run(none).status().code() == ErrorCode::kInvalidArgument);
  std::vector<runtime::Buffer> bad{borrow(wrong_shape)};
  auto r = (*program)->run(bad);
  CHECK(r.status().code() == ErrorCode::kShapeError);
  CHECK(r.status().message().find("'x'") != std::string::npos);
  std::vector<runtime::Buffer> inputs{borrow(x)};
  std::vector<runtime::Buffer> read_only{borrow(random_tensor({2, 32}, 3))};
  CHECK((*program)->run(inputs, read_only).code() == ErrorCode::kReadOnly);
}

TEST_CASE("runtime/session/outputs that are inputs or views of inputs are copied") {
  auto session = session_or_skip();
  if (!session) return;
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {2, 3});
  auto e = b.exp(x);
  b.output(x);
  b.output(b.rename(b.reshape(x, {6}), "flat"));
  b.output(b.rename(e, "e"));
  auto g = b.build();
  REQUIRE(g.ok());
  auto program = session->compile(*g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  reference::HostTensor xt = random_tensor({2, 3}, 9);
  std::vector<runtime::Buffer> inputs{borrow(xt)};
  auto out = (*program)->run(inputs);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  auto want = reference::run_reference(*g, std::vector<reference::HostTensor>{xt});
  REQUIRE(want.ok());
  for (size_t i = 0; i < 3; ++i) CHECK(max_rel_error(out->at(i), want->at(i)) < 1e-6);
}

TEST_CASE("runtime/session/compile errors name what is missing") {
  auto session = session_or_skip();
  if (!session) return;
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4});
  b.output(b.add(x, b.constant("w", DType::kF32, {4})));  // no data
  auto g = b.build();
  REQUIRE(g.ok());
  auto p = session->compile(*g, {});
  CHECK(p.status().code() == ErrorCode::kInvalidArgument);
  CHECK(p.status().message().find("'w'") != std::string::npos);

  ir::GraphBuilder hb;
  hb.handle("state", DType::kF32, {4});
  hb.output(hb.exp(hb.read_handle("state")));
  auto hg = hb.build();
  REQUIRE(hg.ok());
  CHECK(session->compile(*hg, {}).status().code() == ErrorCode::kInvalidArgument);
  auto wrong = runtime::BufferHandle::create("state", DType::kF32, {5});
  REQUIRE(wrong.ok());
  CHECK(session->compile(*hg, {.handles = {*wrong}}).status().code() == ErrorCode::kShapeError);
  CHECK(session->compile(*hg, {.strategy = "nope"}).status().code() != ErrorCode::kOk);
}

TEST_CASE("runtime/session/compile rejects ambiguous or misspelt bindings") {
  auto session = session_or_skip();
  if (!session) return;
  ir::GraphBuilder b;
  b.handle("state", DType::kF32, {4});
  auto x = b.input("x", DType::kF32, {4});
  auto w = b.constant("w", DType::kF32, {4});  // no data: bound through CompileOptions::constants
  b.output(b.add(b.add(x, w), b.read_handle("state")));
  auto g = b.build();
  REQUIRE(g.ok());
  auto first = runtime::BufferHandle::create("state", DType::kF32, {4});
  auto second = runtime::BufferHandle::create("state", DType::kF32, {4});
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  std::vector<float> ones(4, 1.0f);
  auto weights = runtime::Buffer::borrow(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(ones.data()), 16), DType::kF32, {4});
  REQUIRE(weights.ok());
  REQUIRE(session->compile(*g, {.handles = {*first}, .constants = {{"w", *weights}}}).ok());

  auto twice = session->compile(*g, {.handles = {*first, *second}, .constants = {{"w", *weights}}});
  CHECK(twice.status().code() == ErrorCode::kInvalidArgument);
  CHECK(twice.status().message().find("two handles named 'state'") != std::string::npos);
  auto null_entry = session->compile(*g, {.handles = {*first, nullptr}, .constants = {{"w", *weights}}});
  CHECK(null_entry.status().code() == ErrorCode::kInvalidArgument);
  auto misspelt = session->compile(*g, {.handles = {*first}, .constants = {{"w", *weights}, {"W", *weights}}});
  CHECK(misspelt.status().code() == ErrorCode::kNotFound);
  CHECK(misspelt.status().message().find("'W'") != std::string::npos);
  auto not_constant = session->compile(*g, {.handles = {*first}, .constants = {{"w", *weights}, {"x", *weights}}});
  CHECK(not_constant.status().code() == ErrorCode::kNotFound);
}

TEST_CASE("runtime/session/handles persist across runs and programs") {
  auto session = session_or_skip();
  if (!session) return;
  // acc <- acc + x, and the new value is also returned.
  ir::GraphBuilder b;
  b.handle("acc", DType::kF32, {8});
  auto x = b.input("x", DType::kF32, {8});
  auto sum = b.add(b.read_handle("acc"), x);
  b.write_handle("acc", sum);
  b.output(b.rename(b.exp(sum), "e"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto acc = runtime::BufferHandle::create("acc", DType::kF32, {8});
  REQUIRE(acc.ok());
  auto p1 = session->compile(*g, {.handles = {*acc}});
  auto p2 = session->compile(*g, {.strategy = "naive", .handles = {*acc}});
  REQUIRE_MESSAGE(p1.ok(), p1.status().to_string());
  REQUIRE(p2.ok());
  std::vector<float> ones(8, 1.0f);
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(ones.data()), 32);
  std::vector<runtime::Buffer> inputs{*runtime::Buffer::borrow(bytes, DType::kF32, {8})};
  REQUIRE((*p1)->run(inputs).ok());
  REQUIRE((*p2)->run(inputs).ok());
  auto out = (*p1)->run(inputs);
  REQUIRE(out.ok());
  auto value = (*p1)->read_handle("acc");
  REQUIRE(value.ok());
  auto values = value->span<float>();
  REQUIRE(values.ok());
  for (float v : *values) CHECK(v == 3.0f);
  CHECK(std::fabs(out->at(0).span<float>()->front() - std::exp(3.0f)) < 1e-5);
  // Host access errors leave the handle unchanged.
  std::vector<float> wrong(4, 9.0f);
  std::span<const std::byte> wrong_bytes(reinterpret_cast<const std::byte*>(wrong.data()), 16);
  CHECK_FALSE((*p1)->write_handle("acc", *runtime::Buffer::borrow(wrong_bytes, DType::kF32, {4})).ok());
  CHECK((*p1)->read_handle("nope").status().code() == ErrorCode::kNotFound);
  CHECK((*acc)->read()->span<float>()->front() == 3.0f);
  REQUIRE((*acc)->reset().ok());
  CHECK((*acc)->read()->span<float>()->front() == 0.0f);
}

TEST_CASE("runtime/session/concurrent compiles and runs are safe") {
  auto session = session_or_skip();
  if (!session) return;
  ir::Graph g = mlp_block();
  reference::HostTensor x = random_tensor({4, 16}, 5);
  auto want = reference::run_reference(g, std::vector<reference::HostTensor>{x});
  REQUIRE(want.ok());
  // The shared program always runs on the parallel executor (no fallback): concurrent
  // run() calls serialise on the program, its tasks run on oneTBB.
  runtime::CompileOptions parallel;
  parallel.schedule.allow_fallback = false;
  auto shared = session->compile(g, parallel);
  REQUIRE(shared.ok());
  std::vector<std::thread> threads;
  std::vector<double> errors(4, 1.0);
  for (size_t t = 0; t < errors.size(); ++t)
    threads.emplace_back([&, t] {
      // Half the threads compile their own program, half share one (runs serialise).
      std::unique_ptr<runtime::CompiledProgram> own;
      runtime::CompiledProgram* program = shared->get();
      if (t % 2 == 0) {
        runtime::CompileOptions own_options = parallel;
        own_options.fuse = t == 0;
        own_options.schedule.sequential = t == 2;
        auto compiled = session->compile(g, own_options);
        if (!compiled.ok()) return;
        own = std::move(*compiled);
        program = own.get();
      }
      std::vector<runtime::Buffer> inputs{borrow(x)};
      for (int i = 0; i < 5; ++i) {
        auto out = program->run(inputs);
        if (!out.ok()) return;
        errors[t] = std::min(errors[t], 0.0) + max_rel_error(out->at(0), want->at(0));
      }
    });
  for (auto& t : threads) t.join();
  for (double e : errors) CHECK(e < 1e-5);
}

// Kernels compiled on many threads at once, most of them calling libm (f64 exp, tanh and erf
// are calls, not inline code), so their links look symbols up in the process at the same
// time: ORC then finishes one thread's lookup on another (a JITDylib's generator serves one
// lookup at a time; the thread that frees it resumes the next). The TSan suite runs this:
// the hand-over of a kernel's address to the thread that asked for it must be visible to
// it (jit/llvm/engine.cpp, materialise). Fresh sessions without a disk cache, so every
// kernel is compiled and linked each time.
TEST_CASE("runtime/session/kernels compiled on many threads at once that call libm") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  for (int64_t round = 0; round < 16; ++round) {
    CAPTURE(round);
    runtime::SessionOptions options;
    options.jit.compile_threads = 8;
    options.jit.disk_cache = false;
    options.threads = 2;
    auto session = runtime::Session::create(options);
    REQUIRE_MESSAGE(session.ok(), session.status().to_string());
    ir::GraphBuilder b("libm");
    const int64_t n = 64 + round;  // new kernels every round
    auto x = b.input("x", DType::kF64, {n});
    b.output(b.exp(x));
    b.output(b.tanh(x));
    b.output(b.erf(x));
    b.output(b.exp(b.neg(x)));
    b.output(b.tanh(b.add(x, x)));
    b.output(b.erf(b.mul(x, x)));
    auto g = b.build();
    REQUIRE_MESSAGE(g.ok(), g.status().to_string());
    auto program = (*session)->compile(*g, {.fuse = false});  // one kernel a node: 9
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    std::vector<double> xs(static_cast<size_t>(n));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = -2.0 + 4.0 * static_cast<double>(i) / static_cast<double>(n);
    reference::HostTensor x_host = reference::HostTensor::from(ir::Shape{n}, xs);
    auto want = reference::run_reference(*g, std::vector<reference::HostTensor>{x_host});
    REQUIRE(want.ok());
    std::vector<runtime::Buffer> inputs{borrow(x_host)};
    auto out = (*program)->run(inputs);
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    REQUIRE(out->size() == want->size());
    for (size_t o = 0; o < want->size(); ++o) {
      auto got = *out->at(o).span<double>();
      auto w = want->at(o).as<double>();
      REQUIRE(got.size() == w.size());
      double worst = 0;
      for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, std::fabs(got[i] - w[i]) / std::max(1.0, std::fabs(w[i])));
      CHECK(worst < 1e-12);
    }
  }
}
