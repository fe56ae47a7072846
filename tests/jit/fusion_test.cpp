// Kernel grouping rules (no LLVM needed: these run in every build).
#include <doctest/doctest.h>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/jit/fusion.h"

namespace carve::jit {
namespace {

using ir::DType;

std::vector<KernelGroup> groups_of(const ir::Graph& g, FusionOptions o = {}) {
  auto order = ir::execution_order(g);
  REQUIRE(order.ok());
  auto groups = form_kernel_groups(g, *order, o);
  REQUIRE_MESSAGE(groups.ok(), groups.status().to_string());
  return std::move(groups).value();
}

ir::Graph build(ir::GraphBuilder& b) {
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(g).value();
}

std::vector<ir::ValueId> operand_values(const KernelGroup& k, OperandRole role) {
  std::vector<ir::ValueId> out;
  for (const auto& op : k.operands) {
    if (op.role == role) out.push_back(op.value);
  }
  return out;
}

}  // namespace

TEST_CASE("jit/fusion/elementwise chain with broadcasting is one group") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4, 8});
  auto bias = b.input("bias", DType::kF32, {8});
  auto t = b.add(x, bias);
  auto u = b.gelu(t);
  auto y = b.mul(u, x);
  b.output(y);
  ir::Graph g = build(b);
  auto groups = groups_of(g);
  REQUIRE(groups.size() == 1);
  const KernelGroup& k = groups[0];
  CHECK(k.nodes.size() == 3);
  CHECK(k.name == "fused_add_gelu_mul_0");
  CHECK(operand_values(k, OperandRole::kInput) == std::vector<ir::ValueId>{x, bias});
  CHECK(operand_values(k, OperandRole::kOutput) == std::vector<ir::ValueId>{y});
  CHECK(k.internal_values == std::vector<ir::ValueId>{t, u});
  CHECK(k.num_tiles == 1);
  CHECK(describe_group(g, k) ==
        "fused_add_gelu_mul_0: add_0 -> gelu_1 -> mul_2 | in x:f32[4,8], bias:f32[8] | out mul_2:f32[4,8] | tiles 1");
}

TEST_CASE("jit/fusion/fuse false gives one group per non-view node") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4, 8});
  auto y = b.relu(b.neg(b.reshape(b.exp(x), {32})));
  b.output(y);
  ir::Graph g = build(b);
  FusionOptions off;
  off.fuse = false;
  auto groups = groups_of(g, off);
  CHECK(groups.size() == 3);  // exp, neg, relu; the reshape view gets no kernel
  for (const auto& k : groups) CHECK(k.nodes.size() == 1);
  auto fused = groups_of(g);
  REQUIRE(fused.size() == 2);  // the view breaks the chain: exp | neg -> relu
  CHECK(fused[1].nodes.size() == 2);
}

TEST_CASE("jit/fusion/no fusion across a second consumer or a graph output") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {16});
  auto a = b.exp(x);
  auto c = b.add(a, a);     // a read twice by one node: still one consumer
  auto d = b.tanh(c);       // c also read by e: two consumers
  auto e = b.mul(c, d);
  auto f = b.sqrt(e);       // e is a graph output: not internal
  auto h = b.neg(b.add(f, c));  // c read again outside [tanh, mul]
  b.output(e);
  b.output(h);
  ir::Graph g = build(b);
  auto groups = groups_of(g);
  // [exp, add] | [tanh, mul] | [sqrt, add, neg]
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].nodes.size() == 2);
  CHECK(operand_values(groups[0], OperandRole::kOutput) == std::vector<ir::ValueId>{c});
  CHECK(groups[1].nodes.size() == 2);
  CHECK(operand_values(groups[1], OperandRole::kInput) == std::vector<ir::ValueId>{c});
  CHECK(operand_values(groups[1], OperandRole::kOutput) == std::vector<ir::ValueId>{e});
  CHECK(groups[2].nodes.size() == 3);
  CHECK(operand_values(groups[2], OperandRole::kOutput) == std::vector<ir::ValueId>{h});
  (void)a;
  (void)f;
}

static ir::Conv2dOptions pad1() {
  ir::Conv2dOptions o;
  o.pads = {1, 1, 1, 1};
  return o;
}

