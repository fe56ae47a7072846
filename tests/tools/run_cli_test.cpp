// `carve run` end to end, in process: inputs from .npy, outputs to .npy, errors.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "carve/ir/text.h"
#include "carve/jit/host_target.h"
#include "carve/reference/reference.h"
#include "carve/runtime/npy.h"
#include "cli_test_util.h"
#include "cli/run_command.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace carve;
using cli_test::carve_cli;
using cli_test::kSmallGraph;

namespace {

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("carve_run_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("tools/run/npy inputs give the reference outputs") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  const fs::path dir = temp_dir();
  std::ofstream(dir / "small.carve") << kSmallGraph;
  auto x = reference::HostTensor::from<float>({3, 5}, {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f, 0.9f, 1.0f,
                                                 -1.1f, 1.2f, 1.3f, -1.4f, 1.5f});
  auto y = reference::HostTensor::from<float>({5}, {0.5f, 0.25f, -0.125f, 1.0f, -2.0f});
  for (auto [name, tensor] : {std::pair{"x", &x}, std::pair{"y", &y}}) {
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(tensor->bytes.data()), tensor->bytes.size());
    auto buffer = runtime::Buffer::borrow(bytes, tensor->type.dtype, tensor->type.shape);
    REQUIRE(runtime::write_npy((dir / (std::string(name) + ".npy")).string(), *buffer).ok());
  }
  std::string out, err;
  int code = carve_cli({"run", (dir / "small.carve").string(), "--input", "x=" + (dir / "x.npy").string(), "--input",
                        "y=" + (dir / "y.npy").string(), "--output-dir", (dir / "out").string(), "--iters", "3",
                        "--explain"},
                       &out, &err);
  INFO(out, err);
  REQUIRE(code == 0);
  CHECK(out.find("kernels (fused groups)") != std::string::npos);
  CHECK(out.find("min") != std::string::npos);
  auto want = reference::run_reference(*ir::parse(kSmallGraph), std::vector<reference::HostTensor>{x, y});
  REQUIRE(want.ok());
  for (size_t i = 0; i < 2; ++i) {
    auto got = runtime::read_npy((dir / "out" / (i == 0 ? "t.npy" : "r.npy")).string());
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    auto g = *got->span<float>();
    auto w = want->at(i).as<float>();
    REQUIRE(g.size() == w.size());
    for (size_t k = 0; k < w.size(); ++k) CHECK(std::fabs(g[k] - w[k]) <= 1e-6f * std::max(1.0f, std::fabs(w[k])));
  }
}

