// Library kernels: a kernel group run by a well-kept library instead of generated code.
// Today one provider: oneDNN (Debian's libdnnl, when the build has it, CARVE_WITH_DNNL)
// for f32 convolutions with their fused activation and residual add, f32 matmuls of 16 or
// more rows with a constant weight (bias, activation, residual add), and, on its blocked
// layout only, squeeze-excite's pool and channel scale; pools on that layout are carve's own
// loops (oneDNN's were slower), and so are inference batch norm, relu and concat copies in
// either layout (compiled ahead of time: nothing for the JIT to compile). No library types
// here.
//
// Contract:
//  - make_library_kernel looks at one group (anchor + fused epilogue, kernel.h) and either
//    takes it, or declines (a null kernel) and the JIT generates it as before. It declines
//    whatever it cannot run exactly: other dtypes, epilogue nodes with no library
//    equivalent, weights without bytes, a library that picks a slow reference path.
//  - Taking a group does the work that depends only on constants now, at compile time:
//    the weights are reordered into the library's blocked layout once (owned by the kernel;
//    reads_at_run says which operands it no longer needs).
//  - run() keeps the kernel ABI (kernel.h): operands in the group's order (the scratch
//    operand last), tiles [tile_begin, tile_end); the group's scratch must hold
//    scratch_bytes() (the caller sets KernelGroup::scratch_bytes/num_tiles before planning).
//  - Phases: the tiles are numbered phase after phase (phase_tiles()); the tiles of one
//    phase are independent, and every tile of a phase must run after every tile of the
//    phases before it (the runtime launches each phase separately: both write the scratch,
//    so the hazard scheduler orders them).
//  - Threads: the library runs single-threaded inside run() (its own OpenMP pool is held
//    at one thread), so only carve's scheduler decides what runs in parallel.
//  - Determinism: an output element is computed by one library call whose shape does not
//    depend on the thread count, so any thread count writes the same bytes.
//  - Errors: never throws; a library failure while taking a group is a decline.
// Thread-safety: run() may be called from any thread, concurrently on disjoint tile ranges.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "carve/jit/kernel.h"

namespace carve::jit {

class LibraryKernel {
 public:
  virtual ~LibraryKernel() = default;
  virtual void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const = 0;
  virtual std::vector<int64_t> phase_tiles() const = 0;  // tiles per phase, in order
  virtual int64_t scratch_bytes() const = 0;
  // What runs, e.g. "oneDNN 2.6.3 jit:avx512_core x2 channel chunks".
  virtual std::string describe() const = 0;

  // Layouts between library kernels. A value may be kept in a blocked layout of the same
  // bytes (e.g. "nChw16c", or "nhwc") instead of its plain row-major one when its producer
  // and every reader are library kernels naming the same layout for it (the runtime
  // decides, with the whole graph in view, and calls use_blocked on each before reading
  // phase_tiles or scratch_bytes). Default: plain only.
  virtual std::string blocked_layout(int32_t /*operand*/) const { return {}; }
  // Whether the kernel beats the generated one with exactly these operands kept blocked
  // (the rest plain: layout reorders it must do): the runtime drops it otherwise. A kernel
  // for a group the generated kernels cannot run (a conv and its transpose) is offered
  // only when worth it with every operand plain and stays worth it with more kept.
  virtual bool worth_it(const std::vector<int32_t>& /*blocked_operands*/) const { return true; }
  virtual void use_blocked(int32_t /*operand*/) {}
  // Whether the kernel runs as fast with each operand in either layout (converting where an
  // input and its result differ): the runtime then keeps its values blocked only where they
  // join a kernel that gains from the blocked layout.
  virtual bool any_layout() const { return false; }
  // Whether run() reads the operand. A kernel that copied a constant operand's bytes when
  // it took the group (weights reordered into its layout) does not read it again: the
  // runtime frees that constant when no other launch reads it.
  virtual bool reads_at_run(int32_t /*operand*/) const { return true; }
};

// The bytes of a graph constant, or nullptr when it has none.
using ConstantBytes = std::function<const void*(ir::ValueId)>;

// Takes `group` (a null kernel: declined).
std::unique_ptr<LibraryKernel> make_library_kernel(const ir::Graph& graph, const KernelGroup& group,
                                                   const ConstantBytes& constant_bytes);

// "oneDNN 2.6.3", or "" when the build has no library provider.
std::string library_provider_name();

// The layout library kernels keep values in between each other on this CPU: "nChw16c"
// where the library runs 16-channel blocked direct convolutions (oneDNN on AVX-512),
// "nChw8c" where its blocked kernels use 8-channel blocks (AVX2); with it they take
// depthwise convolutions too (which pay only without reorders). "" when there is none (no
// provider, or no blocked kernels): the library's convolutions read and write NCHW.
std::string library_blocked_layout();
// Channels per block of library_blocked_layout() (16 or 8), 0 when there is none. With one
// image, a slice of whole blocks of a blocked tensor is the blocked tensor of those channels,
// byte for byte: what lets a concat folded into views keep its inputs blocked.
int64_t library_channel_block();

}  // namespace carve::jit
