// Indexing ONNX operators: GatherND, ScatterND, ScatterElements (and the deprecated
// Scatter, its opset 9-10 name) and MaxUnpool onto scatter_nd, TopK, Compress (a known
// condition: a gather), ReverseSequence (a gather_elements), and Einsum lowered onto
// transpose/reshape/slice/reduce_sum/matmul.
//
// Known indices are checked here, so a bad one names the node at import; at run time the
// reference reports it and the kernels read zeros (GatherND) or skip the update (Scatter*).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::DType;
using ir::OpKind;

// Every index row of known `indices` [..., k] against dims [first, first + k) of `data`.
Status check_known_rows(const NodeContext& n, const Tensor& indices, const ir::Shape& data, int64_t first) {
  if (!indices.is_known()) return Status();
  const int64_t k = indices.type.shape[indices.type.shape.rank() - 1];
  if (k < 1 || first + k > data.rank()) return Status();  // inference names the shapes
  const std::vector<int64_t> values = to_int64s(indices);
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t extent = data[static_cast<int>(first + static_cast<int64_t>(i) % k)];
    if (values[i] < -extent || values[i] >= extent) {
      return n.error(ErrorCode::kOutOfBounds, fmt::format("index {} outside [-{}, {})", values[i], extent, extent));
    }
  }
  return Status();
}

Status lower_gather_nd(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor data, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor indices, n.input(1));
  CARVE_ASSIGN_OR_RETURN(int64_t batch_dims, n.attr_int("batch_dims", 0));
  if (indices.type.shape.rank() < 1) return n.invalid("indices must have rank >= 1");
  CARVE_RETURN_IF_ERROR(check_known_rows(n, indices, data.type.shape, batch_dims));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kGatherNd, {data, indices}, {{"batch_dims", batch_dims}}));
  return n.set_output(0, y);
}

Result<std::string> reduction_attr(const NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(std::string reduction, n.attr_string("reduction", std::string("none")));
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min") {
    return n.invalid(fmt::format("reduction '{}' is not one of none, add, mul, max, min", reduction));
  }
  return reduction;
}

Status lower_scatter_nd(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor data, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor indices, n.input(1));
  CARVE_ASSIGN_OR_RETURN(Tensor updates, n.input(2));
  CARVE_ASSIGN_OR_RETURN(std::string reduction, reduction_attr(n));
  if (indices.type.shape.rank() < 1) return n.invalid("indices must have rank >= 1");
  CARVE_RETURN_IF_ERROR(check_known_rows(n, indices, data.type.shape, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kScatterNd, {data, indices, updates}, {{"reduction", reduction}}));
  return n.set_output(0, y);
}

