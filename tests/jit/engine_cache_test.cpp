// The JIT with its disk cache: on by default, bad entries (corrupt, or objects the JIT
// cannot load) recompiled and logged, a full disk, two processes at once, the size bound.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "carve/jit/kernel_cache.h"
#include "engine_test_util.h"
#include "test_support.h"

namespace carve::jit::jittest {
namespace {

namespace fs = std::filesystem;

using carve::test::TempDir;

struct Logged {
  std::vector<std::string> lines;
  bool mentions(const std::string& text) const {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }
  std::string all() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

std::unique_ptr<JitCompiler> make_jit(const std::string& dir, Logged* log = nullptr, int64_t max_bytes = kDefaultCacheMaxBytes) {
  JitOptions o;
  o.cache_dir = dir;
  o.cache_max_bytes = max_bytes;
  if (log) o.log = [log](const std::string& line) { log->lines.push_back(line); };
  auto jit = JitCompiler::create(o);
  REQUIRE_MESSAGE(jit.ok(), jit.status().to_string());
  return std::move(jit).value();
}

// x -> relu(x * w + x), one kernel; n picks the kernel.
ir::Graph small_graph(int64_t n) {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {n});
  auto w = b.input("w", DType::kF32, {n});
  b.output(b.relu(b.add(b.mul(x, w), x)));
  auto g = b.build();
  REQUIRE(g.ok());
  return std::move(g).value();
}

// exp(tanh(erf(x))): one kernel whose object calls libm (undefined symbols erf, tanh, exp).
// Calls libm (tanh, erf): f64, since f32 computes them inline (jit/llvm/emit_vmath.cpp).
ir::Graph libm_graph() {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF64, {64});
  b.output(b.exp(b.tanh(b.erf(x))));
  auto g = b.build();
  REQUIRE(g.ok());
  return std::move(g).value();
}

// Runs the graph with the JIT and compares with the reference; "" when they agree.
std::string check_against_reference(JitCompiler& jit, const ir::Graph& g, std::vector<CompiledKernel>* kernels = nullptr) {
  std::mt19937_64 rng(3);
  std::vector<HostTensor> in;
  for (const ir::Value& v : g.values)
    if (v.kind == ir::ValueKind::kInput) in.push_back(random_tensor(rng, v.type.dtype, v.type.shape, -2, 2));
  auto out = run_jit(jit, g, in, nullptr, {}, kernels);
  if (!out.ok()) return out.status().to_string();
  auto ref = run_reference(g, in);
  if (!ref.ok()) return ref.status().to_string();
  return compare((*out)[0], (*ref)[0], 1e-5, 1e-6);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string entry_path(const std::string& dir, const std::string& key) { return dir + "/cpu-" + key + ".obj"; }

// Fills `dir` with the graph's one kernel; its key.
std::string fill(const std::string& dir, const ir::Graph& g) {
  auto jit = make_jit(dir);
  std::vector<CompiledKernel> kernels;
  REQUIRE(check_against_reference(*jit, g, &kernels) == "");
  REQUIRE(kernels.size() == 1);
  REQUIRE(fs::exists(entry_path(dir, kernels[0].key)));
  return kernels[0].key;
}

// A fresh JIT on `dir` with a bad entry for the graph's kernel: the compile succeeds,
// recompiles, logs the file and leaves a valid entry; a third JIT loads it from disk.
void expect_healed(const std::string& dir, const ir::Graph& g, const std::string& key, const std::string& why) {
  Logged log;
  auto jit = make_jit(dir, &log);
  std::vector<CompiledKernel> kernels;
  CHECK(check_against_reference(*jit, g, &kernels) == "");
  REQUIRE(kernels.size() == 1);
  CHECK_FALSE(kernels[0].from_disk_cache);
  JitStats s = jit->stats();
  CHECK(s.codegen_count == 1);
  CHECK(s.disk_hits == 0);
  CHECK(s.disk_bad_entries == 1);
  CHECK_MESSAGE(log.mentions(entry_path(dir, key)), log.all());
  CHECK_MESSAGE(log.mentions(why), log.all());
  CHECK(decode_cache_entry(key, read_file(entry_path(dir, key))).ok());
  // The live JIT serves it from memory now, and a new one from disk.
  auto again = jit->compile_group(g, kernels[0].group);
  REQUIRE(again.ok());
  CHECK(again->from_memory_cache);
  Logged quiet;
  auto third = make_jit(dir, &quiet);
  CHECK(check_against_reference(*third, g) == "");
  CHECK(third->stats().disk_hits == 1);
  CHECK(third->stats().codegen_count == 0);
  CHECK(quiet.lines.empty());
}

std::string replace_once(std::string bytes, const std::string& from, const std::string& to) {
  auto pos = bytes.find(from);
  REQUIRE_MESSAGE(pos != std::string::npos, "no '", from, "' in the object");
  REQUIRE(bytes.find(from, pos + 1) == std::string::npos);
  bytes.replace(pos, from.size(), to);
  return bytes;
}

std::atomic<int> g_hook_calls{0};
ssize_t partial_then_enospc(int fd, const void* data, size_t size) {
  if (g_hook_calls.fetch_add(1) == 0) return ::write(fd, data, std::min<size_t>(size, 16));
  errno = ENOSPC;
  return -1;
}

}  // namespace

TEST_CASE("jit/engine/cache/on by default in CARVE_CACHE_DIR, else under XDG_CACHE_HOME, off on request") {
  if (skip_without_jit()) return;
  // The test main points CARVE_CACHE_DIR at a folder of this process (not the user's home).
  const char* env = std::getenv("CARVE_CACHE_DIR");
  REQUIRE(env != nullptr);
  auto jit = JitCompiler::create({});
  REQUIRE(jit.ok());
  CHECK((*jit)->cache_dir() == env);
  JitOptions off;
  off.disk_cache = false;
  auto no_cache = JitCompiler::create(off);
  REQUIRE(no_cache.ok());
  CHECK((*no_cache)->cache_dir().empty());
  JitOptions bad;
  bad.cache_max_bytes = 0;
  CHECK(JitCompiler::create(bad).status().code() == ErrorCode::kInvalidArgument);

  TempDir xdg;
  const std::string saved = env;
  ::unsetenv("CARVE_CACHE_DIR");
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  ::setenv("XDG_CACHE_HOME", xdg.path.c_str(), 1);
  auto xdg_jit = JitCompiler::create({});
  ::setenv("CARVE_CACHE_DIR", saved.c_str(), 1);
  if (old_xdg) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  else ::unsetenv("XDG_CACHE_HOME");
  REQUIRE(xdg_jit.ok());
  CHECK((*xdg_jit)->cache_dir() == xdg.path + "/carve");
  ir::Graph g = small_graph(321);
  CHECK(check_against_reference(**xdg_jit, g) == "");
  CHECK((*xdg_jit)->stats().disk_writes == 1);
  CHECK(fs::is_directory(xdg.path + "/carve"));
}

TEST_CASE("jit/engine/cache/a folder that cannot be made is logged and the JIT runs without it") {
  if (skip_without_jit()) return;
  TempDir dir;
  write_file(dir.path + "/file", "x");
  Logged log;
  auto jit = make_jit(dir.path + "/file/sub", &log);
  CHECK(jit->cache_dir().empty());
  CHECK(log.mentions(dir.path + "/file/sub"));
  CHECK(check_against_reference(*jit, small_graph(99)) == "");
}

TEST_CASE("jit/engine/cache/a truncated flipped garbage or empty entry is logged and compiled again") {
  if (skip_without_jit()) return;
  TempDir dir;
  ir::Graph g = small_graph(1234);
  const std::string key = fill(dir.path, g);
  const std::string good = read_file(entry_path(dir.path, key));
  std::string flipped = good;
  flipped[good.size() - 40] ^= 0x10;  // inside the object's code or tables
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"truncated", good.substr(0, good.size() / 2), "the header says"},
      {"flipped", flipped, "checksum mismatch"},
      {"garbage", std::string(4096, '\x5a'), "magic"},
      {"zero-length", "", "empty file"},
  };
  for (const auto& [what, bytes, why] : cases) {
    CAPTURE(what);
    write_file(entry_path(dir.path, key), bytes);
    expect_healed(dir.path, g, key, why);
  }
}

