// Context (materializing known tensors, unique names) and NodeContext (inputs,
// attributes, building with folding, outputs) for the ONNX lowerings.
#include "context.h"

#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include <algorithm>

namespace carve::onnx::detail {
namespace {

using ::onnx::AttributeProto;

std::string_view attr_type_name(const AttributeProto& a) {
  return AttributeProto::AttributeType_Name(a.type());
}

}  // namespace

// ---------------------------------------------------------------- Context

std::string Context::unique_node_name(std::string base) {
  if (base.empty()) base = "node";
  std::string name = base;
  // A lowering that emits many nodes (an unrolled LSTM: thousands) asks for its base again
  // and again: resume after the last suffix taken, or naming would be quadratic.
  int& next = next_suffix_[base];
  for (int i = std::max(next, 1); node_names_.contains(name); ++i) {
    name = fmt::format("{}#{}", base, i);
    next = i + 1;
  }
  node_names_.insert(name);
  return name;
}

std::string Context::unique_value_name(const std::string& base) {
  const std::string root = base.empty() ? "value" : base;
  std::string name = root;
  for (int i = 1; builder.graph().find_value(name) != nullptr; ++i) name = fmt::format("{}#{}", root, i);
  return name;
}

Result<ir::ValueId> Context::materialize(Tensor& t) {
  if (t.value != ir::kNoValue) return t.value;
  if (!t.data) return Status(ErrorCode::kInternal, "onnx import: a tensor with neither value nor data");
  Data& d = *t.data;
  if (d.value != ir::kNoValue) return t.value = d.value;
  const std::string name = unique_value_name(d.name);
  std::optional<std::vector<uint8_t>> bytes;
  if (d.known && d.mapped) {
    mapped_weights.emplace(name, *d.mapped);
  } else if (d.known) {
    // The graph takes the bytes; `view` still points at them (a moved vector keeps its buffer).
    bytes = std::move(d.owned);
    d.owned = {};
  }
  t.value = builder.constant(name, t.type.dtype, t.type.shape, std::move(bytes));
  if (!builder.status().ok()) return builder.status();
  d.value = t.value;
  return t.value;
}

// ---------------------------------------------------------------- NodeContext: basics

NodeContext::NodeContext(Context& ctx, const ::onnx::NodeProto& node, std::string name)
    : ctx(ctx), node(node), name_(std::move(name)) {}

const std::string& NodeContext::op_type() const { return node.op_type(); }

std::string NodeContext::where() const { return fmt::format("onnx node '{}' ({})", name_, node.op_type()); }

Status NodeContext::error(ErrorCode code, std::string_view message) const {
  return Status(code, fmt::format("{}: {}", where(), message));
}

Status NodeContext::check_folded(const ir::TensorType& type, int64_t min_element_bytes) const {
  Status s = check_folded_size(type, ctx.options.max_folded_bytes, min_element_bytes);
  return s.ok() ? s : s.with_context(where());
}

Result<int64_t> normalize_axis(const NodeContext& n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return n.invalid(fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + rank : axis;
}

Status require_non_empty(const NodeContext& n, const Tensor& t, std::string_view what) {
  for (int d = 0; d < t.type.shape.rank(); ++d)
    if (t.type.shape[d] == 0) return n.unsupported(fmt::format("{} {} is empty (a dimension of 0)", what, t.type.to_string()));
  return Status();
}

// ---------------------------------------------------------------- inputs

int NodeContext::num_inputs() const { return node.input_size(); }

bool NodeContext::has_input(int i) const { return i < node.input_size() && !node.input(i).empty(); }

Result<Tensor> NodeContext::input(int i) const {
  if (!has_input(i)) return invalid(fmt::format("input {} is missing", i));
  auto it = ctx.env.find(node.input(i));
  if (it == ctx.env.end())
    return invalid(fmt::format("input {} '{}' is not a graph input, initializer or earlier node's output", i,
                               node.input(i)));
  return it->second;
}

Result<ir::TensorType> NodeContext::input_type(int i) const {
  CARVE_ASSIGN_OR_RETURN(Tensor t, input(i));
  return t.type;
}

Result<Tensor> NodeContext::known_input(int i, std::string_view what) const {
  CARVE_ASSIGN_OR_RETURN(Tensor t, input(i));
  if (t.is_known()) return t;
  const std::string inputs = note_needs_value(i);
  if (inputs.empty())
    return unsupported(fmt::format("input {} ({}) must be a constant (computed from initializers and shapes only)",
                                   i, what));
  return unsupported(fmt::format("input {} ({}) must be a constant: it is computed from graph input(s) {}, whose "
                                 "values carve needs at import (ImportOptions::input_values; onnx::Model does this)",
                                 i, what, inputs));
}

std::string Context::note_needs_value(const std::string& tensor) {
  auto deps = input_deps.find(tensor);
  if (deps == input_deps.end() || deps->second.empty()) return "";
  needs_values.insert(deps->second.begin(), deps->second.end());
  return fmt::format("'{}'", fmt::join(deps->second, "', '"));
}

std::string NodeContext::note_needs_value(int i) const {
  return has_input(i) ? ctx.note_needs_value(node.input(i)) : "";
}

Result<std::vector<int64_t>> NodeContext::const_ints(int i, std::string_view what) const {
  CARVE_ASSIGN_OR_RETURN(Tensor t, known_input(i, what));
  return to_int64s(t);
}

Result<std::vector<double>> NodeContext::const_doubles(int i, std::string_view what) const {
  CARVE_ASSIGN_OR_RETURN(Tensor t, known_input(i, what));
  return to_doubles(t);
}

Result<double> NodeContext::const_scalar(int i, std::string_view what) const {
  CARVE_ASSIGN_OR_RETURN(std::vector<double> v, const_doubles(i, what));
  if (v.size() != 1) return invalid(fmt::format("input {} ({}) must hold one element, has {}", i, what, v.size()));
  return v[0];
}

// ---------------------------------------------------------------- attributes

const AttributeProto* NodeContext::attr(std::string_view name) const {
  for (const AttributeProto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool NodeContext::has_attr(std::string_view name) const { return attr(name) != nullptr; }

#define CARVE_ONNX_ATTR_BODY(kind, expr)                                                                   \
  const AttributeProto* a = attr(name);                                                                    \
  if (a == nullptr) {                                                                                      \
    if (fallback) return *fallback;                                                                        \
    return invalid(fmt::format("attribute '{}' is required", name));                                       \
  }                                                                                                        \
  if (a->type() != AttributeProto::kind)                                                                   \
    return invalid(fmt::format("attribute '{}' must be {}, is {}", name, #kind, attr_type_name(*a)));      \
  return expr

Result<int64_t> NodeContext::attr_int(std::string_view name, std::optional<int64_t> fallback) const {
  CARVE_ONNX_ATTR_BODY(INT, a->i());
}

Result<double> NodeContext::attr_float(std::string_view name, std::optional<double> fallback) const {
  CARVE_ONNX_ATTR_BODY(FLOAT, static_cast<double>(a->f()));
}

Result<std::string> NodeContext::attr_string(std::string_view name, std::optional<std::string> fallback) const {
  CARVE_ONNX_ATTR_BODY(STRING, a->s());
}

Result<std::vector<int64_t>> NodeContext::attr_ints(std::string_view name,
                                                    std::optional<std::vector<int64_t>> fallback) const {
  CARVE_ONNX_ATTR_BODY(INTS, std::vector<int64_t>(a->ints().begin(), a->ints().end()));
}

Result<std::vector<double>> NodeContext::attr_floats(std::string_view name) const {
  std::optional<std::vector<double>> fallback;
  CARVE_ONNX_ATTR_BODY(FLOATS, std::vector<double>(a->floats().begin(), a->floats().end()));
}

#undef CARVE_ONNX_ATTR_BODY

// ---------------------------------------------------------------- building

Result<std::vector<Tensor>> NodeContext::op_n(ir::OpKind kind, std::vector<Tensor> inputs, ir::Attrs attrs) {
  bool all_known = !inputs.empty();
  for (const Tensor& t : inputs) all_known = all_known && t.is_known();
  if (all_known) {
    Result<std::vector<Tensor>> folded =
        fold(kind, inputs, attrs, fmt::format("{}/{}", name_, constants_++), ctx.options.max_folded_bytes);
    if (!folded.ok()) return folded.status().with_context(where());
    ++ctx.folded_nodes;
    return folded;
  }
  std::vector<ir::ValueId> ids;
  for (Tensor& t : inputs) {
    Result<ir::ValueId> id = ctx.materialize(t);
    if (!id.ok()) return id.status().with_context(where());
    ids.push_back(*id);
  }
  std::vector<ir::ValueId> outs = ctx.builder.op(kind, std::move(ids), std::move(attrs), ctx.unique_node_name(name_));
  if (!ctx.builder.status().ok()) return ctx.builder.status().with_context(where());
  std::vector<Tensor> result;
  for (ir::ValueId v : outs) result.push_back(Tensor{ctx.builder.graph().value(v).type, v, nullptr});
  return result;
}

Result<Tensor> NodeContext::op(ir::OpKind kind, std::vector<Tensor> inputs, ir::Attrs attrs) {
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, op_n(kind, std::move(inputs), std::move(attrs)));
  if (outs.size() != 1) return error(ErrorCode::kInternal, "expected one output");
  return outs[0];
}

Tensor NodeContext::constant_ints(ir::DType dtype, ir::Shape shape, const std::vector<int64_t>& values) {
  return from_int64s(fmt::format("{}/{}", name_, constants_++), dtype, std::move(shape), values);
}

Tensor NodeContext::constant_doubles(ir::DType dtype, ir::Shape shape, const std::vector<double>& values) {
  return from_doubles(fmt::format("{}/{}", name_, constants_++), dtype, std::move(shape), values);
}

// ---------------------------------------------------------------- outputs

int NodeContext::num_outputs() const { return node.output_size(); }

bool NodeContext::output_used(int i) const { return i < node.output_size() && !node.output(i).empty(); }

Status NodeContext::set_output(int i, Tensor t) {
  if (!output_used(i)) return Status();
  const std::string& out = node.output(i);
  if (ctx.env.contains(out)) return invalid(fmt::format("output '{}' is defined twice", out));
  // Folded data made by this node takes the output's name; shared data keeps its own.
  if (t.data && t.value == ir::kNoValue && t.data->name.starts_with(name_ + "/")) t.data->name = out;
  // A value this node produced is named after the ONNX tensor (readable plans, output files).
  if (t.value != ir::kNoValue) {
    const ir::Value& v = ctx.builder.graph().value(t.value);
    const bool fresh = v.kind == ir::ValueKind::kIntermediate &&
                       ctx.builder.graph().node(v.producer).name.starts_with(name_);
    if (fresh && v.name != out && ctx.builder.graph().find_value(out) == nullptr) ctx.builder.rename(t.value, out);
  }
  ctx.env.emplace(out, std::move(t));
  return Status();
}

}  // namespace carve::onnx::detail
