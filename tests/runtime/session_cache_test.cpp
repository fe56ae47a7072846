// Session with the kernel disk cache: entries gone bad between processes (sessions) are
// logged naming the file, removed and recompiled, and the outputs do not change; compile
// reports where each kernel came from.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "carve/ir/builder.h"
#include "carve/jit/host_target.h"
#include "carve/jit/kernel_cache.h"
#include "carve/runtime/session.h"
#include "test_support.h"

using namespace carve;
using ir::DType;
namespace fs = std::filesystem;

namespace {

using carve::test::TempDir;

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

// Several kernels: layer_norm, matmul + bias + gelu, matmul + bias + residual, softmax.
ir::Graph mlp_block() {
  ir::GraphBuilder b("mlp");
  auto x = b.input("x", DType::kF32, {4, 16});
  auto c = [&](const char* name, ir::Shape shape, uint32_t seed) {
    return b.constant(name, DType::kF32, shape, random_f32_bytes(*shape.num_elements(), seed));
  };
  auto h = b.layer_norm(x, c("ln_s", {16}, 1), c("ln_b", {16}, 2));
  auto up = b.gelu(b.add(b.matmul(h, c("w1", {16, 32}, 3)), c("b1", {32}, 4)));
  auto down = b.add(b.matmul(up, c("w2", {32, 16}, 5)), c("b2", {16}, 6));
  b.output(b.rename(b.softmax(b.reshape(b.add(x, down), {2, 32}), -1), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

struct Outcome {
  std::vector<uint8_t> y;  // output bytes
  int64_t compiled = 0, from_memory = 0, from_disk = 0, kernels = 0;
  jit::JitStats stats;
  std::vector<std::string> log;
};

// A new Session (as a new process would make) on the cache folder: compile and run once.
Outcome compile_and_run(const std::string& cache_dir, const runtime::CompileOptions& compile = {}) {
  Outcome o;
  runtime::SessionOptions options;
  options.jit.cache_dir = cache_dir;
  options.jit.log = [&o](const std::string& line) { o.log.push_back(line); };
  auto session = runtime::Session::create(options);
  REQUIRE_MESSAGE(session.ok(), session.status().to_string());
  auto program = (*session)->compile(mlp_block(), compile);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const runtime::Program& p = (*program)->program();
  o.compiled = p.kernels_compiled;
  o.from_memory = p.kernels_from_memory;
  o.from_disk = p.kernels_from_disk;
  o.kernels = static_cast<int64_t>(p.kernels.size());
  std::vector<uint8_t> x = random_f32_bytes(64, 42);
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(x.data()), x.size());
  std::vector<runtime::Buffer> inputs{*runtime::Buffer::borrow(bytes, DType::kF32, {4, 16})};
  auto out = (*program)->run(inputs);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  auto y = *out->at(0).bytes();
  o.y.assign(reinterpret_cast<const uint8_t*>(y.data()), reinterpret_cast<const uint8_t*>(y.data()) + y.size());
  o.stats = (*session)->jit_stats();
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool logged(const std::vector<std::string>& log, const std::string& text) {
  return std::any_of(log.begin(), log.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("runtime/session/kernels come from the disk cache in a second session") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  TempDir dir;
  Outcome cold = compile_and_run(dir.path);
  CHECK(cold.kernels >= 4);
  CHECK(cold.compiled + cold.from_memory == cold.kernels);
  CHECK(cold.from_disk == 0);
  CHECK(static_cast<int64_t>(dir.paths().size()) == cold.compiled);
  Outcome warm = compile_and_run(dir.path);
  CHECK(warm.compiled == 0);
  CHECK(warm.from_disk == cold.compiled);
  CHECK(warm.from_memory == cold.from_memory);
  CHECK(warm.y == cold.y);
  CHECK(warm.log.empty());
  CHECK(warm.stats.object_bytes > 0);
}

TEST_CASE("runtime/session/bad cache entries are logged and recompiled and the outputs do not change") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  TempDir dir;
  Outcome cold = compile_and_run(dir.path);
  const std::vector<std::string> entries = dir.paths();
  REQUIRE(entries.size() >= 4);
  // A different fault in each entry: truncated, byte flipped, garbage, zero length.
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string bytes = read_file(entries[i]);
    switch (i % 4) {
      case 0: bytes.resize(bytes.size() / 3); break;
      case 1: bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01); break;
      case 2: bytes.assign(bytes.size(), '\x7f'); break;
      case 3: bytes.clear(); break;
    }
    std::ofstream(entries[i], std::ios::binary | std::ios::trunc) << bytes;
  }
  Outcome healed = compile_and_run(dir.path);
  CHECK(healed.y == cold.y);
  CHECK(healed.compiled == cold.compiled);
  CHECK(healed.from_disk == 0);
  CHECK(healed.stats.disk_bad_entries == static_cast<int64_t>(entries.size()));
  for (const std::string& path : entries) CHECK_MESSAGE(logged(healed.log, path), path);
  // The entries are whole again: a third session loads every kernel from disk.
  for (const std::string& path : dir.paths()) {
    const std::string name = fs::path(path).filename().string();
    const std::string file = read_file(path);
    CHECK(jit::decode_cache_entry(name.substr(4, name.size() - 8), file).ok());
  }
  Outcome warm = compile_and_run(dir.path);
  CHECK(warm.from_disk == cold.compiled);
  CHECK(warm.y == cold.y);
  CHECK(warm.log.empty());
}

TEST_CASE("runtime/session/CompileOptions kernel_disk_cache false neither reads nor writes the cache") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  TempDir dir;
  runtime::CompileOptions off;
  off.kernel_disk_cache = false;
  Outcome first = compile_and_run(dir.path, off);
  CHECK(first.compiled > 0);
  CHECK(dir.paths().empty());
  Outcome filled = compile_and_run(dir.path);
  const std::vector<std::string> entries = dir.paths();
  CHECK(static_cast<int64_t>(entries.size()) == filled.compiled);
  for (const std::string& path : entries) std::ofstream(path, std::ios::binary | std::ios::trunc) << "garbage";
  Outcome again = compile_and_run(dir.path, off);
  CHECK(again.from_disk == 0);
  CHECK(again.log.empty());  // the bad entries were not read
  for (const std::string& path : entries) CHECK(read_file(path) == "garbage");  // nor replaced
  CHECK(again.y == first.y);
  CHECK(filled.y == first.y);
}
