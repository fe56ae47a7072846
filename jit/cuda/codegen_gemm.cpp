// matmul, gemm and conv2d: one tiled shared-memory GEMM kernel, batched over grid.z: a
// 256-thread block computes a 64x64 output tile (4x4 per thread) or, for big f32 problems,
// a 128x128 tile (8x8 per thread), K in steps of 16. conv2d is an implicit GEMM per
// (image, group): A = the group's weights [og x cg*kh*kw], B = the im2col matrix computed
// on the fly while loading the shared tile; depthwise-like convs (one input channel per
// output channel) use a direct kernel, one thread per output. Fused elementwise epilogues
// run on each output element before it is stored.
//
// This is the fallback and the path for every dtype: f32 GEMMs that map onto one
// strided-batched GEMM run through cuBLASLt when it loads (codegen_library_gemm.cpp,
// runtime/cuda/cublaslt.h). The kernel is simple rather than peak-fast (no tensor cores,
// no double buffering, no vector loads).
#include <fmt/format.h>

#include <algorithm>

#include "carve/ir/op.h"
#include "carve/jit/tiles.h"
#include "codegen_internal.h"

namespace carve::jit::cuda::detail {

using ir::DType;
using ir::OpKind;

namespace {

constexpr int kBK = 16;
// A 256-thread block (16 x 16 threads) computes a tile x tile output block, each thread
// (tile/16) x (tile/16) outputs. 128-tiles do twice the FMAs per shared-memory load of
// 64-tiles but need enough of them to fill the GPU: used from kMinLargeTiles tiles on.
constexpr int kSmallTile = 64, kLargeTile = 128;
constexpr int64_t kMinLargeTiles = 256;

struct GemmSpec {
  std::string_view acc;     // accumulator / shared type
  int64_t batch = 1, m = 1, n = 1, k = 1;
  std::string per_batch;    // statements using `z` (declares a_off, b_off, ... as needed)
  std::string a_expr;       // value of A(gi, gk) (guarded by the caller)
  std::string b_expr;       // value of B(gk, gj)
  std::string epilogue;     // statements using z, i, j, acc (acc is the K sum)
};

std::string mul_add(std::string_view acc, const std::string& s, const std::string& a, const std::string& b) {
  if (is_int_acc(acc)) return fmt::format("{0} = carve_wadd({0}, carve_wmul({1}, {2}));", s, a, b);
  return fmt::format("{0} += {1} * {2};", s, a, b);  // contraction to FMA allowed here
}

int tile_for(const GemmSpec& s) {
  const int64_t large = ((s.m + kLargeTile - 1) / kLargeTile) * ((s.n + kLargeTile - 1) / kLargeTile) * s.batch;
  // 8-byte accumulators would double the registers and shared memory of a 128-tile.
  return s.acc == "float" && large >= kMinLargeTiles ? kLargeTile : kSmallTile;
}

// Each thread owns a per x per block of outputs at rows ty*per.., columns tx*per.., so its
// fragments are contiguous in shared memory: float tiles read them 16 bytes at a time (rows
// padded by 4 elements keep that aligned; a 2-way bank conflict on the transposed A store).
void gemm_kernel(KernelWriter& w, const GemmSpec& s) {
  const int tile = tile_for(s), per = tile / 16;
  const bool vec = s.acc == "float";
  std::string c;
  c += fmt::format("  __shared__ alignas(16) {} As[{}][{}];\n", s.acc, kBK, tile + 4);
  c += fmt::format("  __shared__ alignas(16) {} Bs[{}][{}];\n", s.acc, kBK, tile + 4);
  if (vec) c += "  struct alignas(16) carve_f4 { float x, y, z, w; };\n";
  c += "  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;\n";
  c += fmt::format("  for (long long z = blockIdx.z; z < {}LL; z += gridDim.z) {{\n", s.batch);
  c += s.per_batch;
  c += fmt::format("  for (long long m0 = (long long)blockIdx.y * {0}; m0 < {1}LL; m0 += (long long)gridDim.y * {0}) {{\n", tile, s.m);
  c += fmt::format("  for (long long n0 = (long long)blockIdx.x * {0}; n0 < {1}LL; n0 += (long long)gridDim.x * {0}) {{\n", tile, s.n);
  c += fmt::format("    {} acc[{}][{}];\n", s.acc, per, per);
  c += fmt::format("    for (int r = 0; r < {0}; ++r) for (int q = 0; q < {0}; ++q) acc[r][q] = 0;\n", per);
  c += fmt::format("    for (long long k0 = 0; k0 < {}LL; k0 += {}) {{\n", s.k, kBK);
  c += fmt::format("      for (int e = tid; e < {}; e += 256) {{\n", tile * kBK);
  c += fmt::format("        const int mi = e / {0}, ki = e % {0};\n", kBK);
  c += "        const long long gi = m0 + mi, gk = k0 + ki;\n";
  c += fmt::format("        As[ki][mi] = (gi < {}LL && gk < {}LL) ? ({})({}) : ({})0;\n      }}\n", s.m, s.k, s.acc, s.a_expr, s.acc);
  c += fmt::format("      for (int e = tid; e < {}; e += 256) {{\n", tile * kBK);
  c += fmt::format("        const int ki = e / {0}, nj = e % {0};\n", tile);
  c += "        const long long gk = k0 + ki, gj = n0 + nj;\n";
  c += fmt::format("        Bs[ki][nj] = (gk < {}LL && gj < {}LL) ? ({})({}) : ({})0;\n      }}\n", s.k, s.n, s.acc, s.b_expr, s.acc);
  c += "      __syncthreads();\n";
  c += fmt::format("      for (int kk = 0; kk < {}; ++kk) {{\n", kBK);
  c += fmt::format("        {} fa[{}], fb[{}];\n", s.acc, per, per);
  if (vec) {
    c += fmt::format("        for (int v = 0; v < {}; ++v) {{\n", per / 4);
    c += fmt::format("          const carve_f4 a4 = *reinterpret_cast<const carve_f4*>(&As[kk][ty * {} + 4 * v]);\n", per);
    c += fmt::format("          const carve_f4 b4 = *reinterpret_cast<const carve_f4*>(&Bs[kk][tx * {} + 4 * v]);\n", per);
    c += "          fa[4 * v] = a4.x; fa[4 * v + 1] = a4.y; fa[4 * v + 2] = a4.z; fa[4 * v + 3] = a4.w;\n";
    c += "          fb[4 * v] = b4.x; fb[4 * v + 1] = b4.y; fb[4 * v + 2] = b4.z; fb[4 * v + 3] = b4.w;\n";
    c += "        }\n";
  } else {
    c += fmt::format("        for (int r = 0; r < {0}; ++r) fa[r] = As[kk][ty * {0} + r];\n", per);
    c += fmt::format("        for (int q = 0; q < {0}; ++q) fb[q] = Bs[kk][tx * {0} + q];\n", per);
  }
  c += fmt::format("        for (int r = 0; r < {0}; ++r) for (int q = 0; q < {0}; ++q) ", per) + mul_add(s.acc, "acc[r][q]", "fa[r]", "fb[q]") + "\n";
  c += "      }\n      __syncthreads();\n    }\n";
  c += fmt::format("    for (int r = 0; r < {}; ++r) {{\n      for (int q = 0; q < {}; ++q) {{\n", per, per);
  c += fmt::format("        const long long i = m0 + ty * {0} + r, j = n0 + tx * {0} + q;\n", per);
  c += fmt::format("        if (i >= {}LL || j >= {}LL) continue;\n", s.m, s.n);
  c += fmt::format("        const {} sum = acc[r][q];\n", s.acc);
  c += s.epilogue;
  c += "      }\n    }\n";
  c += "  }\n  }\n  }\n";
  w.body = c;
  w.max_threads = 256;
  w.launch = LaunchConfig{};
  w.launch.block[0] = 256;
  w.launch.grid[0] = static_cast<uint32_t>(std::clamp<int64_t>((s.n + tile - 1) / tile, 1, 0x7fffffff));
  w.launch.grid[1] = static_cast<uint32_t>(std::clamp<int64_t>((s.m + tile - 1) / tile, 1, 65535));
  w.launch.grid[2] = static_cast<uint32_t>(std::clamp<int64_t>(s.batch, 1, 65535));
}

// True when an epilogue node reads an external operand whose shape differs from `dims`.
bool epilogue_broadcasts(const KernelWriter& w, const std::vector<int64_t>& dims) {
  const ir::Graph& g = w.graph();
  for (size_t k = 1; k < w.group().nodes.size(); ++k) {
    for (ir::ValueId v : g.node(w.group().nodes[k]).inputs) {
      if (w.operand(v, OperandRole::kInput) >= 0 && g.value(v).type.shape.dims() != dims) return true;
    }
  }
  return false;
}

}  // namespace

// Epilogue statements: anchor value `value` (compute type of the output dtype) at linear
// output index `lin`, then the fused chain and the stores.
Status gemm_epilogue(KernelWriter& w, const std::string& value, const std::string& lin, std::string& code,
                     std::string_view indent) {
  const ir::Graph& g = w.graph();
  const ir::Node& a = w.anchor();
  const ir::TensorType& ty = g.value(a.outputs[0]).type;
  const std::vector<int64_t> dims = ty.shape.dims();
  code += fmt::format("{}const long long lin = {};\n", indent, lin);
  if (epilogue_broadcasts(w, dims)) code += decompose(dims, "lin", "o", indent);
  code += fmt::format("{}const {} v{} = {};\n", indent, ctype(ty.dtype), a.outputs[0], value);
  std::map<ir::ValueId, std::string> values{{a.outputs[0], fmt::format("v{}", a.outputs[0])}};
  return emit_chain(w, 1, dims, "lin", "o", values, code, indent);
}

std::string sum_to_value(DType dt, std::string_view acc, const std::string& s) {
  if (acc == "double" && dt != DType::kF64) return from_double(dt, s);
  return round_to(dt, s);
}

std::string gemm_value(KernelWriter& w, int64_t m, int64_t n_cols) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const DType dt = g.value(n.inputs[0]).type.dtype;
  const double alpha = attr_float(n, "alpha", 1.0), beta = attr_float(n, "beta", 1.0);
  std::string cval;
  if (n.inputs.size() > 2) {
    const ir::TensorType& tc = g.value(n.inputs[2]).type;
    const std::vector<int64_t> out{m, n_cols};
    const std::vector<int64_t> cs = broadcast_strides(tc.shape.dims(), out);
    std::string idx = "0LL";
    if (cs[0] != 0 && m != 1) idx = fmt::format("i * {}LL", cs[0]);
    if (cs[1] != 0 && n_cols != 1) idx += fmt::format(" + j * {}LL", cs[1]);
    cval = load(dt, KernelWriter::param(w.operand(n.inputs[2], OperandRole::kInput)), idx);
  }
  if (ir::is_float(dt)) {
    const std::string c = cval.empty() ? "0.0" : fmt::format("(double)({})", cval);
    return from_double(dt, fmt::format("__dadd_rn(__dmul_rn({}, (double)sum), __dmul_rn({}, {}))", dlit(alpha), dlit(beta), c));
  }
  if (alpha == 1.0 && beta == 1.0) return round_to(dt, cval.empty() ? std::string("sum") : fmt::format("carve_wadd(sum, {})", cval));
  const std::string c = cval.empty() ? "0.0" : fmt::format("(double)({})", cval);
  return from_double(dt, fmt::format("__dadd_rn(__dmul_rn({}, (double)({})), __dmul_rn({}, {}))", dlit(alpha),
                                     round_to(dt, "sum"), dlit(beta), c));
}

