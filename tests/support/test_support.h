// Shared helpers for carve's doctest suites.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace carve::test {

// Marks the running test case as skipped (e.g. "no CUDA device: ..."): prints the
// reason, and the process exits with CTest's SKIP_RETURN_CODE (77) unless a test failed.
// Call it and return from the test case.
void skip(std::string_view reason);

// The source tree, and the MiniMalloc benchmark files copied into it
// (<source>/tests/data/minimalloc, see the README there). Tests read nothing outside it.
std::string source_dir();

// n f32 values uniform in [-1, 1) from `seed`, as bytes (constant and input data).
std::vector<uint8_t> random_f32_bytes(int64_t n, uint32_t seed);
std::string minimalloc_dir();

// A fresh directory under /tmp ("/tmp/<prefix>_XXXXXX"), removed with its contents when
// the object goes. Not copyable: one owner removes it.
struct TempDir {
  explicit TempDir(std::string_view prefix = "carve_test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // What the directory holds, sorted: file names, or full paths.
  std::vector<std::string> names() const;
  std::vector<std::string> paths() const;

  std::string path;
};

}  // namespace carve::test
