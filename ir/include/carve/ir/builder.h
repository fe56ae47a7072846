// GraphBuilder: the C++ way to make a graph, one verified node at a time.
//
//   GraphBuilder b;
//   ValueId x = b.input("x", DType::kF32, {2, 3});
//   ValueId w = b.constant("w", DType::kF32, {3, 4});
//   ValueId y = b.relu(b.matmul(x, w));
//   b.output(y);
//   Result<Graph> g = b.build();
//
// Ownership/lifetime: the builder owns the graph under construction; build() moves it
// out, after which the builder is empty and must not be used again.
// Thread-safety: none; use one builder per thread.
// Errors are sticky: the first failing call (shape inference, unknown value id,
// duplicate name, bad declared type) records a Status naming the node ("node 'relu_3'
// (relu): ..."), later calls do nothing and return kNoValue, and build() returns that
// Status. So a chain of calls needs one check, at build().
//
// Naming: declarations take a name (unique among values); nodes are named
// "<op>_<node id>" and their outputs "<op>_<node id>" (single output) or
// "<op>_<node id>_<k>", with a "_<n>" suffix if that is taken. rename() and the
// node_name argument of op() override them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/status.h"

namespace carve::ir {

struct Conv2dOptions {
  int64_t groups = 1;
  std::array<int64_t, 2> strides = {1, 1};
  std::array<int64_t, 4> pads = {0, 0, 0, 0};  // top, left, bottom, right
  std::array<int64_t, 2> dilations = {1, 1};
};

struct PoolOptions {
  std::array<int64_t, 2> kernel = {1, 1};
  std::array<int64_t, 2> strides = {1, 1};
  std::array<int64_t, 4> pads = {0, 0, 0, 0};  // top, left, bottom, right
  bool ceil_mode = false;
  bool count_include_pad = false;  // avg_pool only
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name = "main");

  // --- declarations ---
  ValueId input(std::string name, DType dtype, Shape shape);
  // `data`, when given, must hold exactly the type's byte size.
  ValueId constant(std::string name, DType dtype, Shape shape,
                   std::optional<std::vector<uint8_t>> data = std::nullopt);
  void handle(std::string name, DType dtype, Shape shape);
  // Marks a value as a graph output (in call order).
  void output(ValueId value);
  // Renames a value; returns it for chaining.
  ValueId rename(ValueId value, std::string name);

  // --- any op: returns all outputs (none for sinks) ---
  std::vector<ValueId> op(OpKind kind, std::vector<ValueId> inputs, Attrs attrs = {},
                          std::string node_name = {});
  // For ops with exactly one output.
  ValueId op1(OpKind kind, std::vector<ValueId> inputs, Attrs attrs = {},
              std::string node_name = {});

  // --- unary elementwise ---
  ValueId neg(ValueId x) { return op1(OpKind::kNeg, {x}); }
  ValueId abs(ValueId x) { return op1(OpKind::kAbs, {x}); }
  ValueId exp(ValueId x) { return op1(OpKind::kExp, {x}); }
  ValueId log(ValueId x) { return op1(OpKind::kLog, {x}); }
  ValueId sqrt(ValueId x) { return op1(OpKind::kSqrt, {x}); }
  ValueId rsqrt(ValueId x) { return op1(OpKind::kRsqrt, {x}); }
  ValueId tanh(ValueId x) { return op1(OpKind::kTanh, {x}); }
  ValueId sigmoid(ValueId x) { return op1(OpKind::kSigmoid, {x}); }
  ValueId relu(ValueId x) { return op1(OpKind::kRelu, {x}); }
  ValueId gelu(ValueId x) { return op1(OpKind::kGelu, {x}); }
  ValueId erf(ValueId x) { return op1(OpKind::kErf, {x}); }
  ValueId silu(ValueId x) { return op1(OpKind::kSilu, {x}); }
  ValueId hard_sigmoid(ValueId x, double alpha = 0.2, double beta = 0.5);
  ValueId clip(ValueId x, double min, double max);

