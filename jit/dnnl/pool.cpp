// Max and average pooling on the blocked layout of oneDNN's convolutions (nChw16c or nChw8c:
// channel_blocking()), so that a pool between library convs (a CNN stem; GoogLeNet's and
// SqueezeNet's pools after a concat) keeps the values on both sides blocked
// (library_kernel.h). Taken only with its input and result kept blocked (BlockedOnlyKernel):
// carve's generated pools read NCHW as fast, with no reorder.
//
// The loops are carve's own, not oneDNN's pooling: at GoogLeNet's shapes on one AVX2 core
// oneDNN 2.6.3's jit:avx2 max pool took 0.84 ms for the stem pool (64 x 112 x 112, 3 x 3
// stride 2) and its 13 pools 5.6 ms, against 2.1 ms for carve's generated NCHW pools
// (docs/benchmarks.md, "Pools on the blocked layout"). Here each output pixel of a channel
// block is one vector of `block` lanes, the max (or sum) of its window's vectors.
//
// Semantics are the reference's: a max pool propagates NaN and never sees the padding; an
// average divides by the window's elements inside the input, or with count_include_pad by
// the window clipped to the padded extent (ceil_mode's extra windows reach past it).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

std::array<int64_t, 4> ints_attr(const ir::Node& node, const char* name, std::array<int64_t, 4> fallback,
                                 size_t count) {
  auto it = node.attrs.find(name);
  if (it == node.attrs.end() || !it->second.is_ints() || it->second.as_ints().size() != count) return fallback;
  std::copy_n(it->second.as_ints().begin(), count, fallback.begin());
  return fallback;
}

bool flag_attr(const ir::Node& node, const char* name) {
  auto it = node.attrs.find(name);
  return it != node.attrs.end() && it->second.is_int() && it->second.as_int() != 0;
}

struct Window {
  int64_t h = 0, w = 0, oh = 0, ow = 0;  // input and output spatial extents
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
};

// The loops below run on vectors of lanes of a channel block (GCC and Clang vector
// extensions): 16 lanes compiled for AVX-512 where the CPU has it (a 16-channel block is one
// vector; at 1 thread inception_v3's average pools 0.82 -> 0.60 ms, googlenet's max pools
// 0.76 -> 0.66), 8 compiled for AVX2, else 4 (SSE, x86-64's baseline, or another target's
// own).
template <int N>
struct Lanes;
template <>
struct Lanes<4> {
  typedef float F __attribute__((vector_size(16)));
};
template <>
struct Lanes<8> {
  typedef float F __attribute__((vector_size(32)));
};
template <>
struct Lanes<16> {
  typedef float F __attribute__((vector_size(64)));
};

// One chunk of `blocks` channel blocks of B lanes: x [blocks][h][w][B] -> y [blocks][oh][ow][B],
// in vectors of N lanes. A max pool's max is NaN when either operand is (the reference's).
// K > 0: the window is K x K, and the outputs whose window lies inside the input take a path
// with the window's loops unrolled. Always inlined, so that a caller compiled for AVX2
// compiles it for AVX2 too.
template <int B, int N, bool Max, int K>
[[gnu::always_inline]] inline void pool_blocks(const float* x, float* y, int64_t blocks, const Window& win,
                                               bool include_pad) {
  using F = typename Lanes<N>::F;
  constexpr int V = B / N;
  // A max is `acc > e ? acc : e` (one maxps); `nan` keeps a NaN the lane saw (a select: GCC
  // 12 compiles an int-vector compare at 16 lanes lane by lane, six times slower), which
  // replaces the max at the end.
  auto combine = [](F* acc, F* nan, const float* in) {
    for (int v = 0; v < V; ++v) {
      F e;
      std::memcpy(&e, in + N * v, sizeof e);
      if constexpr (Max) {
        acc[v] = acc[v] > e ? acc[v] : e;
        nan[v] = e == e ? nan[v] : e;
      } else {
        acc[v] += e;
      }
    }
  };
  for (int64_t cb = 0; cb < blocks; ++cb) {
    const float* xp = x + cb * win.h * win.w * B;
    float* yp = y + cb * win.oh * win.ow * B;
    for (int64_t oy = 0; oy < win.oh; ++oy) {
      const int64_t y0 = oy * win.sh - win.pt;
      const int64_t ylo = std::max<int64_t>(y0, 0), yhi = std::min(y0 + win.kh, win.h);
      for (int64_t ox = 0; ox < win.ow; ++ox) {
        const int64_t x0 = ox * win.sw - win.pl;
        const int64_t xlo = std::max<int64_t>(x0, 0), xhi = std::min(x0 + win.kw, win.w);
        F acc[V], nan[V] = {};
        for (int v = 0; v < V; ++v) acc[v] = Max ? F{} - INFINITY : F{};
        if (K > 0 && yhi - ylo == K && xhi - xlo == K) {
          for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) combine(acc, nan, xp + ((ylo + ky) * win.w + xlo + kx) * B);
        } else {
          for (int64_t iy = ylo; iy < yhi; ++iy)
            for (int64_t ix = xlo; ix < xhi; ++ix) combine(acc, nan, xp + (iy * win.w + ix) * B);
        }
        if constexpr (Max) {
          for (int v = 0; v < V; ++v) acc[v] = nan[v] == nan[v] ? acc[v] : nan[v];
        } else {
          const int64_t count = include_pad ? (std::min(y0 + win.kh, win.h + win.pb) - y0) *
                                                  (std::min(x0 + win.kw, win.w + win.pr) - x0)
                                            : (yhi - ylo) * (xhi - xlo);
          const float scale = 1.f / static_cast<float>(std::max<int64_t>(count, 1));
          for (int v = 0; v < V; ++v) acc[v] *= scale;
        }
        std::memcpy(yp + (oy * win.ow + ox) * B, acc, sizeof acc);
      }
    }
  }
}

