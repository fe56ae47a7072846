// Reductions and normalisations: reduce_sum/mean/max, arg_max/min, softmax, layer_norm,
// global_avg_pool, batch_norm. Arithmetic runs in the compute type (f16/bf16 in float,
// f32, f64; reduce_sum/max also on integers, wrapping).
//
//  - reduce_*: the input dims are merged into alternating kept/reduced runs
//    (tiling::ReduceShape). If the innermost run is reduced, each output element reduces
//    a contiguous run with W-lane vector accumulators (+ scalar tail), outer reduced runs
//    as strided loops; otherwise each output row (innermost kept run) is computed W
//    outputs at a time, looping over every reduced run with vector loads.
//  - arg_max/min: one output element per work unit, a scalar loop along the axis keeping
//    the best value and its index (the reference's NaN and tie rules).
//  - softmax: rows (inner == 1) in three vectorised passes (max, sum of exp, exp/sum);
//    with inner > 1, W neighbouring columns at once. exp is a polynomial for x <= 0
//    (util::exp_nonpos_f32; doubles util::exp).
//  - layer_norm: per row, vectorised mean and (biased) variance, then the affine map.
//  - batch_norm / global_avg_pool: per (image, channel) plane, vectorised.
#include <llvm/IR/Intrinsics.h>

#include "carve/jit/tiles.h"
#include "emit_util.h"

