// Internal state of one ONNX import: the tensors seen so far, the graph under
// construction, and the per-node helpers every lowering uses (ops_*.cpp).
//
// An ONNX tensor is a Tensor: its type, and either known contents (Data: an initializer,
// a Constant, or anything folded from them) or a graph value. Known tensors enter the
// graph only when a node that cannot be folded reads them (materialize), so folded shape
// arithmetic leaves nothing behind. No protobuf types here except in NodeContext, which
// wraps the NodeProto being lowered.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/onnx/import.h"
#include "carve/runtime/buffer.h"
#include "carve/status.h"

namespace onnx {
class GraphProto;
class NodeProto;
class AttributeProto;
class TensorProto;
}  // namespace onnx

namespace carve::onnx::detail {

// Known contents of a tensor. `view` always points at the bytes while `known`: at
// `owned`, at a mapped file, or (after materialize moved `owned` into the graph) at the
// graph constant's heap buffer, which moving the vector does not relocate.
struct Data {
  std::string name;  // the ONNX name a materialized constant gets
  bool known = true;  // false: a --no-weights initializer (type only)
  std::vector<uint8_t> owned;
  std::optional<runtime::Buffer> mapped;
  std::span<const uint8_t> view;
  ir::ValueId value = ir::kNoValue;  // the graph constant, once materialized (shared by copies)
};

struct Tensor {
  ir::TensorType type;
  ir::ValueId value = ir::kNoValue;  // set once it is in the graph
  std::shared_ptr<Data> data;        // set for constants (known or, with --no-weights, not)

  bool is_known() const { return data && data->known; }
  std::span<const uint8_t> bytes() const { return data->view; }
};

// A known tensor owning `bytes` (exactly type.byte_size()).
Tensor known_tensor(std::string name, ir::TensorType type, std::vector<uint8_t> bytes);

class Context {
 public:
  Context(const ImportOptions& options, std::string graph_name)
      : options(options), builder(std::move(graph_name)) {}

  const ImportOptions& options;
  ir::GraphBuilder builder;
  std::map<std::string, Tensor, std::less<>> env;  // ONNX tensor name -> tensor
  std::map<std::string, runtime::Buffer> mapped_weights;
  int64_t opset = 0;
  int64_t folded_nodes = 0;
  // ONNX tensor name -> the graph inputs (imported as graph values) its value is computed
  // from; Shape and Size cut the chain (shapes are fixed at import). known_input names
  // them when such a tensor must be a constant, and records them in needs_values.
  std::map<std::string, std::set<std::string>, std::less<>> input_deps;
  std::set<std::string> needs_values;
  int64_t fused_patterns = 0;  // subgraphs imported as one op
  int64_t inlined_nodes = 0;   // nodes of control-flow subgraphs lowered inline (lower_subgraph)

  // For a tensor that must be known at import and is not: records the graph inputs it is
  // computed from in needs_values and names them ("" when none).
  std::string note_needs_value(const std::string& tensor);

  // The graph value of `t`, declaring a known tensor as a constant on first use.
  Result<ir::ValueId> materialize(Tensor& t);
  // A node name not used yet, starting from `base`.
  std::string unique_node_name(std::string base);
  // A value name not used yet, starting from `base`.
  std::string unique_value_name(const std::string& base);

