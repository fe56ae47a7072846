// The quantized ONNX operators (onnx/src/ops_quant.cpp): QuantizeLinear, DequantizeLinear,
// MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv as one-node models run through
// the reference interpreter and (with the CPU JIT) a Session, against values worked out
// by hand in the comments: rounding ties (half to even, before the zero point is added),
// saturation at both ends, per-axis scales and zero points, and the errors.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "carve/onnx/import.h"
#include "carve/reference/reference.h"
#include "one_node_model.h"

using carve::ErrorCode;
using carve::ir::DType;
using carve::ir::Shape;
using carve::reference::HostTensor;
using carve::onnx_test::check_close;
using carve::onnx_test::check_fails;
using carve::onnx_test::kF32;
using carve::onnx_test::kI32;
using carve::onnx_test::kU8;
using carve::onnx_test::Model;

namespace {

constexpr int kI8 = ::onnx::TensorProto::INT8;

// The dtype of the model's first output (from the reference run).
DType output_dtype(const Model& m, const std::vector<HostTensor>& inputs) {
  auto model = carve::onnx_test::import(m);
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  auto out = carve::reference::run_reference(model->graph, inputs);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  return (*out)[0].type.dtype;
}

HostTensor f32s(Shape shape, const std::vector<float>& v) { return HostTensor::from<float>(std::move(shape), v); }
HostTensor u8s(Shape shape, const std::vector<uint8_t>& v) { return HostTensor::from<uint8_t>(std::move(shape), v); }
HostTensor i8s(Shape shape, const std::vector<int8_t>& v) { return HostTensor::from<int8_t>(std::move(shape), v); }

}  // namespace

TEST_CASE("onnx/ops/quantize_linear") {
  SUBCASE("u8 per tensor: ties to even before an odd zero point, saturation both ends") {
    Model m(13);
    m.input("x", kF32, {9}).input("s", kF32, {}).input("z", kU8, {}).node("QuantizeLinear", {"x", "s", "z"});
    // x / 2 = 0.5, 1.5, 2.5, -0.5, -1.5 round to 0, 2, 2, -0, -2 (round(0.5 + 127) would
    // give 128); 500 + 127 and -500 + 127 saturate; -127 + 127 and 127 + 127 just fit.
    const std::vector<HostTensor> in{f32s({9}, {1, 3, 5, -1, -3, 1000, -1000, -254, 254}), HostTensor::scalar(2.f),
                                     HostTensor::scalar(uint8_t{127})};
    check_close(m, in, {127, 129, 129, 127, 125, 255, 0, 0, 254}, 0, 0);
    CHECK(output_dtype(m, in) == DType::kU8);
  }
  SUBCASE("i8 per tensor") {
    Model m(13);
    m.input("x", kF32, {7}).input("s", kF32, {}).input("z", kI8, {}).node("QuantizeLinear", {"x", "s", "z"});
    // x / 0.5 = 0.5, 1.5, -0.5, 200, -200, 127, -126.5 -> 0, 2, -0, 200, -200, 127, -126; minus 1
    const std::vector<HostTensor> in{f32s({7}, {0.25f, 0.75f, -0.25f, 100, -100, 63.5f, -63.25f}),
                                     HostTensor::scalar(0.5f), HostTensor::scalar(int8_t{-1})};
    check_close(m, in, {-1, 1, -1, 127, -128, 126, -127}, 0, 0);
    CHECK(output_dtype(m, in) == DType::kI8);
  }
  SUBCASE("per axis 0, and no zero point (u8)") {
    Model m(13);
    m.input("x", kF32, {2, 3}).input("s", kF32, {2}).input("z", kU8, {2}).node("QuantizeLinear", {"x", "s", "z"});
    m.i("axis", 0);
    // row 0: x / 1 + 10; row 1: x / 2 = 2, 2.5, 3 -> 2, 2, 3, + 20
    const HostTensor x = f32s({2, 3}, {1, 2, 3, 4, 5, 6});
    check_close(m, {x, f32s({2}, {1, 2}), u8s({2}, {10, 20})}, {11, 12, 13, 22, 22, 23}, 0, 0);
    Model plain(13);
    plain.input("x", kF32, {2, 3}).input("s", kF32, {3}).node("QuantizeLinear", {"x", "s"});
    // default axis 1: columns scaled by 1, 2, 4; negatives saturate at 0
    const HostTensor xs = f32s({2, 3}, {-1, 3, 10, 300, 600, 1100});
    check_close(plain, {xs, f32s({3}, {1, 2, 4})}, {0, 2, 2, 255, 255, 255}, 0, 0);
  }
  SUBCASE("i32 input (opset 10)") {
    Model m(10);
    m.input("x", kI32, {2}).input("s", kF32, {}).input("z", kU8, {}).node("QuantizeLinear", {"x", "s", "z"});
    // 3 / 2 = 1.5 -> 2; -7 / 2 = -3.5 -> -4
    check_close(m, {HostTensor::from<int32_t>(Shape{2}, {3, -7}), HostTensor::scalar(2.f),
                    HostTensor::scalar(uint8_t{100})},
                {102, 96}, 0, 0);
  }
  SUBCASE("errors") {
    Model wrong_axis(13);
    wrong_axis.input("x", kF32, {2, 3}).input("s", kF32, {2}).node("QuantizeLinear", {"x", "s"});
    check_fails(wrong_axis, ErrorCode::kInvalidArgument, "input 1 of shape [2]");
    Model per_axis_at_10(10);
    per_axis_at_10.input("x", kF32, {2, 3}).input("s", kF32, {3}).node("QuantizeLinear", {"x", "s"});
    check_fails(per_axis_at_10, ErrorCode::kInvalidArgument, "must have one element");
    Model mixed(13);
    mixed.input("x", kF32, {3}).input("s", kF32, {}).input("z", kI8, {3}).node("QuantizeLinear", {"x", "s", "z"});
    check_fails(mixed, ErrorCode::kInvalidArgument, "input 2 of shape [3]");
    Model to_i32(13);
    to_i32.input("x", kF32, {3}).input("s", kF32, {}).input("z", kI32, {}).node("QuantizeLinear", {"x", "s", "z"});
    check_fails(to_i32, ErrorCode::kUnsupported, "i32");
    Model int_scale(13);
    int_scale.input("x", kF32, {3}).input("s", kI32, {}).node("QuantizeLinear", {"x", "s"});
    check_fails(int_scale, ErrorCode::kInvalidArgument, "not floating point");
    Model doubles(13);
    doubles.input("x", ::onnx::TensorProto::DOUBLE, {3}).input("s", kF32, {}).node("QuantizeLinear", {"x", "s"});
    check_fails(doubles, ErrorCode::kInvalidArgument, "input 0 is f64");
    Model blocked(18);  // block_size is opset 21's; carve imports up to 18 but refuses it clearly
    blocked.input("x", kF32, {2, 4}).input("s", kF32, {2, 2}).node("QuantizeLinear", {"x", "s"}).i("block_size", 2);
    check_fails(blocked, ErrorCode::kUnsupported, "block_size");
  }
}

