// doctest main shared by all suites. Two guards doctest lacks:
//  - a run filtered by --test-case that executes no case fails (exit 2) instead of
//    passing silently, so a renamed or mis-escaped test cannot turn green;
//  - test cases that call carve::test::skip() make the process exit with 77, which
//    CTest reports as skipped (SKIP_RETURN_CODE), unless something failed.
// And one guard for the user's home: the kernel disk cache is on by default (in
// ~/.cache/carve, or CARVE_CACHE_DIR), so each test process started by CTest or by hand
// points CARVE_CACHE_DIR at a folder of its own under the temp directory, removed when it
// exits. Processes a test starts (the CLI, helper cases) keep the CARVE_CACHE_DIR they are
// given: CARVE_TEST_CACHE_OWNER marks them.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace carve::test {
extern std::atomic<int> g_skipped;
}

namespace {

std::atomic<int> g_cases_started{0};

struct CountingListener : doctest::IReporter {
  explicit CountingListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { g_cases_started.fetch_add(1); }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

// Removes the folder it made (only that one) when the process ends.
struct PrivateCacheDir {
  std::string path;
  PrivateCacheDir() {
    if (std::getenv("CARVE_TEST_CACHE_OWNER") != nullptr) return;  // started by a test
    std::string tmpl = (std::filesystem::temp_directory_path() / "carve_test_cache_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("carve tests: mkdtemp for CARVE_CACHE_DIR");
      std::exit(2);
    }
    path = tmpl;
    ::setenv("CARVE_CACHE_DIR", path.c_str(), 1);
    ::setenv("CARVE_TEST_CACHE_OWNER", std::to_string(::getpid()).c_str(), 1);
  }
  ~PrivateCacheDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

REGISTER_LISTENER("carve-counter", 1, CountingListener);

int main(int argc, char** argv) {
  static PrivateCacheDir cache_dir;
  bool filtered = false;
  bool listing = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--test-case=", 12) == 0 || std::strncmp(argv[i], "-tc=", 4) == 0) filtered = true;
    if (std::strncmp(argv[i], "--list", 6) == 0 || std::strncmp(argv[i], "-l", 2) == 0 ||
        std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0)
      listing = true;
  }
  doctest::Context context(argc, argv);
  int rc = context.run();
  if (context.shouldExit() || listing) return rc;
  if (rc != 0) return rc;
  if (filtered && g_cases_started.load() == 0) {
    std::fprintf(stderr, "carve tests: the --test-case filter matched no test case\n");
    return 2;
  }
  if (carve::test::g_skipped.load() > 0) return 77;
  return 0;
}
