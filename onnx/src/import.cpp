// Model-level import: parse the ModelProto, check the opset, declare graph inputs and
// initializers, lower the nodes that reach an output (in file order, which ONNX requires
// to be topological), and mark the graph outputs.
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "carve/ir/extent.h"
#include "context.h"
#include "patterns.h"
#include "wire.h"

namespace carve::onnx {
namespace {

using detail::Context;
using detail::NodeContext;
using detail::OpEntry;
using detail::Tensor;
using detail::FusedPattern;

// Where the main graph's initializers' raw_data is: `raw` empty when the model was
// parsed whole, else each one's bytes left in the serialized model (wire.h); `mapped`
// when those are this import's own file mapping, whose pages are dropped once decoded.
struct SerializedModel {
  std::vector<detail::RawData> raw;
  bool mapped = false;
};

constexpr int64_t kMinOpset = 7;
// 19-21 changed the supported operators only by types carve lacks (float8, int4,
// strings) or by attributes their lowerings reject unless read (Pad 'wrap', Cast
// saturate for float8, QuantizeLinear block_size), and added Gelu.
constexpr int64_t kMaxOpset = 21;
// Opsets 1..6 are imported only for models made of these ops: their versions before 7
// differ from the later ones only by legacy attributes (consumed_inputs), which
// check_attributes rejects, or not at all (ArgMax/ArgMin, TopK: opset 1 is the form of
// 7..9, k as an attribute). Other ops changed (broadcast
// attributes, Cast's string 'to').
constexpr int64_t kMinLegacyOpset = 1;
constexpr std::string_view kLegacyOps[] = {"Abs", "ArgMax", "ArgMin", "Ceil", "Elu", "Exp", "Floor",
                                           "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "Identity",
                                           "InstanceNormalization", "LeakyRelu", "Log", "Neg", "Not", "Reciprocal",
                                           "Relu", "Selu", "Sigmoid", "Softplus", "Softsign", "Sqrt", "Tanh",
                                           "TopK"};

const std::map<std::string, OpEntry, std::less<>>& op_table() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, OpEntry, std::less<>>();
    detail::register_elementwise_ops(*t);
    detail::register_nn_ops(*t);
    detail::register_conv_transpose_ops(*t);
    detail::register_reduce_ops(*t);
    detail::register_norm_ops(*t);
    detail::register_resize_ops(*t);
    detail::register_shape_ops(*t);
    detail::register_tensor_ops(*t);
    detail::register_loss_ops(*t);
    detail::register_recurrent_ops(*t);
    detail::register_index_ops(*t);
    detail::register_control_ops(*t);
    detail::register_signal_ops(*t);
    detail::register_text_ops(*t);
    detail::register_random_ops(*t);
    detail::register_quant_ops(*t);
    detail::register_sample_ops(*t);
    detail::register_linalg_ops(*t);
    detail::register_dynamic_ops(*t);
    return t;
  }();
  return *table;
}

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

Result<int64_t> default_opset(const ::onnx::ModelProto& model) {
  for (const auto& o : model.opset_import()) {
    if (!is_default_domain(o.domain())) continue;
    if (o.version() < kMinLegacyOpset || o.version() > kMaxOpset)
      return Status(ErrorCode::kUnsupported, fmt::format("onnx opset {} is not supported (carve imports {}..{})",
                                                         o.version(), kMinOpset, kMaxOpset));
    return o.version();
  }
  return Status(ErrorCode::kUnsupported, "onnx model imports no default-domain opset");
}

// The tensor type of a graph input: its own, or an optional's element. carve has no
// absent inputs, so an optional tensor input is imported as its tensor (always present:
// OptionalHasElement on it is true).
const ::onnx::TypeProto* input_type(const ::onnx::ValueInfoProto& info) {
  const ::onnx::TypeProto* type = &info.type();
  if (type->has_optional_type()) type = &type->optional_type().elem_type();
  return type->has_tensor_type() ? type : nullptr;
}

