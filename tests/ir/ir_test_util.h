// Helpers shared by the ir test files.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/ir/graph.h"
#include "carve/ir/infer.h"
#include "carve/ir/verify.h"

namespace carve::ir::test {

inline TensorType tt(DType dtype, Shape shape) { return TensorType{dtype, std::move(shape)}; }
inline TensorType f32(Shape shape) { return tt(DType::kF32, std::move(shape)); }

inline Result<std::vector<TensorType>> infer(OpKind op, std::vector<TensorType> inputs,
                                             Attrs attrs = {}, std::vector<Handle> handles = {}) {
  return infer_types(op, inputs, attrs, handles);
}

// The single output type; fails the test case when inference fails.
inline TensorType infer1(OpKind op, std::vector<TensorType> inputs, Attrs attrs = {},
                         std::vector<Handle> handles = {}) {
  auto r = infer(op, std::move(inputs), std::move(attrs), std::move(handles));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  REQUIRE(r->size() == 1);
  return (*r)[0];
}

inline Shape shape_of(OpKind op, std::vector<TensorType> inputs, Attrs attrs = {}) {
  return infer1(op, std::move(inputs), std::move(attrs)).shape;
}

// The error code of a failing inference (kOk when it unexpectedly succeeds).
inline ErrorCode infer_error(OpKind op, std::vector<TensorType> inputs, Attrs attrs = {},
                             std::vector<Handle> handles = {}) {
  return infer(op, std::move(inputs), std::move(attrs), std::move(handles)).status().code();
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A verified graph or a failed test.
inline Graph must_build(GraphBuilder& b) {
  Result<Graph> g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(g).value();
}

}  // namespace carve::ir::test
