// Reference interpreter: non_zero, unique and non_max_suppression (ir/extent.h): outputs
// at their upper bound holding the result packed at the actual extent, zeros after, and
// the extent; against ONNX's examples and values worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "reference_test_util.h"

namespace {

using namespace carve;
using namespace carve::reference;
using namespace carve::reference::testing;

using I64s = std::vector<int64_t>;

int64_t extent_of(const std::vector<HostTensor>& outs) { return outs.back().as<int64_t>().at(0); }

TEST_CASE("reference/non_zero gives coordinates packed at the count") {
  std::vector<HostTensor> outs = run_op(OpKind::kNonZero, {boolean({2, 2}, {true, false, true, true})});
  REQUIRE(outs.size() == 2);
  CHECK(outs[0].type.shape == Shape{2, 4});
  CHECK(extent_of(outs) == 3);
  CHECK(outs[0].as<int64_t>() == I64s{0, 1, 1, 0, 0, 1, 0, 0});  // [[0,1,1],[0,0,1]], then zeros
  // NaN is nonzero; all zeros give extent 0; a scalar counts as [1].
  CHECK(run_op(OpKind::kNonZero, {f32({3}, {0, NAN, -0.0F})})[0].as<int64_t>() == I64s{1, 0, 0});
  CHECK(extent_of(run_op(OpKind::kNonZero, {i32({2, 2}, {0, 0, 0, 0})})) == 0);
  std::vector<HostTensor> scalar = run_op(OpKind::kNonZero, {f32({}, {5})});
  CHECK(scalar[0].type.shape == Shape{1, 1});
  CHECK(extent_of(scalar) == 1);
}

TEST_CASE("reference/unique sorted and not, without an axis") {
  const HostTensor x = f32({6}, {2, 1, 1, 3, 4, 3});
  std::vector<HostTensor> s = run_op(OpKind::kUnique, {x});
  REQUIRE(s.size() == 5);
  CHECK(extent_of(s) == 4);
  CHECK(s[0].as<float>() == std::vector<float>{1, 2, 3, 4, 0, 0});
  CHECK(s[1].as<int64_t>() == I64s{1, 0, 3, 4, 0, 0});
  CHECK(s[2].as<int64_t>() == I64s{1, 0, 0, 2, 3, 2});
  CHECK(s[3].as<int64_t>() == I64s{2, 1, 2, 1, 0, 0});
  std::vector<HostTensor> u = run_op(OpKind::kUnique, {x}, {{"sorted", int64_t{0}}});
  CHECK(u[0].as<float>() == std::vector<float>{2, 1, 3, 4, 0, 0});
  CHECK(u[1].as<int64_t>() == I64s{0, 1, 3, 4, 0, 0});
  CHECK(u[2].as<int64_t>() == I64s{0, 1, 1, 2, 3, 2});
  CHECK(u[3].as<int64_t>() == I64s{1, 2, 2, 1, 0, 0});
  // A 2-D x without an axis is flattened; NaN equals NaN and sorts last.
  std::vector<HostTensor> nan = run_op(OpKind::kUnique, {f32({1, 3}, {NAN, 1, NAN})});
  CHECK(extent_of(nan) == 2);
  const std::vector<float> y = nan[0].as<float>();
  CHECK(y[0] == 1);
  CHECK(std::isnan(y[1]));
  CHECK(nan[1].as<int64_t>() == I64s{1, 0, 0});
  CHECK(nan[2].as<int64_t>() == I64s{1, 0, 1});
  CHECK(nan[3].as<int64_t>() == I64s{1, 2, 0});
}

TEST_CASE("reference/unique along an axis packs the slices at the count") {
  std::vector<HostTensor> rows = run_op(OpKind::kUnique, {i64({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4})}, {{"axis", int64_t{0}}});
  CHECK(rows[0].type.shape == Shape{3, 3});
  CHECK(extent_of(rows) == 2);
  CHECK(rows[0].as<int64_t>() == I64s{1, 0, 0, 2, 3, 4, 0, 0, 0});
  CHECK(rows[1].as<int64_t>() == I64s{0, 2, 0});
  CHECK(rows[2].as<int64_t>() == I64s{0, 0, 1});
  CHECK(rows[3].as<int64_t>() == I64s{2, 1, 0});
  // Columns (a negative axis): y [2, 2] packed as [[1, 2], [3, 4]] in the [2, 3] bound.
  std::vector<HostTensor> cols = run_op(OpKind::kUnique, {i32({2, 3}, {2, 1, 2, 4, 3, 4})}, {{"axis", int64_t{-1}}});
  CHECK(extent_of(cols) == 2);
  CHECK(cols[0].as<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 0, 0});
  CHECK(cols[1].as<int64_t>() == I64s{1, 0, 0});
  CHECK(cols[2].as<int64_t>() == I64s{1, 0, 1});
  CHECK(cols[3].as<int64_t>() == I64s{1, 2, 0});
}

