// `carve compile MODEL... --device cuda --dry-run [--arch sm_80,sm_90]`: generate and
// NVRTC-compile every CUDA kernel of a model without a GPU (cuda_dry_run.h: the same
// device program, kernel groups and CPU placement a cuda Session builds).
//
//   carve compile model.onnx --device cuda --dry-run                 # sm_80 and sm_90
//   carve compile a.onnx b.carve --device cuda --dry-run --arch sm_75,sm_90 --json report.json
//   carve compile model.onnx --device cuda --dry-run --place relu_3=cpu
//
// Both GEMM paths are compiled: the generated kernel and, for groups cuBLASLt can run, the
// im2col/epilogue kernels around it (which one a Session takes depends on the machine).
// Per model it prints the kernels generated, their distinct sources, how many compiled for
// each arch and how many came from NVRTC's caches, the time, and every node placed on the
// CPU with the reason (--place NODE=cpu, the one way the CUDA path puts a node there: an
// op the CUDA generator rejects fails a cuda Session's compile, so it fails here too).
// Exit 0 when every kernel compiles for every arch; 1 otherwise, each failed kernel named
// on the error stream (index in the program, group, nodes, arch, NVRTC's log head); 2 for
// usage errors. --json FILE writes the same report.
//
// --input NAME=FILE.npy fixes an ONNX model's symbolic dims from the file's header (as
// `carve run`; unset ones are 1), for every model given. Compiled kernels are cached on
// disk where a cuda Session caches them ($CARVE_CACHE_DIR; none when unset), --no-cache
// turns that off. Without NVRTC: kUnavailable. Without --dry-run the kernels are compiled
// for and loaded on CUDA device 0 through a cuda Session; without a device that fails
// saying to pass --dry-run. --device cpu is not supported (kUnsupported: `carve run`
// compiles for the CPU). --nvrtc-option OPT (debug) passes an NVRTC option verbatim.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace carve::cli {

struct CompileCommandOptions {
  std::vector<std::string> models;      // text-format graphs or .onnx models
  std::string device = "cuda";          // "cuda" or "cpu"
  bool dry_run = false;
  std::vector<std::string> archs;       // empty: sm_80 and sm_90
  std::vector<std::string> inputs;      // NAME=FILE.npy: shapes for symbolic dims
  std::vector<std::string> place;       // NODE=cpu|cuda (CompileOptions::placement)
  int compile_threads = 0;              // NVRTC compiles at once (0 = hardware concurrency)
  bool no_cache = false;                // no NVRTC disk cache
  std::string json_path;
  std::vector<std::string> nvrtc_options;  // debug: extra NVRTC options, verbatim
};

int run_compile_command(const CompileCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace carve::cli
