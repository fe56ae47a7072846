// plan_library_gemm (cuda_codegen.h): a matmul/gemm/conv2d group as one strided-batched
// row-major f32 GEMM for a library (cuBLASLt), plus the generated im2col and epilogue
// kernels around it. Pure text generation, like the rest of the generator.
#include <fmt/format.h>

#include <algorithm>

#include "carve/ir/op.h"
#include "carve/jit/tiles.h"
#include "codegen_internal.h"

namespace carve::jit::cuda {
namespace {

using detail::KernelWriter;
using ir::DType;
using ir::OpKind;

Status unsupported(const ir::Graph& g, const ir::Node& n, std::string_view why) {
  return detail::unsupported(g, n, fmt::format("library gemm: {}", why));
}

// One batch stride for an operand whose per-dim broadcast strides (tiling::matmul_shape)
// are `strides`: 0 when it is broadcast over the whole batch, the matrix size when it has
// every batch dim of its own; a partial broadcast has none.
std::optional<int64_t> batch_stride(const std::vector<int64_t>& batch, const std::vector<int64_t>& strides,
                                    int64_t matrix) {
  bool shared = true, own = true;
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] <= 1) continue;
    shared = shared && strides[d] == 0;
    own = own && strides[d] != 0;
  }
  if (shared) return 0;
  if (own) return matrix;
  return std::nullopt;
}

Status plan_matmul(KernelWriter& w, LibraryGemm& p) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const tiling::MatmulShape ms = tiling::matmul_shape(g, n);
  p.m = ms.m;
  p.k = ms.k;
  p.n = ms.n;
  p.batch = detail::numel(ms.batch_dims);
  const auto as = batch_stride(ms.batch_dims, ms.a_batch_strides, p.m * p.k);
  const auto bs = batch_stride(ms.batch_dims, ms.b_batch_strides, p.k * p.n);
  if (!as || !bs) return unsupported(g, n, "a partial batch broadcast");
  p.a = {w.operand(n.inputs[0], OperandRole::kInput), 0, *as, p.k, false};
  p.b = {w.operand(n.inputs[1], OperandRole::kInput), 0, *bs, p.n, false};
  return Status();
}

Status plan_gemm(KernelWriter& w, LibraryGemm& p) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& ta = g.value(n.inputs[0]).type;
  const ir::TensorType& ty = g.value(n.outputs[0]).type;
  const bool trans_a = detail::attr_int(n, "trans_a", 0) != 0, trans_b = detail::attr_int(n, "trans_b", 0) != 0;
  p.m = ty.shape[0];
  p.n = ty.shape[1];
  p.k = trans_a ? ta.shape[0] : ta.shape[1];
  p.a = {w.operand(n.inputs[0], OperandRole::kInput), 0, 0, trans_a ? p.m : p.k, trans_a};
  p.b = {w.operand(n.inputs[1], OperandRole::kInput), 0, 0, trans_b ? p.k : p.n, trans_b};
  return Status();
}

