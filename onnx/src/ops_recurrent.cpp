// ONNX's recurrent layers RNN, GRU and LSTM (opsets 7 and 14), unrolled at import over
// the static sequence length onto carve ops: X·W^T + biases for every step as one gemm,
// then per step and direction a gemm H·R^T (the gemm's bias is that step's slice of
// X·W^T), a split into gates and the elementwise cell. Sequence lengths must be known:
// a step past a batch entry's length keeps its state and writes zeros to Y, as ONNX
// Runtime does. Layout 1 (batch-major, opset 14) is transposed in and out.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

// One activation with its alpha/beta resolved (ONNX's defaults where it has them).
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

struct ActivationSpec {
  std::string_view name;
  bool uses_alpha, uses_beta;
  std::optional<double> alpha, beta;  // defaults (none: the attribute must give it)
};

constexpr ActivationSpec kActivations[] = {
    {"Relu", false, false, {}, {}},          {"Tanh", false, false, {}, {}},
    {"Sigmoid", false, false, {}, {}},       {"Affine", true, true, {}, {}},
    {"LeakyRelu", true, false, 0.01, {}},    {"ThresholdedRelu", true, false, 1.0, {}},
    {"ScaledTanh", true, true, 1.0, 1.0},    {"HardSigmoid", true, true, 0.2, 0.5},
    {"Elu", true, false, 1.0, {}},           {"Softsign", false, false, {}, {}},
    {"Softplus", false, false, {}, {}},
};

// What RNN, GRU and LSTM share: shapes, direction, activations, clip, sequence lengths.
struct Recurrence {
  int gates = 1;  // 1 (RNN), 3 (GRU: z r h), 4 (LSTM: i o f c)
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int directions = 1;
  bool reverse_only = false;  // direction "reverse"
  bool batch_major = false;   // layout 1
  ir::DType dtype = ir::DType::kF32;
  std::optional<double> clip;
  std::vector<std::vector<Activation>> activations;  // per direction
  std::vector<int64_t> lengths;  // per batch entry; empty: every entry runs all seq steps
  bool linear_before_reset = false;  // GRU
};

bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

// activations / activation_alpha / activation_beta: the names (case-insensitive, as ONNX
// Runtime reads them), one list per direction or one list for both; alpha and beta values
// are taken in order by the activations that use them (ONNX Runtime's reading), so every
// value must find a user.
Status read_activations(const NodeContext& n, const std::vector<std::string_view>& defaults, Recurrence& r) {
  std::vector<std::string> names(defaults.begin(), defaults.end());
  if (const auto* a = n.attr("activations")) names.assign(a->strings().begin(), a->strings().end());
  const size_t per = defaults.size();
  if (names.size() == per && r.directions == 2) {
    const std::vector<std::string> one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != per * static_cast<size_t>(r.directions))
    return n.invalid(fmt::format("activations lists {} functions, needs {} per direction", names.size(), per));
  std::vector<double> alphas, betas;
  if (n.has_attr("activation_alpha")) {
    CARVE_ASSIGN_OR_RETURN(alphas, n.attr_floats("activation_alpha"));
  }
  if (n.has_attr("activation_beta")) {
    CARVE_ASSIGN_OR_RETURN(betas, n.attr_floats("activation_beta"));
  }
  size_t next_alpha = 0, next_beta = 0;
  const auto take = [&](bool used, const std::vector<double>& values, size_t& next, std::optional<double> fallback,
                        std::string_view what, const std::string& name) -> Result<double> {
    if (!used) return 0.0;
    if (next < values.size()) return values[next++];
    if (fallback) return *fallback;
    return n.invalid(fmt::format("activation {} needs a value in activation_{}", name, what));
  };
  r.activations.assign(static_cast<size_t>(r.directions), {});
  for (size_t k = 0; k < names.size(); ++k) {
    const auto* spec = std::find_if(std::begin(kActivations), std::end(kActivations),
                                    [&](const ActivationSpec& s) { return same_name(s.name, names[k]); });
    if (spec == std::end(kActivations))
      return n.unsupported(fmt::format("activation '{}' (not one of ONNX's recurrent activations)", names[k]));
    Activation act{std::string(spec->name)};
    CARVE_ASSIGN_OR_RETURN(act.alpha, take(spec->uses_alpha, alphas, next_alpha, spec->alpha, "alpha", act.name));
    CARVE_ASSIGN_OR_RETURN(act.beta, take(spec->uses_beta, betas, next_beta, spec->beta, "beta", act.name));
    r.activations[k / per].push_back(std::move(act));
  }
  if (next_alpha != alphas.size() || next_beta != betas.size())
    return n.invalid(fmt::format("activation_alpha/activation_beta hold {}/{} values, the activations use {}/{}",
                                 alphas.size(), betas.size(), next_alpha, next_beta));
  return Status();
}

