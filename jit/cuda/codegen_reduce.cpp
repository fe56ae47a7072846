// Reductions (reduce_sum/mean/max, arg_max/min), row ops (softmax, layer_norm, global_avg_pool) and
// pools (max_pool, avg_pool). Long reductions use one warp per output (lane-strided loads,
// shuffle tree); short ones one thread per output. Float sums accumulate in double when
// CodegenOptions::double_accumulation; integer sums wrap exactly.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "carve/ir/op.h"
#include "codegen_internal.h"

namespace carve::jit::cuda::detail {

using ir::DType;
using ir::OpKind;

namespace {

constexpr int64_t kWarpThreshold = 32;  // reduce with a whole warp when a row is longer

std::string fp(std::string_view acc) { return acc == "double" ? "d" : "f"; }

// acc = acc + x in the accumulator type.
std::string add_to(std::string_view acc, const std::string& a, const std::string& x) {
  if (is_int_acc(acc)) return fmt::format("carve_wadd({}, {})", a, x);
  return fmt::format("__{}add_rn({}, {})", fp(acc), a, x);
}
std::string times(std::string_view acc, const std::string& a, const std::string& x) {
  if (is_int_acc(acc)) return fmt::format("carve_wmul({}, {})", a, x);
  return fmt::format("__{}mul_rn({}, {})", fp(acc), a, x);
}
std::string max_of(std::string_view acc, const std::string& a, const std::string& x) {
  if (is_int_acc(acc)) return fmt::format("carve_imax({}, {})", a, x);
  return fmt::format("carve_{}max({}, {})", fp(acc), a, x);
}
// An accumulator value converted to the dtype's compute value.
std::string finish_value(DType dt, std::string_view acc, const std::string& a) {
  if (acc == "double" && dt != DType::kF64) return from_double(dt, a);
  return round_to(dt, a);
}

// Header of a loop over `rows` work rows with `lanes` threads each (1 or 32); inside, `row`
// is the row and `lane` the thread's lane.
std::string row_loop(int lanes, int64_t rows) {
  if (lanes == 1) {
    return fmt::format(
        "  const int lane = 0;\n  for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < {0}LL; "
        "row += (long long)gridDim.x * blockDim.x)",
        rows);
  }
  return fmt::format(
      "  const int lane = threadIdx.x & 31;\n  for (long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; "
      "row < {0}LL; row += ((long long)gridDim.x * blockDim.x) >> 5)",
      rows);
}

void launch_rows(KernelWriter& w, int lanes, int64_t rows) { w.launch_1d(std::max<int64_t>(rows, 1) * lanes); }

}  // namespace

Status emit_reduce(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& tx = g.value(n.inputs[0]).type;
  const ir::TensorType& ty = g.value(n.outputs[0]).type;
  const DType dt = tx.dtype;
  if (dt == DType::kBool) return unsupported(g, n, "reduction of bool");
  const std::vector<int64_t> in = tx.shape.dims();
  const int rank = static_cast<int>(in.size());
  const std::vector<int64_t> axes = attr_ints(n, "axes", {});
  std::vector<bool> reduced(in.size(), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(normalize_axis(a, rank))] = true;
  const std::vector<int64_t> rs = row_major(in);
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  for (size_t d = 0; d < in.size(); ++d) {
    (reduced[d] ? red_dims : kept_dims).push_back(in[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(rs[d]);
  }
  const int64_t outs = numel(kept_dims), len = numel(red_dims);
  const bool is_max = n.op == OpKind::kReduceMax;
  const bool is_prod = n.op == OpKind::kReduceProd;
  const std::string_view acc = is_max ? ctype(dt) : acc_type(dt, w.options().double_accumulation);
  const int lanes = len > kWarpThreshold ? 32 : 1;
  const int in_op = w.operand(n.inputs[0], OperandRole::kInput);
  std::string code;
  code += decompose(kept_dims, "row", "k", "    ");
  code += fmt::format("    const long long base = {};\n", offset_of(kept_dims, kept_strides, "k"));
  code += fmt::format("    {} acc = {};\n", acc, is_max ? lowest_literal(dt) : fmt::format("({}){}", acc, is_prod ? 1 : 0));
  code += fmt::format("    for (long long r = lane; r < {}LL; r += {}) {{\n", len, lanes);
  code += decompose(red_dims, "r", "q", "      ");
  code += fmt::format("      const {} x = ({}){};\n", acc, acc,
                      load(dt, KernelWriter::param(in_op), "base + " + offset_of(red_dims, red_strides, "q")));
  code += fmt::format("      acc = {};\n    }}\n", is_max ? max_of(acc, "acc", "x") : is_prod ? times(acc, "acc", "x") : add_to(acc, "acc", "x"));
  if (lanes == 32) code += fmt::format("    acc = carve_warp_{}(acc);\n", is_max ? "max" : is_prod ? "prod" : "sum");
  std::string value = "acc";
  if (n.op == OpKind::kReduceMean) value = fmt::format("__{}div_rn(acc, ({}){}LL)", fp(acc), acc, len);
  code += fmt::format("    if (lane == 0) {{\n      const {} v{} = {};\n", ctype(ty.dtype), n.outputs[0],
                      finish_value(ty.dtype, acc, value));
  std::map<ir::ValueId, std::string> values{{n.outputs[0], fmt::format("v{}", n.outputs[0])}};
  CARVE_RETURN_IF_ERROR(emit_chain(w, 1, ty.shape.dims(), "row", "o", values, code, "      "));
  code += "    }\n";
  w.family = "reduce";
  launch_rows(w, lanes, outs);
  w.body = fmt::format("{} {{\n{}  }}\n", row_loop(lanes, outs), code);
  return Status();
}

// arg_max/min: one thread per output, a sequential scan along the axis (the CPU JIT's and
// the reference's rules: a NaN beats every number; the first of equals wins, or the last
// with select_last_index).
Status emit_arg(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& tx = g.value(n.inputs[0]).type;
  const DType dt = tx.dtype;
  if (dt == DType::kBool) return unsupported(g, n, "arg_max/arg_min of bool");
  const std::vector<int64_t> dims = tx.shape.dims();
  const int rank = static_cast<int>(dims.size());
  const auto axis = static_cast<size_t>(normalize_axis(attr_int(n, "axis", 0), rank));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= dims[d];
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t len = dims[axis];
  const bool last = attr_int(n, "select_last_index", 0) != 0;
  const char* cmp = n.op == OpKind::kArgMax ? (last ? ">=" : ">") : (last ? "<=" : "<");
  const int in_op = w.operand(n.inputs[0], OperandRole::kInput);
  const int out_op = w.operand(n.outputs[0], OperandRole::kOutput);
  if (in_op < 0 || out_op < 0) return unsupported(g, n, "input/output are not operands");
  const std::string_view ct = ctype(dt);
  const std::string X = KernelWriter::param(in_op);
  std::string take = fmt::format("x {} best", cmp);
  if (ir::is_float(dt)) take = last ? fmt::format("x != x || {}", take) : fmt::format("(x != x && best == best) || {}", take);
  std::string code;
  code += fmt::format("    const long long base = (row / {0}LL) * {1}LL + row % {0}LL;\n", inner, len * inner);
  code += fmt::format("    {} best = {};\n    long long at = 0;\n", ct, load(dt, X, "base"));
  code += fmt::format("    for (long long k = 1; k < {}LL; ++k) {{\n", len);
  code += fmt::format("      const {} x = {};\n", ct, load(dt, X, fmt::format("base + k * {}LL", inner)));
  code += fmt::format("      if ({}) {{ best = x; at = k; }}\n    }}\n", take);
  code += fmt::format("    {}\n", store(DType::kI64, KernelWriter::param(out_op), "row", "at"));
  w.family = "arg";
  launch_rows(w, 1, outer * inner);
  w.body = fmt::format("{} {{\n{}  }}\n", row_loop(1, outer * inner), code);
  return Status();
}

Status emit_rows(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& t = g.value(n.inputs[0]).type;
  const DType dt = t.dtype;
  const std::vector<int64_t> dims = t.shape.dims();
  const int rank = static_cast<int>(dims.size());
  const std::string_view acc = acc_type(dt, w.options().double_accumulation);
  const std::string p = fp(acc);
  const int x_op = w.operand(n.inputs[0], OperandRole::kInput);
  const int y_op = w.operand(n.outputs[0], OperandRole::kOutput);
  if (x_op < 0 || y_op < 0) return unsupported(g, n, "input/output are not operands");
  const std::string X = KernelWriter::param(x_op), Y = KernelWriter::param(y_op);
  auto ld = [&](const std::string& ptr, const std::string& idx) { return fmt::format("({}){}", acc, load(dt, ptr, idx)); };
  auto out_value = [&](const std::string& a) { return finish_value(dt, acc, a); };
  std::string code;
  int64_t rows = 1, len = 1;
  if (n.op == OpKind::kSoftmax) {
    const int axis = normalize_axis(attr_int(n, "axis", -1), rank);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= dims[static_cast<size_t>(d)];
    for (int d = axis + 1; d < rank; ++d) inner *= dims[static_cast<size_t>(d)];
    len = rank == 0 ? 1 : dims[static_cast<size_t>(axis)];
    rows = outer * inner;
    const int lanes = len > kWarpThreshold ? 32 : 1;
    const std::string expf = acc == "double" ? "exp" : "expf";
    code += fmt::format("    const long long base = (row / {0}LL) * {1}LL * {0}LL + row % {0}LL;\n", inner, len);
    code += fmt::format("    {} m = ({})(-carve_inf());\n", acc, acc);
    code += fmt::format("    for (long long k = lane; k < {}LL; k += {}) m = carve_{}max(m, {});\n", len, lanes, p,
                        ld(X, fmt::format("base + k * {}LL", inner)));
    if (lanes == 32) code += "    m = carve_warp_max(m);\n";
    code += fmt::format("    {} s = 0;\n", acc);
    code += fmt::format("    for (long long k = lane; k < {}LL; k += {}) s = __{}add_rn(s, {}(__{}sub_rn({}, m)));\n", len,
                        lanes, p, expf, p, ld(X, fmt::format("base + k * {}LL", inner)));
    if (lanes == 32) code += "    s = carve_warp_sum(s);\n";
    code += fmt::format("    for (long long k = lane; k < {}LL; k += {}) {{\n", len, lanes);
    code += fmt::format("      const {} e = __{}div_rn({}(__{}sub_rn({}, m)), s);\n", acc, p, expf, p,
                        ld(X, fmt::format("base + k * {}LL", inner)));
    code += fmt::format("      {}\n    }}\n", store(dt, Y, fmt::format("base + k * {}LL", inner), out_value("e")));
    w.family = "softmax";
    launch_rows(w, lanes, rows);
    w.body = fmt::format("{} {{\n{}  }}\n", row_loop(lanes, rows), code);
    return Status();
  }
  if (n.op == OpKind::kLayerNorm) {
    const int axis = normalize_axis(attr_int(n, "axis", -1), rank);
    for (int d = 0; d < axis; ++d) rows *= dims[static_cast<size_t>(d)];
    for (int d = axis; d < rank; ++d) len *= dims[static_cast<size_t>(d)];
    const int lanes = len > kWarpThreshold ? 32 : 1;
    const int s_op = w.operand(n.inputs[1], OperandRole::kInput);
    const int b_op = n.inputs.size() > 2 ? w.operand(n.inputs[2], OperandRole::kInput) : -1;
    code += fmt::format("    const long long base = row * {}LL;\n", len);
    code += fmt::format("    {} sum = 0;\n", acc);
    code += fmt::format("    for (long long k = lane; k < {}LL; k += {}) sum = __{}add_rn(sum, {});\n", len, lanes, p,
                        ld(X, "base + k"));
    if (lanes == 32) code += "    sum = carve_warp_sum(sum);\n";
    code += fmt::format("    const {0} mean = __{1}div_rn(sum, ({0}){2}LL);\n", acc, p, len);
    code += fmt::format("    {} sq = 0;\n", acc);
    code += fmt::format(
        "    for (long long k = lane; k < {0}LL; k += {1}) {{ const {2} c = __{3}sub_rn({4}, mean); sq = __{3}add_rn(sq, __{3}mul_rn(c, c)); }}\n",
        len, lanes, acc, p, ld(X, "base + k"));
    if (lanes == 32) code += "    sq = carve_warp_sum(sq);\n";
    code += fmt::format("    const {0} inv = __{1}div_rn(({0})1, __{1}sqrt_rn(__{1}add_rn(__{1}div_rn(sq, ({0}){2}LL), ({0}){3})));\n",
                        acc, p, len, dlit(attr_float(n, "epsilon", 1e-5)));
    code += fmt::format("    for (long long k = lane; k < {}LL; k += {}) {{\n", len, lanes);
    std::string y = fmt::format("__{0}mul_rn(__{0}mul_rn(__{0}sub_rn({1}, mean), inv), {2})", p, ld(X, "base + k"),
                                ld(KernelWriter::param(s_op), "k"));
    if (b_op >= 0) y = fmt::format("__{}add_rn({}, {})", p, y, ld(KernelWriter::param(b_op), "k"));
    code += fmt::format("      const {} y = {};\n", acc, y);
    code += fmt::format("      {}\n    }}\n", store(dt, Y, "base + k", out_value("y")));
    w.family = "layer_norm";
    launch_rows(w, lanes, rows);
    w.body = fmt::format("{} {{\n{}  }}\n", row_loop(lanes, rows), code);
    return Status();
  }
  if (n.op == OpKind::kGlobalAvgPool) {
    rows = rank >= 2 ? dims[0] * dims[1] : 1;
    for (int d = 2; d < rank; ++d) len *= dims[static_cast<size_t>(d)];
    const int lanes = len > kWarpThreshold ? 32 : 1;
    code += fmt::format("    {} sum = 0;\n", acc);
    code += fmt::format("    for (long long k = lane; k < {}LL; k += {}) sum = __{}add_rn(sum, {});\n", len, lanes, p,
                        ld(X, fmt::format("row * {}LL + k", len)));
    if (lanes == 32) code += "    sum = carve_warp_sum(sum);\n";
    code += fmt::format("    if (lane == 0) {{ const {} y = __{}div_rn(sum, ({}){}LL); {} }}\n", acc, p, acc, len,
                        store(dt, Y, "row", out_value("y")));
    w.family = "global_avg_pool";
    launch_rows(w, lanes, rows);
    w.body = fmt::format("{} {{\n{}  }}\n", row_loop(lanes, rows), code);
    return Status();
  }
  return unsupported(g, n, "not a row op");
}

Status emit_pool(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& tx = g.value(n.inputs[0]).type;
  const ir::TensorType& ty = g.value(n.outputs[0]).type;
  const DType dt = tx.dtype;
  if (tx.shape.rank() != 4 || ty.shape.rank() != 4) return unsupported(g, n, "pools take NCHW (rank 4)");
  const int64_t h = tx.shape[2], wd = tx.shape[3], oh = ty.shape[2], ow = ty.shape[3];
  const std::vector<int64_t> kernel = attr_ints(n, "kernel", {1, 1});
  const std::vector<int64_t> strides = attr_ints(n, "strides", {1, 1});
  const std::vector<int64_t> pads = attr_ints(n, "pads", {0, 0, 0, 0});
  const bool is_max = n.op == OpKind::kMaxPool;
  const bool include_pad = attr_int(n, "count_include_pad", 0) != 0;
  const std::string_view acc = is_max ? ctype(dt) : acc_type(dt, w.options().double_accumulation);
  const int x_op = w.operand(n.inputs[0], OperandRole::kInput);
  const int64_t total = numel(ty.shape.dims());
  std::string code;
  code += fmt::format("    const long long px = i % {0}LL, py = (i / {0}LL) % {1}LL, plane = i / ({0}LL * {1}LL);\n", ow, oh);
  code += fmt::format("    const long long y0 = py * {}LL - {}LL, y1 = y0 + {}LL;\n", strides[0], pads[0], kernel[0]);
  code += fmt::format("    const long long x0 = px * {}LL - {}LL, x1 = x0 + {}LL;\n", strides[1], pads[1], kernel[1]);
  code += fmt::format("    {} acc = {};\n    long long valid = 0;\n", acc, is_max ? lowest_literal(dt) : fmt::format("({})0", acc));
  code += fmt::format("    const long long ya = y0 < 0 ? 0 : y0, yb = y1 < {0}LL ? y1 : {0}LL;\n", h);
  code += fmt::format("    const long long xa = x0 < 0 ? 0 : x0, xb = x1 < {0}LL ? x1 : {0}LL;\n", wd);
  code += "    for (long long iy = ya; iy < yb; ++iy) {\n      for (long long ix = xa; ix < xb; ++ix) {\n";
  code += fmt::format("        const {} v = ({}){};\n", acc, acc,
                      load(dt, KernelWriter::param(x_op), fmt::format("(plane * {}LL + iy) * {}LL + ix", h, wd)));
  code += fmt::format("        acc = {};\n        ++valid;\n      }}\n    }}\n", is_max ? max_of(acc, "acc", "v") : add_to(acc, "acc", "v"));
  std::string value = "acc";
  if (!is_max) {
    if (include_pad) {
      code += fmt::format("    const long long ye = y1 < {0}LL ? y1 : {0}LL, xe = x1 < {1}LL ? x1 : {1}LL;\n", h + pads[2], wd + pads[3]);
      code += "    const long long count = (ye - y0) * (xe - x0);\n";
    } else {
      code += "    const long long count = valid;\n";
    }
    value = fmt::format("__{}div_rn(acc, ({})count)", fp(acc), acc);
  } else {
    code += "    (void)valid;\n";
  }
  code += fmt::format("    const {} v{} = {};\n", ctype(ty.dtype), n.outputs[0], finish_value(ty.dtype, acc, value));
  std::map<ir::ValueId, std::string> values{{n.outputs[0], fmt::format("v{}", n.outputs[0])}};
  CARVE_RETURN_IF_ERROR(emit_chain(w, 1, ty.shape.dims(), "i", "o", values, code, "    "));
  w.family = "pool";
  w.launch_1d(total);
  w.body = fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("i", total), code);
  return Status();
}

}  // namespace carve::jit::cuda::detail
