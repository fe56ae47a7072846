// Normalizations with no carve op of their own, composed of reductions and elementwise
// ops: InstanceNormalization, MeanVarianceNormalization, and LRN (a sum over a channel
// window, taken as an average pool with the padding counted).
#include <onnx/onnx_pb.h>

#include <numeric>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

Result<Tensor> float_input(const NodeContext& n, int i, int min_rank) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(i));
  if (!ir::is_float(x.type.dtype))
    return n.unsupported(fmt::format("{} input (ONNX defines {} on floats)", ir::dtype_name(x.type.dtype), n.op_type()));
  if (x.type.shape.rank() < min_rank)
    return n.invalid(fmt::format("input of rank {} (needs >= {})", x.type.shape.rank(), min_rank));
  return x;
}

// x - mean(x) and the (biased) variance mean((x - mean)^2) over `axes`, kept as dims of 1.
// The variance of the centred values avoids E[x^2] - E[x]^2's cancellation.
Result<std::pair<Tensor, Tensor>> centred_and_variance(NodeContext& n, const Tensor& x, const std::vector<int64_t>& axes) {
  ir::Attrs attrs{{"axes", axes}, {"keepdims", int64_t{1}}};
  CARVE_ASSIGN_OR_RETURN(Tensor mean, n.op(OpKind::kReduceMean, {x}, attrs));
  CARVE_ASSIGN_OR_RETURN(Tensor d, n.op(OpKind::kSub, {x, mean}));
  CARVE_ASSIGN_OR_RETURN(Tensor sq, n.op(OpKind::kMul, {d, d}));
  CARVE_ASSIGN_OR_RETURN(Tensor var, n.op(OpKind::kReduceMean, {sq}, attrs));
  return std::pair{d, var};
}

// InstanceNormalization(x [N, C, ...], scale [C], bias [C]): each (n, c) plane
// normalised over the spatial axes, then scaled and shifted per channel.
Status lower_instance_norm(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0, 3));
  CARVE_ASSIGN_OR_RETURN(Tensor scale, n.input(1));
  CARVE_ASSIGN_OR_RETURN(Tensor bias, n.input(2));
  CARVE_ASSIGN_OR_RETURN(double epsilon, n.attr_float("epsilon", 1e-5));
  const int rank = x.type.shape.rank();
  const int64_t channels = x.type.shape[1];
  for (const Tensor* t : {&scale, &bias})
    if (t->type.shape != ir::Shape{channels})
      return n.invalid(fmt::format("scale and bias must have shape [{}], got {}", channels, t->type.to_string()));
  std::vector<int64_t> axes(static_cast<size_t>(rank - 2));
  std::iota(axes.begin(), axes.end(), 2);
  CARVE_ASSIGN_OR_RETURN(auto parts, centred_and_variance(n, x, axes));
  auto& [d, var] = parts;
  CARVE_ASSIGN_OR_RETURN(Tensor var_eps, n.op(OpKind::kAdd, {var, n.constant_doubles(x.type.dtype, {}, {epsilon})}));
  CARVE_ASSIGN_OR_RETURN(Tensor stddev, n.op(OpKind::kSqrt, {var_eps}));
  CARVE_ASSIGN_OR_RETURN(Tensor normed, n.op(OpKind::kDiv, {d, stddev}));
  // [C] -> [C, 1, ...] so it broadcasts along dim 1.
  std::vector<int64_t> per_channel(static_cast<size_t>(rank - 1), 1);
  per_channel[0] = channels;
  CARVE_ASSIGN_OR_RETURN(scale, n.op(OpKind::kReshape, {scale}, {{"shape", per_channel}}));
  CARVE_ASSIGN_OR_RETURN(bias, n.op(OpKind::kReshape, {bias}, {{"shape", per_channel}}));
  CARVE_ASSIGN_OR_RETURN(Tensor scaled, n.op(OpKind::kMul, {normed, scale}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kAdd, {scaled, bias}));
  return n.set_output(0, y);
}

// MeanVarianceNormalization: (x - mean) / (std + 1e-9) over `axes` (default [0, 2, 3]);
// ONNX's function body adds the 1e-9 to the standard deviation, not the variance.
Status lower_mvn(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0, 1));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, n.attr_ints("axes", std::vector<int64_t>{0, 2, 3}));
  CARVE_ASSIGN_OR_RETURN(auto parts, centred_and_variance(n, x, axes));
  auto& [d, var] = parts;
  CARVE_ASSIGN_OR_RETURN(Tensor stddev, n.op(OpKind::kSqrt, {var}));
  CARVE_ASSIGN_OR_RETURN(Tensor std_eps, n.op(OpKind::kAdd, {stddev, n.constant_doubles(x.type.dtype, {}, {1e-9})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kDiv, {d, std_eps}));
  return n.set_output(0, y);
}

// LRN: y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2 rounded
// down, c + (size-1)/2 rounded up])^beta. The window sum / size is an average pool down
// the channels of x^2 seen as [N, 1, C, rest], padded with zeros that are counted.
Status lower_lrn(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0, 3));
  CARVE_ASSIGN_OR_RETURN(int64_t size, n.attr_int("size"));
  CARVE_ASSIGN_OR_RETURN(double alpha, n.attr_float("alpha", 1e-4));
  CARVE_ASSIGN_OR_RETURN(double beta, n.attr_float("beta", 0.75));
  CARVE_ASSIGN_OR_RETURN(double bias, n.attr_float("bias", 1.0));
  if (size < 1) return n.invalid(fmt::format("size {} (must be >= 1)", size));
  const ir::DType dt = x.type.dtype;
  const auto& dims = x.type.shape.dims();
  const int64_t rest = std::accumulate(dims.begin() + 2, dims.end(), int64_t{1}, std::multiplies<>());
  CARVE_ASSIGN_OR_RETURN(Tensor sq, n.op(OpKind::kMul, {x, x}));
  CARVE_ASSIGN_OR_RETURN(Tensor planes, n.op(OpKind::kReshape, {sq}, {{"shape", std::vector<int64_t>{dims[0], 1, dims[1], rest}}}));
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  ir::Attrs pool{{"kernel", std::vector<int64_t>{size, 1}},
                 {"strides", std::vector<int64_t>{1, 1}},
                 {"pads", std::vector<int64_t>{before, 0, after, 0}},
                 {"count_include_pad", int64_t{1}}};
  CARVE_ASSIGN_OR_RETURN(Tensor avg, n.op(OpKind::kAvgPool, {planes}, std::move(pool)));
  CARVE_ASSIGN_OR_RETURN(avg, n.op(OpKind::kReshape, {avg}, {{"shape", dims}}));
  CARVE_ASSIGN_OR_RETURN(Tensor scaled, n.op(OpKind::kMul, {avg, n.constant_doubles(dt, {}, {alpha})}));
  CARVE_ASSIGN_OR_RETURN(Tensor base, n.op(OpKind::kAdd, {scaled, n.constant_doubles(dt, {}, {bias})}));
  CARVE_ASSIGN_OR_RETURN(Tensor denom, n.op(OpKind::kPow, {base, n.constant_doubles(dt, {}, {beta})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kDiv, {x, denom}));
  return n.set_output(0, y);
}

}  // namespace

void register_norm_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["InstanceNormalization"] = {lower_instance_norm, {"epsilon"}};
  t["MeanVarianceNormalization"] = {lower_mvn, {"axes"}};
  t["LRN"] = {lower_lrn, {"alpha", "beta", "bias", "size"}};
}

}  // namespace carve::onnx::detail
