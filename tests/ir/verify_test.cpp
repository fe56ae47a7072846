// One test per verifier error path. Each starts from a builder-made graph and breaks it.
#include "carve/ir/verify.h"

#include <doctest/doctest.h>

#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

namespace {

// x: f32[2,3] (input), w: f32[3,4] (const) -> matmul_0 -> relu_1 -> output.
Graph mlp() {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 3});
  ValueId w = b.constant("w", DType::kF32, {3, 4});
  b.output(b.relu(b.matmul(x, w)));
  return must_build(b);
}

Status expect_error(const Graph& g, ErrorCode code) {
  Status s = verify(g);
  CHECK_MESSAGE(s.code() == code, s.to_string());
  return s;
}

}  // namespace

TEST_CASE("ir/verify/accepts builder graphs") { CHECK(verify(mlp()).ok()); }

TEST_CASE("ir/verify/cycle") {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 3});
  ValueId a = b.add(x, x);
  ValueId r = b.relu(a);
  b.output(r);
  Graph g = must_build(b);
  g.node(0).inputs = {x, r};  // add now reads relu's output: add -> relu -> add
  Status s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "cycle"));
  CHECK(contains(s.message(), "node 'add_0' (add)"));
  CHECK(contains(s.message(), "node 'relu_1' (relu)"));

  g.node(0).inputs = {x, a};  // a self-loop
  s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "cycle: node 'add_0' (add) -> node 'add_0' (add)"));
}

TEST_CASE("ir/verify/dangling value") {
  Graph g = mlp();
  g.values.push_back(Value{4, "ghost", f32({2, 4}), ValueKind::kIntermediate, kNoNode, {}});
  g.node(1).inputs = {4};
  Status s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "node 'relu_1' (relu)"));
  CHECK(contains(s.message(), "'ghost'"));
  CHECK(contains(s.message(), "dangling"));

  g.node(1).inputs = {42};  // an id the graph does not have
  s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "nonexistent value #42"));
}

TEST_CASE("ir/verify/doubly defined value") {
  Graph g = mlp();
  g.node(1).outputs = {2};  // relu claims matmul's output
  Status s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "defined twice"));
  CHECK(contains(s.message(), "node 'matmul_0' (matmul)"));
  CHECK(contains(s.message(), "node 'relu_1' (relu)"));

  g = mlp();
  g.node(1).outputs = {0};  // relu claims the graph input
  s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "'x' is defined twice"));
}

TEST_CASE("ir/verify/unknown op") {
  Graph g = mlp();
  g.node(1).op = static_cast<OpKind>(999);
  Status s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "node 'relu_1'"));
  CHECK(contains(s.message(), "unknown op"));
}

TEST_CASE("ir/verify/wrong arity") {
  Graph g = mlp();
  g.node(1).inputs = {0, 2};
  Status s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "node 'relu_1' (relu): wrong arity: has 2 inputs, relu takes 1"));

  g = mlp();
  g.node(0).outputs.push_back(3);  // matmul claims two outputs; relu's is then doubly defined
  CHECK(verify(g).code() == ErrorCode::kVerifyError);
  g.node(1).outputs.clear();  // relu gives up its output: matmul now has 2, one too many
  g.value(3).producer = 0;
  s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "wrong arity"));
}

TEST_CASE("ir/verify/dtype mismatch") {
  Graph g = mlp();
  g.value(3).type.dtype = DType::kF16;  // relu's stored output type
  Status s = expect_error(g, ErrorCode::kTypeMismatch);
  CHECK(contains(s.message(), "node 'relu_1' (relu): output #0 'relu_1' is stored as f16[2,4]"));
  CHECK(contains(s.message(), "inference gives f32[2,4]"));

  g = mlp();
  g.value(1).type.dtype = DType::kI32;  // the weight no longer matches x
  s = expect_error(g, ErrorCode::kTypeMismatch);
  CHECK(s.message() ==
        "node 'matmul_0' (matmul) on 'x' f32[2,3], 'w' i32[3,4]: operands must have the same "
        "dtype, got f32 and i32");
}

TEST_CASE("ir/verify/shape mismatch") {
  Graph g = mlp();
  g.value(3).type.shape = Shape{2, 5};
  Status s = expect_error(g, ErrorCode::kShapeError);
  CHECK(contains(s.message(), "node 'relu_1' (relu)"));
  CHECK(contains(s.message(), "stored as f32[2,5] but inference gives f32[2,4]"));

  g = mlp();
  g.value(1).type.shape = Shape{4, 4};  // K no longer matches
  s = expect_error(g, ErrorCode::kShapeError);
  CHECK(contains(s.message(), "node 'matmul_0' (matmul)"));
}

