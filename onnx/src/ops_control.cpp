// Control flow: If, Loop, Scan, resolved at import (and optionals, always present) (context.h, lower_subgraph). carve's
// programs are static DAGs of kernels, so an If takes the branch its condition picks and
// a Loop or Scan is unrolled into copies of its body, one per iteration. What decides the
// control flow (If's condition, Loop's trip count and each iteration's condition) must
// be known at import: a constant, or computed from graph inputs whose values onnx::Model
// passes to the import (one program per value, as for a Reshape fed its shape). A
// condition computed at run time from data is kUnsupported naming the node. Scan's
// length is the scan inputs' static extent, always known.
#include <onnx/onnx_pb.h>

#include <algorithm>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

// A Loop without a trip count whose condition stays true this long is refused rather
// than unrolled without bound.
constexpr int64_t kMaxUnknownTripIterations = 4096;

Result<const ::onnx::GraphProto*> graph_attr(const NodeContext& n, std::string_view name) {
  const ::onnx::AttributeProto* a = n.attr(name);
  if (a == nullptr || !a->has_g()) return n.invalid(fmt::format("the graph attribute '{}' is missing", name));
  return &a->g();
}

Result<bool> known_flag(NodeContext& n, const Tensor& t, const std::string& name, std::string_view what) {
  if (!t.is_known()) {
    const std::string inputs = n.ctx.note_needs_value(name);
    return n.unsupported(fmt::format("{} is computed at run time{}; carve resolves control flow at import and needs "
                                     "it known then",
                                     what, inputs.empty() ? "" : fmt::format(" from graph input(s) {}", inputs)));
  }
  const std::vector<int64_t> values = to_int64s(t);
  if (values.size() != 1) return n.invalid(fmt::format("{} must hold one element", what));
  return values[0] != 0;
}

// `parts` (one per iteration, equal shapes) stacked along a new axis `axis`.
Result<Tensor> stack(NodeContext& n, const std::vector<Tensor>& parts, int64_t axis) {
  std::vector<Tensor> expanded;
  for (const Tensor& p : parts) {
    CARVE_ASSIGN_OR_RETURN(Tensor e, n.op(OpKind::kUnsqueeze, {p}, {{"axes", std::vector<int64_t>{axis}}}));
    expanded.push_back(std::move(e));
  }
  if (expanded.size() == 1) return expanded[0];
  return n.op(OpKind::kConcat, std::move(expanded), {{"axis", axis}});
}

// Element `index` of `x` along `axis`, that axis removed.
Result<Tensor> take(NodeContext& n, const Tensor& x, int64_t index, int64_t axis) {
  Tensor at = n.constant_ints(ir::DType::kI64, ir::Shape{}, {index});
  return n.op(OpKind::kGather, {x, at}, {{"axis", axis}});
}

Status lower_if(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor cond, n.input(0));
  CARVE_ASSIGN_OR_RETURN(bool taken, known_flag(n, cond, n.node.input(0), "the condition"));
  CARVE_ASSIGN_OR_RETURN(const ::onnx::GraphProto* branch, graph_attr(n, taken ? "then_branch" : "else_branch"));
  CARVE_ASSIGN_OR_RETURN(SubgraphOutputs outs,
                         lower_subgraph(n, *branch, {}, fmt::format("{}/{}/", n.name(), taken ? "then" : "else")));
  if (static_cast<int>(outs.tensors.size()) != n.num_outputs())
    return n.invalid(fmt::format("the {} branch has {} outputs, the node {}", taken ? "then" : "else",
                                 outs.tensors.size(), n.num_outputs()));
  for (int i = 0; i < n.num_outputs(); ++i) CARVE_RETURN_IF_ERROR(n.set_output(i, outs.tensors[static_cast<size_t>(i)]));
  return Status();
}

