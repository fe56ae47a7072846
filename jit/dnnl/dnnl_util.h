// Helpers shared by the oneDNN library kernels (jit/dnnl/*.cpp). oneDNN headers only in
// jit/dnnl/.
#pragma once

#include <omp.h>

#include <cstdint>
#include <dnnl.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "carve/jit/library_kernel.h"
#include "carve/jit/tiles.h"

namespace carve::jit::dnnl_kernels {

using dnnl::algorithm;
using dnnl::memory;
using Tag = dnnl::memory::format_tag;

dnnl::engine& cpu_engine();

// Holds oneDNN's OpenMP team at one thread for calls from this thread (carve schedules the
// parallel work), restoring the caller's setting after: an application's own OpenMP use on
// this thread keeps its thread count. Needed around creating a primitive as well as running
// it: a primitive fixes its thread count when it is created, and one created for two
// threads runs an OpenMP team of two whatever the setting at run time (efficientnet_b0
// took 84 ms instead of 13 with its reorders created unguarded).
class OneOmpThread {
 public:
  OneOmpThread() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~OneOmpThread() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int previous_;
};

inline int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

// Index of `v` among the group's operands of `role`, or -1.
int32_t operand_index(const KernelGroup& group, ir::ValueId v, OperandRole role);
// The scratch operand's index when the group has one: after every input and output.
int32_t scratch_operand_index(const KernelGroup& group);

// A memory object of `md` over `handle`, from this thread's cache (keyed by the descriptor
// and `slot`: a call's arguments take distinct slots). Creating one per call cost an
// aligned allocation and oneDNN's checks, about 1 us: ~10 % of regnet_y_400mf's run at 1
// thread went to memory objects and malloc. The object is this thread's until its next
// bound_memory call with the same descriptor and slot.
memory bound_memory(const memory::desc& md, void* handle, int slot);

// One reorder between a plain NCHW tensor and the layout oneDNN chose (absent when equal).
struct Reorder {
  std::optional<dnnl::reorder> prim;
  void run(dnnl::stream& s, const memory::desc& from_md, void* from, const memory::desc& to_md, void* to) const;
};
Reorder make_reorder(const memory::desc& from, const memory::desc& to);

// The plain or channel-blocked tag `md` is in, if any.
std::optional<Tag> tag_of(const memory::desc& md);

// The input reorder into a conv's layout: from NCHW, one image in up to four slices that
// run in parallel, each at least 128 KiB: slices of whole channel blocks (the last may be
// partial) into nChw16c or nChw8c, of whole rows into NHWC, each contiguous in the target;
// from the blocked layout (a value kept so for the conv's neighbours), one slice. As one tile it
// left the second thread idle: regnet_y_400mf, whose grouped convs reorder their inputs into
// nChw8c, ran 3.91 ms at 2 threads with one slice and 3.74 with these (1 thread: the same).
struct InputSlice {
  Reorder reorder;
  memory::desc from, to;
  int64_t from_offset = 0, to_offset = 0;  // bytes
};
std::vector<InputSlice> input_slices(const memory::desc& from, const memory::desc& target);

// oneDNN's channel-blocked layout on this CPU: nChw16c where its blocked direct convolutions
// are AVX-512 code, nChw8c where they are AVX2 (probed once, by asking for a 3x3 conv in
// each). `available` is false when neither gets a JIT kernel: then every library kernel
// reads and writes NCHW. A [1, C, 1, 1] tensor, or a slice of whole blocks of one image,
// has the same bytes in NCHW and in the blocked layout.
struct ChannelBlocking {
  int64_t block = 16;
  Tag tag = Tag::nChw16c;
  std::string name = "nChw16c";
  bool available = false;
};
const ChannelBlocking& channel_blocking();

// A group's epilogue as oneDNN post-ops.
struct Epilogue {
  dnnl::post_ops ops;
  ir::ValueId residual = ir::kNoValue;  // the add's other operand
  ir::ValueId result = ir::kNoValue;    // the chain's last value
};

// The epilogue nodes group.nodes[first...], each reading the chain's current value (from
// `start`, of the result's type): relu, clip, sigmoid, silu, tanh, x * sigmoid(x) (swish),
// x * hard_sigmoid(x) with alpha 1/6 and beta 1/2 (hard-swish), add of a tensor of the
// result's type (a `sum` post-op, at most one); nullopt when a node has no equivalent.
std::optional<Epilogue> map_epilogue(const ir::Graph& graph, const KernelGroup& group, size_t first,
                                     ir::ValueId start);
// The same over group.nodes[first, end).
std::optional<Epilogue> map_epilogue(const ir::Graph& graph, const KernelGroup& group, size_t first, size_t end,
                                     ir::ValueId start);

// Whether oneDNN picked one of its JIT-compiled kernels: never its reference or
// im2col-GEMM fallbacks, which carve's generated kernels beat.
bool jit_implementation(const dnnl::primitive_desc_base& pd);

// Executing primitives created without error does not fail; if it ever does, carve stops
// rather than leave a wrong result.
[[noreturn]] void run_failed(const char* what, const dnnl::error& err);

// An f32 [1, C, H, W] tensor of whole channel blocks (channel_blocking() available): one
// the blocked-only kernels below can take.
bool is_f32_nchw_one_image(const ir::TensorType& t);
// An f32 [1, C, H, W] tensor, any C (NHWC holds every channel count).
bool is_f32_one_image(const ir::TensorType& t);

// When oneDNN's conv beats carve's generated kernel, by measurement (docs/benchmarks.md,
// "oneDNN convolutions", single layers at 1 thread): its kernels run at about the same
// speed as carve's best or faster, but every reorder between NCHW and its blocked layout
// costs. A reorder moves one element per element of its tensor: the input's C * H * W
// against the conv's C * O/groups * KH * KW * OH * OW multiply-adds is stride^2 / (O/groups
// * KH * KW) per multiply-add, the result's (and a residual's) 1 / (C/groups * KH * KW).
// Worth it while the reorders it still needs stay under 0.015 per multiply-add: a 3x3
// conv of 64 channels with both (0.0035) yes; a 1x1 conv 32->192 at 56x56 with both (0.036:
// 0.63 ms vs 0.39 generated) no, but with its result kept blocked for the next library
// conv (0.005) yes; a depthwise conv (1/9 a side) only with neither.
inline constexpr double kReorderBudgetPerMac = 0.015;
// Grouped convs (regnet's 8-channel groups) are another matter: carve's implicit GEMM per
// group has 8 output rows and runs at 15-19 GFLOP/s against oneDNN's ~90 (nChw8c), so
// both reorders (1/72 a multiply-add each for 3x3, 8 channels a group) pay for themselves.
inline constexpr double kGroupedReorderBudgetPerMac = 0.1;

// Chunks of a kernel's work: up to 8 (an even count where it can be), at most `units`,
// each of at least `min_macs` multiply-adds; from the shape alone, never the thread count.
int64_t work_chunks(int64_t macs, int64_t units, int64_t min_macs);
// The least work a conv's chunk has (~10 us): 1M multiply-adds; 100K for a depthwise conv,
// which runs about ten times fewer per second; 500K for a grouped one (regnet_y_400mf's
// 8-channel groups at 7x7 ran 1.55M in about 50 us).
int64_t min_chunk_macs(const tiling::ConvShape& c);
// The weights of a chunk of `channels` output channels: grouped (goihw) when groups > 1.
memory::dims conv_weight_dims(const tiling::ConvShape& c, bool depthwise, int64_t channels);
// A stem on an image (a dense conv with a window over at most four channels) summing at most
// 27 products per output (3x3 over RGB): carve's implicit GEMM runs so short a sum at a
// third of oneDNN's speed on AVX-512 (mnasnet1_0's 3 -> 32 stem 0.385 ms generated against
// ORT's 0.138; oneDNN with its result reordered to NCHW about 0.2), so it is worth any
// reorder there when its result stays in the library's layout. Medians at 1 thread:
// mobilenet_v3_small 1.14 -> 0.96 ms, mobilenet_v3_large 3.94 -> 3.69, mnasnet1_0 4.40 ->
// 4.24, regnet_y_400mf 6.82 -> 6.59, mobilenet_v2 4.08 -> 4.02, efficientnet_b0 7.42 ->
// 7.33; inception_v3 within noise. shufflenet_v2_x1_0's 3 -> 24 (not whole blocks) lost 25 %.
bool image_stem(const tiling::ConvShape& c);

// A conv kernel's tiles: phase 0 (absent when oneDNN reads the input as it is) reorders
// the input into scratch in `input_slices_`, phase 1 runs its chunks (run_chunk), each a
// single-threaded oneDNN call of its own; a library failure stops carve.
class TwoPhaseConvKernel : public LibraryKernel {
 public:
  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override;
  std::vector<int64_t> phase_tiles() const override;
  int64_t scratch_bytes() const override { return scratch_bytes_; }
  bool reads_at_run(int32_t operand) const override;  // not the weights or bias it copied