TEST_CASE("ir/verify/bad attribute") {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {1, 2, 6, 6});
  ValueId t = b.transpose(x, {0, 2, 3, 1});
  ValueId s = b.softmax(t, 1);
  PoolOptions po;
  po.kernel = {2, 2};
  ValueId p = b.max_pool(x, po);
  b.output(s);
  b.output(p);
  const Graph good = must_build(b);

  Graph g = good;
  g.node(0).attrs["perm"] = std::vector<int64_t>{0, 1, 1, 3};
  Status st = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(st.message(), "node 'transpose_0' (transpose)"));
  CHECK(contains(st.message(), "not a permutation"));

  g = good;
  g.node(1).attrs["axis"] = int64_t{4};
  st = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(st.message(), "node 'softmax_1' (softmax) on 'transpose_0' f32[1,6,6,2]: "
                               "attribute 'axis' = 4 is out of range for rank 4"));

  g = good;
  g.node(1).attrs["axis"] = "last";
  st = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(st.message(), "attribute 'axis' must be an int, got string"));

  g = good;
  g.node(2).attrs["strides"] = std::vector<int64_t>{0, 1};
  st = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(st.message(), "node 'max_pool_2' (max_pool)"));
  CHECK(contains(st.message(), "strides"));

  g = good;
  g.node(2).attrs.erase("kernel");
  st = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(st.message(), "missing required attribute 'kernel'"));

  g = good;
  g.node(2).attrs["dilations"] = std::vector<int64_t>{1, 1};
  st = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(st.message(), "unknown attribute 'dilations'"));
}

TEST_CASE("ir/verify/unproduced output") {
  Graph g = mlp();
  g.values.push_back(Value{4, "result", f32({2, 4}), ValueKind::kIntermediate, kNoNode, {}});
  g.outputs.push_back(4);
  Status s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "graph output 'result' is never produced"));

  g = mlp();
  g.outputs.push_back(g.outputs[0]);
  s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "graph output twice"));

  g = mlp();
  g.outputs = {9};
  s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "nonexistent value #9"));
}

TEST_CASE("ir/verify/bad handle") {
  GraphBuilder b;
  b.handle("kv", DType::kF32, {4, 8});
  ValueId x = b.input("x", DType::kF32, {4, 8});
  b.write_handle("kv", x);
  b.output(b.read_handle("kv"));
  const Graph good = must_build(b);

  Graph g = good;
  g.node(1).attrs["handle"] = "cache";
  Status s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "node 'read_handle_1' (read_handle)"));
  CHECK(contains(s.message(), "handle 'cache' is not declared"));

  g = good;
  g.handles[0].type.shape = Shape{4, 9};  // now x no longer matches the handle
  s = expect_error(g, ErrorCode::kShapeError);
  CHECK(contains(s.message(), "node 'write_handle_0' (write_handle)"));
  CHECK(contains(s.message(), "handle 'kv'"));

  g = good;
  g.handles.push_back(g.handles[0]);
  s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "handle 'kv' is declared twice"));
}

TEST_CASE("ir/verify/names ids and producers") {
  Graph g = mlp();
  g.value(1).name = g.value(0).name;
  CHECK(
      contains(expect_error(g, ErrorCode::kVerifyError).message(), "value name 'x' is used twice"));

  g = mlp();
  g.node(1).name = "matmul_0";
  CHECK(contains(expect_error(g, ErrorCode::kVerifyError).message(), "node name 'matmul_0'"));

  g = mlp();
  g.node(0).name.clear();
  CHECK(contains(expect_error(g, ErrorCode::kVerifyError).message(), "empty name"));

  g = mlp();
  g.value(2).id = 7;
  CHECK(contains(expect_error(g, ErrorCode::kVerifyError).message(), "at index 2 has id 7"));

  g = mlp();
  g.value(3).producer = 0;
  CHECK(contains(expect_error(g, ErrorCode::kVerifyError).message(), "records producer #0"));

  g = mlp();
  g.value(0).type.shape = Shape{2, -3};
  CHECK(contains(expect_error(g, ErrorCode::kShapeError).message(), "value 'x'"));
}

TEST_CASE("ir/verify/constant data") {
  Graph g = mlp();
  g.value(1).data = std::vector<uint8_t>(10, 0);
  Status s = expect_error(g, ErrorCode::kVerifyError);
  CHECK(contains(s.message(), "constant 'w' has 10 bytes of data, but f32[3,4] needs 48"));
  g.value(1).data = std::vector<uint8_t>(48, 0);
  CHECK(verify(g).ok());
  g.value(0).data = std::vector<uint8_t>(24, 0);
  CHECK(contains(expect_error(g, ErrorCode::kVerifyError).message(), "only constants"));
}
