#include "carve/ir/dtype.h"

#include <fmt/format.h>

#include <array>

namespace carve::ir {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int64_t size;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfos = {{
    {DType::kF32, "f32", 4},
    {DType::kF16, "f16", 2},
    {DType::kBf16, "bf16", 2},
    {DType::kF64, "f64", 8},
    {DType::kI8, "i8", 1},
    {DType::kI32, "i32", 4},
    {DType::kI64, "i64", 8},
    {DType::kU8, "u8", 1},
    {DType::kBool, "bool", 1},
    {DType::kI16, "i16", 2},
    {DType::kU16, "u16", 2},
    {DType::kU32, "u32", 4},
    {DType::kU64, "u64", 8},
}};

constexpr std::array<DType, kNumDTypes> kAll = {
    DType::kF32, DType::kF16, DType::kBf16, DType::kF64, DType::kI8,  DType::kI32, DType::kI64,
    DType::kU8,  DType::kBool, DType::kI16, DType::kU16, DType::kU32, DType::kU64};

}  // namespace

std::span<const DType> all_dtypes() { return kAll; }

bool is_valid_dtype(DType dtype) { return static_cast<int>(dtype) < kNumDTypes; }

std::string_view dtype_name(DType dtype) {
  if (!is_valid_dtype(dtype)) return "?";
  return kInfos[static_cast<int>(dtype)].name;
}

int64_t dtype_size(DType dtype) {
  if (!is_valid_dtype(dtype)) return 0;
  return kInfos[static_cast<int>(dtype)].size;
}

Result<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& info : kInfos) {
    if (info.name == name) return info.dtype;
  }
  return Status(ErrorCode::kInvalidArgument,
                fmt::format("unknown dtype '{}' (expected one of f32, f16, bf16, f64, i8, i16, "
                            "i32, i64, u8, u16, u32, u64, bool)",
                            name));
}

bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBf16 || dtype == DType::kF64;
}

bool is_integer(DType dtype) {
  return dtype == DType::kI8 || dtype == DType::kI16 || dtype == DType::kI32 || dtype == DType::kI64 ||
         is_unsigned_int(dtype);
}

bool is_unsigned_int(DType dtype) {
  return dtype == DType::kU8 || dtype == DType::kU16 || dtype == DType::kU32 || dtype == DType::kU64;
}

}  // namespace carve::ir
