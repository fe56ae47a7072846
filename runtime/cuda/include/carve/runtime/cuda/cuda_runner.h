// A minimal sequential GPU executor for tests, tools and scripts/gpu-check: runs a whole graph
// on one device with the same kernel groups as the CPU JIT (form_kernel_groups), one device
// buffer per stored value (no memory planning), views aliasing their input's buffer. Not the
// production runtime path (that is Program + an Allocator of device type kCuda).
// Errors: kUnavailable "no CUDA device: ..." without a GPU; codegen/NVRTC errors as theirs.
// Thread-safety: one call at a time per CudaContext is the simple rule (calls are synchronous).
#pragma once

#include <span>
#include <vector>

#include "carve/jit/cuda/cuda_codegen.h"
#include "carve/jit/cuda/nvrtc.h"
#include "carve/jit/fusion.h"
#include "carve/reference/reference.h"

namespace carve::runtime::cuda {

struct RunnerOptions {
  jit::cuda::CodegenOptions codegen;
  jit::FusionOptions fusion;
  jit::cuda::NvrtcOptions nvrtc;
  int device = 0;
};

// Inputs in graph-input value-id order (like run_reference); `handles` (optional) are read
// and written by name, a missing one starts as zeros. Returns the graph outputs.
Result<std::vector<reference::HostTensor>> run_graph(const ir::Graph& graph,
                                                     std::span<const reference::HostTensor> inputs,
                                                     reference::ReferenceHandles* handles = nullptr,
                                                     const RunnerOptions& options = {});

}  // namespace carve::runtime::cuda