TEST_CASE("tools/run/an ONNX input whose value the import needs is read from its npy") {
  // reshape_by_input.onnx: y = Reshape(x f32[2,3], shape i64[rank]); the plain import
  // cannot fold the shape, so the run imports again with the shape's value.
#ifndef CARVE_HAVE_ONNX
  test::skip("carve was built without the ONNX importer (CARVE_WITH_ONNX=OFF)");
  return;
#endif
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  const fs::path dir = temp_dir();
  auto x = reference::HostTensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto shape = reference::HostTensor::from<int64_t>({2}, {3, 2});
  for (auto [name, tensor] : {std::pair{"x", &x}, std::pair{"shape", &shape}}) {
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(tensor->bytes.data()), tensor->bytes.size());
    auto buffer = runtime::Buffer::borrow(bytes, tensor->type.dtype, tensor->type.shape);
    REQUIRE(runtime::write_npy((dir / (std::string(name) + ".npy")).string(), *buffer).ok());
  }
  std::string out, err;
  const std::string model = test::source_dir() + "/tests/onnx/models/reshape_by_input.onnx";
  int code = carve_cli({"run", model, "--input", "x=" + (dir / "x.npy").string(), "--input",
                        "shape=" + (dir / "shape.npy").string(), "--output-dir", (dir / "reshaped").string()},
                       &out, &err);
  INFO(out, err);
  REQUIRE(code == 0);
  auto y = runtime::read_npy((dir / "reshaped" / "y.npy").string());
  REQUIRE_MESSAGE(y.ok(), y.status().to_string());
  CHECK(y->shape() == ir::Shape({3, 2}));
  auto values = *y->span<float>();
  CHECK(std::vector<float>(values.begin(), values.end()) == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("tools/run/bf16 inputs and outputs as <u2 bit patterns with --bf16-as-u2") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  const fs::path dir = temp_dir();
  std::ofstream(dir / "double.carve") << R"(graph double {
  input x: bf16[4]
  s = add(x, x) -> y: bf16[4]
  output y
}
)";
  // bf16 1.0, -2.0, 0.5, 0: doubled is 2.0, -4.0, 1.0, 0.
  const std::vector<uint16_t> bits = {0x3F80, 0xC000, 0x3F00, 0x0000};
  auto x = runtime::Buffer::borrow(std::as_bytes(std::span(bits)), ir::DType::kU16, ir::Shape{4});
  REQUIRE(runtime::write_npy((dir / "x_bits.npy").string(), *x).ok());
  const std::vector<std::string> args = {"run", (dir / "double.carve").string(), "--input",
                                         "x=" + (dir / "x_bits.npy").string(), "--output-dir",
                                         (dir / "bf16_out").string()};
  std::string out, err;
  CHECK(carve_cli(args, &out, &err) == 1);  // uint16 data for a bf16 input: asked, not guessed
  CHECK(err.find("--bf16-as-u2") != std::string::npos);
  std::vector<std::string> with_flag = args;
  with_flag.push_back("--bf16-as-u2");
  const int code = carve_cli(with_flag, &out, &err);
  INFO(out, err);
  REQUIRE(code == 0);
  auto y = runtime::read_npy((dir / "bf16_out" / "y.npy").string());
  REQUIRE_MESSAGE(y.ok(), y.status().to_string());
  REQUIRE(y->dtype() == ir::DType::kU16);
  auto values = *y->span<uint16_t>();
  CHECK(std::vector<uint16_t>(values.begin(), values.end()) == std::vector<uint16_t>{0x4000, 0xC080, 0x3F80, 0x0000});
}

TEST_CASE("tools/run/missing and unknown inputs are clear errors") {
  const fs::path dir = temp_dir();
  std::ofstream(dir / "small.carve") << kSmallGraph;
  std::string err;
  CHECK(carve_cli({"run", (dir / "small.carve").string()}, nullptr, &err) == 1);
  if (jit::cpu_jit_available()) {
    CHECK(err.find("input 'x'") != std::string::npos);
    CHECK(carve_cli({"run", (dir / "small.carve").string(), "--input", "nope=a.npy"}, nullptr, &err) == 1);
    CHECK(err.find("nope") != std::string::npos);
    CHECK(carve_cli({"run", (dir / "small.carve").string(), "--input", "x=" + (dir / "missing.npy").string(),
                     "--random-inputs", "1"},
                    nullptr, &err) == 1);
    CHECK(err.find("missing.npy") != std::string::npos);
  }
  CHECK(carve_cli({"run", (dir / "absent.carve").string()}, nullptr, &err) == 1);
  CHECK(err.find("absent.carve") != std::string::npos);
}

