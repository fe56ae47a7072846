#include "carve/ir/text.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

namespace {

Graph round_trip(const Graph& g) {
  std::string text = print(g);
  Result<Graph> back = parse(text);
  std::string context = back.status().to_string() + "\n" + text;
  REQUIRE_MESSAGE(back.ok(), context);
  CHECK_MESSAGE(*back == g, text);
  CHECK(print(*back) == text);
  CHECK(verify(*back).ok());
  return std::move(back).value();
}

Status parse_error(std::string_view text) {
  Result<Graph> g = parse(text);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kParseError);
  return g.status();
}

}  // namespace

TEST_CASE("ir/text/prints the documented form") {
  GraphBuilder b;
  b.handle("kv", DType::kF32, {1, 4});
  ValueId x = b.input("x", DType::kF32, {2, 3});
  ValueId w = b.constant("w", DType::kF32, {3},
                         std::vector<uint8_t>{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64});
  ValueId y = b.mul(x, w);
  std::vector<ValueId> parts = b.split(y, 0, {1, 1});
  b.output(b.hard_sigmoid(parts[0], 0.25, 0.5));
  b.output(parts[1]);
  Graph g = must_build(b);
  const char* expected =
      "graph main {\n"
      "  handle kv: f32[1,4]\n"
      "  input x: f32[2,3]\n"
      "  const w: f32[3] = hex\"0000803f0000004000004040\"\n"
      "  mul_0 = mul(x, w) -> mul_0: f32[2,3]\n"
      "  split_1 = split(mul_0) {axis=0, sizes=[1,1]} -> split_1_0: f32[1,3], split_1_1: f32[1,3]\n"
      "  hard_sigmoid_2 = hard_sigmoid(split_1_0) {alpha=0.25, beta=0.5} -> hard_sigmoid_2: "
      "f32[1,3]\n"
      "  output hard_sigmoid_2, split_1_1\n"
      "}\n";
  CHECK(print(g) == expected);
  round_trip(g);
}

TEST_CASE("ir/text/round trip of a hand mlp") {
  GraphBuilder b("mlp");
  ValueId x = b.input("x", DType::kF32, {8, 16});
  ValueId w1 = b.constant("w1", DType::kF32, {16, 32});
  ValueId b1 = b.constant("b1", DType::kF32, {32});
  ValueId h = b.gelu(b.gemm(x, w1, b1, false, false, 1.0, 1.0));
  ValueId w2 = b.constant("w2", DType::kF32, {32, 4});
  ValueId logits = b.matmul(h, w2);
  b.output(b.softmax(logits, -1));
  b.output(b.reduce_max(logits, {1}, false));
  round_trip(must_build(b));
}

TEST_CASE("ir/text/round trip of a conv net with constant data") {
  GraphBuilder b;
  ValueId img = b.input("img", DType::kF32, {1, 2, 6, 6});
  std::vector<uint8_t> wdata(4 * 2 * 3 * 3 * 4);
  for (size_t i = 0; i < wdata.size(); ++i) wdata[i] = static_cast<uint8_t>(i * 37);
  ValueId w = b.constant("conv.w", DType::kF32, {4, 2, 3, 3}, wdata);
  ValueId bias = b.constant("conv.b", DType::kF32, {4}, std::vector<uint8_t>(16, 0xff));
  Conv2dOptions co;
  co.strides = {2, 1};
  co.pads = {1, 0, 1, 2};
  co.dilations = {1, 2};
  ValueId c = b.relu(b.conv2d(img, w, bias, co));
  PoolOptions po;
  po.kernel = {2, 2};
  po.ceil_mode = true;
  po.count_include_pad = true;
  po.pads = {1, 1, 0, 0};
  ValueId p = b.avg_pool(c, po);
  ValueId empty = b.constant("empty", DType::kI8, {0}, std::vector<uint8_t>{});
  b.output(b.flatten(b.global_avg_pool(p)));
  b.output(empty);
  Graph g = round_trip(must_build(b));
  CHECK(g.find_value("conv.w")->data == wdata);
  CHECK(g.find_value("empty")->data.has_value());
}

TEST_CASE("ir/text/round trip of the 16-bit and wide unsigned integer dtypes") {
  GraphBuilder b;
  ValueId a = b.input("a", DType::kU64, {3});
  std::vector<uint8_t> bits(3 * 8);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint8_t>(0xff - i);  // past INT64_MAX
  ValueId c = b.constant("c", DType::kU64, {3}, bits);
  ValueId u32 = b.cast(b.add(a, c), DType::kU32);
  ValueId u16 = b.cast(u32, DType::kU16);
  b.output(b.cast(u16, DType::kI16));
  Graph g = round_trip(must_build(b));
  CHECK(g.find_value("c")->data == bits);
  CHECK(print(g).find("u64[3]") != std::string::npos);
  CHECK(print(g).find("i16[3]") != std::string::npos);
}

