// JIT elementwise kernels vs the reference interpreter: every op x every dtype the IR
// allows, on random data and shapes (1 element, 7 and 1023 for vector tails, scalars) and
// broadcasting in every position. rapidcheck varies the data seed per (op, dtype, shape).
//
// Tolerances (JIT vs reference, which computes in double and rounds once):
//  - exact (bit-for-bit, NaN == NaN): neg abs relu clip add sub mul div max min sqrt,
//    floor ceil round trunc fmod, comparisons, where, cast, and every integer/bool op. f32 arithmetic is exact
//    because nothing is reassociated; f16/bf16 compute in float and round per op, which
//    equals rounding the exact result once for + - * / sqrt.
//  - float math (exp log tanh erf sigmoid silu gelu) on f32/f16/bf16: the JIT's float
//    approximations (jit/llvm/emit_vmath.cpp), within their stated ulp bounds on f32
//    (exp, log 1; tanh, erf, sigmoid 2; silu 3; gelu 6; tests/jit/vmath_test.cpp sweeps
//    them) and one 16-bit ulp on f16/bf16 (the float result rounded once more). gelu
//    also passes within 1e-15 absolute: the reference's 1 + erf(x / sqrt 2) cancels for
//    negative x and is itself off by about that much.
//  - other transcendental (rsqrt pow hard_sigmoid, the trigonometric/hyperbolic ops, and
//    every op on f64): the JIT also
//    evaluates in double through libm, so results are normally identical; allowed:
//    f64 1e-13 relative, f32 1e-6 relative, f16 2^-10 and bf16 2^-7 relative (one ulp).
#include <doctest/doctest.h>

#include "engine_test_util.h"

