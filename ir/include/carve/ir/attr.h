// Typed node attributes: int, float, string, int list, float list.
//
// Ownership/lifetime: value types; Attrs owns its keys and values.
// Thread-safety: no shared state.
// Errors: none here; ops check their attributes during shape inference (infer.h).
// Attrs is an ordered map so printing and comparison are deterministic. Floats are
// stored as double and compared with ==, so NaN attributes never compare equal.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace carve::ir {

enum class AttrType : uint8_t { kInt, kFloat, kString, kInts, kFloats };

// "int", "float", "string", "int list", "float list".
std::string_view attr_type_name(AttrType type);

class Attr {
 public:
  using Variant =
      std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

  Attr() : v_(int64_t{0}) {}
  // One constructor per C++ type so `{"axis", 1}` and `{"alpha", 0.5}` are not ambiguous.
  Attr(int v) : v_(int64_t{v}) {}                     // NOLINT
  Attr(int64_t v) : v_(v) {}                          // NOLINT
  Attr(bool v) : v_(int64_t{v}) {}                    // NOLINT: flags are ints (0/1)
  Attr(double v) : v_(v) {}                           // NOLINT
  Attr(float v) : v_(double{v}) {}                    // NOLINT
  Attr(std::string v) : v_(std::move(v)) {}           // NOLINT
  Attr(const char* v) : v_(std::string(v)) {}         // NOLINT
  Attr(std::string_view v) : v_(std::string(v)) {}    // NOLINT
  Attr(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT
  Attr(std::vector<double> v) : v_(std::move(v)) {}   // NOLINT

  AttrType type() const { return static_cast<AttrType>(v_.index()); }
  bool is_int() const { return type() == AttrType::kInt; }
  bool is_float() const { return type() == AttrType::kFloat; }
  bool is_string() const { return type() == AttrType::kString; }
  bool is_ints() const { return type() == AttrType::kInts; }
  bool is_floats() const { return type() == AttrType::kFloats; }

  // Preconditions: the matching is_*().
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const std::vector<int64_t>& as_ints() const { return std::get<std::vector<int64_t>>(v_); }
  const std::vector<double>& as_floats() const { return std::get<std::vector<double>>(v_); }

  const Variant& variant() const { return v_; }
  // Debug rendering; text.h defines the exact round-trip syntax.
  std::string to_string() const;

  friend bool operator==(const Attr&, const Attr&) = default;

 private:
  Variant v_;
};

using Attrs = std::map<std::string, Attr, std::less<>>;

// attrs[name] as a number (an int widens), or `fallback` when absent or not a number.
inline double float_attr_or(const Attrs& attrs, std::string_view name, double fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return fallback;
  if (it->second.is_float()) return it->second.as_float();
  if (it->second.is_int()) return static_cast<double>(it->second.as_int());
  return fallback;
}

}  // namespace carve::ir