// Loop(M?, cond?, v_initial...): body(iteration, cond_in, carried...) -> (cond_out,
// carried..., scan...); outputs the final carried values, then each scan output stacked
// over the iterations (axis 0).
Status lower_loop(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(const ::onnx::GraphProto* body, graph_attr(n, "body"));
  const int carried = n.num_inputs() - 2;
  const int scanned = body->output_size() - 1 - carried;
  if (body->input_size() != carried + 2 || scanned < 0 || n.num_outputs() != carried + scanned)
    return n.invalid(fmt::format("{} loop-carried inputs, a body of {} inputs and {} outputs, and {} node outputs do "
                                 "not agree",
                                 carried, body->input_size(), body->output_size(), n.num_outputs()));
  std::optional<int64_t> trips;
  if (n.has_input(0)) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> m, n.const_ints(0, "M, the trip count"));
    if (m.size() != 1) return n.invalid("M (the trip count) must hold one element");
    trips = m[0];
  }
  bool go_on = true;
  if (n.has_input(1)) {
    CARVE_ASSIGN_OR_RETURN(Tensor cond, n.input(1));
    CARVE_ASSIGN_OR_RETURN(go_on, known_flag(n, cond, n.node.input(1), "the initial condition"));
  }
  std::vector<Tensor> state;
  for (int i = 0; i < carried; ++i) {
    CARVE_ASSIGN_OR_RETURN(Tensor v, n.input(2 + i));
    state.push_back(std::move(v));
  }
  // A body that passes its condition through unchanged runs all M iterations: refuse an M
  // beyond the inlining bound now rather than after lowering 200000 nodes of copies.
  const bool runs_every_trip = body->output(0).name() == body->input(1).name();
  if (trips && go_on && runs_every_trip) CARVE_RETURN_IF_ERROR(check_inline_budget(n, *body, *trips));
  std::vector<std::vector<Tensor>> scans(static_cast<size_t>(scanned));
  for (int64_t it = 0; go_on && (!trips || it < *trips); ++it) {
    if (!trips && it == kMaxUnknownTripIterations)
      return n.unsupported(fmt::format("without a trip count its condition is still true after {} iterations; carve "
                                       "unrolls loops at import",
                                       it));
    std::vector<Tensor> inputs = {n.constant_ints(ir::DType::kI64, ir::Shape{}, {it}),
                                  n.constant_ints(ir::DType::kBool, ir::Shape{}, {1})};
    inputs.insert(inputs.end(), state.begin(), state.end());
    CARVE_ASSIGN_OR_RETURN(SubgraphOutputs outs, lower_subgraph(n, *body, inputs, fmt::format("{}/{}/", n.name(), it)));
    CARVE_ASSIGN_OR_RETURN(go_on, known_flag(n, outs.tensors[0], outs.names[0],
                                             fmt::format("the condition after iteration {}", it)));
    state.assign(outs.tensors.begin() + 1, outs.tensors.begin() + 1 + carried);
    for (int k = 0; k < scanned; ++k) scans[static_cast<size_t>(k)].push_back(outs.tensors[static_cast<size_t>(1 + carried + k)]);
  }
  for (int i = 0; i < carried; ++i) CARVE_RETURN_IF_ERROR(n.set_output(i, state[static_cast<size_t>(i)]));
  for (int k = 0; k < scanned; ++k) {
    if (scans[static_cast<size_t>(k)].empty())
      return n.unsupported("it runs no iteration, so its scan outputs have no shape carve can infer");
    CARVE_ASSIGN_OR_RETURN(Tensor y, stack(n, scans[static_cast<size_t>(k)], 0));
    CARVE_RETURN_IF_ERROR(n.set_output(carried + k, y));
  }
  return Status();
}

// One Scan (opset 9+ form) over states and scan inputs; outputs the final states, then
// the scan outputs. `scope` names this instance (opset 8 runs one per batch element).
struct ScanForm {
  std::vector<int64_t> in_axes, in_reverse, out_axes, out_reverse;
};

