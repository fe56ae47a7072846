// CompileOptions: how Session::compile turns a graph into a program (session.h): planner
// strategy and order, in-place reuse and fusion, the handles and external constants to
// bind, placement of nodes on devices, and the schedule of the hazard DAG.
// A plain value type; copying it copies handle and buffer references, not bytes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "carve/runtime/buffer.h"
#include "carve/runtime/device.h"
#include "carve/runtime/handle.h"
#include "carve/runtime/schedule.h"

namespace carve::runtime {

struct CompileOptions {
  std::string strategy = "greedy-size";  // any planner strategy name
  std::string order = "given";           // "given" (topological, insertion order) | "memory"
  bool inplace = true;
  bool concat_views = true;              // concat inputs written straight into the output (planner)
  bool fuse = true;
  bool parallel_safe = false;            // no byte sharing between DAG-unordered buffers
  double plan_time_limit_seconds = 10.0;
  // Bound by name to the graph's handles. Two entries with one name, or a null entry:
  // kInvalidArgument. Entries the graph does not declare are ignored (one set may serve
  // several graphs); a declared handle with no entry is kInvalidArgument.
  std::vector<std::shared_ptr<BufferHandle>> handles{};
  // Execution (schedule.h). schedule.sequential = one launch after another in program order
  // (the DAG is still built, for statistics and the hazard checker); on a device, all
  // launches on one stream. schedule.threads 0 = the session's.
  ScheduleOptions schedule{};
  // Per-node placement by node name. Every named node must exist (kNotFound). A cuda
  // Session may place nodes on cpu (a mixed program, see above); a CPU Session placing a
  // node on cuda is kUnsupported.
  std::map<std::string, DeviceType> placement{};
  // Bytes for graph constants that carry no data, by value name, used in place (never
  // copied; the program keeps them alive), e.g. the mmapped external-data weights of an
  // ONNX import. Each must have the constant's dtype and shape (kTypeMismatch/kShapeError);
  // a key naming no graph constant is kNotFound, one naming a constant that has its data
  // kInvalidArgument (a misspelt key is never ignored).
  std::map<std::string, Buffer> constants{};
  // false: this compile neither reads nor writes the kernel disk cache (jit/kernel_cache.h;
  // SessionOptions::jit.disk_cache = false turns it off for the whole session).
  bool kernel_disk_cache = true;
  // Compile-time weight pre-packing (CPU programs): the constant 2-D f32/f64 B of a
  // matmul/gemm is packed once into the strip layout its kernel reads (jit/tiles.h: the
  // GEMV kernel's for m <= 4 rows, the GEMM micro-kernel's above), so no run packs or
  // transposes it. The packed copy replaces the
  // constant when this node is its only reader (else it is a new constant beside it). The
  // results are the same bytes either way; false keeps the weights as given.
  bool prepack_weights = true;
  // Library kernels (CPU programs; jit/library_kernel.h): an f32 conv2d group (with its
  // fused relu/clip/sigmoid/silu/tanh/hard-swish and residual add) runs through oneDNN
  // when the build has it (CARVE_WITH_DNNL) and oneDNN has a fast kernel for the shape;
  // its weights are reordered once, here. Results agree with the generated kernels
  // within rounding (another summation order), not bit for bit; either way they do not
  // depend on the thread count. false: every kernel is generated.
  bool library_kernels = true;
  // Session::compile(GraphSource) only (dynamic_program.h): compiled programs kept, one per
  // input signature, least recently used evicted; at least 1.
  size_t max_specialisations = 8;
};

}  // namespace carve::runtime
