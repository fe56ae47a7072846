// ONNX If, Loop and Scan (the importer resolves them at import: the taken branch, the
// loop unrolled): models with subgraphs built here, run through the reference interpreter
// and a Session against values computed by hand, and the control flow carve cannot
// resolve at import refused naming the node.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "carve/onnx/model.h"
#include "carve/runtime/dynamic_program.h"
#include "carve/runtime/session.h"
#include "one_node_model.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_close;
using carve::onnx_test::check_fails;
using carve::onnx_test::kBool;
using carve::onnx_test::kF32;
using carve::onnx_test::Model;

namespace {

constexpr int kI64 = ::onnx::TensorProto::INT64;

// A subgraph: inputs (names, types optional as ONNX allows), nodes, outputs.
struct Body {
  ::onnx::GraphProto g;

  explicit Body(const std::string& name) { g.set_name(name); }
  Body& input(const std::string& name) {
    g.add_input()->set_name(name);
    return *this;
  }
  Body& node(const std::string& op_type, const std::vector<std::string>& inputs, const std::string& output) {
    auto* n = g.add_node();
    n->set_op_type(op_type);
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return *this;
  }
  // A scalar constant node (float or int64 by `elem_type`).
  Body& constant(const std::string& output, int elem_type, double value) {
    auto* n = g.add_node();
    n->set_op_type("Constant");
    n->add_output(output);
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(elem_type);
    if (elem_type == kI64) t->add_int64_data(static_cast<int64_t>(value));
    else t->add_float_data(static_cast<float>(value));
    return *this;
  }
  Body& output(const std::string& name) {
    g.add_output()->set_name(name);
    return *this;
  }
};

void set_graph(Model& m, const std::string& attr, const Body& body) {
  m.attr(attr, ::onnx::AttributeProto::GRAPH)->mutable_g()->CopyFrom(body.g);
}

HostTensor floats(std::vector<int64_t> dims, std::vector<float> values) {
  return HostTensor::from<float>(std::move(dims), std::move(values));
}

// If whose condition is an initializer: then = x + 1 (1 read from the outer scope's
// initializer), else = -x.
Model if_model(int cond) {
  Model m(13);
  m.input("x", kF32, {3}).bool_init("c", {cond}).float_init("one", {1}, {1.f});
  m.node("If", {"c"});
  set_graph(m, "then_branch", Body("then").node("Add", {"x", "one"}, "t").output("t"));
  set_graph(m, "else_branch", Body("else").node("Neg", {"x"}, "e").output("e"));
  return m;
}

// Loop: y carried, y += x each iteration, the running y scanned; `body_cond` is the
// body's condition node (it defines "cond_out" from i, cond_in and y_out).
Model loop_model(const std::string& trips, const std::vector<std::string>& body_cond_inputs,
                 const std::string& body_cond_op) {
  Model m(13);
  m.input("x", kF32, {2}).input("y", kF32, {2}).bool_init("go", {1});
  if (!trips.empty()) m.int64_init("M", {std::stoll(trips)});
  m.node("Loop", {trips.empty() ? "" : "M", "go", "y"}, 2);
  Body body("body");
  body.input("i").input("cond_in").input("y_in");
  body.node("Add", {"y_in", "x"}, "y_out");
  body.constant("one", kI64, 1);
  body.node(body_cond_op, body_cond_inputs, "cond_out");
  body.node("Identity", {"y_out"}, "scan");
  body.output("cond_out").output("y_out").output("scan");
  set_graph(m, "body", body);
  return m;
}

}  // namespace

TEST_CASE("onnx/control/if takes the branch its known condition picks") {
  const HostTensor x = floats({3}, {1.f, -2.f, 0.5f});
  check_close(if_model(1), {x}, {2.f, -1.f, 1.5f});
  check_close(if_model(0), {x}, {-1.f, 2.f, -0.5f});
}

TEST_CASE("onnx/control/if on a graph input is taken per value by onnx::Model") {
  Model m = if_model(1);
  m.g().clear_initializer();
  m.float_init("one", {1}, {1.f});
  m.input("c", kBool, {});
  m.g().mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar, not shape-less
  // Plain import: the condition is a graph value, refused naming the node and the input.
  check_fails(m, ErrorCode::kUnsupported, "'c'");
  const std::string bytes = m.proto.SerializeAsString();
  auto model = carve::onnx::Model::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "if.onnx");
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  auto session = carve::runtime::Session::create();
  REQUIRE(session.ok());
  auto program = (*session)->compile(std::shared_ptr<carve::onnx::Model>(std::move(*model)));
  REQUIRE(program.ok());
  const std::vector<float> x = {1.f, -2.f, 0.5f};
  for (bool c : {true, false}) {
    auto xb = carve::runtime::Buffer::borrow(std::as_bytes(std::span(x)), carve::ir::DType::kF32, carve::ir::Shape{3});
    const bool cv[1] = {c};
    auto cb = carve::runtime::Buffer::borrow(std::as_bytes(std::span(cv)), carve::ir::DType::kBool, carve::ir::Shape{});
    REQUIRE((xb.ok() && cb.ok()));
    auto out = (*program)->run({{*xb, *cb}});
    if (!out.ok() && out.status().code() == ErrorCode::kUnavailable) return;  // no CPU JIT in this build
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    auto y = (*out)[0].span<float>();
    REQUIRE(y.ok());
    CHECK(std::vector<float>(y->begin(), y->end()) ==
          (c ? std::vector<float>{2.f, -1.f, 1.5f} : std::vector<float>{-1.f, 2.f, -0.5f}));
  }
}

