// `carve plan` end to end, in process.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.h"
#include "cli/demo_command.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

struct CliRun {
  int code;
  std::string out, err;
};

CliRun carve_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = carve::cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

fs::path temp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("carve_cli_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

fs::path write_temp(const std::string& name, const std::string& text) {
  fs::path path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

const char* kBranches = R"(graph branches {
  input x: f32[256]
  a = exp(x) -> a: f32[256]
  sa = reduce_sum(a) {axes=[0]} -> sa: f32[1]
  b = tanh(x) -> b: f32[256]
  sb = reduce_sum(b) {axes=[0]} -> sb: f32[1]
  c = add(sa, sb) -> c: f32[1]
  output c
}
)";

}  // namespace

TEST_CASE("tools/plan/minimalloc example with every strategy writes json") {
  const std::string csv = carve::test::minimalloc_dir() + "/examples__input.12.csv";
  const fs::path json = temp_path("example.json");
  CliRun r = carve_cli({"plan", csv, "--strategy", "all", "--json", json.string()});
  INFO(r.out, r.err);
  CHECK(r.code == 0);
  auto j = read_json(json);
  CHECK(j["lower_bound_bytes"] == 12);
  CHECK(j["buffers"] == 5);
  REQUIRE(j["results"].size() >= 7);
  for (const auto& result : j["results"]) {
    CHECK(result["valid"] == true);
    CHECK(result["arena_bytes"].get<int64_t>() >= 12);
    CHECK(result.contains("optimal"));
    CHECK(result.contains("plan_seconds"));
  }
}

TEST_CASE("tools/plan/all skips the strategies left once the time limit is reached") {
  // --time-limit 0: planning must end at once. The first strategy still returns a (valid)
  // plan; every later one is reported as skipped instead of planned past the limit.
  const std::string csv = carve::test::minimalloc_dir() + "/examples__input.12.csv";
  const fs::path json = temp_path("skipped.json");
  CliRun r = carve_cli({"plan", csv, "--strategy", "all", "--time-limit", "0", "--json", json.string()});
  INFO(r.out, r.err);
  CHECK(r.code == 0);
  auto j = read_json(json);
  REQUIRE(j["results"].size() == 1);
  CHECK(j["results"][0]["valid"] == true);
  CHECK(r.out.find("skipped: the time limit was reached") != std::string::npos);
}

TEST_CASE("tools/plan/exact within capacity on challenging K") {
  const std::string csv = carve::test::minimalloc_dir() + "/challenging__K.1048576.csv";
  const fs::path json = temp_path("k.json");
  const fs::path out_csv = temp_path("k.out.csv");
  const fs::path svg = temp_path("k.svg");
  CliRun r = carve_cli({"plan", csv, "--strategy", "exact", "--capacity", "1048576", "--time-limit", "60", "--json",
                        json.string(), "--csv", out_csv.string(), "--svg", svg.string()});
  INFO(r.out, r.err);
  CHECK(r.code == 0);
  auto j = read_json(json);
  REQUIRE(j["results"].size() == 1);
  CHECK(j["results"][0]["valid"] == true);
  CHECK(j["results"][0]["arena_bytes"].get<int64_t>() <= 1048576);
  std::ifstream csv_file(out_csv);
  std::string header;
  std::getline(csv_file, header);
  CHECK(header.find("offset") != std::string::npos);
  CHECK(fs::file_size(svg) > 1000);
}

TEST_CASE("tools/plan/malformed csv is an error with its line number") {
  const fs::path csv = write_temp("bad.csv", "id,lower,upper,size\nb1,0,2,8\nb2,3,1,8\n");
  CliRun r = carve_cli({"plan", csv.string(), "--strategy", "greedy-size"});
  CHECK(r.code == 1);
  CHECK(r.err.find("line 3") != std::string::npos);
}

TEST_CASE("tools/plan/json and svg write errors give the reason") {
  const std::string csv = carve::test::minimalloc_dir() + "/examples__input.12.csv";
  CliRun full = carve_cli({"plan", csv, "--strategy", "greedy-size", "--json", "/dev/full"});
  CHECK(full.code == 1);
  CHECK(full.err.find("'/dev/full'") != std::string::npos);
  CHECK(full.err.find("No space left on device") != std::string::npos);
  CliRun missing = carve_cli({"plan", csv, "--strategy", "greedy-size", "--svg", "/nonexistent-carve-dir/p.svg"});
  CHECK(missing.code == 1);
  CHECK(missing.err.find("No such file or directory") != std::string::npos);
}

TEST_CASE("tools/plan/unknown strategy is a usage error") {
  const std::string csv = carve::test::minimalloc_dir() + "/examples__input.12.csv";
  CliRun r = carve_cli({"plan", csv, "--strategy", "nope"});
  CHECK(r.code == 2);
  CHECK(r.err.find("nope") != std::string::npos);
}