TEST_CASE("jit/engine/cache/an entry the JIT cannot load is logged and compiled again") {
  if (skip_without_jit()) return;
  TempDir dir;
  ir::Graph g = libm_graph();
  const std::string key = fill(dir.path, g);
  const std::string file = read_file(entry_path(dir.path, key));
  const std::string object(*decode_cache_entry(key, file));
  SUBCASE("a checksummed payload that is no object") {
    write_file(entry_path(dir.path, key), encode_cache_entry(key, "not an object at all"));
    expect_healed(dir.path, g, key, "not an object file");
  }
  SUBCASE("another kernel's object under this key") {
    TempDir other;
    ir::Graph g2 = small_graph(77);
    const std::string key2 = fill(other.path, g2);
    const std::string file2 = read_file(entry_path(other.path, key2));
    const std::string object2(*decode_cache_entry(key2, file2));
    write_file(entry_path(dir.path, key), encode_cache_entry(key, object2));
    expect_healed(dir.path, g, key, "carve_k_" + key2);
  }
  SUBCASE("an object that passes every check but does not link") {
    // Its call to tanh now names a function no library has: only linking finds out.
    std::string broken = replace_once(object, std::string("tanh\0", 5), std::string("tanq\0", 5));
    write_file(entry_path(dir.path, key), encode_cache_entry(key, broken));
    expect_healed(dir.path, g, key, "the JIT could not load it");
  }
}