TEST_CASE("onnx/control/loop is unrolled with carried values and scan outputs") {
  const HostTensor x = floats({2}, {1.f, 10.f});
  const HostTensor y = floats({2}, {0.5f, -1.f});
  Model m = loop_model("3", {"cond_in"}, "Identity");
  check_close(m, {x, y}, {3.5f, 29.f});
  m.result = 1;  // the running sum after each of the 3 iterations, stacked
  check_close(m, {x, y}, {1.5f, 9.f, 2.5f, 19.f, 3.5f, 29.f});
}

TEST_CASE("onnx/control/loop stops when its condition turns false") {
  // cond_out = i < 1: iterations 0 and 1 run, the second says stop.
  Model m = loop_model("10", {"i", "one"}, "Less");
  const HostTensor x = floats({2}, {1.f, 10.f});
  const HostTensor y = floats({2}, {0.f, 0.f});
  check_close(m, {x, y}, {2.f, 20.f});
  m.result = 1;
  check_close(m, {x, y}, {1.f, 10.f, 2.f, 20.f});
}

TEST_CASE("onnx/control/loop conditions carve cannot know at import are refused") {
  // Computed from the data: cond_out = y_out[0] > y_out[1] (Greater on the carried value).
  Model data_cond = loop_model("3", {"y_out", "y_out"}, "Greater");
  check_fails(data_cond, ErrorCode::kUnsupported, "condition after iteration 0");
  // No trip count and a condition that stays true: refused, not unrolled forever.
  check_fails(loop_model("", {"cond_in"}, "Identity"), ErrorCode::kUnsupported, "still true after 4096");
  // A huge trip count over a body without nodes is bounded like one with nodes.
  Model empty_body(13);
  empty_body.input("y", kF32, {2}).int64_init("M", {1000000000}).bool_init("go", {1});
  empty_body.node("Loop", {"M", "go", "y"});
  set_graph(empty_body, "body", Body("body").input("i").input("c").input("v").output("c").output("v"));
  check_fails(empty_body, ErrorCode::kUnsupported, "more than 200000 nodes");
}

TEST_CASE("onnx/control/scan runs its body along any axis in either direction") {
  // x [2, 3] scanned along axis 1 backwards; the state sums the columns seen so far;
  // the scan output is stacked along axis 1 in the order the body ran.
  Model m(13);
  m.input("init", kF32, {2}).input("x", kF32, {2, 3});
  m.node("Scan", {"init", "x"}, 2).i("num_scan_inputs", 1).ints("scan_input_axes", {1}).ints(
      "scan_input_directions", {1}).ints("scan_output_axes", {1});
  set_graph(m, "body",
            Body("body").input("s_in").input("col").node("Add", {"s_in", "col"}, "s_out").node(
                "Identity", {"s_out"}, "z").output("s_out").output("z"));
  const HostTensor init = floats({2}, {0.f, 100.f});
  const HostTensor x = floats({2, 3}, {1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
  check_close(m, {init, x}, {6.f, 115.f});
  m.result = 1;  // columns 2, 1, 0 accumulated: [3, 5, 6] and [106, 111, 115]
  check_close(m, {init, x}, {3.f, 5.f, 6.f, 106.f, 111.f, 115.f});
}

TEST_CASE("onnx/control/a subgraph with the wrong number of inputs is a clear error") {
  Model m = loop_model("2", {"cond_in"}, "Identity");
  m.op->mutable_attribute(0)->mutable_g()->add_input()->set_name("extra");
  check_fails(m, ErrorCode::kInvalidArgument, "do not agree");
}

TEST_CASE("onnx/control/optional tensors are always present") {
  // An optional graph input is imported as its tensor; OptionalGetElement reads it and
  // OptionalHasElement says it is there; an empty Optional is refused.
  Model m(15);
  m.input("x", kF32, {2});
  auto* wrapped = m.g().mutable_input(0)->mutable_type();
  ::onnx::TypeProto tensor = *wrapped;
  *wrapped->mutable_optional_type()->mutable_elem_type() = tensor;
  m.node("OptionalGetElement", {"x"});
  check_close(m, {floats({2}, {1.5f, -2.f})}, {1.5f, -2.f});
  Model has(15);
  has.input("x", kF32, {2}).node("OptionalHasElement", {"x"});
  check_close(has, {floats({2}, {1.5f, -2.f})}, {1});
  Model empty(15);
  empty.input("x", kF32, {2}).node("Optional", {});
  check_fails(empty, ErrorCode::kUnsupported, "empty optional");
}