// sequence_lens (input 4), which must be known: carve unrolls the steps at import.
Status read_sequence_lengths(const NodeContext& n, Recurrence& r) {
  if (!n.has_input(4)) return Status();
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, n.const_ints(4, "sequence_lens"));
  if (static_cast<int64_t>(lengths.size()) != r.batch)
    return n.invalid(fmt::format("sequence_lens holds {} values for a batch of {}", lengths.size(), r.batch));
  for (int64_t len : lengths) {
    if (len < 0 || len > r.seq) return n.invalid(fmt::format("sequence_lens value {} (X has {} steps)", len, r.seq));
    // ONNX leaves a length of 0 undefined (ONNX Runtime zeroes Y_h, not keeping initial_h).
    if (len == 0) return n.unsupported("sequence_lens value 0 (carve runs lengths of at least 1)");
  }
  if (std::any_of(lengths.begin(), lengths.end(), [&](int64_t len) { return len != r.seq; })) r.lengths = lengths;
  return Status();
}

// The attributes and shapes every recurrent op reads; `gates` weight blocks per direction.
Result<Recurrence> read_recurrence(const NodeContext& n, int gates, const std::vector<std::string_view>& activations) {
  Recurrence r;
  r.gates = gates;
  CARVE_ASSIGN_OR_RETURN(std::string direction, n.attr_string("direction", "forward"));
  if (direction == "bidirectional") {
    r.directions = 2;
  } else if (direction == "reverse") {
    r.reverse_only = true;
  } else if (direction != "forward") {
    return n.invalid(fmt::format("direction '{}' (forward, reverse or bidirectional)", direction));
  }
  CARVE_ASSIGN_OR_RETURN(int64_t layout, n.attr_int("layout", 0));
  if (layout != 0 && layout != 1) return n.invalid(fmt::format("layout {} (0 or 1)", layout));
  r.batch_major = layout == 1;
  if (n.has_attr("clip")) {
    CARVE_ASSIGN_OR_RETURN(double clip, n.attr_float("clip"));
    if (!(clip > 0)) return n.invalid(fmt::format("clip {} (must be > 0)", clip));
    r.clip = clip;
  }
  CARVE_ASSIGN_OR_RETURN(ir::TensorType x, n.input_type(0));
  CARVE_ASSIGN_OR_RETURN(ir::TensorType w, n.input_type(1));
  CARVE_ASSIGN_OR_RETURN(ir::TensorType rt, n.input_type(2));
  if (!ir::is_float(x.dtype)) return n.unsupported(fmt::format("{} input (ONNX defines {} on floats)",
                                                               ir::dtype_name(x.dtype), n.op_type()));
  r.dtype = x.dtype;
  if (x.shape.rank() != 3) return n.invalid(fmt::format("X {} must have rank 3", x.shape.to_string()));
  r.seq = x.shape[r.batch_major ? 1 : 0];
  r.batch = x.shape[r.batch_major ? 0 : 1];
  r.input = x.shape[2];
  if (r.seq < 1 || r.batch < 1)
    return n.unsupported(fmt::format("X {} (carve needs at least one time step and batch entry)", x.shape.to_string()));
  if (w.shape.rank() != 3 || w.shape[0] != r.directions || w.shape[1] % gates != 0 || w.shape[2] != r.input)
    return n.invalid(fmt::format("W {} (needs [{}, {} * hidden_size, {}])", w.shape.to_string(), r.directions, gates,
                                 r.input));
  r.hidden = w.shape[1] / gates;
  CARVE_ASSIGN_OR_RETURN(int64_t hidden_size, n.attr_int("hidden_size", r.hidden));
  if (hidden_size != r.hidden || r.hidden < 1)
    return n.invalid(fmt::format("hidden_size {} and W {} disagree", hidden_size, w.shape.to_string()));
  if (rt.shape != ir::Shape{r.directions, gates * r.hidden, r.hidden})
    return n.invalid(fmt::format("R {} (needs {})", rt.shape.to_string(),
                                 ir::Shape{r.directions, gates * r.hidden, r.hidden}.to_string()));
  for (int i = 1; i < 3; ++i) {
    CARVE_ASSIGN_OR_RETURN(ir::TensorType t, n.input_type(i));
    if (t.dtype != r.dtype) return n.invalid(fmt::format("input {} is {}, X is {}", i, ir::dtype_name(t.dtype),
                                                         ir::dtype_name(r.dtype)));
  }
  CARVE_RETURN_IF_ERROR(read_activations(n, activations, r));
  CARVE_RETURN_IF_ERROR(read_sequence_lengths(n, r));
  return r;
}

