// `carve run` with the kernel disk cache: --explain's start-up and memory report, a second
// process served from disk, bad entries named on the error stream, --no-cache.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "carve/jit/host_target.h"
#include "cli_test_util.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace carve;
using cli_test::carve_cli;

namespace {

// A cache folder of this test, made the default (CARVE_CACHE_DIR) while it lives.
struct CacheDir {
  fs::path path;
  std::optional<std::string> saved;
  CacheDir() {
    char tmpl[] = "/tmp/carve_cli_cache_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
    if (const char* v = std::getenv("CARVE_CACHE_DIR")) saved = v;
    ::setenv("CARVE_CACHE_DIR", (path / "kernels").c_str(), 1);
  }
  ~CacheDir() {
    if (saved) ::setenv("CARVE_CACHE_DIR", saved->c_str(), 1);
    else ::unsetenv("CARVE_CACHE_DIR");
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(path / "kernels", ec)) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
};

struct KernelCounts {
  int total = -1, compiled = -1, memory = -1, disk = -1;
};

// From --explain's "jit: N kernels in T ms: a compiled, b from the memory cache, c from the disk cache".
KernelCounts kernel_counts(const std::string& out) {
  KernelCounts k;
  auto pos = out.find("\njit: ");
  if (pos == std::string::npos) return k;
  double ms = 0;
  std::sscanf(out.c_str() + pos + 1, "jit: %d kernels in %lf ms: %d compiled, %d from the memory cache, %d from the disk cache",
              &k.total, &ms, &k.compiled, &k.memory, &k.disk);
  return k;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool skip_without_jit() {
  if (jit::cpu_jit_available()) return false;
  test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
  return true;
}

}  // namespace

TEST_CASE("tools/run/explain shows the time to first result and the peak RSS split") {
  if (skip_without_jit()) return;
  CacheDir cache;
  std::ofstream(cache.path / "g.carve") << R"(graph three {
  input x: f32[8,16]
  input y: f32[16]
  input w: f32[16,8]
  a = add(x, y) -> s: f32[8,16]
  t = tanh(s) -> t: f32[8,16]
  r = reduce_sum(t) {axes=[1], keepdims=0} -> r: f32[8]
  m = matmul(t, w) -> m: f32[8,8]
  output r, m
}
)";
  const std::string graph = (cache.path / "g.carve").string();
  std::string out, err;
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "1", "--explain"}, &out, &err) == 0);
  INFO(out, err);
  for (const char* part : {"time to first result:", "  import ", "  session ", "  compile ", "    prepare ", "    plan ",
                           "    materialise ", "    kernels ", "    schedule ", "  first run ", "memory: peak RSS ",
                           "  arena ", "    scratch ", "  constants ", "  handles ", "  JIT objects ", "  other ",
                           "RSS after import"})
    CHECK_MESSAGE(out.find(part) != std::string::npos, part);
  KernelCounts cold = kernel_counts(out);
  CHECK(cold.total >= 2);
  CHECK(cold.compiled >= 1);
  CHECK(cold.disk == 0);
  CHECK(cold.compiled + cold.memory + cold.disk == cold.total);
  CHECK(static_cast<int>(cache.entries().size()) == cold.compiled);
  // A second process finds every compiled kernel on disk.
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "1", "--explain"}, &out, &err) == 0);
  KernelCounts warm = kernel_counts(out);
  CHECK(warm.compiled == 0);
  CHECK(warm.disk == cold.compiled);
  CHECK(warm.total == cold.total);
  CHECK(err.empty());
}

TEST_CASE("tools/run/bad kernel cache entries: the run succeeds and the error stream names each file") {
  if (skip_without_jit()) return;
  CacheDir cache;
  std::ofstream(cache.path / "g.carve") << R"(graph g {
  input x: f32[8,16]
  a = exp(x) -> a: f32[8,16]
  r = reduce_max(a) {axes=[1], keepdims=0} -> r: f32[8]
  output r
}
)";
  const std::string graph = (cache.path / "g.carve").string();
  std::string out, err;
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "5", "--output-dir", (cache.path / "first").string()}, &out, &err) == 0);
  const auto entries = cache.entries();
  REQUIRE(!entries.empty());
  for (size_t i = 0; i < entries.size(); ++i) {  // truncate one, empty the next, ...
    std::string bytes = read_file(entries[i]);
    bytes.resize(i % 2 == 0 ? bytes.size() - 1 : 0);
    std::ofstream(entries[i], std::ios::binary | std::ios::trunc) << bytes;
  }
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "5", "--output-dir", (cache.path / "second").string()}, &out, &err) == 0);
  INFO(out, err);
  for (const fs::path& e : entries) CHECK_MESSAGE(err.find(e.string()) != std::string::npos, e);
  CHECK(err.find("carve: kernel cache: removed bad entry") != std::string::npos);
  CHECK(read_file(cache.path / "first" / "r.npy") == read_file(cache.path / "second" / "r.npy"));
}

TEST_CASE("tools/run/no-cache neither reads nor writes the kernel cache") {
  if (skip_without_jit()) return;
  CacheDir cache;
  std::ofstream(cache.path / "g.carve") << R"(graph g {
  input x: f32[32]
  a = sigmoid(x) -> a: f32[32]
  output a
}
)";
  const std::string graph = (cache.path / "g.carve").string();
  std::string out, err;
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "1", "--no-cache"}, &out, &err) == 0);
  CHECK(cache.entries().empty());
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "1"}, &out, &err) == 0);
  const auto entries = cache.entries();
  REQUIRE(entries.size() == 1);
  std::ofstream(entries[0], std::ios::binary | std::ios::trunc) << "garbage";
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "1", "--no-cache", "--explain"}, &out, &err) == 0);
  CHECK(err.empty());                                 // the bad entry was never read
  CHECK(read_file(entries[0]) == "garbage");          // nor replaced
  CHECK(kernel_counts(out).compiled == 1);
}