TEST_CASE("onnx/ops/dequantize_linear") {
  Model m(13);
  m.input("x", kU8, {4}).input("s", kF32, {}).input("z", kU8, {}).node("DequantizeLinear", {"x", "s", "z"});
  const std::vector<HostTensor> in{u8s({4}, {0, 3, 128, 255}), HostTensor::scalar(2.f),
                                   HostTensor::scalar(uint8_t{128})};
  check_close(m, in, {-256, -250, 0, 254}, 0, 0);
  CHECK(output_dtype(m, in) == DType::kF32);

  // Per axis 1 on i8: 127 - (-128) = 255 does not fit i8; the difference is taken wider.
  Model axis(13);
  axis.input("x", kI8, {1, 2, 2}).input("s", kF32, {2}).input("z", kI8, {2}).node("DequantizeLinear", {"x", "s", "z"});
  check_close(axis, {i8s({1, 2, 2}, {-128, 127, 0, 5}), f32s({2}, {0.5f, 2}), i8s({2}, {-128, 5})},
              {0, 127.5, -10, 0}, 0, 0);

  Model wide(10);
  wide.input("x", kI32, {2}).input("s", kF32, {}).node("DequantizeLinear", {"x", "s"});
  check_close(wide, {HostTensor::from<int32_t>(Shape{2}, {1000000, -5}), HostTensor::scalar(0.5f)}, {500000, -2.5},
              0, 0);

  // Constant weights (the usual form) fold at import through the reference interpreter.
  Model folded(13);
  folded.input("s", kF32, {}).node("DequantizeLinear", {"w", "s", "wz"});
  auto* w = folded.g().add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::UINT8);
  w->add_dims(3);
  for (int v : {0, 7, 255}) w->add_int32_data(v);
  auto* wz = folded.g().add_initializer();
  wz->set_name("wz");
  wz->set_data_type(::onnx::TensorProto::UINT8);
  wz->add_int32_data(7);
  check_close(folded, {HostTensor::scalar(0.25f)}, {-1.75, 0, 62}, 0, 0);

  Model mixed(13);
  mixed.input("x", kU8, {4}).input("s", kF32, {}).input("z", kI8, {}).node("DequantizeLinear", {"x", "s", "z"});
  check_fails(mixed, ErrorCode::kInvalidArgument, "zero point");
  Model floats(13);
  floats.input("x", kF32, {4}).input("s", kF32, {}).node("DequantizeLinear", {"x", "s"});
  check_fails(floats, ErrorCode::kUnsupported, "f32");
}