// im2col for every (image, group) z: column matrix z is [cg*kh*kw x oh*ow] at z * k * n.
std::string im2col_source(const ir::Graph& g, const ir::Node& n, const LibraryGemm& p, int64_t groups,
                          int block) {
  const ir::TensorType& tx = g.value(n.inputs[0]).type;
  const ir::TensorType& tw = g.value(n.inputs[1]).type;
  const ir::TensorType& ty = g.value(n.outputs[0]).type;
  const std::vector<int64_t> st = detail::attr_ints(n, "strides", {1, 1});
  const std::vector<int64_t> pads = detail::attr_ints(n, "pads", {0, 0, 0, 0});
  const std::vector<int64_t> dil = detail::attr_ints(n, "dilations", {1, 1});
  const int64_t kh = tw.shape[2], kw = tw.shape[3], cg = tw.shape[1];
  std::string src(detail::prelude());
  src += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({block}) {entry}(const float* __restrict__ x, float* __restrict__ col) {{\n"
      "  {loop} {{\n"
      "    const long long z = e / {kn}LL, r = e % {kn}LL, gk = r / {n}LL, gj = r % {n}LL;\n"
      "    const long long b = z / {groups}LL, gr = z % {groups}LL;\n"
      "    const long long ci = gk / {khw}LL, ky = (gk / {kw}LL) % {kh}LL, kx = gk % {kw}LL;\n"
      "    const long long iy = (gj / {ow}LL) * {sh}LL - {pt}LL + ky * {dh}LL, ix = (gj % {ow}LL) * {sw}LL - {pl}LL + kx * {dw}LL;\n"
      "    col[e] = (iy >= 0 && iy < {h}LL && ix >= 0 && ix < {w}LL)"
      " ? x[((b * {c}LL + gr * {cg}LL + ci) * {h}LL + iy) * {w}LL + ix] : 0.0f;\n"
      "  }}\n}}\n",
      fmt::arg("block", block), fmt::arg("entry", kKernelEntry),
      fmt::arg("loop", KernelWriter::grid_loop("e", p.column_elements)), fmt::arg("kn", p.k * p.n),
      fmt::arg("n", p.n), fmt::arg("groups", groups), fmt::arg("khw", kh * kw), fmt::arg("kw", kw),
      fmt::arg("kh", kh), fmt::arg("ow", ty.shape[3]), fmt::arg("sh", st[0]), fmt::arg("pt", pads[0]),
      fmt::arg("dh", dil[0]), fmt::arg("sw", st[1]), fmt::arg("pl", pads[1]), fmt::arg("dw", dil[1]),
      fmt::arg("h", tx.shape[2]), fmt::arg("w", tx.shape[3]), fmt::arg("c", tx.shape[1]), fmt::arg("cg", cg));
  return src;
}

Status plan_conv(KernelWriter& w, LibraryGemm& p) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& tx = g.value(n.inputs[0]).type;
  const ir::TensorType& tw = g.value(n.inputs[1]).type;
  const ir::TensorType& ty = g.value(n.outputs[0]).type;
  if (tx.shape.rank() != 4 || tw.shape.rank() != 4) return unsupported(g, n, "conv2d takes NCHW/OIHW");
  const int64_t images = tx.shape[0], channels = tx.shape[1], hw = tx.shape[2] * tx.shape[3];
  const int64_t outs = tw.shape[0], cg = tw.shape[1], kh = tw.shape[2], kw = tw.shape[3];
  const int64_t groups = std::max<int64_t>(1, detail::attr_int(n, "groups", 1));
  if (cg == 1) return unsupported(g, n, "depthwise-like conv (one input channel per group)");
  if (groups > 1 && images > 1) return unsupported(g, n, "grouped conv over several images");
  const int64_t og = outs / groups;
  p.batch = images * groups;
  p.m = og;
  p.n = ty.shape[2] * ty.shape[3];
  p.k = cg * kh * kw;
  // z = image * groups + group: the weights of group z % groups.
  p.a = {w.operand(n.inputs[1], OperandRole::kInput), 0, groups > 1 ? og * p.k : 0, p.k, false};
  const std::vector<int64_t> st = detail::attr_ints(n, "strides", {1, 1});
  const std::vector<int64_t> pads = detail::attr_ints(n, "pads", {0, 0, 0, 0});
  const bool pointwise = kh == 1 && kw == 1 && st == std::vector<int64_t>{1, 1} &&
                         std::all_of(pads.begin(), pads.end(), [](int64_t v) { return v == 0; });
  if (pointwise) {  // the input is already the column matrix [cg x hw] of each (image, group)
    p.b = {w.operand(n.inputs[0], OperandRole::kInput), 0, groups > 1 ? cg * hw : channels * hw, hw, false};
    return Status();
  }
  p.column_elements = p.batch * p.k * p.n;
  p.b = {-1, 0, p.k * p.n, p.n, false};
  p.column_source = w.operand(n.inputs[0], OperandRole::kInput);
  KernelSource col;
  col.source = im2col_source(g, n, p, groups, w.options().block_size);
  col.family = "im2col";
  col.num_params = 2;
  w.launch_1d(p.column_elements);
  col.launch = w.launch;
  p.im2col = std::move(col);
  return Status();
}

