// ONNX operators the importer composes from other carve ops (activations, logic, Mean,
// CastLike, the composed reductions, layout and normalization ops, EyeLike, Hardmax, Mod,
// Clip with bounds computed at run time, DynamicQuantizeLinear, LayerNormalization's
// Mean/InvStdDev, the NLL and softmax cross-entropy losses), ArgMax/ArgMin/GatherElements and
// the indexing ops (GatherND, Scatter*, TopK, Einsum, Compress, MaxUnpool, ReverseSequence,
// MaxPool's Indices, pools over 3-D inputs or with dilations): one-node models
// (one_node_model.h), run through the reference interpreter and (with the CPU JIT) a
// Session, against values computed here in double.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "carve/onnx/import.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "one_node_model.h"
#include "test_support.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_close;
using carve::onnx_test::check_fails;
using carve::onnx_test::kBool;
using carve::onnx_test::kF32;
using carve::onnx_test::kI32;
using carve::onnx_test::kU8;
using carve::onnx_test::import;
using carve::onnx_test::Model;
using carve::onnx_test::run;
using carve::onnx_test::Values;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<float> kXs{-30.f, -3.f, -1.f, -0.25f, 0.f, 0.25f, 1.f, 3.f, 30.f};

HostTensor xs() { return HostTensor::from<float>(carve::ir::Shape{9}, kXs); }

// The unary activation `op` (with `attrs` applied) against `f` on kXs.
template <typename F>
void check_activation(const std::string& op, F f, void (*attrs)(Model&) = nullptr, double atol = 1e-6) {
  Model m(13);
  m.input("x", kF32, {9}).node(op, {"x"});
  if (attrs) attrs(m);
  Values expected;
  for (float x : kXs) expected.push_back(f(static_cast<double>(x)));
  check_close(m, {xs()}, expected, 1e-5, atol);
}

}  // namespace

TEST_CASE("onnx/ops/activations") {
  check_activation("Elu", [](double x) { return x < 0 ? 0.5 * (std::exp(x) - 1) : x; },
                   [](Model& m) { m.f("alpha", 0.5f); });
  check_activation("Selu", [](double x) {
    const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
    return x > 0 ? g * x : g * (a * std::exp(x) - a);
  });
  check_activation("Celu", [](double x) { return std::max(0.0, x) + std::min(0.0, 2.0 * (std::exp(x / 2.0) - 1)); },
                   [](Model& m) { m.f("alpha", 2.f); });
  check_activation("ThresholdedRelu", [](double x) { return x > 1.0 ? x : 0.0; });
  // Softplus keeps its relative accuracy where exp(x) is below f32's epsilon:
  // softplus(-30) = 9.4e-14 (log(1 + exp(x)) computed naively would be 0), so no atol.
  check_activation("Softplus", [](double x) { return std::log1p(std::exp(x)); }, nullptr, 0.0);
  check_activation("Mish", [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, nullptr, 0.0);
  check_activation("Softsign", [](double x) { return x / (1 + std::abs(x)); });
  check_activation("Shrink", [](double x) { return x < -1 ? x + 0.5 : x > 1 ? x - 0.5 : 0.0; },
                   [](Model& m) { m.f("lambd", 1.f).f("bias", 0.5f); });
  check_activation("Sign", [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; });

  SUBCASE("Sign on integers and NaN") {
    Model m(13);
    m.input("x", kI32, {3}).node("Sign", {"x"});
    check_close(m, {HostTensor::from<int32_t>(carve::ir::Shape{3}, {-7, 0, 9})}, {-1, 0, 1});
    Model f(13);
    f.input("x", kF32, {1}).node("Sign", {"x"});
    check_close(f, {HostTensor::from<float>(carve::ir::Shape{1}, {NAN})}, {kNaN});
  }
  SUBCASE("float-only activations reject integers naming the node and dtype") {
    Model m(13);
    m.input("x", kI32, {3}).node("Elu", {"x"});
    check_fails(m, ErrorCode::kUnsupported, "i32");
  }
  SUBCASE("opset 6 imports ops unchanged since, and rejects others") {
    Model m(6);
    m.input("x", kF32, {9}).node("Selu", {"x"});
    Values expected;
    for (float x : kXs) expected.push_back(x > 0 ? 1.0507009873554805 * x : 1.0507009873554805 * 1.6732632423543772 * (std::exp(x) - 1));
    check_close(m, {xs()}, expected);
    Model add(6);
    add.input("a", kF32, {2}).input("b", kF32, {2}).node("Add", {"a", "b"});
    check_fails(add, ErrorCode::kUnsupported, "opset 6");
  }
}

TEST_CASE("onnx/ops/gelu_at_opset_20_and_the_opset_range") {
  for (const char* approximate : {"none", "tanh"}) {
    CAPTURE(approximate);
    Model m(20);
    m.input("x", kF32, {9}).node("Gelu", {"x"}).s("approximate", approximate);
    Values expected;
    for (float x : kXs) {
      const double tanh_form = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
      expected.push_back(std::string(approximate) == "tanh" ? tanh_form : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
    }
    check_close(m, {xs()}, expected);
  }
  Model bad(20);
  bad.input("x", kF32, {9}).node("Gelu", {"x"}).s("approximate", "sigmoid");
  check_fails(bad, ErrorCode::kInvalidArgument, "approximate='sigmoid'");
  // Opset 21 imports; 22 is past what carve knows.
  Model relu21(21);
  relu21.input("x", kF32, {9}).node("Relu", {"x"});
  Values relu;
  for (float x : kXs) relu.push_back(x > 0 ? x : 0);
  check_close(relu21, {xs()}, relu);
  Model relu22(22);
  relu22.input("x", kF32, {9}).node("Relu", {"x"});
  auto r = carve::onnx_test::import(relu22);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kUnsupported);
  CHECK(r.status().message().find("opset 22") != std::string::npos);
}

TEST_CASE("onnx/ops/logic") {
  const auto bools = [](std::vector<bool> v) { return HostTensor::from<bool>(carve::ir::Shape{4}, v); };
  Model x(13);
  x.input("a", kBool, {4}).input("b", kBool, {4}).node("Xor", {"a", "b"});
  check_close(x, {bools({false, false, true, true}), bools({false, true, false, true})}, {0, 1, 1, 0});

  const HostTensor special = HostTensor::from<float>(carve::ir::Shape{5}, {1.f, NAN, INFINITY, -INFINITY, -2.f});
  Model nan(13);
  nan.input("x", kF32, {5}).node("IsNaN", {"x"});
  check_close(nan, {special}, {0, 1, 0, 0, 0});
  Model inf(13);
  inf.input("x", kF32, {5}).node("IsInf", {"x"});
  check_close(inf, {special}, {0, 0, 1, 1, 0});
  Model pos(13);
  pos.input("x", kF32, {5}).node("IsInf", {"x"}).i("detect_negative", 0);
  check_close(pos, {special}, {0, 0, 1, 0, 0});
  Model neg(13);
  neg.input("x", kF32, {5}).node("IsInf", {"x"}).i("detect_positive", 0);
  check_close(neg, {special}, {0, 0, 0, 1, 0});
  Model none(13);
  none.input("x", kF32, {5}).node("IsInf", {"x"}).i("detect_positive", 0).i("detect_negative", 0);
  check_close(none, {special}, {0, 0, 0, 0, 0});

  Model bad(13);
  bad.input("a", kF32, {4}).input("b", kBool, {4}).node("Xor", {"a", "b"});
  check_fails(bad, ErrorCode::kInvalidArgument, "f32");
}

TEST_CASE("onnx/ops/mean_and_cast_like") {
  Model m(13);
  m.input("a", kF32, {2, 2}).input("b", kF32, {2}).input("c", kF32, {1}).node("Mean", {"a", "b", "c"});
  check_close(m,
              {HostTensor::from<float>(carve::ir::Shape{2, 2}, {1, 2, 3, 4}),
               HostTensor::from<float>(carve::ir::Shape{2}, {10, 20}), HostTensor::from<float>(carve::ir::Shape{1}, {4})},
              {5, 26.0 / 3, 17.0 / 3, 28.0 / 3});
  Model c(15);
  c.input("x", kF32, {3}).input("like", kI32, {1}).node("CastLike", {"x", "like"});
  auto results = run(c, {HostTensor::from<float>(carve::ir::Shape{3}, {1.75f, -2.5f, 7.f}),
                         HostTensor::from<int32_t>(carve::ir::Shape{1}, {0})});
  for (const Values& r : results) CHECK(r == Values{1, -2, 7});
  auto imported = import(c);
  REQUIRE(imported.ok());
  CHECK(imported->graph.value(imported->graph.outputs[0]).type.dtype == carve::ir::DType::kI32);
}

TEST_CASE("onnx/ops/reductions") {
  // x [2, 3] = {{1, -2, 3}, {-4, 5, -6}}
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 3}, {1, -2, 3, -4, 5, -6});
  const auto reduce = [&](const std::string& op, int64_t opset, bool keepdims, const Values& expected) {
    Model m(opset);
    m.input("x", kF32, {2, 3});
    if (opset >= 18) {
      m.int64_init("axes", {1}).node(op, {"x", "axes"});
    } else {
      m.node(op, {"x"}).ints("axes", {1});
    }
    m.i("keepdims", keepdims);
    check_close(m, {x}, expected);
    auto imported = import(m);
    REQUIRE(imported.ok());
    const auto& shape = imported->graph.value(imported->graph.outputs[0]).type.shape;
    CHECK(shape == (keepdims ? carve::ir::Shape{2, 1} : carve::ir::Shape{2}));
  };
  for (int64_t opset : {13, 18}) {
    reduce("ReduceL1", opset, true, {6, 15});
    reduce("ReduceL2", opset, false, {std::sqrt(14.0), std::sqrt(77.0)});
    reduce("ReduceSumSquare", opset, true, {14, 77});
    reduce("ReduceLogSumExp", opset, false,
           {std::log(std::exp(1) + std::exp(-2) + std::exp(3)), std::log(std::exp(-4) + std::exp(5) + std::exp(-6))});
  }
  SUBCASE("ReduceLogSum") {
    Model m(13);
    m.input("x", kF32, {2, 2}).node("ReduceLogSum", {"x"}).ints("axes", {0}).i("keepdims", 0);
    check_close(m, {HostTensor::from<float>(carve::ir::Shape{2, 2}, {1, 2, 3, 4})}, {std::log(4.0), std::log(6.0)});
  }
  SUBCASE("ReduceLogSumExp shifts by the maximum and keeps infinities") {
    Model m(13);
    m.input("x", kF32, {3, 2}).node("ReduceLogSumExp", {"x"}).ints("axes", {1}).i("keepdims", 0);
    check_close(m, {HostTensor::from<float>(carve::ir::Shape{3, 2}, {1000, 1000, -INFINITY, -INFINITY, INFINITY, 1})},
                {1000 + std::log(2.0), -kInf, kInf});
  }
  SUBCASE("ReduceMin on integers does not overflow") {
    Model m(13);
    m.input("x", kI32, {3}).node("ReduceMin", {"x"}).i("keepdims", 0);
    check_close(m, {HostTensor::from<int32_t>(carve::ir::Shape{3}, {0, std::numeric_limits<int32_t>::min(), 5})},
                {static_cast<double>(std::numeric_limits<int32_t>::min())}, 0, 0);
    Model u(13);
    u.input("x", kU8, {3}).node("ReduceMin", {"x"}).i("keepdims", 0);
    check_close(u, {HostTensor::from<uint8_t>(carve::ir::Shape{3}, {7, 0, 255})}, {0}, 0, 0);
  }
  SUBCASE("noop_with_empty_axes reduces over no axes") {
    Model m(18);
    m.input("x", kF32, {2, 3}).node("ReduceSumSquare", {"x"}).i("noop_with_empty_axes", 1);
    check_close(m, {x}, {1, 4, 9, 16, 25, 36});
  }
  SUBCASE("float-only reductions reject integers naming the node and dtype") {
    Model m(13);
    m.input("x", kI32, {2, 3}).node("ReduceL2", {"x"});
    check_fails(m, ErrorCode::kUnsupported, "i32");
  }
  SUBCASE("ReduceProd: axes as attribute and input, integers, all axes") {
    for (int64_t opset : {13, 18}) reduce("ReduceProd", opset, false, {-6, 120});
    Model m(13);
    m.input("x", kI32, {2, 3}).node("ReduceProd", {"x"}).i("keepdims", 0);
    check_close(m, {HostTensor::from<int32_t>(carve::ir::Shape{2, 3}, {1, -2, 3, -4, 5, -6})}, {-720}, 0, 0);
    Model b(13);
    b.input("x", kBool, {2}).node("ReduceProd", {"x"});
    check_fails(b, ErrorCode::kUnsupported, "bool");
  }
}

