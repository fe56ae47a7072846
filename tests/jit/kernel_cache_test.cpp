// The on-disk kernel cache on its own (no LLVM): entry format, bad entries, atomic writes
// under injected failures, LRU eviction, the default folder.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "carve/jit/kernel_cache.h"
#include "test_support.h"

namespace carve::jit {
namespace {

namespace fs = std::filesystem;

using carve::test::TempDir;

struct Logged {
  std::vector<std::string> lines;
  CacheLog sink() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
  bool mentions(const std::string& text) const {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }
};

std::string key_of(int i) { return fmt::format("{:064x}", 0xabc000 + i); }

std::string payload_of(int i, size_t size = 1000) {
  std::string p(size, '\0');
  std::mt19937 rng(static_cast<unsigned>(i));
  for (char& c : p) c = static_cast<char>(rng());
  return p;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void set_mtime(const std::string& path, time_t seconds) {
  timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

std::unique_ptr<KernelDiskCache> open_cache(const std::string& dir, Logged& log, int64_t max = kDefaultCacheMaxBytes) {
  auto cache = KernelDiskCache::open(dir, max, log.sink());
  REQUIRE_MESSAGE(cache.ok(), cache.status().to_string());
  return std::move(cache).value();
}

// Restores one environment variable when it goes out of scope.
struct EnvGuard {
  std::string name;
  std::optional<std::string> saved;
  explicit EnvGuard(std::string n) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) saved = v;
  }
  ~EnvGuard() {
    if (saved) ::setenv(name.c_str(), saved->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

struct WriteHookGuard {
  explicit WriteHookGuard(testing::CacheWriteFn fn) { testing::set_cache_write_hook(fn); }
  ~WriteHookGuard() { testing::set_cache_write_hook(nullptr); }
};

std::atomic<int> g_hook_calls{0};
// Writes a few bytes, then the disk is full.
ssize_t partial_then_enospc(int fd, const void* data, size_t size) {
  if (g_hook_calls.fetch_add(1) == 0) return ::write(fd, data, std::min<size_t>(size, 16));
  errno = ENOSPC;
  return -1;
}

}  // namespace

TEST_CASE("jit/kernel_cache/an entry round-trips and a second store replaces it") {
  TempDir dir;
  Logged log;
  auto cache = open_cache(dir.path, log);
  CHECK_FALSE(cache->load(key_of(1)).has_value());
  REQUIRE(cache->store(key_of(1), payload_of(1)));
  auto back = cache->load(key_of(1));
  REQUIRE(back.has_value());
  CHECK(*back == payload_of(1));
  REQUIRE(cache->store(key_of(1), payload_of(2)));
  CHECK(cache->load(key_of(1)) == payload_of(2));
  CHECK(dir.names() == std::vector<std::string>{"cpu-" + key_of(1) + ".obj"});
  CHECK(cache->stats().hits == 2);
  CHECK(cache->stats().writes == 2);
  CHECK(log.lines.empty());
  // Keys become file names: anything but lower-case hex is refused.
  CHECK_FALSE(cache->store("../evil", "x"));
  CHECK_FALSE(cache->store("ABC", "x"));
  CHECK_FALSE(cache->load("../evil").has_value());
}

TEST_CASE("jit/kernel_cache/decode names what is wrong with an entry") {
  const std::string key = key_of(7);
  const std::string good = encode_cache_entry(key, payload_of(7, 100));
  REQUIRE(decode_cache_entry(key, good).ok());
  CHECK(*decode_cache_entry(key, good) == payload_of(7, 100));
  auto why = [&](std::string file) { return decode_cache_entry(key, file).status().message(); };
  CHECK(why("") == "empty file");
  CHECK(why(good.substr(0, 20)).find("shorter than the 32-byte header") != std::string::npos);
  CHECK(why(good.substr(0, good.size() - 1)).find("the header says") != std::string::npos);
  CHECK(why(good + "x").find("the header says") != std::string::npos);
  CHECK(decode_cache_entry(key_of(8), good).status().message() == "stored under another key");
  CHECK(why(encode_cache_entry(key, "")) == "empty object");
  // Every single flipped byte, anywhere in the file, is caught.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x20);
    auto r = decode_cache_entry(key, flipped);
    CHECK_MESSAGE(!r.ok(), "flip at byte ", i);
    if (!r.ok()) CHECK(r.status().code() == ErrorCode::kParseError);
  }
}

TEST_CASE("jit/kernel_cache/bad entries are logged naming the file and removed") {
  TempDir dir;
  const std::string key = key_of(3);
  const std::string good = encode_cache_entry(key, payload_of(3));
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"truncated", good.substr(0, good.size() - 100)},
      {"flipped", flipped},
      {"garbage", payload_of(99, 5000)},
      {"zero-length", ""},
  };
  for (const auto& [what, bytes] : bad) {
    CAPTURE(what);
    Logged log;
    auto cache = open_cache(dir.path, log);
    const std::string path = cache->entry_path(key);
    write_file(path, bytes);
    CHECK_FALSE(cache->load(key).has_value());
    CHECK_FALSE(fs::exists(path));
    REQUIRE(log.lines.size() == 1);
    CHECK(log.mentions(path));
    CHECK(cache->stats().bad_entries == 1);
    // and it heals: the next store and load work
    REQUIRE(cache->store(key, payload_of(3)));
    CHECK(cache->load(key) == payload_of(3));
    fs::remove(path);
  }
}

TEST_CASE("jit/kernel_cache/discard removes an entry the caller could not use") {
  TempDir dir;
  Logged log;
  auto cache = open_cache(dir.path, log);
  REQUIRE(cache->store(key_of(4), payload_of(4)));
  cache->discard(key_of(4), "not an object file");
  CHECK_FALSE(fs::exists(cache->entry_path(key_of(4))));
  REQUIRE(log.lines.size() == 1);
  CHECK(log.mentions(cache->entry_path(key_of(4))));
  CHECK(log.mentions("not an object file"));
}

TEST_CASE("jit/kernel_cache/a full disk leaves no partial entry and warns once") {
  TempDir dir;
  Logged log;
  auto cache = open_cache(dir.path, log);
  g_hook_calls = 0;
  {
    WriteHookGuard hook(partial_then_enospc);
    CHECK_FALSE(cache->store(key_of(5), payload_of(5)));
    CHECK(g_hook_calls.load() == 2);  // the partial write happened before the failure
    CHECK(dir.names().empty());       // neither the entry nor the temp file
    CHECK_FALSE(cache->store(key_of(6), payload_of(6)));
    CHECK(dir.names().empty());
  }
  REQUIRE(log.lines.size() == 1);
  CHECK(log.mentions("No space left on device"));
  CHECK(log.mentions(cache->entry_path(key_of(5))));
  CHECK(cache->stats().write_failures == 2);
  CHECK(cache->stats().writes == 0);
  // Space again: writes work.
  CHECK(cache->store(key_of(5), payload_of(5)));
  CHECK(cache->load(key_of(5)) == payload_of(5));
}

TEST_CASE("jit/kernel_cache/eviction removes the least recently used entries") {
  TempDir dir;
  Logged log;
  const int64_t entry_bytes = static_cast<int64_t>(encode_cache_entry(key_of(0), payload_of(0)).size());
  auto cache = open_cache(dir.path, log, 4 * entry_bytes + 100);  // room for 4
  for (int i = 1; i <= 4; ++i) REQUIRE(cache->store(key_of(i), payload_of(i)));
  const time_t old = std::time(nullptr) - 1000;
  for (int i = 1; i <= 4; ++i) set_mtime(cache->entry_path(key_of(i)), old + i);  // 1 oldest
  REQUIRE(cache->load(key_of(1)).has_value());  // 1 is now the most recently used
  REQUIRE(cache->store(key_of(5), payload_of(5)));  // over the bound: down to 3/4 of it
  CHECK(fs::exists(cache->entry_path(key_of(1))));
  CHECK_FALSE(fs::exists(cache->entry_path(key_of(2))));
  CHECK_FALSE(fs::exists(cache->entry_path(key_of(3))));
  CHECK(fs::exists(cache->entry_path(key_of(4))));
  CHECK(fs::exists(cache->entry_path(key_of(5))));
  CHECK(cache->stats().evictions == 2);
  CHECK(cache->total_bytes() <= cache->max_bytes());
}

TEST_CASE("jit/kernel_cache/the folder stays within its bound over many writes") {
  TempDir dir;
  Logged log;
  auto cache = open_cache(dir.path, log, 20000);
  std::mt19937 rng(1);
  for (int i = 0; i < 200; ++i) {
    REQUIRE(cache->store(key_of(i), payload_of(i, 100 + rng() % 3000)));
    const int64_t total = cache->total_bytes();
    REQUIRE_MESSAGE(total <= 20000, "after write ", i, ": ", total, " bytes");
  }
  CHECK(cache->stats().evictions > 100);
  CHECK(cache->load(key_of(199)).has_value());  // the newest survives
  // An entry that could never fit is not written.
  CHECK_FALSE(cache->store(key_of(500), payload_of(500, 30000)));
  // A second process starting on the full folder scans it before adding.
  auto other = open_cache(dir.path, log, 5000);
  REQUIRE(other->store(key_of(600), payload_of(600)));
  CHECK(other->total_bytes() <= 5000);
}

TEST_CASE("jit/kernel_cache/stale temp files of dead writers are removed by a scan") {
  TempDir dir;
  Logged log;
  auto cache = open_cache(dir.path, log);
  const std::string stale = dir.path + "/.tmp-cpu-" + key_of(1) + ".99999.0";
  const std::string fresh = dir.path + "/.tmp-cpu-" + key_of(2) + ".99999.1";
  const std::string other = dir.path + "/cuda-something.bin";  // not ours: never touched
  write_file(stale, "partial");
  write_file(fresh, "partial");
  write_file(other, "x");
  set_mtime(stale, std::time(nullptr) - 7200);
  set_mtime(other, std::time(nullptr) - 7200);
  cache->evict_to(0);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(fresh));  // may belong to a live writer
  CHECK(fs::exists(other));
}

