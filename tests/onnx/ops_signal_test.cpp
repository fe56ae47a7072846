// The signal ops the importer folds to constants (ops_signal.cpp): HannWindow,
// HammingWindow, BlackmanWindow and MelWeightMatrix, against values computed here.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "one_node_model.h"

using carve::ErrorCode;
using carve::onnx_test::check_close;
using carve::onnx_test::check_fails;
using carve::onnx_test::import;
using carve::onnx_test::kI32;
using carve::onnx_test::Model;
using carve::onnx_test::run;
using carve::onnx_test::Values;

namespace {

// A scalar initializer of ONNX type `type` (int32, int64 or float).
void scalar_init(Model& m, const std::string& name, int type, double value) {
  auto* t = m.g().add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  if (type == ::onnx::TensorProto::FLOAT) t->add_float_data(static_cast<float>(value));
  else if (type == ::onnx::TensorProto::INT64) t->add_int64_data(static_cast<int64_t>(value));
  else t->add_int32_data(static_cast<int32_t>(value));
}

Model window(const std::string& op, int64_t size, int64_t periodic) {
  Model m(17);
  scalar_init(m, "size", ::onnx::TensorProto::INT64, static_cast<double>(size));
  m.node(op, {"size"}).i("periodic", periodic);
  return m;
}

// a0 - a1 cos(2 pi i / N) + a2 cos(4 pi i / N), N = size or size - 1.
Values cosine_window(int64_t size, bool periodic, double a0, double a1, double a2) {
  const double period = static_cast<double>(periodic ? size : size - 1);
  Values v;
  for (int64_t i = 0; i < size; ++i) {
    const double x = 2 * std::numbers::pi * static_cast<double>(i) / period;
    v.push_back(a0 - a1 * std::cos(x) + a2 * std::cos(2 * x));
  }
  return v;
}

}  // namespace

TEST_CASE("onnx/ops/windows") {
  for (int64_t periodic : {0, 1}) {
    CAPTURE(periodic);
    check_close(window("HannWindow", 10, periodic), {}, cosine_window(10, periodic, 0.5, 0.5, 0));
    check_close(window("HammingWindow", 7, periodic), {}, cosine_window(7, periodic, 25.0 / 46, 21.0 / 46, 0));
    check_close(window("BlackmanWindow", 12, periodic), {}, cosine_window(12, periodic, 0.42, 0.5, 0.08), 1e-5, 1e-7);
  }
  // The symmetric window is symmetric and ends at a0 - a1 (+ a2); the periodic one is the
  // symmetric window one longer without its last element.
  check_close(window("HannWindow", 5, 0), {}, {0, 0.5, 1, 0.5, 0});
  check_close(window("HannWindow", 4, 1), {}, {0, 0.5, 1, 0.5});

  SUBCASE("size 1") {
    // Periodic: N = 1, the one element is w(0) = a0 - a1 (+ a2).
    check_close(window("HannWindow", 1, 1), {}, {0});
    check_close(window("HammingWindow", 1, 1), {}, {4.0 / 46});
    // Symmetric: N = 0 and the angle is 0 / 0, NaN as in ONNX's function body.
    check_close(window("HannWindow", 1, 0), {}, {std::numeric_limits<double>::quiet_NaN()});
  }
  SUBCASE("output_datatype and an int32 size") {
    Model m(17);
    scalar_init(m, "size", ::onnx::TensorProto::INT32, 4);
    m.node("HannWindow", {"size"}).i("output_datatype", ::onnx::TensorProto::DOUBLE);
    auto imported = import(m);
    REQUIRE(imported.ok());
    CHECK(imported->graph.value(imported->graph.outputs[0]).type.dtype == carve::ir::DType::kF64);
    check_close(m, {}, {0, 0.5, 1, 0.5}, 1e-12, 1e-15);
  }
  SUBCASE("bad sizes and attributes") {
    check_fails(window("HannWindow", 0, 1), ErrorCode::kInvalidArgument, "size");
    check_fails(window("HannWindow", -3, 1), ErrorCode::kInvalidArgument, "size");
    check_fails(window("HannWindow", 4, 2), ErrorCode::kInvalidArgument, "periodic=2");
    Model float_size(17);
    scalar_init(float_size, "size", ::onnx::TensorProto::FLOAT, 4);
    float_size.node("HannWindow", {"size"});
    check_fails(float_size, ErrorCode::kInvalidArgument, "integer type");
    Model bool_out = window("BlackmanWindow", 4, 1);
    bool_out.i("output_datatype", ::onnx::TensorProto::BOOL);
    check_fails(bool_out, ErrorCode::kInvalidArgument, "output_datatype bool");
    // A size only known at run time: the import asks for its value.
    Model graph_size(17);
    graph_size.input("size", kI32, {}).node("HammingWindow", {"size"});
    graph_size.g().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar
    check_fails(graph_size, ErrorCode::kUnsupported, "must be a constant");
  }
}