 private:
  std::set<std::string, std::less<>> node_names_;
  std::map<std::string, int, std::less<>> next_suffix_;  // base -> the suffix to try first
};

// Evaluates `op` on known inputs with the reference interpreter (fold.cpp); an output
// over `max_bytes` is kOutOfMemory before anything is allocated for it.
Result<std::vector<Tensor>> fold(ir::OpKind op, std::span<const Tensor> inputs, const ir::Attrs& attrs,
                                 const std::string& name, int64_t max_bytes);
// kOutOfMemory when a tensor of `type` (at least `min_element_bytes` per element, for
// the working copies folding builds) would exceed `max_bytes` or int64; kShapeError
// when the element count overflows.
Status check_folded_size(const ir::TensorType& type, int64_t max_bytes, int64_t min_element_bytes = 0);

// Element access on known tensors (any int/float/bool dtype), widened.
std::vector<int64_t> to_int64s(const Tensor& t);
std::vector<double> to_doubles(const Tensor& t);
// A known tensor of `dtype` from values (converted with carve's cast rules).
Tensor from_int64s(std::string name, ir::DType dtype, ir::Shape shape, const std::vector<int64_t>& values);
Tensor from_doubles(std::string name, ir::DType dtype, ir::Shape shape, const std::vector<double>& values);

// A TensorProto's raw_data left in the serialized model it came from (wire.h).
struct RawData {
  bool present = false;  // the TensorProto had raw_data
  std::span<const uint8_t> bytes;
};

// Decodes an ONNX TensorProto (inline or external data) into a Tensor (tensor.cpp).
// `load_data` false leaves float tensors unknown (--no-weights). `raw`, when given, is
// the proto's raw_data, which parse_leaving_raw_data left out of it.
Result<Tensor> decode_tensor(const ::onnx::TensorProto& proto, Context& ctx, bool load_data,
                             const RawData* raw = nullptr);
// ONNX TensorProto.DataType -> carve dtype (kUnsupported naming the type otherwise).
Result<ir::DType> dtype_from_onnx(int32_t elem_type);

// One ONNX node being lowered.
class NodeContext {
 public:
  NodeContext(Context& ctx, const ::onnx::NodeProto& node, std::string name);

  Context& ctx;
  const ::onnx::NodeProto& node;
  const std::string& name() const { return name_; }
  const std::string& op_type() const;
  int64_t opset() const { return ctx.opset; }

  // --- errors: "onnx node 'NAME' (OpType): ..." ---
  std::string where() const;
  Status error(ErrorCode code, std::string_view message) const;
  Status unsupported(std::string_view message) const { return error(ErrorCode::kUnsupported, message); }
  Status invalid(std::string_view message) const { return error(ErrorCode::kInvalidArgument, message); }
  // check_folded_size against ImportOptions::max_folded_bytes, naming this node.
  Status check_folded(const ir::TensorType& type, int64_t min_element_bytes = 0) const;

  // --- inputs (an empty name is an omitted optional input) ---
  int num_inputs() const;
  bool has_input(int i) const;
  Result<Tensor> input(int i) const;
  Result<ir::TensorType> input_type(int i) const;
  // A known input (its elements); kUnsupported "input i (what) must be a constant" otherwise.
  Result<Tensor> known_input(int i, std::string_view what) const;
  Result<std::vector<int64_t>> const_ints(int i, std::string_view what) const;
  Result<std::vector<double>> const_doubles(int i, std::string_view what) const;
  Result<double> const_scalar(int i, std::string_view what) const;
  // For a lowering that needs input i known and finds it is not: records the graph inputs
  // it is computed from (Context::needs_values) and returns them ("" when none).
  std::string note_needs_value(int i) const;