// ScatterElements (and Scatter): element i of updates goes to data[i with i[axis] =
// indices[i]]. Lowered onto scatter_nd with the full coordinates of every element: the
// index itself along the axis, constant iotas along the other dims (built here).
Status lower_scatter_elements(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor data, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor indices, n.input(1));
  CARVE_ASSIGN_OR_RETURN(Tensor updates, n.input(2));
  CARVE_ASSIGN_OR_RETURN(std::string reduction, reduction_attr(n));
  const ir::Shape& ds = data.type.shape;
  const ir::Shape& is = indices.type.shape;
  const int rank = ds.rank();
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw_axis, rank));
  if (indices.type.dtype != DType::kI32 && indices.type.dtype != DType::kI64)
    return n.invalid("indices must be int32 or int64");
  if (is.rank() != rank || updates.type.shape != is) {
    return n.invalid(fmt::format("indices {} and updates {} must have one shape, of data {}'s rank", is.to_string(),
                                 updates.type.shape.to_string(), ds.to_string()));
  }
  for (int d = 0; d < rank; ++d) {
    if (d != axis && is[d] > ds[d]) {
      return n.invalid(fmt::format("indices {} exceed data {} in dim {} (only axis {} is indexed)", is.to_string(),
                                   ds.to_string(), d, axis));
    }
  }
  if (indices.is_known()) {
    const int64_t extent = ds[static_cast<int>(axis)];
    for (int64_t i : to_int64s(indices)) {
      if (i < -extent || i >= extent) return n.error(ErrorCode::kOutOfBounds, fmt::format("index {} outside [-{}, {})", i, extent, extent));
    }
  }
  std::vector<int64_t> column = is.dims();
  column.push_back(1);
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{DType::kI64, ir::Shape(column)}));  // per coordinate
  const int64_t count = *is.num_elements();
  std::vector<Tensor> coords;
  for (int d = 0; d < rank; ++d) {
    if (d == axis) {
      Tensor k = indices;
      if (k.type.dtype != DType::kI64) {
        CARVE_ASSIGN_OR_RETURN(k, n.op(OpKind::kCast, {k}, {{"to", std::string(ir::dtype_name(DType::kI64))}}));
      }
      CARVE_ASSIGN_OR_RETURN(k, n.op(OpKind::kReshape, {k}, {{"shape", column}}));
      coords.push_back(k);
      continue;
    }
    const int64_t inner = *ir::Shape(std::vector<int64_t>(is.dims().begin() + d + 1, is.dims().end())).num_elements();
    std::vector<int64_t> iota(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) iota[static_cast<size_t>(i)] = (i / inner) % is[d];
    coords.push_back(n.constant_ints(DType::kI64, ir::Shape(column), iota));
  }
  Tensor all = coords[0];
  if (coords.size() > 1) {
    CARVE_ASSIGN_OR_RETURN(all, n.op(OpKind::kConcat, coords, {{"axis", int64_t{rank}}}));
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kScatterNd, {data, all, updates}, {{"reduction", reduction}}));
  return n.set_output(0, y);
}

// TopK: k from the attribute (opset 1) or input 1 (10+), which must be known at import
// (onnx::Model supplies a value computed from graph inputs). sorted=0 allows any order;
// carve always returns them sorted.
Status lower_top_k(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  int64_t k = 0;
  if (n.opset() < 10) {
    if (n.num_inputs() != 1) return n.invalid("opsets before 10 take one input (k is an attribute)");
    CARVE_ASSIGN_OR_RETURN(k, n.attr_int("k"));
  } else {
    if (!n.has_input(1)) return n.invalid("input 1 (K) is required from opset 10");
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> kv, n.const_ints(1, "K"));
    if (kv.size() != 1) return n.invalid(fmt::format("K must hold one element, has {}", kv.size()));
    k = kv[0];
  }
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis", -1));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw_axis, x.type.shape.rank()));
  CARVE_ASSIGN_OR_RETURN(int64_t largest, n.attr_int("largest", 1));
  CARVE_RETURN_IF_ERROR(n.attr_int("sorted", 1).status());
  const int64_t extent = x.type.shape[static_cast<int>(axis)];
  if (k < 0 || k > extent) return n.invalid(fmt::format("K {} outside [0, {}] (axis {})", k, extent, axis));
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                         n.op_n(OpKind::kTopK, {x}, {{"axis", axis}, {"k", k}, {"largest", int64_t{largest != 0}}}));
  CARVE_RETURN_IF_ERROR(n.set_output(0, outs[0]));
  if (n.num_outputs() > 1) return n.set_output(1, outs[1]);
  return Status();
}

// Compress: the slices along `axis` (or the elements of the flattened input) whose
// condition is true. The condition must be known at import (onnx::Model supplies one
// computed from graph inputs), which fixes the output size; then it is a gather.
Status lower_compress(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor condition, n.known_input(1, "condition"));
  if (condition.type.shape.rank() != 1) return n.invalid(fmt::format("condition {} must be 1-D", condition.type.shape.to_string()));
  const std::vector<int64_t> keep = to_int64s(condition);
  int64_t axis = 0;
  if (n.has_attr("axis")) {
    CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis"));
    CARVE_ASSIGN_OR_RETURN(axis, normalize_axis(n, raw_axis, x.type.shape.rank()));
  } else {
    CARVE_ASSIGN_OR_RETURN(int64_t count, x.type.shape.num_elements());
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{count}}}));
  }
  const int64_t extent = x.type.shape[static_cast<int>(axis)];
  if (static_cast<int64_t>(keep.size()) > extent) {
    return n.invalid(fmt::format("condition has {} entries, axis {} only {}", keep.size(), axis, extent));
  }
  std::vector<int64_t> picked;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] != 0) picked.push_back(static_cast<int64_t>(i));
  }
  Tensor indices = n.constant_ints(DType::kI64, ir::Shape{static_cast<int64_t>(picked.size())}, picked);
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kGather, {x, indices}, {{"axis", axis}}));
  return n.set_output(0, y);
}