TEST_CASE("tools/run/threads sequential check-hazards and trace") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  const fs::path dir = temp_dir();
  std::ofstream(dir / "small.carve") << kSmallGraph;
  const std::string graph = (dir / "small.carve").string();
  std::string out, err;
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "3", "--threads", "2", "--check-hazards", "--explain", "--trace",
                     (dir / "trace.json").string()},
                    &out, &err) == 0);
  INFO(out, err);
  CHECK(out.find("in parallel on 2 threads") != std::string::npos);
  CHECK(out.find("hazard check: 0 race(s)") != std::string::npos);
  CHECK(out.find("schedule: ") != std::string::npos);  // DAG statistics in --explain
  CHECK(out.find("arena: storage #") != std::string::npos);  // and the arena's views
  std::ifstream trace(dir / "trace.json");
  std::stringstream text;
  text << trace.rdbuf();
  CHECK(text.str().find("\"traceEvents\"") != std::string::npos);
  CHECK(carve_cli({"run", graph, "--random-inputs", "3", "--trace", "/dev/full"}, &out, &err) == 1);
  CHECK(err.find("No space left on device") != std::string::npos);

  REQUIRE(carve_cli({"run", graph, "--random-inputs", "3", "--sequential"}, &out, &err) == 0);
  CHECK(out.find("sequentially (sequential execution requested)") != std::string::npos);
  // A tiny program falls back to sequential on its own and says why.
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "3", "--threads", "2"}, &out, &err) == 0);
  CHECK(out.find("sequentially (") != std::string::npos);

  CHECK(carve_cli({"run", graph, "--random-inputs", "3", "--sequential", "--check-hazards"}, &out, &err) != 0);
  CHECK(carve_cli({"run", graph, "--random-inputs", "3", "--drop-edge", "0-1"}, &out, &err) == 1);
  CHECK(err.find("FROM:TO") != std::string::npos);
  CHECK(carve_cli({"run", graph, "--random-inputs", "3", "--drop-edge", "5:9"}, &out, &err) == 1);
}

TEST_CASE("tools/run/check-hazards fails on a removed edge") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  if (std::thread::hardware_concurrency() < 2) {
    test::skip("one hardware thread: two launches can never overlap, so no race can be observed");
    return;
  }
  // Two launches (no fusion): exp writes a, neg reads it. Without the edge 0:1 both are
  // sources; each is held 20 ms, so they overlap and the checker reports the RAW race.
  const fs::path dir = temp_dir();
  std::ofstream(dir / "chain.carve") << R"(graph chain {
  input x: f32[64,64]
  e = exp(x) -> a: f32[64,64]
  n = neg(a) -> c: f32[64,64]
  output c
}
)";
  const std::string graph = (dir / "chain.carve").string();
  std::string out, err;
  REQUIRE(carve_cli({"run", graph, "--random-inputs", "1", "--no-fuse", "--check-hazards"}, &out, &err) == 0);
  const int code = carve_cli({"run", graph, "--random-inputs", "1", "--no-fuse", "--check-hazards", "--threads", "2",
                              "--drop-edge", "0:1", "--iters", "5"},
                             &out, &err);
  INFO(out, err);
  CHECK(code == 1);
  CHECK(out.find("hazard: RAW") != std::string::npos);
  CHECK(err.find("race") != std::string::npos);
  // The race names the views: "RAW buffer #17 'a' = storage #3 [0, 16384) vs buffer #17 'a' ...".
  const auto raw = out.find("RAW buffer #");
  REQUIRE(raw != std::string::npos);
  const std::string line = out.substr(raw, out.find('\n', raw) - raw);
  CHECK(line.find("'a' = storage #") != std::string::npos);
  CHECK(line.find(" vs buffer #") != std::string::npos);
  CHECK(line.find("[0, 16384)") != std::string::npos);
}

TEST_CASE("tools/run/output file names are distinct and reversible") {
  using carve::cli::output_file_name;
  CHECK(*output_file_name("logits") == "logits.npy");
  CHECK(*output_file_name("a/b") == "a%2Fb.npy");
  CHECK(*output_file_name("a_b") == "a_b.npy");       // no longer the same file as a/b
  CHECK(*output_file_name("a%2Fb") == "a%252Fb.npy");  // '%' itself is encoded: reversible
  CHECK(*output_file_name("/head/MatMul_output_0") == "%2Fhead%2FMatMul_output_0.npy");
  CHECK(*output_file_name("..") == "%2E%2E.npy");
  CHECK(*output_file_name("x.y") == "x.y.npy");
  CHECK(*output_file_name("caf\xc3\xa9") == "caf%C3%A9.npy");
  CHECK(output_file_name(std::string("a\0b", 3)).status().code() == carve::ErrorCode::kInvalidArgument);
  CHECK(output_file_name("").status().code() == carve::ErrorCode::kInvalidArgument);
}
