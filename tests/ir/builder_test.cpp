#include "carve/ir/builder.h"

#include <doctest/doctest.h>

#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

TEST_CASE("ir/builder/builds a small verified graph") {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 3});
  ValueId w = b.constant("w", DType::kF32, {3, 4});
  ValueId y = b.relu(b.matmul(x, w));
  b.output(y);
  Graph g = must_build(b);
  CHECK(g.name == "main");
  REQUIRE(g.values.size() == 4);
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.value(x).kind == ValueKind::kInput);
  CHECK(g.value(w).kind == ValueKind::kConstant);
  CHECK(g.value(y).type == f32({2, 4}));
  CHECK(g.value(y).producer == 1);
  CHECK(g.node(0).op == OpKind::kMatmul);
  CHECK(g.node(0).name == "matmul_0");
  CHECK(g.node(1).inputs == std::vector<ValueId>{2});
  CHECK(g.outputs == std::vector<ValueId>{y});
  CHECK(g.is_output(y));
  CHECK(g.find_value("x") == &g.value(x));
  CHECK(g.find_node("relu_1") == &g.node(1));
  CHECK(verify(g).ok());
}

TEST_CASE("ir/builder/error names the node and is sticky") {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 3});
  ValueId y = b.input("y", DType::kF32, {4});
  ValueId bad = b.add(x, y);
  CHECK(bad == kNoValue);
  CHECK(b.status().code() == ErrorCode::kShapeError);
  // Later calls are no-ops and keep the first error.
  CHECK(b.relu(x) == kNoValue);
  CHECK(b.input("z", DType::kF32, {1}) == kNoValue);
  Result<Graph> g = b.build();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kShapeError);
  CHECK(g.status().message() ==
        "node 'add_0' (add) on 'x' f32[2,3], 'y' f32[4]: cannot broadcast shapes [2,3] and [4]: "
        "dims 3 and 4 at output axis 1");
}

TEST_CASE("ir/builder/attribute errors name the node") {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 3});
  b.transpose(x, {0, 0});
  Result<Graph> g = b.build();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kVerifyError);
  CHECK(contains(g.status().message(), "node 'transpose_0' (transpose)"));
  CHECK(contains(g.status().message(), "perm"));
}

TEST_CASE("ir/builder/auto names are unique and rename works") {
  GraphBuilder b;
  ValueId x = b.input("relu_0", DType::kF32, {2});  // takes the name the first relu would get
  ValueId r = b.relu(x);
  CHECK(b.graph().value(r).name == "relu_0_1");
  b.rename(r, "act");
  ValueId n = b.op1(OpKind::kNeg, {r}, {}, "my_neg");
  CHECK(b.graph().node(1).name == "my_neg");
  b.output(n);
  Graph g = must_build(b);
  CHECK(g.find_value("act") != nullptr);
  CHECK(g.find_value("my_neg") != nullptr);

  GraphBuilder dup;
  ValueId a = dup.input("a", DType::kF32, {2});
  dup.input("b", DType::kF32, {2});
  dup.rename(a, "b");
  CHECK(dup.status().code() == ErrorCode::kInvalidArgument);

  GraphBuilder same;
  same.input("a", DType::kF32, {2});
  same.input("a", DType::kF32, {2});
  CHECK(same.status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("ir/builder/split returns several outputs and sinks return none") {
  GraphBuilder b;
  b.handle("kv", DType::kF32, {6, 4});
  ValueId x = b.input("x", DType::kF32, {6, 4});
  std::vector<ValueId> parts = b.split(x, 0, {2, 4});
  REQUIRE(parts.size() == 2);
  CHECK(b.graph().value(parts[0]).type == f32({2, 4}));
  CHECK(b.graph().value(parts[1]).name == "split_0_1");
  ValueId back = b.concat({parts[1], parts[0]}, 0);
  NodeId sink = b.write_handle("kv", back);
  CHECK(sink == 2);
  ValueId pos = b.input("pos", DType::kI64, {});
  b.write_handle_at("kv", parts[0], pos, 0);
  b.output(b.read_handle("kv"));
  Graph g = must_build(b);
  CHECK(g.node(sink).outputs.empty());
  CHECK(g.nodes.size() == 5);
}

TEST_CASE("ir/builder/typed helpers cover every op family") {
  GraphBuilder b;
  ValueId img = b.input("img", DType::kF32, {1, 3, 8, 8});
  ValueId w = b.constant("w", DType::kF32, {4, 3, 3, 3});
  ValueId bias = b.constant("bias", DType::kF32, {4});
  Conv2dOptions co;
  co.pads = {1, 1, 1, 1};
  ValueId c = b.conv2d(img, w, bias, co);
  ValueId ch = b.constant("ch", DType::kF32, {4});
  ValueId bn = b.batch_norm(c, ch, ch, ch, ch);
  PoolOptions po;
  po.kernel = {2, 2};
  po.strides = {2, 2};
  ValueId mp = b.max_pool(b.hard_sigmoid(b.clip(bn, 0.0, 6.0)), po);
  ValueId ap = b.avg_pool(mp, po);
  ValueId g = b.global_avg_pool(ap);
  ValueId flat = b.flatten(g);
  ValueId fc_w = b.constant("fc_w", DType::kF32, {4, 5});
  ValueId fc = b.gemm(flat, fc_w, std::nullopt, false, false, 1.0, 0.0);
  ValueId sm = b.softmax(fc);
  ValueId ln = b.layer_norm(sm, b.constant("s", DType::kF32, {5}), std::nullopt);
  ValueId m = b.reduce_mean(ln, {1}, false);
  ValueId mask = b.greater(ln, b.constant("zero", DType::kF32, {}));
  ValueId sel = b.where(mask, ln, b.neg(ln));
  ValueId casted = b.cast(sel, DType::kF16);
  ValueId sq = b.squeeze(b.unsqueeze(casted, {0}));
  ValueId rs = b.reshape(sq, {5, -1});
  ValueId t = b.transpose(rs, {1, 0});
  ValueId sl = b.slice(t, {0}, {3}, {1});
  ValueId pd = b.pad(sl, {0, 1, 0, 1}, 0.5);
  ValueId idx = b.input("idx", DType::kI64, {2});
  ValueId ga = b.gather(pd, idx, 1);
  b.output(m);
  b.output(ga);
  Graph graph = must_build(b);
  CHECK(graph.value(ga).type == tt(DType::kF16, {1, 2}));
  CHECK(graph.value(m).type == f32({1}));
}

TEST_CASE("ir/builder/constant data size must match") {
  GraphBuilder b;
  b.constant("c", DType::kF32, {2}, std::vector<uint8_t>(7, 0));
  CHECK(b.status().code() == ErrorCode::kInvalidArgument);
  CHECK(contains(b.status().message(), "7 bytes"));
  GraphBuilder ok;
  ValueId c = ok.constant("c", DType::kF32, {2}, std::vector<uint8_t>(8, 1));
  ok.output(c);
  Graph g = must_build(ok);
  CHECK(g.value(c).data->size() == 8);
}
