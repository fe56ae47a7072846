// generate_kernel: dispatch by the group's anchor op; elementwise chains and batch_norm.
#include <fmt/format.h>

#include "carve/ir/op.h"
#include "codegen_internal.h"

namespace carve::jit::cuda {
namespace detail {

using ir::DType;
using ir::OpKind;

namespace {

// The float4 form of a same-shape f32 chain: each thread loads 16 bytes of every input,
// computes the chain for the 4 lanes and stores 16 bytes of every output (a quarter of the
// memory instructions of the scalar loop, which stays for pointers not 16-byte aligned).
bool vectorizable(const KernelWriter& w, int64_t n) {
  if (n % 4 != 0 || n < 1024) return false;
  for (size_t i = 0; i < w.group().operands.size(); ++i)
    if (w.group().operands[i].role != OperandRole::kScratch && w.operand_type(static_cast<int>(i)).dtype != DType::kF32)
      return false;
  return true;
}

Result<std::string> vector_loop(KernelWriter& w, const std::vector<int64_t>& dims, int64_t n) {
  const KernelGroup& group = w.group();
  std::string aligned, code;
  for (size_t i = 0; i < group.operands.size(); ++i) {
    if (group.operands[i].role == OperandRole::kScratch) continue;
    aligned += fmt::format("{}(unsigned long long){}", aligned.empty() ? "" : " | ", KernelWriter::param(static_cast<int>(i)));
  }
  code += "  struct alignas(16) carve_f4 { float x, y, z, w; };\n";
  code += fmt::format("  if ((({}) & 15ULL) == 0ULL) {{\n", aligned);
  code += fmt::format("    {} {{\n", KernelWriter::grid_loop("t", n / 4));
  std::map<ir::ValueId, std::string> inputs;
  for (size_t i = 0; i < group.operands.size(); ++i) {
    const KernelOperand& op = group.operands[i];
    const std::string p = KernelWriter::param(static_cast<int>(i));
    if (op.role == OperandRole::kInput && !inputs.contains(op.value)) {
      code += fmt::format("      const carve_f4 q{0} = reinterpret_cast<const carve_f4*>({1})[t];\n", i, p);
      inputs[op.value] = fmt::format("q{}", i);
    }
    if (op.role == OperandRole::kOutput) code += fmt::format("      float o{}[4];\n", i);
  }
  for (int lane = 0; lane < 4; ++lane) {
    const char field = "xyzw"[lane];
    std::map<ir::ValueId, std::string> values;
    for (const auto& [v, q] : inputs) values[v] = fmt::format("{}.{}", q, field);
    code += fmt::format("      {{\n        const long long i = 4 * t + {};\n", lane);
    CARVE_RETURN_IF_ERROR(emit_chain(w, 0, dims, "i", "d", values, code, "        ", /*stores=*/false));
    for (size_t i = 0; i < group.operands.size(); ++i)
      if (group.operands[i].role == OperandRole::kOutput)
        code += fmt::format("        o{}[{}] = {};\n", i, lane, values.at(group.operands[i].value));
    code += "      }\n";
  }
  for (size_t i = 0; i < group.operands.size(); ++i)
    if (group.operands[i].role == OperandRole::kOutput)
      code += fmt::format("      reinterpret_cast<carve_f4*>({0})[t] = carve_f4{{o{1}[0], o{1}[1], o{1}[2], o{1}[3]}};\n",
                          KernelWriter::param(static_cast<int>(i)), i);
  code += "    }\n    return;\n  }\n";
  return code;
}

}  // namespace

Status emit_elementwise(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& last = g.node(w.group().nodes.back());
  if (last.outputs.size() != 1) return unsupported(g, last, "elementwise node without one output");
  const std::vector<int64_t> dims = g.value(last.outputs[0]).type.shape.dims();
  const int64_t n = numel(dims);
  bool broadcast = false;
  for (size_t i = 0; i < w.group().operands.size(); ++i) {
    if (w.group().operands[i].role != OperandRole::kScratch && w.operand_type(static_cast<int>(i)).shape.dims() != dims) {
      broadcast = true;
    }
  }
  std::string code;
  if (broadcast) code += decompose(dims, "i", "d", "    ");
  std::map<ir::ValueId, std::string> values;
  CARVE_RETURN_IF_ERROR(emit_chain(w, 0, dims, "i", "d", values, code, "    "));
  w.family = "elementwise";
  std::string vector;
  if (!broadcast && vectorizable(w, n)) {
    CARVE_ASSIGN_OR_RETURN(vector, vector_loop(w, dims, n));
    w.launch_1d(n / 4);
  } else {
    w.launch_1d(n);
  }
  w.body = fmt::format("{}  {} {{\n{}  }}\n", vector, KernelWriter::grid_loop("i", n), code);
  return Status();
}

Status emit_batch_norm(KernelWriter& w) {
  const ir::Graph& g = w.graph();
  const ir::Node& n = w.anchor();
  const ir::TensorType& t = g.value(n.inputs[0]).type;
  const std::vector<int64_t> dims = t.shape.dims();
  const int64_t total = numel(dims);
  const int64_t channels = dims.size() > 1 ? dims[1] : 1;
  int64_t spatial = 1;
  for (size_t d = 2; d < dims.size(); ++d) spatial *= dims[d];
  const DType dt = t.dtype;
  const std::string_view acc = acc_type(dt, w.options().double_accumulation);
  const bool dbl = acc == "double";
  const char* p = dbl ? "d" : "f";
  int ops[5];
  for (int i = 0; i < 5; ++i) ops[i] = w.operand(n.inputs[static_cast<size_t>(i)], OperandRole::kInput);
  const int out = w.operand(n.outputs[0], OperandRole::kOutput);
  if (out < 0) return unsupported(g, n, "output is not an operand");
  auto ld = [&](int i, const std::string& idx) {
    return fmt::format("({}){}", acc, load(dt, KernelWriter::param(ops[i]), idx));
  };
  std::string code;
  code += fmt::format("    const long long c = (i / {}LL) % {}LL;\n", spatial, channels);
  code += fmt::format("    const {0} inv = __{1}div_rn(({0})1, __{1}sqrt_rn(__{1}add_rn({2}, ({0}){3})));\n", acc, p,
                      ld(4, "c"), dlit(attr_float(n, "epsilon", 1e-5)));
  code += fmt::format("    const {0} y = __{1}add_rn(__{1}mul_rn(__{1}mul_rn(__{1}sub_rn({2}, {3}), inv), {4}), {5});\n", acc,
                      p, ld(0, "i"), ld(3, "c"), ld(1, "c"), ld(2, "c"));
  std::string value = dbl ? from_double(dt, "y") : round_to(dt, "y");
  std::map<ir::ValueId, std::string> values;
  code += fmt::format("    const {} v{} = {};\n", ctype(dt), n.outputs[0], value);
  values[n.outputs[0]] = fmt::format("v{}", n.outputs[0]);
  CARVE_RETURN_IF_ERROR(emit_chain(w, 1, dims, "i", "d", values, code, "    "));
  w.family = "batch_norm";
  w.launch_1d(total);
  w.body = fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("i", total), code);
  return Status();
}

}  // namespace detail

