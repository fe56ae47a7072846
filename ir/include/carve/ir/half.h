// 16-bit float formats (IEEE binary16 "f16" and bfloat16 "bf16") <-> float/double.
//
// Plain header-only C++20 (no LLVM, no intrinsics), usable from any carve module.
// Contract:
//  - Widening (f16/bf16 -> float) is exact; NaN stays NaN, infinities and signed zeros
//    are kept, f16 subnormals are decoded exactly.
//  - Narrowing (float/double -> f16/bf16) rounds to nearest, ties to even, directly from
//    the source value (no intermediate float rounding, so double -> f16 is not subject to
//    double rounding). Values too large round to +-inf; values below half the smallest
//    subnormal round to +-0. Any NaN becomes the canonical quiet NaN with the source's
//    sign (payloads are not kept).
//  - int64 -> f16/bf16 also rounds directly (RNE) from the integer.
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

namespace carve::ir {
namespace half_detail {

// Encodes |x| (the bits of a finite, non-negative double, i.e. sign bit clear) in a
// binary format with `man_bits` fraction bits, `exp_bits` exponent bits and exponent
// bias `bias`, rounding to nearest even; saturates to the infinity encoding.
constexpr uint32_t encode_abs_double(uint64_t abs_bits, int man_bits, int exp_bits, int bias) {
  const uint64_t inf = ((uint64_t{1} << exp_bits) - 1) << man_bits;
  const int biased = static_cast<int>(abs_bits >> 52);
  if (biased == 0) return 0;  // zero or a double subnormal: far below any 16-bit subnormal
  const int exponent = biased - 1023;
  const uint64_t mantissa = (abs_bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  // The value is mantissa * 2^(exponent - 52). Express it as q * 2^(unit) where unit is
  // the target's ulp at this exponent (normal) or its subnormal step.
  const int target_exp = exponent + bias;  // biased target exponent if normal
  int shift = 0;                           // bits of `mantissa` below the target ulp
  uint64_t base = 0;                       // encoding bits above the rounded mantissa
  if (target_exp >= 1) {
    shift = 52 - man_bits;
    base = static_cast<uint64_t>(target_exp - 1) << man_bits;  // implicit bit adds 1 exp
  } else {
    // Subnormal step 2^(1 - bias - man_bits): shift = (1 - bias - man_bits) - (exponent - 52).
    shift = 53 - bias - man_bits - exponent;
    if (shift > 53) return 0;  // below half the smallest subnormal (or exactly half: even 0)
  }
  uint64_t q = mantissa >> shift;
  const uint64_t rem = mantissa & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1) != 0)) ++q;
  // For normals q includes the implicit bit (2^man_bits), which adds one to the exponent
  // field on top of `base`; a rounding carry moves into the exponent naturally.
  uint64_t encoded = base + q;
  if (encoded > inf) encoded = inf;
  return static_cast<uint32_t>(encoded);
}

constexpr uint16_t encode_double(double x, int man_bits, int exp_bits, int bias) {
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  const uint32_t sign = static_cast<uint32_t>(bits >> 63) << (man_bits + exp_bits);
  const uint64_t abs_bits = bits & ~(uint64_t{1} << 63);
  const uint32_t inf = ((uint32_t{1} << exp_bits) - 1) << man_bits;
  if (abs_bits > (uint64_t{0x7ff} << 52)) {  // NaN: canonical quiet NaN
    return static_cast<uint16_t>(sign | inf | (uint32_t{1} << (man_bits - 1)));
  }
  return static_cast<uint16_t>(sign | encode_abs_double(abs_bits, man_bits, exp_bits, bias));
}

// An integer given as a sign and a 64-bit magnitude, rounded once to nearest even.
constexpr uint16_t encode_integer(bool negative, uint64_t mag, int man_bits, int exp_bits, int bias) {
  const uint32_t sign = negative ? uint32_t{1} << (man_bits + exp_bits) : 0;
  if (mag == 0) return static_cast<uint16_t>(sign);
  const uint32_t inf = ((uint32_t{1} << exp_bits) - 1) << man_bits;
  int msb = 63 - std::countl_zero(mag);  // value in [2^msb, 2^(msb+1))
  uint64_t q = mag;
  if (msb > man_bits) {
    const int shift = msb - man_bits;
    q = mag >> shift;
    const uint64_t rem = mag & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (q & 1) != 0)) ++q;
    if (q >> (man_bits + 1)) {  // carry to the next power of two
      q >>= 1;
      ++msb;
    }
  } else {
    q = mag << (man_bits - msb);
  }
  const uint64_t biased = static_cast<uint64_t>(msb + bias);
  if (biased >= (uint64_t{1} << exp_bits) - 1) return static_cast<uint16_t>(sign | inf);
  // q has the implicit bit at 2^man_bits: (biased - 1) << man_bits plus q adds it back.
  return static_cast<uint16_t>(sign | (((biased - 1) << man_bits) + q));
}

constexpr uint16_t encode_int64(int64_t v, int man_bits, int exp_bits, int bias) {
  const uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  return encode_integer(v < 0, mag, man_bits, exp_bits, bias);
}

}  // namespace half_detail

// ---- f16 (IEEE binary16: 1 sign, 5 exponent, 10 fraction bits) ----

constexpr float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t fraction = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: fraction * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(fraction) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (fraction << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (fraction << 13));
}

constexpr uint16_t double_to_f16(double x) { return half_detail::encode_double(x, 10, 5, 15); }
// float -> double is exact, so this rounds directly from the float value.
constexpr uint16_t float_to_f16(float x) { return double_to_f16(static_cast<double>(x)); }
constexpr uint16_t int64_to_f16(int64_t v) { return half_detail::encode_int64(v, 10, 5, 15); }
constexpr uint16_t uint64_to_f16(uint64_t v) { return half_detail::encode_integer(false, v, 10, 5, 15); }

// ---- bf16 (bfloat16: the top 16 bits of a float; 1 sign, 8 exponent, 7 fraction) ----

constexpr float bf16_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

constexpr uint16_t double_to_bf16(double x) { return half_detail::encode_double(x, 7, 8, 127); }
constexpr uint16_t float_to_bf16(float x) { return double_to_bf16(static_cast<double>(x)); }
constexpr uint16_t int64_to_bf16(int64_t v) { return half_detail::encode_int64(v, 7, 8, 127); }
constexpr uint16_t uint64_to_bf16(uint64_t v) { return half_detail::encode_integer(false, v, 7, 8, 127); }

}  // namespace carve::ir
