// DynamicProgram: what Session::compile(GraphSource) returns — one compiled object that
// runs at whatever input shapes the caller brings.
//
//   std::shared_ptr<onnx::Model> model = std::move(*onnx::Model::load_file("bert.onnx"));
//   auto program = (*session)->compile(model);                 // once
//   auto out32 = (*program)->run({ids32, mask32});             // specialises for [1,32]
//   auto out128 = (*program)->run({ids128, mask128});          // specialises for [1,128]
//   auto again = (*program)->run({ids32, mask32});             // the [1,32] program, cached
//
// How: one specialisation per input signature. A run looks up the source's key for its
// inputs (graph_source.h); a miss asks the source for the graph and compiles it with the
// options given to compile(), in a Session that shares the compiling Session's JIT, so a
// kernel any earlier specialisation (or an earlier process, through the disk cache)
// compiled is not compiled again. Up to CompileOptions::max_specialisations programs are
// kept, least recently used evicted first. Cost of a new shape (import, plan, the kernels
// that differ) and of a cached one: docs/benchmarks.md, "Dynamic shapes".
//
// Contract
//  - compile() checks the source's names and the options; it compiles nothing (the first
//    run at a signature does; specialise() does it ahead of a run).
//  - run(): inputs are CPU buffers, one per GraphSource::input_names() entry in that
//    order, used in place; outputs are returned (Owned) in output_names() order. Inputs
//    the specialisation took as constants are not bound. A wrong input count is
//    kInvalidArgument; otherwise errors are the source's and the program's (session.h).
//  - Ownership: the DynamicProgram shares the source and the Session's JIT and device
//    (it may outlive the Session); it owns the cached programs. A program handed out by
//    specialise() stays valid after eviction.
//  - Thread-safety: all members may be called concurrently. One mutex guards the source
//    and the cache: a miss specialises and compiles holding it (concurrent runs wait);
//    the program runs outside it (one CompiledProgram runs one call at a time).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "carve/runtime/graph_source.h"
#include "carve/runtime/session.h"

namespace carve::runtime {

struct DynamicProgramStats {
  int64_t runs = 0;
  int64_t hits = 0;             // runs that found their program cached
  int64_t specialisations = 0;  // programs compiled (misses that succeeded)
  int64_t evictions = 0;        // programs dropped by the bound or by a source that learned
  size_t cached = 0;            // programs kept now
};

class DynamicProgram {
 public:
  ~DynamicProgram();
  Result<std::vector<Buffer>> run(std::span<const Buffer> inputs, const RunOptions& options = {},
                                  RunRecord* record = nullptr);
  // The program for these inputs, compiled now on a miss (explain(), types, caller outputs).
  Result<std::shared_ptr<CompiledProgram>> specialise(std::span<const Buffer> inputs);

  const std::vector<std::string>& input_names() const { return source_->input_names(); }
  const std::vector<std::string>& output_names() const { return source_->output_names(); }
  DynamicProgramStats stats() const;

 private:
  friend class Session;
  struct Entry {
    std::string key;
    std::shared_ptr<CompiledProgram> program;
  };
  DynamicProgram(std::unique_ptr<Session> session, std::shared_ptr<GraphSource> source, CompileOptions options);
  Result<std::shared_ptr<CompiledProgram>> find_or_compile_locked(std::span<const Buffer> inputs);

  std::unique_ptr<Session> session_;  // shares the creating Session's JIT and device
  std::shared_ptr<GraphSource> source_;
  CompileOptions options_;
  mutable std::mutex mutex_;
  std::list<Entry> cache_;  // most recently used first
  DynamicProgramStats stats_;
};

}  // namespace carve::runtime