TEST_CASE("tools/plan/graph with memory order and parallel-safe reports both") {
  const fs::path graph = write_temp("branches.carve", kBranches);
  const fs::path json = temp_path("branches.json");
  CliRun r = carve_cli({"plan", graph.string(), "--strategy", "greedy-size", "--order", "memory", "--parallel-safe",
                        "--json", json.string()});
  INFO(r.out, r.err);
  CHECK(r.code == 0);
  auto j = read_json(json);
  const auto& facts = j["input_facts"];
  CHECK(facts["memory_order_peak_bytes"].get<int64_t>() <= facts["given_order_peak_bytes"].get<int64_t>());
  CHECK(facts["unordered_pairs"].get<int64_t>() >= 1);
  REQUIRE(j["results"].size() == 2);
  CHECK(j["results"][1]["strategy"] == "parallel-safe");
  CHECK(j["results"][1]["valid"] == true);
}

TEST_CASE("tools/plan/graph parse errors name line and column") {
  const fs::path graph = write_temp("broken.carve", "graph g {\n  input x: f32[4]\n  y = exp(x -> y: f32[4]\n}\n");
  CliRun r = carve_cli({"plan", graph.string()});
  CHECK(r.code == 1);
  CHECK(r.err.find("3:") != std::string::npos);
}

TEST_CASE("tools/plan/no-inplace changes the graph plan") {
  const fs::path graph = write_temp("chain.carve", R"(graph chain {
  input x: f32[64]
  a = exp(x) -> a: f32[64]
  b = relu(a) -> b: f32[64]
  c = tanh(b) -> c: f32[64]
  d = reduce_sum(c) {axes=[0]} -> d: f32[1]
  output d
}
)");
  const fs::path with = temp_path("with.json"), without = temp_path("without.json");
  REQUIRE(carve_cli({"plan", graph.string(), "--strategy", "greedy-size", "--json", with.string()}).code == 0);
  REQUIRE(carve_cli({"plan", graph.string(), "--strategy", "greedy-size", "--no-inplace", "--json",
                     without.string()}).code == 0);
  CHECK(read_json(with)["input_facts"]["inplace"] == 2);
  CHECK(read_json(without)["input_facts"]["inplace"] == 0);
  CHECK(read_json(with)["lower_bound_bytes"].get<int64_t>() < read_json(without)["lower_bound_bytes"].get<int64_t>());
}

TEST_CASE("tools/demo/built-in block: graph lifetimes and plan") {
  std::ostringstream out, err;
  CHECK(carve::cli::run_builtin_demo(out, err) == 0);
  CHECK(out.str().find("graph demo_block {") != std::string::npos);
  CHECK(out.str().find("tensor lifetimes") != std::string::npos);
  CHECK(out.str().find("arena storage #") != std::string::npos);
}

TEST_CASE("tools/demo/the whole pipeline on the shipped model") {
#ifndef CARVE_HAVE_ONNX
  carve::test::skip("this build has no ONNX importer: carve demo shows the built-in block (tested above)");
#else
  const fs::path dir = fs::temp_directory_path() / ("carve_demo_test_" + std::to_string(::getpid()));
  CliRun r = carve_cli({"demo", "--out-dir", dir.string(), "--tokens", "4"});
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  for (const char* step : {"== 1. import", "== 2. plan", "lower bound", "in place", "== 3. JIT", "fused groups",
                           "races: 0", "bit-identical to the parallel run: yes", "vs PyTorch", "generated"})
    CHECK(r.out.find(step) != std::string::npos);
  CHECK(fs::file_size(dir / "plan.svg") > 0);
  CHECK(fs::file_size(dir / "trace.json") > 0);
  fs::remove_all(dir);
#endif
}

TEST_CASE("tools/plan/sizes and alignments past int64 are clear errors, never a crash") {
  // One buffer of 2^61 bytes: every strategy plans it (exact used to segfault).
  const fs::path big = write_temp("big.csv", "id,lower,upper,size\nb,0,1,2305843009213693952\n");
  CliRun r = carve_cli({"plan", big.string()});
  INFO(r.out, r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("exact") != std::string::npos);
  // An alignment that makes offsets unrepresentable: every strategy says so.
  const fs::path small = write_temp("small.csv", "id,lower,upper,size\na,0,2,100\nb,1,3,200\n");
  r = carve_cli({"plan", small.string(), "--align", "4611686018427387904"});
  CHECK(r.code == 1);
  CHECK(r.out.find("overflows int64") != std::string::npos);
  // Live bytes past int64: the lower bound says so instead of printing INT64_MAX.
  const fs::path huge = write_temp("huge.csv", "id,lower,upper,size\na,0,2,9223372036854775807\nb,1,3,9223372036854775807\n");
  r = carve_cli({"plan", huge.string()});
  CHECK(r.code == 1);
  CHECK(r.out.find("over 2^63 bytes") != std::string::npos);
  CHECK(r.out.find("9223372036854775807") == std::string::npos);
}
