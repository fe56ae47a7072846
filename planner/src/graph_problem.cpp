#include "carve/planner/graph_problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "carve/ir/order.h"

namespace carve::planner {
namespace {

using ir::ValueId;

int64_t slice_start(int64_t dim, int64_t start) {
  if (start < 0) start += dim;
  return std::clamp<int64_t>(start, 0, dim);
}

bool root_is_protected(const ir::Graph& graph, ValueId root) {
  const ir::Value& v = graph.value(root);
  return v.kind != ir::ValueKind::kIntermediate || graph.is_output(root);
}

Status check_order(const ir::Graph& graph, std::span<const ir::NodeId> order) {
  std::vector<bool> seen(static_cast<size_t>(graph.num_nodes()), false);
  for (ir::NodeId id : order) {
    if (!graph.has_node(id) || seen[static_cast<size_t>(id)])
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("execution order holds node #{} twice or out of range", id));
    seen[static_cast<size_t>(id)] = true;
  }
  if (order.size() != seen.size())
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("execution order has {} nodes, graph has {}", order.size(), seen.size()));
  return Status();
}

// Where a value's memory comes from when it is not an alias of another value.
Placement own_placement(const ir::Graph& graph, const ir::Node* producer, ValueId v,
                        const GraphPlanOptions& options) {
  const ir::Value& value = graph.value(v);
  if (value.kind == ir::ValueKind::kConstant) return Placement::kConstant;
  if (value.kind == ir::ValueKind::kInput) return options.plan_inputs ? Placement::kArena : Placement::kInput;
  if (graph.is_output(v) && !options.plan_outputs) return Placement::kOutput;
  if (producer && producer->op == ir::OpKind::kReadHandle) return Placement::kHandle;
  return Placement::kArena;
}

// The steps each node's kernel spans: [first, last] of its fusion group, or its own step.
struct NodeSpan {
  std::vector<int64_t> first, last;
  std::vector<int32_t> group;  // fused_groups index, -1 for none
  std::vector<bool> group_elementwise;  // per fused group: every node elementwise
};

Result<NodeSpan> node_spans(const ir::Graph& graph, std::span<const ir::NodeId> order,
                            const GraphPlanOptions& options) {
  const auto n = static_cast<size_t>(graph.num_nodes());
  NodeSpan span{std::vector<int64_t>(n), std::vector<int64_t>(n), std::vector<int32_t>(n, -1),
                std::vector<bool>(options.fused_groups.size(), true)};
  for (size_t step = 0; step < order.size(); ++step) {
    span.first[static_cast<size_t>(order[step])] = static_cast<int64_t>(step);
    span.last[static_cast<size_t>(order[step])] = static_cast<int64_t>(step);
  }
  for (size_t g = 0; g < options.fused_groups.size(); ++g) {
    const auto& nodes = options.fused_groups[g];
    int64_t first = INT64_MAX, last = -1;
    for (ir::NodeId id : nodes) {
      if (!graph.has_node(id) || span.group[static_cast<size_t>(id)] >= 0)
        return Status(ErrorCode::kInvalidArgument,
                      fmt::format("fused group {} holds node #{}: unknown or already in a group", g, id));
      span.group[static_cast<size_t>(id)] = static_cast<int32_t>(g);
      if (!ir::is_elementwise(graph.node(id).op)) span.group_elementwise[g] = false;
      first = std::min(first, span.first[static_cast<size_t>(id)]);
      last = std::max(last, span.last[static_cast<size_t>(id)]);
    }
    for (ir::NodeId id : nodes) {
      span.first[static_cast<size_t>(id)] = first;
      span.last[static_cast<size_t>(id)] = last;
    }
  }
  return span;
}

