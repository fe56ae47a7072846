// Random ONNX operators: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike
// and Bernoulli. The random tensors are drawn at import, as constants of the imported
// graph: their shapes are fixed at import, and nothing else about them depends on the
// graph's inputs. Bernoulli compares such a constant with its (run-time) input.
//
// Seeding: the seed attribute keys the generator, so the same seed gives the same bytes
// on every machine. Without a seed, each import draws a fresh key (std::random_device):
// one imported graph, and so one Session's program, repeats its values on every run;
// importing again draws new ones.
//
// The generator is counter-based: draw i is splitmix64's finaliser applied to the key plus
// i times the golden-ratio increment, a function of (key, i) only, so the values do not
// depend on how (or on how many threads) elements are generated.
#include <onnx/onnx_pb.h>

#include <bit>
#include <cmath>
#include <numbers>
#include <random>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Draw `counter` of the stream `key`, uniform in [0, 1) with 53 random bits.
double uniform_draw(uint64_t key, uint64_t counter) {
  return static_cast<double>(splitmix64_mix(key + (counter + 1) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1p-53;
}

// The stream key: from the seed attribute's value, else from std::random_device.
Result<uint64_t> stream_key(const NodeContext& n) {
  if (!n.has_attr("seed")) {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device();
  }
  CARVE_ASSIGN_OR_RETURN(double seed, n.attr_float("seed"));
  return splitmix64_mix(std::bit_cast<uint64_t>(seed));
}

// The output dtype: the dtype attribute, else `fallback`; a float type either way.
Result<ir::DType> random_dtype(const NodeContext& n, ir::DType fallback) {
  ir::DType dtype = fallback;
  if (n.has_attr("dtype")) {
    CARVE_ASSIGN_OR_RETURN(int64_t onnx_dtype, n.attr_int("dtype"));
    Result<ir::DType> d = dtype_from_onnx(static_cast<int32_t>(onnx_dtype));
    if (!d.ok()) return n.unsupported(d.status().message());
    dtype = *d;
  }
  if (!ir::is_float(dtype))
    return n.invalid(fmt::format("dtype {} (random values are float16, bfloat16, float or double)", ir::dtype_name(dtype)));
  return dtype;
}

// The output type: the shape attribute (RandomUniform, RandomNormal) or input 0's shape.
Result<ir::TensorType> random_type(const NodeContext& n, bool like) {
  if (like) {
    CARVE_ASSIGN_OR_RETURN(ir::TensorType input, n.input_type(0));
    CARVE_ASSIGN_OR_RETURN(ir::DType dtype, random_dtype(n, input.dtype));
    return ir::TensorType{dtype, input.shape};
  }
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, n.attr_ints("shape"));
  for (int64_t d : dims)
    if (d < 0) return n.invalid(fmt::format("shape [{}] has a negative dimension", fmt::join(dims, ", ")));
  CARVE_ASSIGN_OR_RETURN(ir::DType dtype, random_dtype(n, ir::DType::kF32));
  return ir::TensorType{dtype, ir::Shape(dims)};
}

// `count` uniform draws in [low, high): a draw that rounds up to high (in f64, or in f32
// for an f32 output) steps down to the value below it. Half-precision outputs may still
// round to high when converted.
std::vector<double> uniform_values(uint64_t key, int64_t count, double low, double high, ir::DType dtype) {
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    double x = low + (high - low) * uniform_draw(key, static_cast<uint64_t>(i));
    if (high > low && x >= high) x = std::nextafter(high, low);
    if (dtype == ir::DType::kF32 && high > low && static_cast<float>(x) >= static_cast<float>(high))
      x = std::nextafter(static_cast<float>(high), static_cast<float>(low));
    v[static_cast<size_t>(i)] = x;
  }
  return v;
}

Result<Tensor> uniform_tensor(NodeContext& n, const ir::TensorType& type, double low, double high) {
  if (!(low <= high) || !std::isfinite(high - low))
    return n.invalid(fmt::format("low {} and high {} (needs finite low <= high)", low, high));
  CARVE_RETURN_IF_ERROR(n.check_folded(type, sizeof(double)));
  CARVE_ASSIGN_OR_RETURN(uint64_t key, stream_key(n));
  CARVE_ASSIGN_OR_RETURN(int64_t count, type.shape.num_elements());
  return n.constant_doubles(type.dtype, type.shape, uniform_values(key, count, low, high, type.dtype));
}