TEST_CASE("onnx/ops/depth_space") {
  // x [1, 8, 1, 2] holds its flat index; blocksize 2.
  std::vector<float> iota(16);
  for (size_t k = 0; k < iota.size(); ++k) iota[k] = static_cast<float>(k);
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{1, 8, 1, 2}, iota);
  const auto depth_to_space = [](bool dcr) {
    // out[0, c, h * 2 + i, w * 2 + j] = x[0, channel(c, i, j), h, w] with c < 2, H = 1, W = 2.
    Values out(16);
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 2; ++i)
        for (int w = 0; w < 2; ++w)
          for (int j = 0; j < 2; ++j) {
            const int channel = dcr ? (i * 2 + j) * 2 + c : c * 4 + i * 2 + j;
            out[static_cast<size_t>((c * 2 + i) * 4 + w * 2 + j)] = channel * 2 + w;
          }
    return out;
  };
  for (bool dcr : {true, false}) {
    Model m(13);
    m.input("x", kF32, {1, 8, 1, 2}).node("DepthToSpace", {"x"}).i("blocksize", 2).s("mode", dcr ? "DCR" : "CRD");
    check_close(m, {x}, depth_to_space(dcr), 0, 0);
  }
  // SpaceToDepth inverts DepthToSpace in DCR mode.
  Model s(13);
  s.input("x", kF32, {1, 2, 2, 4}).node("SpaceToDepth", {"x"}).i("blocksize", 2);
  const Values dcr = depth_to_space(true);
  check_close(s, {HostTensor::from<float>(carve::ir::Shape{1, 2, 2, 4}, std::vector<float>(dcr.begin(), dcr.end()))},
              Values(iota.begin(), iota.end()), 0, 0);

  Model bad(13);
  bad.input("x", kF32, {1, 6, 1, 2}).node("DepthToSpace", {"x"}).i("blocksize", 2);
  check_fails(bad, ErrorCode::kInvalidArgument, "multiple of blocksize");
}

TEST_CASE("onnx/ops/eye_like_and_hardmax") {
  Model e(13);
  e.input("x", kF32, {2, 3}).node("EyeLike", {"x"}).i("k", 1).i("dtype", ::onnx::TensorProto::INT32);
  auto imported = import(e);
  REQUIRE(imported.ok());
  CHECK(imported->graph.nodes.size() <= 1);  // a constant (and at most the output's identity)
  check_close(e, {HostTensor::from<float>(carve::ir::Shape{2, 3}, std::vector<float>(6, 0.f))}, {0, 1, 0, 0, 0, 1}, 0, 0);

  // Ties go to the first maximum.
  const HostTensor h = HostTensor::from<float>(carve::ir::Shape{2, 2, 2}, {3, 3, 1, 2, 5, 0, 5, 9});
  Model last(13);
  last.input("x", kF32, {2, 2, 2}).node("Hardmax", {"x"});
  check_close(last, {h}, {1, 0, 0, 1, 1, 0, 0, 1}, 0, 0);
  Model middle(13);
  middle.input("x", kF32, {2, 2, 2}).node("Hardmax", {"x"}).i("axis", 1);
  check_close(middle, {h}, {1, 1, 0, 0, 1, 0, 0, 1}, 0, 0);
  // Before opset 13 the axis flattens: axis 1 covers the last 4 elements of each row.
  Model flat(11);
  flat.input("x", kF32, {2, 2, 2}).node("Hardmax", {"x"}).i("axis", 1);
  check_close(flat, {h}, {1, 0, 0, 0, 0, 0, 0, 1}, 0, 0);
}

TEST_CASE("onnx/ops/normalization") {
  // x [1, 3, 2, 2] (N, C, H, W).
  const std::vector<float> v{1, 2, 3, 5, -1, 0, 4, 2, 7, 7, 8, 6};
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{1, 3, 2, 2}, v);
  const auto normalise = [&](int c, double eps, bool eps_on_std) {
    double mean = 0, var = 0;
    for (int k = 0; k < 4; ++k) mean += v[static_cast<size_t>(c * 4 + k)] / 4.0;
    for (int k = 0; k < 4; ++k) var += std::pow(v[static_cast<size_t>(c * 4 + k)] - mean, 2) / 4.0;
    Values out;
    for (int k = 0; k < 4; ++k)
      out.push_back((v[static_cast<size_t>(c * 4 + k)] - mean) / (eps_on_std ? std::sqrt(var) + eps : std::sqrt(var + eps)));
    return out;
  };
  SUBCASE("InstanceNormalization") {
    Model m(6);
    m.input("x", kF32, {1, 3, 2, 2}).input("s", kF32, {3}).input("b", kF32, {3}).node("InstanceNormalization", {"x", "s", "b"});
    m.f("epsilon", 0.01f);
    const Values scale{2, -1, 0.5}, bias{0, 3, -1};
    Values expected;
    for (int c = 0; c < 3; ++c)
      for (double y : normalise(c, 0.01, false)) expected.push_back(y * scale[static_cast<size_t>(c)] + bias[static_cast<size_t>(c)]);
    check_close(m, {x, HostTensor::from<float>(carve::ir::Shape{3}, {2, -1, 0.5}), HostTensor::from<float>(carve::ir::Shape{3}, {0, 3, -1})},
                expected);
  }
  SUBCASE("MeanVarianceNormalization over H, W") {
    Model m(13);
    m.input("x", kF32, {1, 3, 2, 2}).node("MeanVarianceNormalization", {"x"}).ints("axes", {2, 3});
    Values expected;
    for (int c = 0; c < 3; ++c)
      for (double y : normalise(c, 1e-9, true)) expected.push_back(y);
    check_close(m, {x}, expected);
  }
  SUBCASE("LRN sums squares over a channel window") {
    for (int64_t size : {2, 3}) {
      Model m(13);
      m.input("x", kF32, {1, 3, 2, 2}).node("LRN", {"x"}).i("size", size).f("alpha", 0.5f).f("beta", 0.75f).f("bias", 2.f);
      Values expected;
      for (int c = 0; c < 3; ++c)
        for (int k = 0; k < 4; ++k) {
          double sum = 0;
          for (int64_t j = c - (size - 1) / 2; j <= c + size / 2; ++j)
            if (j >= 0 && j < 3) sum += std::pow(v[static_cast<size_t>(j * 4 + k)], 2);
          expected.push_back(v[static_cast<size_t>(c * 4 + k)] / std::pow(2.0 + 0.5 / static_cast<double>(size) * sum, 0.75));
        }
      check_close(m, {x}, expected);
    }
  }
  SUBCASE("InstanceNormalization with a wrong scale shape names the node") {
    Model m(13);
    m.input("x", kF32, {1, 3, 2, 2}).input("s", kF32, {2}).input("b", kF32, {3}).node("InstanceNormalization", {"x", "s", "b"});
    check_fails(m, ErrorCode::kInvalidArgument, "scale and bias");
  }
}