TEST_CASE("jit/fusion/a value read twice inside the group fuses (SiLU, hard-swish)") {
  // Conv -> Sigmoid -> Mul(conv, sigmoid), as torch.onnx exports SiLU: one group whose
  // only stored value is the Mul's output; likewise x * HardSigmoid(x) and a residual.
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {1, 4, 6, 6});
  auto w = b.input("w", DType::kF32, {8, 4, 3, 3});
  auto res = b.input("res", DType::kF32, {1, 8, 6, 6});
  auto c = b.conv2d(x, w, std::nullopt, pad1());
  auto silu = b.mul(c, b.sigmoid(c));
  auto hs = b.mul(silu, b.op1(ir::OpKind::kHardSigmoid, {silu}, {{"alpha", 1.0 / 6}, {"beta", 0.5}}, "hsig"));
  auto y = b.add(hs, res);
  b.output(y);
  ir::Graph g = build(b);
  auto groups = groups_of(g);
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].nodes.size() == 6);
  CHECK(operand_values(groups[0], OperandRole::kInput) == std::vector<ir::ValueId>{x, w, res});
  CHECK(operand_values(groups[0], OperandRole::kOutput) == std::vector<ir::ValueId>{y});

  // The conv output read after the group: the Sigmoid alone is its epilogue.
  ir::GraphBuilder b2;
  auto x2 = b2.input("x", DType::kF32, {1, 4, 6, 6});
  auto w2 = b2.input("w", DType::kF32, {8, 4, 3, 3});
  auto c2 = b2.conv2d(x2, w2, std::nullopt, pad1());
  auto s2 = b2.sigmoid(c2);
  b2.output(b2.mul(s2, s2));
  b2.output(b2.neg(c2));
  ir::Graph g2 = build(b2);
  auto groups2 = groups_of(g2);
  REQUIRE(groups2.size() >= 2);
  CHECK(groups2[0].nodes.size() == 1);
}

TEST_CASE("jit/fusion/consumer must be the next node in the order") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {16});
  auto a = b.exp(x);
  auto other = b.neg(x);  // runs between exp and its consumer
  auto c = b.add(a, other);
  b.output(c);
  ir::Graph g = build(b);
  auto groups = groups_of(g);
  // exp | [neg, add]
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].nodes.size() == 1);
  CHECK(groups[1].nodes.size() == 2);
  CHECK(operand_values(groups[1], OperandRole::kInput) == std::vector<ir::ValueId>{x, a});
}

TEST_CASE("jit/fusion/matmul epilogue with bias and activation") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {8, 16});
  auto w = b.input("w", DType::kF32, {16, 4});
  auto bias = b.input("bias", DType::kF32, {4});
  auto mm = b.matmul(x, w);
  auto y = b.relu(b.add(mm, bias));
  auto z = b.exp(b.reshape(y, {32}));  // the view ends the epilogue
  b.output(z);
  ir::Graph g = build(b);
  auto groups = groups_of(g);
  REQUIRE(groups.size() == 2);
  const KernelGroup& k = groups[0];
  CHECK(k.nodes.size() == 3);
  CHECK(g.node(k.nodes.front()).op == ir::OpKind::kMatmul);
  CHECK(operand_values(k, OperandRole::kInput) == std::vector<ir::ValueId>{x, w, bias});
  CHECK(operand_values(k, OperandRole::kOutput) == std::vector<ir::ValueId>{y});
  CHECK(k.internal_values.size() == 2);
  CHECK(k.name == "fused_matmul_add_relu_0");

  // an epilogue that broadcasts the anchor output to a bigger shape is not fused
  ir::GraphBuilder b2;
  auto x2 = b2.input("x", DType::kF32, {8, 16});
  auto w2 = b2.input("w", DType::kF32, {16, 1});
  auto big = b2.input("big", DType::kF32, {8, 5});
  b2.output(b2.add(b2.matmul(x2, w2), big));
  ir::Graph g2 = build(b2);
  CHECK(groups_of(g2).size() == 2);
  FusionOptions off;
  off.fuse = false;
  CHECK(groups_of(g, off).size() == 4);
}

TEST_CASE("jit/fusion/attention: matmul, scale, softmax, matmul run as one group after V") {
  // v is computed after the first matmul in the order: the group is formed at the second
  // matmul's place, so it runs after v's producer.
  ir::GraphBuilder b;
  auto q = b.input("q", DType::kF32, {2, 8, 4});
  auto k = b.input("k", DType::kF32, {2, 4, 32});
  auto x = b.input("x", DType::kF32, {2, 32, 4});
  auto scale = b.input("scale", DType::kF32, {});
  auto s = b.div(b.matmul(q, k), scale);
  auto p = b.softmax(s, -1);
  auto v = b.neg(x);
  auto o = b.matmul(p, v);
  b.output(o);
  ir::Graph g = build(b);
  FusionOptions on;
  on.fuse_attention = true;
  auto groups = groups_of(g, on);
  REQUIRE(groups.size() == 2);
  CHECK(g.node(groups[0].nodes.front()).op == ir::OpKind::kNeg);
  const KernelGroup& a = groups[1];
  CHECK(a.name == "fused_matmul_div_softmax_matmul_0");
  CHECK(operand_values(a, OperandRole::kInput) == std::vector<ir::ValueId>{q, k, scale, v});
  CHECK(operand_values(a, OperandRole::kOutput) == std::vector<ir::ValueId>{o});
  CHECK(a.internal_values.size() == 3);
  CHECK(a.scratch_bytes == 0);
  CHECK(a.num_tiles == 2);  // 2 batches x 1 block of 8 rows
  // Off by default (the CUDA emitter has no such kernel), and with fuse = false.
  CHECK(groups_of(g).size() == 4);
  on.fuse = false;
  CHECK(groups_of(g, on).size() == 5);
}