// The input's declared shape with symbolic/unknown dims fixed (options or symbolic_dim).
Result<ir::Shape> input_shape(const ::onnx::ValueInfoProto& info, const ImportOptions& options) {
  const auto& tensor = input_type(info)->tensor_type();
  auto given = options.input_shapes.find(info.name());
  if (!tensor.has_shape()) {
    if (given != options.input_shapes.end()) return given->second;
    return Status(ErrorCode::kUnsupported,
                  fmt::format("onnx input '{}' has no shape: pass its shape (ImportOptions::input_shapes)", info.name()));
  }
  std::vector<int64_t> dims;
  for (const auto& d : tensor.shape().dim())
    dims.push_back(d.has_dim_value() ? d.dim_value() : options.symbolic_dim);
  if (given == options.input_shapes.end()) return ir::Shape(std::move(dims));
  const ir::Shape& shape = given->second;
  if (shape.rank() != static_cast<int>(dims.size()))
    return Status(ErrorCode::kShapeError, fmt::format("onnx input '{}': given shape {} but the model declares rank {}",
                                                      info.name(), shape.to_string(), dims.size()));
  // A given shape fixes symbolic dims only: a model's fixed dims are part of its meaning.
  for (int i = 0; i < shape.rank(); ++i) {
    const auto& d = tensor.shape().dim(i);
    if (d.has_dim_value() && d.dim_value() != shape[i])
      return Status(ErrorCode::kShapeError,
                    fmt::format("onnx input '{}': given shape {} but the model fixes dim {} to {}", info.name(),
                                shape.to_string(), i, d.dim_value()));
  }
  return shape;
}

// A graph input given a value (ImportOptions::input_values): a known tensor, as if an
// initializer, of the declared dtype and a shape that fits the declared one.
Status declare_value_input(const ::onnx::ValueInfoProto& info, ir::DType dtype, const runtime::Buffer& value,
                           Context& ctx) {
  if (value.dtype() != dtype)
    return Status(ErrorCode::kTypeMismatch, fmt::format("onnx input '{}': given a {} value, the model declares {}",
                                                        info.name(), ir::dtype_name(value.dtype()), ir::dtype_name(dtype)));
  ImportOptions shape_only;
  shape_only.input_shapes[info.name()] = value.shape();
  CARVE_ASSIGN_OR_RETURN(ir::Shape shape, input_shape(info, shape_only));
  CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, value.bytes());
  const auto* first = reinterpret_cast<const uint8_t*>(bytes.data());
  ctx.env[info.name()] = detail::known_tensor(info.name(), ir::TensorType{dtype, std::move(shape)},
                                              std::vector<uint8_t>(first, first + bytes.size()));
  return Status();
}

void graph_reads(const ::onnx::GraphProto& graph, std::set<std::string, std::less<>>& names);

// Every tensor name the subgraphs of `node` (If branches, Loop/Scan bodies) read, at any
// depth: what they read from enclosing scopes is an input of the node as much as its
// listed inputs are (names inside them are unique model-wide, so the extra ones are inert).
void subgraph_reads(const ::onnx::NodeProto& node, std::set<std::string, std::less<>>& names) {
  for (const auto& a : node.attribute()) {
    if (a.has_g()) graph_reads(a.g(), names);
    for (const auto& g : a.graphs()) graph_reads(g, names);
  }
}

void graph_reads(const ::onnx::GraphProto& graph, std::set<std::string, std::less<>>& names) {
  for (const auto& node : graph.node()) {
    names.insert(node.input().begin(), node.input().end());
    subgraph_reads(node, names);
  }
  for (const auto& o : graph.output()) names.insert(o.name());
}

// Adds to ctx.input_deps which graph inputs each tensor `graph`'s nodes make is computed
// from (file order is topological). Shape and Size read only shapes, which are fixed at
// import.
void trace_node_deps(const ::onnx::GraphProto& graph, Context& ctx) {
  for (const auto& node : graph.node()) {
    if (node.op_type() == "Shape" || node.op_type() == "Size") continue;
    std::set<std::string, std::less<>> reads(node.input().begin(), node.input().end());
    subgraph_reads(node, reads);
    std::set<std::string> deps;
    for (const auto& in : reads)
      if (auto it = ctx.input_deps.find(in); it != ctx.input_deps.end()) deps.insert(it->second.begin(), it->second.end());
    if (deps.empty()) continue;
    for (const auto& out : node.output()) ctx.input_deps[out] = deps;
  }
}

// Fills ctx.input_deps for the main graph: its inputs imported as graph values, and
// what the nodes compute from them.
void trace_input_deps(const ::onnx::GraphProto& graph, Context& ctx) {
  for (const auto& info : graph.input())
    if (auto it = ctx.env.find(info.name()); it != ctx.env.end() && !it->second.data)
      ctx.input_deps[info.name()] = {info.name()};
  trace_node_deps(graph, ctx);
}