// MaxUnpool: zeros of the unpooled shape with X's values at the flat positions in I (as
// MaxPool's Indices give them): a scatter_nd into the flattened output.
Status lower_max_unpool(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor indices, n.input(1));
  const ir::Shape& xs = x.type.shape;
  const int spatial = xs.rank() - 2;
  if (spatial < 1) return n.invalid(fmt::format("input {} needs rank >= 3", xs.to_string()));
  if (indices.type.shape != xs || indices.type.dtype != DType::kI64) {
    return n.invalid(fmt::format("I {} must be int64 of X's shape {}", indices.type.to_string(), xs.to_string()));
  }
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, n.attr_ints("kernel_shape"));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> strides, n.attr_ints("strides", std::vector<int64_t>(static_cast<size_t>(spatial), 1)));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, n.attr_ints("pads", std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0)));
  if (static_cast<int>(kernel.size()) != spatial || static_cast<int>(strides.size()) != spatial ||
      static_cast<int>(pads.size()) != 2 * spatial) {
    return n.invalid(fmt::format("kernel_shape, strides and pads need {} values per spatial axis", spatial));
  }
  std::vector<int64_t> out = {xs[0], xs[1]};
  constexpr int64_t kMax = int64_t{1} << 31;  // keeps the output size arithmetic in int64
  for (int64_t v : kernel) {
    if (v < 1 || v > kMax) return n.invalid(fmt::format("kernel_shape entry {} outside [1, 2^31]", v));
  }
  for (int64_t v : strides) {
    if (v < 1 || v > kMax) return n.invalid(fmt::format("strides entry {} outside [1, 2^31]", v));
  }
  for (int64_t v : pads) {
    if (v < 0 || v > kMax) return n.invalid(fmt::format("pads entry {} outside [0, 2^31]", v));
  }
  for (int d = 0; d < spatial; ++d) {
    const auto i = static_cast<size_t>(d);
    int64_t span = 0;
    if (!ir::checked_mul(xs[d + 2] - 1, strides[i], &span)) return n.invalid("the output size overflows int64");
    if (!ir::checked_add(span, kernel[i], &span)) return n.invalid("the output size overflows int64");
    out.push_back(span - pads[i] - pads[i + static_cast<size_t>(spatial)]);
  }
  if (n.has_input(2)) {
    // Another output_shape places the values ambiguously: ONNX's own example reads I as
    // coordinates in the default shape, ONNX Runtime (and PyTorch) as flat indices into
    // output_shape. Only the shape both agree on is imported.
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> given, n.const_ints(2, "output_shape"));
    if (given != out) {
      return n.unsupported(fmt::format("output_shape [{}] other than the default [{}] (ONNX's example and ONNX Runtime "
                                       "disagree on where the values go)", fmt::join(given, ", "), fmt::join(out, ", ")));
    }
  }
  const ir::TensorType out_type{x.type.dtype, ir::Shape(out)};
  CARVE_RETURN_IF_ERROR(out_type.validate());
  CARVE_RETURN_IF_ERROR(n.check_folded(out_type, sizeof(double)));
  const int64_t total = *out_type.shape.num_elements(), count = *xs.num_elements();
  Tensor zeros = n.constant_doubles(x.type.dtype, ir::Shape{total}, std::vector<double>(static_cast<size_t>(total), 0.0));
  CARVE_ASSIGN_OR_RETURN(Tensor at, n.op(OpKind::kReshape, {indices}, {{"shape", std::vector<int64_t>{count, 1}}}));
  CARVE_RETURN_IF_ERROR(check_known_rows(n, at, zeros.type.shape, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor values, n.op(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{count}}}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kScatterNd, {zeros, at, values}, {{"reduction", std::string("none")}}));
  CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kReshape, {y}, {{"shape", out}}));
  return n.set_output(0, y);
}