// In place over `in` inside a fusion group: the group is all elementwise and every
// reader of `in` in it produces `in`'s shape (see the header).
bool group_reads_elementwise(const ir::Graph& graph, const GraphPlanOptions& options, const NodeSpan& span,
                             int32_t group, ValueId in) {
  const auto g = static_cast<size_t>(group);
  if (!span.group_elementwise[g]) return false;
  for (ir::NodeId id : options.fused_groups[g]) {
    const ir::Node& node = graph.node(id);
    if (std::find(node.inputs.begin(), node.inputs.end(), in) == node.inputs.end()) continue;
    for (ValueId out : node.outputs)
      if (graph.value(out).type.shape != graph.value(in).type.shape) return false;
  }
  return true;
}

std::string_view handle_of(const ir::Node& node) {
  auto it = node.attrs.find("handle");
  return it != node.attrs.end() && it->second.is_string() ? std::string_view(it->second.as_string())
                                                          : std::string_view();
}

// A read_handle value is a snapshot of the handle at the read. It may live in the
// handle's own bytes only while nothing writes that handle: when a write to it runs after
// the read and no later than the snapshot's (or a view of it) last reader, the snapshot
// moves to the arena (its read_handle becomes a copy), so readers see the bytes as read.
void snapshot_handle_reads(const ir::Graph& graph, std::span<const ir::NodeId> order, const NodeSpan& span,
                           const std::vector<int64_t>& root_last, GraphProblem& out) {
  std::map<std::string_view, std::vector<int64_t>> write_steps;  // handle -> steps writing it
  for (ir::NodeId id : order) {
    const ir::Node& w = graph.node(id);
    if (w.op == ir::OpKind::kWriteHandle || w.op == ir::OpKind::kWriteHandleAt)
      write_steps[handle_of(w)].push_back(span.first[static_cast<size_t>(id)]);
  }
  for (ir::NodeId id : order) {
    const ir::Node& read = graph.node(id);
    if (read.op != ir::OpKind::kReadHandle || read.outputs.empty()) continue;
    const ValueId r = read.outputs[0];
    if (out.values[static_cast<size_t>(r)].placement != Placement::kHandle) continue;
    auto writes = write_steps.find(handle_of(read));
    if (writes == write_steps.end()) continue;
    const int64_t read_step = span.first[static_cast<size_t>(id)];
    const int64_t last_read = root_last[static_cast<size_t>(r)];
    if (std::none_of(writes->second.begin(), writes->second.end(),
                     [&](int64_t w) { return w >= read_step && w <= last_read; }))
      continue;
    for (ValuePlacement& p : out.values)
      if (p.root == r && p.placement == Placement::kHandle) p.placement = Placement::kArena;
  }
}

// A stored arena intermediate: not a graph input, output or constant, not kept in
// registers, not kept to the end of the run.
bool stored_intermediate(const ir::Graph& graph, ValueId v, const GraphPlanOptions& options) {
  const auto i = static_cast<size_t>(v);
  if (graph.value(v).kind != ir::ValueKind::kIntermediate || graph.is_output(v)) return false;
  if (i < options.unstored.size() && options.unstored[i]) return false;
  return i >= options.live_to_end.size() || !options.live_to_end[i];
}