Status declare_inputs(const ::onnx::GraphProto& graph, Context& ctx) {
  for (const auto& [name, value] : ctx.options.input_values) {
    const bool is_input = std::any_of(graph.input().begin(), graph.input().end(),
                                      [&](const auto& info) { return info.name() == name; });
    if (!is_input || ctx.env.contains(name))
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("ImportOptions::input_values names '{}', which is not a graph input", name));
  }
  for (const auto& info : graph.input()) {
    if (ctx.env.contains(info.name())) continue;  // an initializer (IR version < 4 lists them as inputs)
    if (input_type(info) == nullptr)
      return Status(ErrorCode::kUnsupported, fmt::format("onnx input '{}' is not a tensor", info.name()));
    Result<ir::DType> dtype = detail::dtype_from_onnx(input_type(info)->tensor_type().elem_type());
    if (!dtype.ok()) return dtype.status().with_context(fmt::format("onnx input '{}'", info.name()));
    if (auto given = ctx.options.input_values.find(info.name()); given != ctx.options.input_values.end()) {
      CARVE_RETURN_IF_ERROR(declare_value_input(info, *dtype, given->second, ctx));
      continue;
    }
    CARVE_ASSIGN_OR_RETURN(ir::Shape shape, input_shape(info, ctx.options));
    ir::ValueId v = ctx.builder.input(info.name(), *dtype, shape);
    if (!ctx.builder.status().ok()) return ctx.builder.status();
    ctx.env[info.name()] = Tensor{ir::TensorType{*dtype, std::move(shape)}, v, nullptr};
  }
  return Status();
}

// `raw` is empty or holds each initializer's raw_data left in the serialized model
// (SerializedModel).
Status declare_initializers(::onnx::GraphProto& graph, const SerializedModel& source, Context& ctx) {
  if (graph.sparse_initializer_size() > 0)
    return Status(ErrorCode::kUnsupported,
                  fmt::format("onnx sparse initializer '{}' is not supported", graph.sparse_initializer(0).values().name()));
  if (!source.raw.empty() && source.raw.size() != static_cast<size_t>(graph.initializer_size()))
    return Status(ErrorCode::kInternal, "initializers and their raw data out of step");
  for (int i = 0; i < graph.initializer_size(); ++i) {
    ::onnx::TensorProto& proto = *graph.mutable_initializer(i);
    if (ctx.env.contains(proto.name()))
      return Status(ErrorCode::kInvalidArgument, fmt::format("onnx initializer '{}' is defined twice", proto.name()));
    const detail::RawData* raw = source.raw.empty() ? nullptr : &source.raw[static_cast<size_t>(i)];
    CARVE_ASSIGN_OR_RETURN(Tensor t, detail::decode_tensor(proto, ctx, ctx.options.load_weights, raw));
    // Decoded: free protobuf's copy now, not at the end (clear() would keep the capacity).
    std::string().swap(*proto.mutable_raw_data());
    proto.clear_float_data();
    if (raw != nullptr && source.mapped) detail::drop_mapped_pages(raw->bytes);
    ctx.env[proto.name()] = std::move(t);
  }
  return Status();
}

// Nodes some graph output depends on (ONNX exports can carry dead nodes).
std::vector<bool> live_nodes(const ::onnx::GraphProto& graph) {
  std::set<std::string, std::less<>> needed;
  for (const auto& o : graph.output()) needed.insert(o.name());
  std::vector<bool> live(static_cast<size_t>(graph.node_size()), false);
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const auto& node = graph.node(i);
    for (const auto& out : node.output()) live[static_cast<size_t>(i)] = live[static_cast<size_t>(i)] || needed.contains(out);
    if (!live[static_cast<size_t>(i)]) continue;
    for (const auto& in : node.input()) needed.insert(in);
    subgraph_reads(node, needed);
  }
  return live;
}

Status check_attributes(const NodeContext& n, const OpEntry& entry) {
  for (const auto& a : n.node.attribute()) {
    if (std::find(entry.attrs.begin(), entry.attrs.end(), a.name()) == entry.attrs.end())
      return n.unsupported(fmt::format("attribute '{}' is not supported", a.name()));
  }
  return Status();
}

// Input counts ONNX allows per operator over the opsets carve imports (kMany: variadic).
// Lowerings read the inputs they know, so without this an extra input is dropped silently.
constexpr int kMany = std::numeric_limits<int>::max();
struct Arity {
  int min_inputs, max_inputs;
};