TEST_CASE("onnx/ops/dropout_mask") {
  // Inference: the identity, and the mask (when read) all true. Training with ratio 0 is
  // the same; with ratio 0.5 it is random: rejected naming the node.
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 3}, {1.f, -2.f, 3.f, 0.f, 5.f, NAN});
  Model m(13);
  m.input("x", kF32, {2, 3}).node("Dropout", {"x"}, 2);
  check_close(m, {x}, {1, -2, 3, 0, 5, kNaN});
  auto imported = import(m);
  REQUIRE_MESSAGE(imported.ok(), imported.status().to_string());
  const carve::ir::Value* mask = imported->graph.find_value("y1");
  REQUIRE(mask != nullptr);
  CHECK(mask->type == carve::ir::TensorType{carve::ir::DType::kBool, carve::ir::Shape{2, 3}});
  REQUIRE(mask->data);
  CHECK(std::all_of(mask->data->begin(), mask->data->end(), [](uint8_t b) { return b == 1; }));
  auto training = [](float ratio) {
    Model t(13);
    t.input("x", kF32, {2, 3});
    auto* r = t.g().add_initializer();
    r->set_name("ratio");
    r->set_data_type(::onnx::TensorProto::FLOAT);
    r->add_float_data(ratio);
    auto* mode = t.g().add_initializer();
    mode->set_name("mode");
    mode->set_data_type(::onnx::TensorProto::BOOL);
    mode->add_int32_data(1);
    t.node("Dropout", {"x", "ratio", "mode"}, 2);
    return t;
  };
  CHECK(import(training(0.f)).ok());
  check_fails(training(0.5f), ErrorCode::kUnsupported, "random");
}

TEST_CASE("onnx/ops/pad_edge_and_reflect") {
  // x = [[1 2 3 4], [5 6 7 8]] padded by 1 row after and 2 columns before, 1 after, as
  // numpy.pad's 'edge' and 'reflect' do.
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto pad = [](const std::string& mode, const std::vector<int64_t>& pads) {
    Model m(13);
    m.input("x", kF32, {2, 4}).int64_init("pads", pads).node("Pad", {"x", "pads"}).s("mode", mode);
    return m;
  };
  check_close(pad("edge", {0, 2, 1, 1}), {x}, {1, 1, 1, 2, 3, 4, 4, 5, 5, 5, 6, 7, 8, 8, 5, 5, 5, 6, 7, 8, 8});
  check_close(pad("reflect", {0, 2, 1, 1}), {x}, {3, 2, 1, 2, 3, 4, 3, 7, 6, 5, 6, 7, 8, 7, 3, 2, 1, 2, 3, 4, 3});
  // reflect needs pads below the axis' size (2 rows: at most 1)
  check_fails(pad("reflect", {2, 0, 0, 0}), ErrorCode::kInvalidArgument, "reflect pads 2 and 0 on axis 0 of size 2");
  check_fails(pad("wrap", {0, 1, 0, 1}), ErrorCode::kUnsupported, "mode='wrap'");
}

TEST_CASE("onnx/ops/conv_transpose") {
  // Against a direct scatter loop: y[n, g*M+m, i*s - p + a*d, j*s - p + b*d] += x[n, g*C+c, i, j]
  // * w[g*C+c, m, a, b], for groups, strides, pads, output_padding, dilations and a bias,
  // with the weights a constant (folded) and a graph input (flipped at run time).
  struct Form {
    int64_t groups, stride, pad, out_pad, dilation;
  };
  const int64_t N = 1, C = 4, H = 3, W = 4, M = 3, K = 3;
  for (Form f : {Form{1, 1, 0, 0, 1}, Form{2, 2, 1, 1, 1}, Form{1, 3, 2, 0, 2}, Form{2, 2, 0, 1, 1}}) {
    for (bool weights_input : {false, true}) {
      CAPTURE(f.groups);
      CAPTURE(f.stride);
      CAPTURE(weights_input);
      const int64_t cg = C / f.groups, ext = (K - 1) * f.dilation + 1;
      const int64_t OH = f.stride * (H - 1) + f.out_pad + ext - 2 * f.pad, OW = f.stride * (W - 1) + f.out_pad + ext - 2 * f.pad;
      std::vector<float> xv(static_cast<size_t>(N * C * H * W)), wv(static_cast<size_t>(C * M * K * K)), bv(static_cast<size_t>(M * f.groups));
      for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7) % 11) - 5.f;
      for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>((i * 5) % 9) * 0.25f - 1.f;
      for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i) * 0.5f;
      Values expected(static_cast<size_t>(N * M * f.groups * OH * OW), 0.0);
      for (int64_t oc = 0; oc < M * f.groups; ++oc)
        for (int64_t p = 0; p < OH * OW; ++p) expected[static_cast<size_t>(oc * OH * OW + p)] = bv[static_cast<size_t>(oc)];
      for (int64_t c = 0; c < C; ++c)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t i = 0; i < H; ++i)
            for (int64_t j = 0; j < W; ++j)
              for (int64_t a = 0; a < K; ++a)
                for (int64_t b = 0; b < K; ++b) {
                  const int64_t oi = i * f.stride - f.pad + a * f.dilation, oj = j * f.stride - f.pad + b * f.dilation;
                  if (oi < 0 || oi >= OH || oj < 0 || oj >= OW) continue;
                  const int64_t oc = (c / cg) * M + m;
                  expected[static_cast<size_t>((oc * OH + oi) * OW + oj)] +=
                      static_cast<double>(xv[static_cast<size_t>((c * H + i) * W + j)]) *
                      wv[static_cast<size_t>(((c * M + m) * K + a) * K + b)];
                }
      Model m(13);
      m.input("x", kF32, {N, C, H, W});
      std::vector<HostTensor> inputs{HostTensor::from<float>(carve::ir::Shape{N, C, H, W}, xv)};
      if (weights_input) {
        m.input("w", kF32, {C, M, K, K});
        inputs.push_back(HostTensor::from<float>(carve::ir::Shape{C, M, K, K}, wv));
      } else {
        auto* t = m.g().add_initializer();
        t->set_name("w");
        t->set_data_type(::onnx::TensorProto::FLOAT);
        for (int64_t d : {C, M, K, K}) t->add_dims(d);
        for (float v : wv) t->add_float_data(v);
      }
      auto* bias = m.g().add_initializer();
      bias->set_name("bias");
      bias->set_data_type(::onnx::TensorProto::FLOAT);
      bias->add_dims(M * f.groups);
      for (float v : bv) bias->add_float_data(v);
      m.node("ConvTranspose", {"x", "w", "bias"})
          .i("group", f.groups)
          .ints("strides", {f.stride, f.stride})
          .ints("pads", {f.pad, f.pad, f.pad, f.pad})
          .ints("output_padding", {f.out_pad, f.out_pad})
          .ints("dilations", {f.dilation, f.dilation});
      check_close(m, inputs, expected);
    }
  }
  Model bad(13);
  bad.input("x", kF32, {1, 4, 3, 3}).input("w", kF32, {3, 2, 3, 3}).node("ConvTranspose", {"x", "w"});
  check_fails(bad, ErrorCode::kInvalidArgument, "weights [3, ...] for 4 input channels");
}

