#include "carve/ir/builder.h"

#include <fmt/format.h>

#include "carve/ir/infer.h"
#include "carve/ir/verify.h"

namespace carve::ir {
namespace {

std::vector<int64_t> to_vec(std::span<const int64_t> a) { return {a.begin(), a.end()}; }

}  // namespace

GraphBuilder::GraphBuilder(std::string graph_name) { graph_.name = std::move(graph_name); }

bool GraphBuilder::fail(Status status) {
  if (status_.ok()) status_ = std::move(status);
  return false;
}

std::string GraphBuilder::unique_value_name(std::string base) {
  if (!value_names_.contains(base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = fmt::format("{}_{}", base, i);
    if (!value_names_.contains(candidate)) return candidate;
  }
}

ValueId GraphBuilder::declare(std::string name, TensorType type, ValueKind kind,
                              std::optional<std::vector<uint8_t>> data) {
  if (!status_.ok()) return kNoValue;
  std::string what = fmt::format("{} '{}'", value_kind_name(kind), name);
  if (name.empty() || value_names_.contains(name)) {
    fail(Status(ErrorCode::kInvalidArgument, what + ": empty, or a value with this name exists"));
    return kNoValue;
  }
  Status valid = type.validate();
  if (!valid.ok()) {
    fail(valid.with_context(what));
    return kNoValue;
  }
  if (data.has_value() && static_cast<int64_t>(data->size()) != *type.byte_size()) {
    fail(Status(ErrorCode::kInvalidArgument,
                fmt::format("{}: data has {} bytes, {} needs {}", what, data->size(),
                            type.to_string(), *type.byte_size())));
    return kNoValue;
  }
  ValueId id = graph_.num_values();
  value_names_.insert(name);
  graph_.values.push_back(
      Value{id, std::move(name), std::move(type), kind, kNoNode, std::move(data)});
  return id;
}

ValueId GraphBuilder::input(std::string name, DType dtype, Shape shape) {
  return declare(std::move(name), TensorType{dtype, std::move(shape)}, ValueKind::kInput,
                 std::nullopt);
}

ValueId GraphBuilder::constant(std::string name, DType dtype, Shape shape,
                               std::optional<std::vector<uint8_t>> data) {
  return declare(std::move(name), TensorType{dtype, std::move(shape)}, ValueKind::kConstant,
                 std::move(data));
}

void GraphBuilder::handle(std::string name, DType dtype, Shape shape) {
  if (!status_.ok()) return;
  std::string what = fmt::format("handle '{}'", name);
  if (name.empty() || graph_.find_handle(name) != nullptr) {
    fail(Status(ErrorCode::kInvalidArgument, what + ": empty or already declared"));
    return;
  }
  TensorType type{dtype, std::move(shape)};
  Status valid = type.validate();
  if (!valid.ok()) {
    fail(valid.with_context(what));
    return;
  }
  graph_.handles.push_back(Handle{std::move(name), std::move(type)});
}

void GraphBuilder::output(ValueId value) {
  if (!status_.ok()) return;
  if (!graph_.has_value(value)) {
    fail(Status(ErrorCode::kInvalidArgument, fmt::format("output: no value #{}", value)));
    return;
  }
  if (graph_.is_output(value)) {
    fail(Status(ErrorCode::kInvalidArgument,
                fmt::format("output: value '{}' is already an output", graph_.value(value).name)));
    return;
  }
  graph_.outputs.push_back(value);
}

ValueId GraphBuilder::rename(ValueId value, std::string name) {
  if (!status_.ok()) return kNoValue;
  if (!graph_.has_value(value)) {
    fail(Status(ErrorCode::kInvalidArgument, fmt::format("rename: no value #{}", value)));
    return kNoValue;
  }
  std::string& current = graph_.value(value).name;
  if (current == name) return value;
  if (name.empty() || value_names_.contains(name)) {
    fail(Status(ErrorCode::kInvalidArgument,
                fmt::format("rename '{}' to '{}': empty or already used", current, name)));
    return kNoValue;
  }
  value_names_.erase(current);
  value_names_.insert(name);
  current = std::move(name);
  return value;
}

std::vector<ValueId> GraphBuilder::op(OpKind kind, std::vector<ValueId> inputs, Attrs attrs,
                                      std::string node_name) {
  if (!status_.ok()) return {};
  NodeId id = graph_.num_nodes();
  if (node_name.empty()) {
    std::string base = fmt::format("{}_{}", op_name(kind), id);
    node_name = base;
    for (int i = 1; node_names_.contains(node_name); ++i) node_name = fmt::format("{}_{}", base, i);
  }
  std::string where = fmt::format("node '{}' ({})", node_name, op_name(kind));
  if (node_names_.contains(node_name)) {
    fail(Status(ErrorCode::kInvalidArgument, where + ": a node with this name exists"));
    return {};
  }
  std::vector<TensorType> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!graph_.has_value(inputs[i])) {
      fail(Status(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: input #{} is not a value of this graph (id {})", where, i, inputs[i])));
      return {};
    }
    types.push_back(graph_.value(inputs[i]).type);
  }
  Result<std::vector<TensorType>> out = infer_types(kind, types, attrs, graph_.handles);
  if (!out.ok()) {
    if (!inputs.empty()) where += " on " + describe_operands(graph_, inputs);
    fail(out.status().with_context(where));
    return {};
  }
  Node node{id, node_name, kind, std::move(inputs), {}, std::move(attrs)};
  std::vector<ValueId> results;
  for (size_t k = 0; k < out->size(); ++k) {
    std::string base = out->size() == 1 ? node_name : fmt::format("{}_{}", node_name, k);
    std::string name = unique_value_name(std::move(base));
    ValueId v = graph_.num_values();
    value_names_.insert(name);
    graph_.values.push_back(
        Value{v, std::move(name), std::move((*out)[k]), ValueKind::kIntermediate, id, std::nullopt});
    node.outputs.push_back(v);
    results.push_back(v);
  }
  node_names_.insert(node_name);
  graph_.nodes.push_back(std::move(node));
  return results;
}

ValueId GraphBuilder::op1(OpKind kind, std::vector<ValueId> inputs, Attrs attrs,
                          std::string node_name) {
  if (!status_.ok()) return kNoValue;
  if (is_valid_op(kind) && op_traits(kind).max_outputs != 1) {
    fail(Status(
        ErrorCode::kInvalidArgument,
        fmt::format("op1 used with {}, which does not have exactly one output", op_name(kind))));
    return kNoValue;
  }
  std::vector<ValueId> out = op(kind, std::move(inputs), std::move(attrs), std::move(node_name));
  return out.size() == 1 ? out[0] : kNoValue;
}

ValueId GraphBuilder::hard_sigmoid(ValueId x, double alpha, double beta) {
  return op1(OpKind::kHardSigmoid, {x}, {{"alpha", alpha}, {"beta", beta}});
}

ValueId GraphBuilder::clip(ValueId x, double min, double max) {
  return op1(OpKind::kClip, {x}, {{"min", min}, {"max", max}});
}

ValueId GraphBuilder::cast(ValueId x, DType to) {
  return op1(OpKind::kCast, {x}, {{"to", dtype_name(to)}});
}

namespace {
Attrs reduce_attrs(std::vector<int64_t> axes, bool keepdims) {
  Attrs a{{"keepdims", keepdims}};
  if (!axes.empty()) a["axes"] = std::move(axes);
  return a;
}
}  // namespace

ValueId GraphBuilder::reduce_sum(ValueId x, std::vector<int64_t> axes, bool keepdims) {
  return op1(OpKind::kReduceSum, {x}, reduce_attrs(std::move(axes), keepdims));
}
ValueId GraphBuilder::reduce_mean(ValueId x, std::vector<int64_t> axes, bool keepdims) {
  return op1(OpKind::kReduceMean, {x}, reduce_attrs(std::move(axes), keepdims));
}
ValueId GraphBuilder::reduce_max(ValueId x, std::vector<int64_t> axes, bool keepdims) {
  return op1(OpKind::kReduceMax, {x}, reduce_attrs(std::move(axes), keepdims));
}
ValueId GraphBuilder::arg_max(ValueId x, int64_t axis, bool keepdims, bool select_last_index) {
  return op1(OpKind::kArgMax, {x},
             {{"axis", axis}, {"keepdims", int64_t{keepdims}}, {"select_last_index", int64_t{select_last_index}}});
}
ValueId GraphBuilder::arg_min(ValueId x, int64_t axis, bool keepdims, bool select_last_index) {
  return op1(OpKind::kArgMin, {x},
             {{"axis", axis}, {"keepdims", int64_t{keepdims}}, {"select_last_index", int64_t{select_last_index}}});
}

ValueId GraphBuilder::softmax(ValueId x, int64_t axis) {
  return op1(OpKind::kSoftmax, {x}, {{"axis", axis}});
}

ValueId GraphBuilder::layer_norm(ValueId x, ValueId scale, std::optional<ValueId> bias,
                                 int64_t axis, double epsilon) {
  std::vector<ValueId> in = {x, scale};
  if (bias) in.push_back(*bias);
  return op1(OpKind::kLayerNorm, std::move(in), {{"axis", axis}, {"epsilon", epsilon}});
}

ValueId GraphBuilder::batch_norm(ValueId x, ValueId scale, ValueId bias, ValueId mean, ValueId var,
                                 double epsilon) {
  return op1(OpKind::kBatchNorm, {x, scale, bias, mean, var}, {{"epsilon", epsilon}});
}

ValueId GraphBuilder::gemm(ValueId a, ValueId b, std::optional<ValueId> c, bool trans_a,
                           bool trans_b, double alpha, double beta) {
  std::vector<ValueId> in = {a, b};
  if (c) in.push_back(*c);
  return op1(OpKind::kGemm, std::move(in),
             {{"trans_a", trans_a}, {"trans_b", trans_b}, {"alpha", alpha}, {"beta", beta}});
}

ValueId GraphBuilder::conv2d(ValueId x, ValueId w, std::optional<ValueId> bias,
                             const Conv2dOptions& o) {
  std::vector<ValueId> in = {x, w};
  if (bias) in.push_back(*bias);
  return op1(OpKind::kConv2d, std::move(in),
             {{"groups", o.groups},
              {"strides", to_vec(o.strides)},
              {"pads", to_vec(o.pads)},
              {"dilations", to_vec(o.dilations)}});
}

ValueId GraphBuilder::max_pool(ValueId x, const PoolOptions& o) {
  return op1(OpKind::kMaxPool, {x},
             {{"kernel", to_vec(o.kernel)},
              {"strides", to_vec(o.strides)},
              {"pads", to_vec(o.pads)},
              {"ceil_mode", o.ceil_mode}});
}

ValueId GraphBuilder::avg_pool(ValueId x, const PoolOptions& o) {
  return op1(OpKind::kAvgPool, {x},
             {{"kernel", to_vec(o.kernel)},
              {"strides", to_vec(o.strides)},
              {"pads", to_vec(o.pads)},
              {"ceil_mode", o.ceil_mode},
              {"count_include_pad", o.count_include_pad}});
}

ValueId GraphBuilder::concat(std::vector<ValueId> inputs, int64_t axis) {
  return op1(OpKind::kConcat, std::move(inputs), {{"axis", axis}});
}

std::vector<ValueId> GraphBuilder::split(ValueId x, int64_t axis, std::vector<int64_t> sizes) {
  return op(OpKind::kSplit, {x}, {{"axis", axis}, {"sizes", std::move(sizes)}});
}

ValueId GraphBuilder::slice(ValueId x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                            std::vector<int64_t> axes, std::vector<int64_t> steps) {
  Attrs a{{"starts", std::move(starts)}, {"ends", std::move(ends)}};
  if (!axes.empty()) a["axes"] = std::move(axes);
  if (!steps.empty()) a["steps"] = std::move(steps);
  return op1(OpKind::kSlice, {x}, std::move(a));
}

ValueId GraphBuilder::transpose(ValueId x, std::vector<int64_t> perm) {
  return op1(OpKind::kTranspose, {x}, {{"perm", std::move(perm)}});
}

ValueId GraphBuilder::pad(ValueId x, std::vector<int64_t> pads, double value) {
  return op1(OpKind::kPad, {x}, {{"pads", std::move(pads)}, {"value", value}});
}

ValueId GraphBuilder::gather(ValueId data, ValueId indices, int64_t axis) {
  return op1(OpKind::kGather, {data, indices}, {{"axis", axis}});
}
ValueId GraphBuilder::gather_elements(ValueId data, ValueId indices, int64_t axis) {
  return op1(OpKind::kGatherElements, {data, indices}, {{"axis", axis}});
}
ValueId GraphBuilder::gather_nd(ValueId data, ValueId indices, int64_t batch_dims) {
  return op1(OpKind::kGatherNd, {data, indices}, {{"batch_dims", batch_dims}});
}
ValueId GraphBuilder::scatter_nd(ValueId data, ValueId indices, ValueId updates, std::string reduction) {
  return op1(OpKind::kScatterNd, {data, indices, updates}, {{"reduction", std::move(reduction)}});
}
std::vector<ValueId> GraphBuilder::top_k(ValueId x, int64_t k, int64_t axis, bool largest) {
  return op(OpKind::kTopK, {x}, {{"axis", axis}, {"k", k}, {"largest", int64_t{largest}}});
}

ValueId GraphBuilder::reshape(ValueId x, std::vector<int64_t> shape) {
  return op1(OpKind::kReshape, {x}, {{"shape", std::move(shape)}});
}

ValueId GraphBuilder::flatten(ValueId x, int64_t axis) {
  return op1(OpKind::kFlatten, {x}, {{"axis", axis}});
}

ValueId GraphBuilder::squeeze(ValueId x, std::vector<int64_t> axes) {
  Attrs a;
  if (!axes.empty()) a["axes"] = std::move(axes);
  return op1(OpKind::kSqueeze, {x}, std::move(a));
}

ValueId GraphBuilder::unsqueeze(ValueId x, std::vector<int64_t> axes) {
  return op1(OpKind::kUnsqueeze, {x}, {{"axes", std::move(axes)}});
}

ValueId GraphBuilder::read_handle(std::string handle) {
  return op1(OpKind::kReadHandle, {}, {{"handle", std::move(handle)}});
}

NodeId GraphBuilder::write_handle(std::string handle, ValueId value) {
  if (!status_.ok()) return kNoNode;
  op(OpKind::kWriteHandle, {value}, {{"handle", std::move(handle)}});
  return status_.ok() ? graph_.num_nodes() - 1 : kNoNode;
}

NodeId GraphBuilder::write_handle_at(std::string handle, ValueId value, ValueId pos, int64_t axis) {
  if (!status_.ok()) return kNoNode;
  op(OpKind::kWriteHandleAt, {value, pos}, {{"handle", std::move(handle)}, {"axis", axis}});
  return status_.ok() ? graph_.num_nodes() - 1 : kNoNode;
}

Result<Graph> GraphBuilder::build() {
  if (!status_.ok()) return status_;
  CARVE_RETURN_IF_ERROR(verify(graph_));
  Graph out = std::move(graph_);
  graph_ = Graph{};
  value_names_.clear();
  node_names_.clear();
  return out;
}

}  // namespace carve::ir
