// Helpers for the reference interpreter tests: one-op graphs and float comparisons.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/reference/reference.h"

namespace carve::reference::testing {

using ir::Attrs;
using ir::DType;
using ir::OpKind;
using ir::Shape;

// A graph with one input per tensor ("x0", "x1", ...), one `op` node and all its outputs
// as graph outputs; kNoValue-free. Fails the test when the builder rejects it.
inline ir::Graph one_op_graph(OpKind op, const std::vector<HostTensor>& inputs, Attrs attrs = {}) {
  ir::GraphBuilder b;
  std::vector<ir::ValueId> ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "x";  // += : g++ 12 warns (-Wrestrict) on "literal" + std::string
    name += std::to_string(i);
    ids.push_back(b.input(std::move(name), inputs[i].type.dtype, inputs[i].type.shape));
  }
  for (ir::ValueId v : b.op(op, ids, std::move(attrs), "n")) b.output(v);
  Result<ir::Graph> g = b.build();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  return std::move(g).value();
}

inline Result<std::vector<HostTensor>> try_op(OpKind op, const std::vector<HostTensor>& inputs,
                                              Attrs attrs = {}) {
  ir::Graph g = one_op_graph(op, inputs, std::move(attrs));
  return run_reference(g, inputs);
}

// Runs one op and returns its outputs; fails the test on error.
inline std::vector<HostTensor> run_op(OpKind op, const std::vector<HostTensor>& inputs,
                                      Attrs attrs = {}) {
  Result<std::vector<HostTensor>> r = try_op(op, inputs, std::move(attrs));
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  return std::move(r).value();
}
// The single output.
inline HostTensor run1(OpKind op, const std::vector<HostTensor>& inputs, Attrs attrs = {}) {
  std::vector<HostTensor> out = run_op(op, inputs, std::move(attrs));
  REQUIRE(out.size() == 1);
  return out[0];
}

inline HostTensor f32(Shape shape, std::vector<float> v) { return HostTensor::from<float>(std::move(shape), v); }
inline HostTensor f64(Shape shape, std::vector<double> v) { return HostTensor::from<double>(std::move(shape), v); }
inline HostTensor i32(Shape shape, std::vector<int32_t> v) { return HostTensor::from<int32_t>(std::move(shape), v); }
inline HostTensor i64(Shape shape, std::vector<int64_t> v) { return HostTensor::from<int64_t>(std::move(shape), v); }
inline HostTensor i8(Shape shape, std::vector<int8_t> v) { return HostTensor::from<int8_t>(std::move(shape), v); }
inline HostTensor u8(Shape shape, std::vector<uint8_t> v) { return HostTensor::from<uint8_t>(std::move(shape), v); }
inline HostTensor boolean(Shape shape, std::vector<bool> v) { return HostTensor::from<bool>(std::move(shape), v); }

// Element-wise |a - e| <= atol + rtol * |e|; NaN matches NaN, inf matches the same inf.
inline void check_close(const std::vector<double>& actual, const std::vector<double>& expected,
                        double atol = 1e-6, double rtol = 1e-6) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    INFO("element " << i << ": got " << a << ", expected " << e);
    if (std::isnan(e)) {
      CHECK(std::isnan(a));
    } else if (std::isinf(e)) {
      CHECK(a == e);
    } else {
      CHECK(std::fabs(a - e) <= atol + rtol * std::fabs(e));
    }
  }
}
inline void check_close(const HostTensor& t, const std::vector<double>& expected,
                        double atol = 1e-6, double rtol = 1e-6) {
  check_close(t.to_doubles(), expected, atol, rtol);
}

}  // namespace carve::reference::testing
