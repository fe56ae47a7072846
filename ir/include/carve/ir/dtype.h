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

// `boolean` because `bool` is a keyword; its text name is "bool" (1 byte, 0 or 1).
enum class DType : uint8_t { kF32, kF16, kBf16, kF64, kI8, kI32, kI64, kU8, kBool };

inline constexpr int kNumDTypes = 9;

// Every dtype, in enum order (handy for tests and generators).
std::span<const DType> all_dtypes();

// "f32", "f16", "bf16", "f64", "i8", "i32", "i64", "u8", "bool"; "?" for an invalid value.
std::string_view dtype_name(DType dtype);
// Bytes per element; 0 for an invalid value.
int64_t dtype_size(DType dtype);
// Inverse of dtype_name. kInvalidArgument naming the text when unknown.
Result<DType> parse_dtype(std::string_view name);

bool is_valid_dtype(DType dtype);
bool is_float(DType dtype);    // f32 f16 bf16 f64
bool is_integer(DType dtype);  // i8 i32 i64 u8 (not bool)

}  // namespace carve::ir