Result<KernelSource> generate_kernel(const ir::Graph& graph, const KernelGroup& group, const CodegenOptions& options) {
  detail::KernelWriter w(graph, group, options);
  CARVE_RETURN_IF_ERROR(w.init());
  const ir::Node& a = w.anchor();
  const ir::OpKind op = a.op;
  if (group.nodes.size() > 1 && !ir::is_elementwise(op) && op != ir::OpKind::kMatmul && op != ir::OpKind::kGemm &&
      op != ir::OpKind::kConv2d) {
    return detail::unsupported(graph, a, "only elementwise chains and matmul/gemm/conv2d epilogues fuse");
  }
  for (ir::NodeId id : group.nodes) {
    const ir::Node& n = graph.node(id);
    if (!ir::is_valid_op(n.op)) return Status(ErrorCode::kInvalidArgument, fmt::format("{}: unknown op", ir::describe_node(graph, id)));
  }
  Status s;
  if (ir::is_elementwise(op)) {
    s = detail::emit_elementwise(w);
  } else {
    switch (op) {
      case ir::OpKind::kReduceSum:
      case ir::OpKind::kReduceMean:
      case ir::OpKind::kReduceMax:
      case ir::OpKind::kReduceProd: s = detail::emit_reduce(w); break;
      case ir::OpKind::kArgMax:
      case ir::OpKind::kArgMin: s = detail::emit_arg(w); break;
      case ir::OpKind::kSoftmax:
      case ir::OpKind::kLayerNorm:
      case ir::OpKind::kGlobalAvgPool: s = detail::emit_rows(w); break;
      case ir::OpKind::kBatchNorm: s = detail::emit_batch_norm(w); break;
      case ir::OpKind::kMaxPool:
      case ir::OpKind::kAvgPool: s = detail::emit_pool(w); break;
      case ir::OpKind::kMatmul:
      case ir::OpKind::kGemm: s = detail::emit_gemm(w); break;
      case ir::OpKind::kConv2d: s = detail::emit_conv(w); break;
      case ir::OpKind::kGatherNd:
      case ir::OpKind::kScatterNd:
      case ir::OpKind::kTopK: s = detail::emit_index(w); break;
      case ir::OpKind::kNonZero:
      case ir::OpKind::kUnique:
      case ir::OpKind::kNonMaxSuppression:
        s = detail::unsupported(graph, a, "a data-dependent extent (ir/extent.h) runs in a CPU Session only");
        break;
      default: s = detail::emit_layout(w); break;
    }
  }
  CARVE_RETURN_IF_ERROR(s);
  return w.finish();
}

}  // namespace carve::jit::cuda