// Rows [first, first + count) of `t` along `axis`.
Result<Tensor> rows(NodeContext& n, const Tensor& t, int64_t axis, int64_t first, int64_t count) {
  return n.op(OpKind::kSlice, {t}, {{"starts", std::vector<int64_t>{first}}, {"ends", std::vector<int64_t>{first + count}},
                                    {"axes", std::vector<int64_t>{axis}}});
}

// Entry d of `t` along axis 0, that axis dropped.
Result<Tensor> direction_entry(NodeContext& n, const Tensor& t, int d) {
  CARVE_ASSIGN_OR_RETURN(Tensor slice, rows(n, t, 0, d, 1));
  std::vector<int64_t> dims(t.type.shape.dims().begin() + 1, t.type.shape.dims().end());
  return n.op(OpKind::kReshape, {slice}, {{"shape", dims}});
}

Result<Tensor> scalar_op(NodeContext& n, OpKind kind, const Tensor& x, double value) {
  return n.op(kind, {x, n.constant_doubles(x.type.dtype, {}, {value})});
}

// f(x) for one of kActivations; `clip` bounds x first.
Result<Tensor> activate(NodeContext& n, const Activation& f, Tensor x, std::optional<double> clip) {
  if (clip) {
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kClip, {x}, {{"min", -*clip}, {"max", *clip}}));
  }
  const std::string& name = f.name;
  if (name == "Relu") return n.op(OpKind::kRelu, {x});
  if (name == "Tanh") return n.op(OpKind::kTanh, {x});
  if (name == "Sigmoid") return n.op(OpKind::kSigmoid, {x});
  if (name == "HardSigmoid") return n.op(OpKind::kHardSigmoid, {x}, {{"alpha", f.alpha}, {"beta", f.beta}});
  if (name == "Softplus") return softplus(n, x);
  if (name == "Affine" || name == "ScaledTanh") {  // alpha * x + beta, alpha * tanh(beta * x)
    const bool affine = name == "Affine";
    CARVE_ASSIGN_OR_RETURN(Tensor y, scalar_op(n, OpKind::kMul, x, affine ? f.alpha : f.beta));
    if (affine) return scalar_op(n, OpKind::kAdd, y, f.beta);
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kTanh, {y}));
    return scalar_op(n, OpKind::kMul, y, f.alpha);
  }
  if (name == "Softsign") {  // x / (1 + |x|)
    CARVE_ASSIGN_OR_RETURN(Tensor a, n.op(OpKind::kAbs, {x}));
    CARVE_ASSIGN_OR_RETURN(Tensor d, scalar_op(n, OpKind::kAdd, a, 1.0));
    return n.op(OpKind::kDiv, {x, d});
  }
  // The rest pick x or another value: LeakyRelu (x >= 0 ? x : alpha x), Elu (x >= 0 ? x :
  // alpha (e^x - 1)), ThresholdedRelu (x >= alpha ? x : 0), as ONNX defines them here.
  const ir::DType dt = x.type.dtype;
  CARVE_ASSIGN_OR_RETURN(Tensor keep, scalar_op(n, OpKind::kGreaterEqual, x, name == "ThresholdedRelu" ? f.alpha : 0.0));
  Tensor other = n.constant_doubles(dt, {}, {0.0});
  if (name == "LeakyRelu") {
    CARVE_ASSIGN_OR_RETURN(other, scalar_op(n, OpKind::kMul, x, f.alpha));
  } else if (name == "Elu") {
    CARVE_ASSIGN_OR_RETURN(Tensor e, n.op(OpKind::kExp, {x}));
    CARVE_ASSIGN_OR_RETURN(Tensor em1, scalar_op(n, OpKind::kSub, e, 1.0));
    CARVE_ASSIGN_OR_RETURN(other, scalar_op(n, OpKind::kMul, em1, f.alpha));
  }
  return n.op(OpKind::kWhere, {keep, x, other});
}