TEST_CASE("jit/engine/cache/a full disk: compiles succeed with one warning and no partial entry") {
  if (skip_without_jit()) return;
  TempDir dir;
  Logged log;
  auto jit = make_jit(dir.path, &log);
  g_hook_calls = 0;
  testing::set_cache_write_hook(partial_then_enospc);
  std::string a = check_against_reference(*jit, small_graph(501));
  std::string b = check_against_reference(*jit, small_graph(502));
  testing::set_cache_write_hook(nullptr);
  CHECK(a == "");
  CHECK(b == "");
  CHECK(dir.names().empty());  // no entry, no temp file
  JitStats s = jit->stats();
  CHECK(s.codegen_count == 2);
  CHECK(s.disk_writes == 0);
  CHECK(s.disk_write_failures == 2);
  REQUIRE_MESSAGE(log.lines.size() == 1, log.all());
  CHECK(log.mentions("No space left on device"));
  CHECK(log.mentions(dir.path + "/cpu-"));
}

// Helper for the next test, run only as a child process (skipped in the suite; the parent
// passes --no-skip): compiles and checks a set of kernels with the cache in CARVE_CACHE_DIR.
TEST_CASE("jit/engine/cache/helper child fills the cache" * doctest::skip()) {
  if (skip_without_jit()) return;
  auto jit = JitCompiler::create({});
  REQUIRE(jit.ok());
  std::string errors;
  for (int64_t n = 2000; n < 2012; ++n) errors += check_against_reference(**jit, small_graph(n));
  errors += check_against_reference(**jit, libm_graph());
  JitStats s = (*jit)->stats();
  std::printf("CARVE_CHILD %s codegen=%lld disk_hits=%lld bad=%lld\n", errors.empty() ? "ok" : errors.c_str(),
              static_cast<long long>(s.codegen_count), static_cast<long long>(s.disk_hits),
              static_cast<long long>(s.disk_bad_entries));
  std::fflush(stdout);
}

TEST_CASE("jit/engine/cache/two processes filling one empty cache at once both succeed") {
  if (skip_without_jit()) return;
  TempDir dir;
  const std::string cmd = "CARVE_CACHE_DIR=" + dir.path + " /proc/" + std::to_string(::getpid()) + "/exe" +
                          " '--test-case=jit/engine/cache/helper child fills the cache' --no-skip --no-version 2>&1";
  FILE* a = ::popen(cmd.c_str(), "r");
  FILE* b = ::popen(cmd.c_str(), "r");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  auto drain = [](FILE* p) {
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    int rc = ::pclose(p);
    return std::pair{out, rc};
  };
  auto [out_a, rc_a] = drain(a);
  auto [out_b, rc_b] = drain(b);
  INFO(out_a, out_b);
  CHECK(rc_a == 0);
  CHECK(rc_b == 0);
  CHECK(out_a.find("CARVE_CHILD ok") != std::string::npos);
  CHECK(out_b.find("CARVE_CHILD ok") != std::string::npos);
  CHECK(out_a.find("bad=0") != std::string::npos);
  CHECK(out_b.find("bad=0") != std::string::npos);
  // 13 kernels, each a whole valid entry; no temp file left.
  auto names = dir.names();
  CHECK(names.size() == 13);
  for (const std::string& name : names) {
    REQUIRE(name.starts_with("cpu-"));
    REQUIRE(name.ends_with(".obj"));
    const std::string key = name.substr(4, name.size() - 8);
    auto payload = decode_cache_entry(key, read_file(dir.path + "/" + name));
    CHECK_MESSAGE(payload.ok(), name, ": ", payload.status().to_string());
  }
  // and a third process finds every kernel there
  Logged log;
  auto jit = make_jit(dir.path, &log);
  for (int64_t n = 2000; n < 2012; ++n) CHECK(check_against_reference(*jit, small_graph(n)) == "");
  CHECK(check_against_reference(*jit, libm_graph()) == "");
  CHECK(jit->stats().codegen_count == 0);
  CHECK(jit->stats().disk_hits == 13);
  CHECK(log.lines.empty());
}