// RandomUniform, RandomUniformLike.
template <bool kLike>
Status lower_random_uniform(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(ir::TensorType type, random_type(n, kLike));
  CARVE_ASSIGN_OR_RETURN(double low, n.attr_float("low", 0.0));
  CARVE_ASSIGN_OR_RETURN(double high, n.attr_float("high", 1.0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, uniform_tensor(n, type, low, high));
  return n.set_output(0, y);
}

// RandomNormal, RandomNormalLike: Box-Muller on draws 2i and 2i + 1 for element i.
template <bool kLike>
Status lower_random_normal(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(ir::TensorType type, random_type(n, kLike));
  CARVE_ASSIGN_OR_RETURN(double mean, n.attr_float("mean", 0.0));
  CARVE_ASSIGN_OR_RETURN(double scale, n.attr_float("scale", 1.0));
  if (!std::isfinite(mean) || !std::isfinite(scale) || scale < 0)
    return n.invalid(fmt::format("mean {} and scale {} (needs finite values, scale >= 0)", mean, scale));
  CARVE_RETURN_IF_ERROR(n.check_folded(type, sizeof(double)));
  CARVE_ASSIGN_OR_RETURN(uint64_t key, stream_key(n));
  CARVE_ASSIGN_OR_RETURN(int64_t count, type.shape.num_elements());
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double radius = std::sqrt(-2 * std::log(1 - uniform_draw(key, 2 * static_cast<uint64_t>(i))));
    const double angle = 2 * std::numbers::pi * uniform_draw(key, 2 * static_cast<uint64_t>(i) + 1);
    v[static_cast<size_t>(i)] = mean + scale * radius * std::cos(angle);
  }
  return n.set_output(0, n.constant_doubles(type.dtype, type.shape, v));
}

// Bernoulli(x): 1 where a uniform draw in [0, 1) is below x, else 0, in dtype (default
// x's). The draws are f64 and x is widened to f64, so x = 0 never and x = 1 always gives 1.
Status lower_bernoulli(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  if (!ir::is_float(x.type.dtype))
    return n.invalid(fmt::format("{} input (probabilities are float16, bfloat16, float or double)", ir::dtype_name(x.type.dtype)));
  ir::DType dtype = x.type.dtype;
  if (n.has_attr("dtype")) {
    CARVE_ASSIGN_OR_RETURN(int64_t onnx_dtype, n.attr_int("dtype"));
    Result<ir::DType> d = dtype_from_onnx(static_cast<int32_t>(onnx_dtype));
    if (!d.ok()) return n.unsupported(d.status().message());
    dtype = *d;
  }
  CARVE_ASSIGN_OR_RETURN(Tensor draws, uniform_tensor(n, ir::TensorType{ir::DType::kF64, x.type.shape}, 0.0, 1.0));
  if (x.type.dtype != ir::DType::kF64) {
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kCast, {x}, {{"to", ir::dtype_name(ir::DType::kF64)}}));
  }
  CARVE_ASSIGN_OR_RETURN(Tensor hit, n.op(OpKind::kLess, {draws, x}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kCast, {hit}, {{"to", ir::dtype_name(dtype)}}));
  return n.set_output(0, y);
}

}  // namespace

void register_random_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["RandomUniform"] = {lower_random_uniform<false>, {"dtype", "high", "low", "seed", "shape"}};
  t["RandomUniformLike"] = {lower_random_uniform<true>, {"dtype", "high", "low", "seed"}};
  t["RandomNormal"] = {lower_random_normal<false>, {"dtype", "mean", "scale", "seed", "shape"}};
  t["RandomNormalLike"] = {lower_random_normal<true>, {"dtype", "mean", "scale", "seed"}};
  t["Bernoulli"] = {lower_bernoulli, {"dtype", "seed"}};
}

}  // namespace carve::onnx::detail