// The weights of one direction: W and R as [gates * hidden, in], the bias the input
// projection carries (Wb + Rb, or Wb alone for GRU with linear_before_reset), Rb in that
// case, the LSTM's peepholes (i o f, each [hidden]) and, for GRU without
// linear_before_reset, R's z r rows and h rows apart. Taken once, not per step: slicing a
// constant folds into a new constant each time.
struct DirectionWeights {
  Tensor w, r;
  std::optional<Tensor> input_bias, recurrent_bias;
  std::vector<std::optional<Tensor>> peepholes = std::vector<std::optional<Tensor>>(3);
  std::optional<Tensor> r_update_reset, r_candidate;
};

Status read_peepholes(NodeContext& n, const Recurrence& rc, int d, DirectionWeights& dw) {
  if (rc.gates != 4 || !n.has_input(7)) return Status();
  CARVE_ASSIGN_OR_RETURN(Tensor p, n.input(7));
  if (p.type.dtype != rc.dtype || p.type.shape != ir::Shape{rc.directions, 3 * rc.hidden})
    return n.invalid(fmt::format("P {} (needs {})", p.type.to_string(),
                                 ir::TensorType{rc.dtype, ir::Shape{rc.directions, 3 * rc.hidden}}.to_string()));
  CARVE_ASSIGN_OR_RETURN(Tensor pd, direction_entry(n, p, d));
  for (int k = 0; k < 3; ++k) {
    CARVE_ASSIGN_OR_RETURN(dw.peepholes[static_cast<size_t>(k)], rows(n, pd, 0, k * rc.hidden, rc.hidden));
  }
  return Status();
}

Result<DirectionWeights> direction_weights(NodeContext& n, const Recurrence& rc, int d) {
  DirectionWeights dw;
  CARVE_ASSIGN_OR_RETURN(Tensor w, n.input(1));
  CARVE_ASSIGN_OR_RETURN(Tensor r, n.input(2));
  CARVE_ASSIGN_OR_RETURN(dw.w, direction_entry(n, w, d));
  CARVE_ASSIGN_OR_RETURN(dw.r, direction_entry(n, r, d));
  CARVE_RETURN_IF_ERROR(read_peepholes(n, rc, d, dw));
  if (rc.gates == 3 && !rc.linear_before_reset) {
    CARVE_ASSIGN_OR_RETURN(dw.r_update_reset, rows(n, dw.r, 0, 0, 2 * rc.hidden));
    CARVE_ASSIGN_OR_RETURN(dw.r_candidate, rows(n, dw.r, 0, 2 * rc.hidden, rc.hidden));
  }
  if (!n.has_input(3)) return dw;
  CARVE_ASSIGN_OR_RETURN(Tensor b, n.input(3));
  const int64_t width = rc.gates * rc.hidden;
  if (b.type.dtype != rc.dtype || b.type.shape != ir::Shape{rc.directions, 2 * width})
    return n.invalid(fmt::format("B {} (needs {})", b.type.to_string(),
                                 ir::TensorType{rc.dtype, ir::Shape{rc.directions, 2 * width}}.to_string()));
  CARVE_ASSIGN_OR_RETURN(Tensor bd, direction_entry(n, b, d));
  CARVE_ASSIGN_OR_RETURN(Tensor wb, rows(n, bd, 0, 0, width));
  CARVE_ASSIGN_OR_RETURN(Tensor rb, rows(n, bd, 0, width, width));
  if (rc.linear_before_reset) {
    dw.input_bias = wb;
    dw.recurrent_bias = rb;
    return dw;
  }
  CARVE_ASSIGN_OR_RETURN(dw.input_bias, n.op(OpKind::kAdd, {wb, rb}));
  return dw;
}