 protected:
  // Binds the operands of `group`, whose first node is the conv and whose epilogue `e`
  // gives the result and residual, and the reorder costs of its shape; false where the
  // group does not fit (another output, an operand missing).
  bool bind_conv(const ir::Graph& graph, const KernelGroup& group, const Epilogue& e);
  virtual int64_t num_chunks() const = 0;
  virtual void run_chunk(dnnl::stream& s, void* const* operands, int64_t chunk) const = 0;
  int64_t input_tiles() const { return static_cast<int64_t>(input_slices_.size()); }
  std::byte* scratch(void* const* operands) const {
    return static_cast<std::byte*>(scratch_bytes_ > 0 ? operands[scratch_index_] : nullptr);
  }
  // "oneDNN 2.6.3 <impl> x4 <unit> chunks".
  std::string describe_chunks(const std::string& impl, const char* unit) const;
  // " input residual output": those kept in the library's layout.
  static std::string kept_operands(bool input, bool residual, bool output);
  // Scratch: [the input as phase 0 writes it][chunk 0's slot][chunk 1's slot]..., a slot
  // holding the chunk's result (where it is not written in place) and oneDNN's scratchpad.
  void lay_out_scratch(int64_t input_bytes, int64_t slot_bytes) {
    chunk_offset_ = align64(input_bytes);
    chunk_stride_ = slot_bytes;
    scratch_bytes_ = chunk_offset_ + num_chunks() * chunk_stride_;
  }
  std::byte* chunk_slot(void* const* operands, int64_t chunk) const {
    return scratch(operands) + chunk_offset_ + chunk * chunk_stride_;
  }

