// The losses ONNX defines as functions, composed of carve ops as their function bodies
// are: NegativeLogLikelihoodLoss (a gather_elements of -input along the class axis,
// weighted, ignored targets weighing 0) and SoftmaxCrossEntropyLoss (the same over
// log(softmax(scores)) along axis 1, with log_prob as its optional second output).
#include <onnx/onnx_pb.h>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

// NLL of log-probabilities x [N, C, d...] at targets [N, d...] with the node's
// reduction ("none", "sum", "mean" = sum / sum of the applied weights) and ignore_index.
Result<Tensor> nll(NodeContext& n, const Tensor& x, const Tensor& target, std::optional<Tensor> weight) {
  CARVE_ASSIGN_OR_RETURN(std::string reduction, n.attr_string("reduction", "mean"));
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return n.invalid(fmt::format("reduction '{}' (none, sum or mean)", reduction));
  const ir::DType dt = x.type.dtype, it = target.type.dtype;
  if (!ir::is_float(dt)) return n.unsupported(fmt::format("{} input", ir::dtype_name(dt)));
  const std::vector<int64_t>& xd = x.type.shape.dims();
  std::vector<int64_t> td = target.type.shape.dims();
  if (xd.size() < 2 || td.size() + 1 != xd.size())
    return n.invalid(fmt::format("input {} and target {} (needs [N, C, d...] and [N, d...])", x.type.shape.to_string(),
                                 target.type.shape.to_string()));
  Tensor index = target;
  std::optional<Tensor> keep;  // target != ignore_index
  if (n.has_attr("ignore_index")) {
    CARVE_ASSIGN_OR_RETURN(int64_t ignore, n.attr_int("ignore_index"));
    CARVE_ASSIGN_OR_RETURN(keep, n.op(OpKind::kNotEqual, {target, n.constant_ints(it, {}, {ignore})}));
    // An ignored target may be any value: gather at 0 instead.
    CARVE_ASSIGN_OR_RETURN(index, n.op(OpKind::kWhere, {*keep, target, n.constant_ints(it, {}, {0})}));
  }
  std::vector<int64_t> column = td;  // [N, 1, d...]: the class axis of x
  column.insert(column.begin() + 1, 1);
  CARVE_ASSIGN_OR_RETURN(Tensor at, n.op(OpKind::kReshape, {index}, {{"shape", column}}));
  CARVE_ASSIGN_OR_RETURN(Tensor picked, n.op(OpKind::kGatherElements, {x, at}, {{"axis", int64_t{1}}}));
  CARVE_ASSIGN_OR_RETURN(picked, n.op(OpKind::kReshape, {picked}, {{"shape", td}}));
  CARVE_ASSIGN_OR_RETURN(Tensor loss, n.op(OpKind::kNeg, {picked}));
  std::optional<Tensor> w;  // the weight applied to each element, when not all 1
  if (weight) {
    if (weight->type.shape != ir::Shape{xd[1]})
      return n.invalid(fmt::format("weight {} (needs [{}])", weight->type.shape.to_string(), xd[1]));
    CARVE_ASSIGN_OR_RETURN(w, n.op(OpKind::kGather, {*weight, index}, {{"axis", int64_t{0}}}));
    if (keep) {
      CARVE_ASSIGN_OR_RETURN(w, n.op(OpKind::kWhere, {*keep, *w, n.constant_doubles(dt, {}, {0.0})}));
    }
  } else if (keep) {
    CARVE_ASSIGN_OR_RETURN(w, n.op(OpKind::kCast, {*keep}, {{"to", ir::dtype_name(dt)}}));
  }
  if (w) {
    CARVE_ASSIGN_OR_RETURN(loss, n.op(OpKind::kMul, {loss, *w}));
  }
  if (reduction == "none") return loss;
  ir::Attrs all{{"keepdims", int64_t{0}}};
  if (reduction == "mean" && !w) return n.op(OpKind::kReduceMean, {loss}, all);
  CARVE_ASSIGN_OR_RETURN(Tensor sum, n.op(OpKind::kReduceSum, {loss}, all));
  if (reduction == "sum") return sum;
  CARVE_ASSIGN_OR_RETURN(Tensor total, n.op(OpKind::kReduceSum, {*w}, all));
  return n.op(OpKind::kDiv, {sum, total});
}

Result<std::optional<Tensor>> optional_input(const NodeContext& n, int i) {
  if (!n.has_input(i)) return std::optional<Tensor>();
  CARVE_ASSIGN_OR_RETURN(Tensor t, n.input(i));
  return std::optional<Tensor>(t);
}

Status lower_nll(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor target, n.input(1));
  CARVE_ASSIGN_OR_RETURN(std::optional<Tensor> weight, optional_input(n, 2));
  CARVE_ASSIGN_OR_RETURN(Tensor y, nll(n, x, target, weight));
  return n.set_output(0, y);
}

Status lower_sce(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor scores, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor labels, n.input(1));
  CARVE_ASSIGN_OR_RETURN(std::optional<Tensor> weight, optional_input(n, 2));
  if (scores.type.shape.rank() < 2) return n.invalid(fmt::format("scores {} (needs [N, C, d...])", scores.type.shape.to_string()));
  CARVE_ASSIGN_OR_RETURN(Tensor p, n.op(OpKind::kSoftmax, {scores}, {{"axis", int64_t{1}}}));
  CARVE_ASSIGN_OR_RETURN(Tensor log_prob, n.op(OpKind::kLog, {p}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, nll(n, log_prob, labels, weight));
  CARVE_RETURN_IF_ERROR(n.set_output(0, y));
  if (n.output_used(1)) return n.set_output(1, log_prob);
  return Status();
}

}  // namespace

void register_loss_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["NegativeLogLikelihoodLoss"] = {lower_nll, {"ignore_index", "reduction"}};
  t["SoftmaxCrossEntropyLoss"] = {lower_sce, {"ignore_index", "reduction"}};
}

}  // namespace carve::onnx::detail