// Whether anything follows the bare product: fused nodes, gemm's alpha/beta/C, conv's bias.
bool needs_epilogue(const ir::Graph& g, const KernelGroup& group) {
  const ir::Node& n = g.node(group.nodes.front());
  if (group.nodes.size() > 1) return true;
  if (n.op == OpKind::kGemm) return n.inputs.size() > 2 || detail::attr_float(n, "alpha", 1.0) != 1.0;
  if (n.op == OpKind::kConv2d) return n.inputs.size() > 2;
  return false;
}

Result<KernelSource> epilogue_kernel(KernelWriter& w, const LibraryGemm& p) {
  const ir::Node& n = w.anchor();
  std::string code = "    const float sum = carve_product[e];\n";
  std::string value = "sum";
  if (n.op == OpKind::kGemm) {
    code += fmt::format("    const long long i = e / {0}LL, j = e % {0}LL;\n", p.n);
    value = detail::gemm_value(w, p.m, p.n);
  } else if (n.op == OpKind::kConv2d) {
    code += fmt::format("    const long long oc = (e / {}LL) % {}LL;\n", p.n, w.value_type(n.outputs[0]).shape[1]);
    value = detail::conv_value(w, "float");
  }
  CARVE_RETURN_IF_ERROR(detail::gemm_epilogue(w, value, "e", code, "    "));
  w.family = "gemm_epilogue";
  w.extra_params = ", const float* __restrict__ carve_product";
  w.launch_1d(p.product_elements);
  w.body = fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("e", p.product_elements), code);
  CARVE_ASSIGN_OR_RETURN(KernelSource src, w.finish());
  src.num_params += 1;
  return src;
}

}  // namespace

Result<LibraryGemm> plan_library_gemm(const ir::Graph& graph, const KernelGroup& group, const CodegenOptions& options) {
  KernelWriter w(graph, group, options);
  CARVE_RETURN_IF_ERROR(w.init());
  const ir::Node& n = w.anchor();
  if (n.op != OpKind::kMatmul && n.op != OpKind::kGemm && n.op != OpKind::kConv2d)
    return unsupported(graph, n, "not matmul, gemm or conv2d");
  LibraryGemm p;
  p.dtype = graph.value(n.inputs[0]).type.dtype;
  if (p.dtype != DType::kF32) return unsupported(graph, n, fmt::format("{} (f32 only)", ir::dtype_name(p.dtype)));
  if (n.op == OpKind::kMatmul) CARVE_RETURN_IF_ERROR(plan_matmul(w, p));
  if (n.op == OpKind::kGemm) CARVE_RETURN_IF_ERROR(plan_gemm(w, p));
  if (n.op == OpKind::kConv2d) CARVE_RETURN_IF_ERROR(plan_conv(w, p));
  if (p.a.operand < 0 || (p.b.operand < 0 && !p.im2col)) return unsupported(graph, n, "an operand is not a kernel input");
  p.product_elements = p.batch * p.m * p.n;
  if (needs_epilogue(graph, group)) {
    CARVE_ASSIGN_OR_RETURN(KernelSource epi, epilogue_kernel(w, p));
    p.epilogue = std::move(epi);
    return p;
  }
  // The library writes the output itself: it must not share bytes with A or B.
  p.product_operand = w.operand(n.outputs[0], OperandRole::kOutput);
  if (p.product_operand < 0) return unsupported(graph, n, "the product is not an output of the group");
  for (auto [x, y] : group.may_alias)
    if (x == p.product_operand || y == p.product_operand)
      return unsupported(graph, n, "the output may share bytes with an input");
  return p;
}

}  // namespace carve::jit::cuda
