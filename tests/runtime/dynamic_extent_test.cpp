// Data-dependent extents (ir/extent.h, session.h): graph outputs of non_zero, unique and
// non_max_suppression come back at their actual extent, which changes run to run through
// one compiled program; a node reading such a value inside the graph is refused at
// compile time, naming the value and the node.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/runtime/session.h"
#include "runtime_test_util.h"

using namespace carve;
using ir::DType;
using ir::OpKind;

namespace {

template <typename T>
runtime::Buffer borrow(const std::vector<T>& v, DType dtype, ir::Shape shape) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T));
  return *runtime::Buffer::borrow(bytes, dtype, std::move(shape));
}

template <typename T>
std::vector<T> values(const runtime::Buffer& b) {
  auto s = b.span<T>();
  REQUIRE(s.ok());
  return std::vector<T>(s->begin(), s->end());
}

using I64s = std::vector<int64_t>;

// `g` compiled by a CPU Session of `threads` threads; null (the test skipped) without the JIT.
std::unique_ptr<runtime::CompiledProgram> compile(const Result<ir::Graph>& g, int threads) {
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto session = runtime::testing::cpu_session_or_skip(threads);
  if (!session) return nullptr;
  auto program = session->compile(*g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  return std::move(*program);
}

}  // namespace

TEST_CASE("runtime/dynamic_extent/non_zero returns the actual extent of each run") {
  ir::GraphBuilder b("non_zero");
  auto outs = b.op(OpKind::kNonZero, {b.input("x", DType::kF32, {2, 3})}, {}, "nz");
  b.output(b.rename(outs[0], "coords"));
  auto g = b.build();
  for (int threads : {1, 2}) {
    auto program = compile(g, threads);
    if (!program) return;
    CHECK(program->output_types()[0].shape == ir::Shape{2, 6});  // the bound
    const std::vector<std::vector<float>> xs = {{0, 1, 0, 0, 0, 2}, {0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1}, {0, 0, 3, 0, 0, 0}};
    const std::vector<I64s> expected = {{0, 1, 1, 2}, {}, {0, 0, 0, 1, 1, 1, 0, 1, 2, 0, 1, 2}, {0, 2}};
    for (size_t i = 0; i < xs.size(); ++i) {
      std::vector<runtime::Buffer> inputs{borrow(xs[i], DType::kF32, {2, 3})};
      auto got = program->run(inputs);
      REQUIRE_MESSAGE(got.ok(), got.status().to_string());
      const int64_t found = static_cast<int64_t>(expected[i].size() / 2);
      CHECK(got->at(0).shape() == ir::Shape{2, found});
      CHECK(values<int64_t>(got->at(0)) == expected[i]);
    }
    // Caller outputs of the bound's type: the data packed at their start, the shape in the record.
    std::vector<int64_t> out_bytes(12, -1);
    std::vector<runtime::Buffer> outputs{*runtime::Buffer::borrow(
        std::span<std::byte>(reinterpret_cast<std::byte*>(out_bytes.data()), out_bytes.size() * 8), DType::kI64, {2, 6},
        true)};
    std::vector<runtime::Buffer> inputs{borrow(xs[0], DType::kF32, {2, 3})};
    runtime::RunRecord record;
    REQUIRE(program->run(inputs, outputs, {}, &record).ok());
    REQUIRE(record.output_shapes.size() == 1);
    CHECK(record.output_shapes[0] == ir::Shape{2, 2});
    CHECK(out_bytes == I64s{0, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0});
  }
}

TEST_CASE("runtime/dynamic_extent/unique outputs come back at the number of unique slices") {
  ir::GraphBuilder b("unique");
  auto outs = b.op(OpKind::kUnique, {b.input("x", DType::kI32, {3, 2})}, {{"axis", int64_t{0}}}, "u");
  b.output(b.rename(outs[0], "y"));
  b.output(b.rename(outs[1], "indices"));
  b.output(b.rename(outs[2], "inverse"));
  b.output(b.rename(outs[3], "counts"));
  auto program = compile(b.build(), 2);
  if (!program) return;
  const std::vector<int32_t> repeated = {5, 6, 1, 2, 5, 6};
  std::vector<runtime::Buffer> inputs{borrow(repeated, DType::kI32, {3, 2})};
  auto got = program->run(inputs);
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK(got->at(0).shape() == ir::Shape{2, 2});
  CHECK(values<int32_t>(got->at(0)) == std::vector<int32_t>{1, 2, 5, 6});
  CHECK(values<int64_t>(got->at(1)) == I64s{1, 0});
  CHECK(got->at(2).shape() == ir::Shape{3});  // one per slice of x: static
  CHECK(values<int64_t>(got->at(2)) == I64s{1, 0, 1});
  CHECK(values<int64_t>(got->at(3)) == I64s{1, 2});
  const std::vector<int32_t> distinct = {3, 0, 2, 0, 1, 0};
  inputs = {borrow(distinct, DType::kI32, {3, 2})};
  got = program->run(inputs);
  REQUIRE(got.ok());
  CHECK(got->at(0).shape() == ir::Shape{3, 2});
  CHECK(values<int32_t>(got->at(0)) == std::vector<int32_t>{1, 0, 2, 0, 3, 0});
  CHECK(values<int64_t>(got->at(3)) == I64s{1, 1, 1});
}

