// `carve compile --device cuda --dry-run`: every committed ONNX model's kernels generated
// and NVRTC-compiled for sm_80 and sm_90 without a GPU (GEMM groups on both paths:
// generated, and cuBLASLt's im2col/epilogue); a kernel that does not compile
// fails the command naming it; nodes placed on the CPU are listed with the reason.
// The NVRTC cases skip only when NVRTC cannot be loaded (no CUDA toolkit), saying why.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "carve/jit/cuda/nvrtc.h"
#include "cli_test_util.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace carve;
using cli_test::carve_cli;

namespace {

bool skip_without_nvrtc() {
  const Status s = jit::cuda::nvrtc_status();
  if (s.ok()) return false;
  test::skip(s.message());  // "NVRTC not available: <why>"
  return true;
}

// kSmallGraph: two kernels on the GPU unless a node is placed on the CPU (then unfused).
std::string write_small_graph(const test::TempDir& dir) {
  const std::string path = (fs::path(dir.path) / "small.carve").string();
  std::ofstream(path) << cli_test::kSmallGraph;
  return path;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// NVRTC is not instrumented, and carve generates each kernel once whatever the number of
// archs: under AddressSanitizer one arch exercises all of carve's code (the optimised
// suites compile both), at half the NVRTC time.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

}  // namespace

TEST_CASE("cuda/dryrun/every committed ONNX model compiles for sm_80 and sm_90") {
  if (skip_without_nvrtc()) return;
#ifndef CARVE_HAVE_ONNX
  test::skip("carve was built without the ONNX importer (CARVE_WITH_ONNX=OFF): the models cannot be read");
  return;
#endif
  const std::string models = test::source_dir() + "/tests/onnx/models";
  std::vector<std::string> args = {"compile", "--device", "cuda", "--dry-run", "--arch", "sm_90"};
  if (!kSanitized) args.insert(args.end(), {"--arch", "sm_80"});
  std::ifstream manifest(models + "/manifest.txt");
  size_t count = 0;
  for (std::string name; std::getline(manifest, name);) {
    if (name.empty() || name.starts_with("err_")) continue;  // the models meant to be rejected
    // NonMaxSuppression's data-dependent extent runs on the CPU only (cuda/gpu/onnx checks
    // the refusal).
    if (name == "ssd_tiny") continue;
    args.push_back(models + "/" + name + ".onnx");
    ++count;
  }
  REQUIRE(count >= 30);
  test::TempDir dir("carve_dryrun");
  const std::string json_path = dir.path + "/report.json";
  args.insert(args.end(), {"--json", json_path});
  std::string out, err;
  const int code = carve_cli(args, &out, &err);
  INFO(out << err);
  REQUIRE(code == 0);
  const nlohmann::json report = read_json(json_path);
  REQUIRE(report.is_object());
  CHECK(report["ok"] == true);
  REQUIRE(report["models"].size() == count);
  int64_t library_gemms = 0;  // GEMM groups whose cuBLASLt im2col/epilogue kernels compiled too
  for (const nlohmann::json& model : report["models"]) {
    library_gemms += model["library_gemms"].get<int64_t>();
    CAPTURE(model["model"].get<std::string>());
    CHECK(model["kernels"].get<int64_t>() > 0);
    CHECK(model["failures"].empty());
    // No op of a shipped model leaves the GPU: the CUDA path places nodes on the CPU only when asked.
    CHECK(model["cpu_nodes"].empty());
    REQUIRE(model["archs"].size() == (kSanitized ? 1u : 2u));
    for (const nlohmann::json& arch : model["archs"]) CHECK(arch["compiled"] == model["unique_sources"]);
  }
  CHECK(library_gemms > 0);
  const std::string archs = kSanitized ? "sm_90 (sm_80 in the unsanitised suites)" : "sm_80 and sm_90";
  MESSAGE("dry run of " << count << " models for " << archs << ": " << report["seconds"].get<double>() << " s");
}

TEST_CASE("cuda/dryrun/a kernel that does not compile fails the command naming it") {
  if (skip_without_nvrtc()) return;
  test::TempDir dir("carve_dryrun");
  const std::string graph = write_small_graph(dir);
  std::string out, err;
  // A macro that breaks the entry point's name: a real NVRTC error with its log, in every kernel.
  REQUIRE(carve_cli({"compile", graph, "--device", "cuda", "--dry-run", "--arch", "sm_80", "--no-cache",
                     "--nvrtc-option=-Dcarve_kernel=1"},
                    &out, &err) == 1);
  INFO(out << err);
  CHECK(out.find("sm_80: 0 compiled (0 from cache), 2 FAILED") != std::string::npos);
  CHECK(err.find("kernel 0 'fused_add_tanh_0' [a (add), t (tanh)] for sm_80: Internal: NVRTC compilation failed") !=
        std::string::npos);
  CHECK(err.find("kernel 1 'reduce_sum_2' [r (reduce_sum)] for sm_80") != std::string::npos);
  CHECK(err.find("error: expected an identifier") != std::string::npos);  // NVRTC's log
  CHECK(err.find("2 kernel compile(s) failed") != std::string::npos);

  // An arch this NVRTC cannot target is the command's error, before any kernel.
  REQUIRE(carve_cli({"compile", graph, "--device", "cuda", "--dry-run", "--arch", "sm_1"}, &out, &err) == 1);
  CHECK(err.find("--arch: arch sm_1 is older than this NVRTC") != std::string::npos);
}

TEST_CASE("cuda/dryrun/a node placed on the CPU is listed with the reason") {
  if (skip_without_nvrtc()) return;
  test::TempDir dir("carve_dryrun");
  const std::string graph = write_small_graph(dir);
  const std::string json_path = dir.path + "/report.json";
  std::string out, err;
  REQUIRE(carve_cli({"compile", graph, "--device", "cuda", "--dry-run", "--arch", "sm_90", "--place", "t=cpu",
                     "--json", json_path},
                    &out, &err) == 0);
  INFO(out << err);
  // Mixed programs are built unfused: add and reduce_sum on the GPU, tanh on the CPU.
  CHECK(out.find("2 GPU kernels generated (0 GEMM groups also as cuBLASLt im2col/epilogue), 2 unique sources, 1 nodes "
                 "on the CPU") != std::string::npos);
  CHECK(out.find("on the CPU: node 't' (tanh), kernel 1: placed on cpu by --place") != std::string::npos);
  const nlohmann::json report = read_json(json_path);
  REQUIRE(report.is_object());
  const nlohmann::json& cpu = report["models"][0]["cpu_nodes"];
  REQUIRE(cpu.size() == 1);
  CHECK(cpu[0]["node"] == "t");
  CHECK(cpu[0]["op"] == "tanh");
  CHECK(cpu[0]["reason"].get<std::string>().find("--place") != std::string::npos);

  // A node the graph does not have is an error, as in CompileOptions::placement.
  CHECK(carve_cli({"compile", graph, "--device", "cuda", "--dry-run", "--place", "nope=cpu"}, &out, &err) == 1);
  CHECK(err.find("names node 'nope'") != std::string::npos);
}

TEST_CASE("cuda/dryrun/without a device the command asks for --dry-run") {
  test::TempDir dir("carve_dryrun");
  const std::string graph = write_small_graph(dir);
  std::string out, err;
  const int code = carve_cli({"compile", graph, "--device", "cuda"}, &out, &err);
  INFO(out << err);
  if (code == 0) {  // a machine with a GPU: compiled and loaded for real
    CHECK(out.find("compiled and loaded on cuda:0") != std::string::npos);
  } else {
    CHECK(code == 1);
    CHECK(err.find("Unavailable: no CUDA device") != std::string::npos);
    CHECK(err.find("pass --dry-run") != std::string::npos);
  }
  CHECK(carve_cli({"compile", graph, "--device", "cpu"}, &out, &err) == 1);
  CHECK(err.find("--device cpu is not supported") != std::string::npos);
  CHECK(carve_cli({"compile", graph, "--dry-run"}, &out, &err) == 2);  // --device is required
}
