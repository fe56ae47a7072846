// carve_onnx_conformance: ONNX's backend node tests through carve's importer and runtime,
// all in this one process (one Session, so kernels compiled once are reused).
//
//   carve_onnx_conformance --cases DIR [--expected expected_failures.txt]
//                          [--write-expected FILE] [--write-doc FILE [--note TEXT]] [--filter REGEX]
//                          [--verbose]
//
// DIR is what generate.py wrote. With --expected, exit 1 when a case fails that the list
// does not name, a result is wrong and not listed as "WRONG: ...", or a listed case now
// passes (the list must shrink with it). scripts/onnx-coverage.sh rewrites the list and
// docs/onnx-coverage.md. Exit 77 (CTest's skip) when the cases were not generated
// (generate.py said why) or the build has no CPU JIT.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <unistd.h>

#include "conformance.h"
#include "run_case.h"

namespace cc = carve::conformance;

namespace {

constexpr const char* kRegenerate = "bash scripts/onnx-coverage.sh";

// The case running now, for the crash handler and the watchdog.
char g_current[256] = "(none)";
struct sigaction g_previous[32];

void on_crash(int sig, siginfo_t* info, void* context) {
  const char* parts[] = {"carve_onnx_conformance: signal in case ", g_current, "\n"};
  for (const char* p : parts) (void)!write(STDERR_FILENO, p, std::strlen(p));
  // Hand over to what was installed before (the sanitizers' report), else the default.
  const struct sigaction& prev = g_previous[sig];
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) return prev.sa_sigaction(sig, info, context);
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) return prev.sa_handler(sig);
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_crash_handler() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction action {};
    action.sa_sigaction = on_crash;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, &g_previous[sig]);
  }
}

// A compile cannot be cancelled: a case over its budget ends the process, naming it.
class Watchdog {
 public:
  explicit Watchdog(double seconds)
      : thread_([this, seconds](std::stop_token stop) {
          while (!stop.stop_requested()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            std::lock_guard<std::mutex> lock(mutex_);
            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count() > seconds) {
              fmt::print(stderr, "carve_onnx_conformance: case {} ran over {} s\n", g_current, seconds);
              std::_Exit(1);
            }
          }
        }) {}
  void start(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::snprintf(g_current, sizeof g_current, "%s", name.c_str());
    since_ = std::chrono::steady_clock::now();
  }

 private:
  std::mutex mutex_;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  std::jthread thread_;  // last: stopped and joined before the members it reads go
};

std::string onnx_version(const std::string& dir) {
  std::ifstream in(dir + "/manifest.tsv");
  std::string line;
  std::getline(in, line);  // "# onnx 1.12.0, numpy ...: N node cases"
  std::smatch m;
  return std::regex_search(line, m, std::regex(R"(onnx ([0-9.]+))")) ? m[1].str() : "?";
}