// ReverseSequence: along time_axis, batch entry b has its first lens[b] steps reversed:
// gather_elements with index (t < len ? len - 1 - t : t), built in the graph from lens
// and broadcast to the input's shape. A len above the time extent makes an index out of
// range (the reference reports it; the kernels read zeros, as gather_elements does).
Status lower_reverse_sequence(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor lens, n.input(1));
  const ir::Shape& xs = x.type.shape;
  CARVE_ASSIGN_OR_RETURN(int64_t time_axis, n.attr_int("time_axis", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t batch_axis, n.attr_int("batch_axis", 1));
  if (xs.rank() < 2) return n.invalid(fmt::format("input {} needs rank >= 2", xs.to_string()));
  if (time_axis < 0 || time_axis > 1 || batch_axis < 0 || batch_axis > 1 || time_axis == batch_axis) {
    return n.invalid(fmt::format("time_axis {} and batch_axis {} must be 0 and 1 in some order", time_axis, batch_axis));
  }
  const int64_t steps = xs[static_cast<int>(time_axis)], batch = xs[static_cast<int>(batch_axis)];
  if (lens.type.shape != ir::Shape{batch} || (lens.type.dtype != DType::kI64 && lens.type.dtype != DType::kI32)) {
    return n.invalid(fmt::format("sequence_lens {} must be int64 [{}]", lens.type.to_string(), batch));
  }
  if (lens.is_known()) {
    for (int64_t len : to_int64s(lens)) {
      if (len < 0 || len > steps) return n.error(ErrorCode::kOutOfBounds, fmt::format("sequence length {} outside [0, {}]", len, steps));
    }
  }
  std::vector<int64_t> time_dims(static_cast<size_t>(xs.rank()), 1), batch_dims = time_dims;
  time_dims[static_cast<size_t>(time_axis)] = steps;
  batch_dims[static_cast<size_t>(batch_axis)] = batch;
  std::vector<int64_t> iota(static_cast<size_t>(steps));
  std::iota(iota.begin(), iota.end(), int64_t{0});
  Tensor t = n.constant_ints(DType::kI64, ir::Shape(time_dims), iota);
  Tensor len = lens;
  if (len.type.dtype != DType::kI64) {
    CARVE_ASSIGN_OR_RETURN(len, n.op(OpKind::kCast, {len}, {{"to", std::string(ir::dtype_name(DType::kI64))}}));
  }
  CARVE_ASSIGN_OR_RETURN(len, n.op(OpKind::kReshape, {len}, {{"shape", batch_dims}}));
  CARVE_ASSIGN_OR_RETURN(Tensor inside, n.op(OpKind::kLess, {t, len}));
  CARVE_ASSIGN_OR_RETURN(Tensor last, n.op(OpKind::kSub, {len, n.constant_ints(DType::kI64, ir::Shape{}, {1})}));
  CARVE_ASSIGN_OR_RETURN(Tensor reversed, n.op(OpKind::kSub, {last, t}));
  CARVE_ASSIGN_OR_RETURN(Tensor index, n.op(OpKind::kWhere, {inside, reversed, t}));
  // Broadcast to x's shape (gather_elements takes indices of data's rank and extents).
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{DType::kBool, xs}, sizeof(int64_t)));  // built from int64s
  const int64_t count = *xs.num_elements();
  Tensor everywhere = n.constant_ints(DType::kBool, xs, std::vector<int64_t>(static_cast<size_t>(count), 1));
  CARVE_ASSIGN_OR_RETURN(index, n.op(OpKind::kWhere, {everywhere, index, index}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kGatherElements, {x, index}, {{"axis", time_axis}}));
  return n.set_output(0, y);
}

