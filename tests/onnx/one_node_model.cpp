#include "one_node_model.h"

#include <doctest/doctest.h>

#include <cmath>
#include <span>

#include "carve/runtime/session.h"

namespace carve::onnx_test {

using reference::HostTensor;

namespace {

std::vector<runtime::Buffer> borrow(const std::vector<HostTensor>& inputs) {
  std::vector<runtime::Buffer> buffers;
  for (const HostTensor& t : inputs) {
    auto b = runtime::Buffer::borrow(std::as_bytes(std::span(t.bytes)), t.type.dtype, t.type.shape);
    REQUIRE(b.ok());
    buffers.push_back(*b);
  }
  return buffers;
}

}  // namespace

Result<onnx::ImportedModel> import(const Model& m) {
  const std::string bytes = m.proto.SerializeAsString();
  return onnx::import_model_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "ops.onnx");
}

std::vector<Values> run(const Model& m, const std::vector<HostTensor>& inputs, int threads) {
  auto model = import(m);
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  std::vector<Values> results;
  auto ref = carve::reference::run_reference(model->graph, inputs);
  REQUIRE_MESSAGE(ref.ok(), ref.status().to_string());
  results.push_back((*ref)[m.result].to_doubles());
  carve::runtime::SessionOptions options;
  options.threads = threads;
  auto session = carve::runtime::Session::create(options);
  REQUIRE(session.ok());
  auto program = (*session)->compile(model->graph);
  if (!program.ok() && program.status().code() == ErrorCode::kUnavailable) return results;
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto outputs = (*program)->run(borrow(inputs));
  REQUIRE_MESSAGE(outputs.ok(), outputs.status().to_string());
  const carve::runtime::Buffer& result = (*outputs)[m.result];
  auto bytes = result.bytes();
  REQUIRE(bytes.ok());
  HostTensor out;
  out.type = carve::ir::TensorType{result.dtype(), result.shape()};
  const auto* first = reinterpret_cast<const uint8_t*>(bytes->data());
  out.bytes.assign(first, first + bytes->size());
  results.push_back(out.to_doubles());
  return results;
}

void check_close(const Model& m, const std::vector<HostTensor>& inputs, const Values& expected, double rtol,
                 double atol) {
  for (const Values& actual : run(m, inputs)) {
    REQUIRE(actual.size() == expected.size());
    for (size_t k = 0; k < expected.size(); ++k) {
      INFO(m.op->op_type() << " element " << k << ": " << actual[k] << " vs " << expected[k]);
      if (std::isnan(expected[k])) {
        CHECK(std::isnan(actual[k]));
      } else if (std::isinf(expected[k])) {
        CHECK(actual[k] == expected[k]);
      } else {
        CHECK(std::abs(actual[k] - expected[k]) <= rtol * std::abs(expected[k]) + atol);
      }
    }
  }
}

void check_fails(const Model& m, ErrorCode code, const std::string& what) {
  auto r = import(m);
  INFO(r.status().to_string());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == code);
  CHECK(r.status().message().find("onnx node 'the_node' (" + m.op->op_type() + ")") != std::string::npos);
  CHECK(r.status().message().find(what) != std::string::npos);
}

void check_run_fails(const Model& m, const std::vector<HostTensor>& inputs, ErrorCode code, const std::string& what) {
  auto model = import(m);
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  auto ref = carve::reference::run_reference(model->graph, inputs);
  REQUIRE_FALSE(ref.ok());
  CHECK(ref.status().code() == code);
  auto session = carve::runtime::Session::create();
  REQUIRE(session.ok());
  auto program = (*session)->compile(model->graph);
  if (!program.ok() && program.status().code() == ErrorCode::kUnavailable) return;  // no CPU JIT
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto outputs = (*program)->run(borrow(inputs));
  INFO(outputs.status().to_string());
  REQUIRE_FALSE(outputs.ok());
  CHECK(outputs.status().code() == code);
  CHECK(outputs.status().message().find(what) != std::string::npos);
}

}  // namespace carve::onnx_test
