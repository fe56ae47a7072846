// Layout ops as element copies (raw storage values, so every dtype works): views as copies,
// transpose/slice (strided gathers), pad, concat, split, gather, gather_elements, and the
// state ops.
// Out of range: a gather or gather_elements index outside [-n, n) writes zeros (as the
// CPU JIT); a write_handle_at position outside [0, handle_dim - value_dim] writes nothing
// and sets the module's error word (cuda_codegen.h), which fails the run.
#include <fmt/format.h>

#include <algorithm>

#include "carve/ir/op.h"
#include "codegen_internal.h"

namespace carve::jit::cuda::detail {

using ir::DType;
using ir::OpKind;

namespace {

struct Split3 {
  int64_t outer = 1, len = 1, inner = 1;
};

Split3 around(const std::vector<int64_t>& dims, int axis) {
  Split3 s;
  for (int d = 0; d < axis; ++d) s.outer *= dims[static_cast<size_t>(d)];
  s.len = dims.empty() ? 1 : dims[static_cast<size_t>(axis)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) s.inner *= dims[d];
  return s;
}

std::string loop(KernelWriter& w, int64_t n, const std::string& code) {
  w.launch_1d(n);
  return fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("i", n), code);
}

// out[i] = in[base + sum_d idx_d * strides_d] over the output dims.
Status strided(KernelWriter& w, int in_op, int out_op, const std::vector<int64_t>& out_dims, int64_t base,
               std::vector<int64_t> strides) {
  for (size_t d = 0; d < out_dims.size(); ++d) {
    if (out_dims[d] == 1) strides[d] = 0;
  }
  std::string code = decompose(out_dims, "i", "d", "    ");
  code += fmt::format("    {}[i] = {}[{}LL + {}];\n", KernelWriter::param(out_op), KernelWriter::param(in_op), base,
                      offset_of(out_dims, strides, "d"));
  w.body = loop(w, numel(out_dims), code);
  return Status();
}

}  // namespace