  // --- binary elementwise (numpy broadcasting) and comparisons (bool output) ---
  ValueId add(ValueId a, ValueId b) { return op1(OpKind::kAdd, {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return op1(OpKind::kSub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return op1(OpKind::kMul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return op1(OpKind::kDiv, {a, b}); }
  ValueId pow(ValueId a, ValueId b) { return op1(OpKind::kPow, {a, b}); }
  ValueId max(ValueId a, ValueId b) { return op1(OpKind::kMax, {a, b}); }
  ValueId min(ValueId a, ValueId b) { return op1(OpKind::kMin, {a, b}); }
  ValueId fmod(ValueId a, ValueId b) { return op1(OpKind::kFmod, {a, b}); }
  ValueId equal(ValueId a, ValueId b) { return op1(OpKind::kEqual, {a, b}); }
  ValueId not_equal(ValueId a, ValueId b) { return op1(OpKind::kNotEqual, {a, b}); }
  ValueId less(ValueId a, ValueId b) { return op1(OpKind::kLess, {a, b}); }
  ValueId less_equal(ValueId a, ValueId b) { return op1(OpKind::kLessEqual, {a, b}); }
  ValueId greater(ValueId a, ValueId b) { return op1(OpKind::kGreater, {a, b}); }
  ValueId greater_equal(ValueId a, ValueId b) { return op1(OpKind::kGreaterEqual, {a, b}); }
  ValueId where(ValueId cond, ValueId x, ValueId y) { return op1(OpKind::kWhere, {cond, x, y}); }
  ValueId cast(ValueId x, DType to);

  // --- reductions (empty axes = all), normalisation, linear algebra ---
  ValueId reduce_sum(ValueId x, std::vector<int64_t> axes, bool keepdims = true);
  ValueId reduce_mean(ValueId x, std::vector<int64_t> axes, bool keepdims = true);
  ValueId reduce_max(ValueId x, std::vector<int64_t> axes, bool keepdims = true);
  // arg_max / arg_min: i64 indices along `axis`.
  ValueId arg_max(ValueId x, int64_t axis = 0, bool keepdims = true, bool select_last_index = false);
  ValueId arg_min(ValueId x, int64_t axis = 0, bool keepdims = true, bool select_last_index = false);
  ValueId softmax(ValueId x, int64_t axis = -1);
  ValueId layer_norm(ValueId x, ValueId scale, std::optional<ValueId> bias, int64_t axis = -1,
                     double epsilon = 1e-5);
  ValueId batch_norm(ValueId x, ValueId scale, ValueId bias, ValueId mean, ValueId var,
                     double epsilon = 1e-5);
  ValueId matmul(ValueId a, ValueId b) { return op1(OpKind::kMatmul, {a, b}); }
  ValueId gemm(ValueId a, ValueId b, std::optional<ValueId> c = std::nullopt, bool trans_a = false,
               bool trans_b = false, double alpha = 1.0, double beta = 1.0);
  ValueId conv2d(ValueId x, ValueId w, std::optional<ValueId> bias = std::nullopt,
                 const Conv2dOptions& options = {});
  ValueId max_pool(ValueId x, const PoolOptions& options);
  ValueId avg_pool(ValueId x, const PoolOptions& options);
  ValueId global_avg_pool(ValueId x) { return op1(OpKind::kGlobalAvgPool, {x}); }

  // --- data movement ---
  ValueId concat(std::vector<ValueId> inputs, int64_t axis);
  std::vector<ValueId> split(ValueId x, int64_t axis, std::vector<int64_t> sizes);
  // Empty axes/steps mean the defaults (0..n-1 and all 1).
  ValueId slice(ValueId x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {});
  ValueId transpose(ValueId x, std::vector<int64_t> perm);
  ValueId pad(ValueId x, std::vector<int64_t> pads, double value = 0.0);
  ValueId gather(ValueId data, ValueId indices, int64_t axis = 0);
  ValueId gather_elements(ValueId data, ValueId indices, int64_t axis = 0);
  ValueId gather_nd(ValueId data, ValueId indices, int64_t batch_dims = 0);
  ValueId scatter_nd(ValueId data, ValueId indices, ValueId updates, std::string reduction = "none");
  // top_k: {values, indices}.
  std::vector<ValueId> top_k(ValueId x, int64_t k, int64_t axis = -1, bool largest = true);

  // --- views ---
  ValueId reshape(ValueId x, std::vector<int64_t> shape);
  ValueId flatten(ValueId x, int64_t axis = 1);
  // Empty axes = every dim of size 1.
  ValueId squeeze(ValueId x, std::vector<int64_t> axes = {});
  ValueId unsqueeze(ValueId x, std::vector<int64_t> axes);
  ValueId identity(ValueId x) { return op1(OpKind::kIdentity, {x}); }

  // --- state ---
  ValueId read_handle(std::string handle);
  NodeId write_handle(std::string handle, ValueId value);
  NodeId write_handle_at(std::string handle, ValueId value, ValueId pos, int64_t axis);

  // The first error so far (ok when none).
  const Status& status() const { return status_; }
  // The graph so far (for inspection; it may be incomplete).
  const Graph& graph() const { return graph_; }
  // The finished graph, verified; or the first error.
  Result<Graph> build();

 private:
  bool fail(Status status);
  std::string unique_value_name(std::string base);
  ValueId declare(std::string name, TensorType type, ValueKind kind,
                  std::optional<std::vector<uint8_t>> data);

  Graph graph_;
  Status status_;
  std::set<std::string, std::less<>> value_names_;
  std::set<std::string, std::less<>> node_names_;
};

}  // namespace carve::ir
