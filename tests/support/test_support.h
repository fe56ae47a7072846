// Shared helpers for carve's doctest suites.
#pragma once

#include <string>
#include <string_view>

namespace carve::test {

// Marks the running test case as skipped (e.g. "no CUDA device: ..."): prints the
// reason, and the process exits with CTest's SKIP_RETURN_CODE (77) unless a test failed.
// Call it and return from the test case.
void skip(std::string_view reason);

// ../shared beside the repo (MiniMalloc data, seeds), and the source tree.
std::string shared_dir();
std::string source_dir();

}  // namespace carve::test
