// onnx::Model: an ONNX model run at whatever input shapes (and shape-valued inputs) the
// caller brings, compiled once per specialisation and cached.
//
//   auto model = onnx::Model::load_file("bert.onnx");
//   auto out32 = (*model)->run(*session, {{"ids", ids32}, {"mask", mask32}});    // compiles
//   auto out128 = (*model)->run(*session, {{"ids", ids128}, {"mask", mask128}}); // compiles
//   auto again = (*model)->run(*session, {{"ids", ids32}, {"mask", mask32}});    // cached
//
// Why specialisations: carve's graphs are static (shapes fixed, shape arithmetic folded at
// import, memory planned per shape), so a Model keeps the serialized ModelProto and, per
// run, looks up a program by its key:
//   - the Session (by address), every given input's dtype and shape, and
//   - the bytes of the inputs the import needs as values: a graph input from which an
//     operand the importer must know is computed (the shape of a Reshape, Expand, Tile,
//     ConstantOfShape; Slice starts; Reduce axes; Clip min; Trilu k; ...).
// Which inputs those are is learned, not declared: an import that fails because such an
// operand is computed from graph inputs names them (import.h: the tracing of what each
// tensor is computed from, and the lowering's own demand for a constant), and is retried
// with their values (ImportOptions::input_values). The set only grows; learning an input
// drops the cached programs, whose keys lack it. This is exact for whatever ops the
// importer has, with no per-op table to keep in step.
// A miss imports at the key's shapes and values and compiles in the caller's Session:
// kernels whose code was compiled before (another shape's identical kernels, or an earlier
// process's through the disk cache) come from the JIT's kernel cache, so a new shape pays
// the import, planning and the kernels that differ. Cost: docs/benchmarks.md, "Dynamic
// shapes".
//
// Contract
//  - Ownership: a Model owns the model's bytes (read once at load; external-data weights
//    are mapped again per import, relative to the model file's directory) and up to
//    ModelOptions::max_programs compiled programs (least recently used evicted first). A
//    program keeps its Session's JIT alive, so a Model may outlive the Session; results
//    are Owned buffers.
//  - Errors (Status, named): an input missing, an unknown input name (kInvalidArgument);
//    a value input over ModelOptions::max_value_elements elements (kUnsupported naming
//    it); anything the import or compile reports at this key, as they word it (naming
//    the model and the node or input), e.g. a rank that does not fit the declared one
//    (kShapeError naming the input) or a shape value Reshape rejects (naming the node).
//    A failed miss caches nothing.
//  - Thread-safety: all members may be called concurrently. One mutex guards the cache and
//    the learned inputs; a miss imports and compiles holding it (concurrent runs wait);
//    the program runs outside it (one CompiledProgram runs one call at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "carve/onnx/import.h"
#include "carve/runtime/buffer.h"
#include "carve/runtime/session.h"
#include "carve/status.h"

namespace carve::onnx {

struct ModelOptions {
  // Applied to every import; input_shapes and input_values are set per run from the
  // inputs (a symbolic dim of an input not given takes these input_shapes, then
  // symbolic_dim).
  ImportOptions import{};
  // Applied to every compile; constants gains the import's mapped weights.
  runtime::CompileOptions compile{};
  // Compiled programs kept (least recently used evicted); at least 1.
  size_t max_programs = 8;
  // A graph input the import needs as a value is part of the key, copied per program: a
  // larger one is kUnsupported (the model computes shapes from data).
  int64_t max_value_elements = 4096;
};

// Inputs by graph input name (CPU buffers; used in place by the run).
using NamedBuffers = std::map<std::string, runtime::Buffer, std::less<>>;

struct ModelStats {
  int64_t runs = 0;
  int64_t hits = 0;       // runs that found their program in the cache
  int64_t compiles = 0;   // programs compiled (misses that succeeded)
  int64_t imports = 0;    // imports made, counting those retried with learned values
  int64_t evictions = 0;  // programs dropped by the bound or by a learned value input
  size_t cached = 0;      // programs in the cache now
};

class Model {
 public:
  // Reads the file (kIoError naming it); external data resolves against its directory
  // unless options.import.external_data_dir says otherwise. The bytes are checked to
  // parse as an ONNX model (kParseError) and the graph inputs are read.
  static Result<std::unique_ptr<Model>> load_file(const std::string& path, ModelOptions options = {});
  // `name` appears in messages.
  static Result<std::unique_ptr<Model>> load_bytes(std::span<const std::byte> bytes, std::string_view name,
                                                   ModelOptions options = {});

  // Runs the program for these inputs (every graph input, by name), importing and
  // compiling it on a miss. Outputs in output_names() order.
  Result<std::vector<runtime::Buffer>> run(runtime::Session& session, const NamedBuffers& inputs,
                                           const runtime::RunOptions& options = {});
  // The import run() would compile for these inputs, for callers that compile and run
  // themselves (`carve run`): inputs fix their shapes, those needed as values are imported
  // as constants (ImportedModel::graph lacks them as inputs). Inputs may be missing
  // (they take the declared/symbolic dims; one needed as a value is then kInvalidArgument
  // naming it). Learns value inputs as run() does; caches nothing.
  Result<ImportedModel> import_for(const NamedBuffers& inputs);

  const std::string& name() const { return name_; }
  // Graph inputs (initializers excluded) and outputs, in the model's order.
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  // Graph inputs learned so far to be needed as values at import (sorted).
  std::vector<std::string> inputs_needed_at_import() const;
  ModelStats stats() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<runtime::CompiledProgram> program;
  };
  Model(std::vector<std::byte> bytes, std::string name, ModelOptions options);
  // load_bytes and load_file: the model takes `bytes` (one copy of a file's bytes).
  static Result<std::unique_ptr<Model>> load_owned(std::vector<std::byte> bytes, std::string_view name,
                                                   ModelOptions options);
  Status check_inputs(const NamedBuffers& inputs) const;
  Result<ImportedModel> import_locked(const NamedBuffers& inputs);
  Result<std::string> key_locked(const runtime::Session& session, const NamedBuffers& inputs) const;

  std::vector<std::byte> bytes_;
  std::string name_;
  ModelOptions options_;
  std::vector<std::string> input_names_, output_names_;
  mutable std::mutex mutex_;
  std::set<std::string> needed_;  // graph inputs imported as values (learned)
  std::list<Entry> cache_;        // most recently used first
  ModelStats stats_;
};

}  // namespace carve::onnx
