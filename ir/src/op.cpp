#include "carve/ir/op.h"

#include <array>

#include <fmt/format.h>

namespace carve::ir {
namespace {

using SV = std::string_view;

// Attribute name lists, shared by ops with the same attributes.
constexpr std::span<const SV> kNone{};
constexpr SV kHardSigmoid[] = {"alpha", "beta"};
constexpr SV kClip[] = {"min", "max"};
constexpr SV kCast[] = {"to"};
constexpr SV kReduce[] = {"axes", "keepdims"};
constexpr SV kAxis[] = {"axis"};
constexpr SV kLayerNorm[] = {"axis", "epsilon"};
constexpr SV kGemm[] = {"alpha", "beta", "trans_a", "trans_b"};
constexpr SV kConv[] = {"groups", "strides", "pads", "dilations"};
constexpr SV kMaxPool[] = {"kernel", "strides", "pads", "ceil_mode"};
constexpr SV kAvgPool[] = {"kernel", "strides", "pads", "ceil_mode", "count_include_pad"};
constexpr SV kEpsilon[] = {"epsilon"};
constexpr SV kSplit[] = {"axis", "sizes"};
constexpr SV kSlice[] = {"starts", "ends", "axes", "steps"};
constexpr SV kPerm[] = {"perm"};
constexpr SV kPad[] = {"pads", "value"};
constexpr SV kShape[] = {"shape"};
constexpr SV kAxes[] = {"axes"};
constexpr SV kHandle[] = {"handle"};
constexpr SV kHandleAxis[] = {"handle", "axis"};

enum Flags : unsigned { kView = 1, kElem = 2, kState = 4, kSink = 8 };

constexpr OpTraits T(OpKind k, SV name, int min_in, int max_in, int min_out, int max_out,
                     unsigned flags, std::span<const SV> attrs) {
  return OpTraits{k, name, min_in, max_in, min_out, max_out, (flags & kView) != 0,
                  (flags & kElem) != 0, (flags & kState) != 0, (flags & kSink) != 0, attrs};
}
constexpr OpTraits Unary(OpKind k, SV name, std::span<const SV> attrs = kNone) {
  return T(k, name, 1, 1, 1, 1, kElem, attrs);
}
constexpr OpTraits Binary(OpKind k, SV name) { return T(k, name, 2, 2, 1, 1, kElem, kNone); }
constexpr OpTraits One(OpKind k, SV name, std::span<const SV> attrs, int min_in = 1,
                       int max_in = 1) {
  return T(k, name, min_in, max_in, 1, 1, 0, attrs);
}

using K = OpKind;
// Indexed by OpKind; the static_assert below keeps it in enum order.
constexpr std::array<OpTraits, kNumOps> kTable = {{
    Unary(K::neg, "neg"),
    Unary(K::abs, "abs"),
    Unary(K::exp, "exp"),
    Unary(K::log, "log"),
    Unary(K::sqrt, "sqrt"),
    Unary(K::rsqrt, "rsqrt"),
    Unary(K::tanh, "tanh"),
    Unary(K::sigmoid, "sigmoid"),
    Unary(K::relu, "relu"),
    Unary(K::gelu, "gelu"),
    Unary(K::erf, "erf"),
    Unary(K::silu, "silu"),
    Unary(K::hard_sigmoid, "hard_sigmoid", kHardSigmoid),
    Unary(K::clip, "clip", kClip),
    Binary(K::add, "add"),
    Binary(K::sub, "sub"),
    Binary(K::mul, "mul"),
    Binary(K::div, "div"),
    Binary(K::pow, "pow"),
    Binary(K::max, "max"),
    Binary(K::min, "min"),
    Binary(K::equal, "equal"),
    Binary(K::not_equal, "not_equal"),
    Binary(K::less, "less"),
    Binary(K::less_equal, "less_equal"),
    Binary(K::greater, "greater"),
    Binary(K::greater_equal, "greater_equal"),
    T(K::where, "where", 3, 3, 1, 1, kElem, kNone),
    Unary(K::cast, "cast", kCast),
    One(K::reduce_sum, "reduce_sum", kReduce),
    One(K::reduce_mean, "reduce_mean", kReduce),
    One(K::reduce_max, "reduce_max", kReduce),
    One(K::softmax, "softmax", kAxis),
    One(K::layer_norm, "layer_norm", kLayerNorm, 2, 3),
    One(K::matmul, "matmul", kNone, 2, 2),
    One(K::gemm, "gemm", kGemm, 2, 3),
    One(K::conv2d, "conv2d", kConv, 2, 3),
    One(K::max_pool, "max_pool", kMaxPool),
    One(K::avg_pool, "avg_pool", kAvgPool),
    One(K::global_avg_pool, "global_avg_pool", kNone),
    One(K::batch_norm, "batch_norm", kEpsilon, 5, 5),
    One(K::concat, "concat", kAxis, 1, kVariadic),
    T(K::split, "split", 1, 1, 1, kVariadic, 0, kSplit),
    One(K::slice, "slice", kSlice),
    One(K::transpose, "transpose", kPerm),
    One(K::pad, "pad", kPad),
    One(K::gather, "gather", kAxis, 2, 2),
    T(K::reshape, "reshape", 1, 1, 1, 1, kView, kShape),
    T(K::flatten, "flatten", 1, 1, 1, 1, kView, kAxis),
    T(K::squeeze, "squeeze", 1, 1, 1, 1, kView, kAxes),
    T(K::unsqueeze, "unsqueeze", 1, 1, 1, 1, kView, kAxes),
    T(K::identity, "identity", 1, 1, 1, 1, kView, kNone),
    T(K::read_handle, "read_handle", 0, 0, 1, 1, kState, kHandle),
    T(K::write_handle, "write_handle", 1, 1, 0, 0, kState | kSink, kHandle),
    T(K::write_handle_at, "write_handle_at", 2, 2, 0, 0, kState | kSink, kHandleAxis),
}};

constexpr bool table_in_enum_order() {
  for (int i = 0; i < kNumOps; ++i) {
    if (static_cast<int>(kTable[static_cast<size_t>(i)].kind) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "kTable must list ops in OpKind order");

constexpr std::array<OpKind, kNumOps> make_all() {
  std::array<OpKind, kNumOps> all{};
  for (int i = 0; i < kNumOps; ++i) all[static_cast<size_t>(i)] = static_cast<OpKind>(i);
  return all;
}
constexpr std::array<OpKind, kNumOps> kAllOps = make_all();

}  // namespace

bool is_valid_op(OpKind op) { return static_cast<int>(op) < kNumOps; }

const OpTraits& op_traits(OpKind op) { return kTable[static_cast<size_t>(op)]; }

std::string_view op_name(OpKind op) { return is_valid_op(op) ? op_traits(op).name : "?"; }

Result<OpKind> op_from_name(std::string_view name) {
  for (const OpTraits& t : kTable) {
    if (t.name == name) return t.kind;
  }
  return Status(ErrorCode::kNotFound, fmt::format("unknown op '{}'", name));
}

std::span<const OpKind> all_ops() { return kAllOps; }

bool is_view(OpKind op) { return is_valid_op(op) && op_traits(op).view; }
bool is_elementwise(OpKind op) { return is_valid_op(op) && op_traits(op).elementwise; }
bool is_state(OpKind op) { return is_valid_op(op) && op_traits(op).state; }
bool is_sink(OpKind op) { return is_valid_op(op) && op_traits(op).sink; }

bool is_unary_elementwise(OpKind op) {
  auto i = static_cast<int>(op);
  return i >= static_cast<int>(OpKind::neg) && i <= static_cast<int>(OpKind::clip);
}
bool is_binary_elementwise(OpKind op) {
  auto i = static_cast<int>(op);
  return i >= static_cast<int>(OpKind::add) && i <= static_cast<int>(OpKind::greater_equal);
}
bool is_comparison(OpKind op) {
  auto i = static_cast<int>(op);
  return i >= static_cast<int>(OpKind::equal) && i <= static_cast<int>(OpKind::greater_equal);
}
bool is_reduction(OpKind op) {
  return op == OpKind::reduce_sum || op == OpKind::reduce_mean || op == OpKind::reduce_max;
}

bool accepts_attr(OpKind op, std::string_view attr_name) {
  if (!is_valid_op(op) || attr_name.empty()) return false;
  for (std::string_view a : op_traits(op).attrs) {
    if (a == attr_name) return true;
  }
  return false;
}

}  // namespace carve::ir