// ONNX's suppress_by_IOU boxes: 3 and 0 overlap their neighbours 4 and 1, 2.
const std::vector<float> kCorners = {0, 0, 1, 1, 0, 0.1F, 1, 1.1F, 0, -0.1F, 1, 0.9F,
                                     0, 10, 1, 11, 0, 10.1F, 1, 11.1F, 0, 100, 1, 101};
const std::vector<float> kCenters = {0.5F, 0.5F, 1, 1, 0.5F, 0.6F, 1, 1, 0.5F, 0.4F, 1, 1,
                                     0.5F, 10.5F, 1, 1, 0.5F, 10.6F, 1, 1, 0.5F, 100.5F, 1, 1};
const std::vector<float> kScores = {0.9F, 0.75F, 0.6F, 0.95F, 0.5F, 0.3F};

std::vector<HostTensor> nms(const std::vector<float>& boxes, int64_t max_per_class, float iou,
                            std::optional<float> score = std::nullopt, int64_t center = 0) {
  std::vector<HostTensor> in = {f32({1, 6, 4}, boxes), f32({1, 1, 6}, kScores), i64({1}, {max_per_class}),
                                f32({1}, {iou})};
  if (score) in.push_back(f32({}, {*score}));
  return run_op(OpKind::kNonMaxSuppression, in, {{"center_point_box", center}});
}

// The selected rows of an nms result (the packed prefix), checking the zeros after it.
I64s selected(const std::vector<HostTensor>& outs) {
  const I64s all = outs[0].as<int64_t>();
  const auto used = static_cast<size_t>(extent_of(outs) * 3);
  for (size_t i = used; i < all.size(); ++i) CHECK(all[i] == 0);
  return I64s(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(used));
}

TEST_CASE("reference/non_max_suppression keeps boxes by score and IoU") {
  CHECK(nms(kCorners, 3, 0.5F, 0.0F)[0].type.shape == Shape{6, 3});
  CHECK(selected(nms(kCorners, 3, 0.5F, 0.0F)) == I64s{0, 0, 3, 0, 0, 0, 0, 0, 5});
  CHECK(selected(nms(kCorners, 3, 0.5F)) == I64s{0, 0, 3, 0, 0, 0, 0, 0, 5});  // no score threshold
  // Center-point boxes describe the same boxes.
  CHECK(selected(nms(kCenters, 3, 0.5F, 0.0F, 1)) == I64s{0, 0, 3, 0, 0, 0, 0, 0, 5});
  // A score threshold drops 5 (0.3); an IoU threshold of 1 suppresses nothing.
  CHECK(selected(nms(kCorners, 3, 0.5F, 0.4F)) == I64s{0, 0, 3, 0, 0, 0});
  CHECK(selected(nms(kCorners, 3, 1.0F, 0.0F)) == I64s{0, 0, 3, 0, 0, 0, 0, 0, 1});
  // At most max_per_class boxes; 0 selects none.
  CHECK(selected(nms(kCorners, 2, 0.5F, 0.0F)) == I64s{0, 0, 3, 0, 0, 0});
  CHECK(extent_of(nms(kCorners, 0, 0.5F, 0.0F)) == 0);
}

TEST_CASE("reference/non_max_suppression runs each batch and class") {
  // Two classes over the same boxes: class 1 scores reversed.
  std::vector<float> scores = kScores;
  scores.insert(scores.end(), kScores.rbegin(), kScores.rend());  // 0.3 0.5 0.95 0.6 0.75 0.9
  std::vector<HostTensor> outs = run_op(OpKind::kNonMaxSuppression,
                                        {f32({1, 6, 4}, kCorners), f32({1, 2, 6}, scores), i64({}, {2}), f32({}, {0.5F})});
  CHECK(outs[0].type.shape == Shape{12, 3});
  CHECK(selected(outs) == I64s{0, 0, 3, 0, 0, 0, 0, 1, 2, 0, 1, 5});
}

}  // namespace
