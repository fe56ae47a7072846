// Indexing ops as CUDA C: gather_nd, scatter_nd, top_k (the CPU JIT's rules, emit_index.cpp).
//  - gather_nd: one thread per output element; an index outside [-n, n) reads zeros.
//  - scatter_nd: one thread per position in the updated slices (a column): it copies its
//    column of data, then applies every update row to it in order, so duplicate indices
//    reduce in the same order as on the CPU and no two threads touch one element. An
//    update whose index is out of range is skipped.
//  - top_k: one thread per input element: its rank among its row (better values, NaN
//    after every number, ties by lower index) picks its output slot, if below k.
#include <fmt/format.h>

#include "codegen_internal.h"

namespace carve::jit::cuda::detail {
namespace {

using ir::DType;
using ir::OpKind;

int64_t product(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t j = from; j < std::min(to, dims.size()); ++j) p *= dims[j];
  return p;
}

// Statements defining `off` (element offset in data of index row `row`, out-of-range
// coordinates counted as 0) and `ok` (every coordinate in range).
std::string index_row(const ir::TensorType& data, const ir::TensorType& indices, const std::string& idx_param,
                      std::string_view row, int first, std::string_view indent) {
  const std::vector<int64_t>& dims = data.shape.dims();
  const std::vector<int64_t> strides = row_major(dims);
  const int64_t k = indices.shape[indices.shape.rank() - 1];
  std::string code = fmt::format("{}long long off = 0; bool ok = true;\n", indent);
  for (int64_t j = 0; j < k; ++j) {
    const auto d = static_cast<size_t>(first + j);
    code += fmt::format("{0}{{ long long v = (long long){1}[({2}) * {3}LL + {4}LL]; if (v < 0) v += {5}LL;\n"
                        "{0}  if (v >= 0 && v < {5}LL) off += v * {6}LL; else ok = false; }}\n",
                        indent, idx_param, row, k, j, dims[d], strides[d]);
  }
  return code;
}

std::string combine(DType dt, const std::string& reduction, std::string_view a, std::string_view b) {
  const bool fp = ir::is_float(dt);
  if (reduction == "add") {
    return fp ? fmt::format("{} + {}", a, b)
              : fmt::format("(long long)((unsigned long long){} + (unsigned long long){})", a, b);
  }
  if (reduction == "mul") {
    return fp ? fmt::format("{} * {}", a, b)
              : fmt::format("(long long)((unsigned long long){} * (unsigned long long){})", a, b);
  }
  const char* cmp = reduction == "max" ? ">" : "<";
  std::string pick = fmt::format("({1} {0} {2} ? {1} : {2})", cmp, b, a);
  if (!fp) return pick;
  return fmt::format("(({0} != {0} || {1} != {1}) ? {0} + {1} : {2})", a, b, pick);
}

}  // namespace

