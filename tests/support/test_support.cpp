#include "test_support.h"

#include <atomic>
#include <cstdio>

namespace carve::test {

std::atomic<int> g_skipped{0};

void skip(std::string_view reason) {
  std::fprintf(stderr, "SKIPPED: %.*s\n", static_cast<int>(reason.size()), reason.data());
  g_skipped.fetch_add(1);
}

std::string source_dir() { return CARVE_SOURCE_DIR; }
std::string minimalloc_dir() { return source_dir() + "/tests/data/minimalloc"; }

}  // namespace carve::test