TEST_CASE("ir/text/round trip of handles state ops and sinks") {
  GraphBuilder b;
  b.handle("k_cache", DType::kF16, {1, 16, 64});
  b.handle("step", DType::kI64, {});
  ValueId k = b.input("k", DType::kF16, {1, 1, 64});
  ValueId pos = b.read_handle("step");
  b.write_handle_at("k_cache", k, pos, 1);
  ValueId all = b.read_handle("k_cache");
  b.write_handle("step", pos);
  b.output(b.identity(all));
  Graph g = round_trip(must_build(b));
  CHECK(g.nodes.size() == 5);
  CHECK(g.handles.size() == 2);
}

TEST_CASE("ir/text/round trip of odd names and float attributes") {
  GraphBuilder b("my graph");
  ValueId x = b.input("onnx::Add/0 \"quoted\"\n\t\x01\xff", DType::kF32, {3});
  ValueId in = b.input("input", DType::kF32, {3});  // a keyword as a name
  ValueId cl =
      b.op1(OpKind::kClip, {b.add(x, in)},
            {{"min", -std::numeric_limits<double>::infinity()}, {"max", 1e-300}}, "output");
  ValueId hs = b.op1(OpKind::kHardSigmoid, {cl}, {{"alpha", 0.1}, {"beta", -0.0}}, "9lives");
  ValueId p = b.pad(hs, {1, 2}, std::numeric_limits<double>::denorm_min());
  ValueId big = b.pad(p, {0, 0}, 1e300);
  ValueId whole = b.pad(big, {0, 0}, 3.0);  // prints "3.0", not "3"
  b.rename(whole, "graph");
  b.output(whole);
  Graph g = round_trip(must_build(b));
  const Node* node = g.find_node("output");
  REQUIRE(node != nullptr);
  CHECK(std::isinf(node->attrs.at("min").as_float()));
  CHECK(std::signbit(g.find_node("9lives")->attrs.at("beta").as_float()));
  CHECK(g.node(4).attrs.at("value").is_float());
}

TEST_CASE("ir/text/round trip of the rounding, trigonometric and fmod ops") {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  const OpKind unary[] = {OpKind::kFloor, OpKind::kCeil, OpKind::kRound, OpKind::kTrunc, OpKind::kSin,
                          OpKind::kCos,   OpKind::kTan,  OpKind::kAsin,  OpKind::kAcos,  OpKind::kAtan,
                          OpKind::kSinh,  OpKind::kCosh, OpKind::kAsinh, OpKind::kAcosh, OpKind::kAtanh};
  ValueId t = x;
  for (OpKind op : unary) t = b.op1(op, {t});
  b.output(b.fmod(t, x));
  const Graph g0 = must_build(b);
  CHECK(print(g0).find(" = atanh(") != std::string::npos);
  Graph g = round_trip(g0);
  REQUIRE(g.nodes.size() == std::size(unary) + 1);
  for (size_t i = 0; i < std::size(unary); ++i) CHECK(g.node(static_cast<NodeId>(i)).op == unary[i]);
  CHECK(g.nodes.back().op == OpKind::kFmod);
}

TEST_CASE("ir/text/round trip of every attribute kind") {
  Graph g;
  g.name = "attrs";
  g.values.push_back(Value{0, "x", f32({2}), ValueKind::kInput, kNoNode, {}});
  g.values.push_back(Value{1, "y", f32({2}), ValueKind::kIntermediate, 0, {}});
  g.nodes.push_back(Node{0,
                         "n",
                         OpKind::kIdentity,
                         {0},
                         {1},
                         Attrs{{"i", -7},
                               {"f", 2.5},
                               {"s", "a \"b\""},
                               {"ints", std::vector<int64_t>{1, -2, 3}},
                               {"no_ints", std::vector<int64_t>{}},
                               {"floats", std::vector<double>{1.0, -0.5, 1e-7}},
                               {"no_floats", std::vector<double>{}},
                               {"big", std::numeric_limits<int64_t>::min()}}});
  g.outputs = {1};
  // Unknown attributes fail verify(), but the text form still carries them exactly.
  Result<Graph> back = parse(print(g));
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  CHECK(*back == g);
  CHECK(contains(print(g), "no_floats=f[]"));
  CHECK(contains(print(g), "floats=[1.0,-0.5,1e-07]"));
}