// The problems that fail the test, one line each.
std::vector<std::string> check(const std::vector<cc::Case>& cases, const std::vector<cc::Outcome>& outcomes,
                               const std::map<std::string, std::string>& expected, bool all_cases) {
  std::vector<std::string> problems;
  std::set<std::string> names;
  for (size_t i = 0; i < cases.size(); ++i) {
    const cc::Case& c = cases[i];
    const cc::Outcome& o = outcomes[i];
    names.insert(c.name);
    const auto listed = expected.find(c.name);
    if (o.verdict == cc::Verdict::kPass) {
      if (listed != expected.end())
        problems.push_back(fmt::format("{} now passes, remove from expected_failures.txt", c.name));
    } else if (o.verdict == cc::Verdict::kWrong) {
      if (listed == expected.end() || !listed->second.starts_with("WRONG"))
        problems.push_back(fmt::format("{} gives a WRONG result: {}", c.name, o.detail));
    } else if (listed == expected.end()) {
      problems.push_back(fmt::format("{} fails and is not in expected_failures.txt ({}): {}", c.name,
                                     cc::failure_reason(c, o), o.detail));
    }
  }
  if (all_cases)
    for (const auto& [name, reason] : expected)
      if (!names.contains(name)) problems.push_back(fmt::format("{} is listed but is no case: remove it", name));
  return problems;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ONNX backend node tests through carve"};
  std::string dir, expected_path, write_expected, write_doc, filter, note;
  bool verbose = false;
  double case_seconds = 120;
  app.add_option("--cases", dir, "directory generate.py wrote")->required();
  app.add_option("--expected", expected_path, "expected_failures.txt to check the verdicts against");
  app.add_option("--write-expected", write_expected, "write the failing cases with their reasons here");
  app.add_option("--write-doc", write_doc, "write the coverage document (docs/onnx-coverage.md) here");
  app.add_option("--note", note, "a line for the document (e.g. the ONNX Runtime reference)");
  app.add_option("--filter", filter, "run only the cases whose name matches this regex");
  app.add_option("--case-timeout", case_seconds, "seconds one case may take before the process ends");
  app.add_flag("--verbose", verbose, "print every case's verdict");
  CLI11_PARSE(app, argc, argv);
  if (!std::filesystem::exists(dir + "/manifest.tsv")) {
    fmt::print("{}/manifest.tsv is missing: generate.py did not write the cases (its output says why)\n", dir);
    return 77;
  }
  if (!filter.empty() && (!write_expected.empty() || !write_doc.empty())) {
    fmt::print(stderr, "--write-expected and --write-doc need every case: drop --filter\n");
    return 2;
  }
  auto cases = cc::read_manifest(dir);
  if (!cases.ok()) return fmt::print(stderr, "{}\n", cases.status().to_string()), 1;
  if (!filter.empty()) {
    std::regex re;
    try {
      re = std::regex(filter);
    } catch (const std::regex_error& e) {
      return fmt::print(stderr, "--filter '{}': {}\n", filter, e.what()), 2;
    }
    std::erase_if(*cases, [&](const cc::Case& c) { return !std::regex_search(c.name, re); });
  }
  std::map<std::string, std::string> expected;
  if (!expected_path.empty()) {
    auto read = cc::read_expected(expected_path);
    if (!read.ok()) return fmt::print(stderr, "{}\n", read.status().to_string()), 1;
    expected = std::move(*read);
  }

  // One thread each: ctest runs tests side by side, and these programs are tiny.
  carve::runtime::SessionOptions options;
  options.threads = 1;
  options.jit.compile_threads = 1;
  options.jit.disk_cache = false;  // hermetic: every run compiles what it checks
  auto session = carve::runtime::Session::create(options);
  if (!session.ok()) return fmt::print(stderr, "{}\n", session.status().to_string()), 1;
  install_crash_handler();
  Watchdog watchdog(case_seconds);
  std::vector<cc::Outcome> outcomes;
  std::map<cc::Verdict, int> counts;
  const auto start = std::chrono::steady_clock::now();
  for (const cc::Case& c : *cases) {
    watchdog.start(c.name);
    outcomes.push_back(cc::run_case(c, dir, **session, case_seconds));
    ++counts[outcomes.back().verdict];
    if (verbose)
      fmt::print("{:<60} {:<7} {}\n", c.name, cc::verdict_name(outcomes.back().verdict), outcomes.back().detail);
    // Without the CPU JIT nothing can compile: say so once (a skip, as other suites do).
    if (outcomes.back().detail.starts_with("Unavailable")) {
      fmt::print("Session::compile is unavailable: {}\n", outcomes.back().detail);
      return 77;
    }
  }
  watchdog.start("(done)");
  fmt::print("{} node cases in {:.1f} s: {} pass, {} error, {} not run, {} WRONG\n", cases->size(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
             counts[cc::Verdict::kPass], counts[cc::Verdict::kError], counts[cc::Verdict::kNotRun],
             counts[cc::Verdict::kWrong]);

  if (!write_expected.empty())
    if (auto s = cc::write_expected(write_expected, *cases, outcomes, kRegenerate); !s.ok())
      return fmt::print(stderr, "{}\n", s.to_string()), 1;
  if (!write_doc.empty())
    if (auto s = cc::write_doc(write_doc, *cases, outcomes, kRegenerate, onnx_version(dir), note); !s.ok())
      return fmt::print(stderr, "{}\n", s.to_string()), 1;
  if (expected_path.empty()) return counts[cc::Verdict::kWrong] > 0 ? 1 : 0;
  const std::vector<std::string> problems = check(*cases, outcomes, expected, filter.empty());
  for (const std::string& p : problems) fmt::print("FAIL {}\n", p);
  if (!problems.empty())
    fmt::print("{} problem(s); if intended, regenerate the list: {}\n", problems.size(), kRegenerate);
  return problems.empty() ? 0 : 1;
}