TEST_CASE("onnx/ops/matmul_integer") {
  Model m(10);
  m.input("a", kU8, {2, 3}).input("b", kI8, {3, 2}).input("az", kU8, {2}).input("bz", kI8, {2});
  m.node("MatMulInteger", {"a", "b", "az", "bz"});
  // a - az (per row 0, 1) = [[255, 0, 10], [0, 1, 2]]; b - bz (per column 0, -1) =
  // [[-128, 2], [127, 3], [-1, 4]]; products beyond 8 and 16 bits accumulate in i32.
  const std::vector<HostTensor> in{u8s({2, 3}, {255, 0, 10, 1, 2, 3}), i8s({3, 2}, {-128, 1, 127, 2, -1, 3}),
                                   u8s({2}, {0, 1}), i8s({2}, {0, -1})};
  check_close(m, in, {-32650, 550, 125, 11}, 0, 0);
  CHECK(output_dtype(m, in) == DType::kI32);

  // Batched, no zero points: [2, 1, 2] x [2, 2, 1].
  Model batched(10);
  batched.input("a", kI8, {2, 1, 2}).input("b", kI8, {2, 2, 1}).node("MatMulInteger", {"a", "b"});
  check_close(batched, {i8s({2, 1, 2}, {-128, -128, 1, 2}), i8s({2, 2, 1}, {-128, -128, 3, 4})}, {32768, 11}, 0, 0);

  Model wide_zp(10);
  wide_zp.input("a", kU8, {2, 3}).input("b", kU8, {3, 2}).input("az", kU8, {3}).node("MatMulInteger", {"a", "b", "az"});
  check_fails(wide_zp, ErrorCode::kInvalidArgument, "input 2 of shape [3]");
  Model floats(10);
  floats.input("a", kF32, {2, 3}).input("b", kU8, {3, 2}).node("MatMulInteger", {"a", "b"});
  check_fails(floats, ErrorCode::kUnsupported, "input 0 is f32");
}

TEST_CASE("onnx/ops/qlinear_matmul") {
  // a - 1 = [[1, 4], [3, 0], [199, -1], [-1, -1]] times b = [[1, 2], [1, 0]] gives
  // [[5, 2], [3, 6], [198, 398], [-2, -2]]; the multipliers 0.5 * (1, 0.25) / 1 (b per
  // column) make [[2.5, 0.25], [1.5, 0.75], [99, 49.75], [-1, -0.25]], rounded half to
  // even [[2, 0], [2, 1], [99, 50], [-1, -0]].
  const auto model = [](int y_type) {
    Model m(10);
    m.input("a", kU8, {4, 2}).input("as", kF32, {}).input("az", kU8, {});
    m.input("b", kU8, {2, 2}).input("bs", kF32, {2}).input("bz", kU8, {});
    m.input("ys", kF32, {}).input("yz", y_type, {});
    m.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"});
    return m;
  };
  const auto inputs = [](HostTensor y_zero_point) {
    return std::vector<HostTensor>{u8s({4, 2}, {2, 5, 4, 1, 200, 0, 0, 0}), HostTensor::scalar(0.5f),
                                   HostTensor::scalar(uint8_t{1}), u8s({2, 2}, {1, 2, 1, 0}), f32s({2}, {1, 0.25f}),
                                   HostTensor::scalar(uint8_t{0}), HostTensor::scalar(1.f), std::move(y_zero_point)};
  };
  // + 200: 299 saturates at 255; + 0: -1 saturates at 0.
  check_close(model(kU8), inputs(HostTensor::scalar(uint8_t{200})), {202, 200, 202, 201, 255, 250, 199, 200}, 0, 0);
  check_close(model(kU8), inputs(HostTensor::scalar(uint8_t{0})), {2, 0, 2, 1, 99, 50, 0, 0}, 0, 0);
  // i8 out, + 100: 199 saturates at 127.
  const std::vector<HostTensor> to_i8 = inputs(HostTensor::scalar(int8_t{100}));
  check_close(model(kI8), to_i8, {102, 100, 102, 101, 127, 127, 99, 100}, 0, 0);
  CHECK(output_dtype(model(kI8), to_i8) == DType::kI8);

  Model per_row_y(10);
  per_row_y.input("a", kU8, {4, 2}).input("as", kF32, {}).input("az", kU8, {});
  per_row_y.input("b", kU8, {2, 2}).input("bs", kF32, {}).input("bz", kU8, {});
  per_row_y.input("ys", kF32, {4}).input("yz", kU8, {});
  per_row_y.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"});
  check_fails(per_row_y, ErrorCode::kInvalidArgument, "input 6 of shape [4] must have one element");
}