Arity arity(std::string_view op) {
  static const auto* table = new std::map<std::string_view, Arity, std::less<>>{
      {"Add", {2, 2}}, {"Sub", {2, 2}}, {"Mul", {2, 2}}, {"Div", {2, 2}}, {"Pow", {2, 2}},
      {"Equal", {2, 2}}, {"Less", {2, 2}}, {"LessOrEqual", {2, 2}}, {"Greater", {2, 2}},
      {"GreaterOrEqual", {2, 2}}, {"And", {2, 2}}, {"Or", {2, 2}}, {"PRelu", {2, 2}}, {"MatMul", {2, 2}},
      {"Expand", {2, 2}}, {"Tile", {2, 2}}, {"Gather", {2, 2}}, {"GatherElements", {2, 2}}, {"Where", {3, 3}}, {"Range", {3, 3}},
      {"Max", {1, kMany}}, {"Min", {1, kMany}}, {"Sum", {1, kMany}}, {"Concat", {1, kMany}},
      {"Clip", {1, 3}}, {"Dropout", {1, 3}}, {"Conv", {2, 3}}, {"ConvTranspose", {2, 3}}, {"Gemm", {2, 3}},
      {"LayerNormalization", {2, 3}}, {"BatchNormalization", {5, 5}}, {"ReduceMean", {1, 2}},
      {"ReduceSum", {1, 2}}, {"ReduceMax", {1, 2}}, {"ReduceMin", {1, 2}}, {"Reshape", {1, 2}},
      {"Squeeze", {1, 2}}, {"Unsqueeze", {1, 2}}, {"Split", {1, 2}}, {"Slice", {1, 5}}, {"Pad", {1, 4}}, {"Resize", {1, 4}}, {"CumSum", {2, 2}}, {"OneHot", {3, 3}},
      {"Trilu", {1, 2}}, {"Constant", {0, 0}}, {"Xor", {2, 2}}, {"CastLike", {2, 2}}, {"Mean", {1, kMany}},
      {"ReduceL1", {1, 2}}, {"ReduceL2", {1, 2}}, {"ReduceSumSquare", {1, 2}}, {"ReduceLogSum", {1, 2}},
      {"ReduceLogSumExp", {1, 2}}, {"InstanceNormalization", {3, 3}}, {"EyeLike", {1, 1}}, {"Mod", {2, 2}},
      {"NegativeLogLikelihoodLoss", {2, 3}}, {"SoftmaxCrossEntropyLoss", {2, 3}},
      {"RNN", {3, 6}}, {"GRU", {3, 6}}, {"LSTM", {3, 8}},
      {"GatherND", {2, 2}}, {"ScatterND", {3, 3}}, {"ScatterElements", {3, 3}}, {"Scatter", {3, 3}},
      {"TopK", {1, 2}}, {"Einsum", {1, kMany}}, {"Compress", {2, 2}}, {"MaxUnpool", {2, 3}},
      {"ReverseSequence", {2, 2}},
      {"If", {1, 1}}, {"Loop", {2, kMany}}, {"Scan", {1, kMany}},
      {"Optional", {0, 1}}, {"OptionalHasElement", {0, 1}},
      {"BitShift", {2, 2}}, {"ReduceProd", {1, 2}}, {"MelWeightMatrix", {5, 5}},
      {"RandomUniform", {0, 0}}, {"RandomNormal", {0, 0}},
      {"QuantizeLinear", {2, 3}}, {"DequantizeLinear", {2, 3}}, {"MatMulInteger", {2, 4}}, {"ConvInteger", {2, 4}},
      {"QLinearMatMul", {8, 8}}, {"QLinearConv", {8, 9}},
      {"GridSample", {2, 2}}, {"Upsample", {1, 2}}, {"RoiAlign", {3, 3}}, {"NonMaxSuppression", {2, 5}},
  };
  auto it = table->find(op);
  return it != table->end() ? it->second : Arity{1, 1};  // every other supported op is unary
}

