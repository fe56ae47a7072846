// Reference interpreter: unary, binary, comparisons, where, cast, dtype rules, half.h.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "carve/ir/half.h"
#include "reference_test_util.h"

namespace {

using namespace carve;
using namespace carve::reference;
using namespace carve::reference::testing;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<float> kX = {-2, -1, 0, 0.5f, 1, 2};

TEST_CASE("reference/unary float ops match hand values") {
  const HostTensor x = f32({6}, kX);
  check_close(run1(OpKind::kNeg, {x}), {2, 1, 0, -0.5, -1, -2});
  check_close(run1(OpKind::kAbs, {x}), {2, 1, 0, 0.5, 1, 2});
  check_close(run1(OpKind::kRelu, {x}), {0, 0, 0, 0.5, 1, 2});
  check_close(run1(OpKind::kExp, {x}), {0.1353352832366127, 0.36787944117144233, 1.0,
                                       1.6487212707001282, 2.718281828459045, 7.38905609893065});
  check_close(run1(OpKind::kTanh, {x}), {-0.9640275800758169, -0.7615941559557649, 0.0,
                                        0.46211715726000974, 0.7615941559557649, 0.9640275800758169});
  check_close(run1(OpKind::kSigmoid, {x}), {0.11920292202211755, 0.2689414213699951, 0.5,
                                           0.6224593312018546, 0.7310585786300049, 0.8807970779778823});
  // gelu is the exact erf form, not the tanh approximation.
  check_close(run1(OpKind::kGelu, {x}), {-0.04550026389635842, -0.15865525393145707, 0.0,
                                        0.34573123063700656, 0.8413447460685429, 1.9544997361036416});
  check_close(run1(OpKind::kErf, {x}), {-0.9953222650189527, -0.8427007929497149, 0.0,
                                       0.5204998778130465, 0.8427007929497149, 0.9953222650189527});
  check_close(run1(OpKind::kSilu, {x}), {-0.2384058440442351, -0.2689414213699951, 0.0,
                                        0.3112296656009273, 0.7310585786300049, 1.7615941559557646});
  // hard_sigmoid defaults alpha 0.2, beta 0.5: clamp(0.2x + 0.5, 0, 1); then alpha 1, beta 0.
  check_close(run1(OpKind::kHardSigmoid, {x}), {0.1, 0.3, 0.5, 0.6, 0.7, 0.9});
  check_close(run1(OpKind::kHardSigmoid, {x}, {{"alpha", 1.0}, {"beta", 0.0}}), {0, 0, 0, 0.5, 1, 1});
  check_close(run1(OpKind::kClip, {x}, {{"min", -1.0}, {"max", 0.75}}), {-1, -1, 0, 0.5, 0.75, 0.75});
  check_close(run1(OpKind::kClip, {x}, {{"max", 0.0}}), {-2, -1, 0, 0, 0, 0});

  const HostTensor pos = f64({4}, {0.25, 1, 4, 2});
  check_close(run1(OpKind::kSqrt, {pos}), {0.5, 1, 2, 1.4142135623730951});
  check_close(run1(OpKind::kRsqrt, {pos}), {2, 1, 0.5, 0.7071067811865476});
  check_close(run1(OpKind::kLog, {pos}), {-1.3862943611198906, 0, 1.3862943611198906, 0.6931471805599453});
  // IEEE edge cases: log(0) = -inf, sqrt(-1) = NaN, relu and clip keep NaN.
  check_close(run1(OpKind::kLog, {f32({1}, {0})}), {-kInf});
  check_close(run1(OpKind::kSqrt, {f32({1}, {-1})}), {kNaN});
  check_close(run1(OpKind::kRelu, {f32({1}, {NAN})}), {kNaN});
  check_close(run1(OpKind::kClip, {f32({1}, {NAN})}, {{"min", 0.0}, {"max", 1.0}}), {kNaN});
}

TEST_CASE("reference/unary integer ops wrap and clip to integer bounds") {
  CHECK(run1(OpKind::kNeg, {i8({3}, {-128, 5, 127})}).as<int8_t>() == std::vector<int8_t>{-128, -5, -127});
  CHECK(run1(OpKind::kAbs, {i8({3}, {-128, -5, 7})}).as<int8_t>() == std::vector<int8_t>{-128, 5, 7});
  CHECK(run1(OpKind::kNeg, {u8({3}, {0, 1, 255})}).as<uint8_t>() == std::vector<uint8_t>{0, 255, 1});
  CHECK(run1(OpKind::kAbs, {i64({1}, {INT64_MIN})}).as<int64_t>() == std::vector<int64_t>{INT64_MIN});
  CHECK(run1(OpKind::kRelu, {i32({3}, {-4, 0, 9})}).as<int32_t>() == std::vector<int32_t>{0, 0, 9});
  // Integer clip bounds are [ceil(min), floor(max)].
  CHECK(run1(OpKind::kClip, {i32({5}, {-3, -2, 0, 2, 3})}, {{"min", -1.5}, {"max", 2.5}}).as<int32_t>() ==
        std::vector<int32_t>{-1, -1, 0, 2, 2});
  // Bounds beyond the dtype saturate.
  CHECK(run1(OpKind::kClip, {u8({3}, {0, 100, 255})}, {{"min", -10.0}, {"max", 1000.0}}).as<uint8_t>() ==
        std::vector<uint8_t>{0, 100, 255});
}

TEST_CASE("reference/rounding ops: half to even, signed zeros, integers unchanged") {
  const HostTensor x = f32({8}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, -1.2f, 1.7f});
  check_close(run1(OpKind::kFloor, {x}), {-3, -2, -1, 0, 1, 2, -2, 1});
  check_close(run1(OpKind::kCeil, {x}), {-2, -1, -0.0, 1, 2, 3, -1, 2});
  check_close(run1(OpKind::kRound, {x}), {-2, -2, -0.0, 0, 2, 2, -1, 2});
  check_close(run1(OpKind::kTrunc, {x}), {-2, -1, -0.0, 0, 1, 2, -1, 1});
  CHECK(std::signbit(run1(OpKind::kRound, {f32({1}, {-0.5f})}).to_doubles()[0]));
  check_close(run1(OpKind::kFloor, {f64({3}, {kInf, -kInf, kNaN})}), {kInf, -kInf, kNaN});
  // f16: 1000.5 is exact and rounds to the even neighbour.
  check_close(run1(OpKind::kRound, {HostTensor::from_doubles(DType::kF16, {2}, {1000.5, 1001.5})}), {1000, 1002});
  for (OpKind op : {OpKind::kFloor, OpKind::kCeil, OpKind::kRound, OpKind::kTrunc}) {
    CHECK(run1(op, {i8({3}, {-128, 5, 127})}).as<int8_t>() == std::vector<int8_t>{-128, 5, 127});
    CHECK(run1(op, {u8({2}, {0, 255})}).as<uint8_t>() == std::vector<uint8_t>{0, 255});
  }
}