// Input i (initial_h, initial_c) for direction d as [batch, hidden]; zeros when absent.
Result<Tensor> initial_state(NodeContext& n, const Recurrence& rc, int i, int d, std::string_view what) {
  if (!n.has_input(i)) {
    return n.constant_doubles(rc.dtype, {rc.batch, rc.hidden},
                              std::vector<double>(static_cast<size_t>(rc.batch * rc.hidden), 0.0));
  }
  CARVE_ASSIGN_OR_RETURN(Tensor t, n.input(i));
  const ir::Shape want = rc.batch_major ? ir::Shape{rc.batch, rc.directions, rc.hidden}
                                        : ir::Shape{rc.directions, rc.batch, rc.hidden};
  if (t.type.dtype != rc.dtype || t.type.shape != want)
    return n.invalid(fmt::format("{} {} (needs {})", what, t.type.to_string(), ir::TensorType{rc.dtype, want}.to_string()));
  if (rc.batch_major) {
    CARVE_ASSIGN_OR_RETURN(t, n.op(OpKind::kTranspose, {t}, {{"perm", std::vector<int64_t>{1, 0, 2}}}));
  }
  return direction_entry(n, t, d);
}

// The state a cell carries from step to step (c only for LSTM).
struct State {
  Tensor h;
  std::optional<Tensor> c;
};

// A cell: the new state from the previous one, this step's X·W^T + bias [batch, gates *
// hidden], the direction's weights and its activations.
using Cell = Result<State> (*)(NodeContext& n, const Recurrence& rc, const State& prev, const Tensor& xw,
                               const DirectionWeights& dw, const std::vector<Activation>& f);

// a·b^T (+ c), b as [out, in] like W and R.
Result<Tensor> linear(NodeContext& n, const Tensor& a, const Tensor& b, const std::optional<Tensor>& c) {
  std::vector<Tensor> in{a, b};
  if (c) in.push_back(*c);
  return n.op(OpKind::kGemm, std::move(in), {{"trans_b", int64_t{1}}});
}

Result<std::vector<Tensor>> split_gates(NodeContext& n, const Recurrence& rc, const Tensor& t, int count) {
  return n.op_n(OpKind::kSplit, {t},
                {{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>(static_cast<size_t>(count), rc.hidden)}});
}

// RNN: H = f(xw + H·R^T).
Result<State> rnn_cell(NodeContext& n, const Recurrence& rc, const State& prev, const Tensor& xw,
                       const DirectionWeights& dw, const std::vector<Activation>& f) {
  CARVE_ASSIGN_OR_RETURN(Tensor pre, linear(n, prev.h, dw.r, xw));
  CARVE_ASSIGN_OR_RETURN(Tensor h, activate(n, f[0], pre, rc.clip));
  return State{h, std::nullopt};
}