// The concat's inputs as byte offsets into its output, when each input can be written
// straight into its slice (see the header); nullopt otherwise. `claimed`: inputs an
// earlier concat already took.
std::optional<std::vector<int64_t>> concat_slices(const ir::Graph& graph, const ir::Node& concat,
                                                  const std::vector<int64_t>& bytes, const std::vector<bool>& claimed,
                                                  const GraphPlanOptions& options) {
  if (concat.inputs.size() < 2 || concat.outputs.size() != 1) return std::nullopt;
  const ValueId out = concat.outputs[0];
  if (!stored_intermediate(graph, out, options)) return std::nullopt;
  const ir::Shape& shape = graph.value(out).type.shape;
  auto axis_attr = concat.attrs.find("axis");
  int64_t axis = axis_attr != concat.attrs.end() && axis_attr->second.is_int() ? axis_attr->second.as_int() : 0;
  if (axis < 0) axis += shape.rank();
  if (axis < 0 || axis >= shape.rank()) return std::nullopt;
  for (int d = 0; d < static_cast<int>(axis); ++d)
    if (shape[d] != 1) return std::nullopt;  // each input would be strided in the output
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (ValueId in : concat.inputs) {
    const ir::Value& value = graph.value(in);
    if (!stored_intermediate(graph, in, options) || claimed[static_cast<size_t>(in)] || value.producer == ir::kNoNode)
      return std::nullopt;
    if (std::count(concat.inputs.begin(), concat.inputs.end(), in) != 1) return std::nullopt;
    const ir::OpKind producer = graph.node(value.producer).op;
    // The producer must write the value's own bytes: not a view, a slice view or a
    // concat view of something else, not a handle read that may alias the handle.
    if (ir::is_view(producer) || producer == ir::OpKind::kSlice || producer == ir::OpKind::kConcat ||
        producer == ir::OpKind::kReadHandle)
      return std::nullopt;
    if (offset % options.alignment != 0) return std::nullopt;  // kernels see arena-aligned outputs
    offsets.push_back(offset);
    offset += bytes[static_cast<size_t>(in)];
  }
  if (offset != bytes[static_cast<size_t>(out)]) return std::nullopt;
  return offsets;
}

std::vector<ConcatView> find_concat_views(const ir::Graph& graph, std::span<const ir::NodeId> order,
                                          const std::vector<int64_t>& bytes, const GraphPlanOptions& options) {
  std::vector<ConcatView> views;
  std::vector<bool> claimed(bytes.size(), false);
  for (ir::NodeId id : order) {
    const ir::Node& node = graph.node(id);
    if (node.op != ir::OpKind::kConcat) continue;
    std::optional<std::vector<int64_t>> offsets = concat_slices(graph, node, bytes, claimed, options);
    if (!offsets) continue;
    for (ValueId in : node.inputs) claimed[static_cast<size_t>(in)] = true;
    views.push_back(ConcatView{id, std::move(*offsets)});
  }
  return views;
}

}  // namespace

const ConcatView* concat_view_of(const ir::Graph& graph, const GraphProblem& problem, ir::ValueId root) {
  for (const ConcatView& view : problem.concat_views)
    if (graph.node(view.concat).outputs[0] == root) return &view;
  return nullptr;
}

std::optional<int64_t> contiguous_slice_offset(const ir::Graph& graph, const ir::Node& slice) {
  const ir::Shape& in = graph.value(slice.inputs[0]).type.shape;
  const ir::Shape& out = graph.value(slice.outputs[0]).type.shape;
  const int rank = in.rank();
  std::vector<int64_t> starts(static_cast<size_t>(rank), 0);
  auto attr_ints = [&](const char* name) -> std::vector<int64_t> {
    auto it = slice.attrs.find(name);
    return it == slice.attrs.end() ? std::vector<int64_t>{} : it->second.as_ints();
  };
  std::vector<int64_t> raw_starts = attr_ints("starts"), axes = attr_ints("axes"), steps = attr_ints("steps");
  for (size_t i = 0; i < raw_starts.size(); ++i) {
    if (!steps.empty() && steps[i] != 1) return std::nullopt;
    int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (axis < 0) axis += rank;
    starts[static_cast<size_t>(axis)] = slice_start(in[static_cast<int>(axis)], raw_starts[i]);
  }
  // Last axis that is cut: the axes after it are whole, the axes before it keep one index.
  int cut = rank - 1;
  while (cut >= 0 && out[cut] == in[cut]) --cut;
  if (cut < 0) return 0;  // the whole tensor
  for (int d = 0; d < cut; ++d)
    if (out[d] != 1) return std::nullopt;
  int64_t offset = 0, stride = ir::dtype_size(graph.value(slice.inputs[0]).type.dtype);
  for (int d = rank - 1; d >= 0; --d) {
    offset += starts[static_cast<size_t>(d)] * stride;
    stride *= in[d];
  }
  return offset;
}