Status emit_index(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  w.family = "index";
  const ir::TensorType& x = g.value(n.inputs[0]).type;
  const std::vector<int64_t>& xd = x.shape.dims();
  std::vector<int> ops;
  for (ir::ValueId v : n.inputs) ops.push_back(w.operand(v, OperandRole::kInput));
  for (ir::ValueId v : n.outputs) ops.push_back(w.operand(v, OperandRole::kOutput));
  for (int op : ops) {
    if (op < 0) return unsupported(g, n, "inputs/outputs are not operands");
  }
  auto P = [&](size_t i) { return KernelWriter::param(ops[i]); };
  switch (n.op) {
    case OpKind::kGatherNd: {
      const ir::TensorType& ti = g.value(n.inputs[1]).type;
      const std::vector<int64_t>& id = ti.shape.dims();
      const auto b = static_cast<size_t>(attr_int(n, "batch_dims", 0));
      const auto k = static_cast<size_t>(id.back());
      const int64_t slice = product(xd, b + k, xd.size());
      const int64_t rows_per_batch = product(id, b, id.size() - 1);
      const int64_t total = product(id, 0, id.size() - 1) * slice;
      std::string code = fmt::format("    const long long row = i / {0}LL, s = i % {0}LL;\n", std::max<int64_t>(slice, 1));
      code += index_row(x, ti, P(1), "row", static_cast<int>(b), "    ");
      code += fmt::format("    {}[i] = ok ? {}[(row / {}LL) * {}LL + off + s] : {};\n", P(2), P(0),
                          std::max<int64_t>(rows_per_batch, 1), product(xd, b, xd.size()), storage_literal(x.dtype, 0.0));
      w.launch_1d(total);
      w.body = fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("i", total), code);
      return Status();
    }
    case OpKind::kScatterNd: {
      const ir::TensorType& ti = g.value(n.inputs[1]).type;
      const std::vector<int64_t>& id = ti.shape.dims();
      const auto k = static_cast<size_t>(id.back());
      const int64_t slice = product(xd, k, xd.size());
      const int64_t rows = product(id, 0, id.size() - 1);
      const int64_t data_rows = product(xd, 0, k);
      std::string reduction = attr_string(n, "reduction");
      if (reduction.empty()) reduction = "none";
      std::string code;
      code += fmt::format("    if ({0} != {1}) for (long long r = 0; r < {2}LL; ++r) {0}[r * {3}LL + s] = {1}[r * {3}LL + s];\n",
                          P(3), P(0), data_rows, slice);
      code += fmt::format("    for (long long row = 0; row < {}LL; ++row) {{\n", rows);
      code += index_row(x, ti, P(1), "row", 0, "      ");
      code += "      if (!ok) continue;\n";
      const std::string at = "off + s", from = fmt::format("row * {}LL + s", slice);
      if (reduction == "none") {
        code += fmt::format("      {}[{}] = {}[{}];\n", P(3), at, P(2), from);
      } else {
        code += fmt::format("      {}\n", store(x.dtype, P(3), at, combine(x.dtype, reduction, load(x.dtype, P(3), at),
                                                                                load(x.dtype, P(2), from))));
      }
      code += "    }\n";
      w.launch_1d(slice);
      w.body = fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("s", slice), code);
      return Status();
    }
    case OpKind::kTopK: {
      if (x.dtype == DType::kBool) return unsupported(g, n, "top_k of bool");
      const int rank = x.shape.rank();
      const auto axis = static_cast<size_t>(normalize_axis(attr_int(n, "axis", -1), rank));
      const int64_t k = attr_int(n, "k", 0);
      const bool largest = attr_int(n, "largest", 1) != 0;
      const int64_t len = xd[axis], inner = product(xd, axis + 1, xd.size());
      const int64_t total = k == 0 ? 0 : product(xd, 0, xd.size());
      const std::string_view ct = ctype(x.dtype);
      const char* better = largest ? ">" : "<";
      std::string code = fmt::format(
          "    const long long c = e % {0}LL, t = (e / {0}LL) % {1}LL, o = e / ({0}LL * {1}LL);\n"
          "    const long long base = o * {2}LL + c;\n", inner, len, len * inner);
      code += fmt::format("    const {} xi = {};\n    long long r = 0;\n", ct, load(x.dtype, P(0), "e"));
      code += fmt::format("    for (long long j = 0; j < {}LL; ++j) {{\n", len);
      code += fmt::format("      const {} xj = {};\n", ct, load(x.dtype, P(0), fmt::format("base + j * {}LL", inner)));
      if (ir::is_float(x.dtype)) {
        code += fmt::format("      const bool before = (xi != xi) ? (xj == xj || j < t) : (xj == xj && (xj {} xi || (xj == xi && j < t)));\n", better);
      } else {
        code += fmt::format("      const bool before = xj {} xi || (xj == xi && j < t);\n", better);
      }
      code += "      r += before ? 1 : 0;\n    }\n";
      code += fmt::format("    if (r < {}LL) {{\n      const long long at = (o * {}LL + r) * {}LL + c;\n", k, k, inner);
      code += fmt::format("      {}\n      {}\n    }}\n", store(x.dtype, P(1), "at", "xi"), store(DType::kI64, P(2), "at", "t"));
      w.launch_1d(total);
      w.body = fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("e", total), code);
      return Status();
    }
    default: break;
  }
  return unsupported(g, n, fmt::format("no CUDA kernel for op {}", ir::op_name(n.op)));
}

}  // namespace carve::jit::cuda::detail