TEST_CASE("ir/text/parse accepts comments forward references and free layout") {
  const char* text =
      "# a comment line\n"
      "graph g {  # trailing comment\n"
      "  input x: f32[2]\n"
      "  n1 = relu(t) -> u: f32[2]\n"
      "  n0 = neg(x)\n"
      "     -> t: f32[2]\n"
      "  output u\n"
      "  output t\n"
      "}\n";
  Result<Graph> g = parse(text);
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  CHECK(g->nodes.size() == 2);
  CHECK(g->outputs == std::vector<ValueId>{1, 2});
  CHECK(verify(*g).ok());  // not topological in id order, but acyclic
}

TEST_CASE("ir/text/parse error has line and column and what was expected") {
  Status s = parse_error("graph g {\n  input x: f32[2]\n  n = relu(x x) -> y: f32[2]\n}\n");
  CHECK(s.message() == "3:14: expected ')' after operand list, found 'x'");
  s = parse_error("graph g {\n  input x f32[2]\n}");
  CHECK(s.message() == "2:11: expected ':' after value name 'x', found 'f32'");
  s = parse_error("graph g {\n  input x: f32[2,]\n}");
  CHECK(s.message() == "2:18: expected a dimension, found ']'");
  s = parse_error("graph g {\n  input x: f32[2]\n");
  CHECK(s.message() == "3:1: expected '}' to close the graph, found end of input");
  s = parse_error("grph g {}");
  CHECK(s.message() == "1:1: expected 'graph', found 'grph'");
  s = parse_error("graph g {} extra");
  CHECK(s.message() == "1:12: expected end of input after the graph, found 'extra'");
}

TEST_CASE("ir/text/parse error on unknown op") {
  Status s = parse_error("graph g {\n  input x: f32[2]\n  n = frobnicate(x) -> y: f32[2]\n}");
  CHECK(s.message() == "3:7: unknown op 'frobnicate'");
}

TEST_CASE("ir/text/parse error on unknown value") {
  Status s = parse_error("graph g {\n  input x: f32[2]\n  n = add(x, z) -> y: f32[2]\n}");
  CHECK(s.message() == "3:14: unknown value 'z'");
  s = parse_error("graph g {\n  input x: f32[2]\n  output x, nope\n}");
  CHECK(s.message() == "3:13: unknown value 'nope'");
}

TEST_CASE("ir/text/parse error on bad dtype") {
  Status s = parse_error("graph g {\n  input x: f33[2]\n}");
  CHECK(contains(s.message(), "2:12: unknown dtype 'f33'"));
  s = parse_error("graph g {\n  n = cast() -> y: [2]\n}");
  CHECK(s.message() == "2:20: expected a dtype (f32, i64, ...), found '['");
}

TEST_CASE("ir/text/parse errors on redefinitions strings numbers and data") {
  Status s = parse_error("graph g {\n  input x: f32[2]\n  input x: f32[3]\n}");
  CHECK(s.message() == "3:9: value 'x' is already defined at 2:9");
  s = parse_error(
      "graph g {\n  input x: f32[2]\n  n = relu(x) -> y: f32[2]\n  n = neg(x) -> z: f32[2]\n}");
  CHECK(s.message() == "4:3: node 'n' is already defined");
  s = parse_error("graph g {\n  input \"x: f32[2]\n}");
  CHECK(contains(s.message(), "2:9: unterminated string"));
  s = parse_error("graph g {\n  input \"a\\q\": f32[2]\n}");
  CHECK(contains(s.message(), "2:11: invalid escape"));
  s = parse_error("graph g {\n  const c: u8[2] = hex\"0g01\"\n}");
  CHECK(s.message() == "2:25: constant data may only hold hex digits");
  s = parse_error("graph g {\n  const c: u8[2] = hex\"001\"\n}");
  CHECK(contains(s.message(), "even number of hex digits"));
  s = parse_error("graph g {\n  const c: u8[2] = \"00\"\n}");
  CHECK(contains(s.message(), "2:20: expected hex\"...\" constant data"));
  s = parse_error("graph g {\n  input x: f32[99999999999999999999]\n}");
  CHECK(contains(s.message(), "2:16: integer '99999999999999999999' does not fit"));
  s = parse_error("graph g {\n  input x: f32[2]\n  n = relu(x) {a=1.2.3} -> y: f32[2]\n}");
  CHECK(s.message() == "3:18: invalid number '1.2.3'");
  s = parse_error("graph g {\n  input x: f32[2]\n  n = relu(x) {a=1, a=2} -> y: f32[2]\n}");
  CHECK(s.message() == "3:21: attribute 'a' is given twice");
  s = parse_error("graph g {\n  input x: f32[2]\n  n = relu(x) {a=} -> y: f32[2]\n}");
  CHECK(s.message() == "3:18: expected a number, found '}'");
}
