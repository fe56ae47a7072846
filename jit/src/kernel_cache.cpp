// The on-disk kernel cache (kernel_cache.h): entry format, atomic writes, bad-entry
// removal and least-recently-used eviction. POSIX calls rather than iostreams so every
// failure (ENOSPC at write, fsync or close) is seen and the temp file removed.
#include "carve/jit/kernel_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

namespace carve::jit {

namespace {

constexpr char kMagic[8] = {'c', 'a', 'r', 'v', 'e', 'k', 'c', '\n'};
constexpr size_t kHeaderBytes = 32;
constexpr std::string_view kEntryPrefix = "cpu-";
constexpr std::string_view kEntrySuffix = ".obj";
constexpr std::string_view kTempPrefix = ".tmp-cpu-";
constexpr int64_t kStaleTempSeconds = 3600;

std::atomic<testing::CacheWriteFn> g_write_hook{nullptr};

uint64_t fnv1a(uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t checksum(std::string_view key, std::string_view payload) {
  return fnv1a(fnv1a(0xcbf29ce484222325ULL, key), payload);
}

// Keys become file names: lower-case hex only, so no path can be smuggled in.
bool valid_key(std::string_view key) {
  return !key.empty() && key.size() <= 128 &&
         std::all_of(key.begin(), key.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string errno_text(int err) { return std::strerror(err); }

// `size` bytes of the file into `out`; errno-style error code, 0 on success.
int read_all(int fd, size_t size, std::string& out) {
  out.resize(size);
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;  // shrank while reading: the short size is caught by decode
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return 0;
}

int write_all(int fd, std::string_view bytes) {
  testing::CacheWriteFn hook = g_write_hook.load();
  while (!bytes.empty()) {
    ssize_t n = hook ? hook(fd, bytes.data(), bytes.size()) : ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

struct EntryFile {
  std::string path;
  int64_t bytes = 0;
  timespec mtime{};
};

bool older(const EntryFile& a, const EntryFile& b) {
  if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
  if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
  return a.path < b.path;
}

// Entries in `dir` (oldest first); removes temp files of writers that died.
std::vector<EntryFile> scan(const std::string& dir) {
  std::vector<EntryFile> entries;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  const time_t now = std::time(nullptr);
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool entry = name.starts_with(kEntryPrefix) && name.ends_with(kEntrySuffix);
    const bool temp = name.starts_with(kTempPrefix);
    if (!entry && !temp) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (temp) {
      if (now - st.st_mtim.tv_sec > kStaleTempSeconds) ::unlink(it->path().c_str());
      continue;
    }
    entries.push_back({it->path().string(), static_cast<int64_t>(st.st_size), st.st_mtim});
  }
  std::sort(entries.begin(), entries.end(), older);
  return entries;
}

}  // namespace

std::string default_cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  if (std::string dir = env("CARVE_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg.front() == '/') return xdg + "/carve";
  if (std::string home = env("HOME"); !home.empty()) return home + "/.cache/carve";
  return {};
}

std::string encode_cache_entry(std::string_view key, std::string_view payload) {
  std::string file(kHeaderBytes, '\0');
  const uint32_t version = kCacheFormatVersion;
  const auto key_len = static_cast<uint32_t>(key.size());
  const uint64_t payload_len = payload.size();
  const uint64_t sum = checksum(key, payload);
  std::memcpy(file.data(), kMagic, 8);
  std::memcpy(file.data() + 8, &version, 4);
  std::memcpy(file.data() + 12, &key_len, 4);
  std::memcpy(file.data() + 16, &payload_len, 8);
  std::memcpy(file.data() + 24, &sum, 8);
  file.append(key);
  file.append(payload);
  return file;
}

Result<std::string_view> decode_cache_entry(std::string_view key, std::string_view file) {
  auto bad = [](std::string why) { return Status(ErrorCode::kParseError, std::move(why)); };
  if (file.empty()) return bad("empty file");
  if (file.size() < kHeaderBytes) return bad(fmt::format("{} bytes, shorter than the {}-byte header", file.size(), kHeaderBytes));
  if (std::memcmp(file.data(), kMagic, 8) != 0) return bad("not a carve kernel cache entry (magic)");
  uint32_t version = 0, key_len = 0;
  uint64_t payload_len = 0, sum = 0;
  std::memcpy(&version, file.data() + 8, 4);
  std::memcpy(&key_len, file.data() + 12, 4);
  std::memcpy(&payload_len, file.data() + 16, 8);
  std::memcpy(&sum, file.data() + 24, 8);
  if (version != kCacheFormatVersion) return bad(fmt::format("format version {}, expected {}", version, kCacheFormatVersion));
  const uint64_t body = file.size() - kHeaderBytes;
  if (key_len > body || payload_len != body - key_len)
    return bad(fmt::format("{} bytes, the header says {}", file.size(), kHeaderBytes + uint64_t{key_len} + payload_len));
  const std::string_view stored_key = file.substr(kHeaderBytes, key_len);
  const std::string_view payload = file.substr(kHeaderBytes + key_len);
  if (stored_key != key) return bad("stored under another key");
  if (checksum(stored_key, payload) != sum) return bad("checksum mismatch");
  if (payload.empty()) return bad("empty object");
  return payload;
}

Result<std::unique_ptr<KernelDiskCache>> KernelDiskCache::open(const std::string& dir, int64_t max_bytes, CacheLog log) {
  if (max_bytes < 1) return Status(ErrorCode::kInvalidArgument, fmt::format("kernel cache size bound {} bytes < 1", max_bytes));
  if (dir.empty()) return Status(ErrorCode::kInvalidArgument, "kernel cache folder: empty path");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(ErrorCode::kIoError, fmt::format("kernel cache folder '{}': {}", dir, ec.message()));
  if (!std::filesystem::is_directory(dir, ec))
    return Status(ErrorCode::kIoError, fmt::format("kernel cache folder '{}' is not a folder", dir));
  return std::unique_ptr<KernelDiskCache>(new KernelDiskCache(dir, max_bytes, std::move(log)));
}

std::string KernelDiskCache::entry_path(std::string_view key) const {
  return fmt::format("{}/{}{}{}", dir_, kEntryPrefix, key, kEntrySuffix);
}

void KernelDiskCache::warn(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mu_);  // one line at a time, whatever thread writes
  if (log_) log_(line);
}

void KernelDiskCache::remove_bad(const std::string& path, ino_t inode, std::string_view why) {
  // Only while it is still the file we judged: another process may have replaced it.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && st.st_ino == inode) ::unlink(path.c_str());
  bad_.fetch_add(1);
  warn(fmt::format("kernel cache: removed bad entry {} ({}); the kernel is compiled again", path, why));
}

std::optional<std::string> KernelDiskCache::load(std::string_view key) {
  if (!valid_key(key)) return std::nullopt;
  const std::string path = entry_path(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // a miss (or unreadable: compiling is the fallback)
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  if (st.st_size > max_bytes_) {  // never written by a cache with this bound: not read in
    ::close(fd);
    remove_bad(path, st.st_ino, fmt::format("{} bytes, more than the cache bound", st.st_size));
    return std::nullopt;
  }
  std::string file;
  int err = read_all(fd, static_cast<size_t>(st.st_size), file);
  if (err == 0) ::futimens(fd, nullptr);  // mark used (LRU); a read-only cache keeps its order
  ::close(fd);
  if (err != 0) return std::nullopt;
  auto payload = decode_cache_entry(key, file);
  if (!payload.ok()) {
    remove_bad(path, st.st_ino, payload.status().message());
    return std::nullopt;
  }
  hits_.fetch_add(1);
  return std::string(*payload);
}

void KernelDiskCache::discard(std::string_view key, std::string_view why) {
  if (!valid_key(key)) return;
  const std::string path = entry_path(key);
  ::unlink(path.c_str());
  bad_.fetch_add(1);
  warn(fmt::format("kernel cache: removed bad entry {} ({}); the kernel is compiled again", path, why));
}

bool KernelDiskCache::store(std::string_view key, std::string_view payload) {
  if (!valid_key(key) || payload.empty()) return false;
  const std::string file = encode_cache_entry(key, payload);
  if (static_cast<int64_t>(file.size()) > max_bytes_) return false;  // could never fit the bound
  const std::string path = entry_path(key);
  const std::string tmp = fmt::format("{}/{}{}.{}.{}", dir_, kTempPrefix, key, ::getpid(), temp_counter_.fetch_add(1));
  int err = 0;
  const char* stage = "creating";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT) {  // the folder was removed since open(): make it again
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0) {
    err = errno;
  } else {
    stage = "writing";
    err = write_all(fd, file);
    auto step = [&](const char* name, bool failed) {
      if (err == 0 && failed) {
        stage = name;
        err = errno;
      }
    };
    step("syncing", err == 0 && ::fsync(fd) != 0);
    step("closing", ::close(fd) != 0);
    step("renaming", err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0);
    if (err != 0) ::unlink(tmp.c_str());
  }
  if (err != 0) {
    write_failures_.fetch_add(1);
    if (!write_failure_logged_.exchange(true))
      warn(fmt::format("kernel cache: {} {} failed: {}; kernels are compiled but not cached "
                       "(later write failures are counted, not logged)",
                       stage, fd < 0 ? tmp : path, errno_text(err)));
    return false;
  }
  writes_.fetch_add(1);
  int64_t total = approx_bytes_.load();
  if (total < 0) {
    total = evict_to(max_bytes_);  // first write of this process: scan once
  } else {
    total = approx_bytes_.fetch_add(static_cast<int64_t>(file.size())) + static_cast<int64_t>(file.size());
  }
  if (total > max_bytes_) evict_to(max_bytes_ / 4 * 3);
  return true;
}

int64_t KernelDiskCache::evict_to(int64_t target_bytes) {
  std::lock_guard<std::mutex> lock(evict_mu_);
  std::vector<EntryFile> entries = scan(dir_);
  int64_t total = 0;
  for (const EntryFile& e : entries) total += e.bytes;
  for (const EntryFile& e : entries) {
    if (total <= target_bytes) break;
    if (::unlink(e.path.c_str()) == 0) evictions_.fetch_add(1);
    total -= e.bytes;  // gone either way: removed here or by another process
  }
  approx_bytes_.store(total);
  return total;
}

int64_t KernelDiskCache::total_bytes() const {
  int64_t total = 0;
  for (const EntryFile& e : scan(dir_)) total += e.bytes;
  return total;
}

KernelCacheStats KernelDiskCache::stats() const {
  return {hits_.load(), bad_.load(), writes_.load(), write_failures_.load(), evictions_.load()};
}

namespace testing {
void set_cache_write_hook(CacheWriteFn fn) { g_write_hook.store(fn); }
}  // namespace testing

}  // namespace carve::jit