Status lower_node(const ::onnx::NodeProto& node, int index, Context& ctx) {
  NodeContext n(ctx, node, node.name().empty() ? fmt::format("{}_{}", node.op_type(), index) : node.name());
  if (!is_default_domain(node.domain()))
    return n.unsupported(fmt::format("operator domain '{}' is not supported", node.domain()));
  auto it = op_table().find(node.op_type());
  if (it == op_table().end()) return n.unsupported("operator is not supported by carve's ONNX importer");
  const Arity a = arity(node.op_type());
  if (n.num_inputs() < a.min_inputs || n.num_inputs() > a.max_inputs)
    return n.invalid(a.max_inputs == kMany ? fmt::format("{} inputs, needs at least {}", n.num_inputs(), a.min_inputs)
                     : a.min_inputs == a.max_inputs
                         ? fmt::format("{} inputs, takes {}", n.num_inputs(), a.min_inputs)
                         : fmt::format("{} inputs, takes {} to {}", n.num_inputs(), a.min_inputs, a.max_inputs));
  CARVE_RETURN_IF_ERROR(check_attributes(n, it->second));
  CARVE_RETURN_IF_ERROR(it->second.lower(n));
  for (int i = 0; i < n.num_outputs(); ++i)
    if (n.output_used(i) && !ctx.env.contains(node.output(i)))
      return n.unsupported(fmt::format("output {} '{}' is not supported", i, node.output(i)));
  return Status();
}

// The declared output type, where the model gives one, must match what carve inferred
// (dims only when the inputs keep their declared shapes; never the data-dependent
// `dynamic_axis`, whose declared size is whatever the exporter's example gave).
Status check_output_type(const ::onnx::ValueInfoProto& info, const ir::TensorType& type, bool check_dims,
                         int dynamic_axis) {
  if (!info.type().has_tensor_type()) return Status();
  const auto& tensor = info.type().tensor_type();
  Result<ir::DType> dtype = detail::dtype_from_onnx(tensor.elem_type());
  bool same = !dtype.ok() || tensor.elem_type() == 0 || *dtype == type.dtype;
  if (tensor.has_shape()) {
    same = same && tensor.shape().dim_size() == type.shape.rank();
    for (int i = 0; same && i < tensor.shape().dim_size(); ++i) {
      const auto& d = tensor.shape().dim(i);
      same = !check_dims || !d.has_dim_value() || i == dynamic_axis || d.dim_value() == type.shape[i];
    }
  }
  if (same) return Status();
  return Status(ErrorCode::kShapeError, fmt::format("onnx output '{}': carve computes {}, the model declares {}",
                                                    info.name(), type.to_string(), info.type().DebugString()));
}

// Marks each ONNX output, giving the graph value the output's name: the value itself when
// it already has that name (an input or constant may be an output), else the value
// renamed, or an identity node when the value is an input, a constant or already another
// output under its own name.
Status mark_outputs(const ::onnx::GraphProto& graph, Context& ctx) {
  for (const auto& info : graph.output()) {
    auto it = ctx.env.find(info.name());
    if (it == ctx.env.end())
      return Status(ErrorCode::kInvalidArgument, fmt::format("onnx output '{}' is never produced", info.name()));
    const bool declared_inputs = ctx.options.input_shapes.empty() && ctx.options.input_values.empty();
    int dynamic_axis = -1;
    if (it->second.value != ir::kNoValue) {
      const std::optional<ir::DynamicExtent> extent = ir::dynamic_extent(ctx.builder.graph(), it->second.value);
      if (extent) dynamic_axis = extent->axis;
    }
    CARVE_RETURN_IF_ERROR(check_output_type(info, it->second.type, declared_inputs, dynamic_axis));
    CARVE_ASSIGN_OR_RETURN(ir::ValueId v, ctx.materialize(it->second));
    const ir::Value& value = ctx.builder.graph().value(v);
    const bool is_output = ctx.builder.graph().is_output(v);
    if (value.name != info.name() || is_output) {
      if (value.kind != ir::ValueKind::kIntermediate || is_output)
        v = ctx.builder.op1(ir::OpKind::kIdentity, {v}, {}, ctx.unique_node_name(info.name()));
      const ir::Value* other = ctx.builder.graph().find_value(info.name());
      if (other && other->id != v && other->kind == ir::ValueKind::kIntermediate)
        ctx.builder.rename(other->id, ctx.unique_value_name(info.name() + "#internal"));
      ctx.builder.rename(v, info.name());
    }
    ctx.builder.output(v);
    if (!ctx.builder.status().ok()) return ctx.builder.status();
  }
  return Status();
}

Status lower_graph(const ::onnx::GraphProto& graph, Context& ctx);

