// Import-time pattern fusion: subgraphs exporters write out op by op, lowered as the one
// carve op they compute. Each pattern is matched on the ONNX graph before lowering and
// taken only when its inner values are read by nothing outside it.
//
//  - LayerNorm, as PyTorch exports nn.LayerNorm below opset 17:
//      m = ReduceMean(x, axes=[-1]); d = Sub(x, m); p = Pow(d, 2) or Mul(d, d);
//      v = ReduceMean(p, axes=[-1]); s = Sqrt(Add(v, eps)); y = Add(Mul(Div(d, s), gamma), beta)
//    (Add/Mul operands in either order, beta optional) -> layer_norm(x, gamma, beta).
//    gamma and beta must be 1-D of x's last dim and known when the first ReduceMean is
//    reached (initializers, or the Identity copies of them PyTorch writes first); eps
//    and the exponent constants (initializers or Constant nodes).
//  - Zero padding before an average pool, as PyTorch exports avg_pool2d(padding=p) with
//    count_include_pad (inception): Pad(x, pads, mode constant, value 0) over the two
//    spatial dims of a 4-D x, read only by AveragePool without pads or ceil_mode ->
//    AveragePool(x, pads, count_include_pad=1): the same windows, the same divisors.
#include "patterns.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

namespace carve::onnx::detail {
namespace {

using ::onnx::GraphProto;
using ::onnx::NodeProto;

// Producers and consumers of every tensor name.
struct Uses {
  std::map<std::string, int, std::less<>> producer;
  std::map<std::string, std::vector<int>, std::less<>> consumers;
  std::map<std::string, const ::onnx::TensorProto*, std::less<>> initializers;
  std::map<std::string, bool, std::less<>> graph_output;
};

Uses index(const GraphProto& graph) {
  Uses u;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const auto& o : graph.node(i).output()) u.producer[o] = i;
    for (const auto& in : graph.node(i).input()) {
      std::vector<int>& c = u.consumers[in];
      if (c.empty() || c.back() != i) c.push_back(i);  // Mul(d, d) reads d once
    }
  }
  for (const auto& t : graph.initializer()) u.initializers[t.name()] = &t;
  for (const auto& o : graph.output()) u.graph_output[o.name()] = true;
  return u;
}

// The single node reading `name`, of type `op`; -1 otherwise.
int only_consumer(const GraphProto& graph, const Uses& u, const std::string& name, std::string_view op) {
  if (u.graph_output.contains(name)) return -1;
  auto it = u.consumers.find(name);
  if (it == u.consumers.end() || it->second.size() != 1) return -1;
  const int c = it->second.front();
  return graph.node(c).op_type() == op ? c : -1;
}

// The other input of binary node `n` when one of them is `name`; empty otherwise.
std::string other_input(const NodeProto& n, const std::string& name) {
  if (n.input_size() != 2) return {};
  if (n.input(0) == name) return n.input(1);
  if (n.input(1) == name) return n.input(0);
  return {};
}

// A constant tensor's proto: an initializer (its dims; the bytes are in ctx.env), or the
// value of a Constant node.
const ::onnx::TensorProto* constant_proto(const GraphProto& graph, const Uses& u, const std::string& name) {
  if (auto it = u.initializers.find(name); it != u.initializers.end()) return it->second;
  auto p = u.producer.find(name);
  if (p == u.producer.end()) return nullptr;
  const NodeProto& n = graph.node(p->second);
  if (n.op_type() != "Constant" || n.attribute_size() != 1 || n.attribute(0).name() != "value") return nullptr;
  return &n.attribute(0).t();
}

// The values of a constant (an initializer or a Constant node's).
std::optional<std::vector<double>> constant_values(const GraphProto& graph, const Uses& u, const std::string& name,
                                                   Context& ctx) {
  // Initializers are decoded into ctx.env already (their protos' bytes freed).
  if (auto it = ctx.env.find(name); it != ctx.env.end()) {
    if (!it->second.is_known()) return std::nullopt;
    return to_doubles(it->second);
  }
  const ::onnx::TensorProto* proto = constant_proto(graph, u, name);
  if (proto == nullptr) return std::nullopt;
  Result<Tensor> t = decode_tensor(*proto, ctx, true);
  if (!t.ok() || !t->is_known()) return std::nullopt;
  return to_doubles(*t);
}

// The value of a one-element constant.
std::optional<double> scalar_constant(const GraphProto& graph, const Uses& u, const std::string& name, Context& ctx) {
  std::optional<std::vector<double>> v = constant_values(graph, u, name, ctx);
  if (!v || v->size() != 1) return std::nullopt;
  return v->front();
}

