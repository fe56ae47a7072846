// Normalizations composed of reductions and elementwise ops: InstanceNormalization,
// BatchNormalization (carve's batch_norm op in inference; composed in training mode),
// MeanVarianceNormalization, and LRN (a sum over a channel window, taken as an average pool
// with the padding counted).
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

// mean(x), x - mean and the (biased) variance mean((x - mean)^2) over `axes`, kept as
// dims of 1. The variance of the centred values avoids E[x^2] - E[x]^2's cancellation.
struct Moments {
  Tensor mean, centred, variance;
};

Result<Moments> moments(NodeContext& n, const Tensor& x, const std::vector<int64_t>& axes) {
  ir::Attrs attrs{{"axes", axes}, {"keepdims", int64_t{1}}};
  CARVE_ASSIGN_OR_RETURN(Tensor mean, n.op(OpKind::kReduceMean, {x}, attrs));
  CARVE_ASSIGN_OR_RETURN(Tensor d, n.op(OpKind::kSub, {x, mean}));
  CARVE_ASSIGN_OR_RETURN(Tensor sq, n.op(OpKind::kMul, {d, d}));
  CARVE_ASSIGN_OR_RETURN(Tensor var, n.op(OpKind::kReduceMean, {sq}, attrs));
  return Moments{mean, d, var};
}

// x [N, C, ...] normalised over `axes` with its own moments, then scaled and shifted by
// inputs 1 and 2 (scale [C], bias [C]): (x - mean) / sqrt(var + epsilon) * scale + bias.
// Sets output 0; returns the moments.
Result<Moments> normalize_per_channel(NodeContext& n, const Tensor& x, const std::vector<int64_t>& axes) {
  CARVE_ASSIGN_OR_RETURN(Tensor scale, n.input(1));
  CARVE_ASSIGN_OR_RETURN(Tensor bias, n.input(2));
  CARVE_ASSIGN_OR_RETURN(double epsilon, n.attr_float("epsilon", 1e-5));
  const int rank = x.type.shape.rank();
  const int64_t channels = x.type.shape[1];
  for (const Tensor* t : {&scale, &bias})
    if (t->type.shape != ir::Shape{channels})
      return n.invalid(fmt::format("scale and bias must have shape [{}], got {}", channels, t->type.to_string()));
  CARVE_ASSIGN_OR_RETURN(Moments m, moments(n, x, axes));
  CARVE_ASSIGN_OR_RETURN(Tensor var_eps, n.op(OpKind::kAdd, {m.variance, n.constant_doubles(x.type.dtype, {}, {epsilon})}));
  CARVE_ASSIGN_OR_RETURN(Tensor stddev, n.op(OpKind::kSqrt, {var_eps}));
  CARVE_ASSIGN_OR_RETURN(Tensor normed, n.op(OpKind::kDiv, {m.centred, stddev}));
  // [C] -> [C, 1, ...] so it broadcasts along dim 1.
  std::vector<int64_t> per_channel(static_cast<size_t>(rank - 1), 1);
  per_channel[0] = channels;
  CARVE_ASSIGN_OR_RETURN(scale, n.op(OpKind::kReshape, {scale}, {{"shape", per_channel}}));
  CARVE_ASSIGN_OR_RETURN(bias, n.op(OpKind::kReshape, {bias}, {{"shape", per_channel}}));
  CARVE_ASSIGN_OR_RETURN(Tensor scaled, n.op(OpKind::kMul, {normed, scale}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kAdd, {scaled, bias}));
  CARVE_RETURN_IF_ERROR(n.set_output(0, y));
  return m;
}

// InstanceNormalization(x [N, C, ...], scale [C], bias [C]): each (n, c) plane
// normalised over the spatial axes, then scaled and shifted per channel.
Status lower_instance_norm(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0, 3));
  std::vector<int64_t> axes(static_cast<size_t>(x.type.shape.rank() - 2));
  std::iota(axes.begin(), axes.end(), 2);
  return normalize_per_channel(n, x, axes).status();
}

