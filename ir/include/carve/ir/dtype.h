// Element types of carve tensors.
//
// Ownership/lifetime: plain enum and free functions; names are static strings.
// Thread-safety: all functions are pure and safe to call concurrently.
// Errors: parse_dtype returns kInvalidArgument for an unknown name.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "carve/status.h"

namespace carve::ir {

// Its text name is "bool" (1 byte, 0 or 1). The 16-bit and wider unsigned integers came
// later and follow bool, so the numbering (mirrored by the C API's carve_dtype) is stable.
enum class DType : uint8_t { kF32, kF16, kBf16, kF64, kI8, kI32, kI64, kU8, kBool, kI16, kU16, kU32, kU64 };

inline constexpr int kNumDTypes = 13;

// Every dtype, in enum order (handy for tests and generators).
std::span<const DType> all_dtypes();

// "f32", "f16", "bf16", "f64", "i8", "i32", "i64", "u8", "bool", "i16", "u16", "u32",
// "u64"; "?" for an invalid value.
std::string_view dtype_name(DType dtype);
// Bytes per element; 0 for an invalid value.
int64_t dtype_size(DType dtype);
// Inverse of dtype_name. kInvalidArgument naming the text when unknown.
Result<DType> parse_dtype(std::string_view name);

bool is_valid_dtype(DType dtype);
bool is_float(DType dtype);    // f32 f16 bf16 f64
bool is_integer(DType dtype);       // i8 i16 i32 i64 u8 u16 u32 u64 (not bool)
bool is_unsigned_int(DType dtype);  // u8 u16 u32 u64 (not bool)

}  // namespace carve::ir