TEST_CASE("onnx/ops/conv_transpose_3d") {
  // Against the direct scatter loop over depth, height and width: y[n, g*M+m, o] +=
  // x[n, g*C+c, i] * w[g*C+c, m, a] at o = i*s - pad_begin + a*d per axis, with a bias;
  // per-axis strides, pads, output_padding and dilations, groups, and an output_shape one
  // larger than the natural size (a negative end pad: a zero slice at the end).
  struct Form {
    int64_t groups;
    std::array<int64_t, 3> stride, pad_begin, pad_end, out_pad, dilation;
    bool output_shape;
  };
  const int64_t C = 2, M = 2;
  const std::array<int64_t, 3> in{2, 3, 2}, k{2, 3, 2};
  for (const Form& f : {Form{1, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false},
                        Form{2, {2, 1, 2}, {1, 0, 1}, {0, 1, 1}, {1, 0, 1}, {1, 2, 1}, false},
                        Form{1, {3, 2, 1}, {2, 1, 0}, {1, 0, 0}, {0, 1, 0}, {2, 1, 1}, false},
                        Form{1, {2, 1, 1}, {0, 0, 0}, {-1, -1, -1}, {0, 0, 0}, {1, 1, 1}, true}}) {
    CAPTURE(f.groups);
    CAPTURE(f.output_shape);
    std::array<int64_t, 3> out{};
    for (size_t a = 0; a < 3; ++a)
      out[a] = f.stride[a] * (in[a] - 1) + f.out_pad[a] + (k[a] - 1) * f.dilation[a] + 1 - f.pad_begin[a] - f.pad_end[a];
    const int64_t cg = C / f.groups, oc_count = M * f.groups, in_size = in[0] * in[1] * in[2], out_size = out[0] * out[1] * out[2];
    std::vector<float> xv(static_cast<size_t>(C * in_size)), wv(static_cast<size_t>(C * M * k[0] * k[1] * k[2])), bv;
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7) % 11) - 5.f;
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>((i * 5) % 9) * 0.25f - 1.f;
    for (int64_t i = 0; i < oc_count; ++i) bv.push_back(static_cast<float>(i) * 0.5f + 1);
    Values expected(static_cast<size_t>(oc_count * out_size));
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = bv[i / static_cast<size_t>(out_size)];
    for (int64_t c = 0; c < C; ++c)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < in_size; ++i)
          for (int64_t a = 0; a < k[0] * k[1] * k[2]; ++a) {
            const std::array<int64_t, 3> ii{i / (in[1] * in[2]), i / in[2] % in[1], i % in[2]};
            const std::array<int64_t, 3> aa{a / (k[1] * k[2]), a / k[2] % k[1], a % k[2]};
            int64_t o = 0;
            bool inside = true;
            for (size_t d = 0; d < 3; ++d) {
              const int64_t od = ii[d] * f.stride[d] - f.pad_begin[d] + aa[d] * f.dilation[d];
              inside = inside && od >= 0 && od < out[d];
              o = o * out[d] + od;
            }
            if (!inside) continue;
            const int64_t oc = (c / cg) * M + m;
            expected[static_cast<size_t>(oc * out_size + o)] +=
                static_cast<double>(xv[static_cast<size_t>(c * in_size + i)]) * wv[static_cast<size_t>((c * M + m) * k[0] * k[1] * k[2] + a)];
          }
    Model m(13);
    m.input("x", kF32, {1, C, in[0], in[1], in[2]}).input("w", kF32, {C, M, k[0], k[1], k[2]}).float_init("b", {oc_count}, bv);
    m.node("ConvTranspose", {"x", "w", "b"}).i("group", f.groups).ints("strides", {f.stride.begin(), f.stride.end()});
    m.ints("output_padding", {f.out_pad.begin(), f.out_pad.end()}).ints("dilations", {f.dilation.begin(), f.dilation.end()});
    if (f.output_shape) {
      m.ints("output_shape", {out.begin(), out.end()});
    } else {
      m.ints("pads", {f.pad_begin[0], f.pad_begin[1], f.pad_begin[2], f.pad_end[0], f.pad_end[1], f.pad_end[2]});
    }
    check_close(m, {HostTensor::from<float>(carve::ir::Shape{1, C, in[0], in[1], in[2]}, xv),
                    HostTensor::from<float>(carve::ir::Shape{C, M, k[0], k[1], k[2]}, wv)},
                expected);
  }
  Model bad(13);
  bad.input("x", kF32, {1, 2, 2, 2, 2}).input("w", kF32, {2, 2, 2, 2, 2}).node("ConvTranspose", {"x", "w"});
  bad.ints("strides", {1, 1});
  check_fails(bad, ErrorCode::kInvalidArgument, "attribute 'strides' has 2 values for 3 spatial axes");
  Model rank6(13);
  rank6.input("x", kF32, {1, 1, 2, 2, 2, 2}).input("w", kF32, {1, 1, 2, 2, 2, 2}).node("ConvTranspose", {"x", "w"});
  check_fails(rank6, ErrorCode::kUnsupported, "weights of rank 6");
  Model empty(13);
  empty.input("x", kF32, {1, 2, 0, 2, 2}).input("w", kF32, {2, 1, 2, 2, 2}).node("ConvTranspose", {"x", "w"});
  check_fails(empty, ErrorCode::kUnsupported, "input f32[1,2,0,2,2] is empty");
}