std::string conv_value(KernelWriter& w, std::string_view acc) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const DType dt = g.value(n.inputs[0]).type.dtype;
  if (n.inputs.size() <= 2) return sum_to_value(dt, acc, "sum");
  const std::string bias = load(dt, KernelWriter::param(w.operand(n.inputs[2], OperandRole::kInput)), "oc");
  if (is_int_acc(acc)) return sum_to_value(dt, acc, fmt::format("carve_wadd(sum, {})", bias));
  return sum_to_value(dt, acc, fmt::format("__{}add_rn(sum, ({}){})", acc == "double" ? "d" : "f", acc, bias));
}

Status emit_gemm(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& ta = g.value(n.inputs[0]).type;
  const ir::TensorType& ty = g.value(n.outputs[0]).type;
  const DType dt = ta.dtype;
  if (dt == DType::kBool) return unsupported(g, n, "matmul of bool");
  const int a_op = w.operand(n.inputs[0], OperandRole::kInput);
  const int b_op = w.operand(n.inputs[1], OperandRole::kInput);
  const std::string A = KernelWriter::param(a_op), B = KernelWriter::param(b_op);
  GemmSpec s;
  s.acc = acc_type(dt, false);
  if (n.op == OpKind::kMatmul) {
    const tiling::MatmulShape ms = tiling::matmul_shape(g, n);
    s.m = ms.m;
    s.k = ms.k;
    s.n = ms.n;
    const std::vector<int64_t>& batch = ms.batch_dims;
    const std::vector<int64_t>& as = ms.a_batch_strides;
    const std::vector<int64_t>& bs = ms.b_batch_strides;
    s.batch = numel(batch);
    s.per_batch = decompose(batch, "z", "zb", "  ");
    s.per_batch += fmt::format("  const long long a_off = {}, b_off = {};\n", offset_of(batch, as, "zb"), offset_of(batch, bs, "zb"));
    s.a_expr = load(dt, A, fmt::format("a_off + gi * {}LL + gk", s.k));
    s.b_expr = load(dt, B, fmt::format("b_off + gk * {}LL + gj", s.n));
    std::string code;
    CARVE_RETURN_IF_ERROR(gemm_epilogue(w, sum_to_value(dt, s.acc, "sum"), fmt::format("z * {}LL + i * {}LL + j", s.m * s.n, s.n), code, "        "));
    s.epilogue = code;
    w.family = "gemm";
    gemm_kernel(w, s);
    return Status();
  }
  // gemm
  const bool trans_a = attr_int(n, "trans_a", 0) != 0, trans_b = attr_int(n, "trans_b", 0) != 0;
  s.m = ty.shape[0];
  s.n = ty.shape[1];
  s.k = trans_a ? ta.shape[0] : ta.shape[1];
  s.a_expr = load(dt, A, trans_a ? fmt::format("gk * {}LL + gi", s.m) : fmt::format("gi * {}LL + gk", s.k));
  s.b_expr = load(dt, B, trans_b ? fmt::format("gj * {}LL + gk", s.k) : fmt::format("gk * {}LL + gj", s.n));
  const std::string value = gemm_value(w, s.m, s.n);
  std::string code;
  CARVE_RETURN_IF_ERROR(gemm_epilogue(w, value, fmt::format("i * {}LL + j", s.n), code, "        "));
  s.epilogue = code;
  w.family = "gemm";
  gemm_kernel(w, s);
  return Status();
}

