// Helpers shared by the infer_*.cpp files; not part of the public API.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "carve/ir/infer.h"

namespace carve::ir::detail {

using Types = std::vector<TensorType>;
using Inputs = std::span<const TensorType>;

Status attr_error(std::string message);
Status shape_error(std::string message);
Status type_error(std::string message);

// Typed, checked access to a node's attributes. Each getter fails with kVerifyError
// naming the attribute when it is present with the wrong type (or missing, for the
// required forms).
class AttrReader {
 public:
  explicit AttrReader(const Attrs& attrs) : attrs_(attrs) {}

  bool has(std::string_view name) const { return attrs_.find(name) != attrs_.end(); }
  Result<int64_t> get_int(std::string_view name) const;
  Result<int64_t> get_int(std::string_view name, int64_t fallback) const;
  // An int that must be 0 or 1.
  Result<bool> get_flag(std::string_view name, bool fallback) const;
  Result<double> get_float(std::string_view name, double fallback) const;
  Result<std::string> get_string(std::string_view name) const;
  Result<std::vector<int64_t>> get_ints(std::string_view name) const;
  Result<std::vector<int64_t>> get_ints(std::string_view name, std::vector<int64_t> fallback) const;

 private:
  Result<const Attr*> find(std::string_view name, AttrType type) const;
  const Attrs& attrs_;
};

// Maps axis in [-rank, rank) to [0, rank); kVerifyError naming `attr` otherwise.
Result<int> normalize_axis(int64_t axis, int rank, std::string_view attr);
// Normalises each axis and rejects duplicates.
Result<std::vector<int>> normalize_axes(std::span<const int64_t> axes, int rank,
                                        std::string_view attr);

Status expect_rank(const TensorType& t, int rank, std::string_view what);
Status expect_min_rank(const TensorType& t, int rank, std::string_view what);
Status expect_float(const TensorType& t, std::string_view what);
Status expect_numeric(const TensorType& t, std::string_view what);  // anything but bool
Status expect_same_dtype(const TensorType& a, const TensorType& b, std::string_view what);

Result<Types> infer_elementwise(OpKind op, Inputs in, const AttrReader& attrs);
Result<Types> infer_nn(OpKind op, Inputs in, const AttrReader& attrs);
Result<Types> infer_layout(OpKind op, Inputs in, const AttrReader& attrs);
Result<Types> infer_state(OpKind op, Inputs in, const AttrReader& attrs,
                          std::span<const Handle> handles);

}  // namespace carve::ir::detail