Result<ImportedModel> import_model(::onnx::ModelProto& model, const SerializedModel& source,
                                   const ImportOptions& options, std::set<std::string>* needs_values) {
  CARVE_ASSIGN_OR_RETURN(int64_t opset, default_opset(model));
  ::onnx::GraphProto& graph = *model.mutable_graph();
  Context ctx(options, graph.name().empty() ? "main" : graph.name());
  ctx.opset = opset;
  CARVE_RETURN_IF_ERROR(declare_initializers(graph, source, ctx));
  CARVE_RETURN_IF_ERROR(declare_inputs(graph, ctx));
  trace_input_deps(graph, ctx);
  Status lowered = lower_graph(graph, ctx);
  if (needs_values) needs_values->insert(ctx.needs_values.begin(), ctx.needs_values.end());
  CARVE_RETURN_IF_ERROR(lowered);
  ImportedModel result;
  result.opset = opset;
  result.producer = fmt::format("{} {}", model.producer_name(), model.producer_version());
  result.folded_nodes = ctx.folded_nodes;
  result.fused_patterns = ctx.fused_patterns;
  result.mapped_weights = std::move(ctx.mapped_weights);
  CARVE_ASSIGN_OR_RETURN(result.graph, ctx.builder.build());
  return result;
}

// Lowers the live nodes (whole patterns where found) and marks the outputs.
Status lower_graph(const ::onnx::GraphProto& graph, Context& ctx) {
  const int64_t opset = ctx.opset;
  // A node without outputs computes nothing anyone can read: a malformed graph, not a
  // dead node to skip (checked for every node, live or not).
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& node = graph.node(i);
    const std::string name = node.name().empty() ? fmt::format("{}_{}", node.op_type(), i) : node.name();
    if (node.output_size() == 0)
      return Status(ErrorCode::kInvalidArgument, fmt::format("onnx node '{}' ({}): has no outputs", name, node.op_type()));
    if (opset < kMinOpset && std::find(std::begin(kLegacyOps), std::end(kLegacyOps), node.op_type()) == std::end(kLegacyOps))
      return Status(ErrorCode::kUnsupported,
                    fmt::format("onnx node '{}' ({}): opset {} is supported only for ops unchanged since (Elu, Relu, "
                                "Softplus, ...); carve imports {}..{} for the others",
                                name, node.op_type(), opset, kMinOpset, kMaxOpset));
  }
  const std::vector<bool> live = live_nodes(graph);
  const std::map<int, FusedPattern> patterns =
      ctx.options.fuse_patterns ? detail::find_patterns(graph, ctx) : std::map<int, FusedPattern>{};
  std::vector<bool> fused(static_cast<size_t>(graph.node_size()), false);
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!live[static_cast<size_t>(i)] || fused[static_cast<size_t>(i)]) continue;
    if (auto it = patterns.find(i); it != patterns.end() && detail::take_pattern(it->second, ctx)) {
      CARVE_RETURN_IF_ERROR(lower_node(it->second.fused, i, ctx));
      for (int j : it->second.nodes) fused[static_cast<size_t>(j)] = true;
      ++ctx.fused_patterns;
      continue;
    }
    CARVE_RETURN_IF_ERROR(lower_node(graph.node(i), i, ctx));
  }
  return mark_outputs(graph, ctx);
}

}  // namespace

bool is_onnx_path(std::string_view path) { return path.ends_with(".onnx"); }

namespace {

// The tensor names a graph defines (inputs, initializers, node outputs), at any depth.
void defined_names(const ::onnx::GraphProto& graph, std::set<std::string, std::less<>>& names) {
  for (const auto& i : graph.input()) names.insert(i.name());
  for (const auto& t : graph.initializer()) names.insert(t.name());
  for (const auto& node : graph.node()) {
    names.insert(node.output().begin(), node.output().end());
    for (const auto& a : node.attribute()) {
      if (a.has_g()) defined_names(a.g(), names);
      for (const auto& g : a.graphs()) defined_names(g, names);
    }
  }
  names.erase("");
}

// Prefixes every name in `defined` (and every node name) with `scope`, at any depth.
void rename_defined(::onnx::GraphProto& graph, const std::set<std::string, std::less<>>& defined,
                    const std::string& scope) {
  auto rename = [&](std::string* name) {
    if (defined.contains(*name)) *name = scope + *name;
  };
  for (auto& i : *graph.mutable_input()) rename(i.mutable_name());
  for (auto& o : *graph.mutable_output()) rename(o.mutable_name());
  for (auto& t : *graph.mutable_initializer()) rename(t.mutable_name());
  for (auto& v : *graph.mutable_value_info()) rename(v.mutable_name());
  int index = 0;
  for (auto& node : *graph.mutable_node()) {
    node.set_name(scope + (node.name().empty() ? fmt::format("{}_{}", node.op_type(), index) : node.name()));
    ++index;
    for (auto& in : *node.mutable_input()) rename(&in);
    for (auto& out : *node.mutable_output()) rename(&out);
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) rename_defined(*a.mutable_g(), defined, scope);
      for (auto& g : *a.mutable_graphs()) rename_defined(g, defined, scope);
    }
  }
}

}  // namespace