TEST_CASE("onnx/ops/resize") {
  // [[1 2] [3 4]] upsampled 2x: nearest (a gather) and linear half_pixel (a matmul per
  // axis), the values of ONNX's own examples; sizes instead of scales; what is rejected.
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  auto resize = [](const std::string& mode, const std::vector<float>& scales, const std::vector<int64_t>& sizes = {}) {
    Model m(13);
    m.input("x", kF32, {1, 1, 2, 2});
    auto* s = m.g().add_initializer();
    s->set_name("scales");
    s->set_data_type(::onnx::TensorProto::FLOAT);
    s->add_dims(static_cast<int64_t>(scales.size()));
    for (float v : scales) s->add_float_data(v);
    if (sizes.empty()) {
      m.node("Resize", {"x", "", "scales"}).s("mode", mode);
    } else {
      m.int64_init("sizes", sizes).node("Resize", {"x", "", "", "sizes"}).s("mode", mode);
    }
    return m;
  };
  check_close(resize("nearest", {1, 1, 2, 2}), {x}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  check_close(resize("linear", {1, 1, 2, 2}), {x},
              {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  check_close(resize("linear", {}, {1, 1, 4, 4}), {x},
              {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  check_close(resize("nearest", {1, 1, 1, 1.5}), {x}, {1, 1, 2, 3, 3, 4});
  check_fails(resize("linear", {2, 2}), ErrorCode::kInvalidArgument, "one value per axis");
}

TEST_CASE("onnx/ops/cumsum") {
  // [[1 2 3] [4 5 6]] along axis 1 and 0, exclusive and reverse (ONNX's examples); an inf
  // reaches only the sums after it; ints stay exact.
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  auto cumsum = [](int64_t axis, int64_t exclusive, int64_t reverse, int type = kF32) {
    Model m(14);
    m.input("x", type, {2, 3}).int64_init("axis", {axis}).node("CumSum", {"x", "axis"}).i("exclusive", exclusive).i("reverse", reverse);
    return m;
  };
  check_close(cumsum(1, 0, 0), {x}, {1, 3, 6, 4, 9, 15});
  check_close(cumsum(0, 0, 0), {x}, {1, 2, 3, 5, 7, 9});
  check_close(cumsum(-1, 1, 0), {x}, {0, 1, 3, 0, 4, 9});
  check_close(cumsum(1, 0, 1), {x}, {6, 5, 3, 15, 11, 6});
  check_close(cumsum(1, 1, 1), {x}, {5, 3, 0, 11, 6, 0});
  const HostTensor inf = HostTensor::from<float>(carve::ir::Shape{2, 3}, {1, INFINITY, 3, 4, 5, 6});
  check_close(cumsum(1, 0, 0), {inf}, {1, kInf, kInf, 4, 9, 15});
  const HostTensor big = HostTensor::from<int64_t>(carve::ir::Shape{2, 3}, {int64_t{1} << 60, 1, 2, 3, 4, 5});
  check_close(cumsum(1, 0, 0, ::onnx::TensorProto::INT64), {big},
              {std::ldexp(1.0, 60), std::ldexp(1.0, 60) + 1, std::ldexp(1.0, 60) + 3, 3, 7, 12}, 0, 0);
  check_fails(cumsum(2, 0, 0), ErrorCode::kInvalidArgument, "axis");
}

TEST_CASE("onnx/ops/one_hot") {
  // indices [1, -1, 5] with depth 3 and values [off, on] = [-2, 7]: -1 counts from the end,
  // 5 is outside (all off); the new axis at the end and at the front.
  const HostTensor indices = HostTensor::from<int64_t>(carve::ir::Shape{3}, {1, -1, 5});
  const HostTensor values = HostTensor::from<float>(carve::ir::Shape{2}, {-2, 7});
  auto one_hot = [](int64_t axis) {
    Model m(11);
    m.input("indices", ::onnx::TensorProto::INT64, {3}).int64_init("depth", {3}).input("values", kF32, {2});
    m.node("OneHot", {"indices", "depth", "values"}).i("axis", axis);
    return m;
  };
  check_close(one_hot(-1), {indices, values}, {-2, 7, -2, -2, -2, 7, -2, -2, -2});
  check_close(one_hot(0), {indices, values}, {-2, -2, -2, 7, -2, -2, -2, 7, -2});
  check_fails(one_hot(2), ErrorCode::kInvalidArgument, "axis");
}

TEST_CASE("onnx/ops/bit_shift") {
  constexpr int kU64 = ::onnx::TensorProto::UINT64;
  const auto shift = [](int elem_type, const std::string& direction) {
    Model m(11);
    m.input("x", elem_type, {4}).input("y", elem_type, {4}).node("BitShift", {"x", "y"}).s("direction", direction);
    return m;
  };
  const HostTensor x = HostTensor::from<uint8_t>(carve::ir::Shape{4}, {1, 2, 255, 16});
  const HostTensor y = HostTensor::from<uint8_t>(carve::ir::Shape{4}, {1, 7, 1, 9});
  // bits shifted out are gone; a shift by the width or more gives 0
  check_close(shift(kU8, "LEFT"), {x, y}, {2, 0, 254, 0}, 0, 0);
  check_close(shift(kU8, "RIGHT"), {x, y}, {0, 0, 127, 0}, 0, 0);
  const HostTensor x64 = HostTensor::from<uint64_t>(carve::ir::Shape{4}, {1, 3, UINT64_MAX, 5});
  const HostTensor y64 = HostTensor::from<uint64_t>(carve::ir::Shape{4}, {63, 62, 60, 64});
  check_close(shift(kU64, "LEFT"), {x64, y64}, {0x1p63, 0x1p63 + 0x1p62, 0x1p64 - 0x1p60, 0}, 0, 0);
  check_close(shift(kU64, "RIGHT"), {x64, y64}, {0, 0, 15, 0}, 0, 0);
  check_fails(shift(kI32, "LEFT"), ErrorCode::kInvalidArgument, "unsigned");
  check_fails(shift(kU8, "UP"), ErrorCode::kInvalidArgument, "direction");
}

// Initializers of the 16-bit and wide unsigned types, from ONNX's typed fields (int32_data
// for 16-bit, uint64_data for u32/u64) and from raw_data: the exact bits.
TEST_CASE("onnx/import/int16_uint16_uint32_uint64_initializers") {
  struct Expect {
    int elem_type;
    carve::ir::DType dtype;
    std::vector<uint8_t> bytes;
  };
  const uint64_t big = (uint64_t{1} << 63) + 3;
  std::vector<uint8_t> big_bytes(8);
  std::memcpy(big_bytes.data(), &big, 8);
  const std::vector<Expect> cases = {
      {::onnx::TensorProto::INT16, carve::ir::DType::kI16, {0xfe, 0xff}},  // -2
      {::onnx::TensorProto::UINT16, carve::ir::DType::kU16, {0x40, 0x9c}},  // 40000
      {::onnx::TensorProto::UINT32, carve::ir::DType::kU32, {0x00, 0x5e, 0xd0, 0xb2}},  // 3000000000
      {::onnx::TensorProto::UINT64, carve::ir::DType::kU64, big_bytes},
  };
  const int64_t typed_values[] = {-2, 40000};
  const uint64_t wide_values[] = {3000000000u, big};
  for (size_t k = 0; k < cases.size(); ++k) {
    const Expect& e = cases[k];
    for (bool raw : {false, true}) {
      CAPTURE(carve::ir::dtype_name(e.dtype));
      CAPTURE(raw);
      Model m(13);
      m.input("x", e.elem_type, {1});
      auto* c = m.g().add_initializer();
      c->set_name("c");
      c->set_data_type(e.elem_type);
      c->add_dims(1);
      if (raw) {
        c->set_raw_data(std::string(e.bytes.begin(), e.bytes.end()));
      } else if (k < 2) {
        c->add_int32_data(static_cast<int32_t>(typed_values[k]));
      } else {
        c->add_uint64_data(wide_values[k - 2]);
      }
      m.node("Max", {"x", "c"});
      auto imported = import(m);
      REQUIRE_MESSAGE(imported.ok(), imported.status().to_string());
      const carve::ir::Value* v = imported->graph.find_value("c");
      REQUIRE(v != nullptr);
      CHECK(v->type.dtype == e.dtype);
      REQUIRE(v->data);
      CHECK(*v->data == e.bytes);
    }
  }
}

TEST_CASE("onnx/ops/mod") {
  const auto i32 = [](std::vector<int32_t> v) {
    return HostTensor::from<int32_t>(carve::ir::Shape{static_cast<int64_t>(v.size())}, v);
  };
  SUBCASE("fmod=0 on integers takes the divisor's sign (Python %), x % 0 = 0") {
    Model m(13);
    m.input("a", kI32, {7}).input("b", kI32, {7}).node("Mod", {"a", "b"});
    check_close(m, {i32({7, -7, 7, -7, 6, -6, 5}), i32({3, 3, -3, -3, 3, -3, 0})}, {1, 2, -2, -1, 0, 0, 0});
    Model u(13);
    u.input("a", kU8, {3}).input("b", kU8, {3}).node("Mod", {"a", "b"});
    check_close(u, {HostTensor::from<uint8_t>(carve::ir::Shape{3}, {255, 7, 9}),
                    HostTensor::from<uint8_t>(carve::ir::Shape{3}, {16, 7, 10})},
                {15, 0, 9});
  }
  SUBCASE("fmod=1 is C fmod: the dividend's sign, exact on floats, broadcasting") {
    Model m(13);
    m.input("a", kF32, {2, 3}).input("b", kF32, {3}).node("Mod", {"a", "b"}).i("fmod", 1);
    // 1e30 fmod 3 is exact (x - trunc(x / y) * y would be off by far more than 3)
    check_close(m, {HostTensor::from<float>(carve::ir::Shape{2, 3}, {5.5f, -5.5f, 1e30f, 7.f, -0.25f, 3.f}),
                    HostTensor::from<float>(carve::ir::Shape{3}, {2.f, -2.f, 3.f})},
                {1.5, -1.5, std::fmod(double{1e30f}, 3.0), 1, -0.25, 0}, 0, 0);
    Model i(13);
    i.input("a", kI32, {4}).input("b", kI32, {4}).node("Mod", {"a", "b"}).i("fmod", 1);
    check_close(i, {i32({7, -7, 7, -7}), i32({3, 3, -3, -3})}, {1, -1, 1, -1});
  }
  SUBCASE("fmod=0 on floats and other fmod values are rejected naming the node") {
    Model m(13);
    m.input("a", kF32, {2}).input("b", kF32, {2}).node("Mod", {"a", "b"});
    check_fails(m, ErrorCode::kInvalidArgument, "fmod = 0 on f32");
    Model bad(13);
    bad.input("a", kI32, {2}).input("b", kI32, {2}).node("Mod", {"a", "b"}).i("fmod", 2);
    check_fails(bad, ErrorCode::kInvalidArgument, "fmod = 2");
  }
}

TEST_CASE("onnx/ops/clip_with_runtime_bounds") {
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{5}, {-3.f, -0.5f, 0.5f, 3.f, NAN});
  const auto scalar = [](float v) { return HostTensor::from<float>(carve::ir::Shape{1}, {v}); };
  SUBCASE("both bounds are graph inputs; NaN stays NaN") {
    Model m(13);
    m.input("x", kF32, {5}).input("lo", kF32, {1}).input("hi", kF32, {1}).node("Clip", {"x", "lo", "hi"});
    check_close(m, {x, scalar(-1.f), scalar(1.f)}, {-1, -0.5, 0.5, 1, kNaN});
    // min > max gives max everywhere (ONNX), NaN aside
    check_close(m, {x, scalar(2.f), scalar(1.f)}, {1, 1, 1, 1, kNaN});
  }
  SUBCASE("only max, min omitted") {
    Model m(13);
    m.input("x", kF32, {5}).input("hi", kF32, {1}).node("Clip", {"x", "", "hi"});
    check_close(m, {x, scalar(0.f)}, {-3, -0.5, 0, 0, kNaN});
  }
  SUBCASE("a bound that is not a scalar is rejected naming the node") {
    Model m(13);
    m.input("x", kF32, {5}).input("lo", kF32, {5}).node("Clip", {"x", "lo"});
    check_fails(m, ErrorCode::kInvalidArgument, "min must be a scalar");
  }
}

TEST_CASE("onnx/ops/dynamic_quantize_linear") {
  // ONNX's own example: scale = (2 - (-3)) / 255, zero point = round(3 / scale) = 153.
  Model m(13);
  m.input("x", kF32, {6}).node("DynamicQuantizeLinear", {"x"}, 3);
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{6}, {0.f, 2.f, -3.f, -2.5f, 1.34f, 0.5f});
  check_close(m, {x}, {153, 255, 0, 26, 221, 179}, 0, 0);
  auto model = import(m);
  REQUIRE(model.ok());
  auto all = carve::reference::run_reference(model->graph, {x});
  REQUIRE(all.ok());
  REQUIRE(all->size() == 3);
  CHECK((*all)[0].type.dtype == carve::ir::DType::kU8);
  CHECK((*all)[1].to_doubles()[0] == static_cast<double>(5.f / 255.f));
  CHECK((*all)[2].as<uint8_t>() == std::vector<uint8_t>{153});
  Model bad(13);
  bad.input("x", kI32, {6}).node("DynamicQuantizeLinear", {"x"}, 3);
  check_fails(bad, ErrorCode::kUnsupported, "i32");
}

TEST_CASE("onnx/ops/arg_max_and_arg_min") {
  // [2, 3]: a tie in row 0, a NaN in row 1 (NaN wins, as in numpy).
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 3}, {4, 1, 4, 2, NAN, 9});
  for (int64_t opset : {1, 7, 11, 12, 13}) {
    CAPTURE(opset);
    Model m(opset);
    m.input("x", kF32, {2, 3}).node("ArgMax", {"x"}).i("axis", 1).i("keepdims", 0);
    check_close(m, {x}, {0, 1}, 0, 0);
    Model first(opset);  // defaults: axis 0, keepdims 1
    first.input("x", kF32, {2, 3}).node("ArgMin", {"x"});
    check_close(first, {x}, {1, 1, 0}, 0, 0);
  }
  Model last(12);
  last.input("x", kF32, {2, 3}).node("ArgMax", {"x"}).i("axis", -1).i("select_last_index", 1);
  check_close(last, {x}, {2, 1}, 0, 0);
  auto imported = import(last);
  REQUIRE(imported.ok());
  CHECK(imported->graph.value(imported->graph.outputs[0]).type ==
        carve::ir::TensorType{carve::ir::DType::kI64, carve::ir::Shape{2, 1}});
  Model ints(13);
  ints.input("x", kI32, {4}).node("ArgMin", {"x"}).i("select_last_index", 1);
  check_close(ints, {HostTensor::from<int32_t>(carve::ir::Shape{4}, {5, -2, 7, -2})}, {3}, 0, 0);
  Model bad_axis(13);
  bad_axis.input("x", kF32, {2, 3}).node("ArgMax", {"x"}).i("axis", 2);
  check_fails(bad_axis, ErrorCode::kInvalidArgument, "axis");
}

TEST_CASE("onnx/ops/gather_elements") {
  const HostTensor data = HostTensor::from<float>(carve::ir::Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  Model m(13);
  m.input("x", kF32, {2, 3}).input("i", ::onnx::TensorProto::INT64, {2, 2}).node("GatherElements", {"x", "i"}).i("axis", 1);
  check_close(m, {data, HostTensor::from<int64_t>(carve::ir::Shape{2, 2}, {-1, 0, 1, -2})}, {3, 1, 5, 5}, 0, 0);
  Model axis0(11);
  axis0.input("x", kF32, {2, 3}).input("i", kI32, {1, 3}).node("GatherElements", {"x", "i"});
  check_close(axis0, {data, HostTensor::from<int32_t>(carve::ir::Shape{1, 3}, {1, 0, -1})}, {4, 2, 6}, 0, 0);
  // A known index out of range names the node at import.
  Model known(13);
  known.input("x", kF32, {3}).int64_init("i", {0, 3}).node("GatherElements", {"x", "i"});
  check_fails(known, ErrorCode::kOutOfBounds, "index 3 outside [-3, 3)");
}

TEST_CASE("onnx/ops/layer_normalization_mean_and_inv_std_dev") {
  // x [2, 2, 2], normalised over the last two axes: Mean and InvStdDev are [2, 1, 1].
  const std::vector<float> v{1, 2, 4, 5, -3, 0, 0, 7};
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 2, 2}, v);
  const HostTensor scale = HostTensor::from<float>(carve::ir::Shape{2, 2}, {1, 2, -1, 0.5});
  Values mean, inv, y;
  for (size_t r = 0; r < 2; ++r) {
    double m = 0, var = 0;
    for (size_t k = 0; k < 4; ++k) m += v[r * 4 + k] / 4.0;
    for (size_t k = 0; k < 4; ++k) var += std::pow(v[r * 4 + k] - m, 2) / 4.0;
    mean.push_back(m);
    inv.push_back(1 / std::sqrt(var + 0.1));
    const Values s{1, 2, -1, 0.5};
    for (size_t k = 0; k < 4; ++k) y.push_back((v[r * 4 + k] - m) * inv.back() * s[k]);
  }
  for (size_t result : {0, 1, 2}) {
    CAPTURE(result);
    Model m(17);
    m.input("x", kF32, {2, 2, 2}).input("s", kF32, {2, 2}).node("LayerNormalization", {"x", "s"}, 3);
    m.i("axis", -2).f("epsilon", 0.1f);
    m.result = result;
    check_close(m, {x, scale}, result == 0 ? y : result == 1 ? mean : inv, 1e-5, 1e-6);
    auto imported = import(m);
    REQUIRE(imported.ok());
    const carve::ir::Shape want = result == 0 ? carve::ir::Shape{2, 2, 2} : carve::ir::Shape{2, 1, 1};
    CHECK(imported->graph.value(imported->graph.outputs[result]).type.shape == want);
  }
  Model stash(17);
  stash.input("x", kF32, {2, 2, 2}).input("s", kF32, {2, 2}).node("LayerNormalization", {"x", "s"}, 3).i("axis", -2).i("stash_type", 11);
  check_fails(stash, ErrorCode::kUnsupported, "stash_type 11");
}

