// A 1x1 convolution of one pixel -- a matrix-vector product -- with its activation: the two
// small convs of every squeeze-excite block ([1, C, 1, 1] -> [1, C', 1, 1]), which oneDNN
// declines. Carve's own loop, compiled ahead of time: efficientnet_b0 has 32 of them,
// regnet_y_400mf 22, mobilenet_v3_small 16, each one LLVM compile (about 25 ms) before the
// first result, for a few thousand multiply-adds at run time.
//
// y[o] = act(bias[o] + sum_i w[o][i] x[i]), summed in f32 over i in order, the activation in
// double as the reference's. The weights are stored in panels of 16 outputs ([panel][i][16],
// the last padded with zeros), which the loop streams four at a time, 16 outputs a vector:
// AVX-512 where the CPU has it, else AVX2 with FMA, else SSE (GCC's vector extensions; the
// first two fuse each multiply-add, SSE rounds the product first). A scalar loop over outputs
// ran mobilenet_v3_large's 960 -> 240 in 29 us at 1 thread against ONNX Runtime's 16. Tiles:
// chunks of whole panels (from the shape alone), so the bytes do not depend on the tiles or
// the thread count; at 2 threads a chunk per thread streams its weights at twice the rate.
// Epilogue nodes taken, each reading the chain's current value: relu, sigmoid, silu, tanh,
// hard_sigmoid, clip, and x * act(x) (a mul of an activation's input and result: swish,
// hard-swish). One image of one pixel has the same bytes in NCHW and in the blocked
// layout, so the kernel names no layout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

// Above this many multiply-adds (a classifier as a conv) oneDNN's conv, cut into chunks that
// run in parallel, takes it.
constexpr int64_t kMaxMacs = int64_t{1} << 20;
// The fewest multiply-adds a tile has (a task costs 1-2 us), and the outputs of a panel (one
// 64-byte line of y: no two tiles write one).
constexpr int64_t kMinTileMacs = 48 << 10;
constexpr int kPanel = 16;

// acc[p * 16 + j] = sum over i in order of w[p][i][j] * x[i] for P panels of w
// ([panel][ci][16]), in vectors of N lanes held in registers. Always inlined, so that a
// caller compiled for AVX2 compiles it for AVX2 too.
template <int N, int P>
[[gnu::always_inline]] inline void sum_block(const float* w, const float* x, int64_t ci, float* acc) {
  typedef float F __attribute__((vector_size(N * 4)));
  constexpr int V = kPanel / N;
  F sum[P][V] = {};
  for (int64_t i = 0; i < ci; ++i) {
    const F xv = x[i] - F{};  // broadcast
    for (int p = 0; p < P; ++p) {
      for (int v = 0; v < V; ++v) {
        F wv;
        std::memcpy(&wv, w + (p * ci + i) * kPanel + v * N, sizeof(F));
        sum[p][v] += wv * xv;
      }
    }
  }
  std::memcpy(acc, sum, sizeof(sum));
}

// The same for up to four panels.
template <int N>
[[gnu::always_inline]] inline void sum_panels(const float* w, const float* x, int64_t ci, int64_t panels, float* acc) {
  switch (panels) {
    case 4: return sum_block<N, 4>(w, x, ci, acc);
    case 3: return sum_block<N, 3>(w, x, ci, acc);
    case 2: return sum_block<N, 2>(w, x, ci, acc);
    default: return sum_block<N, 1>(w, x, ci, acc);
  }
}

using SumPanelsFn = void (*)(const float*, const float*, int64_t, int64_t, float*);
void sum_panels_sse(const float* w, const float* x, int64_t ci, int64_t panels, float* acc) {
  sum_panels<4>(w, x, ci, panels, acc);
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
[[gnu::target("avx2,fma")]] void sum_panels_avx2(const float* w, const float* x, int64_t ci, int64_t panels, float* acc) {
  sum_panels<8>(w, x, ci, panels, acc);
}
[[gnu::target("avx512f")]] void sum_panels_avx512(const float* w, const float* x, int64_t ci, int64_t panels,
                                                  float* acc) {
  sum_panels<16>(w, x, ci, panels, acc);
}
#endif

SumPanelsFn pick_sum_panels() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f")) return sum_panels_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return sum_panels_avx2;
#endif
  return sum_panels_sse;
}