const ::onnx::AttributeProto* find_attr(const NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// ReduceMean over the last axis only, dims kept.
bool is_last_axis_mean(const NodeProto& n) {
  if (n.op_type() != "ReduceMean" || n.input_size() != 1) return false;
  bool last_axis = false;
  for (const auto& a : n.attribute()) {
    if (a.name() == "keepdims" && a.i() != 1) return false;
    if (a.name() == "axes") last_axis = a.ints_size() == 1 && a.ints(0) == -1;
  }
  return last_axis;
}

std::optional<FusedPattern> match_layer_norm(const GraphProto& graph, const Uses& u, int first, Context& ctx) {
  const NodeProto& mean = graph.node(first);
  if (!is_last_axis_mean(mean)) return std::nullopt;
  const std::string& x = mean.input(0);
  FusedPattern p{FusedPattern::Kind::kLayerNorm, {}, {}};
  p.nodes.push_back(first);
  // d = x - m: the Sub reading m must read x too.
  const int sub = only_consumer(graph, u, mean.output(0), "Sub");
  if (sub < 0 || graph.node(sub).input(0) != x || graph.node(sub).input(1) != mean.output(0)) return std::nullopt;
  p.nodes.push_back(sub);
  const std::string& d = graph.node(sub).output(0);
  // d feeds exactly the square and the Div.
  auto dc = u.consumers.find(d);
  if (u.graph_output.contains(d) || dc == u.consumers.end() || dc->second.size() != 2) return std::nullopt;
  int square = -1, div = -1;
  for (int c : dc->second) {
    const NodeProto& n = graph.node(c);
    if (n.op_type() == "Div" && n.input(0) == d) div = c;
    if (n.op_type() == "Mul" && n.input(0) == d && n.input(1) == d) square = c;
    if (n.op_type() == "Pow" && n.input(0) == d && scalar_constant(graph, u, n.input(1), ctx) == 2.0) square = c;
  }
  if (square < 0 || div < 0) return std::nullopt;
  p.nodes.push_back(square);
  const int var = only_consumer(graph, u, graph.node(square).output(0), "ReduceMean");
  if (var < 0 || !is_last_axis_mean(graph.node(var))) return std::nullopt;
  p.nodes.push_back(var);
  const int add_eps = only_consumer(graph, u, graph.node(var).output(0), "Add");
  if (add_eps < 0) return std::nullopt;
  const std::optional<double> eps =
      scalar_constant(graph, u, other_input(graph.node(add_eps), graph.node(var).output(0)), ctx);
  if (!eps || !(*eps >= 0)) return std::nullopt;
  p.nodes.push_back(add_eps);
  const int sqrt = only_consumer(graph, u, graph.node(add_eps).output(0), "Sqrt");
  if (sqrt < 0 || only_consumer(graph, u, graph.node(sqrt).output(0), "Div") != div ||
      graph.node(div).input(1) != graph.node(sqrt).output(0))
    return std::nullopt;
  p.nodes.push_back(sqrt);
  p.nodes.push_back(div);
  const int mul = only_consumer(graph, u, graph.node(div).output(0), "Mul");
  if (mul < 0) return std::nullopt;
  const std::string gamma = other_input(graph.node(mul), graph.node(div).output(0));
  p.nodes.push_back(mul);
  std::string y = graph.node(mul).output(0);
  // beta: an Add of a 1-D tensor (checked by take_layer_norm); any other Add stays.
  std::string beta;
  if (const int add = only_consumer(graph, u, y, "Add"); add >= 0) {
    beta = other_input(graph.node(add), y);
    const ::onnx::TensorProto* b = constant_proto(graph, u, beta);
    if (beta.empty() || (b != nullptr && b->dims_size() != 1)) {
      beta.clear();
    } else {
      p.nodes.push_back(add);
      y = graph.node(add).output(0);
    }
  }
  if (gamma.empty()) return std::nullopt;
  NodeProto& fused = p.fused;
  fused.set_op_type("LayerNormalization");
  fused.set_name(mean.name().empty() ? fmt::format("LayerNormalization_{}", first)
                                     : fmt::format("{}:layer_norm", mean.name()));
  fused.add_input(x);
  fused.add_input(gamma);
  if (!beta.empty()) fused.add_input(beta);
  fused.add_output(y);
  auto* axis = fused.add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(-1);
  auto* epsilon = fused.add_attribute();
  epsilon->set_name("epsilon");
  epsilon->set_type(::onnx::AttributeProto::FLOAT);
  epsilon->set_f(static_cast<float>(*eps));
  return p;
}

// Pad's pads as [top, left, bottom, right] when it zero-pads only dims 2 and 3 of a 4-D
// tensor (pads from the input of opset >= 11 or the attribute before).
std::optional<std::array<int64_t, 4>> spatial_zero_pads(const GraphProto& graph, const Uses& u, const NodeProto& pad,
                                                        Context& ctx) {
  if (const auto* mode = find_attr(pad, "mode"); mode != nullptr && mode->s() != "constant") return std::nullopt;
  std::vector<double> pads;
  if (ctx.opset >= 11) {
    if (pad.input_size() < 2 || pad.input_size() > 3) return std::nullopt;  // no axes input
    std::optional<std::vector<double>> v = constant_values(graph, u, pad.input(1), ctx);
    if (!v) return std::nullopt;
    pads = std::move(*v);
    if (pad.input_size() == 3 && !pad.input(2).empty() && scalar_constant(graph, u, pad.input(2), ctx) != 0.0)
      return std::nullopt;
  } else {
    const auto* attr = find_attr(pad, "pads");
    if (attr == nullptr || pad.input_size() != 1) return std::nullopt;
    pads.assign(attr->ints().begin(), attr->ints().end());
    if (const auto* value = find_attr(pad, "value"); value != nullptr && value->f() != 0.0f) return std::nullopt;
  }
  if (pads.size() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0) return std::nullopt;
  std::array<int64_t, 4> out{};
  const size_t from[4] = {2, 3, 6, 7};
  for (size_t i = 0; i < 4; ++i) {
    if (!(pads[from[i]] >= 0 && pads[from[i]] <= 1 << 20)) return std::nullopt;
    out[i] = static_cast<int64_t>(pads[from[i]]);
  }
  return out;
}

std::optional<FusedPattern> match_pad_avg_pool(const GraphProto& graph, const Uses& u, int first, Context& ctx) {
  const NodeProto& pad = graph.node(first);
  if (pad.op_type() != "Pad" || pad.output_size() != 1) return std::nullopt;
  const std::optional<std::array<int64_t, 4>> pads = spatial_zero_pads(graph, u, pad, ctx);
  if (!pads) return std::nullopt;
  const int pool = only_consumer(graph, u, pad.output(0), "AveragePool");
  if (pool < 0 || graph.node(pool).input(0) != pad.output(0)) return std::nullopt;
  const NodeProto& avg = graph.node(pool);
  if (const auto* a = find_attr(avg, "auto_pad"); a != nullptr && a->s() != "NOTSET") return std::nullopt;
  // ceil_mode decides whether a last window may start in the padding: inside the padded
  // tensor it may, inside pads it may not (PyTorch's rule), so only floor windows fuse.
  if (const auto* a = find_attr(avg, "ceil_mode"); a != nullptr && a->i() != 0) return std::nullopt;
  if (const auto* a = find_attr(avg, "pads"); a != nullptr)
    for (int64_t v : a->ints())
      if (v != 0) return std::nullopt;
  FusedPattern p{FusedPattern::Kind::kPadAvgPool, {first, pool}, avg};
  NodeProto& fused = p.fused;
  fused.set_name(avg.name().empty() ? fmt::format("AveragePool_{}", pool) : fmt::format("{}:padded", avg.name()));
  fused.set_input(0, pad.input(0));
  auto* attrs = fused.mutable_attribute();
  attrs->erase(std::remove_if(attrs->begin(), attrs->end(),
                              [](const auto& a) { return a.name() == "pads" || a.name() == "count_include_pad"; }),
               attrs->end());
  auto* pads_attr = fused.add_attribute();
  pads_attr->set_name("pads");
  pads_attr->set_type(::onnx::AttributeProto::INTS);
  for (int64_t v : *pads) pads_attr->add_ints(v);
  auto* include = fused.add_attribute();
  include->set_name("count_include_pad");
  include->set_type(::onnx::AttributeProto::INT);
  include->set_i(1);
  return p;
}

}  // namespace

