// Which C++ type reads which carve dtype, for Buffer's typed host access.
//
// Contract
//  - dtype_of<T> is the one ir::DType a host element type T matches: float f32,
//    double f64, int8_t i8, int16_t i16, int32_t i32, int64_t i64, uint8_t u8, uint16_t
//    u16, uint32_t u32, uint64_t u64, bool bool, and the
//    two 16-bit float bit patterns below for f16 / bf16. Buffer::span<T>() and friends
//    fail with kTypeMismatch when T's dtype is not the buffer's.
//  - F16Bits / BF16Bits carry raw bits only (no arithmetic): convert elsewhere.
//  - Pure compile-time mapping: no state, thread-safe.
#pragma once

#include <cstdint>

#include "carve/ir/dtype.h"

namespace carve::runtime {

struct F16Bits {
  uint16_t bits = 0;
  friend bool operator==(const F16Bits&, const F16Bits&) = default;
};
struct BF16Bits {
  uint16_t bits = 0;
  friend bool operator==(const BF16Bits&, const BF16Bits&) = default;
};
static_assert(sizeof(F16Bits) == 2 && sizeof(BF16Bits) == 2);

template <typename T>
struct DTypeOf;  // no mapping: not a host element type
template <> struct DTypeOf<float> { static constexpr ir::DType value = ir::DType::kF32; };
template <> struct DTypeOf<double> { static constexpr ir::DType value = ir::DType::kF64; };
template <> struct DTypeOf<int8_t> { static constexpr ir::DType value = ir::DType::kI8; };
template <> struct DTypeOf<int32_t> { static constexpr ir::DType value = ir::DType::kI32; };
template <> struct DTypeOf<int64_t> { static constexpr ir::DType value = ir::DType::kI64; };
template <> struct DTypeOf<uint8_t> { static constexpr ir::DType value = ir::DType::kU8; };
template <> struct DTypeOf<int16_t> { static constexpr ir::DType value = ir::DType::kI16; };
template <> struct DTypeOf<uint16_t> { static constexpr ir::DType value = ir::DType::kU16; };
template <> struct DTypeOf<uint32_t> { static constexpr ir::DType value = ir::DType::kU32; };
template <> struct DTypeOf<uint64_t> { static constexpr ir::DType value = ir::DType::kU64; };
template <> struct DTypeOf<bool> { static constexpr ir::DType value = ir::DType::kBool; };
template <> struct DTypeOf<F16Bits> { static constexpr ir::DType value = ir::DType::kF16; };
template <> struct DTypeOf<BF16Bits> { static constexpr ir::DType value = ir::DType::kBf16; };

template <typename T>
concept HostElement = requires { DTypeOf<T>::value; };

template <HostElement T>
inline constexpr ir::DType dtype_of = DTypeOf<T>::value;

}  // namespace carve::runtime
