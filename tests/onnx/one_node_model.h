// One-node ONNX models built with the protobuf classes for the operator tests
// (ops_*_test.cpp): a Model to fill, and runs through the reference interpreter and
// (with the CPU JIT) a Session, checked against values the tests compute themselves.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "carve/onnx/import.h"
#include "carve/reference/reference.h"
#include "carve/status.h"

namespace carve::onnx_test {

using Values = std::vector<double>;

constexpr int kF32 = ::onnx::TensorProto::FLOAT;
constexpr int kI32 = ::onnx::TensorProto::INT32;
constexpr int kU8 = ::onnx::TensorProto::UINT8;
constexpr int kBool = ::onnx::TensorProto::BOOL;

// A one-node model: inputs are added with add_input, the node with `node`.
struct Model {
  ::onnx::ModelProto proto;
  ::onnx::NodeProto* op = nullptr;
  size_t result = 0;  // the graph output run() returns

  explicit Model(int64_t opset) {
    proto.set_ir_version(8);
    auto* o = proto.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    proto.mutable_graph()->set_name("g");
  }
  ::onnx::GraphProto& g() { return *proto.mutable_graph(); }
  Model& input(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
    auto* t = g().add_input();
    t->set_name(name);
    auto* tt = t->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    tt->mutable_shape();  // present even for a scalar: a missing shape means unknown
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    return *this;
  }
  Model& int64_init(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  Model& bool_init(const std::string& name, const std::vector<int>& values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::BOOL);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int v : values) t->add_int32_data(v);
    return *this;
  }
  // A float initializer (a constant input) of shape `dims`.
  Model& float_init(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return *this;
  }
  Model& node(const std::string& op_type, const std::vector<std::string>& inputs, int outputs = 1) {
    op = g().add_node();
    op->set_name("the_node");
    op->set_op_type(op_type);
    for (const auto& i : inputs) op->add_input(i);
    for (int i = 0; i < outputs; ++i) {
      op->add_output("y" + std::to_string(i));
      g().add_output()->set_name("y" + std::to_string(i));
    }
    return *this;
  }
  ::onnx::AttributeProto* attr(const std::string& name, ::onnx::AttributeProto::AttributeType type) {
    auto* a = op->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }
  Model& f(const std::string& name, float v) { attr(name, ::onnx::AttributeProto::FLOAT)->set_f(v); return *this; }
  Model& i(const std::string& name, int64_t v) { attr(name, ::onnx::AttributeProto::INT)->set_i(v); return *this; }
  Model& s(const std::string& name, const std::string& v) { attr(name, ::onnx::AttributeProto::STRING)->set_s(v); return *this; }
  Model& ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = attr(name, ::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
};

Result<onnx::ImportedModel> import(const Model& m);

// Output m.result of `m` on `inputs`: once from the reference interpreter and, where the CPU JIT
// is built, once from a Session (with `threads` workers; 0: hardware concurrency).
std::vector<Values> run(const Model& m, const std::vector<reference::HostTensor>& inputs, int threads = 0);

// Every result matches `expected` within rtol (relative) plus atol; NaN matches NaN.
void check_close(const Model& m, const std::vector<reference::HostTensor>& inputs, const Values& expected,
                 double rtol = 1e-5, double atol = 1e-6);

// The import fails with `code`, naming the node ('the_node') and containing `what`.
void check_fails(const Model& m, ErrorCode code, const std::string& what);

// The import succeeds and running `m` on `inputs` fails with `code`: in the reference
// interpreter and (with the CPU JIT) in a Session, whose message contains `what`.
void check_run_fails(const Model& m, const std::vector<reference::HostTensor>& inputs, ErrorCode code,
                     const std::string& what);

}  // namespace carve::onnx_test