TEST_CASE("reference/trigonometric and hyperbolic ops match hand values") {
  const HostTensor x = f64({3}, {-0.5, 0.0, 0.75});
  check_close(run1(OpKind::kSin, {x}), {-0.479425538604203, 0.0, 0.6816387600233341});
  check_close(run1(OpKind::kCos, {x}), {0.8775825618903728, 1.0, 0.7316888688738209});
  check_close(run1(OpKind::kTan, {x}), {-0.5463024898437905, 0.0, 0.9315964599440725});
  check_close(run1(OpKind::kAsin, {x}), {-0.5235987755982989, 0.0, 0.848062078981481});
  check_close(run1(OpKind::kAcos, {x}), {2.0943951023931957, 1.5707963267948966, 0.7227342478134157});
  check_close(run1(OpKind::kAtan, {x}), {-0.4636476090008061, 0.0, 0.6435011087932844});
  check_close(run1(OpKind::kSinh, {x}), {-0.5210953054937474, 0.0, 0.82231673193583});
  check_close(run1(OpKind::kCosh, {x}), {1.1276259652063807, 1.0, 1.2946832846768448});
  check_close(run1(OpKind::kAsinh, {x}), {-0.48121182505960347, 0.0, 0.6931471805599453});
  check_close(run1(OpKind::kAtanh, {x}), {-0.5493061443340548, 0.0, 0.9729550745276566});
  check_close(run1(OpKind::kAcosh, {f32({3}, {1, 2, 0.5f})}), {0.0, 1.3169578969248166, kNaN});
  // Outside the domain: NaN; at the poles: +-inf.
  check_close(run1(OpKind::kAsin, {f32({1}, {1.5f})}), {kNaN});
  check_close(run1(OpKind::kAtanh, {f32({2}, {1, -1})}), {kInf, -kInf});
}

TEST_CASE("reference/fmod: exact float remainder, integer remainder with the dividend's sign") {
  check_close(run1(OpKind::kFmod, {f32({5}, {5.5f, -5.5f, 5.5f, 1e30f, 3}), f32({5}, {2, 2, -2, 3, 0})}),
              {1.5, -1.5, 1.5, std::fmod(1e30f, 3.0f), kNaN});
  // Exact where x - trunc(x / y) * y is not: 1e30 / 3 is not an integer in float.
  CHECK(run1(OpKind::kFmod, {f32({1}, {1e30f}), f32({1}, {3})}).to_doubles()[0] == std::fmod(double{1e30f}, 3.0));
  CHECK(run1(OpKind::kFmod, {i32({6}, {7, -7, 7, -7, 5, INT32_MIN}), i32({6}, {3, 3, -3, -3, 0, -1})})
            .as<int32_t>() == std::vector<int32_t>{1, -1, 1, -1, 0, 0});
  CHECK(run1(OpKind::kFmod, {u8({3}, {255, 9, 9}), u8({3}, {7, 0, 10})}).as<uint8_t>() ==
        std::vector<uint8_t>{3, 0, 9});
}