  std::vector<InputSlice> input_slices_;  // phase 0: the input (operand x_index_) into scratch
  int32_t x_index_ = -1, out_index_ = -1, residual_index_ = -1, scratch_index_ = -1;
  int32_t weights_index_ = -1, bias_index_ = -1;  // copied when taken
  // A reorder's elements per multiply-add: of the input (stride^2 / (O/groups * KH * KW)),
  // and of the result or a residual (1 / (C/groups * KH * KW)).
  double input_cost_ = 0, output_cost_ = 0;

 private:
  int64_t chunk_offset_ = 0, chunk_stride_ = 0, scratch_bytes_ = 0;
};

// A kernel whose `blocked_operands_` (its [1, C, H, W] ones) must all stay blocked: carve's
// generated kernels, which read NCHW, are as fast as it without the reorders it would need.
// Tiles: tiles_ independent ones in one phase; no scratch.
class BlockedOnlyKernel : public LibraryKernel {
 public:
  std::vector<int64_t> phase_tiles() const override { return {tiles_}; }
  int64_t scratch_bytes() const override { return 0; }
  std::string blocked_layout(int32_t operand) const override;
  bool worth_it(const std::vector<int32_t>& blocked) const override;

 protected:
  // Runs body(stream, t) for each tile t of [tile_begin, tile_end) on one OpenMP thread; a
  // library failure stops carve (run_failed, naming `what`).
  template <class Body>
  void run_tiles(const char* what, int64_t tile_begin, int64_t tile_end, const Body& body) const {
    OneOmpThread one_thread;
    try {
      dnnl::stream s(cpu_engine());
      for (int64_t t = tile_begin; t < tile_end; ++t) body(s, t);
      s.wait();
    } catch (const dnnl::error& err) {
      run_failed(what, err);
    }
  }
  // Cuts `units` (channel blocks, or rows in NHWC) into tiles_ = 4, 2 or 1 chunks of whole
  // units, each of at least min_chunk of `elements`, by the shape alone: equal ones where
  // `equal`, else as even as they go (sizes q and q + 1).
  void split_units(int64_t units, int64_t elements, int64_t min_chunk, bool equal);
  // Chunk t's first unit and its count of them.
  std::pair<int64_t, int64_t> chunk_units(int64_t t) const {
    const int64_t first = t * units_ / tiles_;
    return {first, (t + 1) * units_ / tiles_ - first};
  }
  // The fewest units a chunk has (the others have one more).
  int64_t min_chunk_units() const { return units_ / tiles_; }
  // "<what> x4 channel chunks, nChw8c <blocked>".
  std::string describe_tiles(const std::string& what, const char* blocked) const;