// GRU (gates z r h): z = f(xz + H·Rz^T), r = f(xr + H·Rr^T), h~ = g(xh + (r ⊙ H)·Rh^T)
// or, with linear_before_reset, g(xh + r ⊙ (H·Rh^T + Rbh)); H = (1 - z) ⊙ h~ + z ⊙ H.
Result<State> gru_cell(NodeContext& n, const Recurrence& rc, const State& prev, const Tensor& xw,
                       const DirectionWeights& dw, const std::vector<Activation>& f) {
  Tensor candidate;
  std::vector<Tensor> gate(2);
  if (rc.linear_before_reset) {  // one gemm, Rb added per step
    CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> x, split_gates(n, rc, xw, 3));
    CARVE_ASSIGN_OR_RETURN(Tensor hr, linear(n, prev.h, dw.r, dw.recurrent_bias));
    CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> h, split_gates(n, rc, hr, 3));
    for (int g = 0; g < 2; ++g) {
      CARVE_ASSIGN_OR_RETURN(Tensor pre, n.op(OpKind::kAdd, {x[g], h[g]}));
      CARVE_ASSIGN_OR_RETURN(gate[g], activate(n, f[0], pre, rc.clip));
    }
    CARVE_ASSIGN_OR_RETURN(Tensor reset, n.op(OpKind::kMul, {gate[1], h[2]}));
    CARVE_ASSIGN_OR_RETURN(candidate, n.op(OpKind::kAdd, {x[2], reset}));
  } else {
    const std::vector<int64_t> sizes{2 * rc.hidden, rc.hidden};  // z r | h
    CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> x, n.op_n(OpKind::kSplit, {xw}, {{"axis", int64_t{1}}, {"sizes", sizes}}));
    CARVE_ASSIGN_OR_RETURN(Tensor pre_zr, linear(n, prev.h, *dw.r_update_reset, x[0]));
    CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> pre, split_gates(n, rc, pre_zr, 2));
    for (int g = 0; g < 2; ++g) {
      CARVE_ASSIGN_OR_RETURN(gate[g], activate(n, f[0], pre[g], rc.clip));
    }
    CARVE_ASSIGN_OR_RETURN(Tensor reset_h, n.op(OpKind::kMul, {gate[1], prev.h}));
    CARVE_ASSIGN_OR_RETURN(candidate, linear(n, reset_h, *dw.r_candidate, x[1]));
  }
  CARVE_ASSIGN_OR_RETURN(Tensor h_new, activate(n, f[1], candidate, rc.clip));
  // (1 - z) ⊙ h~ + z ⊙ H = h~ + z ⊙ (H - h~)
  CARVE_ASSIGN_OR_RETURN(Tensor diff, n.op(OpKind::kSub, {prev.h, h_new}));
  CARVE_ASSIGN_OR_RETURN(Tensor kept, n.op(OpKind::kMul, {gate[0], diff}));
  CARVE_ASSIGN_OR_RETURN(Tensor h, n.op(OpKind::kAdd, {h_new, kept}));
  return State{h, std::nullopt};
}

// pre + p ⊙ c when the peephole p is present.
Result<Tensor> add_peephole(NodeContext& n, const Tensor& pre, const std::optional<Tensor>& p, const Tensor& c) {
  if (!p) return pre;
  CARVE_ASSIGN_OR_RETURN(Tensor pc, n.op(OpKind::kMul, {*p, c}));
  return n.op(OpKind::kAdd, {pre, pc});
}

// LSTM (gates i o f c, peepholes [3 * hidden] as i o f): i = f(xi + H·Ri^T + Pi ⊙ C),
// f = f(xf + H·Rf^T + Pf ⊙ C), c~ = g(xc + H·Rc^T), C' = f ⊙ C + i ⊙ c~,
// o = f(xo + H·Ro^T + Po ⊙ C'), H' = o ⊙ h(C'). clip bounds the gates' inputs, not C'.
Result<State> lstm_cell(NodeContext& n, const Recurrence& rc, const State& prev, const Tensor& xw,
                        const DirectionWeights& dw, const std::vector<Activation>& f) {
  CARVE_ASSIGN_OR_RETURN(Tensor all, linear(n, prev.h, dw.r, xw));
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> pre, split_gates(n, rc, all, 4));
  const auto& p = dw.peepholes;
  const Tensor& c_prev = *prev.c;
  CARVE_ASSIGN_OR_RETURN(Tensor pre_i, add_peephole(n, pre[0], p[0], c_prev));
  CARVE_ASSIGN_OR_RETURN(Tensor pre_f, add_peephole(n, pre[2], p[2], c_prev));
  CARVE_ASSIGN_OR_RETURN(Tensor i, activate(n, f[0], pre_i, rc.clip));
  CARVE_ASSIGN_OR_RETURN(Tensor forget, activate(n, f[0], pre_f, rc.clip));
  CARVE_ASSIGN_OR_RETURN(Tensor cell, activate(n, f[1], pre[3], rc.clip));
  CARVE_ASSIGN_OR_RETURN(Tensor kept, n.op(OpKind::kMul, {forget, c_prev}));
  CARVE_ASSIGN_OR_RETURN(Tensor added, n.op(OpKind::kMul, {i, cell}));
  CARVE_ASSIGN_OR_RETURN(Tensor c, n.op(OpKind::kAdd, {kept, added}));
  CARVE_ASSIGN_OR_RETURN(Tensor pre_o, add_peephole(n, pre[1], p[1], c));
  CARVE_ASSIGN_OR_RETURN(Tensor o, activate(n, f[0], pre_o, rc.clip));
  CARVE_ASSIGN_OR_RETURN(Tensor hc, activate(n, f[2], c, std::nullopt));
  CARVE_ASSIGN_OR_RETURN(Tensor h, n.op(OpKind::kMul, {o, hc}));
  return State{h, c};
}