// ---- Einsum ----

// One operand during the lowering: its tensor and one label per dim.
struct Term {
  Tensor t;
  std::vector<int> labels;
};

class Einsum {
 public:
  explicit Einsum(NodeContext& n) : n_(n) {}

  Status lower() {
    CARVE_ASSIGN_OR_RETURN(std::string eq, n_.attr_string("equation"));
    eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> specs;
    for (size_t at = 0;;) {
      const size_t comma = lhs.find(',', at);
      specs.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    if (static_cast<int>(specs.size()) != n_.num_inputs()) {
      return n_.invalid(fmt::format("equation '{}' names {} operands, the node has {} inputs", eq, specs.size(), n_.num_inputs()));
    }
    std::vector<Term> terms;
    int ellipsis = 0;  // dims the ellipsis stands for (the most of any operand)
    for (size_t i = 0; i < specs.size(); ++i) {
      CARVE_ASSIGN_OR_RETURN(Tensor t, n_.input(static_cast<int>(i)));
      if (Result<int64_t> count = t.type.shape.num_elements(); !count.ok() || *count == 0) {
        return n_.unsupported(fmt::format("operand {} {} is empty", i, t.type.shape.to_string()));
      }
      if (specs[i].find("...") != std::string::npos) {
        ellipsis = std::max(ellipsis, t.type.shape.rank() - (static_cast<int>(specs[i].size()) - 3));
      }
      terms.push_back(Term{t, {}});
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      CARVE_ASSIGN_OR_RETURN(terms[i].labels, parse(specs[i], terms[i].t.type.shape.rank(), ellipsis, true));
      for (size_t d = 0; d < terms[i].labels.size(); ++d) {
        const int64_t size = terms[i].t.type.shape[static_cast<int>(d)];
        auto [it, fresh] = sizes_.emplace(terms[i].labels[d], size);
        if (!fresh && it->second != size) {
          return n_.unsupported(fmt::format("label '{}' has sizes {} and {} (broadcasting is not supported)",
                                            name(terms[i].labels[d]), it->second, size));
        }
      }
    }
    std::vector<int> out;
    if (arrow != std::string::npos) {
      CARVE_ASSIGN_OR_RETURN(out, parse(eq.substr(arrow + 2), -1, ellipsis, false));
      for (int l : out) {
        if (!sizes_.contains(l)) return n_.invalid(fmt::format("output label '{}' is in no operand", name(l)));
        if (std::count(out.begin(), out.end(), l) > 1) return n_.invalid(fmt::format("output label '{}' repeats", name(l)));
      }
    } else {  // implicit: the ellipsis dims, then the letters used once, alphabetically
      std::map<int, int> uses;
      for (const Term& t : terms) {
        for (int l : t.labels) ++uses[l];
      }
      for (int e = 0; e < ellipsis; ++e) out.push_back(kEllipsis + e);
      std::vector<int> once;
      for (auto [l, c] : uses) {
        if (l < kEllipsis && c == 1) once.push_back(l);
      }
      std::sort(once.begin(), once.end(), [](int a, int b) { return name(a) < name(b); });
      out.insert(out.end(), once.begin(), once.end());
    }
    for (Term& t : terms) {
      CARVE_RETURN_IF_ERROR(take_diagonals(t));
    }
    Term acc = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) {
      // Labels still needed after this step: the output's and those of later operands.
      std::vector<int> keep = out;
      for (size_t j = i + 1; j < terms.size(); ++j) keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
      CARVE_RETURN_IF_ERROR(sum_out(acc, terms[i].labels, keep));
      CARVE_RETURN_IF_ERROR(sum_out(terms[i], acc.labels, keep));
      CARVE_ASSIGN_OR_RETURN(acc, contract(acc, terms[i], keep));
    }
    CARVE_RETURN_IF_ERROR(sum_out(acc, {}, out));
    std::vector<int64_t> perm;
    for (int l : out) perm.push_back(position(acc.labels, l));
    CARVE_ASSIGN_OR_RETURN(Tensor y, transpose(acc.t, perm));
    return n_.set_output(0, y);
  }

