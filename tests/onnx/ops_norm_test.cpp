// BatchNormalization in training mode (ops_norm.cpp): the output normalised with the
// batch's own moments and the running mean and variance, against values computed here.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <vector>

#include "carve/reference/reference.h"
#include "one_node_model.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_close;
using carve::onnx_test::check_fails;
using carve::onnx_test::kF32;
using carve::onnx_test::Model;
using carve::onnx_test::Values;

namespace {

// x [2, 2, 3]: channel c holds x[n][c][k] for n in 0..1, k in 0..2.
const std::vector<float> kX{1, 2, 3, -1, 0, 5, 4, 6, 8, 2, 2, 2};
const std::vector<float> kScale{2, 0.5f}, kBias{1, -1}, kMean{0.5f, -0.5f}, kVar{1, 4};
constexpr double kMomentum = 0.8, kEpsilon = 0.01;

Model training(int opset, int outputs) {
  Model m(opset);
  m.input("x", kF32, {2, 2, 3}).float_init("s", {2}, kScale).float_init("b", {2}, kBias);
  m.float_init("mean", {2}, kMean).float_init("var", {2}, kVar);
  m.node("BatchNormalization", {"x", "s", "b", "mean", "var"}, outputs);
  m.f("momentum", static_cast<float>(kMomentum)).f("epsilon", static_cast<float>(kEpsilon)).i("training_mode", 1);
  return m;
}

struct Expected {
  Values y, running_mean, running_var;
};

Expected expected() {
  Expected e;
  e.y.resize(kX.size());
  for (int c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 3; ++k) sum += kX[static_cast<size_t>(n * 6 + c * 3 + k)];
    const double mean = sum / 6;
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 3; ++k) sq += std::pow(kX[static_cast<size_t>(n * 6 + c * 3 + k)] - mean, 2);
    const double var = sq / 6;  // biased, as ONNX's reference computes it
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 3; ++k) {
        const auto i = static_cast<size_t>(n * 6 + c * 3 + k);
        e.y[i] = (kX[i] - mean) / std::sqrt(var + kEpsilon) * kScale[static_cast<size_t>(c)] + kBias[static_cast<size_t>(c)];
      }
    e.running_mean.push_back(kMean[static_cast<size_t>(c)] * kMomentum + mean * (1 - kMomentum));
    e.running_var.push_back(kVar[static_cast<size_t>(c)] * kMomentum + var * (1 - kMomentum));
  }
  return e;
}

}  // namespace

TEST_CASE("onnx/ops/batch_norm_training") {
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 2, 3}, kX);
  const Expected e = expected();
  Model m = training(15, 3);
  check_close(m, {x}, e.y);
  m.result = 1;
  check_close(m, {x}, e.running_mean);
  m.result = 2;
  check_close(m, {x}, e.running_var);
  // Only Y: still the batch's moments.
  check_close(training(15, 1), {x}, e.y);

  SUBCASE("bad forms") {
    Model inference = training(15, 3);
    inference.op->mutable_attribute(2)->set_i(0);  // training_mode
    check_fails(inference, ErrorCode::kInvalidArgument, "training_mode=0");
    Model odd = training(15, 1);
    odd.op->mutable_attribute(2)->set_i(2);
    check_fails(odd, ErrorCode::kInvalidArgument, "training_mode=2");
    check_fails(training(9, 3), ErrorCode::kUnsupported, "before opset 14");
  }
}