Result<std::vector<Tensor>> scan(NodeContext& n, const ::onnx::GraphProto& body, std::vector<Tensor> state,
                                 const std::vector<Tensor>& xs, const ScanForm& form, const std::string& scope) {
  const size_t num_states = state.size();
  const int64_t scanned = body.output_size() - static_cast<int64_t>(num_states);
  if (scanned < 0) return n.invalid(fmt::format("its body has {} outputs for {} states", body.output_size(), num_states));
  int64_t length = -1;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < xs.size(); ++j) {
    CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, form.in_axes[j], xs[j].type.shape.rank()));
    const int64_t extent = xs[j].type.shape[static_cast<int>(axis)];
    if (length >= 0 && extent != length)
      return n.invalid(fmt::format("scan input {} has {} elements along its axis, scan input 0 has {}", j, extent, length));
    length = extent;
    axes.push_back(axis);
  }
  if (length <= 0) return n.unsupported("its scan inputs are empty, so its scan outputs have no shape carve can infer");
  std::vector<std::vector<Tensor>> scans(static_cast<size_t>(scanned));
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Tensor> inputs = state;
    for (size_t j = 0; j < xs.size(); ++j) {
      CARVE_ASSIGN_OR_RETURN(Tensor slice, take(n, xs[j], form.in_reverse[j] ? length - 1 - t : t, axes[j]));
      inputs.push_back(std::move(slice));
    }
    CARVE_ASSIGN_OR_RETURN(SubgraphOutputs outs, lower_subgraph(n, body, inputs, fmt::format("{}{}/", scope, t)));
    state.assign(outs.tensors.begin(), outs.tensors.begin() + static_cast<std::ptrdiff_t>(num_states));
    for (int64_t k = 0; k < scanned; ++k)
      scans[static_cast<size_t>(k)].push_back(outs.tensors[num_states + static_cast<size_t>(k)]);
  }
  std::vector<Tensor> results = std::move(state);
  for (int64_t k = 0; k < scanned; ++k) {
    std::vector<Tensor>& parts = scans[static_cast<size_t>(k)];
    if (form.out_reverse[static_cast<size_t>(k)]) std::reverse(parts.begin(), parts.end());
    CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, form.out_axes[static_cast<size_t>(k)],
                                                        parts[0].type.shape.rank() + 1));
    CARVE_ASSIGN_OR_RETURN(Tensor y, stack(n, parts, axis));
    results.push_back(std::move(y));
  }
  return results;
}

Result<std::vector<int64_t>> per_item(const NodeContext& n, std::string_view attr, int64_t count) {
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> v, n.attr_ints(attr, std::vector<int64_t>(static_cast<size_t>(count), 0)));
  if (static_cast<int64_t>(v.size()) != count)
    return n.invalid(fmt::format("'{}' has {} entries for {} items", attr, v.size(), count));
  return v;
}

