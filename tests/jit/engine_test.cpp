// The JIT engine: caches (memory, disk, a second process), statistics, concurrent
// compilation, IR text, errors.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine_test_util.h"
#include "test_support.h"

namespace carve::jit::jittest {
namespace {

// x: f32[n] -> relu(x * scale + bias) with a per-graph constant shape, so graphs with
// different n compile to different kernels.
ir::Graph small_graph(int64_t n, DType d = DType::kF32) {
  ir::GraphBuilder b;
  auto x = b.input("x", d, {n});
  auto w = b.input("w", d, {n});
  b.output(b.relu(b.add(b.mul(x, w), x)));
  auto g = b.build();
  REQUIRE(g.ok());
  return std::move(g).value();
}

std::vector<KernelGroup> groups_of(const ir::Graph& g) {
  auto order = ir::execution_order(g);
  REQUIRE(order.ok());
  auto groups = form_kernel_groups(g, *order);
  REQUIRE(groups.ok());
  return std::move(groups).value();
}

using carve::test::TempDir;

}  // namespace

TEST_CASE("jit/engine/create without LLVM is unavailable, with LLVM works") {
  auto jit = JitCompiler::create({});
  if (!cpu_jit_available()) {
    CHECK(jit.status().code() == ErrorCode::kUnavailable);
    return;
  }
  REQUIRE_MESSAGE(jit.ok(), jit.status().to_string());
  JitOptions bad;
  bad.opt_level = 7;
  CHECK(JitCompiler::create(bad).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("jit/engine/second compile in one JitCompiler is a memory hit") {
  if (skip_without_jit()) return;
  JitOptions o;
  o.disk_cache = false;
  auto jit = JitCompiler::create(o);
  REQUIRE(jit.ok());
  ir::Graph g = small_graph(1000);
  auto groups = groups_of(g);
  auto first = (*jit)->compile(g, groups);
  REQUIRE_MESSAGE(first.ok(), first.status().to_string());
  JitStats s1 = (*jit)->stats();
  CHECK(s1.codegen_count == static_cast<int64_t>(groups.size()));
  CHECK(s1.memory_hits == 0);
  CHECK_FALSE((*first)[0].from_memory_cache);
  auto second = (*jit)->compile(g, groups);
  REQUIRE(second.ok());
  JitStats s2 = (*jit)->stats();
  CHECK(s2.codegen_count == s1.codegen_count);
  CHECK(s2.memory_hits == static_cast<int64_t>(groups.size()));
  CHECK((*second)[0].from_memory_cache);
  CHECK(reinterpret_cast<void*>((*second)[0].fn) == reinterpret_cast<void*>((*first)[0].fn));
  CHECK((*second)[0].key == (*first)[0].key);
  CHECK((*jit)->cache_dir().empty());
  // A group with another name but identical code shares the kernel (keyed by IR).
  KernelGroup renamed = groups[0];
  renamed.name = "something_else";
  auto third = (*jit)->compile_group(g, renamed);
  REQUIRE(third.ok());
  CHECK(third->from_memory_cache);
  // Different code (another shape) is a different key.
  ir::Graph g2 = small_graph(1001);
  auto other = (*jit)->compile(g2, groups_of(g2));
  REQUIRE(other.ok());
  CHECK((*other)[0].key != (*first)[0].key);
  CHECK((*jit)->stats().codegen_count == s1.codegen_count + 1);
}

TEST_CASE("jit/engine/a fresh JitCompiler on the same cache dir loads objects from disk") {
  if (skip_without_jit()) return;
  TempDir dir;
  ir::Graph g = small_graph(777);
  auto groups = groups_of(g);
  std::mt19937_64 rng(5);
  std::vector<HostTensor> in = {random_tensor(rng, DType::kF32, {777}), random_tensor(rng, DType::kF32, {777})};
  JitOptions o;
  o.cache_dir = dir.path;
  {
    auto jit = JitCompiler::create(o);
    REQUIRE(jit.ok());
    CHECK((*jit)->cache_dir() == dir.path);
    auto k = (*jit)->compile(g, groups);
    REQUIRE(k.ok());
    CHECK((*jit)->stats().codegen_count == 1);
    CHECK((*jit)->stats().disk_writes == 1);
    CHECK(std::filesystem::exists(dir.path + "/cpu-" + (*k)[0].key + ".obj"));
  }
  auto jit2 = JitCompiler::create(o);
  REQUIRE(jit2.ok());
  auto k2 = (*jit2)->compile(g, groups);
  REQUIRE(k2.ok());
  JitStats s = (*jit2)->stats();
  CHECK(s.codegen_count == 0);
  CHECK(s.disk_hits == 1);
  CHECK((*k2)[0].from_disk_cache);
  // and the loaded kernel computes the right thing
  auto out = run_jit(**jit2, g, in);
  REQUIRE(out.ok());
  CHECK((*jit2)->stats().codegen_count == 0);
  auto ref = run_reference(g, in);
  REQUIRE(ref.ok());
  CHECK(compare((*out)[0], (*ref)[0]) == "");
}

// Helper for the next test: run in a child process (see below) it compiles the graph
// with the cache dir from CARVE_TEST_CACHE_DIR and prints its statistics.
TEST_CASE("jit/engine/helper child process compile") {
  const char* dir = std::getenv("CARVE_TEST_CACHE_DIR");
  if (dir == nullptr || shared_jit() == nullptr) return;  // only meaningful as a child
  JitOptions o;
  o.cache_dir = dir;
  auto jit = JitCompiler::create(o);
  REQUIRE(jit.ok());
  ir::Graph g = small_graph(4242);
  auto k = (*jit)->compile(g, groups_of(g));
  REQUIRE(k.ok());
  JitStats s = (*jit)->stats();
  std::printf("CARVE_STATS codegen=%lld disk_hits=%lld\n", static_cast<long long>(s.codegen_count),
              static_cast<long long>(s.disk_hits));
  std::fflush(stdout);
}

TEST_CASE("jit/engine/a second process with the same cache dir does no codegen") {
  if (skip_without_jit()) return;
  TempDir dir;
  auto child = [&]() -> std::string {
    std::string cmd = "CARVE_TEST_CACHE_DIR=" + dir.path +
                      " /proc/" + std::to_string(::getpid()) + "/exe" +
                      " '--test-case=jit/engine/helper child process compile' --no-version 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
    auto pos = out.find("CARVE_STATS");
    return pos == std::string::npos ? out : out.substr(pos, out.find('\n', pos) - pos);
  };
  std::string first = child();
  std::string second = child();
  CHECK(first == "CARVE_STATS codegen=1 disk_hits=0");
  CHECK(second == "CARVE_STATS codegen=0 disk_hits=1");
}

TEST_CASE("jit/engine/concurrent compiles from 4 threads are all correct") {
  if (skip_without_jit()) return;
  JitOptions o;
  o.disk_cache = false;
  auto jit = JitCompiler::create(o);
  REQUIRE(jit.ok());
  constexpr int kThreads = 4;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) {
        // distinct graphs per thread, plus one graph every thread shares
        int64_t n = rep == 2 ? 999 : 100 + t * 10 + rep;
        DType d = (t % 2 == 0) ? DType::kF32 : DType::kF16;
        if (rep == 2) d = DType::kF32;
        ir::Graph g = small_graph(n, d);
        std::mt19937_64 rng(static_cast<uint64_t>(t * 100 + rep));
        std::vector<HostTensor> in = {random_tensor(rng, d, {n}), random_tensor(rng, d, {n})};
        auto out = run_jit(**jit, g, in);
        if (!out.ok()) {
          errors[static_cast<size_t>(t)] = out.status().to_string();
          return;
        }
        auto ref = run_reference(g, in);
        std::string diff = ref.ok() ? compare((*out)[0], (*ref)[0]) : ref.status().to_string();
        if (!diff.empty()) errors[static_cast<size_t>(t)] = diff;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK_MESSAGE(errors[static_cast<size_t>(t)].empty(), errors[static_cast<size_t>(t)]);
  JitStats s = (*jit)->stats();
  CHECK(s.kernels_requested == kThreads * 3);
  CHECK(s.codegen_count == kThreads * 2 + 1);  // the shared graph compiled once
  CHECK(s.memory_hits == kThreads - 1);
}

TEST_CASE("jit/engine/emit_ir shows the kernel ABI noalias and target attributes") {
  if (skip_without_jit()) return;
  ir::Graph g = small_graph(64);
  auto groups = groups_of(g);
  auto ir_text = shared_jit()->emit_ir(g, groups[0]);
  REQUIRE(ir_text.ok());
  CHECK(ir_text->find("define void @carve_kernel(ptr") != std::string::npos);
  CHECK(ir_text->find("noalias") != std::string::npos);
  CHECK(ir_text->find("\"target-cpu\"") != std::string::npos);
  auto opt = shared_jit()->emit_ir(g, groups[0], /*optimized=*/true);
  REQUIRE(opt.ok());
  CHECK(opt->find("define internal void @carve_body") == std::string::npos);  // inlined
  // vectorised for the host (the loop works on <N x float>)
  CHECK(opt->find("x float>") != std::string::npos);
  // may_alias removes noalias from the pair (in-place output over input 0)
  KernelGroup aliased = groups[0];
  aliased.may_alias = {{0, 2}};
  auto a = shared_jit()->emit_ir(g, aliased);
  REQUIRE(a.ok());
  CHECK(a->find("ptr noalias readonly align 4 dereferenceable(256) %op1") != std::string::npos);
  CHECK(a->find("ptr readonly align 4 dereferenceable(256) %op0") != std::string::npos);
  CHECK(a->find("ptr align 4 dereferenceable(256) %op2") != std::string::npos);
}

TEST_CASE("jit/engine/malformed groups are errors not crashes") {
  if (skip_without_jit()) return;
  ir::Graph g = small_graph(8);
  auto groups = groups_of(g);
  KernelGroup bad = groups[0];
  bad.operands.push_back(KernelOperand{OperandRole::kInput, 999});
  CHECK(shared_jit()->compile_group(g, bad).status().code() == ErrorCode::kInvalidArgument);
  bad = groups[0];
  bad.may_alias = {{0, 17}};
  CHECK(shared_jit()->compile_group(g, bad).status().code() == ErrorCode::kInvalidArgument);
  bad = groups[0];
  bad.nodes = {};
  CHECK(!shared_jit()->compile_group(g, bad).ok());
  bad = groups[0];
  bad.operands.erase(bad.operands.begin());  // x is no longer an operand
  CHECK(shared_jit()->compile_group(g, bad).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("jit/engine/opt level 0 kernels compute the same") {
  if (skip_without_jit()) return;
  JitOptions o;
  o.disk_cache = false;
  o.opt_level = 0;
  auto jit = JitCompiler::create(o);
  REQUIRE(jit.ok());
  ir::Graph g = small_graph(333, DType::kBf16);
  std::mt19937_64 rng(9);
  std::vector<HostTensor> in = {random_tensor(rng, DType::kBf16, {333}), random_tensor(rng, DType::kBf16, {333})};
  auto a = run_jit(**jit, g, in);
  auto b = run_jit(*shared_jit(), g, in);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*a)[0].bytes == (*b)[0].bytes);
}

TEST_CASE("jit/engine/matmul with a fused epilogue equals the reference") {
  if (skip_without_jit()) return;
  for (DType d : {DType::kF32, DType::kF16}) {
    ir::GraphBuilder b;
    auto x = b.input("x", d, {13, 17});
    auto w = b.input("w", d, {17, 9});
    auto bias = b.input("bias", d, {9});
    auto res = b.input("res", d, {13, 9});
    b.output(b.add(b.gelu(b.add(b.matmul(x, w), bias)), res));
    auto g = b.build();
    REQUIRE(g.ok());
    std::mt19937_64 rng(11);
    std::vector<HostTensor> in = {random_tensor(rng, d, {13, 17}, -1, 1), random_tensor(rng, d, {17, 9}, -1, 1),
                                  random_tensor(rng, d, {9}), random_tensor(rng, d, {13, 9})};
    std::vector<CompiledKernel> kernels;
    auto out = run_jit(*shared_jit(), *g, in, nullptr, {}, &kernels);
    if (!out.ok() && out.status().code() == ErrorCode::kUnsupported) {
      carve::test::skip("matmul emitter not built: " + out.status().message());
      return;
    }
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK(kernels.size() == 1);  // matmul + add + gelu + add in one kernel
    JitRunOptions unfused;
    unfused.fusion.fuse = false;
    auto u = run_jit(*shared_jit(), *g, in, nullptr, unfused);
    REQUIRE(u.ok());
    CHECK(compare((*out)[0], (*u)[0]) == "");  // the epilogue rounds like the unfused nodes
    auto ref = run_reference(*g, in);
    REQUIRE(ref.ok());
    double tol = d == DType::kF16 ? 4.0 / 1024 : 1e-5;
    CHECK(compare((*out)[0], (*ref)[0], tol, tol) == "");
  }
}

}  // namespace carve::jit::jittest

namespace carve::jit::jittest {
namespace {

int64_t status_kb(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string name;
  int64_t kb = -1;
  while (status >> name) {
    if (name == field) {
      status >> kb;
      return kb;
    }
  }
  return -1;
}

}  // namespace

TEST_CASE("jit/engine/emitting a fused kernel does not copy the graph and its constants") {
  if (skip_without_jit()) return;
  // matmul + bias: a group with an epilogue; beside it, 256 MB of constant data.
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {8, 64});
  auto w = b.input("w", DType::kF32, {64, 64});
  auto bias = b.input("bias", DType::kF32, {64});
  b.output(b.add(b.matmul(x, w), bias));
  b.output(b.neg(b.constant("big", DType::kF32, {64 << 20}, std::vector<uint8_t>(size_t{256} << 20, 0))));
  auto g = b.build();
  REQUIRE(g.ok());
  auto groups = groups_of(*g);
  const KernelGroup* fused = nullptr;
  for (const KernelGroup& k : groups)
    if (k.nodes.size() > 1) fused = &k;
  REQUIRE(fused != nullptr);
  JitOptions o;
  o.disk_cache = false;
  auto jit = JitCompiler::create(o);
  REQUIRE(jit.ok());
  REQUIRE((*jit)->emit_ir(*g, *fused).ok());  // LLVM's one-time set-up, before measuring
  // Reset the peak RSS to the current RSS (Linux: clear_refs 5), then emit and compile.
  std::ofstream("/proc/self/clear_refs") << "5";
  const int64_t before = status_kb("VmRSS:");
  REQUIRE(before > 0);
  for (int i = 0; i < 3; ++i) REQUIRE((*jit)->emit_ir(*g, *fused).ok());
  REQUIRE((*jit)->compile_group(*g, *fused).ok());
  const int64_t growth_mb = (status_kb("VmHWM:") - before) / 1024;
  CHECK_MESSAGE(growth_mb < 128, "peak RSS grew by ", growth_mb, " MB while emitting one kernel");
}

}  // namespace carve::jit::jittest