 private:
  static constexpr int kEllipsis = 1000;  // labels of the ellipsis dims: kEllipsis + i

  static std::string name(int label) {
    if (label >= kEllipsis) return fmt::format("...#{}", label - kEllipsis);
    return std::string(1, static_cast<char>(label));
  }
  static int64_t position(const std::vector<int>& labels, int l) {
    return std::find(labels.begin(), labels.end(), l) - labels.begin();
  }

  // Labels of one operand spec (rank -1: the output, whose "..." stands for all of them).
  Result<std::vector<int>> parse(const std::string& spec, int rank, int ellipsis, bool operand) const {
    std::vector<int> labels;
    bool seen = false;
    const int letters = static_cast<int>(spec.size()) - (spec.find("...") != std::string::npos ? 3 : 0);
    for (size_t i = 0; i < spec.size(); ++i) {
      if (spec.compare(i, 3, "...") == 0) {
        if (seen) return n_.invalid(fmt::format("'{}' has two ellipses", spec));
        seen = true;
        const int dims = operand ? rank - letters : ellipsis;
        for (int e = ellipsis - dims; e < ellipsis; ++e) labels.push_back(kEllipsis + e);
        i += 2;
        continue;
      }
      const char c = spec[i];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
        return n_.invalid(fmt::format("'{}' has '{}', not a letter or ...", spec, c));
      }
      labels.push_back(c);
    }
    if (operand && static_cast<int>(labels.size()) != rank) {
      return n_.invalid(fmt::format("'{}' does not match an operand of rank {}", spec, rank));
    }
    return labels;
  }

  Result<Tensor> transpose(const Tensor& t, const std::vector<int64_t>& perm) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
    if (identity) return t;
    return n_.op(OpKind::kTranspose, {t}, {{"perm", perm}});
  }
  Result<Tensor> reshape(const Tensor& t, std::vector<int64_t> dims) {
    if (t.type.shape.dims() == dims) return t;
    return n_.op(OpKind::kReshape, {t}, {{"shape", std::move(dims)}});
  }
  int64_t size_of(const std::vector<int>& labels) const {
    int64_t p = 1;
    for (int l : labels) p *= sizes_.at(l);
    return p;
  }

  // A label twice in one operand keeps the diagonal: the pair moved last and merged into
  // one dim of n*n, then a slice with step n + 1.
  Status take_diagonals(Term& term) {
    for (size_t p = 0; p < term.labels.size(); ++p) {
      const auto q = static_cast<size_t>(std::find(term.labels.begin() + static_cast<std::ptrdiff_t>(p) + 1, term.labels.end(),
                                                   term.labels[p]) - term.labels.begin());
      if (q == term.labels.size()) continue;
      const int label = term.labels[p];
      std::vector<int64_t> perm;
      std::vector<int> rest;
      for (size_t d = 0; d < term.labels.size(); ++d) {
        if (d != p && d != q) {
          perm.push_back(static_cast<int64_t>(d));
          rest.push_back(term.labels[d]);
        }
      }
      perm.push_back(static_cast<int64_t>(p));
      perm.push_back(static_cast<int64_t>(q));
      const int64_t size = sizes_.at(label);
      CARVE_ASSIGN_OR_RETURN(Tensor t, transpose(term.t, perm));
      std::vector<int64_t> dims;
      for (int l : rest) dims.push_back(sizes_.at(l));
      dims.push_back(size * size);
      CARVE_ASSIGN_OR_RETURN(t, reshape(t, dims));
      CARVE_ASSIGN_OR_RETURN(t, n_.op(OpKind::kSlice, {t}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{size * size}},
                                                            {"axes", std::vector<int64_t>{static_cast<int64_t>(rest.size())}},
                                                            {"steps", std::vector<int64_t>{size + 1}}}));
      rest.push_back(label);
      term = Term{t, rest};
      p = static_cast<size_t>(-1);  // start over: the labels moved
    }
    return Status();
  }

  // Sums `term` over its labels in neither `keep` nor `also` (no other operand needs them).
  Status sum_out(Term& term, const std::vector<int>& also, const std::vector<int>& keep) {
    std::vector<int64_t> axes;
    std::vector<int> rest;
    for (size_t d = 0; d < term.labels.size(); ++d) {
      const int l = term.labels[d];
      const bool kept = std::count(keep.begin(), keep.end(), l) + std::count(also.begin(), also.end(), l) > 0;
      if (kept) {
        rest.push_back(l);
      } else {
        axes.push_back(static_cast<int64_t>(d));
      }
    }
    if (axes.empty()) return Status();
    CARVE_ASSIGN_OR_RETURN(Tensor t, n_.op(OpKind::kReduceSum, {term.t}, {{"axes", axes}, {"keepdims", int64_t{0}}}));
    term = Term{t, rest};
    return Status();
  }

  // a x b over their shared labels: the kept ones batch a matmul, the others are summed
  // by it; a's own labels are its rows, b's its columns.
  Result<Term> contract(const Term& a, const Term& b, const std::vector<int>& keep) {
    std::vector<int> batch, left, inner, right;
    for (int l : a.labels) {
      const bool shared = std::count(b.labels.begin(), b.labels.end(), l) > 0;
      const bool kept = std::count(keep.begin(), keep.end(), l) > 0;
      (shared ? (kept ? batch : inner) : left).push_back(l);
    }
    for (int l : b.labels) {
      if (std::count(a.labels.begin(), a.labels.end(), l) == 0) right.push_back(l);
    }
    auto arrange = [&](const Term& t, std::initializer_list<const std::vector<int>*> groups) -> Result<Tensor> {
      std::vector<int64_t> perm, dims;
      for (const std::vector<int>* g : groups) {
        for (int l : *g) perm.push_back(position(t.labels, l));
        dims.push_back(size_of(*g));
      }
      CARVE_ASSIGN_OR_RETURN(Tensor x, transpose(t.t, perm));
      return reshape(x, dims);
    };
    CARVE_ASSIGN_OR_RETURN(Tensor ma, arrange(a, {&batch, &left, &inner}));
    CARVE_ASSIGN_OR_RETURN(Tensor mb, arrange(b, {&batch, &inner, &right}));
    CARVE_ASSIGN_OR_RETURN(Tensor y, n_.op(OpKind::kMatmul, {ma, mb}));
    std::vector<int> labels = batch;
    labels.insert(labels.end(), left.begin(), left.end());
    labels.insert(labels.end(), right.begin(), right.end());
    std::vector<int64_t> dims;
    for (int l : labels) dims.push_back(sizes_.at(l));
    CARVE_ASSIGN_OR_RETURN(y, reshape(y, dims));
    return Term{y, labels};
  }

  NodeContext& n_;
  std::map<int, int64_t> sizes_;
};

Status lower_einsum(NodeContext& n) { return Einsum(n).lower(); }

}  // namespace

void register_index_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["GatherND"] = {lower_gather_nd, {"batch_dims"}};
  t["ScatterND"] = {lower_scatter_nd, {"reduction"}};
  t["ScatterElements"] = {lower_scatter_elements, {"axis", "reduction"}};
  t["Scatter"] = {lower_scatter_elements, {"axis"}};
  t["TopK"] = {lower_top_k, {"axis", "k", "largest", "sorted"}};
  t["Einsum"] = {lower_einsum, {"equation"}};
  t["Compress"] = {lower_compress, {"axis"}};
  t["MaxUnpool"] = {lower_max_unpool, {"kernel_shape", "pads", "strides"}};
  t["ReverseSequence"] = {lower_reverse_sequence, {"batch_axis", "time_axis"}};
}

}  // namespace carve::onnx::detail
