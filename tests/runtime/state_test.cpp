// State semantics: a value read from a handle is a snapshot of the handle at the read,
// whatever the graph writes to that handle afterwards (session.h).
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <cstring>

#include <fmt/format.h>
#include <string>
#include <thread>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/jit/host_target.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "test_support.h"

using namespace carve;
using ir::DType;

namespace {

runtime::Buffer borrow(const std::vector<float>& v, ir::Shape shape) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(float));
  return *runtime::Buffer::borrow(bytes, DType::kF32, std::move(shape));
}

std::vector<float> floats_of(const runtime::Buffer& b) {
  auto s = b.span<float>();
  if (!s.ok()) return {};
  return {s->begin(), s->end()};
}

bool have_jit() {
  if (jit::cpu_jit_available()) return true;
  test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
  return false;
}

// R = read_handle(h); write_handle(h, x); c = add(R, y)
ir::Graph read_then_overwrite() {
  ir::GraphBuilder b("snapshot");
  b.handle("h", DType::kF32, {4});
  auto x = b.input("x", DType::kF32, {4});
  auto y = b.input("y", DType::kF32, {4});
  auto r = b.read_handle("h");
  b.write_handle("h", x);
  b.output(b.rename(b.add(r, y), "c"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

}  // namespace

TEST_CASE("runtime/state/a handle read is a snapshot even when the handle is written before its readers") {
  if (!have_jit()) return;
  const ir::Graph graph = read_then_overwrite();
  for (bool sequential : {true, false})
    for (bool fuse : {true, false}) {
      CAPTURE(sequential);
      CAPTURE(fuse);
      auto session = runtime::Session::create({.threads = 2});
      REQUIRE(session.ok());
      auto h = runtime::BufferHandle::create("h", DType::kF32, {4});
      REQUIRE(h.ok());
      runtime::CompileOptions options{.fuse = fuse, .handles = {*h}};
      options.schedule.sequential = sequential;
      auto program = (*session)->compile(graph, options);
      REQUIRE_MESSAGE(program.ok(), program.status().to_string());
      const std::vector<float> x(4, 1.0f), y(4, 0.0f);
      std::vector<runtime::Buffer> inputs{borrow(x, {4}), borrow(y, {4})};
      auto first = (*program)->run(inputs);
      REQUIRE(first.ok());
      CHECK(floats_of(first->at(0)) == std::vector<float>(4, 0.0f));  // h was 0 at the read
      CHECK(floats_of(*(*h)->read()) == std::vector<float>(4, 1.0f));
      auto second = (*program)->run(inputs);
      REQUIRE(second.ok());
      CHECK(floats_of(second->at(0)) == std::vector<float>(4, 1.0f));  // the previous run's write
    }
}

TEST_CASE("runtime/state/random reads and writes of handles match the reference interpreter") {
  if (!have_jit()) return;
  auto session = runtime::Session::create({.threads = 2});
  REQUIRE(session.ok());
  CHECK(rc::check("state ops: carve (random fusion, sequential or parallel) == reference", [&] {
    // Two handles and a chain of steps in graph order: read a handle, compute from pool
    // values, write a pool value to a handle; outputs are a few pool values.
    const ir::Shape shape{*rc::gen::element<int64_t>(4, 37, 1024)};
    ir::GraphBuilder b("state");
    const std::vector<std::string> names{"h0", "h1"};
    for (const auto& n : names) b.handle(n, DType::kF32, shape);
    std::vector<ir::ValueId> pool{b.input("x", DType::kF32, shape)};
    for (int steps = *rc::gen::inRange(1, 10); steps > 0; --steps) {
      const std::string& h = *rc::gen::elementOf(names);
      const ir::ValueId a = *rc::gen::elementOf(pool);
      switch (*rc::gen::inRange(0, 4)) {
        case 0: pool.push_back(b.read_handle(h)); break;
        case 1: b.write_handle(h, a); break;
        case 2: pool.push_back(b.add(a, *rc::gen::elementOf(pool))); break;
        default: pool.push_back(b.reshape(b.neg(b.reshape(a, {1, shape[0]})), shape.dims())); break;
      }
    }
    for (size_t i = 1; i < pool.size(); ++i)
      if (*rc::gen::inRange(0, 2) == 0 || i + 1 == pool.size()) b.output(pool[i]);
    auto graph = b.build();
    RC_PRE(graph.ok());  // e.g. no outputs: nothing to check

    std::vector<float> x(static_cast<size_t>(shape[0]));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    reference::HostTensor xt = reference::HostTensor::from<float>(shape, x);
    reference::ReferenceHandles ref_handles;
    for (const auto& n : names) ref_handles[n] = *reference::HostTensor::zeros({DType::kF32, shape});
    auto expected = reference::run_reference(*graph, {xt}, &ref_handles);
    RC_ASSERT(expected.ok());

    const bool sequential = *rc::gen::arbitrary<bool>();
    const bool fuse = *rc::gen::arbitrary<bool>();
    std::vector<std::shared_ptr<runtime::BufferHandle>> handles;
    for (const auto& n : names) handles.push_back(*runtime::BufferHandle::create(n, DType::kF32, shape));
    runtime::CompileOptions options{.fuse = fuse, .handles = handles};
    options.schedule.sequential = sequential;
    auto program = session->get()->compile(*graph, options);
    RC_ASSERT(program.ok());
    std::vector<runtime::Buffer> inputs{borrow(x, shape)};
    auto outputs = (*program)->run(inputs);
    RC_ASSERT(outputs.ok());
    RC_ASSERT(outputs->size() == expected->size());
    for (size_t i = 0; i < outputs->size(); ++i) RC_ASSERT(floats_of(outputs->at(i)) == (*expected)[i].as<float>());
    for (size_t i = 0; i < names.size(); ++i)
      RC_ASSERT(floats_of(*handles[i]->read()) == ref_handles[names[i]].as<float>());
  }));
}

TEST_CASE("runtime/state/caller buffers overlapping by address are rejected naming both") {
  if (!have_jit()) return;
  ir::GraphBuilder b("overlap");
  b.handle("h", DType::kF32, {4});
  auto x = b.input("x", DType::kF32, {4});
  auto w = b.constant("w", DType::kF32, {4}, std::vector<uint8_t>(16, 0));
  auto r = b.read_handle("h");
  b.output(b.rename(b.add(b.add(x, r), w), "y"));
  b.output(b.rename(b.neg(x), "z"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto session = runtime::Session::create({.threads = 2});
  REQUIRE(session.ok());
  auto h = runtime::BufferHandle::create("h", DType::kF32, {4});
  REQUIRE(h.ok());
  auto program = (*session)->compile(*g, {.handles = {*h}});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());

  std::vector<float> memory(8, 1.0f);
  auto over = [&](size_t first, bool writable) {
    std::span<std::byte> bytes(reinterpret_cast<std::byte*>(memory.data() + first), 16);
    return *runtime::Buffer::borrow(bytes, DType::kF32, {4}, writable);
  };
  // Two borrows of the same pointer: different storages, the same bytes.
  std::vector<runtime::Buffer> inputs{over(0, false)};
  std::vector<runtime::Buffer> outputs{over(2, true), over(4, true)};
  Status s = (*program)->run(inputs, outputs);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("output 'y'") != std::string::npos);
  CHECK(s.message().find("input 'x'") != std::string::npos);
  CHECK(s.message().find(fmt::format("buffer #{}", inputs[0].id().value)) != std::string::npos);
  // Two outputs over each other.
  outputs = {over(4, true), over(6, true)};
  CHECK((*program)->run(inputs, outputs).code() == ErrorCode::kInvalidArgument);
  // A caller buffer over a handle's memory.
  runtime::Buffer handle_memory = (*h)->memory();
  std::vector<runtime::Buffer> on_handle{handle_memory};
  auto hs = (*program)->run(on_handle);
  CHECK(hs.status().code() == ErrorCode::kInvalidArgument);
  CHECK(hs.status().message().find("handle 'h'") != std::string::npos);
  // Disjoint buffers run.
  std::vector<float> other(8, 0.0f);
  std::span<std::byte> out_bytes(reinterpret_cast<std::byte*>(other.data()), 32);
  outputs = {*runtime::Buffer::borrow(out_bytes.first(16), DType::kF32, {4}, true),
             *runtime::Buffer::borrow(out_bytes.subspan(16), DType::kF32, {4}, true)};
  CHECK((*program)->run(inputs, outputs).ok());
}

TEST_CASE("runtime/state/a run failed by the hazard checker leaves its handles as they were") {
  if (!have_jit()) return;
  if (std::thread::hardware_concurrency() < 2) {
    test::skip("one hardware thread: two launches can never overlap, so no race can be observed");
    return;
  }
  // exp writes a, neg reads it and its result goes to the handle; the edge exp -> neg is
  // removed on purpose and each task is held 2 ms, so the checker sees them overlap.
  ir::GraphBuilder b("race");
  b.handle("acc", DType::kF32, {64, 64});
  auto x = b.input("x", DType::kF32, {64, 64});
  auto c = b.neg(b.exp(x));
  b.write_handle("acc", c);
  b.output(b.rename(b.relu(c), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto session = runtime::Session::create({.threads = 2});
  REQUIRE(session.ok());
  auto acc = runtime::BufferHandle::create("acc", DType::kF32, {64, 64});
  REQUIRE(acc.ok());
  runtime::CompileOptions options{.fuse = false, .handles = {*acc}};
  options.schedule.drop_edges = {{0, 1}};
  auto program = (*session)->compile(*g, options);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  std::vector<float> xs(64 * 64, 0.5f);
  std::vector<runtime::Buffer> inputs{borrow(xs, {64, 64})};
  const std::vector<float> before(64 * 64, 7.0f);
  int failures = 0;
  for (int attempt = 0; attempt < 10 && failures == 0; ++attempt) {
    REQUIRE((*acc)->set(borrow(before, {64, 64})).ok());
    auto out = (*program)->run(inputs, {.check_hazards = true, .fail_on_hazard = true, .stretch_us = 2000});
    if (out.ok()) continue;
    ++failures;
    CHECK(out.status().code() == ErrorCode::kInternal);
    CHECK(out.status().message().find("race") != std::string::npos);
    CHECK(floats_of(*(*acc)->read()) == before);
  }
  CHECK(failures == 1);
}

TEST_CASE("runtime/state/write_handle_at out of range fails the run and marks the handle invalid") {
  if (!have_jit()) return;
  // cache[4,2] <- row at pos; y = cache (read after the write).
  ir::GraphBuilder b("kv");
  b.handle("cache", DType::kF32, {4, 2});
  auto row = b.input("row", DType::kF32, {1, 2});
  auto pos = b.input("pos", DType::kI64, {});
  b.write_handle_at("cache", row, pos, 0);
  b.output(b.rename(b.neg(row), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  for (bool sequential : {true, false}) {
    CAPTURE(sequential);
    auto session = runtime::Session::create({.threads = 2});
    REQUIRE(session.ok());
    auto cache = runtime::BufferHandle::create("cache", DType::kF32, {4, 2});
    REQUIRE(cache.ok());
    runtime::CompileOptions options{.handles = {*cache}};
    options.schedule.sequential = sequential;
    auto program = (*session)->compile(*g, options);
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const std::vector<float> r{5.0f, 6.0f};
    auto run_at = [&](int64_t p) {
      std::span<const std::byte> pos_bytes(reinterpret_cast<const std::byte*>(&p), sizeof(p));
      std::vector<runtime::Buffer> inputs{borrow(r, {1, 2}), *runtime::Buffer::borrow(pos_bytes, DType::kI64, {})};
      return (*program)->run(inputs);
    };
    REQUIRE(run_at(3).ok());  // the last row: in range
    CHECK(floats_of(*(*cache)->read()) == std::vector<float>{0, 0, 0, 0, 0, 0, 5, 6});
    for (int64_t bad : {int64_t{9}, int64_t{4}, int64_t{1000}, INT64_MAX, int64_t{-5}}) {
      CAPTURE(bad);
      auto failed = run_at(bad);
      REQUIRE_FALSE(failed.ok());
      CHECK(failed.status().code() == ErrorCode::kOutOfBounds);
      CHECK(failed.status().message().find("handle 'cache'") != std::string::npos);
      CHECK(failed.status().message().find(fmt::format("position {}", bad)) != std::string::npos);
      CHECK(failed.status().message().find("<= 3") != std::string::npos);
      // The handle's value is undefined now: reading it, or running with it, says why.
      CHECK((*cache)->read().status().code() == ErrorCode::kInvalidArgument);
      CHECK(run_at(0).status().message().find("no defined value") != std::string::npos);
      REQUIRE((*cache)->reset().ok());
      REQUIRE(run_at(3).ok());
    }
  }
}

namespace {

// x -> 200 unfused launches -> y, and the chain's end written to a handle; with the
// checker's stretch of 1 ms per task a run takes at least 200 ms.
ir::Graph long_chain() {
  ir::GraphBuilder b("long");
  b.handle("state", DType::kF32, {16});
  auto v = b.input("x", DType::kF32, {16});
  for (int i = 0; i < 200; ++i) v = i % 2 == 0 ? b.neg(v) : b.abs(v);
  b.write_handle("state", v);
  b.output(b.rename(b.relu(v), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

}  // namespace

TEST_CASE("runtime/state/a run can be cancelled from another thread or by a deadline") {
  if (!have_jit()) return;
  const ir::Graph graph = long_chain();
  auto session = runtime::Session::create({.threads = 2});
  REQUIRE(session.ok());
  auto state = runtime::BufferHandle::create("state", DType::kF32, {16});
  REQUIRE(state.ok());
  runtime::CompileOptions options{.fuse = false, .handles = {*state}};
  options.schedule.sequential = true;
  auto program = (*session)->compile(graph, options);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const std::vector<float> x(16, 1.0f);
  std::vector<runtime::Buffer> inputs{borrow(x, {16})};
  REQUIRE((*program)->run(inputs).ok());

  // Before the run starts: fails before anything runs, the handle keeps its value.
  std::stop_source early;
  early.request_stop();
  auto before = (*program)->run(inputs, {.stop = early.get_token()});
  CHECK(before.status().code() == ErrorCode::kCancelled);
  CHECK((*state)->read().ok());
  auto past = (*program)->run(inputs, {.deadline = std::chrono::steady_clock::now()});
  CHECK(past.status().code() == ErrorCode::kCancelled);
  CHECK((*state)->read().ok());

  // From another thread, during a run of 200 launches x 1 ms: stops launching.
  std::stop_source source;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    source.request_stop();
  });
  auto during = (*program)->run(inputs, {.check_hazards = true, .stretch_us = 1000, .stop = source.get_token()});
  canceller.join();
  // kCancelled means launches were skipped: the stop came ~20 ms into a >= 200 ms run.
  CHECK(during.status().code() == ErrorCode::kCancelled);
  // The handle may have been half written: its value is undefined until reset.
  CHECK((*state)->read().status().message().find("cancelled") != std::string::npos);
  REQUIRE((*state)->reset().ok());

  // A deadline during the run.
  auto late = (*program)->run(inputs, {.check_hazards = true, .stretch_us = 1000,
                                       .deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20)});
  CHECK(late.status().code() == ErrorCode::kCancelled);
  REQUIRE((*state)->reset().ok());
  // And without either, the program runs as before.
  CHECK((*program)->run(inputs).ok());
  CHECK((*state)->read().ok());
}
