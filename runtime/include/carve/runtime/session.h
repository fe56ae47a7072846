// Session and CompiledProgram: carve's embedding API.
//
//   auto session = runtime::Session::create({});                 // CPU, hardware threads
//   auto program = (*session)->compile(graph, {.strategy = "best"});
//   auto outputs = (*program)->run(inputs);                       // or run(inputs, outputs)
//
// Contract
//  - compile() verifies the graph, chooses the execution order, forms kernel groups,
//    plans one arena (validated), materialises it as one Storage with a Buffer view per
//    planned value, JIT-compiles the kernels and builds the launch list.
//    Errors name the node/value: kVerifyError, kInvalidArgument (a constant without data,
//    a graph handle with no bound BufferHandle), kTypeMismatch/kShapeError (a bound handle
//    of another type), kUnavailable (a build without the CPU JIT), planner/JIT errors.
//  - run(): inputs are caller memory, used in place (Borrowed, no copy), one per graph
//    input in CompiledProgram::input_names() order, each of exactly the input's dtype
//    and shape. Outputs: caller-provided writable buffers of the outputs' types, or
//    returned as new Owned buffers. An output may not overlap an input. Errors leave
//    bound handles unchanged.
//  - Ownership: a CompiledProgram owns its arena, kernels (via the Session's JIT, which
//    it keeps alive) and a copy of the graph; it keeps bound handles alive.
//  - Thread-safety: Session::compile may be called concurrently. One CompiledProgram
//    runs one call at a time: concurrent run() calls on the same program serialise on
//    its internal lock (the arena is shared state); different programs run concurrently,
//    except that programs sharing a handle take that handle's lock for a whole run.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "carve/jit/jit.h"
#include "carve/runtime/program.h"

namespace carve::runtime {

struct SessionOptions {
  jit::JitOptions jit;
};

struct CompileOptions {
  std::string strategy = "greedy-size";  // any planner strategy name
  std::string order = "given";           // "given" (topological, insertion order) | "memory"
  bool inplace = true;
  bool fuse = true;
  bool parallel_safe = false;            // no byte sharing between DAG-unordered buffers
  double plan_time_limit_seconds = 10.0;
  std::vector<std::shared_ptr<BufferHandle>> handles;  // bound by name to graph handles
  // Bytes for graph constants that carry no data, by value name, used in place (never
  // copied; the program keeps them alive), e.g. the mmapped external-data weights of an
  // ONNX import. Each must have the constant's dtype and shape (kTypeMismatch/kShapeError).
  std::map<std::string, Buffer> constants;
};

class CompiledProgram {
 public:
  // Caller-provided outputs, filled in place.
  Status run(std::span<const Buffer> inputs, std::span<Buffer> outputs);
  // Returned outputs (Owned, CPU).
  Result<std::vector<Buffer>> run(std::span<const Buffer> inputs);

  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  std::vector<ir::TensorType> input_types() const;
  std::vector<ir::TensorType> output_types() const;

  // Bound handles, by name (kNotFound lists the bound names).
  Result<std::shared_ptr<BufferHandle>> handle(std::string_view name) const;
  Result<Buffer> read_handle(std::string_view name) const;
  Status write_handle(std::string_view name, const Buffer& value);

  const Program& program() const { return *program_; }
  const PlanSummary& plan_summary() const { return program_->plan_summary; }
  // Kernels, fused groups, the plan summary and JIT times, for `carve run --explain`.
  std::string explain() const;

 private:
  friend class Session;
  CompiledProgram(std::shared_ptr<jit::JitCompiler> jit, std::unique_ptr<Program> program)
      : jit_(std::move(jit)), program_(std::move(program)) {}
  Status check_run_args(std::span<const Buffer> inputs, std::span<Buffer> outputs) const;

  std::shared_ptr<jit::JitCompiler> jit_;  // keeps kernel code alive
  std::unique_ptr<Program> program_;
  std::mutex run_mutex_;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(const SessionOptions& options = {});
  Result<std::unique_ptr<CompiledProgram>> compile(const ir::Graph& graph, const CompileOptions& options = {});
  jit::JitStats jit_stats() const { return jit_->stats(); }

 private:
  explicit Session(std::shared_ptr<jit::JitCompiler> jit) : jit_(std::move(jit)) {}
  std::shared_ptr<jit::JitCompiler> jit_;
};

}  // namespace carve::runtime
