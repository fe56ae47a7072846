// The on-disk kernel cache: one file per compiled kernel object, shared by every process
// that uses the same folder. The JIT (jit.h) uses it; it knows nothing of LLVM.
//
// Where: JitOptions::cache_dir, else default_cache_dir(): $CARVE_CACHE_DIR, else
// $XDG_CACHE_HOME/carve, else $HOME/.cache/carve. JitOptions::disk_cache = false (and
// `carve run --no-cache`) turns it off.
//
// Entry file `<dir>/cpu-<key>.obj` (<key>: the kernel's lower-case hex key), host byte order
// (the key covers the target triple):
//   [0, 8)   magic "carvekc\n"
//   [8, 12)  format version (u32, kCacheFormatVersion)
//   [12, 16) key length K (u32)
//   [16, 24) payload length N (u64)
//   [24, 32) checksum: FNV-1a 64 over the key and the payload
//   then the K key bytes and the N payload bytes; the file is exactly 32 + K + N bytes.
// The checksum catches corruption (truncation, flipped bytes, a foreign or empty file;
// any single changed byte changes it), not deliberate tampering.
//
// Writes are atomic: a temp file in the same folder (".tmp-cpu-<key>.<pid>.<n>") is
// written, fsynced and renamed over the entry; any failure removes the temp file, so a
// reader sees a whole entry or none, and a full disk leaves nothing behind.
// Bad entries (wrong size, magic, version, key or checksum, larger than the bound, or
// refused by the JIT: discard()) are logged naming the file, removed and treated as a
// miss -- never an error. A folder removed while in use is made again by the next write.
//
// Size: bounded by max_bytes (default kDefaultCacheMaxBytes). A hit touches the entry's
// mtime; when writes take the folder's total above the bound, the least recently used
// entries are removed until it is at most 3/4 of it. A process counts its own writes
// between scans of the folder, so with several writers at once the folder can exceed the
// bound by what the others wrote since this process last scanned (each of them evicts
// too). Temp files older than an hour (a writer that died) are removed by the same scan.
//
// Several processes at once are safe: renames are atomic, removing a file already gone is
// ignored, and a bad entry is removed only while it is still the file that was read (same
// inode), so a good entry another process just renamed into place survives.
// Thread-safety: every method may be called from any number of threads at once.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "carve/status.h"

namespace carve::jit {

inline constexpr int64_t kDefaultCacheMaxBytes = int64_t{512} << 20;  // 512 MiB
inline constexpr uint32_t kCacheFormatVersion = 1;

// Receives one line per event worth a warning (a bad entry removed, a failed write); a
// cache calls it from one thread at a time.
using CacheLog = std::function<void(const std::string&)>;

// $CARVE_CACHE_DIR, else $XDG_CACHE_HOME/carve (an absolute XDG_CACHE_HOME only, as the
// XDG spec says), else $HOME/.cache/carve; empty when none of them is set.
std::string default_cache_dir();

struct KernelCacheStats {
  int64_t hits = 0;            // entries loaded
  int64_t bad_entries = 0;     // entries found bad (or discarded) and removed
  int64_t writes = 0;          // entries written
  int64_t write_failures = 0;  // writes that failed (nothing was left behind)
  int64_t evictions = 0;       // entries removed to keep the size bound
};

class KernelDiskCache {
 public:
  // Creates `dir` when missing. kIoError when it cannot be made or is not a folder;
  // kInvalidArgument when max_bytes < 1. `log` may be empty (then nothing is logged).
  static Result<std::unique_ptr<KernelDiskCache>> open(const std::string& dir, int64_t max_bytes, CacheLog log);

  const std::string& dir() const { return dir_; }
  int64_t max_bytes() const { return max_bytes_; }
  std::string entry_path(std::string_view key) const;

  // The payload stored under `key`, or nullopt (no entry, or a bad one, which is logged
  // and removed). A hit marks the entry as recently used.
  std::optional<std::string> load(std::string_view key);
  // Writes the entry atomically; false when it could not (the first failure is logged).
  // May evict older entries to keep the bound.
  bool store(std::string_view key, std::string_view payload);
  // Removes the entry of `key` that load() returned but the caller could not use;
  // logs the file and `why`.
  void discard(std::string_view key, std::string_view why);
  // Removes least recently used entries until the folder holds at most `target_bytes`
  // of entries; returns the bytes left.
  int64_t evict_to(int64_t target_bytes);
  // Bytes of all entries now in the folder (a scan).
  int64_t total_bytes() const;

  KernelCacheStats stats() const;

 private:
  KernelDiskCache(std::string dir, int64_t max_bytes, CacheLog log)
      : dir_(std::move(dir)), max_bytes_(max_bytes), log_(std::move(log)) {}
  void warn(const std::string& line);
  void remove_bad(const std::string& path, ino_t inode, std::string_view why);

  std::string dir_;
  int64_t max_bytes_;
  CacheLog log_;
  std::mutex evict_mu_;
  std::mutex log_mu_;
  std::atomic<int64_t> approx_bytes_{-1};  // entries' bytes at the last scan + own writes; -1: not scanned
  std::atomic<uint64_t> temp_counter_{0};
  std::atomic<bool> write_failure_logged_{false};
  std::atomic<int64_t> hits_{0}, bad_{0}, writes_{0}, write_failures_{0}, evictions_{0};
};

// The entry file of `payload` stored under `key` (see the layout above).
std::string encode_cache_entry(std::string_view key, std::string_view payload);
// The payload inside an entry file, or kParseError saying what is wrong with it.
Result<std::string_view> decode_cache_entry(std::string_view key, std::string_view file);

namespace testing {
// Replaces ::write in the cache writer (nullptr restores it), to inject failures such as
// ENOSPC: return -1 with errno set. Process-wide; for tests only.
using CacheWriteFn = ssize_t (*)(int fd, const void* data, size_t size);
void set_cache_write_hook(CacheWriteFn fn);
}  // namespace testing

}  // namespace carve::jit