TEST_CASE("onnx/ops/losses") {
  // x [2, 3] log-probabilities, targets {2, ignored}, weights per class.
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 3}, {-1, -2, -3, -0.5, -1.5, -2.5});
  const HostTensor t = HostTensor::from<int64_t>(carve::ir::Shape{2}, {2, 1});
  const HostTensor w = HostTensor::from<float>(carve::ir::Shape{3}, {1, 2, 4});
  auto nll = [&](const std::string& reduction, bool weighted) {
    Model m(13);
    m.input("x", kF32, {2, 3}).input("t", ::onnx::TensorProto::INT64, {2});
    if (weighted) m.input("w", kF32, {3});
    m.node("NegativeLogLikelihoodLoss", weighted ? std::vector<std::string>{"x", "t", "w"} : std::vector<std::string>{"x", "t"});
    m.s("reduction", reduction).i("ignore_index", 1);
    return m;
  };
  check_close(nll("none", true), {x, t, w}, {12, 0});
  check_close(nll("sum", true), {x, t, w}, {12});
  check_close(nll("mean", true), {x, t, w}, {3});  // 12 / 4: the ignored target weighs 0
  check_close(nll("mean", false), {x, t}, {3});    // 3 / 1
  Model sce(13);
  sce.input("s", kF32, {2, 3}).input("t", ::onnx::TensorProto::INT64, {2}).node("SoftmaxCrossEntropyLoss", {"s", "t"}, 2);
  sce.result = 1;  // log_prob
  const HostTensor scores = HostTensor::from<float>(carve::ir::Shape{2, 3}, {1, 2, 3, 0, 0, 0});
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  check_close(sce, {scores, t}, {1 - lse, 2 - lse, 3 - lse, -std::log(3.0), -std::log(3.0), -std::log(3.0)});
  sce.result = 0;
  check_close(sce, {scores, t}, {((lse - 3) + std::log(3.0)) / 2});
  Model bad(13);
  bad.input("x", kF32, {2, 3}).input("t", ::onnx::TensorProto::INT64, {2}).node("NegativeLogLikelihoodLoss", {"x", "t"}).s("reduction", "max");
  check_fails(bad, ErrorCode::kInvalidArgument, "reduction 'max'");
}

namespace {

constexpr int kI64 = ::onnx::TensorProto::INT64;
constexpr int kF64 = ::onnx::TensorProto::DOUBLE;

HostTensor f32s(std::vector<int64_t> dims, std::vector<float> v) {
  return HostTensor::from<float>(carve::ir::Shape(std::move(dims)), v);
}
HostTensor i64s(std::vector<int64_t> dims, std::vector<int64_t> v) {
  return HostTensor::from<int64_t>(carve::ir::Shape(std::move(dims)), v);
}

}  // namespace