Status emit_layout(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  w.family = "layout";
  auto in_op = [&](size_t i) { return w.operand(n.inputs[i], OperandRole::kInput); };
  auto out_op = [&](size_t i) { return w.operand(n.outputs[i], OperandRole::kOutput); };
  auto dims_in = [&](size_t i) { return g.value(n.inputs[i]).type.shape.dims(); };
  auto dims_out = [&](size_t i) { return g.value(n.outputs[i]).type.shape.dims(); };
  const std::string P = "p";

  switch (n.op) {
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity: {
      const int a = in_op(0), b = out_op(0);
      if (a < 0 || b < 0) return unsupported(g, n, "view copy needs its input and output as operands");
      const int64_t total = numel(dims_in(0));
      w.body = loop(w, total, fmt::format("    {}[i] = {}[i];\n", KernelWriter::param(b), KernelWriter::param(a)));
      return Status();
    }
    case OpKind::kReadHandle: {
      const int h = w.first(OperandRole::kInput), b = out_op(0);
      if (h < 0 || b < 0) return unsupported(g, n, "read_handle needs the handle and its output");
      const int64_t total = numel(w.operand_type(h).shape.dims());
      w.body = loop(w, total, fmt::format("    {}[i] = {}[i];\n", KernelWriter::param(b), KernelWriter::param(h)));
      return Status();
    }
    case OpKind::kWriteHandle: {
      const int a = in_op(0), h = w.first(OperandRole::kOutput);
      if (a < 0 || h < 0) return unsupported(g, n, "write_handle needs its input and the handle");
      const int64_t total = numel(dims_in(0));
      w.body = loop(w, total, fmt::format("    {}[i] = {}[i];\n", KernelWriter::param(h), KernelWriter::param(a)));
      return Status();
    }
    case OpKind::kWriteHandleAt: {
      const int a = in_op(0), pos = in_op(1), h = w.first(OperandRole::kOutput);
      if (a < 0 || pos < 0 || h < 0) return unsupported(g, n, "write_handle_at needs value, pos and the handle");
      const std::vector<int64_t> hd = w.operand_type(h).shape.dims();
      const int axis = normalize_axis(attr_int(n, "axis", 0), static_cast<int>(hd.size()));
      const Split3 v = around(dims_in(0), axis);
      const int64_t extent = hd.empty() ? 1 : hd[static_cast<size_t>(axis)];
      std::string code;
      // The position is uniform: every thread skips; the first thread reports it once.
      code += fmt::format("    const long long pos = {}[0];\n", KernelWriter::param(pos));
      code += fmt::format("    if (pos < 0 || pos > {}LL) {{\n", extent - v.len);
      code += fmt::format("      if (i == 0 && atomicCAS((unsigned long long*)&{0}[0], 0ULL, 1ULL) == 0ULL) {0}[1] = pos;\n",
                          kErrorWord);
      code += "      continue;\n    }\n";
      code += fmt::format("    const long long r = i % {0}LL, a = (i / {0}LL) % {1}LL, o = i / ({0}LL * {1}LL);\n",
                          v.inner, v.len);
      code += fmt::format("    {}[(o * {}LL + pos + a) * {}LL + r] = {}[i];\n", KernelWriter::param(h), extent, v.inner,
                          KernelWriter::param(a));
      w.body = loop(w, numel(dims_in(0)), code);
      w.error_word = true;
      return Status();
    }
    case OpKind::kTranspose: {
      const std::vector<int64_t> in = dims_in(0);
      const int rank = static_cast<int>(in.size());
      std::vector<int64_t> rev(in.size());
      for (int i = 0; i < rank; ++i) rev[static_cast<size_t>(i)] = rank - 1 - i;
      const std::vector<int64_t> perm = attr_ints(n, "perm", rev);
      const std::vector<int64_t> rs = row_major(in);
      std::vector<int64_t> strides(in.size());
      for (size_t i = 0; i < strides.size(); ++i) strides[i] = rs[static_cast<size_t>(normalize_axis(perm[i], rank))];
      return strided(w, in_op(0), out_op(0), dims_out(0), 0, strides);
    }
    case OpKind::kSlice: {
      const std::vector<int64_t> in = dims_in(0);
      const std::vector<int64_t> out = dims_out(0);
      const int rank = static_cast<int>(in.size());
      const std::vector<int64_t> starts = attr_ints(n, "starts", {});
      std::vector<int64_t> axes(starts.size());
      for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
      axes = attr_ints(n, "axes", axes);
      const std::vector<int64_t> steps = attr_ints(n, "steps", std::vector<int64_t>(starts.size(), 1));
      std::vector<int64_t> first(in.size(), 0), step(in.size(), 1);
      for (size_t i = 0; i < starts.size() && i < axes.size() && i < steps.size(); ++i) {
        const auto a = static_cast<size_t>(normalize_axis(axes[i], rank));
        const int64_t d = in[a];
        int64_t s = starts[i];
        if (s < 0) s += d;
        s = steps[i] > 0 ? std::clamp<int64_t>(s, 0, d) : (d == 0 ? 0 : std::clamp<int64_t>(s, 0, d - 1));
        first[a] = s;
        step[a] = steps[i];
      }
      const std::vector<int64_t> rs = row_major(in);
      int64_t base = 0;
      std::vector<int64_t> strides(in.size(), 0);
      for (size_t d = 0; d < in.size(); ++d) {
        if (numel(out) > 0) base += first[d] * rs[d];
        if (out[d] > 1) strides[d] = step[d] * rs[d];
      }
      return strided(w, in_op(0), out_op(0), out, base, strides);
    }
    case OpKind::kPad: {
      const std::vector<int64_t> in = dims_in(0), out = dims_out(0);
      const std::vector<int64_t> pads = attr_ints(n, "pads", std::vector<int64_t>(2 * in.size(), 0));
      const DType dt = g.value(n.outputs[0]).type.dtype;
      const std::vector<int64_t> rs = row_major(in);
      std::string code = decompose(out, "i", "d", "    ");
      std::string inside, offset;
      for (size_t d = 0; d < in.size(); ++d) {
        const int64_t b = d < pads.size() ? pads[d] : 0;
        code += fmt::format("    const long long j{0} = d{0} - {1}LL;\n", d, b);
        if (!inside.empty()) inside += " && ";
        inside += fmt::format("j{0} >= 0 && j{0} < {1}LL", d, in[d]);
        if (!offset.empty()) offset += " + ";
        offset += fmt::format("j{} * {}LL", d, rs[d]);
      }
      if (inside.empty()) inside = "true";
      if (offset.empty()) offset = "0LL";
      code += fmt::format("    {}[i] = ({}) ? {}[{}] : {};\n", KernelWriter::param(out_op(0)), inside,
                          KernelWriter::param(in_op(0)), offset, storage_literal(dt, attr_float(n, "value", 0.0)));
      w.body = loop(w, numel(out), code);
      return Status();
    }
    case OpKind::kConcat: {
      const std::vector<int64_t> out = dims_out(0);
      const int axis = normalize_axis(attr_int(n, "axis", 0), static_cast<int>(out.size()));
      const Split3 s = around(out, axis);
      std::string code = fmt::format(
          "    const long long r = i % {0}LL, a = (i / {0}LL) % {1}LL, o = i / ({0}LL * {1}LL);\n", s.inner, s.len);
      int64_t begin = 0;
      std::string chain;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const int64_t len = dims_in(k)[static_cast<size_t>(axis)];
        const int op = in_op(k);
        if (op < 0) return unsupported(g, n, "concat input is not an operand");
        if (len == 0) continue;
        chain += fmt::format("    {}if (a < {}LL) {}[i] = {}[(o * {}LL + (a - {}LL)) * {}LL + r];\n",
                             chain.empty() ? "" : "else ", begin + len, KernelWriter::param(out_op(0)),
                             KernelWriter::param(op), len, begin, s.inner);
        begin += len;
      }
      code += chain;
      w.body = loop(w, numel(out), code);
      return Status();
    }
    case OpKind::kSplit: {
      const std::vector<int64_t> in = dims_in(0);
      const int axis = normalize_axis(attr_int(n, "axis", 0), static_cast<int>(in.size()));
      const Split3 s = around(in, axis);
      std::string code = fmt::format(
          "    const long long r = i % {0}LL, a = (i / {0}LL) % {1}LL, o = i / ({0}LL * {1}LL);\n", s.inner, s.len);
      int64_t begin = 0;
      std::string chain;
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const int64_t len = dims_out(k)[static_cast<size_t>(axis)];
        const int op = out_op(k);
        if (op < 0) return unsupported(g, n, "split output is not an operand");
        if (len == 0) continue;
        chain += fmt::format("    {}if (a < {}LL) {}[(o * {}LL + (a - {}LL)) * {}LL + r] = {}[i];\n",
                             chain.empty() ? "" : "else ", begin + len, KernelWriter::param(op), len, begin, s.inner,
                             KernelWriter::param(in_op(0)));
        begin += len;
      }
      code += chain;
      w.body = loop(w, numel(in), code);
      return Status();
    }
    case OpKind::kGather: {
      const std::vector<int64_t> data = dims_in(0);
      const int axis = normalize_axis(attr_int(n, "axis", 0), static_cast<int>(data.size()));
      const Split3 s = around(data, axis);
      const int64_t nidx = numel(dims_in(1));
      const DType dt = g.value(n.inputs[0]).type.dtype;
      std::string code = fmt::format(
          "    const long long r = i % {0}LL, j = (i / {0}LL) % {1}LL, o = i / ({0}LL * {1}LL);\n", s.inner, nidx);
      code += fmt::format("    long long k = (long long){}[j];\n", KernelWriter::param(in_op(1)));
      code += fmt::format("    if (k < 0) k += {}LL;\n", s.len);
      code += fmt::format("    {}[i] = (k >= 0 && k < {}LL) ? {}[(o * {}LL + k) * {}LL + r] : {};\n",
                          KernelWriter::param(out_op(0)), s.len, KernelWriter::param(in_op(0)), s.len, s.inner,
                          storage_literal(dt, 0.0));
      w.body = loop(w, numel(dims_out(0)), code);
      return Status();
    }
    case OpKind::kGatherElements: {
      const std::vector<int64_t> data = dims_in(0), idx = dims_in(1);
      const int axis = normalize_axis(attr_int(n, "axis", 0), static_cast<int>(data.size()));
      std::vector<int64_t> strides = row_major(data);
      const int64_t axis_stride = strides[static_cast<size_t>(axis)];
      strides[static_cast<size_t>(axis)] = 0;  // the axis coordinate comes from the index
      const int64_t len = data[static_cast<size_t>(axis)];
      const DType dt = g.value(n.inputs[0]).type.dtype;
      std::string code = decompose(idx, "i", "q", "    ");
      code += fmt::format("    long long k = (long long){}[i];\n", KernelWriter::param(in_op(1)));
      code += fmt::format("    if (k < 0) k += {}LL;\n", len);
      code += fmt::format("    {}[i] = (k >= 0 && k < {}LL) ? {}[{} + k * {}LL] : {};\n", KernelWriter::param(out_op(0)), len,
                          KernelWriter::param(in_op(0)), offset_of(idx, strides, "q"), axis_stride,
                          storage_literal(dt, 0.0));
      w.body = loop(w, numel(idx), code);
      return Status();
    }
    default: break;
  }
  (void)P;
  return unsupported(g, n, fmt::format("no CUDA kernel for op {}", ir::op_name(n.op)));
}

}  // namespace carve::jit::cuda::detail
