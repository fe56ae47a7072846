// Every committed ONNX model (tests/onnx/models/manifest.txt) run through a CUDA Session
// must match torch's outputs within 1e-4 relative error, with graph replay and with plain
// streams (ssd_tiny, whose NMS output has a data-dependent extent, is refused, naming it).
// Each case skips with "no CUDA device: ..." on a machine without a GPU.
// TF32 is never enabled here: the tolerance is for full f32 arithmetic.
#include <doctest/doctest.h>

#include <fstream>

#include "onnx_test_util.h"
#include "test_support.h"

namespace {

constexpr double kTolerance = 1e-4;

carve::runtime::SessionOptions cuda_options(bool graphs) {
  carve::runtime::SessionOptions o;
  o.device = {carve::runtime::DeviceType::kCuda, 0};
  o.streams = 4;
  o.cuda_graphs = graphs;
  return o;
}

// False when there is no CUDA device (the case is then skipped).
bool check_model_on_gpu(const std::string& name, bool graphs) {
  auto error = carve::onnx_test::session_error(name, cuda_options(graphs));
  if (!error.ok() && error.status().code() == carve::ErrorCode::kUnavailable &&
      error.status().message().find("no CUDA device") != std::string::npos) {
    carve::test::skip(error.status().message());
    return false;
  }
  INFO(name << ": " << error.status().to_string());
  if (name == "ssd_tiny") {  // NonMaxSuppression's data-dependent extent: CPU Sessions only (session.h)
    CHECK(error.status().code() == carve::ErrorCode::kUnsupported);
    CHECK(error.status().message().find("CPU Session only") != std::string::npos);
    return true;
  }
  CHECK(error.ok());
  if (!error.ok()) return true;
  MESSAGE(name << " cuda session max relative error " << *error);
  CHECK(*error <= kTolerance);
  return true;
}

std::vector<std::string> manifest() {
  std::ifstream in(carve::onnx_test::models_dir() + "/manifest.txt");
  std::vector<std::string> names;
  for (std::string name; std::getline(in, name);)
    if (!name.empty()) names.push_back(name);
  return names;
}

}  // namespace

// One case per model and mode would be 64 near-identical cases; subcases keep each model
// named in the failure output and the whole set in one GPU process.
TEST_CASE("cuda/gpu/onnx/every committed model matches torch with graph replay") {
  const auto names = manifest();
  REQUIRE_FALSE(names.empty());  // onnx/models/manifest_is_tested pins the list
  for (const std::string& name : names) {
    CAPTURE(name);
    if (!check_model_on_gpu(name, true)) return;
  }
}

TEST_CASE("cuda/gpu/onnx/every committed model matches torch with streams") {
  const auto names = manifest();
  REQUIRE_FALSE(names.empty());  // onnx/models/manifest_is_tested pins the list
  for (const std::string& name : names) {
    CAPTURE(name);
    if (!check_model_on_gpu(name, false)) return;
  }
}
