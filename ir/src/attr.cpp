#include "carve/ir/attr.h"

#include <fmt/format.h>

namespace carve::ir {

std::string_view attr_type_name(AttrType type) {
  switch (type) {
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kString:
      return "string";
    case AttrType::kInts:
      return "int list";
    case AttrType::kFloats:
      return "float list";
  }
  return "?";
}

std::string Attr::to_string() const {
  switch (type()) {
    case AttrType::kInt:
      return fmt::format("{}", as_int());
    case AttrType::kFloat:
      return fmt::format("{}", as_float());
    case AttrType::kString:
      return fmt::format("\"{}\"", as_string());
    case AttrType::kInts:
      return fmt::format("[{}]", fmt::join(as_ints(), ","));
    case AttrType::kFloats:
      return fmt::format("[{}]", fmt::join(as_floats(), ","));
  }
  return "?";
}

}  // namespace carve::ir