struct Activation {
  ir::OpKind op = ir::OpKind::kRelu;
  double a = 0, b = 0;  // hard_sigmoid: alpha, beta; clip: min, max
};

double activate(const Activation& act, double x) {
  switch (act.op) {
    case ir::OpKind::kRelu: return x < 0 ? 0.0 : x;
    case ir::OpKind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ir::OpKind::kSilu: return x / (1.0 + std::exp(-x));
    case ir::OpKind::kTanh: return std::tanh(x);
    case ir::OpKind::kHardSigmoid: {
      const double y = act.a * x + act.b;
      return std::isnan(y) ? y : std::max(0.0, std::min(1.0, y));
    }
    case ir::OpKind::kClip: return x < act.a ? act.a : (x > act.b ? act.b : x);  // NaN falls through
    default: return x;
  }
}

bool is_one_pixel(const ir::TensorType& t) {
  return t.dtype == ir::DType::kF32 && t.shape.rank() == 4 && t.shape[0] == 1 && t.shape[2] == 1 && t.shape[3] == 1;
}

bool all_zero(const ir::Node& node, const char* name) {
  auto it = node.attrs.find(name);
  if (it == node.attrs.end()) return true;
  if (!it->second.is_ints()) return false;
  const auto& v = it->second.as_ints();
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
}