Status emit_conv(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& tx = g.value(n.inputs[0]).type;
  const ir::TensorType& tw = g.value(n.inputs[1]).type;
  const ir::TensorType& ty = g.value(n.outputs[0]).type;
  const DType dt = tx.dtype;
  if (dt == DType::kBool) return unsupported(g, n, "conv2d of bool");
  if (tx.shape.rank() != 4 || tw.shape.rank() != 4 || ty.shape.rank() != 4) return unsupported(g, n, "conv2d takes NCHW/OIHW");
  const int64_t batch = tx.shape[0], channels = tx.shape[1], h = tx.shape[2], wd = tx.shape[3];
  const int64_t outs = tw.shape[0], cg = tw.shape[1], kh = tw.shape[2], kw = tw.shape[3];
  const int64_t oh = ty.shape[2], ow = ty.shape[3];
  const int64_t groups = std::max<int64_t>(1, attr_int(n, "groups", 1));
  const int64_t og = outs / groups;
  const std::vector<int64_t> st = attr_ints(n, "strides", {1, 1});
  const std::vector<int64_t> pads = attr_ints(n, "pads", {0, 0, 0, 0});
  const std::vector<int64_t> dil = attr_ints(n, "dilations", {1, 1});
  const std::string X = KernelWriter::param(w.operand(n.inputs[0], OperandRole::kInput));
  const std::string W = KernelWriter::param(w.operand(n.inputs[1], OperandRole::kInput));
  const std::string_view acc = acc_type(dt, false);
  (void)channels;
  if (cg == 1) {
    // Direct: output (b, oc, py, px) reads input channel oc / og only.
    const int64_t total = numel(ty.shape.dims());
    std::string c;
    c += fmt::format("    const long long px = i % {0}LL, py = (i / {0}LL) % {1}LL, oc = (i / ({0}LL * {1}LL)) % {2}LL, b = i / ({0}LL * {1}LL * {2}LL);\n",
                     ow, oh, outs);
    c += fmt::format("    const long long ch = oc / {}LL;\n", og);
    c += fmt::format("    {} sum = 0;\n", acc);
    c += fmt::format("    for (int ky = 0; ky < {}; ++ky) {{\n", kh);
    c += fmt::format("      const long long iy = py * {}LL - {}LL + ky * {}LL;\n      if (iy < 0 || iy >= {}LL) continue;\n", st[0], pads[0], dil[0], h);
    c += fmt::format("      for (int kx = 0; kx < {}; ++kx) {{\n", kw);
    c += fmt::format("        const long long ix = px * {}LL - {}LL + kx * {}LL;\n        if (ix < 0 || ix >= {}LL) continue;\n", st[1], pads[1], dil[1], wd);
    c += "        " + mul_add(acc, "sum", fmt::format("({}){}", acc, load(dt, W, fmt::format("(oc * {}LL + ky) * {}LL + kx", kh, kw))),
                              fmt::format("({}){}", acc, load(dt, X, fmt::format("((b * {}LL + ch) * {}LL + iy) * {}LL + ix", channels, h, wd)))) + "\n";
    c += "      }\n    }\n";
    std::string code;
    CARVE_RETURN_IF_ERROR(gemm_epilogue(w, conv_value(w, acc), "i", code, "    "));
    c += code;
    w.family = "conv_direct";
    w.launch_1d(total);
    w.body = fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("i", total), c);
    return Status();
  }
  GemmSpec s;
  s.acc = acc;
  s.batch = batch * groups;
  s.m = og;
  s.n = oh * ow;
  s.k = cg * kh * kw;
  s.per_batch = fmt::format("  const long long b = z / {0}LL, gr = z % {0}LL;\n", groups);
  s.a_expr = load(dt, W, fmt::format("(gr * {}LL + gi) * {}LL + gk", og, s.k));
  // im2col element (gk, gj), zero outside the image.
  s.b_expr = fmt::format(
      "[&]() -> {acc} {{ const long long ci = gk / {khw}LL, ky = (gk / {kw}LL) % {kh}LL, kx = gk % {kw}LL;"
      " const long long py = gj / {ow}LL, px = gj % {ow}LL;"
      " const long long iy = py * {sh}LL - {pt}LL + ky * {dh}LL, ix = px * {sw}LL - {pl}LL + kx * {dw}LL;"
      " return (iy >= 0 && iy < {h}LL && ix >= 0 && ix < {w}LL) ? ({acc}){ld} : ({acc})0; }}()",
      fmt::arg("acc", acc), fmt::arg("khw", kh * kw), fmt::arg("kw", kw), fmt::arg("kh", kh), fmt::arg("ow", ow),
      fmt::arg("sh", st[0]), fmt::arg("pt", pads[0]), fmt::arg("dh", dil[0]), fmt::arg("sw", st[1]), fmt::arg("pl", pads[1]),
      fmt::arg("dw", dil[1]), fmt::arg("h", h), fmt::arg("w", wd),
      fmt::arg("ld", load(dt, X, fmt::format("((b * {}LL + gr * {}LL + ci) * {}LL + iy) * {}LL + ix", channels, cg, h, wd))));
  std::string code = fmt::format("        const long long oc = gr * {}LL + i;\n", og);
  CARVE_RETURN_IF_ERROR(gemm_epilogue(w, conv_value(w, acc),
                                 fmt::format("(b * {}LL + oc) * {}LL + j", outs, oh * ow), code, "        "));
  s.epilogue = code;
  w.family = "conv_gemm";
  gemm_kernel(w, s);
  return Status();
}

}  // namespace carve::jit::cuda::detail
