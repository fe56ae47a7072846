// generate_kernel: dispatch by the group's anchor op; elementwise chains and batch_norm.
#include <fmt/format.h>

#include "carve/ir/op.h"
#include "codegen_internal.h"

namespace carve::jit::cuda {
namespace detail {

using ir::DType;
using ir::OpKind;

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
  w.launch_1d(n);
  w.body = fmt::format("  {} {{\n{}  }}\n", KernelWriter::grid_loop("i", n), code);
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
      case ir::OpKind::kReduceMax: s = detail::emit_reduce(w); break;
      case ir::OpKind::kSoftmax:
      case ir::OpKind::kLayerNorm:
      case ir::OpKind::kGlobalAvgPool: s = detail::emit_rows(w); break;
      case ir::OpKind::kBatchNorm: s = detail::emit_batch_norm(w); break;
      case ir::OpKind::kMaxPool:
      case ir::OpKind::kAvgPool: s = detail::emit_pool(w); break;
      case ir::OpKind::kMatmul:
      case ir::OpKind::kGemm: s = detail::emit_gemm(w); break;
      case ir::OpKind::kConv2d: s = detail::emit_conv(w); break;
      default: s = detail::emit_layout(w); break;
    }
  }
  CARVE_RETURN_IF_ERROR(s);
  return w.finish();
}

}  // namespace carve::jit::cuda