namespace carve::jit::detail {
namespace {

using llvm::Type;
using llvm::Value;
using namespace util;

int lanes_for(EmitContext& ec, ir::DType dtype) {
  if (dtype == ir::DType::kF64 || dtype == ir::DType::kI64) return std::max(2, ec.vector_width_f32 / 2);
  return ec.vector_width_f32;
}

// What every emitter of this family starts from: input 0 and output 0, their dtype, its
// compute type and the vector lanes used for it.
struct FamilyIO {
  ir::DType dtype;
  Value* X;
  Value* Y;
  Type* ct;
  int lanes;
};
FamilyIO family_io(EmitContext& ec, const ir::Node& node) {
  const ir::DType dtype = ec.graph.value(node.inputs[0]).type.dtype;
  return {dtype, operand_ptr(ec, node.inputs[0]), operand_ptr(ec, node.outputs[0]),
          compute_type(ec, dtype), lanes_for(ec, dtype)};
}

// body(unit) for each work unit of `node` (tiling::unit_tiles_for) in the call's tiles.
void for_node_units(EmitContext& ec, const ir::Node& node, const std::function<void(Value* unit)>& body) {
  for_units(ec, tiling::unit_tiles_for(ec.graph, node).units, [&](Value*, Value* u) { body(u); });
}

Value* fmax_nan(EmitContext& ec, Value* a, Value* b) {
  return util::max(ec, ir::DType::kF32, a, b);
}

// Softmax's e^(x - max), x - max <= 0: the cheaper non-positive exp in float.
Value* exp_shifted(EmitContext& ec, Value* d) {
  return d->getType()->getScalarType()->isDoubleTy() ? util::exp(ec, d) : util::exp_nonpos_f32(ec, d);
}

// Folds f over elements [0, n) of a contiguous run at base (vector body + scalar tail).
// f folds an element (or vector) into the accumulator, merge combines two partial
// results; `identity` is f's identity. Returns the scalar result. `chains` > 1 vector
// accumulators (merged at the end) hide f's latency; only for an f whose result does
// not depend on the order (max), since the grouping changes.
Value* fold_run(EmitContext& ec, ir::DType dtype, Value* base, Value* start, int64_t n, int lanes,
                Value* identity,
                const std::function<Value*(Value* acc, Value* x)>& f,
                const std::function<Value*(Value*, Value*)>& merge, int chains = 1) {
  auto& b = ec.b;
  int64_t nv = n / lanes * lanes;
  const int64_t step = static_cast<int64_t>(lanes) * chains;
  const int64_t nc = chains > 1 ? n / step * step : 0;  // covered by the chains
  Value* s = identity;
  if (nv > 0) {
    std::vector<Value*> init(static_cast<size_t>(chains), splat(ec, lanes, identity));
    std::vector<Value*> acc = init;
    if (nc > 0) {
      acc = for_range_carry(ec, i64c(ec, 0), i64c(ec, nc), step, init, [&](Value* j, const std::vector<Value*>& a) {
        std::vector<Value*> out(a.size());
        for (int c = 0; c < chains; ++c) {
          Value* at = b.CreateAdd(start, b.CreateAdd(j, i64c(ec, c * lanes)));
          out[static_cast<size_t>(c)] = f(a[static_cast<size_t>(c)], load_n(ec, dtype, base, at, lanes));
        }
        return out;
      }, "fc");
      for (int c = 1; c < chains; ++c) acc[0] = merge(acc[0], acc[static_cast<size_t>(c)]);
    }
    if (nc < nv) {
      acc = for_range_carry(ec, i64c(ec, nc), i64c(ec, nv), lanes, {acc[0]}, [&](Value* j, const std::vector<Value*>& a) {
        return std::vector<Value*>{f(a[0], load_n(ec, dtype, base, b.CreateAdd(start, j), lanes))};
      }, "fv");
    }
    s = horizontal(ec, acc[0], merge);
  }
  if (nv < n) {
    auto acc = for_range_carry(ec, i64c(ec, nv), i64c(ec, n), 1, {s}, [&](Value* j, const std::vector<Value*>& a) {
      return std::vector<Value*>{f(a[0], load_n(ec, dtype, base, b.CreateAdd(start, j), 0))};
    }, "fs");
    s = acc[0];
  }
  return s;
}

// Applies g to each element of a contiguous run (vector body + scalar tail): dst[j] = g(x[j], j).
void map_run(EmitContext& ec, int64_t n, int lanes,
             const std::function<void(Value* j, int lanes)>& g) {
  int64_t nv = n / lanes * lanes;
  if (nv > 0) for_range(ec, i64c(ec, 0), i64c(ec, nv), lanes, [&](Value* j) { g(j, lanes); }, "mv");
  if (nv < n) for_range(ec, i64c(ec, nv), i64c(ec, n), 1, [&](Value* j) { g(j, 0); }, "ms");
}

// Y[base + j] = f(X[base + j], j, lanes) for j in [0, n) (vector body + scalar tail).
void map_xy(EmitContext& ec, const ir::Node& node, Value* base, int64_t n,
            const std::function<Value*(Value* x, Value* j, int lanes)>& f) {
  const FamilyIO io = family_io(ec, node);
  map_run(ec, n, io.lanes, [&](Value* j, int ln) {
    Value* idx = ec.b.CreateAdd(base, j);
    store_n(ec, io.dtype, io.Y, idx, f(load_n(ec, io.dtype, io.X, idx, ln), j, ln));
  });
}

Status emit_reduce(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::Graph& g = ec.graph;
  const auto [dtype, X, Y, ct, lanes] = family_io(ec, node);
  const ir::OpKind op = node.op;
  const tiling::ReduceShape rs = tiling::reduce_shape(g, node);
  const bool fp = is_fp(dtype);
  const bool is_max = op == ir::OpKind::kReduceMax;
  const bool is_prod = op == ir::OpKind::kReduceProd;
  auto f = [&](Value* acc, Value* x) -> Value* {
    if (is_prod) return mul(ec, acc, x);
    if (!is_max) return add(ec, acc, x);
    return fp ? fmax_nan(ec, acc, x) : max(ec, dtype, acc, x);
  };
  Value* identity = is_max ? lowest(ec, dtype, ct) : is_prod ? (fp ? fpc(ct, 1.0) : intc(ct, 1)) : zero(ct);
  auto finish = [&](Value* v) -> Value* {
    if (op != ir::OpKind::kReduceMean) return v;
    return b.CreateFDiv(v, fpc(v->getType(), static_cast<double>(rs.reduced_elements)));
  };
  // Strides of the merged dims.
  const size_t nd = rs.dims.size();
  std::vector<int64_t> stride(nd, 1);
  for (size_t i = nd - 1; i-- > 0;) stride[i] = stride[i + 1] * rs.dims[i + 1];
  std::vector<size_t> kept, red;
  for (size_t i = 0; i < nd; ++i) (rs.reduced[i] ? red : kept).push_back(i);

  // Offset of output index `o` over the kept dims listed in `dims_idx`.
  auto kept_offset = [&](Value* o, const std::vector<size_t>& dims_idx) {
    Value* off = i64c(ec, 0);
    Value* rem = o;
    for (size_t q = dims_idx.size(); q-- > 0;) {
      size_t d = dims_idx[q];
      Value* coord = b.CreateURem(rem, i64c(ec, rs.dims[d]));
      rem = b.CreateUDiv(rem, i64c(ec, rs.dims[d]));
      off = b.CreateAdd(off, b.CreateMul(coord, i64c(ec, stride[d])));
    }
    return off;
  };
  // Nested loops over the dims loop_dims[from..], carrying `acc`; leaf(offset, acc).
  using Leaf = std::function<Value*(Value*, Value*)>;
  std::function<Value*(const std::vector<size_t>&, size_t, Value*, Value*, const Leaf&)> nest =
      [&](const std::vector<size_t>& loop_dims, size_t from, Value* off, Value* acc, const Leaf& leaf) -> Value* {
    if (from == loop_dims.size()) return leaf(off, acc);
    size_t d = loop_dims[from];
    auto r = for_range_carry(ec, i64c(ec, 0), i64c(ec, rs.dims[d]), 1, {acc},
                             [&](Value* i, const std::vector<Value*>& a) {
      return std::vector<Value*>{
          nest(loop_dims, from + 1, b.CreateAdd(off, b.CreateMul(i, i64c(ec, stride[d]))), a[0], leaf)};
    }, "rd");
    return r[0];
  };

  if (rs.inner_reduced) {
    // Outer reduced runs are looped; the innermost (contiguous) one is folded.
    size_t inner = red.back();
    std::vector<size_t> outer_red(red.begin(), red.end() - 1);
    const int64_t n = rs.dims[inner];
    for_units(ec, rs.units, [&](Value*, Value* o) {
      Value* base = kept_offset(o, kept);
      Value* acc = nest(outer_red, 0, base, identity, [&](Value* off, Value* a) {
        return f(a, fold_run(ec, dtype, X, off, n, lanes, identity, f, f));
      });
      store_elem(ec, dtype, Y, o, finish(acc));
    });
  } else {
    const int64_t L = rs.dims.back();
    std::vector<size_t> outer_kept(kept.begin(), kept.end() - 1);
    for_units(ec, rs.units, [&](Value*, Value* r) {
      Value* base = kept_offset(r, outer_kept);
      Value* ybase = b.CreateMul(r, i64c(ec, L));
      map_run(ec, L, lanes, [&](Value* j, int ln) {
        Value* init = ln == 0 ? identity : splat(ec, ln, identity);
        Value* acc = nest(red, 0, b.CreateAdd(base, j), init, [&](Value* off, Value* a) {
          return f(a, load_n(ec, dtype, X, off, ln));
        });
        store_n(ec, dtype, Y, b.CreateAdd(ybase, j), finish(acc));
      });
    });
  }
  return Status();
}

// Whether x replaces `best` (seen at a lower index): a NaN beats every number; among NaNs
// and equal values the first wins, or the last with select_last_index.
Value* arg_takes(EmitContext& ec, ir::DType dtype, bool is_max, bool last, Value* x, Value* best) {
  auto& b = ec.b;
  if (is_fp(dtype)) {
    Value* beats = is_max ? (last ? b.CreateFCmpOGE(x, best) : b.CreateFCmpOGT(x, best))
                          : (last ? b.CreateFCmpOLE(x, best) : b.CreateFCmpOLT(x, best));
    Value* x_nan = b.CreateFCmpUNO(x, x);
    return b.CreateOr(beats, last ? x_nan : b.CreateAnd(x_nan, b.CreateFCmpORD(best, best)));
  }
  const bool s = is_signed_int(dtype);
  if (is_max) return last ? (s ? b.CreateICmpSGE(x, best) : b.CreateICmpUGE(x, best))
                          : (s ? b.CreateICmpSGT(x, best) : b.CreateICmpUGT(x, best));
  return last ? (s ? b.CreateICmpSLE(x, best) : b.CreateICmpULE(x, best))
              : (s ? b.CreateICmpSLT(x, best) : b.CreateICmpULT(x, best));
}

Status emit_arg(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const auto [dtype, X, Y, ct, lanes] = family_io(ec, node);
  const tiling::AxisShape s = tiling::axis_shape(ec.graph, node);
  const bool is_max = node.op == ir::OpKind::kArgMax;
  const bool last = attr_int(node, "select_last_index", 0) != 0;
  for_node_units(ec, node, [&](Value* u) {
    Value* o = b.CreateUDiv(u, i64c(ec, s.inner));
    Value* j = b.CreateURem(u, i64c(ec, s.inner));
    Value* base = b.CreateAdd(b.CreateMul(o, i64c(ec, s.len * s.inner)), j);
    auto r = for_range_carry(ec, i64c(ec, 1), i64c(ec, s.len), 1, {load_elem(ec, dtype, X, base), i64c(ec, 0)},
                             [&](Value* k, const std::vector<Value*>& a) {
      Value* x = load_elem(ec, dtype, X, b.CreateAdd(base, b.CreateMul(k, i64c(ec, s.inner))));
      Value* take = arg_takes(ec, dtype, is_max, last, x, a[0]);
      return std::vector<Value*>{b.CreateSelect(take, x, a[0]), b.CreateSelect(take, k, a[1])};
    }, "ak");
    store_elem(ec, ir::DType::kI64, Y, u, r[1]);
  });
  return Status();
}

Status emit_softmax(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::Graph& g = ec.graph;
  const auto [dtype, X, Y, ct, lanes] = family_io(ec, node);
  const tiling::AxisShape s = tiling::axis_shape(g, node);
  Value* ninf = lowest(ec, dtype, ct);
  auto fmax = [&](Value* a, Value* x) { return fmax_nan(ec, a, x); };
  auto fadd = [&](Value* a, Value* x) { return b.CreateFAdd(a, x); };
  if (s.inner == 1 && (dtype == ir::DType::kF32 || dtype == ir::DType::kF64)) {
    // exp once: the second pass stores e = exp(x - max) in Y while summing, the third
    // scales Y by 1 / sum (a multiply, not a divide per element). Y may be X (in place):
    // each pass reads an element before writing it.
    for_node_units(ec, node, [&](Value* o) {
      Value* base = b.CreateMul(o, i64c(ec, s.len));
      Value* m = fold_run(ec, dtype, X, base, s.len, lanes, ninf, fmax, fmax, 4);
      auto exp_store = [&](Value* j, Value* acc, int ln) {
        Value* idx = b.CreateAdd(base, j);
        Value* e = exp_shifted(ec, b.CreateFSub(load_n(ec, dtype, X, idx, ln), splat_like(ec, m, ln)));
        store_n(ec, dtype, Y, idx, e);
        return b.CreateFAdd(acc, e);
      };
      const int64_t nv = s.len / lanes * lanes;
      Value* sum = zero(ct);
      if (nv > 0) {
        Value* acc = for_range_carry(ec, i64c(ec, 0), i64c(ec, nv), lanes, {splat(ec, lanes, zero(ct))},
                                     [&](Value* j, const std::vector<Value*>& a) {
          return std::vector<Value*>{exp_store(j, a[0], lanes)};
        }, "se")[0];
        sum = horizontal(ec, acc, fadd);
      }
      if (nv < s.len) {
        sum = for_range_carry(ec, i64c(ec, nv), i64c(ec, s.len), 1, {sum},
                              [&](Value* j, const std::vector<Value*>& a) {
          return std::vector<Value*>{exp_store(j, a[0], 0)};
        }, "st")[0];
      }
      Value* inv = b.CreateFDiv(fpc(ct, 1.0), sum);
      map_run(ec, s.len, lanes, [&](Value* j, int ln) {
        Value* idx = b.CreateAdd(base, j);
        store_n(ec, dtype, Y, idx, b.CreateFMul(load_n(ec, dtype, Y, idx, ln), splat_like(ec, inv, ln)));
      });
    });
    return Status();
  }
  if (s.inner == 1) {  // f16/bf16: e is not stored in Y (one more rounding), computed twice
    for_node_units(ec, node, [&](Value* o) {
      Value* base = b.CreateMul(o, i64c(ec, s.len));
      Value* m = fold_run(ec, dtype, X, base, s.len, lanes, ninf, fmax, fmax, 4);
      Value* sum = fold_run(ec, dtype, X, base, s.len, lanes, zero(ct),
                            [&](Value* a, Value* x) {
                              int ln = x->getType()->isVectorTy() ? lanes : 0;
                              return b.CreateFAdd(a, exp_shifted(ec, b.CreateFSub(x, splat_like(ec, m, ln))));
                            }, fadd);
      map_xy(ec, node, base, s.len, [&](Value* x, Value*, int ln) {
        Value* e = exp_shifted(ec, b.CreateFSub(x, splat_like(ec, m, ln)));
        return b.CreateFDiv(e, splat_like(ec, sum, ln));
      });
    });
    return Status();
  }
  for_node_units(ec, node, [&](Value* o) {
    Value* base = b.CreateMul(o, i64c(ec, s.len * s.inner));
    map_run(ec, s.inner, lanes, [&](Value* j, int ln) {
      Value* col = b.CreateAdd(base, j);
      auto at = [&](Value* k) { return b.CreateAdd(col, b.CreateMul(k, i64c(ec, s.inner))); };
      Value* m = for_range_carry(ec, i64c(ec, 0), i64c(ec, s.len), 1, {splat_like(ec, ninf, ln)},
                                 [&](Value* k, const std::vector<Value*>& a) {
        return std::vector<Value*>{fmax_nan(ec, a[0], load_n(ec, dtype, X, at(k), ln))};
      }, "sm")[0];
      Value* sum = for_range_carry(ec, i64c(ec, 0), i64c(ec, s.len), 1, {splat_like(ec, zero(ct), ln)},
                                   [&](Value* k, const std::vector<Value*>& a) {
        return std::vector<Value*>{b.CreateFAdd(a[0], exp_shifted(ec, b.CreateFSub(load_n(ec, dtype, X, at(k), ln), m)))};
      }, "ss")[0];
      for_range(ec, i64c(ec, 0), i64c(ec, s.len), 1, [&](Value* k) {
        Value* e = exp_shifted(ec, b.CreateFSub(load_n(ec, dtype, X, at(k), ln), m));
        store_n(ec, dtype, Y, at(k), b.CreateFDiv(e, sum));
      }, "sw");
    });
  });
  return Status();
}

// 1 / sqrt(var + eps), the normalisations' scale.
Value* inv_std(EmitContext& ec, Type* ct, Value* var, double eps) {
  Value* v = ec.b.CreateFAdd(var, fpc(ct, eps));
  return ec.b.CreateFDiv(fpc(ct, 1.0), ec.b.CreateIntrinsic(llvm::Intrinsic::sqrt, {ct}, {v}));
}

// (x - mean) * inv with scalar mean and inv spread over x's lanes (0 = scalar).
Value* centred(EmitContext& ec, Value* x, Value* mean, Value* inv, int lanes) {
  return ec.b.CreateFMul(ec.b.CreateFSub(x, splat_like(ec, mean, lanes)), splat_like(ec, inv, lanes));
}

// Elements per (image, channel) plane of an NC... tensor.
int64_t plane_size(const ir::Shape& s) {
  int64_t n = 1;
  for (int i = 2; i < s.rank(); ++i) n *= s[i];
  return n;
}

Status emit_layer_norm(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::Graph& g = ec.graph;
  const auto [dtype, X, Y, ct, lanes] = family_io(ec, node);
  const tiling::AxisShape s = tiling::axis_shape(g, node);
  Value* S = operand_ptr(ec, node.inputs[1]);
  Value* Bv = node.inputs.size() > 2 ? operand_ptr(ec, node.inputs[2]) : nullptr;
  const double eps = attr_float(node, "epsilon", 1e-5);
  const int64_t D = s.len;
  auto fadd = [&](Value* a, Value* x) { return b.CreateFAdd(a, x); };
  for_node_units(ec, node, [&](Value* o) {
    Value* base = b.CreateMul(o, i64c(ec, D));
    Value* sum = fold_run(ec, dtype, X, base, D, lanes, zero(ct), fadd, fadd);
    Value* mean = b.CreateFDiv(sum, fpc(ct, static_cast<double>(D)));
    Value* sq = fold_run(ec, dtype, X, base, D, lanes, zero(ct), [&](Value* a, Value* x) {
      int ln = x->getType()->isVectorTy() ? lanes : 0;
      Value* d = b.CreateFSub(x, splat_like(ec, mean, ln));
      return mul_add(ec, d, d, a);
    }, fadd);
    Value* var = b.CreateFDiv(sq, fpc(ct, static_cast<double>(D)));
    Value* inv = inv_std(ec, ct, var, eps);
    map_xy(ec, node, base, D, [&](Value* x, Value* j, int ln) {
      Value* y = b.CreateFMul(centred(ec, x, mean, inv, ln), load_n(ec, dtype, S, j, ln));
      return Bv ? b.CreateFAdd(y, load_n(ec, dtype, Bv, j, ln)) : y;
    });
  });
  return Status();
}

Status emit_batch_norm(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const auto [dtype, X, Y, ct, lanes] = family_io(ec, node);
  const ir::Shape& xs = ec.graph.value(node.inputs[0]).type.shape;
  const int64_t C = xs[1], spatial = plane_size(xs);
  Value* P[4];
  for (size_t i = 0; i < 4; ++i) P[i] = operand_ptr(ec, node.inputs[i + 1]);
  const double eps = attr_float(node, "epsilon", 1e-5);
  for_node_units(ec, node, [&](Value* plane) {
    Value* c = b.CreateURem(plane, i64c(ec, C));
    Value* scale = load_elem(ec, dtype, P[0], c);
    Value* bias = load_elem(ec, dtype, P[1], c);
    Value* mean = load_elem(ec, dtype, P[2], c);
    Value* var = load_elem(ec, dtype, P[3], c);
    Value* inv = inv_std(ec, ct, var, eps);
    Value* base = b.CreateMul(plane, i64c(ec, spatial));
    map_xy(ec, node, base, spatial, [&](Value* x, Value*, int ln) {
      Value* y = b.CreateFMul(centred(ec, x, mean, inv, ln), splat_like(ec, scale, ln));
      return b.CreateFAdd(y, splat_like(ec, bias, ln));
    });
  });
  return Status();
}

Status emit_global_avg_pool(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const auto [dtype, X, Y, ct, lanes] = family_io(ec, node);
  const int64_t spatial = plane_size(ec.graph.value(node.inputs[0]).type.shape);
  auto fadd = [&](Value* a, Value* x) { return b.CreateFAdd(a, x); };
  for_node_units(ec, node, [&](Value* plane) {
    Value* sum = fold_run(ec, dtype, X, b.CreateMul(plane, i64c(ec, spatial)), spatial, lanes,
                          zero(ct), fadd, fadd);
    store_elem(ec, dtype, Y, plane, b.CreateFDiv(sum, fpc(ct, static_cast<double>(spatial))));
  });
  return Status();
}

}  // namespace

Status emit_reduction(EmitContext& ec, const ir::Node& node) {
  switch (node.op) {
    case ir::OpKind::kReduceSum:
    case ir::OpKind::kReduceMean:
    case ir::OpKind::kReduceMax:
    case ir::OpKind::kReduceProd:
      return emit_reduce(ec, node);
    case ir::OpKind::kArgMax:
    case ir::OpKind::kArgMin: return emit_arg(ec, node);
    case ir::OpKind::kSoftmax: return emit_softmax(ec, node);
    case ir::OpKind::kLayerNorm: return emit_layer_norm(ec, node);
    case ir::OpKind::kBatchNorm: return emit_batch_norm(ec, node);
    case ir::OpKind::kGlobalAvgPool: return emit_global_avg_pool(ec, node);
    default: break;
  }
  return Status(ErrorCode::kUnsupported,
                ir::describe_node(ec.graph, node.id) + ": not a reduction-family op");
}

}  // namespace carve::jit::detail