// BatchNormalization(x [N, C, ...], scale, bias, mean, var). Inference: the kBatchNorm op
// with the given mean and var. training_mode=1 (opsets 14+): normalised with the batch's
// own moments over every axis but 1, and the optional outputs running_mean and
// running_var are mean * momentum + batch mean * (1 - momentum) (likewise var, with the
// biased batch variance, as ONNX's reference and ONNX Runtime compute it).
Status lower_batch_norm(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(int64_t training, n.attr_int("training_mode", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t spatial, n.attr_int("spatial", 1));
  if (spatial != 1) return n.unsupported("spatial=0");
  if (training != 0 && training != 1) return n.invalid(fmt::format("training_mode={} (0 or 1)", training));
  if (n.opset() < 14) {
    for (int i = 1; i < n.num_outputs(); ++i)
      if (n.output_used(i))
        return n.unsupported(fmt::format("training outputs before opset 14 (opset {}; mean, var, saved_mean, "
                                         "saved_var are not supported)", n.opset()));
  } else if (training == 0) {
    for (int i = 1; i < n.num_outputs(); ++i)
      if (n.output_used(i)) return n.invalid("running_mean/running_var requested with training_mode=0");
  }
  if (training == 0) {
    CARVE_ASSIGN_OR_RETURN(double epsilon, n.attr_float("epsilon", 1e-5));
    std::vector<Tensor> in;
    for (int i = 0; i < 5; ++i) {
      CARVE_ASSIGN_OR_RETURN(Tensor t, n.input(i));
      in.push_back(std::move(t));
    }
    CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kBatchNorm, in, {{"epsilon", epsilon}}));
    return n.set_output(0, y);
  }

  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0, 2));
  CARVE_ASSIGN_OR_RETURN(double momentum, n.attr_float("momentum", 0.9));
  std::vector<int64_t> axes{0};
  for (int64_t a = 2; a < x.type.shape.rank(); ++a) axes.push_back(a);
  CARVE_ASSIGN_OR_RETURN(Moments m, normalize_per_channel(n, x, axes));
  const int64_t channels = x.type.shape[1];
  const std::pair<int, const Tensor*> running[] = {{3, &m.mean}, {4, &m.variance}};
  for (const auto& [input, batch_value] : running) {
    const int output = input - 2;
    if (!n.output_used(output)) continue;
    CARVE_ASSIGN_OR_RETURN(Tensor previous, n.input(input));
    if (previous.type.shape != ir::Shape{channels})
      return n.invalid(fmt::format("input {} must have shape [{}], got {}", input, channels, previous.type.to_string()));
    CARVE_ASSIGN_OR_RETURN(Tensor batch, n.op(OpKind::kReshape, {*batch_value}, {{"shape", std::vector<int64_t>{channels}}}));
    if (batch.type.dtype != previous.type.dtype) {
      CARVE_ASSIGN_OR_RETURN(batch, n.op(OpKind::kCast, {batch}, {{"to", ir::dtype_name(previous.type.dtype)}}));
    }
    const ir::DType dt = previous.type.dtype;
    CARVE_ASSIGN_OR_RETURN(Tensor kept, n.op(OpKind::kMul, {previous, n.constant_doubles(dt, {}, {momentum})}));
    CARVE_ASSIGN_OR_RETURN(Tensor added, n.op(OpKind::kMul, {batch, n.constant_doubles(dt, {}, {1 - momentum})}));
    CARVE_ASSIGN_OR_RETURN(Tensor updated, n.op(OpKind::kAdd, {kept, added}));
    CARVE_RETURN_IF_ERROR(n.set_output(output, updated));
  }
  return Status();
}

// MeanVarianceNormalization: (x - mean) / (std + 1e-9) over `axes` (default [0, 2, 3]);
// ONNX's function body adds the 1e-9 to the standard deviation, not the variance.
Status lower_mvn(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0, 1));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, n.attr_ints("axes", std::vector<int64_t>{0, 2, 3}));
  CARVE_ASSIGN_OR_RETURN(Moments m, moments(n, x, axes));
  CARVE_ASSIGN_OR_RETURN(Tensor stddev, n.op(OpKind::kSqrt, {m.variance}));
  CARVE_ASSIGN_OR_RETURN(Tensor std_eps, n.op(OpKind::kAdd, {stddev, n.constant_doubles(x.type.dtype, {}, {1e-9})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kDiv, {m.centred, std_eps}));
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
  t["BatchNormalization"] = {lower_batch_norm, {"epsilon", "momentum", "training_mode", "spatial"}};
  t["MeanVarianceNormalization"] = {lower_mvn, {"axes"}};
  t["LRN"] = {lower_lrn, {"alpha", "beta", "bias", "size"}};
}

}  // namespace carve::onnx::detail