using PoolFn = void (*)(const float* x, float* y, int64_t blocks, const Window& win, bool include_pad);

template <int B, bool Max, int K>
void pool_blocks_sse(const float* x, float* y, int64_t blocks, const Window& win, bool include_pad) {
  pool_blocks<B, 4, Max, K>(x, y, blocks, win, include_pad);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CARVE_POOL_AVX2 1
template <int B, bool Max, int K>
[[gnu::target("avx2")]] void pool_blocks_avx2(const float* x, float* y, int64_t blocks, const Window& win,
                                              bool include_pad) {
  pool_blocks<B, 8, Max, K>(x, y, blocks, win, include_pad);
}
template <int B, bool Max, int K>
[[gnu::target("avx512f")]] void pool_blocks_avx512(const float* x, float* y, int64_t blocks, const Window& win,
                                                   bool include_pad) {
  pool_blocks<B, 16, Max, K>(x, y, blocks, win, include_pad);
}
#endif

template <int B, bool Max, int K>
PoolFn pick_isa() {
#ifdef CARVE_POOL_AVX2
  if constexpr (B == 16) {
    if (__builtin_cpu_supports("avx512f")) return pool_blocks_avx512<B, Max, K>;
  }
  if (__builtin_cpu_supports("avx2")) return pool_blocks_avx2<B, Max, K>;
#endif
  return pool_blocks_sse<B, Max, K>;
}

// Unrolled windows for the common 3 x 3 and 2 x 2 pools.
template <int B, bool Max>
PoolFn pick_window(const Window& win) {
  if (win.kh == 3 && win.kw == 3) return pick_isa<B, Max, 3>();
  if (win.kh == 2 && win.kw == 2) return pick_isa<B, Max, 2>();
  return pick_isa<B, Max, 0>();
}

template <int B>
PoolFn pick_pool(bool max, const Window& win) {
  return max ? pick_window<B, true>(win) : pick_window<B, false>(win);
}

// out = pool(x); chunks of whole channel blocks as tiles (each channel's window is its own).
class Pool final : public BlockedOnlyKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group) {
    if (group.nodes.size() != 1) return nullptr;
    const ir::Node& node = graph.node(group.nodes.front());
    if (node.inputs.size() != 1 || node.outputs.size() != 1) return nullptr;
    const ir::TensorType& in = graph.value(node.inputs[0]).type;
    const ir::TensorType& out = graph.value(node.outputs[0]).type;
    if (!is_f32_nchw_one_image(in) || out.dtype != in.dtype || out.shape.rank() != 4) return nullptr;
    const int64_t block = channel_blocking().block;
    if (block != 8 && block != 16) return nullptr;
    const auto kernel = ints_attr(node, "kernel", {0, 0, 0, 0}, 2);
    const auto strides = ints_attr(node, "strides", {1, 1, 0, 0}, 2);
    const auto pads = ints_attr(node, "pads", {0, 0, 0, 0}, 4);
    if (kernel[0] < 1 || kernel[1] < 1 || strides[0] < 1 || strides[1] < 1) return nullptr;
    auto k = std::make_unique<Pool>();
    k->win_ = {in.shape[2], in.shape[3], out.shape[2], out.shape[3], kernel[0], kernel[1], strides[0], strides[1],
               pads[0], pads[1], pads[2], pads[3]};
    k->max_ = node.op == ir::OpKind::kMaxPool;
    k->include_pad_ = !k->max_ && flag_attr(node, "count_include_pad");
    k->block_ = block;
    k->fn_ = block == 16 ? pick_pool<16>(k->max_, k->win_) : pick_pool<8>(k->max_, k->win_);
    k->x_ = operand_index(group, node.inputs[0], OperandRole::kInput);
    k->y_ = operand_index(group, node.outputs[0], OperandRole::kOutput);
    if (k->x_ < 0 || k->y_ < 0) return nullptr;
    k->blocked_operands_ = {k->x_, k->y_};
    const int64_t c = in.shape[1];
    k->split_units(c / block, c * k->win_.oh * k->win_.ow, 16384, /*equal=*/true);
    return k;
  }

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    // Chunk t: its channel blocks of x and of the result, one contiguous slice each.
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      const auto [first, blocks] = chunk_units(t);
      const float* x = static_cast<const float*>(operands[x_]) + first * block_ * win_.h * win_.w;
      float* y = static_cast<float*>(operands[y_]) + first * block_ * win_.oh * win_.ow;
      fn_(x, y, blocks, win_, include_pad_);
    }
  }
  std::string describe() const override {
    return describe_tiles(max_ ? "carve max pool" : "carve average pool", "input output");
  }

 private:
  Window win_;
  bool max_ = true, include_pad_ = false;
  int64_t block_ = 8;
  PoolFn fn_ = nullptr;
  int32_t x_ = -1, y_ = -1;
};

}  // namespace

std::unique_ptr<LibraryKernel> make_pool(const ir::Graph& graph, const KernelGroup& group) {
  return Pool::make(graph, group);
}

}  // namespace carve::jit::dnnl_kernels
