#include "test_support.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

namespace carve::test {

std::atomic<int> g_skipped{0};

void skip(std::string_view reason) {
  std::fprintf(stderr, "SKIPPED: %.*s\n", static_cast<int>(reason.size()), reason.data());
  g_skipped.fetch_add(1);
}

std::string source_dir() { return CARVE_SOURCE_DIR; }
std::vector<uint8_t> random_f32_bytes(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    float f = dist(rng);
    std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(float), &f, sizeof f);
  }
  return bytes;
}

std::string minimalloc_dir() { return source_dir() + "/tests/data/minimalloc"; }

TempDir::TempDir(std::string_view prefix) {
  std::string pattern = "/tmp/" + std::string(prefix) + "_XXXXXX";
  char* made = ::mkdtemp(pattern.data());
  REQUIRE(made != nullptr);
  path = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::vector<std::string> TempDir::names() const {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> TempDir::paths() const {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace carve::test