TEST_CASE("jit/fusion/attention is not formed where a value leaves it or the shape does not fit") {
  FusionOptions on;
  on.fuse_attention = true;
  auto attention_groups = [&](const ir::Graph& g) {
    int n = 0;
    for (const KernelGroup& group : groups_of(g, on)) n += group.nodes.size() >= 3;
    return n;
  };
  struct Form {
    int64_t keys;
    int64_t axis;
    bool scores_out;
  };
  for (Form f : {Form{32, -1, false}, Form{32, -1, true}, Form{24, -1, false}, Form{32, 1, false}}) {
    ir::GraphBuilder b;
    auto q = b.input("q", DType::kF32, {2, 8, 4});
    auto k = b.input("k", DType::kF32, {2, 4, f.keys});
    auto v = b.input("v", DType::kF32, {2, f.keys, 4});
    auto s = b.matmul(q, k);
    b.output(b.matmul(b.softmax(s, f.axis), v));
    if (f.scores_out) b.output(s);
    ir::Graph g = build(b);
    CAPTURE(f.keys);
    CAPTURE(f.axis);
    CAPTURE(f.scores_out);
    // Keys not a multiple of 16, softmax over another axis, or the scores a graph output.
    CHECK(attention_groups(g) == (f.keys == 32 && f.axis == -1 && !f.scores_out ? 1 : 0));
  }
}

TEST_CASE("jit/fusion/state ops bind the handle as a kNoValue operand") {
  ir::GraphBuilder b;
  b.handle("h", DType::kF32, {4, 3});
  auto r = b.read_handle("h");
  auto v = b.input("v", DType::kF32, {1, 3});
  auto pos = b.input("pos", DType::kI64, {});
  b.output(b.neg(r));
  b.write_handle_at("h", v, pos, 0);
  ir::Graph g = build(b);
  auto groups = groups_of(g);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].operands.size() == 2);
  CHECK(groups[0].operands[0].role == OperandRole::kInput);
  CHECK(groups[0].operands[0].value == ir::kNoValue);
  const KernelGroup& w = groups[2];
  REQUIRE(w.operands.size() == 3);
  CHECK(w.operands[0].value == v);
  CHECK(w.operands[1].value == pos);
  CHECK(w.operands[2].role == OperandRole::kOutput);
  CHECK(w.operands[2].value == ir::kNoValue);
  CHECK(describe_group(g, w).find("out handle") != std::string::npos);
}

TEST_CASE("jit/fusion/tiles follow the element count") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {1000, 1000});
  b.output(b.relu(x));
  b.output(b.transpose(x, {1, 0}));
  for (auto v : b.split(x, 0, {500, 500})) b.output(v);
  ir::Graph g = build(b);
  FusionOptions o;
  o.elements_per_tile = 32768;
  auto groups = groups_of(g, o);
  REQUIRE(groups.size() == 3);
  for (const auto& k : groups) CHECK(k.num_tiles == (1000000 + 32767) / 32768);
  o.elements_per_tile = 1 << 30;
  for (const auto& k : groups_of(g, o)) CHECK(k.num_tiles == 1);
  CHECK(tiles_for(g, groups[0], o) == 1);
}

TEST_CASE("jit/fusion/bad orders are rejected") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4});
  b.output(b.neg(b.exp(x)));
  ir::Graph g = build(b);
  std::vector<ir::NodeId> short_order{0};
  CHECK(form_kernel_groups(g, short_order).status().code() == ErrorCode::kInvalidArgument);
  std::vector<ir::NodeId> dup{0, 0};
  CHECK(form_kernel_groups(g, dup).status().code() == ErrorCode::kInvalidArgument);
  std::vector<ir::NodeId> missing{0, 7};
  CHECK(form_kernel_groups(g, missing).status().code() == ErrorCode::kInvalidArgument);
  CHECK(make_single_node_group(g, 9).status().code() == ErrorCode::kInvalidArgument);
}

}  // namespace carve::jit