TEST_CASE("reference/binary broadcasting in every position") {
  // [2,3] + [3]: the right operand broadcasts over rows.
  check_close(run1(OpKind::kAdd, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})}),
              {11, 22, 33, 14, 25, 36});
  // [3] - [2,3]: the left operand broadcasts.
  check_close(run1(OpKind::kSub, {f32({3}, {10, 20, 30}), f32({2, 3}, {1, 2, 3, 4, 5, 6})}),
              {9, 18, 27, 6, 15, 24});
  // [2,1] * [1,3] -> [2,3]: both broadcast (outer product).
  HostTensor outer = run1(OpKind::kMul, {f32({2, 1}, {2, 3}), f32({1, 3}, {1, 10, 100})});
  CHECK(outer.type.shape == Shape{2, 3});
  check_close(outer, {2, 20, 200, 3, 30, 300});
  // scalar / [2,2] and [2,2] / scalar.
  check_close(run1(OpKind::kDiv, {f32({}, {12}), f32({2, 2}, {1, 2, 3, 4})}), {12, 6, 4, 3});
  check_close(run1(OpKind::kDiv, {f32({2, 2}, {1, 2, 3, 4}), f32({}, {2})}), {0.5, 1, 1.5, 2});
  // Rank 3 against rank 2 with a middle broadcast: [2,1,2] + [3,1] -> [2,3,2].
  HostTensor r3 = run1(OpKind::kAdd, {f32({2, 1, 2}, {0, 1, 100, 101}), f32({3, 1}, {10, 20, 30})});
  CHECK(r3.type.shape == Shape{2, 3, 2});
  check_close(r3, {10, 11, 20, 21, 30, 31, 110, 111, 120, 121, 130, 131});
  // Empty broadcast result.
  CHECK(run1(OpKind::kAdd, {f32({0, 3}, {}), f32({3}, {1, 2, 3})}).bytes.empty());
}

TEST_CASE("reference/binary float ops pow max min and IEEE cases") {
  check_close(run1(OpKind::kPow, {f32({4}, {2, 9, 4, -8}), f32({4}, {10, 0.5f, -1, 3})}), {1024, 3, 0.25, -512});
  check_close(run1(OpKind::kMax, {f64({3}, {1, NAN, -1}), f64({3}, {2, 0, NAN})}), {2, kNaN, kNaN});
  check_close(run1(OpKind::kMin, {f64({3}, {1, NAN, -5}), f64({3}, {2, 0, -3})}), {1, kNaN, -5});
  check_close(run1(OpKind::kDiv, {f32({3}, {1, -1, 0}), f32({3}, {0, 0, 0})}), {kInf, -kInf, kNaN});
}

TEST_CASE("reference/integer arithmetic wraps and division is defined") {
  CHECK(run1(OpKind::kAdd, {i32({2}, {INT32_MAX, INT32_MIN}), i32({2}, {1, -1})}).as<int32_t>() ==
        std::vector<int32_t>{INT32_MIN, INT32_MAX});
  CHECK(run1(OpKind::kMul, {i8({2}, {100, -128}), i8({2}, {3, -1})}).as<int8_t>() ==
        std::vector<int8_t>{44, -128});
  CHECK(run1(OpKind::kSub, {u8({2}, {1, 200}), u8({2}, {2, 100})}).as<uint8_t>() ==
        std::vector<uint8_t>{255, 100});
  CHECK(run1(OpKind::kMul, {i64({1}, {INT64_MAX}), i64({1}, {2})}).as<int64_t>() == std::vector<int64_t>{-2});
  // Division truncates toward zero; x / 0 = 0; INT_MIN / -1 wraps.
  CHECK(run1(OpKind::kDiv, {i32({5}, {7, -7, 7, 5, INT32_MIN}), i32({5}, {2, 2, -2, 0, -1})}).as<int32_t>() ==
        std::vector<int32_t>{3, -3, -3, 0, INT32_MIN});
  CHECK(run1(OpKind::kDiv, {i64({1}, {INT64_MIN}), i64({1}, {-1})}).as<int64_t>() ==
        std::vector<int64_t>{INT64_MIN});
  CHECK(run1(OpKind::kDiv, {u8({2}, {255, 9}), u8({2}, {2, 0})}).as<uint8_t>() == std::vector<uint8_t>{127, 0});
  // pow: wraps; negative exponents truncate the real result.
  CHECK(run1(OpKind::kPow, {i32({6}, {2, 3, 1, -1, -1, 0}), i32({6}, {10, -1, -5, -3, -4, -2})}).as<int32_t>() ==
        std::vector<int32_t>{1024, 0, 1, -1, 1, 0});
  CHECK(run1(OpKind::kPow, {i8({2}, {2, 3}), i8({2}, {7, 5})}).as<int8_t>() == std::vector<int8_t>{-128, -13});
  CHECK(run1(OpKind::kMax, {u8({2}, {200, 3}), u8({2}, {100, 4})}).as<uint8_t>() == std::vector<uint8_t>{200, 4});
  CHECK(run1(OpKind::kMin, {i8({2}, {-128, 3}), i8({2}, {127, 4})}).as<int8_t>() == std::vector<int8_t>{-128, 3});
}