TEST_CASE("jit/engine/cache/the folder stays within cache_max_bytes") {
  if (skip_without_jit()) return;
  TempDir dir;
  const std::string key = fill(dir.path, small_graph(3000));
  const int64_t entry = static_cast<int64_t>(fs::file_size(entry_path(dir.path, key)));
  const int64_t bound = 3 * entry + entry / 2;
  auto jit = make_jit(dir.path, nullptr, bound);
  for (int64_t n = 3001; n < 3011; ++n) {
    CHECK(check_against_reference(*jit, small_graph(n)) == "");
    int64_t total = 0;
    for (const auto& e : fs::directory_iterator(dir.path)) total += static_cast<int64_t>(e.file_size());
    CHECK_MESSAGE(total <= bound, "after kernel ", n, ": ", total, " > ", bound);
  }
  CHECK(jit->stats().disk_evictions >= 7);
  CHECK(jit->stats().disk_writes == 10);
  // the most recent kernel is still there
  auto fresh = make_jit(dir.path);
  CHECK(check_against_reference(*fresh, small_graph(3010)) == "");
  CHECK(fresh->stats().disk_hits == 1);
}

}  // namespace carve::jit::jittest

namespace carve::jit::jittest {

TEST_CASE("jit/engine/cache/a batch compiled on 1 or 4 threads gives byte-identical kernels") {
  if (skip_without_jit()) return;
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {16, 32});
  auto w = b.input("w", DType::kF32, {32, 24});
  auto s = b.input("s", DType::kF32, {24});
  auto m = b.matmul(x, w);
  auto n = b.layer_norm(m, s, std::nullopt);
  auto p = b.softmax(b.tanh(n), -1);
  b.output(b.reduce_sum(b.sigmoid(p), {1}, false));
  b.output(b.transpose(b.exp(x), {1, 0}));
  auto g = b.build();
  REQUIRE(g.ok());
  std::mt19937_64 rng(8);
  std::vector<HostTensor> in = {random_tensor(rng, DType::kF32, {16, 32}, -1, 1),
                                random_tensor(rng, DType::kF32, {32, 24}, -1, 1), random_tensor(rng, DType::kF32, {24})};
  JitRunOptions unfused;
  unfused.fusion.fuse = false;  // one kernel per node: a batch of 9
  std::vector<std::vector<HostTensor>> outputs;
  std::vector<std::vector<std::string>> keys;
  std::vector<TempDir> dirs(2);
  for (int threads : {1, 4}) {
    JitOptions o;
    o.compile_threads = threads;
    o.cache_dir = dirs[threads == 1 ? 0 : 1].path;
    auto jit = JitCompiler::create(o);
    REQUIRE(jit.ok());
    CHECK((*jit)->compile_threads() == threads);
    std::vector<CompiledKernel> kernels;
    auto out = run_jit(**jit, *g, in, nullptr, unfused, &kernels);
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK(kernels.size() >= 8);
    outputs.push_back(std::move(*out));
    keys.emplace_back();
    for (const CompiledKernel& k : kernels) keys.back().push_back(k.key);
  }
  CHECK(keys[0] == keys[1]);
  REQUIRE(outputs[0].size() == outputs[1].size());
  for (size_t i = 0; i < outputs[0].size(); ++i) CHECK(outputs[0][i].bytes == outputs[1][i].bytes);
  REQUIRE(dirs[0].names() == dirs[1].names());
  for (const std::string& name : dirs[0].names())
    CHECK_MESSAGE(read_file(dirs[0].path + "/" + name) == read_file(dirs[1].path + "/" + name), name);
  JitOptions bad;
  bad.compile_threads = -1;
  CHECK(JitCompiler::create(bad).status().code() == ErrorCode::kInvalidArgument);
}

}  // namespace carve::jit::jittest