// At least one node per copy: a body of no nodes (outputs wired to inputs) still costs an
// iteration, and a trip count of 10^9 must not run that long.
Status detail::check_inline_budget(NodeContext& n, const ::onnx::GraphProto& body, int64_t copies) {
  const int64_t per_copy = std::max(1, body.node_size());
  if (copies <= (kMaxInlinedNodes - n.ctx.inlined_nodes) / per_copy) return Status();
  return n.unsupported(fmt::format("unrolling its subgraph '{}' would lower more than {} nodes at import (carve "
                                   "resolves control flow at import)",
                                   body.name(), kMaxInlinedNodes));
}

Result<detail::SubgraphOutputs> detail::lower_subgraph(NodeContext& n, const ::onnx::GraphProto& body,
                                                       std::span<const Tensor> inputs, const std::string& scope) {
  Context& ctx = n.ctx;
  if (body.input_size() != static_cast<int>(inputs.size()))
    return n.invalid(fmt::format("its subgraph '{}' takes {} inputs, given {}", body.name(), body.input_size(),
                                 inputs.size()));
  CARVE_RETURN_IF_ERROR(check_inline_budget(n, body, 1));
  ctx.inlined_nodes += std::max(1, body.node_size());
  ::onnx::GraphProto copy = body;
  std::set<std::string, std::less<>> defined;
  defined_names(body, defined);
  rename_defined(copy, defined, scope);
  // The body's inputs are computed from whatever the node's inputs are (a bound carried
  // value may come from any of them), which keeps onnx::Model's value retry working.
  std::set<std::string> deps;
  for (const auto& in : n.node.input())
    if (auto it = ctx.input_deps.find(in); it != ctx.input_deps.end()) deps.insert(it->second.begin(), it->second.end());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = copy.input(static_cast<int>(i)).name();
    if (!ctx.env.emplace(name, inputs[i]).second)
      return n.invalid(fmt::format("subgraph input '{}' is defined twice", name));
    if (!deps.empty()) ctx.input_deps[name] = deps;
  }
  for (const auto& proto : copy.initializer()) {
    CARVE_ASSIGN_OR_RETURN(Tensor t, detail::decode_tensor(proto, ctx, true));
    if (!ctx.env.emplace(proto.name(), std::move(t)).second)
      return n.invalid(fmt::format("subgraph initializer '{}' is defined twice", proto.name()));
  }
  trace_node_deps(copy, ctx);
  const std::vector<bool> live = live_nodes(copy);
  for (int i = 0; i < copy.node_size(); ++i) {
    if (copy.node(i).output_size() == 0)
      return n.invalid(fmt::format("subgraph node '{}' ({}) has no outputs", copy.node(i).name(), copy.node(i).op_type()));
    if (live[static_cast<size_t>(i)]) CARVE_RETURN_IF_ERROR(lower_node(copy.node(i), i, ctx));
  }
  SubgraphOutputs result;
  for (const auto& out : copy.output()) {
    auto it = ctx.env.find(out.name());
    if (it == ctx.env.end())
      return n.invalid(fmt::format("subgraph '{}' output '{}' is never produced", body.name(), out.name()));
    result.tensors.push_back(it->second);
    result.names.push_back(out.name());
  }
  return result;
}