// Where step t is past some batch entry's length: that entry keeps `prev` (the returned
// state) and its row of Y (`y`, when wanted) gets zeros.
Result<std::pair<State, Tensor>> mask_step(NodeContext& n, const Recurrence& rc, int64_t t, const State& prev, State next,
                                           bool want_y) {
  Tensor y = next.h;
  if (rc.lengths.empty() || std::all_of(rc.lengths.begin(), rc.lengths.end(), [&](int64_t len) { return t < len; }))
    return std::pair{next, y};
  std::vector<int64_t> active;
  for (int64_t len : rc.lengths) active.push_back(t < len ? 1 : 0);
  Tensor mask = n.constant_ints(ir::DType::kBool, {rc.batch, 1}, active);
  CARVE_ASSIGN_OR_RETURN(next.h, n.op(OpKind::kWhere, {mask, next.h, prev.h}));
  if (next.c) {
    CARVE_ASSIGN_OR_RETURN(next.c, n.op(OpKind::kWhere, {mask, *next.c, *prev.c}));
  }
  if (want_y) {
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kWhere, {mask, y, n.constant_doubles(rc.dtype, {}, {0.0})}));
  }
  return std::pair{next, y};
}

// `parts` (each [1, ...]) stacked along axis 0.
Result<Tensor> stack(NodeContext& n, const std::vector<Tensor>& parts) {
  if (parts.size() == 1) return parts[0];
  return n.op(OpKind::kConcat, parts, {{"axis", int64_t{0}}});
}

Result<Tensor> with_leading_one(NodeContext& n, const Tensor& t) {
  std::vector<int64_t> dims = t.type.shape.dims();
  dims.insert(dims.begin(), 1);
  return n.op(OpKind::kReshape, {t}, {{"shape", dims}});
}

struct Outputs {
  std::vector<Tensor> y, y_h, y_c;  // per direction: [seq, batch, hidden], [1, batch, hidden] x2
};

// Runs one direction over every step of x [seq * batch, input]; appends its Y (when the
// node's Y is used: nothing the graph would carry dead), Y_h and Y_c to `out`.
Status run_direction(NodeContext& n, const Recurrence& rc, const Tensor& x, int d, Cell cell, Outputs& out) {
  CARVE_ASSIGN_OR_RETURN(DirectionWeights dw, direction_weights(n, rc, d));
  CARVE_ASSIGN_OR_RETURN(Tensor xw, linear(n, x, dw.w, dw.input_bias));
  const std::vector<int64_t> step_rows(static_cast<size_t>(rc.seq), rc.batch);
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> steps,
                         n.op_n(OpKind::kSplit, {xw}, {{"axis", int64_t{0}}, {"sizes", step_rows}}));
  State state;
  CARVE_ASSIGN_OR_RETURN(state.h, initial_state(n, rc, 5, d, "initial_h"));
  if (rc.gates == 4) {
    CARVE_ASSIGN_OR_RETURN(state.c, initial_state(n, rc, 6, d, "initial_c"));
  }
  const bool reverse = rc.reverse_only || d == 1;
  const bool want_y = n.output_used(0);
  std::vector<Tensor> ys(static_cast<size_t>(rc.seq));
  for (int64_t step = 0; step < rc.seq; ++step) {
    const int64_t t = reverse ? rc.seq - 1 - step : step;
    CARVE_ASSIGN_OR_RETURN(State next, cell(n, rc, state, steps[static_cast<size_t>(t)], dw,
                                            rc.activations[static_cast<size_t>(d)]));
    CARVE_ASSIGN_OR_RETURN(auto masked, mask_step(n, rc, t, state, std::move(next), want_y));
    state = std::move(masked.first);
    if (want_y) {
      CARVE_ASSIGN_OR_RETURN(ys[static_cast<size_t>(t)], with_leading_one(n, masked.second));
    }
  }
  if (want_y) {
    CARVE_ASSIGN_OR_RETURN(Tensor y, stack(n, ys));
    out.y.push_back(y);
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y_h, with_leading_one(n, state.h));
  out.y_h.push_back(y_h);
  if (state.c) {
    CARVE_ASSIGN_OR_RETURN(Tensor y_c, with_leading_one(n, *state.c));
    out.y_c.push_back(y_c);
  }
  return Status();
}