namespace carve::jit::jittest {
namespace {

const std::vector<DType> kFloats = {DType::kF32, DType::kF64, DType::kF16, DType::kBf16};
const std::vector<DType> kNumeric = {DType::kF32, DType::kF64, DType::kF16, DType::kBf16, DType::kI8,  DType::kI16,
                                     DType::kI32, DType::kI64, DType::kU8,  DType::kU16,  DType::kU32, DType::kU64};
const std::vector<DType> kAll = {DType::kF32, DType::kF64, DType::kF16, DType::kBf16, DType::kI8,  DType::kI16, DType::kI32,
                                 DType::kI64, DType::kU8,  DType::kU16, DType::kU32,  DType::kU64, DType::kBool};

bool transcendental(OpKind op) {
  switch (op) {
    case OpKind::kExp: case OpKind::kLog: case OpKind::kTanh: case OpKind::kErf:
    case OpKind::kSigmoid: case OpKind::kSilu: case OpKind::kGelu: case OpKind::kRsqrt:
    case OpKind::kPow: case OpKind::kHardSigmoid: case OpKind::kSin: case OpKind::kCos: case OpKind::kTan:
    case OpKind::kAsin: case OpKind::kAcos: case OpKind::kAtan: case OpKind::kSinh: case OpKind::kCosh:
    case OpKind::kAsinh: case OpKind::kAcosh: case OpKind::kAtanh:
      return true;
    default:
      return false;
  }
}

// The ulp bound of the float math on `d`; 0 where the op is not float math.
double ulp_bound(OpKind op, DType d) {
  if (d == DType::kF64 || !ir::is_float(d)) return 0;
  double f32 = 0;
  switch (op) {
    case OpKind::kExp: case OpKind::kLog: f32 = 1; break;
    case OpKind::kTanh: case OpKind::kErf: case OpKind::kSigmoid: f32 = 2; break;
    case OpKind::kSilu: f32 = 3; break;
    case OpKind::kGelu: f32 = 6; break;
    default: return 0;
  }
  return d == DType::kF32 ? f32 : 1;
}

double rtol_for(OpKind op, DType d) {
  if (!transcendental(op)) return 0;
  switch (d) {
    case DType::kF64: return 1e-13;
    case DType::kF32: return 1e-6;
    case DType::kF16: return 1.0 / 1024;
    case DType::kBf16: return 1.0 / 128;
    default: return 0;
  }
}

// Value range of the inputs of `op` (input k).
std::pair<double, double> range_for(OpKind op, size_t k) {
  switch (op) {
    case OpKind::kLog: case OpKind::kSqrt: case OpKind::kRsqrt: return {-1, 50};
    case OpKind::kExp: return {-20, 20};
    // a little outside the domains, so NaNs are compared too
    case OpKind::kAsin: case OpKind::kAcos: case OpKind::kAtanh: return {-1.1, 1.1};
    case OpKind::kAcosh: return {0.9, 30};
    case OpKind::kRound: return {-4, 4};  // 16-bit dtypes hit many exact halves here
    case OpKind::kPow: return k == 0 ? std::pair{0.05, 4.0} : std::pair{-3.0, 3.0};
    default: return {-8, 8};
  }
}

// One node of `op` over inputs of the given types; all inputs are graph inputs.
ir::Graph op_graph(OpKind op, const std::vector<ir::TensorType>& in, ir::Attrs attrs = {}) {
  ir::GraphBuilder b;
  std::vector<ir::ValueId> ids;
  for (size_t i = 0; i < in.size(); ++i) ids.push_back(b.input("x" + std::to_string(i), in[i].dtype, in[i].shape));
  b.output(b.op1(op, ids, std::move(attrs), "n"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(g).value();
}

// JIT == reference for random inputs of the given types (seeded by rapidcheck).
void check_op(OpKind op, const std::vector<ir::TensorType>& types, ir::Attrs attrs, double rtol, int runs = 3) {
  JitCompiler& jit = *shared_jit();
  ir::Graph g = op_graph(op, types, attrs);
  std::string label = std::string(ir::op_name(op));
  for (const auto& t : types) label += " " + t.to_string();
  bool ok = rc_check(label, runs, [&] {
    const auto seed = *rc::gen::arbitrary<uint64_t>();
    std::mt19937_64 rng(seed);
    std::vector<HostTensor> inputs;
    for (size_t k = 0; k < types.size(); ++k) {
      auto [lo, hi] = range_for(op, k);
      if (op == OpKind::kPow && ir::is_integer(types[k].dtype) && k == 1) {
        // small exponents, negative ones included
        HostTensor t = random_tensor(rng, types[k].dtype, types[k].shape);
        std::vector<double> e = t.to_doubles();
        for (double& x : e) x = static_cast<double>(static_cast<int64_t>(rng() % 15) - 2);
        if (ir::is_unsigned_int(types[k].dtype)) for (double& x : e) x = std::fabs(x);
        inputs.push_back(HostTensor::from_doubles(types[k].dtype, types[k].shape, e));
        continue;
      }
      if ((op == OpKind::kBitShiftLeft || op == OpKind::kBitShiftRight) && k == 1) {
        // shift amounts from 0 to past the width (those give 0)
        const uint64_t width = static_cast<uint64_t>(ir::dtype_size(types[k].dtype)) * 8;
        std::vector<double> s(static_cast<size_t>(types[k].shape.num_elements().value()));
        for (double& x : s) x = static_cast<double>(rng() % (width + 6));
        inputs.push_back(HostTensor::from_doubles(types[k].dtype, types[k].shape, s));
        continue;
      }
      HostTensor t = random_tensor(rng, types[k].dtype, types[k].shape, lo, hi);
      if ((op == OpKind::kDiv || op == OpKind::kFmod) && k == 1 && ir::is_integer(types[k].dtype)) {
        std::vector<double> d = t.to_doubles();  // zeros and -1 divisors on purpose
        for (double& x : d) {
          if (rng() % 5 == 0) x = 0;
          else if (rng() % 7 == 0 && !ir::is_unsigned_int(types[k].dtype)) x = -1;
        }
        t = HostTensor::from_doubles(types[k].dtype, types[k].shape, d);
      }
      inputs.push_back(std::move(t));
    }
    auto expected = run_reference(g, inputs);
    RC_ASSERT(expected.ok());
    auto actual = run_jit(jit, g, inputs);
    if (!actual.ok()) RC_FAIL(actual.status().to_string());
    const DType out = (*expected)[0].type.dtype;
    const double ulps = ulp_bound(op, out);
    std::string diff = ulps > 0 ? compare_ulp((*actual)[0], (*expected)[0], ulps, op == OpKind::kGelu ? 1e-15 : 0)
                                : compare((*actual)[0], (*expected)[0], rtol, rtol > 0 ? 1e-300 : 0);
    if (!diff.empty()) RC_FAIL(label + " seed " + std::to_string(seed) + ": " + diff);
  });
  CHECK_MESSAGE(ok, label);
}

const std::vector<Shape> kUnaryShapes = {Shape{}, Shape{7}, Shape{1023}, Shape{2, 3, 5}};
// (a, b) pairs: same shape, scalar left, size-1 right, both broadcasting in the middle.
const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {
    {Shape{1}, Shape{1}}, {Shape{1023}, Shape{1023}}, {Shape{}, Shape{7}},
    {Shape{7}, Shape{1}}, {Shape{4, 1, 7}, Shape{3, 1}}, {Shape{3, 1}, Shape{2, 3, 9}}};

void check_unary(OpKind op, const std::vector<DType>& dtypes, ir::Attrs attrs = {}) {
  if (skip_without_jit()) return;
  for (DType d : dtypes) {
    for (const Shape& s : kUnaryShapes) check_op(op, {{d, s}}, attrs, rtol_for(op, d));
  }
}

void check_binary(OpKind op, const std::vector<DType>& dtypes) {
  if (skip_without_jit()) return;
  for (DType d : dtypes) {
    for (const auto& [a, b] : kBinaryShapes) check_op(op, {{d, a}, {d, b}}, {}, rtol_for(op, d));
  }
}

}  // namespace

TEST_CASE("jit/elementwise/neg all numeric dtypes") { check_unary(OpKind::kNeg, kNumeric); }
TEST_CASE("jit/elementwise/abs all numeric dtypes") { check_unary(OpKind::kAbs, kNumeric); }
TEST_CASE("jit/elementwise/relu all numeric dtypes") { check_unary(OpKind::kRelu, kNumeric); }
TEST_CASE("jit/elementwise/clip all numeric dtypes") {
  check_unary(OpKind::kClip, kNumeric, {{"min", -2.5}, {"max", 3.7}});
  check_unary(OpKind::kClip, {DType::kF32, DType::kI8, DType::kU8}, {{"min", -1000.0}});
}
TEST_CASE("jit/elementwise/exp float dtypes") { check_unary(OpKind::kExp, kFloats); }
TEST_CASE("jit/elementwise/log float dtypes") { check_unary(OpKind::kLog, kFloats); }
TEST_CASE("jit/elementwise/sqrt float dtypes") { check_unary(OpKind::kSqrt, kFloats); }
TEST_CASE("jit/elementwise/rsqrt float dtypes") { check_unary(OpKind::kRsqrt, kFloats); }
TEST_CASE("jit/elementwise/tanh float dtypes") { check_unary(OpKind::kTanh, kFloats); }
TEST_CASE("jit/elementwise/sigmoid float dtypes") { check_unary(OpKind::kSigmoid, kFloats); }
TEST_CASE("jit/elementwise/gelu float dtypes") { check_unary(OpKind::kGelu, kFloats); }
TEST_CASE("jit/elementwise/erf float dtypes") { check_unary(OpKind::kErf, kFloats); }
TEST_CASE("jit/elementwise/silu float dtypes") { check_unary(OpKind::kSilu, kFloats); }
TEST_CASE("jit/elementwise/hard_sigmoid float dtypes") {
  check_unary(OpKind::kHardSigmoid, kFloats, {{"alpha", 0.3}, {"beta", 0.4}});
}
TEST_CASE("jit/elementwise/rounding ops all numeric dtypes") {
  for (OpKind op : {OpKind::kFloor, OpKind::kCeil, OpKind::kRound, OpKind::kTrunc}) check_unary(op, kNumeric);
}
TEST_CASE("jit/elementwise/trigonometric and hyperbolic ops float dtypes") {
  for (OpKind op : {OpKind::kSin, OpKind::kCos, OpKind::kTan, OpKind::kAsin, OpKind::kAcos, OpKind::kAtan,
                    OpKind::kSinh, OpKind::kCosh, OpKind::kAsinh, OpKind::kAcosh, OpKind::kAtanh}) {
    check_unary(op, kFloats);
  }
}

TEST_CASE("jit/elementwise/rounding ties, signed zeros, inf and NaN equal the reference") {
  if (skip_without_jit()) return;
  JitCompiler& jit = *shared_jit();
  const std::vector<double> v = {-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 0.49999997, 8388607.5, 1e30,
                                 -1e30, INFINITY, -INFINITY, NAN, -0.75, 0.25};
  for (DType d : kFloats) {
    HostTensor in = HostTensor::from_doubles(d, Shape{static_cast<int64_t>(v.size())}, v);
    for (OpKind op : {OpKind::kFloor, OpKind::kCeil, OpKind::kRound, OpKind::kTrunc}) {
      CAPTURE(ir::op_name(op));
      CAPTURE(ir::dtype_name(d));
      ir::Graph g = op_graph(op, {in.type});
      auto expected = run_reference(g, {in});
      REQUIRE(expected.ok());
      auto actual = run_jit(jit, g, {in});
      REQUIRE_MESSAGE(actual.ok(), actual.status().to_string());
      CHECK((*actual)[0].bytes == (*expected)[0].bytes);  // signed zeros too
    }
  }
}

TEST_CASE("jit/elementwise/add all numeric dtypes and broadcasts") { check_binary(OpKind::kAdd, kNumeric); }
TEST_CASE("jit/elementwise/sub all numeric dtypes and broadcasts") { check_binary(OpKind::kSub, kNumeric); }
TEST_CASE("jit/elementwise/mul all numeric dtypes and broadcasts") { check_binary(OpKind::kMul, kNumeric); }
TEST_CASE("jit/elementwise/div all numeric dtypes and broadcasts") { check_binary(OpKind::kDiv, kNumeric); }
TEST_CASE("jit/elementwise/pow all numeric dtypes and broadcasts") { check_binary(OpKind::kPow, kNumeric); }
TEST_CASE("jit/elementwise/max all numeric dtypes and broadcasts") { check_binary(OpKind::kMax, kNumeric); }
TEST_CASE("jit/elementwise/min all numeric dtypes and broadcasts") { check_binary(OpKind::kMin, kNumeric); }
TEST_CASE("jit/elementwise/fmod all numeric dtypes and broadcasts") { check_binary(OpKind::kFmod, kNumeric); }

TEST_CASE("jit/elementwise/bit shifts unsigned dtypes and broadcasts") {
  const std::vector<DType> unsigned_ints = {DType::kU8, DType::kU16, DType::kU32, DType::kU64};
  check_binary(OpKind::kBitShiftLeft, unsigned_ints);
  check_binary(OpKind::kBitShiftRight, unsigned_ints);
}

TEST_CASE("jit/elementwise/comparisons all dtypes and broadcasts") {
  for (OpKind op : {OpKind::kEqual, OpKind::kNotEqual, OpKind::kLess, OpKind::kLessEqual, OpKind::kGreater,
                    OpKind::kGreaterEqual}) {
    check_binary(op, kAll);
  }
}

TEST_CASE("jit/elementwise/where all dtypes and broadcasts") {
  if (skip_without_jit()) return;
  for (DType d : kAll) {
    check_op(OpKind::kWhere, {{DType::kBool, Shape{7}}, {d, Shape{7}}, {d, Shape{7}}}, {}, 0);
    check_op(OpKind::kWhere, {{DType::kBool, Shape{1023}}, {d, Shape{}}, {d, Shape{1023}}}, {}, 0);
    check_op(OpKind::kWhere, {{DType::kBool, Shape{3, 1}}, {d, Shape{1, 5}}, {d, Shape{2, 1, 1}}}, {}, 0);
  }
}

TEST_CASE("jit/elementwise/cast every dtype pair") {
  if (skip_without_jit()) return;
  JitCompiler& jit = *shared_jit();
  for (DType from : kAll) {
    for (DType to : kAll) {
      ir::Graph g = op_graph(OpKind::kCast, {{from, Shape{257}}}, {{"to", std::string(ir::dtype_name(to))}});
      std::string label = fmt::format("cast {} -> {}", ir::dtype_name(from), ir::dtype_name(to));
      bool ok = rc_check(label, 4, [&] {
        std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
        // wide values: saturation, NaN/inf, rounding ties of 16-bit formats, big ints
        std::vector<double> v(257);
        for (double& x : v) {
          switch (rng() % 8) {
            case 0: x = std::ldexp(static_cast<double>(rng() % 4096), static_cast<int>(rng() % 80) - 40); break;
            case 1: x = static_cast<double>(static_cast<int64_t>(rng())); break;
            case 2: x = (rng() & 1 ? -1.0 : 1.0) * std::numeric_limits<double>::infinity(); break;
            case 3: x = std::nan(""); break;
            case 4: x = static_cast<double>(static_cast<int64_t>(rng() % 600) - 300); break;
            default: x = std::uniform_real_distribution<double>(-1e6, 1e6)(rng); break;
          }
          if (ir::is_integer(from) || from == DType::kBool) {
            if (!std::isfinite(x)) x = 7;
          }
        }
        HostTensor in;
        if (from == DType::kI64 || from == DType::kU64) {
          // exact 64-bit patterns (beyond 2^53, and past INT64_MAX for u64) for the int ->
          // float rounding paths
          std::vector<int64_t> iv(257);
          for (auto& x : iv) x = static_cast<int64_t>(rng()) >> (rng() % 64);
          in = HostTensor::from<int64_t>(Shape{257}, iv);
          in.type.dtype = from;  // the same 8-byte patterns
        } else {
          in = HostTensor::from_doubles(from, Shape{257}, v);
        }
        auto expected = run_reference(g, {in});
        RC_ASSERT(expected.ok());
        auto actual = run_jit(jit, g, {in});
        if (!actual.ok()) RC_FAIL(actual.status().to_string());
        std::string diff = compare((*actual)[0], (*expected)[0]);
        if (!diff.empty()) RC_FAIL(label + ": " + diff);
      });
      CHECK_MESSAGE(ok, label);
    }
  }
}

TEST_CASE("jit/elementwise/16-bit rounding is to nearest even at every boundary") {
  // Every f16 and bf16 midpoint (and its neighbours) through cast f32 -> f16/bf16.
  if (skip_without_jit()) return;
  JitCompiler& jit = *shared_jit();
  for (DType to : {DType::kF16, DType::kBf16}) {
    std::vector<float> v;
    for (uint32_t h = 0; h < 0x10000; h += 7) {
      float a = to == DType::kF16 ? ir::f16_to_float(static_cast<uint16_t>(h)) : ir::bf16_to_float(static_cast<uint16_t>(h));
      float b = to == DType::kF16 ? ir::f16_to_float(static_cast<uint16_t>(h + 1)) : ir::bf16_to_float(static_cast<uint16_t>(h + 1));
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
      v.push_back(mid);
      v.push_back(std::nextafter(mid, 0.0f));
      v.push_back(std::nextafter(mid, 1e30f));
    }
    HostTensor in = HostTensor::from<float>(Shape{static_cast<int64_t>(v.size())}, v);
    ir::Graph g = op_graph(OpKind::kCast, {in.type}, {{"to", std::string(ir::dtype_name(to))}});
    auto expected = run_reference(g, {in});
    REQUIRE(expected.ok());
    auto actual = run_jit(jit, g, {in});
    REQUIRE_MESSAGE(actual.ok(), actual.status().to_string());
    CHECK(compare((*actual)[0], (*expected)[0]) == "");
  }
}

TEST_CASE("jit/elementwise/integer division by zero and overflow are defined") {
  if (skip_without_jit()) return;
  JitCompiler& jit = *shared_jit();
  HostTensor a = HostTensor::from<int32_t>(Shape{4}, {7, INT32_MIN, -7, 5});
  HostTensor b = HostTensor::from<int32_t>(Shape{4}, {0, -1, 2, -1});
  ir::Graph g = op_graph(OpKind::kDiv, {a.type, b.type});
  auto out = run_jit(jit, g, {a, b});
  REQUIRE(out.ok());
  CHECK((*out)[0].as<int32_t>() == std::vector<int32_t>{0, INT32_MIN, -3, -5});
  ir::Graph m = op_graph(OpKind::kFmod, {a.type, b.type});
  auto rem = run_jit(jit, m, {a, b});
  REQUIRE(rem.ok());
  CHECK((*rem)[0].as<int32_t>() == std::vector<int32_t>{0, 0, -1, 0});
}

// Unsigned division, order and conversion: values past INT32_MAX / INT64_MAX, where a
// signed instruction would give another answer, checked against C++'s unsigned ops.
template <typename T>
void check_unsigned_against_native(JitCompiler& jit) {
  constexpr T kMax = std::numeric_limits<T>::max();
  const std::vector<T> v = {0, 1, 3, kMax, static_cast<T>(kMax - 2), static_cast<T>(kMax / 2 + 1),
                            static_cast<T>(kMax / 2 + 77), static_cast<T>(kMax / 3)};
  std::vector<T> a, b;
  for (T x : v) {
    for (T y : v) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  const Shape shape{static_cast<int64_t>(a.size())};
  const HostTensor ta = HostTensor::from<T>(shape, a), tb = HostTensor::from<T>(shape, b);
  auto run = [&](OpKind op, const std::vector<HostTensor>& in, ir::Attrs attrs = {}) {
    std::vector<ir::TensorType> types;
    for (const HostTensor& t : in) types.push_back(t.type);
    auto out = run_jit(jit, op_graph(op, types, std::move(attrs)), in);
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    return (*out)[0];
  };
  std::vector<T> quot, rem, mx, mn;
  std::vector<uint8_t> less, greater;
  std::vector<double> as_f64;
  for (size_t i = 0; i < a.size(); ++i) {
    quot.push_back(b[i] == 0 ? 0 : static_cast<T>(a[i] / b[i]));
    rem.push_back(b[i] == 0 ? 0 : static_cast<T>(a[i] % b[i]));
    mx.push_back(std::max(a[i], b[i]));
    mn.push_back(std::min(a[i], b[i]));
    less.push_back(a[i] < b[i]);
    greater.push_back(a[i] > b[i]);
    as_f64.push_back(static_cast<double>(a[i]));
  }
  CHECK(run(OpKind::kDiv, {ta, tb}).template as<T>() == quot);
  CHECK(run(OpKind::kFmod, {ta, tb}).template as<T>() == rem);
  CHECK(run(OpKind::kMax, {ta, tb}).template as<T>() == mx);
  CHECK(run(OpKind::kMin, {ta, tb}).template as<T>() == mn);
  CHECK(run(OpKind::kLess, {ta, tb}).bytes == less);
  CHECK(run(OpKind::kGreater, {ta, tb}).bytes == greater);
  CHECK(run(OpKind::kCast, {ta}, {{"to", std::string("f64")}}).template as<double>() == as_f64);
  CHECK(run(OpKind::kAbs, {ta}).template as<T>() == a);
  CHECK(run(OpKind::kRelu, {ta}).template as<T>() == a);
  // reduce_max and arg_max see the unsigned order as well.
  const HostTensor rows = HostTensor::from<T>(Shape{2, 3}, {1, static_cast<T>(kMax / 2 + 1), 5, kMax, 2, 0});
  CHECK(run(OpKind::kReduceMax, {rows}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}).template as<T>() ==
        std::vector<T>{static_cast<T>(kMax / 2 + 1), kMax});
  CHECK(run(OpKind::kArgMax, {rows}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}).template as<int64_t>() ==
        std::vector<int64_t>{1, 0});
}

TEST_CASE("jit/elementwise/u32 and u64 divide compare and convert as unsigned past the signed range") {
  if (skip_without_jit()) return;
  check_unsigned_against_native<uint32_t>(*shared_jit());
  check_unsigned_against_native<uint64_t>(*shared_jit());
  check_unsigned_against_native<uint16_t>(*shared_jit());
}

TEST_CASE("jit/elementwise/fused chain equals unfused nodes") {
  if (skip_without_jit()) return;
  JitCompiler& jit = *shared_jit();
  for (DType d : {DType::kF32, DType::kF16, DType::kBf16, DType::kF64, DType::kI32}) {
    ir::GraphBuilder b;
    auto x = b.input("x", d, {37, 29});
    auto w = b.input("w", d, {29});
    auto c = b.input("c", d, {37, 1});
    ir::ValueId y = b.add(b.mul(x, w), c);
    if (ir::is_float(d)) {
      // exact steps first (round, libm sin, fmod equal the reference), then float math
      y = b.fmod(b.op1(OpKind::kSin, {b.op1(OpKind::kRound, {y})}), c);
      y = b.gelu(y);
      y = b.sigmoid(b.sub(y, b.tanh(y)));
    } else {
      y = b.relu(b.sub(y, b.max(y, w)));
      y = b.op1(OpKind::kFloor, {b.fmod(y, w)});
    }
    y = b.where(b.greater(y, c), y, b.neg(c));
    b.output(y);
    auto g = b.build();
    REQUIRE(g.ok());
    std::mt19937_64 rng(42);
    std::vector<HostTensor> in = {random_tensor(rng, d, {37, 29}), random_tensor(rng, d, {29}), random_tensor(rng, d, {37, 1})};
    JitRunOptions fused, unfused;
    unfused.fusion.fuse = false;
    fused.fusion.elements_per_tile = 100;  // several tiles, run one by one
    fused.tile_by_tile = true;
    std::vector<CompiledKernel> kf, ku;
    auto a = run_jit(jit, *g, in, nullptr, fused, &kf);
    auto u = run_jit(jit, *g, in, nullptr, unfused, &ku);
    REQUIRE_MESSAGE(a.ok(), a.status().to_string());
    REQUIRE_MESSAGE(u.ok(), u.status().to_string());
    CHECK(kf.size() < ku.size());
    CHECK(compare((*a)[0], (*u)[0]) == "");
    CHECK((*a)[0].bytes == (*u)[0].bytes);
    auto ref = run_reference(*g, in);
    REQUIRE(ref.ok());
    double tol = d == DType::kF16 ? 1.0 / 512 : d == DType::kBf16 ? 1.0 / 64 : d == DType::kF32 ? 1e-6 : 0;
    CHECK(compare((*a)[0], (*ref)[0], tol, tol) == "");
  }
}

TEST_CASE("jit/elementwise/tiles run independently and in any order") {
  if (skip_without_jit()) return;
  JitCompiler& jit = *shared_jit();
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {3, 50001});
  auto y = b.input("y", DType::kF32, {50001});
  b.output(b.relu(b.add(x, y)));
  auto g = b.build();
  REQUIRE(g.ok());
  std::mt19937_64 rng(3);
  std::vector<HostTensor> in = {random_tensor(rng, DType::kF32, {3, 50001}), random_tensor(rng, DType::kF32, {50001})};
  JitRunOptions tiled;
  tiled.fusion.elements_per_tile = 4099;
  tiled.tile_by_tile = true;
  std::vector<CompiledKernel> k;
  auto a = run_jit(jit, *g, in, nullptr, tiled, &k);
  REQUIRE(a.ok());
  REQUIRE(k.size() == 1);
  CHECK(k[0].group.num_tiles == (3 * 50001 + 4098) / 4099);
  auto ref = run_reference(*g, in);
  REQUIRE(ref.ok());
  CHECK(compare((*a)[0], (*ref)[0]) == "");
}

}  // namespace carve::jit::jittest
