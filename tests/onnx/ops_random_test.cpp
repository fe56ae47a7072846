// The random ops (ops_random.cpp): RandomUniform(Like), RandomNormal(Like) and Bernoulli.
// Checked: shapes and dtypes, ranges and rough moments (on fixed seeds, so no test can
// flake), same seed same values, a fresh key per import without a seed, and the same
// values whatever the Session's thread count.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "carve/reference/reference.h"
#include "one_node_model.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_fails;
using carve::onnx_test::import;
using carve::onnx_test::kF32;
using carve::onnx_test::kI32;
using carve::onnx_test::Model;
using carve::onnx_test::run;
using carve::onnx_test::Values;

namespace {

Model random_op(const std::string& op, const std::vector<int64_t>& shape) {
  Model m(15);
  m.node(op, {}).ints("shape", shape);
  return m;
}

double mean(const Values& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

double stddev(const Values& v) {
  const double m = mean(v);
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(v.size()));
}

// The values of `m`, checking the reference interpreter and the Session agree.
Values values(const Model& m, const std::vector<HostTensor>& inputs = {}, int threads = 0) {
  std::vector<Values> results = run(m, inputs, threads);
  for (const Values& r : results) CHECK(r == results[0]);
  return results[0];
}

}  // namespace

TEST_CASE("onnx/ops/random_uniform") {
  Model m = random_op("RandomUniform", {100, 100});
  m.f("low", -2.f).f("high", 3.f).f("seed", 7.f);
  auto imported = import(m);
  REQUIRE(imported.ok());
  const auto& type = imported->graph.value(imported->graph.outputs[0]).type;
  CHECK(type.dtype == carve::ir::DType::kF32);
  CHECK(type.shape == carve::ir::Shape{100, 100});
  const Values v = values(m);
  CHECK(*std::min_element(v.begin(), v.end()) >= -2.0);
  CHECK(*std::max_element(v.begin(), v.end()) < 3.0);
  CHECK(mean(v) == doctest::Approx(0.5).epsilon(0.1));
  CHECK(stddev(v) == doctest::Approx(5 / std::sqrt(12.0)).epsilon(0.02));
  // The same seed draws the same values; another seed others.
  CHECK(values(m) == v);
  Model other = random_op("RandomUniform", {100, 100});
  other.f("low", -2.f).f("high", 3.f).f("seed", 8.f);
  CHECK(values(other) != v);

  SUBCASE("without a seed each import draws afresh") {
    Model unseeded = random_op("RandomUniform", {64});
    CHECK(values(unseeded) != values(unseeded));
  }
  SUBCASE("dtype double") {
    Model d = random_op("RandomUniform", {3});
    d.i("dtype", ::onnx::TensorProto::DOUBLE);
    auto di = import(d);
    REQUIRE(di.ok());
    CHECK(di->graph.value(di->graph.outputs[0]).type.dtype == carve::ir::DType::kF64);
  }
  SUBCASE("like: the input's shape and dtype") {
    Model like(15);
    like.input("x", ::onnx::TensorProto::DOUBLE, {2, 5}).node("RandomUniformLike", {"x"}).f("seed", 1.f);
    auto li = import(like);
    REQUIRE(li.ok());
    const auto& lt = li->graph.value(li->graph.outputs[0]).type;
    CHECK(lt.dtype == carve::ir::DType::kF64);
    CHECK(lt.shape == carve::ir::Shape{2, 5});
    const Values lv = values(like, {HostTensor::from<double>(carve::ir::Shape{2, 5}, std::vector<double>(10, 9.0))});
    CHECK(std::all_of(lv.begin(), lv.end(), [](double x) { return x >= 0 && x < 1; }));
  }
  SUBCASE("bad attributes") {
    Model ints = random_op("RandomUniform", {3});
    ints.i("dtype", kI32);
    check_fails(ints, ErrorCode::kInvalidArgument, "dtype i32");
    check_fails(random_op("RandomUniform", {3, -1}), ErrorCode::kInvalidArgument, "negative dimension");
    Model reversed = random_op("RandomUniform", {3});
    reversed.f("low", 1.f).f("high", 0.f);
    check_fails(reversed, ErrorCode::kInvalidArgument, "low 1 and high 0");
    Model like_ints(15);
    like_ints.input("x", kI32, {2}).node("RandomUniformLike", {"x"});
    check_fails(like_ints, ErrorCode::kInvalidArgument, "dtype i32");
  }
}

TEST_CASE("onnx/ops/random_normal") {
  Model m = random_op("RandomNormal", {200, 100});
  m.f("mean", 1.f).f("scale", 2.f).f("seed", 3.f);
  const Values v = values(m);
  CHECK(v.size() == 20000);
  CHECK(mean(v) == doctest::Approx(1.0).epsilon(0.05));
  CHECK(stddev(v) == doctest::Approx(2.0).epsilon(0.03));
  // About 68 % within one scale of the mean.
  const auto within = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x - 1) < 2; });
  CHECK(static_cast<double>(within) / 20000 == doctest::Approx(0.6827).epsilon(0.02));
  CHECK(values(m) == v);

  Model like(15);
  like.input("x", kF32, {4, 3}).node("RandomNormalLike", {"x"}).f("seed", 3.f).i("dtype", ::onnx::TensorProto::DOUBLE);
  auto li = import(like);
  REQUIRE(li.ok());
  CHECK(li->graph.value(li->graph.outputs[0]).type == carve::ir::TensorType{carve::ir::DType::kF64, {4, 3}});

  Model negative = random_op("RandomNormal", {3});
  negative.f("scale", -1.f);
  check_fails(negative, ErrorCode::kInvalidArgument, "scale -1");
}

TEST_CASE("onnx/ops/bernoulli") {
  // Probabilities 0 and 1 are certain; 0.3 comes up about 30 % of the time.
  std::vector<float> p(3000, 0.3f);
  std::fill(p.begin(), p.begin() + 100, 0.f);
  std::fill(p.begin() + 100, p.begin() + 200, 1.f);
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{3000}, p);
  Model m(15);
  m.input("x", kF32, {3000}).node("Bernoulli", {"x"}).f("seed", 5.f);
  const Values v = values(m, {x});
  CHECK(std::all_of(v.begin(), v.begin() + 100, [](double y) { return y == 0; }));
  CHECK(std::all_of(v.begin() + 100, v.begin() + 200, [](double y) { return y == 1; }));
  CHECK(std::all_of(v.begin() + 200, v.end(), [](double y) { return y == 0 || y == 1; }));
  CHECK(mean(Values(v.begin() + 200, v.end())) == doctest::Approx(0.3).epsilon(0.1));

  SUBCASE("same seed, same values, whatever the thread count") {
    CHECK(values(m, {x}, 1) == v);
    CHECK(values(m, {x}, 4) == v);
  }
  SUBCASE("dtype") {
    Model ints(15);
    ints.input("x", kF32, {3000}).node("Bernoulli", {"x"}).f("seed", 5.f).i("dtype", kI32);
    auto imported = import(ints);
    REQUIRE(imported.ok());
    CHECK(imported->graph.value(imported->graph.outputs[0]).type.dtype == carve::ir::DType::kI32);
    CHECK(values(ints, {x}) == v);  // the same draws, as int32
  }
  SUBCASE("bad input") {
    Model ints(15);
    ints.input("x", kI32, {3}).node("Bernoulli", {"x"});
    check_fails(ints, ErrorCode::kInvalidArgument, "i32 input");
  }
}