TEST_CASE("runtime/dynamic_extent/non_max_suppression selects up to max_per_class a run") {
  ir::GraphBuilder b("nms");
  std::vector<ir::ValueId> in = {b.input("boxes", DType::kF32, {1, 6, 4}), b.input("scores", DType::kF32, {1, 1, 6}),
                                 b.input("max", DType::kI64, {1}), b.input("iou", DType::kF32, {1})};
  auto outs = b.op(OpKind::kNonMaxSuppression, in, {}, "nms");
  b.output(b.rename(outs[0], "selected"));
  auto program = compile(b.build(), 2);
  if (!program) return;
  const std::vector<float> boxes = {0, 0, 1, 1, 0, 0.1F, 1, 1.1F, 0, -0.1F, 1, 0.9F,
                                    0, 10, 1, 11, 0, 10.1F, 1, 11.1F, 0, 100, 1, 101};
  const std::vector<float> scores = {0.9F, 0.75F, 0.6F, 0.95F, 0.5F, 0.3F};
  const std::vector<float> iou = {0.5F};
  const std::vector<I64s> expected = {{}, {0, 0, 3}, {0, 0, 3, 0, 0, 0, 0, 0, 5}, {0, 0, 3, 0, 0, 0, 0, 0, 5}};
  for (int64_t max : {0, 1, 3, 10}) {
    const std::vector<int64_t> max_v = {max};
    std::vector<runtime::Buffer> inputs{borrow(boxes, DType::kF32, {1, 6, 4}), borrow(scores, DType::kF32, {1, 1, 6}),
                                        borrow(max_v, DType::kI64, {1}), borrow(iou, DType::kF32, {1})};
    auto got = program->run(inputs);
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    const I64s& want = expected[static_cast<size_t>(std::min<int64_t>(max, 3))];
    CHECK(got->at(0).shape() == ir::Shape{static_cast<int64_t>(want.size() / 3), 3});
    CHECK(values<int64_t>(got->at(0)) == want);
  }
}

TEST_CASE("runtime/dynamic_extent/a node reading such a value is refused at compile time") {
  ir::GraphBuilder b("consumer");
  auto outs = b.op(OpKind::kNonZero, {b.input("x", DType::kF32, {4})}, {}, "nz");
  b.output(b.rename(b.cast(outs[0], DType::kF32), "y"));
  auto g = b.build();
  REQUIRE(g.ok());
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session) return;
  auto program = session->compile(*g, {});
  REQUIRE(!program.ok());
  CHECK(program.status().code() == ErrorCode::kUnsupported);
  const std::string m(program.status().message());
  INFO(m);
  CHECK(m.find("data-dependent extent of") != std::string::npos);
  CHECK(m.find("consumed by") != std::string::npos);
  CHECK(m.find("(cast)") != std::string::npos);
  // The extent itself is an ordinary value: reading it is fine.
  ir::GraphBuilder c("count");
  auto nz = c.op(OpKind::kNonZero, {c.input("x", DType::kF32, {4})}, {}, "nz");
  c.output(c.rename(c.add(nz[1], nz[1]), "twice"));
  auto counted = c.build();
  REQUIRE(counted.ok());
  auto counting = session->compile(*counted, {});
  REQUIRE_MESSAGE(counting.ok(), counting.status().to_string());
  const std::vector<float> x = {0, 2, 0, 3};
  std::vector<runtime::Buffer> inputs{borrow(x, DType::kF32, {4})};
  auto got = (*counting)->run(inputs);
  REQUIRE(got.ok());
  CHECK(values<int64_t>(got->at(0)) == I64s{4});
}