class PixelConv final : public LibraryKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group,
                                             const ConstantBytes& constant_bytes) {
    const ir::Node& conv = graph.node(group.nodes.front());
    if (conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.outputs.size() != 1) return nullptr;
    const ir::TensorType& x = graph.value(conv.inputs[0]).type;
    const ir::TensorType& y = graph.value(conv.outputs[0]).type;
    if (!is_one_pixel(x) || !is_one_pixel(y) || !all_zero(conv, "pads")) return nullptr;
    if (auto g = conv.attrs.find("groups"); g != conv.attrs.end() && !(g->second.is_int() && g->second.as_int() == 1))
      return nullptr;
    const int64_t ci = x.shape[1], co = y.shape[1];
    if (ci * co > kMaxMacs) return nullptr;  // oneDNN's, in parallel chunks
    const ir::TensorType& wt = graph.value(conv.inputs[1]).type;
    const auto* w = static_cast<const float*>(constant_bytes(conv.inputs[1]));
    if (!w || wt.dtype != ir::DType::kF32 || wt.shape != ir::Shape{co, ci, 1, 1}) return nullptr;
    const float* bias = nullptr;
    if (conv.inputs.size() == 3) {
      bias = static_cast<const float*>(constant_bytes(conv.inputs[2]));
      const ir::TensorType& bt = graph.value(conv.inputs[2]).type;
      if (!bias || bt.dtype != ir::DType::kF32 || bt.shape != ir::Shape{co}) return nullptr;
    }
    auto k = std::make_unique<PixelConv>();
    ir::ValueId cur = conv.outputs[0], before = ir::kNoValue;  // before: the last activation's input
    for (size_t n = 1; n < group.nodes.size(); ++n) {
      const ir::Node& node = graph.node(group.nodes[n]);
      if (node.outputs.size() != 1 || graph.value(node.outputs[0]).type != y) return nullptr;
      Activation act{node.op};
      if (node.op == ir::OpKind::kMul) {  // x * act(x): swish, hard-swish
        if (node.inputs.size() != 2 || before == ir::kNoValue ||
            !((node.inputs[0] == cur && node.inputs[1] == before) || (node.inputs[0] == before && node.inputs[1] == cur)))
          return nullptr;
        k->acts_.push_back(act);
        before = ir::kNoValue;
        cur = node.outputs[0];
        continue;
      }
      if (node.inputs.size() != 1 || node.inputs[0] != cur) return nullptr;
      if (node.op == ir::OpKind::kHardSigmoid) {
        act.a = ir::float_attr_or(node.attrs, "alpha", 0.2);
        act.b = ir::float_attr_or(node.attrs, "beta", 0.5);
      } else if (node.op == ir::OpKind::kClip) {
        act.a = ir::float_attr_or(node.attrs, "min", -std::numeric_limits<double>::infinity());
        act.b = ir::float_attr_or(node.attrs, "max", std::numeric_limits<double>::infinity());
      } else if (node.op != ir::OpKind::kRelu && node.op != ir::OpKind::kSigmoid && node.op != ir::OpKind::kTanh &&
                 node.op != ir::OpKind::kSilu) {
        return nullptr;
      }
      k->acts_.push_back(act);
      before = cur;
      cur = node.outputs[0];
    }
    k->x_ = operand_index(group, conv.inputs[0], OperandRole::kInput);
    k->w_ = operand_index(group, conv.inputs[1], OperandRole::kInput);
    k->bias_operand_ = bias ? operand_index(group, conv.inputs[2], OperandRole::kInput) : -1;
    k->y_ = operand_index(group, cur, OperandRole::kOutput);
    if (k->x_ < 0 || k->w_ < 0 || k->y_ < 0 || (bias && k->bias_operand_ < 0)) return nullptr;
    k->ci_ = ci;
    k->co_ = co;
    const int64_t panels = (co + kPanel - 1) / kPanel;
    k->tiles_ = work_chunks(ci * co, panels, kMinTileMacs);
    k->sum_panels_ = pick_sum_panels();
    // w in panels: [o / 16][i][o % 16], zeros past co.
    k->panel_weights_.assign(static_cast<size_t>(panels * ci * kPanel), 0.f);
    for (int64_t o = 0; o < co; ++o)
      for (int64_t i = 0; i < ci; ++i)
        k->panel_weights_[static_cast<size_t>(((o / kPanel) * ci + i) * kPanel + o % kPanel)] = w[o * ci + i];
    k->bias_.assign(static_cast<size_t>(co), 0.f);
    if (bias) std::copy_n(bias, co, k->bias_.begin());
    return k;
  }

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    for (int64_t t = tile_begin; t < tile_end; ++t) run_tile(operands, t);
  }
  std::vector<int64_t> phase_tiles() const override { return {tiles_}; }
  int64_t scratch_bytes() const override { return 0; }
  std::string describe() const override {
    return "carve one-pixel conv " + std::to_string(ci_) + "->" + std::to_string(co_) +
           (tiles_ > 1 ? " x" + std::to_string(tiles_) + " channel chunks" : "");
  }
  bool reads_at_run(int32_t operand) const override { return operand != w_ && operand != bias_operand_; }

 private:
  // Tile t: panels [t * panels / tiles_, (t + 1) * panels / tiles_), in steps of four.
  void run_tile(void* const* operands, int64_t t) const {
    const int64_t panels = (co_ + kPanel - 1) / kPanel;
    const int64_t first = t * panels / tiles_, last = (t + 1) * panels / tiles_;
    const auto* x = static_cast<const float*>(operands[x_]);
    auto* y = static_cast<float*>(operands[y_]);
    alignas(64) float acc[4 * kPanel];
    for (int64_t p = first; p < last; p += 4) {
      const int64_t count = std::min<int64_t>(4, last - p);
      sum_panels_(panel_weights_.data() + p * ci_ * kPanel, x, ci_, count, acc);
      const int64_t begin = p * kPanel, end = std::min(co_, (p + count) * kPanel);
      for (int64_t o = begin; o < end; ++o) y[o] = bias_[static_cast<size_t>(o)] + acc[o - begin];
      activate_range(y, begin, end);
    }
  }
  // The epilogue on y[begin, end).
  void activate_range(float* y, int64_t begin, int64_t end) const {
    for (int64_t o = begin; o < end; ++o) {
      float before = y[o];
      for (const Activation& act : acts_) {
        if (act.op == ir::OpKind::kMul) {
          y[o] = before * y[o];
        } else {
          before = y[o];
          y[o] = static_cast<float>(activate(act, y[o]));
        }
      }
    }
  }
  int32_t x_ = -1, w_ = -1, bias_operand_ = -1, y_ = -1;
  int64_t ci_ = 0, co_ = 0, tiles_ = 1;
  std::vector<float> panel_weights_, bias_;
  SumPanelsFn sum_panels_ = nullptr;
  std::vector<Activation> acts_;
};

}  // namespace

std::unique_ptr<LibraryKernel> make_pixel_conv(const ir::Graph& graph, const KernelGroup& group,
                                               const ConstantBytes& constant_bytes) {
  return PixelConv::make(graph, group, constant_bytes);
}

}  // namespace carve::jit::dnnl_kernels
