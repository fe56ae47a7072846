// ONNX NonZero, Unique and NonMaxSuppression (onnx/src/ops_dynamic.cpp): one-node models
// run through the reference (outputs at their upper bound, the result packed first) and,
// with the CPU JIT, a Session (outputs at their actual extent); known inputs fold into
// constants already cut to the actual extent; omitted NMS inputs take ONNX's defaults.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "carve/onnx/import.h"
#include "carve/reference/reference.h"
#include "one_node_model.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_fails;
using carve::onnx_test::kF32;
using carve::onnx_test::import;
using carve::onnx_test::Model;
using carve::onnx_test::run;
using carve::onnx_test::Values;

namespace {

constexpr int kI64 = ::onnx::TensorProto::INT64;

// The reference's result starts with `expected` (zeros after it); the Session's, where
// there is one, is exactly `expected`.
void check_extent(const Model& m, const std::vector<HostTensor>& inputs, const Values& expected) {
  const std::vector<Values> results = run(m, inputs);
  const Values& ref = results.front();
  REQUIRE(ref.size() >= expected.size());
  CHECK(Values(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(expected.size())) == expected);
  for (size_t i = expected.size(); i < ref.size(); ++i) CHECK(ref[i] == 0);
  if (results.size() > 1) CHECK(results.back() == expected);
}

// The imported graph's output `i` is a constant of `shape`.
void check_folded(const Model& m, size_t i, const carve::ir::Shape& shape) {
  auto model = import(m);
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  const carve::ir::Value& v = model->graph.value(model->graph.outputs.at(i));
  CHECK(v.kind == carve::ir::ValueKind::kConstant);
  CHECK(v.type.shape == shape);
}

}  // namespace

TEST_CASE("onnx/ops/non_zero") {
  Model m(13);
  m.input("x", kF32, {2, 3}).node("NonZero", {"x"});
  check_extent(m, {HostTensor::from<float>({2, 3}, {0, 1, 0, 2, 0, 3})}, {0, 1, 1, 1, 0, 2});
  // A declared output size along the extent is the exporter's example, not checked.
  auto* declared = m.g().mutable_output(0)->mutable_type()->mutable_tensor_type();
  declared->set_elem_type(kI64);
  declared->mutable_shape()->add_dim()->set_dim_value(2);
  declared->mutable_shape()->add_dim()->set_dim_value(1);
  check_extent(m, {HostTensor::from<float>({2, 3}, {0, 1, 0, 2, 0, 3})}, {0, 1, 1, 1, 0, 2});
  declared->mutable_shape()->mutable_dim(0)->set_dim_value(3);  // the rank's dim is checked
  auto wrong = import(m);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().code() == ErrorCode::kShapeError);
  CHECK(wrong.status().message().find("onnx output 'y0'") != std::string::npos);
  Model known(13);
  known.float_init("c", {4}, {0, 5, 0, 7}).node("NonZero", {"c"});
  check_folded(known, 0, {1, 2});
}

TEST_CASE("onnx/ops/unique") {
  const HostTensor x = HostTensor::from<float>({6}, {2, 1, 1, 3, 4, 3});
  Model sorted(11);
  sorted.input("x", kF32, {6}).node("Unique", {"x"}, 4);
  check_extent(sorted, {x}, {1, 2, 3, 4});
  sorted.result = 3;
  check_extent(sorted, {x}, {2, 1, 2, 1});
  Model first_seen(11);
  first_seen.input("x", kF32, {6}).node("Unique", {"x"}, 4).i("sorted", 0);
  first_seen.result = 1;
  check_extent(first_seen, {x}, {0, 1, 3, 4});
  first_seen.result = 2;  // inverse_indices: static, one per element
  check_extent(first_seen, {x}, {0, 1, 1, 2, 3, 2});
  Model known(11);
  known.float_init("c", {2, 2}, {1, 1, 1, 1}).node("Unique", {"c"}, 4).i("axis", -1);
  check_folded(known, 0, {2, 1});
  check_folded(known, 2, {2});
}

TEST_CASE("onnx/ops/non_max_suppression") {
  const HostTensor boxes = HostTensor::from<float>({1, 3, 4}, {0, 0, 1, 1, 0, 0.1F, 1, 1.1F, 0, 10, 1, 11});
  const HostTensor scores = HostTensor::from<float>({1, 1, 3}, {0.9F, 0.95F, 0.5F});
  Model all(11);
  all.input("b", kF32, {1, 3, 4}).input("s", kF32, {1, 1, 3}).input("m", kI64, {1}).input("i", kF32, {1});
  all.node("NonMaxSuppression", {"b", "s", "m", "i"});
  check_extent(all, {boxes, scores, HostTensor::from<int64_t>({1}, {5}), HostTensor::from<float>({1}, {0.5F})},
               {0, 0, 1, 0, 0, 2});
  Model defaults(11);  // no max_output_boxes_per_class: none selected
  defaults.input("b", kF32, {1, 3, 4}).input("s", kF32, {1, 1, 3}).node("NonMaxSuppression", {"b", "s"});
  check_extent(defaults, {boxes, scores}, {});
  Model bad(11);
  bad.input("b", kF32, {1, 3, 4}).input("s", kF32, {1, 1, 3}).node("NonMaxSuppression", {"b", "s"}).i("center_point_box", 2);
  check_fails(bad, ErrorCode::kInvalidArgument, "center_point_box must be 0 or 1");
}