Result<GraphProblem> build_graph_problem(const ir::Graph& graph, std::span<const ir::NodeId> order,
                                         const GraphPlanOptions& options) {
  CARVE_RETURN_IF_ERROR(check_order(graph, order));
  CARVE_ASSIGN_OR_RETURN(std::vector<ir::Lifetime> life, ir::lifetimes(graph, order));
  CARVE_ASSIGN_OR_RETURN(NodeSpan span, node_spans(graph, order, options));
  for (const ir::Node& node : graph.nodes) {
    for (ValueId v : node.outputs)
      life[static_cast<size_t>(v)].first = std::min(life[static_cast<size_t>(v)].first, span.first[static_cast<size_t>(node.id)]);
    for (ValueId v : node.inputs)
      life[static_cast<size_t>(v)].last = std::max(life[static_cast<size_t>(v)].last, span.last[static_cast<size_t>(node.id)]);
  }
  const auto num_values = static_cast<size_t>(graph.num_values());
  std::vector<int64_t> bytes(num_values, 0);
  for (const ir::Value& v : graph.values) {
    CARVE_ASSIGN_OR_RETURN(bytes[static_cast<size_t>(v.id)], v.type.byte_size());
  }

  GraphProblem out;
  out.values.resize(num_values);
  std::vector<int64_t> root_first(num_values), root_last(num_values);
  auto make_root = [&](ValueId v, const ir::Node* producer) {
    ValuePlacement& p = out.values[static_cast<size_t>(v)];
    p = ValuePlacement{own_placement(graph, producer, v, options), v, -1, 0, false, false};
    root_first[static_cast<size_t>(v)] = life[static_cast<size_t>(v)].first;
    root_last[static_cast<size_t>(v)] = life[static_cast<size_t>(v)].last;
  };
  auto alias = [&](ValueId v, ValueId source, int64_t extra_offset) {
    ValuePlacement p = out.values[static_cast<size_t>(source)];
    p.byte_offset += extra_offset;
    p.is_view = p.is_inplace = false;
    out.values[static_cast<size_t>(v)] = p;
    auto r = static_cast<size_t>(p.root);
    root_last[r] = std::max(root_last[r], life[static_cast<size_t>(v)].last);
  };

  for (const ir::Value& v : graph.values)
    if (v.kind != ir::ValueKind::kIntermediate) make_root(v.id, nullptr);

  // Concat outputs gathered from their inputs: rooted before any input is produced.
  std::vector<ValueId> gathered_into(num_values, ir::kNoValue);
  std::vector<int64_t> gathered_offset(num_values, 0);
  if (options.concat_views) out.concat_views = find_concat_views(graph, order, bytes, options);
  for (const ConcatView& view : out.concat_views) {
    const ir::Node& concat = graph.node(view.concat);
    const ValueId o = concat.outputs[0];
    make_root(o, &concat);
    out.values[static_cast<size_t>(o)].is_view = true;
    ++out.num_views;
    for (size_t i = 0; i < concat.inputs.size(); ++i) {
      const auto in = static_cast<size_t>(concat.inputs[i]);
      gathered_into[in] = o;
      gathered_offset[in] = view.input_offsets[i];
      root_first[static_cast<size_t>(o)] = std::min(root_first[static_cast<size_t>(o)], life[in].first);
    }
  }

  for (size_t step = 0; step < order.size(); ++step) {
    const ir::Node& node = graph.node(order[step]);
    for (ValueId v : node.outputs) {
      const bool is_output = graph.is_output(v);
      if (static_cast<size_t>(v) < options.unstored.size() && options.unstored[static_cast<size_t>(v)]) {
        out.values[static_cast<size_t>(v)] = ValuePlacement{Placement::kNone, v, -1, 0, false, false};
        continue;
      }
      if (gathered_into[static_cast<size_t>(v)] != ir::kNoValue) {  // written into its concat's output
        alias(v, gathered_into[static_cast<size_t>(v)], gathered_offset[static_cast<size_t>(v)]);
        continue;
      }
      // A folded concat's output was rooted above; the concat itself writes nothing.
      if (out.values[static_cast<size_t>(v)].is_view && out.values[static_cast<size_t>(v)].root == v) continue;
      std::optional<int64_t> view_offset;
      if (ir::is_view(node.op)) view_offset = 0;
      if (node.op == ir::OpKind::kSlice) view_offset = contiguous_slice_offset(graph, node);
      if (view_offset && !is_output) {
        alias(v, node.inputs[0], *view_offset);
        out.values[static_cast<size_t>(v)].is_view = true;
        ++out.num_views;
        continue;
      }
      bool placed = false;
      if (options.inplace && ir::is_elementwise(node.op) && !is_output) {
        for (ValueId in : node.inputs) {
          const ValuePlacement& src = out.values[static_cast<size_t>(in)];
          auto r = static_cast<size_t>(src.root);
          if (src.placement != Placement::kArena || src.byte_offset != 0 || root_is_protected(graph, src.root))
            continue;
          if (root_last[r] != span.last[static_cast<size_t>(node.id)] || bytes[r] != bytes[static_cast<size_t>(v)])
            continue;
          if (graph.value(in).type.shape != graph.value(v).type.shape) continue;
          const int32_t group = span.group[static_cast<size_t>(node.id)];
          if (group >= 0 && !group_reads_elementwise(graph, options, span, group, in)) continue;
          alias(v, in, 0);
          out.values[static_cast<size_t>(v)].is_inplace = true;
          ++out.num_inplace;
          placed = true;
          break;
        }
      }
      if (!placed) make_root(v, &node);
    }
  }

  snapshot_handle_reads(graph, order, span, root_last, out);

  // One planner buffer per arena root, over its members' combined lifetime.
  const int64_t end_step = static_cast<int64_t>(order.size());
  for (const ir::Value& v : graph.values) {
    auto i = static_cast<size_t>(v.id);
    if (out.values[i].root != v.id || out.values[i].placement != Placement::kArena) continue;
    int64_t first = root_first[i], last = root_last[i];
    const bool kept = i < options.live_to_end.size() && options.live_to_end[i];
    if (graph.is_output(v.id) || kept) last = std::max<int64_t>(last, end_step - 1);
    out.values[i].buffer = static_cast<int32_t>(out.problem.buffers.size());
    out.problem.buffers.push_back(BufferRequest{v.name, bytes[i], options.alignment, first + 1, last + 2});
    out.buffer_root.push_back(v.id);
    out.scratch_nodes.emplace_back();
  }
  for (auto& p : out.values)
    if (p.placement == Placement::kArena && p.root != ir::kNoValue)
      p.buffer = out.values[static_cast<size_t>(p.root)].buffer;
  return out;
}

Result<int32_t> add_scratch_buffer(GraphProblem& problem, std::string id, int64_t bytes, int64_t alignment,
                                   std::span<const ir::NodeId> nodes, std::span<const ir::NodeId> order) {
  int64_t first = -1, last = -1;
  for (size_t step = 0; step < order.size(); ++step)
    if (std::find(nodes.begin(), nodes.end(), order[step]) != nodes.end()) {
      if (first < 0) first = static_cast<int64_t>(step);
      last = static_cast<int64_t>(step);
    }
  if (first < 0 || nodes.empty())
    return Status(ErrorCode::kInvalidArgument, fmt::format("scratch buffer '{}' belongs to no scheduled node", id));
  const auto index = static_cast<int32_t>(problem.problem.buffers.size());
  problem.problem.buffers.push_back(BufferRequest{std::move(id), bytes, alignment, first + 1, last + 2});
  problem.buffer_root.push_back(ir::kNoValue);
  problem.scratch_nodes.emplace_back(nodes.begin(), nodes.end());
  return index;
}

}  // namespace carve::planner