namespace {

Model mel(int64_t bins, int64_t dft_length, int64_t sample_rate, double lower, double upper) {
  Model m(17);
  scalar_init(m, "bins", ::onnx::TensorProto::INT32, static_cast<double>(bins));
  scalar_init(m, "dft", ::onnx::TensorProto::INT32, static_cast<double>(dft_length));
  scalar_init(m, "rate", ::onnx::TensorProto::INT32, static_cast<double>(sample_rate));
  scalar_init(m, "lower", ::onnx::TensorProto::FLOAT, lower);
  scalar_init(m, "upper", ::onnx::TensorProto::FLOAT, upper);
  m.node("MelWeightMatrix", {"bins", "dft", "rate", "lower", "upper"});
  return m;
}

}  // namespace

TEST_CASE("onnx/ops/mel_weight_matrix") {
  // 4 mel bins over 0..4000 Hz at 8000 Hz, dft_length 32: 17 spectrogram bins. The six
  // mel points (step 2146.06 / 6 mel) are 0, 261.5, 620.6, 1113.8, 1791.3, 2721.9 Hz, at
  // bins floor(33 hz / 8000) = 0, 1, 2, 4, 7, 11.
  auto imported = import(mel(4, 32, 8000, 0, 4000));
  REQUIRE(imported.ok());
  CHECK(imported->graph.value(imported->graph.outputs[0]).type.shape == carve::ir::Shape{17, 4});
  Values expected(17 * 4, 0.0);
  auto at = [&](int bin, int m) -> double& { return expected[static_cast<size_t>(bin * 4 + m)]; };
  // Filter m rises from bins[m] to 1 at bins[m + 1] and falls towards bins[m + 2].
  at(1, 0) = 1;
  at(2, 1) = 1, at(3, 1) = 0.5;
  at(3, 2) = 0.5, at(4, 2) = 1, at(5, 2) = 2.0 / 3, at(6, 2) = 1.0 / 3;
  at(5, 3) = 1.0 / 3, at(6, 3) = 2.0 / 3, at(7, 3) = 1, at(8, 3) = 0.75, at(9, 3) = 0.5, at(10, 3) = 0.25;
  check_close(mel(4, 32, 8000, 0, 4000), {}, expected);

  SUBCASE("bad inputs") {
    check_fails(mel(0, 32, 8000, 0, 4000), ErrorCode::kInvalidArgument, "num_mel_bins");
    check_fails(mel(4, 32, 0, 0, 4000), ErrorCode::kInvalidArgument, "sample_rate");
    check_fails(mel(4, 32, 8000, 3000, 1000), ErrorCode::kInvalidArgument, "edges");
    // Past Nyquist the top points land outside the 17 spectrogram bins.
    check_fails(mel(4, 32, 8000, 0, 16000), ErrorCode::kInvalidArgument, "spectrogram bins");
  }
}