// Y [seq, directions, batch, hidden] (layout 1: [batch, seq, directions, hidden]), Y_h and
// Y_c [directions, batch, hidden] (layout 1: [batch, directions, hidden]).
Status set_outputs(NodeContext& n, const Recurrence& rc, const Outputs& out) {
  if (n.output_used(0)) {
    std::vector<Tensor> per_direction;
    for (const Tensor& y : out.y) {
      const std::vector<int64_t> dims{rc.seq, 1, rc.batch, rc.hidden};
      CARVE_ASSIGN_OR_RETURN(Tensor y4, n.op(OpKind::kReshape, {y}, {{"shape", dims}}));
      per_direction.push_back(y4);
    }
    Tensor y = per_direction[0];
    if (per_direction.size() > 1) {
      CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kConcat, per_direction, {{"axis", int64_t{1}}}));
    }
    if (rc.batch_major) {
      CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kTranspose, {y}, {{"perm", std::vector<int64_t>{2, 0, 1, 3}}}));
    }
    CARVE_RETURN_IF_ERROR(n.set_output(0, y));
  }
  const std::vector<Tensor>* finals[] = {&out.y_h, &out.y_c};
  for (int k = 0; k < 2; ++k) {
    if (!n.output_used(1 + k) || finals[k]->empty()) continue;
    CARVE_ASSIGN_OR_RETURN(Tensor f, stack(n, *finals[k]));
    if (rc.batch_major) {
      CARVE_ASSIGN_OR_RETURN(f, n.op(OpKind::kTranspose, {f}, {{"perm", std::vector<int64_t>{1, 0, 2}}}));
    }
    CARVE_RETURN_IF_ERROR(n.set_output(1 + k, f));
  }
  return Status();
}

Status lower_recurrent(NodeContext& n, int gates, const std::vector<std::string_view>& activations, Cell cell,
                       bool linear_before_reset = false) {
  if (n.opset() < 14 && n.has_attr("layout")) return n.invalid("layout needs opset 14");
  CARVE_ASSIGN_OR_RETURN(Recurrence rc, read_recurrence(n, gates, activations));
  rc.linear_before_reset = linear_before_reset;
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  if (rc.batch_major) {
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kTranspose, {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}}));
  }
  CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{rc.seq * rc.batch, rc.input}}}));
  Outputs out;
  for (int d = 0; d < rc.directions; ++d) {
    CARVE_RETURN_IF_ERROR(run_direction(n, rc, x, d, cell, out));
  }
  return set_outputs(n, rc, out);
}

Status lower_rnn(NodeContext& n) { return lower_recurrent(n, 1, {"Tanh"}, rnn_cell); }

Status lower_gru(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(int64_t linear_before_reset, n.attr_int("linear_before_reset", 0));
  if (linear_before_reset != 0 && linear_before_reset != 1)
    return n.invalid(fmt::format("linear_before_reset {} (0 or 1)", linear_before_reset));
  return lower_recurrent(n, 3, {"Sigmoid", "Tanh"}, gru_cell, linear_before_reset == 1);
}

Status lower_lstm(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(int64_t input_forget, n.attr_int("input_forget", 0));
  // ONNX names the coupling but does not define it.
  if (input_forget != 0) return n.unsupported(fmt::format("input_forget {} (only 0)", input_forget));
  return lower_recurrent(n, 4, {"Sigmoid", "Tanh", "Tanh"}, lstm_cell);
}

}  // namespace

void register_recurrent_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  const std::vector<std::string_view> common{"activation_alpha", "activation_beta", "activations", "clip",
                                             "direction", "hidden_size", "layout"};
  std::vector<std::string_view> gru = common, lstm = common;
  gru.push_back("linear_before_reset");
  lstm.push_back("input_forget");
  t["RNN"] = {lower_rnn, common};
  t["GRU"] = {lower_gru, gru};
  t["LSTM"] = {lower_lstm, lstm};
}

}  // namespace carve::onnx::detail
