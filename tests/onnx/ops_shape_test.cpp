// Shape operators' edge cases (ops_shape.cpp): Reshape with allowzero=1 and a 0 in the
// shape, which makes an empty tensor, and empty tensors run through kernels.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <vector>

#include "carve/reference/reference.h"
#include "one_node_model.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_fails;
using carve::onnx_test::import;
using carve::onnx_test::kF32;
using carve::onnx_test::Model;
using carve::onnx_test::run;

namespace {

Model reshape(const std::vector<int64_t>& in, const std::vector<int64_t>& shape, int64_t allowzero) {
  Model m(14);
  m.input("x", kF32, in).int64_init("shape", shape).node("Reshape", {"x", "shape"}).i("allowzero", allowzero);
  return m;
}

}  // namespace

TEST_CASE("onnx/ops/reshape_allowzero") {
  // A literal 0: [0, 3, 4] -> [3, 4, 0], an empty tensor.
  Model m = reshape({0, 3, 4}, {3, 4, 0}, 1);
  auto imported = import(m);
  REQUIRE_MESSAGE(imported.ok(), imported.status().to_string());
  CHECK(imported->graph.value(imported->graph.outputs[0]).type.shape == carve::ir::Shape{3, 4, 0});
  for (const auto& values : run(m, {HostTensor::from<float>(carve::ir::Shape{0, 3, 4}, {})})) CHECK(values.empty());

  // Without allowzero the 0 copies the input's dim 2 (4): 48 elements from none.
  check_fails(reshape({0, 3, 4}, {3, 4, 0}, 0), ErrorCode::kShapeError, "48 elements");
  check_fails(reshape({0, 3, 4}, {-1, 0}, 1), ErrorCode::kInvalidArgument, "both 0 and -1");
  check_fails(reshape({2, 3}, {6, 0}, 1), ErrorCode::kShapeError, "6 elements");
  // allowzero=1 without a 0 reshapes as usual.
  Model plain = reshape({2, 3}, {3, 2}, 1);
  auto plain_imported = import(plain);
  REQUIRE(plain_imported.ok());
  CHECK(plain_imported->graph.value(plain_imported->graph.outputs[0]).type.shape == carve::ir::Shape{3, 2});
}

TEST_CASE("onnx/ops/empty_tensors_through_kernels") {
  // An empty input through elementwise ops and a reshape: the planner and the Session
  // give zero-size buffers, and the kernels write nothing.
  Model m(14);
  m.input("x", kF32, {0, 3}).node("Relu", {"x"});
  for (const auto& values : run(m, {HostTensor::from<float>(carve::ir::Shape{0, 3}, {})})) CHECK(values.empty());
  Model r = reshape({0, 3}, {3, 0}, 0);  // 0 copies the input's dim 1 (3): [3, 3] from none
  check_fails(r, ErrorCode::kShapeError, "9 elements");
  Model t(14);
  t.input("x", kF32, {0, 3}).node("Transpose", {"x"});
  for (const auto& values : run(t, {HostTensor::from<float>(carve::ir::Shape{0, 3}, {})})) CHECK(values.empty());
}
