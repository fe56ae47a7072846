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
    {DType::f32, "f32", 4},
    {DType::f16, "f16", 2},
    {DType::bf16, "bf16", 2},
    {DType::f64, "f64", 8},
    {DType::i8, "i8", 1},
    {DType::i32, "i32", 4},
    {DType::i64, "i64", 8},
    {DType::u8, "u8", 1},
    {DType::boolean, "bool", 1},
}};

constexpr std::array<DType, kNumDTypes> kAll = {DType::f32, DType::f16, DType::bf16,
                                                DType::f64, DType::i8,  DType::i32,
                                                DType::i64, DType::u8,  DType::boolean};

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
                fmt::format("unknown dtype '{}' (expected one of f32, f16, bf16, f64, i8, i32, "
                            "i64, u8, bool)",
                            name));
}

bool is_float(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f64;
}

bool is_integer(DType dtype) {
  return dtype == DType::i8 || dtype == DType::i32 || dtype == DType::i64 || dtype == DType::u8;
}

}  // namespace carve::ir