  std::vector<int32_t> blocked_operands_;
  int64_t tiles_ = 1, units_ = 1;
  std::string layout_name_;  // the layout kept: channel_blocking()'s when empty, or "nhwc"
};

// Whether library kernels keep values in NHWC between each other instead of the channel-
// blocked layout: a graph with grouped convs whose groups are not whole 16-channel blocks,
// on a CPU whose blocked layout is nChw16c (conv_nhwc.cpp).
bool nhwc_graph(const ir::Graph& graph);

// The kernels (nullptr: declined).
std::unique_ptr<LibraryKernel> make_conv(const ir::Graph& graph, const KernelGroup& group,
                                         const ConstantBytes& constant_bytes);
// A conv in NHWC (nhwc_graph), in chunks of output rows.
std::unique_ptr<LibraryKernel> make_nhwc_conv(const ir::Graph& graph, const KernelGroup& group,
                                              const ConstantBytes& constant_bytes);
std::unique_ptr<LibraryKernel> make_matmul(const ir::Graph& graph, const KernelGroup& group,
                                           const ConstantBytes& constant_bytes);
std::unique_ptr<LibraryKernel> make_global_average_pool(const ir::Graph& graph, const KernelGroup& group);
std::unique_ptr<LibraryKernel> make_channel_scale(const ir::Graph& graph, const KernelGroup& group);
std::unique_ptr<LibraryKernel> make_pool(const ir::Graph& graph, const KernelGroup& group);
// A 1x1 conv of one pixel with its activation (pixel_conv.cpp).
std::unique_ptr<LibraryKernel> make_pixel_conv(const ir::Graph& graph, const KernelGroup& group,
                                               const ConstantBytes& constant_bytes);
// Carve's own loops in either layout (either_layout.cpp).
// Batch norm (constant parameters) and relu.
std::unique_ptr<LibraryKernel> make_channel_map(const ir::Graph& graph, const KernelGroup& group,
                                                const ConstantBytes& constant_bytes);
std::unique_ptr<LibraryKernel> make_concat(const ir::Graph& graph, const KernelGroup& group);

}  // namespace carve::jit::dnnl_kernels