// Scan. Opset 9+: (states..., scan inputs...), axes and directions per input and output.
// Opset 8: (sequence_lens?, states..., scan inputs...), everything with a leading batch
// axis and the scan axis next to it; run as one opset-9 scan per batch element.
Status lower_scan(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(const ::onnx::GraphProto* body, graph_attr(n, "body"));
  CARVE_ASSIGN_OR_RETURN(int64_t num_scans, n.attr_int("num_scan_inputs"));
  const bool batched = n.opset() < 9;
  const int first = batched ? 1 : 0;
  const int64_t num_states = n.num_inputs() - first - num_scans;
  const int64_t scanned = body->output_size() - num_states;
  if (num_scans < 1 || num_states < 0 || scanned < 0 || body->input_size() != num_states + num_scans ||
      n.num_outputs() != num_states + scanned)
    return n.invalid(fmt::format("{} inputs with num_scan_inputs {}, a body of {} inputs and {} outputs, and {} node "
                                 "outputs do not agree",
                                 n.num_inputs(), num_scans, body->input_size(), body->output_size(), n.num_outputs()));
  if (batched && n.has_input(0)) return n.unsupported("sequence_lens is not supported (every sequence runs in full)");
  ScanForm form;
  CARVE_ASSIGN_OR_RETURN(form.in_reverse, per_item(n, batched ? "directions" : "scan_input_directions", num_scans));
  CARVE_ASSIGN_OR_RETURN(form.in_axes, per_item(n, "scan_input_axes", num_scans));
  CARVE_ASSIGN_OR_RETURN(form.out_axes, per_item(n, "scan_output_axes", scanned));
  CARVE_ASSIGN_OR_RETURN(form.out_reverse, per_item(n, "scan_output_directions", scanned));
  std::vector<Tensor> state, xs;
  for (int i = first; i < n.num_inputs(); ++i) {
    CARVE_ASSIGN_OR_RETURN(Tensor v, n.input(i));
    (i < first + num_states ? state : xs).push_back(std::move(v));
  }
  std::vector<Tensor> results;
  if (!batched) {
    CARVE_ASSIGN_OR_RETURN(results, scan(n, *body, state, xs, form, n.name() + "/"));
  } else {
    const std::vector<Tensor>& all = xs.empty() ? state : xs;
    const int64_t batch = all.empty() || all[0].type.shape.rank() == 0 ? 0 : all[0].type.shape[0];
    if (batch <= 0) return n.unsupported("an empty batch gives outputs of no shape carve can infer");
    std::vector<std::vector<Tensor>> per_batch(static_cast<size_t>(num_states + scanned));
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> s, x;
      for (const Tensor& t : state) {
        CARVE_ASSIGN_OR_RETURN(Tensor e, take(n, t, b, 0));
        s.push_back(std::move(e));
      }
      for (const Tensor& t : xs) {
        CARVE_ASSIGN_OR_RETURN(Tensor e, take(n, t, b, 0));
        x.push_back(std::move(e));
      }
      CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> r, scan(n, *body, s, x, form, fmt::format("{}/{}/", n.name(), b)));
      for (size_t i = 0; i < r.size(); ++i) per_batch[i].push_back(std::move(r[i]));
    }
    for (const auto& parts : per_batch) {
      CARVE_ASSIGN_OR_RETURN(Tensor y, stack(n, parts, 0));
      results.push_back(std::move(y));
    }
  }
  for (size_t i = 0; i < results.size(); ++i) CARVE_RETURN_IF_ERROR(n.set_output(static_cast<int>(i), results[i]));
  return Status();
}

// Optionals: carve holds only present ones (an optional graph input is its tensor), so
// Optional(x) and OptionalGetElement(x) are x, and OptionalHasElement is true unless its
// input is omitted (opset 18). An empty Optional (no input) is refused.
Status lower_optional(NodeContext& n) {
  if (!n.has_input(0)) return n.unsupported("an empty optional (no input) is not supported");
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  return n.set_output(0, x);
}

Status lower_optional_has_element(NodeContext& n) {
  return n.set_output(0, n.constant_ints(ir::DType::kBool, ir::Shape{}, {n.has_input(0) ? 1 : 0}));
}

}  // namespace

void register_control_ops(std::map<std::string, OpEntry, std::less<>>& table) {
  table["If"] = {lower_if, {"then_branch", "else_branch"}};
  table["Loop"] = {lower_loop, {"body"}};
  table["Optional"] = {lower_optional, {"type"}};
  table["OptionalGetElement"] = {lower_optional, {}};
  table["OptionalHasElement"] = {lower_optional_has_element, {}};
  table["Scan"] = {lower_scan,
                   {"body", "num_scan_inputs", "directions", "scan_input_axes", "scan_input_directions",
                    "scan_output_axes", "scan_output_directions"}};
}

}  // namespace carve::onnx::detail