TEST_CASE("onnx/ops/gather_nd") {
  const HostTensor data = f32s({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Model m(11);
  m.input("x", kF32, {2, 2, 2}).input("i", kI64, {2, 2}).node("GatherND", {"x", "i"});
  check_close(m, {data, i64s({2, 2}, {0, 1, -1, 0})}, {2, 3, 4, 5}, 0, 0);
  Model batched(12);
  batched.input("x", kF32, {2, 2, 2}).input("i", kI64, {2, 1}).node("GatherND", {"x", "i"}).i("batch_dims", 1);
  check_close(batched, {data, i64s({2, 1}, {1, 0})}, {2, 3, 4, 5}, 0, 0);
  Model known(13);
  known.input("x", kF32, {2, 2}).int64_init("i", {0, 3}).node("GatherND", {"x", "i"});
  check_fails(known, ErrorCode::kOutOfBounds, "index 3 outside [-2, 2)");
}

TEST_CASE("onnx/ops/scatter_nd_scatter_elements_and_scatter") {
  const HostTensor data = f32s({2, 3}, {1, 2, 3, 4, 5, 6});
  Model nd(11);
  nd.input("x", kF32, {2, 3}).input("i", kI64, {1, 1}).input("u", kF32, {1, 3}).node("ScatterND", {"x", "i", "u"});
  check_close(nd, {data, i64s({1, 1}, {-1}), f32s({1, 3}, {7, 8, 9})}, {1, 2, 3, 7, 8, 9}, 0, 0);
  Model nd_add(16);  // a duplicate index adds twice
  nd_add.input("x", kF32, {2, 3}).input("i", kI64, {2, 2}).input("u", kF32, {2}).node("ScatterND", {"x", "i", "u"}).s("reduction", "add");
  check_close(nd_add, {data, i64s({2, 2}, {0, 2, 0, -1}), f32s({2}, {10, 100})}, {1, 2, 113, 4, 5, 6}, 0, 0);
  // ScatterElements axis 1 with a negative index; the default axis 0 with mul; Scatter (opset 9).
  Model el(13);
  el.input("x", kF32, {2, 3}).input("i", kI64, {2, 2}).input("u", kF32, {2, 2}).node("ScatterElements", {"x", "i", "u"}).i("axis", 1);
  check_close(el, {data, i64s({2, 2}, {-1, 0, 1, 1}), f32s({2, 2}, {10, 20, 30, 40})}, {20, 2, 10, 4, 40, 6}, 0, 0);
  Model el_mul(16);
  el_mul.input("x", kF32, {2, 3}).input("i", kI32, {1, 3}).input("u", kF32, {1, 3}).node("ScatterElements", {"x", "i", "u"}).s("reduction", "mul");
  check_close(el_mul, {data, HostTensor::from<int32_t>(carve::ir::Shape{1, 3}, {1, 0, 1}), f32s({1, 3}, {2, 3, 4})},
              {1, 6, 3, 8, 5, 24}, 0, 0);
  Model old(9);
  old.input("x", kF32, {2, 3}).input("i", kI64, {1, 2}).input("u", kF32, {1, 2}).node("Scatter", {"x", "i", "u"}).i("axis", -1);
  check_close(old, {data, i64s({1, 2}, {2, 0}), f32s({1, 2}, {9, 8})}, {8, 2, 9, 4, 5, 6}, 0, 0);
  Model bad(16);
  bad.input("x", kF32, {2, 3}).input("i", kI64, {1, 1}).input("u", kF32, {1, 3}).node("ScatterND", {"x", "i", "u"}).s("reduction", "sum");
  check_fails(bad, ErrorCode::kInvalidArgument, "reduction 'sum'");
  Model known(13);
  known.input("x", kF32, {3}).int64_init("i", {3}).input("u", kF32, {1}).node("ScatterElements", {"x", "i", "u"});
  check_fails(known, ErrorCode::kOutOfBounds, "index 3 outside [-3, 3)");
}

TEST_CASE("onnx/ops/top_k") {
  const HostTensor x = f32s({2, 4}, {3, 1, 3, 2, 5, 6, 5, 4});
  Model attr_k(1);  // k as an attribute; values then indices
  attr_k.input("x", kF32, {2, 4}).node("TopK", {"x"}, 2).i("k", 2);
  check_close(attr_k, {x}, {3, 3, 6, 5}, 0, 0);
  attr_k.result = 1;
  check_close(attr_k, {x}, {0, 2, 1, 0}, 0, 0);
  Model input_k(11);
  input_k.input("x", kF32, {2, 4}).int64_init("k", {3}).node("TopK", {"x", "k"}, 2).i("largest", 0).i("axis", -1);
  check_close(input_k, {x}, {1, 2, 3, 4, 5, 5}, 0, 0);
  input_k.result = 1;
  check_close(input_k, {x}, {1, 3, 0, 3, 0, 2}, 0, 0);
  Model runtime_k(11);
  runtime_k.input("x", kF32, {2, 4}).input("k", kI64, {1}).node("TopK", {"x", "k"}, 2);
  check_fails(runtime_k, ErrorCode::kUnsupported, "must be a constant");
  Model too_many(11);
  too_many.input("x", kF32, {2, 4}).int64_init("k", {5}).node("TopK", {"x", "k"}, 2);
  check_fails(too_many, ErrorCode::kInvalidArgument, "K 5 outside [0, 4]");
}

TEST_CASE("onnx/ops/einsum") {
  const HostTensor a = HostTensor::from<double>(carve::ir::Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  const HostTensor b = HostTensor::from<double>(carve::ir::Shape{3, 2}, {1, -1, 2, 0, 0.5, 3});
  auto one = [](const std::string& eq, std::vector<int64_t> dims) {
    Model m(12);
    m.input("a", kF64, dims).node("Einsum", {"a"}).s("equation", eq);
    return m;
  };
  auto two = [](const std::string& eq, std::vector<int64_t> da, std::vector<int64_t> db) {
    Model m(12);
    m.input("a", kF64, da).input("b", kF64, db).node("Einsum", {"a", "b"}).s("equation", eq);
    return m;
  };
  check_close(one("ij->ji", {2, 3}), {a}, {1, 4, 2, 5, 3, 6}, 0, 0);
  check_close(one("ij->i", {2, 3}), {a}, {6, 15}, 0, 0);
  check_close(one("ij", {2, 3}), {a}, {1, 2, 3, 4, 5, 6}, 0, 0);  // implicit: sorted letters
  check_close(one("ji", {2, 3}), {a}, {1, 4, 2, 5, 3, 6}, 0, 0);
  check_close(one("ij->", {2, 3}), {a}, {21}, 0, 0);
  // Diagonals: of [2, 2, 2] per batch, and a trace.
  const HostTensor cube = HostTensor::from<double>(carve::ir::Shape{2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  check_close(one("... i i -> ... i", {2, 2, 2}), {cube}, {1, 4, 5, 8}, 0, 0);
  check_close(one("bii->b", {2, 2, 2}), {cube}, {5, 13}, 0, 0);
  check_close(one("iii", {2, 2, 2}), {cube}, {9}, 0, 0);  // i appears thrice: not in the output
  // Contractions: matmul, implicit output, inner product, outer product, batch matmul.
  check_close(two("ij,jk->ik", {2, 3}, {3, 2}), {a, b}, {6.5, 8, 17, 14}, 1e-12, 0);
  check_close(two("ij,jk", {2, 3}, {3, 2}), {a, b}, {6.5, 8, 17, 14}, 1e-12, 0);
  check_close(two("ij,kj->ik", {2, 3}, {2, 3}), {a, a}, {14, 32, 32, 77}, 1e-12, 0);
  check_close(two("i,i", {3}, {3}), {HostTensor::from<double>(carve::ir::Shape{3}, {1, 2, 3}),
                                      HostTensor::from<double>(carve::ir::Shape{3}, {4, 5, 6})}, {32}, 1e-12, 0);
  check_close(two("i,j->ji", {2}, {3}), {HostTensor::from<double>(carve::ir::Shape{2}, {1, 2}),
                                         HostTensor::from<double>(carve::ir::Shape{3}, {4, 5, 6})}, {4, 8, 5, 10, 6, 12}, 0, 0);
  check_close(two("bij,bjk->bik", {2, 2, 2}, {2, 2, 1}), {cube, HostTensor::from<double>(carve::ir::Shape{2, 2, 1}, {1, -1, 2, 0.5})},
              {-1, -1, 13, 18}, 1e-12, 0);
  // ij,ij->i sums only the shared j; "ij,jk,kl->il" folds three operands.
  check_close(two("ij,ij->i", {2, 3}, {2, 3}), {a, a}, {14, 77}, 1e-12, 0);
  Model three(12);
  three.input("a", kF64, {2, 3}).input("b", kF64, {3, 2}).input("c", kF64, {2, 1}).node("Einsum", {"a", "b", "c"})
      .s("equation", "ij,jk,kl->il");
  check_close(three, {a, b, HostTensor::from<double>(carve::ir::Shape{2, 1}, {1, 2})}, {22.5, 45}, 1e-12, 0);
  check_fails(two("ij,jk->ik", {2, 3}, {4, 2}), ErrorCode::kUnsupported, "label 'j' has sizes 3 and 4");
  check_fails(one("ij->k", {2, 3}), ErrorCode::kInvalidArgument, "output label 'k' is in no operand");
  check_fails(one("ijk", {2, 3}), ErrorCode::kInvalidArgument, "does not match an operand of rank 2");
}

TEST_CASE("onnx/ops/max_pool_indices") {
  // Two channels (the second the first negated) of 3x3; Indices are flat into x.
  const std::vector<float> plane{1, 5, 2, 7, 3, 7, 0, 9, 9};
  std::vector<float> v = plane;
  for (float p : plane) v.push_back(-p);
  const HostTensor x = f32s({1, 2, 3, 3}, v);
  Model dense(12);  // 2x2 windows, stride 1: ties go to the first maximum in the window
  dense.input("x", kF32, {1, 2, 3, 3}).node("MaxPool", {"x"}, 2).ints("kernel_shape", {2, 2});
  check_close(dense, {x}, {7, 7, 9, 9, -1, -2, 0, -3}, 0, 0);
  dense.result = 1;
  check_close(dense, {x}, {3, 5, 7, 7, 9, 11, 15, 13}, 0, 0);
  // Padding: slots outside x never win; storage_order 1 counts down the columns.
  for (int64_t order : {0, 1}) {
    Model padded(12);
    padded.input("x", kF32, {1, 2, 3, 3}).node("MaxPool", {"x"}, 2).ints("kernel_shape", {2, 2}).ints("strides", {2, 2})
        .ints("pads", {1, 1, 0, 0}).i("storage_order", order);
    padded.result = 1;
    check_close(padded, {x}, order == 0 ? Values{0, 1, 3, 7, 9, 11, 15, 13} : Values{0, 3, 1, 5, 9, 15, 11, 13}, 0, 0);
  }
}

TEST_CASE("onnx/ops/pools_dilated_and_3d") {
  std::vector<float> v(16);
  std::iota(v.begin(), v.end(), 0.0f);
  Model dilated(12);  // 2x2 windows with dilation 2 over 4x4: values and Indices
  dilated.input("x", kF32, {1, 1, 4, 4}).node("MaxPool", {"x"}, 2).ints("kernel_shape", {2, 2}).ints("dilations", {2, 2});
  check_close(dilated, {f32s({1, 1, 4, 4}, v)}, {10, 11, 14, 15}, 0, 0);
  dilated.result = 1;
  check_close(dilated, {f32s({1, 1, 4, 4}, v)}, {10, 11, 14, 15}, 0, 0);
  const HostTensor x3 = f32s({1, 1, 2, 2, 2}, {3, -1, 7, 2, 0, 5, -4, 1});
  Model planes(12);  // 3-D: one 2x2 window per depth
  planes.input("x", kF32, {1, 1, 2, 2, 2}).node("MaxPool", {"x"}, 2).ints("kernel_shape", {1, 2, 2});
  check_close(planes, {x3}, {7, 5}, 0, 0);
  planes.result = 1;
  check_close(planes, {x3}, {2, 5}, 0, 0);
  Model padded(12);  // 2x2x2 windows, depth padded by 1 at the start: the pad slots never win
  padded.input("x", kF32, {1, 1, 2, 2, 2}).node("MaxPool", {"x"}, 2).ints("kernel_shape", {2, 2, 2})
      .ints("pads", {1, 0, 0, 0, 0, 0});
  check_close(padded, {x3}, {7, 7}, 0, 0);
  padded.result = 1;
  check_close(padded, {x3}, {2, 2}, 0, 0);
  for (int64_t include : {0, 1}) {  // AveragePool 3-D: pad slots count only with count_include_pad
    Model average(12);
    average.input("x", kF32, {1, 1, 2, 2, 2}).node("AveragePool", {"x"}).ints("kernel_shape", {2, 2, 2})
        .ints("pads", {1, 0, 0, 0, 0, 0}).i("count_include_pad", include);
    check_close(average, {x3}, {include ? 1.375 : 2.75, 1.625}, 1e-6, 0);
  }
  Model average_plain(12);
  average_plain.input("x", kF32, {1, 1, 2, 2, 2}).node("AveragePool", {"x"}).ints("kernel_shape", {1, 2, 2});
  check_close(average_plain, {x3}, {2.75, 0.5}, 1e-6, 0);
  Model huge(12);  // attributes that would overflow the size arithmetic are refused
  huge.input("x", kF32, {1, 1, 2, 2, 2}).node("MaxPool", {"x"}).ints("kernel_shape", {1, 1, 1})
      .ints("pads", {int64_t{1} << 40, 0, 0, 0, 0, 0});
  check_fails(huge, ErrorCode::kInvalidArgument, "pads in [0, 2^31]");
  Model ceil(12);  // 1-D with ceil_mode: the last window is cut by the end
  ceil.input("x", kF32, {1, 1, 6}).node("MaxPool", {"x"}).ints("kernel_shape", {2}).ints("strides", {2}).ints("dilations", {2})
      .i("ceil_mode", 1);
  check_close(ceil, {f32s({1, 1, 6}, {1, 9, 3, 4, 2, 8})}, {3, 3, 2}, 0, 0);
}

TEST_CASE("onnx/ops/compress") {
  const HostTensor x = f32s({2, 3}, {1, 2, 3, 4, 5, 6});
  Model cols(11);  // a condition shorter than the axis drops the rest
  cols.input("x", kF32, {2, 3}).bool_init("c", {0, 1}).node("Compress", {"x", "c"}).i("axis", -1);
  check_close(cols, {x}, {2, 5}, 0, 0);
  Model flat(11);
  flat.input("x", kF32, {2, 3}).bool_init("c", {1, 0, 0, 1, 1}).node("Compress", {"x", "c"});
  check_close(flat, {x}, {1, 4, 5}, 0, 0);
  Model none(11);
  none.input("x", kF32, {2, 3}).bool_init("c", {0, 0}).node("Compress", {"x", "c"}).i("axis", 0);
  auto imported = import(none);
  REQUIRE(imported.ok());
  CHECK(imported->graph.value(imported->graph.outputs[0]).type.shape == carve::ir::Shape{0, 3});
  Model long_condition(11);
  long_condition.input("x", kF32, {2, 3}).bool_init("c", {1, 1, 1}).node("Compress", {"x", "c"}).i("axis", 0);
  check_fails(long_condition, ErrorCode::kInvalidArgument, "condition has 3 entries, axis 0 only 2");
  Model runtime(11);
  runtime.input("x", kF32, {2, 3}).input("c", kBool, {3}).node("Compress", {"x", "c"}).i("axis", 1);
  check_fails(runtime, ErrorCode::kUnsupported, "must be a constant");
}

TEST_CASE("onnx/ops/max_unpool") {
  // 2x2 values back into 4x4 at MaxPool-style flat indices; the rest zeros.
  Model m(11);
  m.input("x", kF32, {1, 1, 2, 2}).input("i", kI64, {1, 1, 2, 2}).node("MaxUnpool", {"x", "i"})
      .ints("kernel_shape", {2, 2}).ints("strides", {2, 2});
  Values expected(16, 0.0);
  expected[5] = 1;
  expected[7] = 2;
  expected[8] = 3;
  expected[15] = 4;
  check_close(m, {f32s({1, 1, 2, 2}, {1, 2, 3, 4}), i64s({1, 1, 2, 2}, {5, 7, 8, 15})}, expected, 0, 0);
  Model same(11);  // output_shape equal to the default
  same.input("x", kF32, {1, 1, 2, 2}).input("i", kI64, {1, 1, 2, 2}).int64_init("s", {1, 1, 4, 4})
      .node("MaxUnpool", {"x", "i", "s"}).ints("kernel_shape", {2, 2}).ints("strides", {2, 2});
  check_close(same, {f32s({1, 1, 2, 2}, {1, 2, 3, 4}), i64s({1, 1, 2, 2}, {5, 7, 8, 15})}, expected, 0, 0);
  Model wider(11);  // ONNX's example and ONNX Runtime place the values differently: refused
  wider.input("x", kF32, {1, 1, 2, 2}).input("i", kI64, {1, 1, 2, 2}).int64_init("s", {1, 1, 5, 5})
      .node("MaxUnpool", {"x", "i", "s"}).ints("kernel_shape", {2, 2}).ints("strides", {2, 2});
  check_fails(wider, ErrorCode::kUnsupported, "output_shape [1, 1, 5, 5] other than the default [1, 1, 4, 4]");
  Model big_stride(11);
  big_stride.input("x", kF32, {1, 1, 2, 2}).input("i", kI64, {1, 1, 2, 2}).node("MaxUnpool", {"x", "i"})
      .ints("kernel_shape", {2, 2}).ints("strides", {int64_t{1} << 62, 2});
  check_fails(big_stride, ErrorCode::kInvalidArgument, "strides entry 4611686018427387904 outside [1, 2^31]");
  Model known(11);  // I not of X's shape
  known.input("x", kF32, {1, 1, 1, 1}).int64_init("i", {4}).node("MaxUnpool", {"x", "i"}).ints("kernel_shape", {2, 2});
  check_fails(known, ErrorCode::kInvalidArgument, "I i64[1] must be int64 of X's shape");
}

TEST_CASE("onnx/ops/reverse_sequence") {
  // time 0, batch 1: column b reverses its first lens[b] rows.
  const HostTensor x = f32s({4, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32});
  Model m(10);
  m.input("x", kF32, {4, 3}).input("l", kI64, {3}).node("ReverseSequence", {"x", "l"});
  check_close(m, {x, i64s({3}, {4, 1, 2})}, {30, 1, 12, 20, 11, 2, 10, 21, 22, 0, 31, 32}, 0, 0);
  Model batch_first(10);  // batch 0, time 1
  batch_first.input("x", kF32, {4, 3}).input("l", kI64, {4}).node("ReverseSequence", {"x", "l"}).i("time_axis", 1).i("batch_axis", 0);
  check_close(batch_first, {x, i64s({4}, {3, 0, 2, 1})}, {2, 1, 0, 10, 11, 12, 21, 20, 22, 30, 31, 32}, 0, 0);
  Model known(10);
  known.input("x", kF32, {4, 3}).int64_init("l", {1, 5, 2}).node("ReverseSequence", {"x", "l"});
  check_fails(known, ErrorCode::kOutOfBounds, "sequence length 5 outside [0, 4]");
}