TEST_CASE("reference/comparisons give bool with IEEE NaN rules") {
  const HostTensor a = f32({4}, {1, 2, NAN, 3});
  const HostTensor b = f32({4}, {1, 3, NAN, 2});
  CHECK(run1(OpKind::kEqual, {a, b}).as<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(run1(OpKind::kNotEqual, {a, b}).as<bool>() == std::vector<bool>{false, true, true, true});
  CHECK(run1(OpKind::kLess, {a, b}).as<bool>() == std::vector<bool>{false, true, false, false});
  CHECK(run1(OpKind::kLessEqual, {a, b}).as<bool>() == std::vector<bool>{true, true, false, false});
  CHECK(run1(OpKind::kGreater, {a, b}).as<bool>() == std::vector<bool>{false, false, false, true});
  CHECK(run1(OpKind::kGreaterEqual, {a, b}).as<bool>() == std::vector<bool>{true, false, false, true});
  HostTensor out = run1(OpKind::kLess, {i8({2, 1}, {-1, 5}), i8({3}, {0, 5, 6})});
  CHECK(out.type == ir::TensorType{DType::kBool, Shape{2, 3}});
  CHECK(out.as<bool>() == std::vector<bool>{true, true, true, false, false, true});
  CHECK(run1(OpKind::kGreater, {u8({1}, {200}), u8({1}, {100})}).as<bool>() == std::vector<bool>{true});
  CHECK(run1(OpKind::kEqual, {boolean({2}, {true, false}), boolean({}, {true})}).as<bool>() ==
        std::vector<bool>{true, false});
}

TEST_CASE("reference/where broadcasts condition x and y") {
  // cond [2,1], x [3], y scalar -> [2,3].
  HostTensor out = run1(OpKind::kWhere, {boolean({2, 1}, {true, false}), i32({3}, {1, 2, 3}), i32({}, {-1})});
  CHECK(out.type.shape == Shape{2, 3});
  CHECK(out.as<int32_t>() == std::vector<int32_t>{1, 2, 3, -1, -1, -1});
  HostTensor f = run1(OpKind::kWhere, {boolean({3}, {false, true, false}), f32({}, {7}), f32({2, 1}, {0, 1})});
  check_close(f, {0, 7, 0, 1, 7, 1});
  CHECK(run1(OpKind::kWhere, {boolean({2}, {true, false}), boolean({2}, {false, false}), boolean({}, {true})})
            .as<bool>() == std::vector<bool>{false, true});
}

TEST_CASE("reference/cast truncates saturates wraps and rounds") {
  const HostTensor f = f32({8}, {-2.7f, 2.7f, 1e10f, -1e10f, NAN, -0.5f, 0.0f, 255.9f});
  CHECK(run1(OpKind::kCast, {f}, {{"to", "i32"}}).as<int32_t>() ==
        std::vector<int32_t>{-2, 2, INT32_MAX, INT32_MIN, 0, 0, 0, 255});
  CHECK(run1(OpKind::kCast, {f}, {{"to", "u8"}}).as<uint8_t>() == std::vector<uint8_t>{0, 2, 255, 0, 0, 0, 0, 255});
  CHECK(run1(OpKind::kCast, {f}, {{"to", "i8"}}).as<int8_t>() == std::vector<int8_t>{-2, 2, 127, -128, 0, 0, 0, 127});
  CHECK(run1(OpKind::kCast, {f}, {{"to", "i64"}}).as<int64_t>() ==
        std::vector<int64_t>{-2, 2, 10000000000, -10000000000, 0, 0, 0, 255});
  CHECK(run1(OpKind::kCast, {f64({2}, {1e300, -1e300})}, {{"to", "i64"}}).as<int64_t>() ==
        std::vector<int64_t>{INT64_MAX, INT64_MIN});
  CHECK(run1(OpKind::kCast, {f}, {{"to", "bool"}}).as<bool>() ==
        std::vector<bool>{true, true, true, true, true, true, false, true});
  // int -> int keeps the low bits.
  CHECK(run1(OpKind::kCast, {i32({4}, {300, -129, 255, -1})}, {{"to", "i8"}}).as<int8_t>() ==
        std::vector<int8_t>{44, 127, -1, -1});
  CHECK(run1(OpKind::kCast, {i32({2}, {-1, 256})}, {{"to", "u8"}}).as<uint8_t>() == std::vector<uint8_t>{255, 0});
  CHECK(run1(OpKind::kCast, {u8({2}, {255, 0})}, {{"to", "i32"}}).as<int32_t>() == std::vector<int32_t>{255, 0});
  CHECK(run1(OpKind::kCast, {boolean({2}, {true, false})}, {{"to", "f32"}}).as<float>() == std::vector<float>{1, 0});
  CHECK(run1(OpKind::kCast, {i64({1}, {(int64_t{1} << 53) + 1})}, {{"to", "f64"}}).as<double>() ==
        std::vector<double>{9007199254740992.0});
  // -> f16: RNE from the integer itself (65519 rounds down, 65520 overflows to inf).
  HostTensor h = run1(OpKind::kCast, {i64({3}, {65519, 65520, -3})}, {{"to", "f16"}});
  check_close(h, {65504, kInf, -3});
  // f64 -> f32 rounds to nearest even; f32 -> f64 is exact.
  CHECK(run1(OpKind::kCast, {f64({1}, {1.0 + std::ldexp(1.0, -24)})}, {{"to", "f32"}}).as<float>() ==
        std::vector<float>{1.0f});
  CHECK(run1(OpKind::kCast, {f32({1}, {0.1f})}, {{"to", "f64"}}).as<double>() ==
        std::vector<double>{static_cast<double>(0.1f)});
}

TEST_CASE("reference/f16 and bf16 compute in wide floats and round to nearest even") {
  // f16 ulp at 1 is 2^-10: 1 + 2^-11 is a tie and rounds to even (1); 1 + 3*2^-11 is a
  // tie between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  const double u = std::ldexp(1.0, -11);
  HostTensor a = HostTensor::from_doubles(DType::kF16, {3}, {1, 1, 1});
  HostTensor b = HostTensor::from_doubles(DType::kF16, {3}, {u, 3 * u, 0.25});
  HostTensor sum = run1(OpKind::kAdd, {a, b});
  CHECK(sum.type.dtype == DType::kF16);
  CHECK(sum.to_doubles() == std::vector<double>{1.0, 1.0 + std::ldexp(1.0, -9), 1.25});
  // bf16 ulp at 1 is 2^-7.
  const double v = std::ldexp(1.0, -8);
  HostTensor c = HostTensor::from_doubles(DType::kBf16, {2}, {1, 1});
  HostTensor d = HostTensor::from_doubles(DType::kBf16, {2}, {v, 3 * v});
  CHECK(run1(OpKind::kAdd, {c, d}).to_doubles() == std::vector<double>{1.0, 1.0 + std::ldexp(1.0, -6)});
  // Overflow to inf in f16: 60000 + 10000.
  HostTensor big = run1(OpKind::kAdd, {HostTensor::from_doubles(DType::kF16, {1}, {60000}),
                                       HostTensor::from_doubles(DType::kF16, {1}, {10000})});
  CHECK(std::isinf(big.to_doubles()[0]));
  // Transcendental ops on f16 round the exact result.
  check_close(run1(OpKind::kExp, {HostTensor::from_doubles(DType::kF16, {1}, {1})}), {2.71875}, 0, 0);
  check_close(run1(OpKind::kSigmoid, {HostTensor::from_doubles(DType::kBf16, {1}, {0})}), {0.5}, 0, 0);
  // from_doubles itself rounds: 0.1 is not representable in f16.
  CHECK(HostTensor::from_doubles(DType::kF16, {1}, {0.1}).to_doubles()[0] == 0.0999755859375);
}

TEST_CASE("reference/every numeric dtype adds") {
  for (DType dt : ir::all_dtypes()) {
    if (dt == DType::kBool) continue;
    INFO(ir::dtype_name(dt));
    HostTensor a = HostTensor::from_doubles(dt, {2, 2}, {1, 2, 3, 4});
    HostTensor b = HostTensor::from_doubles(dt, {2}, {10, 20});
    HostTensor out = run1(OpKind::kAdd, {a, b});
    CHECK(out.type.dtype == dt);
    CHECK(out.to_doubles() == std::vector<double>{11, 22, 13, 24});
    CHECK(run1(OpKind::kMax, {a, b}).to_doubles() == std::vector<double>{10, 20, 10, 20});
  }
}

// ---- half.h ----

TEST_CASE("reference/half f16 conversions of known bit patterns") {
  CHECK(ir::float_to_f16(1.0f) == 0x3c00);
  CHECK(ir::float_to_f16(-2.0f) == 0xc000);
  CHECK(ir::float_to_f16(65504.0f) == 0x7bff);
  CHECK(ir::float_to_f16(65519.0f) == 0x7bff);
  CHECK(ir::float_to_f16(65520.0f) == 0x7c00);  // tie with the (odd) max rounds to inf
  CHECK(ir::float_to_f16(1e9f) == 0x7c00);
  CHECK(ir::float_to_f16(-INFINITY) == 0xfc00);
  CHECK(ir::float_to_f16(-0.0f) == 0x8000);
  CHECK(ir::float_to_f16(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(ir::float_to_f16(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(ir::float_to_f16(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even: 0
  CHECK(ir::float_to_f16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(ir::float_to_f16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 ulp: tie to even 2
  CHECK(ir::float_to_f16(std::ldexp(1023.5f, -24)) == 0x0400);  // subnormal rounds up to normal
  CHECK(std::isnan(ir::f16_to_float(ir::float_to_f16(NAN))));
  CHECK(ir::f16_to_float(0x3555) == 0.333251953125f);
  CHECK(ir::f16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(ir::f16_to_float(0x8000) == 0.0f);
  CHECK(std::signbit(ir::f16_to_float(0x8000)));
  CHECK(std::isinf(ir::f16_to_float(0x7c00)));
  // double -> f16 rounds once: a value just above a tie must round up, even though
  // rounding it to float first would land exactly on the tie (and then round to even).
  const double just_above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(ir::double_to_f16(just_above_tie) == 0x3c01);
  CHECK(ir::float_to_f16(static_cast<float>(just_above_tie)) == 0x3c00);
  CHECK(ir::int64_to_f16(2049) == ir::float_to_f16(2048.0f));  // tie to even
  CHECK(ir::int64_to_f16(2051) == ir::float_to_f16(2052.0f));
  CHECK(ir::int64_to_f16(-65504) == 0xfbff);
  CHECK(ir::int64_to_f16(INT64_MIN) == 0xfc00);
}

TEST_CASE("reference/half bf16 conversions of known bit patterns") {
  CHECK(ir::float_to_bf16(1.0f) == 0x3f80);
  CHECK(ir::float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // tie to even
  CHECK(ir::float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(ir::float_to_bf16(1.0f + std::ldexp(3.0f, -8)) == 0x3f82);  // tie to even (up)
  CHECK(ir::float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(ir::float_to_bf16(-0.0f) == 0x8000);
  CHECK(ir::float_to_bf16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(ir::float_to_bf16(std::ldexp(1.0f, -133)) == 0x0001);  // smallest bf16 subnormal
  CHECK(std::isnan(ir::bf16_to_float(ir::float_to_bf16(NAN))));
  CHECK(ir::bf16_to_float(0x4049) == 3.140625f);
  CHECK(ir::int64_to_bf16(257) == 0x4380);  // 256 (tie to even)
  CHECK(ir::int64_to_bf16(259) == 0x4382);  // 260
  CHECK(ir::int64_to_bf16(INT64_MAX) == ir::float_to_bf16(std::ldexp(1.0f, 63)));
}

TEST_CASE("reference/half every f16 and bf16 pattern round trips") {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float hf = ir::f16_to_float(h);
    const float bf = ir::bf16_to_float(h);
    if (std::isnan(hf)) {
      CHECK(std::isnan(ir::f16_to_float(ir::float_to_f16(hf))));
    } else if (ir::float_to_f16(hf) != h || ir::double_to_f16(hf) != h) {
      FAIL_CHECK("f16 pattern " << bits << " does not round trip");
    }
    if (std::isnan(bf)) {
      CHECK(std::isnan(ir::bf16_to_float(ir::float_to_bf16(bf))));
    } else if (ir::float_to_bf16(bf) != h) {
      FAIL_CHECK("bf16 pattern " << bits << " does not round trip");
    }
  }
}

TEST_CASE("reference/half narrowing picks the nearest representable value") {
  CHECK(rc::check("ir::double_to_f16 / bf16 are nearest, ties to even", [](double x) {
    RC_PRE(std::isfinite(x));
    x = std::fmod(x, 70000.0);  // mostly in f16 range
    const uint16_t h = ir::double_to_f16(x);
    const double got = ir::f16_to_float(h);
    RC_PRE(std::isfinite(got));
    // Neighbours one ulp away (same sign direction) are no closer.
    for (int delta : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + delta);
      const double other = ir::f16_to_float(n);
      if (std::isnan(other) || ((n ^ h) & 0x8000) != 0) continue;
      RC_ASSERT(std::fabs(got - x) <= std::fabs(other - x));
      if (std::fabs(got - x) == std::fabs(other - x)) RC_ASSERT((h & 1) == 0);
    }
    const uint16_t b = ir::double_to_bf16(x);
    const double bgot = ir::bf16_to_float(b);
    for (int delta : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(b + delta);
      const double other = ir::bf16_to_float(n);
      if (std::isnan(other) || ((n ^ b) & 0x8000) != 0) continue;
      RC_ASSERT(std::fabs(bgot - x) <= std::fabs(other - x));
    }
  }));
}

}  // namespace

// ---- i16, u16, u32, u64 ----

// Values past the signed range (u32 above INT32_MAX, u64 above INT64_MAX), zero, one and
// the maxima, every pair once: the reference must agree with C++'s own unsigned ops.
template <typename T>
void check_unsigned_binary_ops() {
  constexpr T kMax = std::numeric_limits<T>::max();
  const std::vector<T> v = {0, 1, 2, 7, kMax, static_cast<T>(kMax - 1), static_cast<T>(kMax / 2),
                            static_cast<T>(kMax / 2 + 1), static_cast<T>(kMax / 2 + 12345), static_cast<T>(3000000000u)};
  std::vector<T> a, b;
  for (T x : v) {
    for (T y : v) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  const ir::Shape shape{static_cast<int64_t>(a.size())};
  const HostTensor ta = HostTensor::from<T>(shape, a), tb = HostTensor::from<T>(shape, b);
  std::vector<T> sum, quot, rem, mx, mn, prod;
  std::vector<bool> less, greater_equal;
  for (size_t i = 0; i < a.size(); ++i) {
    sum.push_back(static_cast<T>(a[i] + b[i]));
    prod.push_back(static_cast<T>(static_cast<uint64_t>(a[i]) * b[i]));
    quot.push_back(b[i] == 0 ? 0 : static_cast<T>(a[i] / b[i]));
    rem.push_back(b[i] == 0 ? 0 : static_cast<T>(a[i] % b[i]));
    mx.push_back(std::max(a[i], b[i]));
    mn.push_back(std::min(a[i], b[i]));
    less.push_back(a[i] < b[i]);
    greater_equal.push_back(a[i] >= b[i]);
  }
  CHECK(run1(OpKind::kAdd, {ta, tb}).as<T>() == sum);
  CHECK(run1(OpKind::kMul, {ta, tb}).as<T>() == prod);
  CHECK(run1(OpKind::kDiv, {ta, tb}).as<T>() == quot);
  CHECK(run1(OpKind::kFmod, {ta, tb}).as<T>() == rem);
  CHECK(run1(OpKind::kMax, {ta, tb}).as<T>() == mx);
  CHECK(run1(OpKind::kMin, {ta, tb}).as<T>() == mn);
  std::vector<bool> got_less, got_ge;
  for (uint8_t x : run1(OpKind::kLess, {ta, tb}).bytes) got_less.push_back(x != 0);
  for (uint8_t x : run1(OpKind::kGreaterEqual, {ta, tb}).bytes) got_ge.push_back(x != 0);
  CHECK(got_less == less);
  CHECK(got_ge == greater_equal);
}

TEST_CASE("reference/u32 and u64 compare divide and order as unsigned past the signed range") {
  check_unsigned_binary_ops<uint32_t>();
  check_unsigned_binary_ops<uint64_t>();
  check_unsigned_binary_ops<uint16_t>();
}

TEST_CASE("reference/u64 unary ops and clip keep values past INT64_MAX") {
  constexpr uint64_t kBig = (uint64_t{1} << 63) + 5;
  const HostTensor x = HostTensor::from<uint64_t>({3}, {kBig, 3, UINT64_MAX});
  CHECK(run1(OpKind::kAbs, {x}).as<uint64_t>() == std::vector<uint64_t>{kBig, 3, UINT64_MAX});
  CHECK(run1(OpKind::kRelu, {x}).as<uint64_t>() == std::vector<uint64_t>{kBig, 3, UINT64_MAX});
  CHECK(run1(OpKind::kNeg, {x}).as<uint64_t>() == std::vector<uint64_t>{0 - kBig, 0 - uint64_t{3}, 1});
  // max = 1e19 lies past INT64_MAX and below UINT64_MAX: it clips the largest value only.
  const uint64_t hi = 10000000000000000000u;
  CHECK(run1(OpKind::kClip, {x}, {{"min", 4.0}, {"max", 1e19}}).as<uint64_t>() ==
        std::vector<uint64_t>{kBig, 4, hi});
  CHECK(run1(OpKind::kPow, {HostTensor::from<uint64_t>({2}, {3, 2}), HostTensor::from<uint64_t>({2}, {41, 64})})
            .as<uint64_t>() == std::vector<uint64_t>{18026252303461234787u, 0});  // 3^41 mod 2^64
}

TEST_CASE("reference/casts from and to u64 u32 u16 i16 use the unsigned value") {
  constexpr uint64_t kBig = (uint64_t{1} << 63) + (uint64_t{1} << 40) + 1;
  const HostTensor x = HostTensor::from<uint64_t>({2}, {kBig, UINT64_MAX});
  auto cast = [](const HostTensor& t, DType to) { return run1(OpKind::kCast, {t}, {{"to", std::string(ir::dtype_name(to))}}); };
  // One rounding from the unsigned value: never a negative number.
  CHECK(cast(x, DType::kF64).as<double>() == std::vector<double>{static_cast<double>(kBig), 0x1p64});
  CHECK(cast(x, DType::kF32).as<float>() == std::vector<float>{static_cast<float>(kBig), 0x1p64f});
  CHECK(cast(x, DType::kBf16).to_doubles() == std::vector<double>{0x1p63, 0x1p64});
  CHECK(std::isinf(cast(x, DType::kF16).to_doubles()[0]));
  // Integers keep the low bits.
  CHECK(cast(x, DType::kU32).as<uint32_t>() == std::vector<uint32_t>{1, UINT32_MAX});
  CHECK(cast(x, DType::kI16).as<int16_t>() == std::vector<int16_t>{1, -1});
  CHECK(cast(x, DType::kI64).as<int64_t>() == std::vector<int64_t>{static_cast<int64_t>(kBig), -1});
  // Floats saturate into the unsigned range; negative values and NaN give 0.
  const HostTensor f = HostTensor::from<double>({5}, {1e30, -5, 1.8446744073709552e19, 4294967295.9, kNaN});
  CHECK(cast(f, DType::kU64).as<uint64_t>() == std::vector<uint64_t>{UINT64_MAX, 0, UINT64_MAX, 4294967295, 0});
  CHECK(cast(f, DType::kU32).as<uint32_t>() == std::vector<uint32_t>{UINT32_MAX, 0, UINT32_MAX, UINT32_MAX, 0});
  CHECK(cast(f, DType::kI16).as<int16_t>() == std::vector<int16_t>{INT16_MAX, -5, INT16_MAX, INT16_MAX, 0});
  CHECK(cast(f, DType::kU16).as<uint16_t>() == std::vector<uint16_t>{UINT16_MAX, 0, UINT16_MAX, UINT16_MAX, 0});
  // i16 sign-extends, u16 and u32 zero-extend.
  CHECK(cast(HostTensor::from<int16_t>({2}, {-2, 300}), DType::kI64).as<int64_t>() == std::vector<int64_t>{-2, 300});
  CHECK(cast(HostTensor::from<uint16_t>({1}, {65535}), DType::kI32).as<int32_t>() == std::vector<int32_t>{65535});
  CHECK(cast(HostTensor::from<uint32_t>({1}, {4000000000u}), DType::kF64).as<double>() == std::vector<double>{4e9});
}

TEST_CASE("reference/u64 reductions and argmax order past INT64_MAX") {
  constexpr uint64_t kBig = (uint64_t{1} << 63) + 9;
  const HostTensor x = HostTensor::from<uint64_t>({2, 3}, {1, kBig, 5, UINT64_MAX, 2, kBig});
  CHECK(run1(OpKind::kReduceMax, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}).as<uint64_t>() ==
        std::vector<uint64_t>{kBig, UINT64_MAX});
  CHECK(run1(OpKind::kReduceSum, {x}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}).as<uint64_t>() ==
        std::vector<uint64_t>{0, kBig + 2, kBig + 5});
  CHECK(run1(OpKind::kArgMin, {x}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}).as<int64_t>() ==
        std::vector<int64_t>{0, 1});
  CHECK(run1(OpKind::kArgMax, {x}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}).as<int64_t>() ==
        std::vector<int64_t>{1, 0});
}

// ---- bit shifts ----

template <typename T>
void check_bit_shifts() {
  constexpr T kMax = std::numeric_limits<T>::max();
  constexpr uint64_t kWidth = sizeof(T) * 8;
  const std::vector<T> x = {1, 1, 1, kMax, kMax, 0x5a, 3, kMax};
  const std::vector<T> s = {0, 1, static_cast<T>(kWidth - 1), 1, static_cast<T>(kWidth - 1), 4,
                            static_cast<T>(kWidth), static_cast<T>(kWidth + 3)};
  std::vector<T> left, right;
  for (size_t i = 0; i < x.size(); ++i) {
    // shifts by the width or more leave no bits (C++ leaves them undefined)
    left.push_back(s[i] >= kWidth ? T{0} : static_cast<T>(static_cast<uint64_t>(x[i]) << s[i]));
    right.push_back(s[i] >= kWidth ? T{0} : static_cast<T>(x[i] >> s[i]));
  }
  const ir::Shape shape{static_cast<int64_t>(x.size())};
  const HostTensor tx = HostTensor::from<T>(shape, x), ts = HostTensor::from<T>(shape, s);
  CHECK(run1(OpKind::kBitShiftLeft, {tx, ts}).as<T>() == left);
  CHECK(run1(OpKind::kBitShiftRight, {tx, ts}).as<T>() == right);
  CHECK(left[1] == 2);
  CHECK(right[3] == kMax / 2);
}

TEST_CASE("reference/bit shifts of every unsigned dtype by the width and past it") {
  check_bit_shifts<uint8_t>();
  check_bit_shifts<uint16_t>();
  check_bit_shifts<uint32_t>();
  check_bit_shifts<uint64_t>();
  // broadcasting: one shift for a row
  CHECK(run1(OpKind::kBitShiftLeft, {u8({2, 2}, {1, 2, 3, 4}), u8({1}, {2})}).as<uint8_t>() ==
        std::vector<uint8_t>{4, 8, 12, 16});
}