TEST_CASE("onnx/ops/conv_integer") {
  // x - 1 = [[0, 1, 2], [3, 4, 5], [6, 7, 8]], padded by 1 (with the zero point: 0 after
  // the shift); w - w_zero_point (per output channel 0, 2): channel 0 all ones (window
  // sums), channel 1 only its top-left 1 (x shifted down and right by one).
  Model m(10);
  m.input("x", kU8, {1, 1, 3, 3}).input("w", kU8, {2, 1, 2, 2}).input("xz", kU8, {}).input("wz", kU8, {2});
  m.node("ConvInteger", {"x", "w", "xz", "wz"}).ints("pads", {1, 1, 1, 1});
  const std::vector<HostTensor> in{u8s({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                                   u8s({2, 1, 2, 2}, {1, 1, 1, 1, 3, 2, 2, 2}), HostTensor::scalar(uint8_t{1}),
                                   u8s({2}, {0, 2})};
  check_close(m, in,
              {0, 1, 3, 2, 3, 8, 12, 7, 9, 20, 24, 13, 6, 13, 15, 8,  // channel 0
               0, 0, 0, 0, 0, 0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 8},      // channel 1
              0, 0);
  CHECK(output_dtype(m, in) == DType::kI32);

  // 1-D, i8, strides 2, no zero points: [-128, 127, -128, 127, 5] * [-128, 2].
  Model line(10);
  line.input("x", kI8, {1, 1, 5}).input("w", kI8, {1, 1, 2}).node("ConvInteger", {"x", "w"}).ints("strides", {2});
  check_close(line, {i8s({1, 1, 5}, {-128, 127, -128, 127, 5}), i8s({1, 1, 2}, {-128, 2})}, {16638, 16638}, 0, 0);

  Model per_channel_x(10);
  per_channel_x.input("x", kU8, {1, 2, 3, 3}).input("w", kU8, {1, 2, 2, 2}).input("xz", kU8, {2});
  per_channel_x.node("ConvInteger", {"x", "w", "xz"});
  check_fails(per_channel_x, ErrorCode::kInvalidArgument, "input 2 of shape [2] must have one element");
  Model scalar_w(10);
  scalar_w.input("x", kU8, {1, 1, 3}).input("w", kU8, {}).input("xz", kU8, {}).input("wz", kU8, {});
  scalar_w.node("ConvInteger", {"x", "w", "xz", "wz"});
  check_fails(scalar_w, ErrorCode::kUnsupported, "weights of rank 0");
}

TEST_CASE("onnx/ops/qlinear_conv") {
  // x - 10 = [0, 1, 2, 3, 245, -10]; w = (3, -2) per output channel, bias (1, -1): the
  // accumulators [1, 4, 7, 10, 736, -29] and [-1, -3, -5, -7, -491, 19], times
  // 0.5 * (1, 2) / 2 = (0.25, 0.5): [0.25, 1, 1.75, 2.5, 184, -7.25] and [-0.5, -1.5,
  // -2.5, -3.5, -245.5, 9.5], rounded half to even, - 3, saturated to i8.
  Model m(10);
  m.input("x", kU8, {1, 1, 2, 3}).input("xs", kF32, {}).input("xz", kU8, {});
  m.input("w", kI8, {2, 1, 1, 1}).input("ws", kF32, {2}).input("wz", kI8, {2});
  m.input("ys", kF32, {}).input("yz", kI8, {}).input("b", kI32, {2});
  m.node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"});
  const std::vector<HostTensor> in{u8s({1, 1, 2, 3}, {10, 11, 12, 13, 255, 0}),
                                   HostTensor::scalar(0.5f),
                                   HostTensor::scalar(uint8_t{10}),
                                   i8s({2, 1, 1, 1}, {3, -2}),
                                   f32s({2}, {1, 2}),
                                   i8s({2}, {0, 0}),
                                   HostTensor::scalar(2.f),
                                   HostTensor::scalar(int8_t{-3}),
                                   HostTensor::from<int32_t>(Shape{2}, {1, -1})};
  check_close(m, in, {-3, -2, -1, -1, 127, -10, -3, -5, -5, -7, -128, 7}, 0, 0);
  CHECK(output_dtype(m, in) == DType::kI8);

  Model float_bias(10);
  float_bias.input("x", kU8, {1, 1, 2, 3}).input("xs", kF32, {}).input("xz", kU8, {});
  float_bias.input("w", kI8, {2, 1, 1, 1}).input("ws", kF32, {2}).input("wz", kI8, {2});
  float_bias.input("ys", kF32, {}).input("yz", kI8, {}).input("b", kF32, {2});
  float_bias.node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"});
  check_fails(float_bias, ErrorCode::kInvalidArgument, "input 8 (the bias) is f32");
}