std::map<int, FusedPattern> find_patterns(const GraphProto& graph, Context& ctx) {
  const Uses u = index(graph);
  std::map<int, FusedPattern> found;
  for (int i = 0; i < graph.node_size(); ++i) {
    std::optional<FusedPattern> p;
    if (graph.node(i).op_type() == "ReduceMean") p = match_layer_norm(graph, u, i, ctx);
    if (graph.node(i).op_type() == "Pad") p = match_pad_avg_pool(graph, u, i, ctx);
    if (p) found.emplace(i, std::move(*p));
  }
  return found;
}

namespace {

bool take_pad_avg_pool(const FusedPattern& p, const Context& ctx) {
  auto x = ctx.env.find(p.fused.input(0));
  return x != ctx.env.end() && x->second.type.shape.rank() == 4 && ir::is_float(x->second.type.dtype);
}

bool take_layer_norm(const FusedPattern& p, const Context& ctx) {
  auto x = ctx.env.find(p.fused.input(0));
  if (x == ctx.env.end() || x->second.type.shape.rank() < 1) return false;
  const ir::TensorType& xt = x->second.type;
  if (!ir::is_float(xt.dtype)) return false;
  const int64_t last = xt.shape[xt.shape.rank() - 1];
  for (int i = 1; i < p.fused.input_size(); ++i) {
    auto t = ctx.env.find(p.fused.input(i));
    if (t == ctx.env.end() || t->second.type.dtype != xt.dtype || t->second.type.shape.rank() != 1 ||
        t->second.type.shape[0] != last)
      return false;
  }
  return true;
}

}  // namespace

bool take_pattern(const FusedPattern& p, const Context& ctx) {
  switch (p.kind) {
    case FusedPattern::Kind::kLayerNorm: return take_layer_norm(p, ctx);
    case FusedPattern::Kind::kPadAvgPool: return take_pad_avg_pool(p, ctx);
  }
  return false;
}

}  // namespace carve::onnx::detail