namespace {

// Imports a ModelProto that `parsed` says was read successfully; `name` for messages.
Result<ImportedModel> import_parsed(::onnx::ModelProto& model, bool parsed, const SerializedModel& source,
                                    std::string_view name, const ImportOptions& options,
                                    std::set<std::string>* needs_values = nullptr) {
  if (!parsed)
    return Status(ErrorCode::kParseError, fmt::format("'{}' is not a valid ONNX model (protobuf parse failed)", name));
  if (!model.has_graph())
    return Status(ErrorCode::kParseError, fmt::format("'{}' is not a valid ONNX model (no graph)", name));
  Result<ImportedModel> result = import_model(model, source, options, needs_values);
  if (!result.ok()) return result.status().with_context(name);
  return result;
}

// Imports serialized bytes (at most 2 GiB) with the weights read where they lie; bytes
// that do not split into well-formed fields are parsed whole, for protobuf's verdict.
Result<ImportedModel> import_serialized(std::span<const uint8_t> bytes, bool mapped, std::string_view name,
                                        const ImportOptions& options, std::set<std::string>* needs_values) {
  ::onnx::ModelProto model;
  SerializedModel source{.raw = {}, .mapped = mapped};
  bool parsed = detail::parse_leaving_raw_data(bytes, model, source.raw);
  if (!parsed) {
    model.Clear();
    source.raw.clear();
    parsed = model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  return import_parsed(model, parsed, source, name, options, needs_values);
}

Result<ImportedModel> import_file(const std::string& path, const ImportOptions& options);
Status copy_mapped_weights(ImportedModel& model);

}  // namespace

Result<ImportedModel> import_model_bytes(std::span<const std::byte> bytes, std::string_view name,
                                         const ImportOptions& options) {
  return detail::import_bytes_reporting(bytes, name, options, nullptr);
}

Result<ImportedModel> detail::import_bytes_reporting(std::span<const std::byte> bytes, std::string_view name,
                                                     const ImportOptions& options, std::set<std::string>* needs_values) {
  return no_exceptions(fmt::format("importing '{}'", name), [&]() -> Result<ImportedModel> {
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
      return Status(ErrorCode::kUnsupported, fmt::format("'{}': models over 2 GiB need external data", name));
    const std::span<const uint8_t> u8(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    return import_serialized(u8, false, name, options, needs_values);
  });
}

// Maps the file and copies each weight once, straight from the mapping, whose pages are
// dropped as soon as it is decoded: the peak is the weights decoded so far plus one.
Result<ImportedModel> import_model_file(const std::string& path, const ImportOptions& options) {
  return no_exceptions(fmt::format("importing '{}'", path),
                       [&]() -> Result<ImportedModel> { return import_file(path, options); });
}

Status materialize_weights(ImportedModel& model) {
  return no_exceptions("materialize_weights", [&] { return copy_mapped_weights(model); });
}

namespace {

Result<ImportedModel> import_file(const std::string& path, const ImportOptions& options) {
  ImportOptions with_dir = options;
  if (with_dir.external_data_dir.empty())
    with_dir.external_data_dir = std::filesystem::path(path).parent_path().string();
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (!error && size > 0 && size <= static_cast<uintmax_t>(std::numeric_limits<int>::max())) {
    Result<runtime::Buffer> mapped = runtime::Buffer::map_file(path, 0, static_cast<size_t>(size));
    Result<std::span<const std::byte>> bytes = mapped.ok() ? mapped->bytes() : mapped.status();
    if (bytes.ok())
      return import_serialized({reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()}, true, path, with_dir,
                               nullptr);
  }
  // Not a mappable file of at most 2 GiB (a pipe, an empty file, a bigger one): read as
  // a stream, whole.
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status(ErrorCode::kIoError, fmt::format("cannot open '{}'", path));
  ::onnx::ModelProto model;
  bool parsed = false;
  {
    google::protobuf::io::IstreamInputStream stream(&file);
    parsed = model.ParseFromZeroCopyStream(&stream);
  }
  if (file.bad()) return Status(ErrorCode::kIoError, fmt::format("cannot read '{}'", path));
  return import_parsed(model, parsed, SerializedModel{}, path, with_dir);
}

Status copy_mapped_weights(ImportedModel& model) {
  for (auto& [name, buffer] : model.mapped_weights) {
    const ir::Value* found = model.graph.find_value(name);
    if (found == nullptr) return Status(ErrorCode::kNotFound, fmt::format("mapped weight '{}' is not in the graph", name));
    CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, buffer.bytes());
    const auto* first = reinterpret_cast<const uint8_t*>(bytes.data());
    model.graph.value(found->id).data = std::vector<uint8_t>(first, first + bytes.size());
  }
  model.mapped_weights.clear();
  return Status();
}

}  // namespace

}  // namespace carve::onnx
