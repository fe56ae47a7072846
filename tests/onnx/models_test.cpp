// End to end: every committed model (made by scripts/make_onnx_models.py from PyTorch
// with random weights) is imported and run, through the reference interpreter and
// through a Session, and must match torch's outputs within 1e-4 relative error.
#include <doctest/doctest.h>

#include <fstream>

#include "onnx_test_util.h"
#include "test_support.h"

using carve::ErrorCode;

namespace {

constexpr double kTolerance = 1e-4;

void check_reference(const std::string& name) {
  auto error = carve::onnx_test::reference_error(name);
  INFO(name << ": " << error.status().to_string());
  REQUIRE(error.ok());
  MESSAGE(name << " reference max relative error " << *error);
  CHECK(*error <= kTolerance);
}

void check_session(const std::string& name) {
  auto error = carve::onnx_test::session_error(name);
  if (!error.ok() && error.status().code() == ErrorCode::kUnavailable) {
    carve::test::skip("Session::compile is unavailable (built without the CPU JIT): " + error.status().message());
    return;
  }
  INFO(name << ": " << error.status().to_string());
  REQUIRE(error.ok());
  MESSAGE(name << " session max relative error " << *error);
  CHECK(*error <= kTolerance);
}

}  // namespace

// One reference case and one session case per model (doctest names must be literals).
#define CARVE_ONNX_MODEL_CASES(model)                                          \
  TEST_CASE("onnx/reference/" #model) { check_reference(#model); }            \
  TEST_CASE("onnx/session/" #model) { check_session(#model); }

CARVE_ONNX_MODEL_CASES(op_unary)
CARVE_ONNX_MODEL_CASES(op_binary)
CARVE_ONNX_MODEL_CASES(op_where_equal)
CARVE_ONNX_MODEL_CASES(op_conv)
CARVE_ONNX_MODEL_CASES(op_batchnorm)
CARVE_ONNX_MODEL_CASES(op_pools)
CARVE_ONNX_MODEL_CASES(op_pools_13)
CARVE_ONNX_MODEL_CASES(op_linalg)
CARVE_ONNX_MODEL_CASES(op_linalg_11)
CARVE_ONNX_MODEL_CASES(op_layout)
CARVE_ONNX_MODEL_CASES(op_layout_11)
CARVE_ONNX_MODEL_CASES(op_embedding)
CARVE_ONNX_MODEL_CASES(op_trilu)
CARVE_ONNX_MODEL_CASES(op_layernorm)
CARVE_ONNX_MODEL_CASES(op_hardswish)
CARVE_ONNX_MODEL_CASES(op_1d)
CARVE_ONNX_MODEL_CASES(resnet_tiny)
CARVE_ONNX_MODEL_CASES(mobilenet_v2_tiny)
CARVE_ONNX_MODEL_CASES(mobilenet_v3_tiny)
CARVE_ONNX_MODEL_CASES(mobilenet_v3_tiny_13)
CARVE_ONNX_MODEL_CASES(squeezenet_tiny)
CARVE_ONNX_MODEL_CASES(vgg_tiny)
CARVE_ONNX_MODEL_CASES(gpt_tiny)
CARVE_ONNX_MODEL_CASES(gpt_tiny_14)
CARVE_ONNX_MODEL_CASES(bert_tiny)
CARVE_ONNX_MODEL_CASES(unet_tiny)
CARVE_ONNX_MODEL_CASES(ssd_tiny)
CARVE_ONNX_MODEL_CASES(recurrent_tiny)
CARVE_ONNX_MODEL_CASES(swin_tiny)
CARVE_ONNX_MODEL_CASES(bert_dynamic)
CARVE_ONNX_MODEL_CASES(external_weights)
CARVE_ONNX_MODEL_CASES(forms_opset10)
CARVE_ONNX_MODEL_CASES(forms_opset15)
CARVE_ONNX_MODEL_CASES(forms_edges)
CARVE_ONNX_MODEL_CASES(forms_io)
CARVE_ONNX_MODEL_CASES(forms_misc)
CARVE_ONNX_MODEL_CASES(forms_layernorm)
CARVE_ONNX_MODEL_CASES(forms_pad_pool)

// The list above must cover manifest.txt (what the script generated), so a new model
// cannot be committed without a test.
TEST_CASE("onnx/models/manifest_is_tested") {
  std::ifstream manifest(carve::onnx_test::models_dir() + "/manifest.txt");
  REQUIRE(manifest);
  const std::string tested =
      " op_unary op_binary op_where_equal op_conv op_batchnorm op_pools op_pools_13 op_linalg op_linalg_11"
      " op_layout op_layout_11 op_embedding op_trilu op_layernorm op_hardswish op_1d resnet_tiny mobilenet_v2_tiny"
      " mobilenet_v3_tiny mobilenet_v3_tiny_13 squeezenet_tiny vgg_tiny gpt_tiny gpt_tiny_14 bert_tiny unet_tiny ssd_tiny recurrent_tiny swin_tiny"
      " bert_dynamic external_weights forms_opset10 forms_opset15 forms_edges forms_io forms_misc forms_layernorm forms_pad_pool ";
  int count = 0;
  for (std::string name; std::getline(manifest, name);) {
    if (name.empty()) continue;
    ++count;
    INFO(name);
    CHECK(tested.find(" " + name + " ") != std::string::npos);
  }
  CHECK(count == 38);
}