  // --- attributes ---
  bool has_attr(std::string_view attr) const;
  Result<int64_t> attr_int(std::string_view attr, std::optional<int64_t> fallback = std::nullopt) const;
  Result<double> attr_float(std::string_view attr, std::optional<double> fallback = std::nullopt) const;
  Result<std::string> attr_string(std::string_view attr, std::optional<std::string> fallback = std::nullopt) const;
  Result<std::vector<int64_t>> attr_ints(std::string_view attr,
                                         std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  Result<std::vector<double>> attr_floats(std::string_view attr) const;
  const ::onnx::AttributeProto* attr(std::string_view attr) const;

  // --- building: folds when every input is known, else adds IR nodes ---
  Result<Tensor> op(ir::OpKind kind, std::vector<Tensor> inputs, ir::Attrs attrs = {});
  Result<std::vector<Tensor>> op_n(ir::OpKind kind, std::vector<Tensor> inputs, ir::Attrs attrs = {});
  // A known tensor made by this node (e.g. a mask), named after it.
  Tensor constant_ints(ir::DType dtype, ir::Shape shape, const std::vector<int64_t>& values);
  Tensor constant_doubles(ir::DType dtype, ir::Shape shape, const std::vector<double>& values);

  // --- outputs ---
  int num_outputs() const;
  bool output_used(int i) const;  // non-empty output name
  Status set_output(int i, Tensor t);

 private:
  std::string name_;
  int constants_ = 0;
};

// Rank-normalised axis (kInvalidArgument via the node when out of range).
Result<int64_t> normalize_axis(const NodeContext& n, int64_t axis, int64_t rank);
// kUnsupported via the node when `t` has a dimension of 0, for lowerings whose reshapes
// would read a 0 as "copy the input's dim".
Status require_non_empty(const NodeContext& n, const Tensor& t, std::string_view what);

using Lowering = Status (*)(NodeContext&);
struct OpEntry {
  Lowering lower;
  std::vector<std::string_view> attrs;  // every attribute the lowering reads
};
// Registries of the ops_*.cpp families (name -> entry).
void register_elementwise_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_nn_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_reduce_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_norm_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_resize_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_shape_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_tensor_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_loss_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_recurrent_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_index_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_signal_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_text_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_random_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_quant_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_sample_ops(std::map<std::string, OpEntry, std::less<>>& table);  // GridSample, RoiAlign
void register_linalg_ops(std::map<std::string, OpEntry, std::less<>>& table);  // Det
void register_conv_transpose_ops(std::map<std::string, OpEntry, std::less<>>& table);
void register_dynamic_ops(std::map<std::string, OpEntry, std::less<>>& table);

// Softplus(x) = log(1 + exp(x)) without overflow (ops_elementwise.cpp; the recurrent ops'
// activations use it too).
Result<Tensor> softplus(NodeContext& n, const Tensor& x);

// Control flow is resolved at import: an If takes the branch its (known) condition picks,
// a Loop or Scan is unrolled. lower_subgraph lowers one instance of a subgraph (a branch,
// one iteration of a body) inline: body.input(i) is bound to inputs[i], every tensor and
// node the body defines is copied under names prefixed with `scope` (so each iteration
// has its own), names the body reads from enclosing scopes resolve in ctx.env, and the
// tensors of body.output() are returned with their (prefixed) names. At most
// kMaxInlinedNodes nodes (a body without nodes counting one) are lowered this way per
// import (kUnsupported beyond).
inline constexpr int64_t kMaxInlinedNodes = 200000;
struct SubgraphOutputs {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;
};
Result<SubgraphOutputs> lower_subgraph(NodeContext& n, const ::onnx::GraphProto& body, std::span<const Tensor> inputs,
                                       const std::string& scope);
// kUnsupported when `copies` more instances of `body` would pass kMaxInlinedNodes (a Loop
// whose condition cannot stop it checks its whole trip count before lowering any).
Status check_inline_budget(NodeContext& n, const ::onnx::GraphProto& body, int64_t copies);
void register_control_ops(std::map<std::string, OpEntry, std::less<>>& table);
// ONNX Conv's convolution of x and weight (1-D or 2-D, lifted to carve's conv2d) with
// the node's auto_pad, dilations, group, kernel_shape, pads and strides (ops_nn.cpp;
// ConvInteger and QLinearConv use it on their zero-point-shifted operands).
Result<Tensor> conv(NodeContext& n, Tensor x, Tensor weight, std::optional<Tensor> bias);

// round(v) (half to even) plus the zero point `zp`, saturated to the integer `dtype` and
// cast to it; v and zp are f32 (ops_quant.cpp; DynamicQuantizeLinear uses it too).
Result<Tensor> round_and_saturate(NodeContext& n, const Tensor& v, const std::optional<Tensor>& zp, ir::DType dtype);

// import_model_bytes that, when the import fails because an operand computed from graph
// inputs must be known, adds those inputs to *needs_values (onnx::Model then retries
// with their values).
Result<ImportedModel> import_bytes_reporting(std::span<const std::byte> bytes, std::string_view name,
                                             const ImportOptions& options, std::set<std::string>* needs_values);

}  // namespace carve::onnx::detail