TEST_CASE("jit/kernel_cache/threads storing and loading one key see whole entries") {
  TempDir dir;
  Logged log;
  auto cache = open_cache(dir.path, log);
  std::atomic<int> torn{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if ((i + t) % 2 == 0) {
          cache->store(key_of(1), payload_of(1 + i % 3));
        } else if (auto p = cache->load(key_of(1)); p && *p != payload_of(1) && *p != payload_of(2) && *p != payload_of(3)) {
          torn.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(torn.load() == 0);
  CHECK(log.lines.empty());  // no entry was ever seen half-written
  CHECK(dir.names() == std::vector<std::string>{"cpu-" + key_of(1) + ".obj"});
}

TEST_CASE("jit/kernel_cache/default folder follows CARVE_CACHE_DIR then XDG_CACHE_HOME then HOME") {
  EnvGuard a("CARVE_CACHE_DIR"), b("XDG_CACHE_HOME"), c("HOME");
  ::setenv("CARVE_CACHE_DIR", "/somewhere/kc", 1);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/u", 1);
  CHECK(default_cache_dir() == "/somewhere/kc");
  ::unsetenv("CARVE_CACHE_DIR");
  CHECK(default_cache_dir() == "/xdg/carve");
  ::setenv("XDG_CACHE_HOME", "relative/path", 1);  // ignored, as the XDG spec says
  CHECK(default_cache_dir() == "/home/u/.cache/carve");
  ::unsetenv("XDG_CACHE_HOME");
  CHECK(default_cache_dir() == "/home/u/.cache/carve");
  ::unsetenv("HOME");
  CHECK(default_cache_dir().empty());
}

TEST_CASE("jit/kernel_cache/open refuses a bad bound and a path that is not a folder") {
  TempDir dir;
  Logged log;
  CHECK(KernelDiskCache::open(dir.path, 0, log.sink()).status().code() == ErrorCode::kInvalidArgument);
  write_file(dir.path + "/file", "x");
  CHECK(KernelDiskCache::open(dir.path + "/file", 100, log.sink()).status().code() == ErrorCode::kIoError);
  CHECK(KernelDiskCache::open(dir.path + "/file/sub", 100, log.sink()).status().code() == ErrorCode::kIoError);
}

}  // namespace carve::jit

namespace carve::jit {

TEST_CASE("jit/kernel_cache/a folder removed while in use is made again by the next write") {
  TempDir dir;
  Logged log;
  auto cache = open_cache(dir.path, log);
  fs::remove_all(dir.path);
  CHECK_FALSE(cache->load(key_of(1)).has_value());
  REQUIRE(cache->store(key_of(1), payload_of(1)));
  CHECK(cache->load(key_of(1)) == payload_of(1));
  CHECK(log.lines.empty());
}

TEST_CASE("jit/kernel_cache/an entry larger than the bound is removed unread") {
  TempDir dir;
  Logged log;
  auto cache = open_cache(dir.path, log, 4096);
  write_file(cache->entry_path(key_of(1)), std::string(10000, 'x'));
  CHECK_FALSE(cache->load(key_of(1)).has_value());
  CHECK_FALSE(fs::exists(cache->entry_path(key_of(1))));
  CHECK(log.mentions("more than the cache bound"));
}

}  // namespace carve::jit
