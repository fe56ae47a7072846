// onnx::Model: an ONNX model as a graph family (runtime/graph_source.h), so that one
// Session::compile runs it at whatever input shapes (and shape-valued inputs) the caller
// brings, one specialisation per signature:
//
//   std::shared_ptr<onnx::Model> model = std::move(*onnx::Model::load_file("bert.onnx"));
//   auto program = (*session)->compile(model);        // a runtime::DynamicProgram
//   auto out32 = (*program)->run({ids32, mask32});    // imports and compiles at [1,32]
//   auto out128 = (*program)->run({ids128, mask128}); // imports and compiles at [1,128]
//   auto again = (*program)->run({ids32, mask32});    // cached
//
// Why specialisations: carve's graphs are static (shapes fixed, shape arithmetic folded at
// import, memory planned per shape), so a Model keeps the serialized ModelProto and
// imports it again per key:
//   - every input's dtype and shape, and
//   - the bytes of the inputs the import needs as values: a graph input from which an
//     operand the importer must know is computed (the shape of a Reshape, Expand, Tile,
//     ConstantOfShape; Slice starts; Reduce axes; Clip min; Trilu k; ...).
// Which inputs those are is learned, not declared: an import that fails because such an
// operand is computed from graph inputs names them (import.h: the tracing of what each
// tensor is computed from, and the lowering's own demand for a constant), and is retried
// with their values (ImportOptions::input_values). The set only grows; learning an input
// changes the keys, and the DynamicProgram drops the programs it cached under the old
// ones. This is exact for whatever ops the importer has, with no per-op table to keep in
// step. The DynamicProgram compiles each import in the Session's JIT: kernels compiled
// before (another shape's identical kernels, or an earlier process's through the disk
// cache) are reused, so a new shape pays the import, planning and the kernels that differ.
// Cost: docs/benchmarks.md, "Dynamic shapes".
//
// Contract
//  - Ownership: a Model owns the model's bytes (read once at load; external-data weights
//    are mapped again per import, relative to the model file's directory, and handed to
//    the compile as GraphSpecialisation::constants).
//  - Errors (Status, named): an unknown input name (kInvalidArgument); a value input over
//    ModelOptions::max_value_elements elements (kUnsupported naming it); anything the
//    import reports, as it words it (naming the model and the node or input), e.g. a rank
//    that does not fit the declared one (kShapeError naming the input) or a shape value
//    Reshape rejects (naming the node).
//  - Thread-safety: all members may be called concurrently (one mutex guards the learned
//    inputs; an import holds it).
#pragma once

#include <cstddef>
#include <cstdint>
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
#include "carve/runtime/graph_source.h"
#include "carve/status.h"

namespace carve::onnx {

struct ModelOptions {
  // Applied to every import; input_shapes and input_values are set per run from the
  // inputs (a symbolic dim of an input not given takes these input_shapes, then
  // symbolic_dim).
  ImportOptions import{};
  // A graph input the import needs as a value is part of the key, copied per program: a
  // larger one is kUnsupported (the model computes shapes from data).
  int64_t max_value_elements = 4096;
};

// Inputs by graph input name, for import_for (CPU buffers; not copied).
using NamedBuffers = std::map<std::string, runtime::Buffer, std::less<>>;

struct ModelStats {
  int64_t imports = 0;  // imports made, counting those retried with learned values
};

class Model final : public runtime::GraphSource {
 public:
  // Reads the file (kIoError naming it); external data resolves against its directory
  // unless options.import.external_data_dir says otherwise. The bytes are checked to
  // parse as an ONNX model (kParseError) and the graph inputs are read.
  static Result<std::unique_ptr<Model>> load_file(const std::string& path, ModelOptions options = {});
  // `name` appears in messages.
  static Result<std::unique_ptr<Model>> load_bytes(std::span<const std::byte> bytes, std::string_view name,
                                                   ModelOptions options = {});

  // The import specialise() makes for these inputs, for callers that compile and run
  // themselves (`carve run`): inputs fix their shapes, those needed as values are imported
  // as constants (ImportedModel::graph lacks them as inputs). Inputs may be missing
  // (they take the declared/symbolic dims; one needed as a value is then kInvalidArgument
  // naming it). Learns value inputs as specialise() does.
  Result<ImportedModel> import_for(const NamedBuffers& inputs);

  // runtime::GraphSource: inputs are every graph input, in input_names() order.
  Result<std::string> key(std::span<const runtime::Buffer> inputs) const override;
  Result<runtime::GraphSpecialisation> specialise(std::span<const runtime::Buffer> inputs) override;

  const std::string& name() const { return name_; }
  const std::string& source_name() const override { return name_; }
  // Graph inputs (initializers excluded) and outputs, in the model's order.
  const std::vector<std::string>& input_names() const override { return input_names_; }
  const std::vector<std::string>& output_names() const override { return output_names_; }
  // Graph inputs learned so far to be needed as values at import (sorted).
  std::vector<std::string> inputs_needed_at_import() const;
  ModelStats stats() const;

 private:
  Model(std::vector<std::byte> bytes, std::string name, ModelOptions options);
  // load_bytes and load_file: the model takes `bytes` (one copy of a file's bytes).
  static Result<std::unique_ptr<Model>> load_owned(std::vector<std::byte> bytes, std::string_view name,
                                                   ModelOptions options);
  Status check_inputs(const NamedBuffers& inputs) const;
  Result<ImportedModel> import_locked(const NamedBuffers& inputs);
  Result<std::string> key_locked(const NamedBuffers& inputs) const;
  NamedBuffers by_name(std::span<const runtime::Buffer> inputs) const;

  std::vector<std::byte> bytes_;
  std::string name_;
  ModelOptions options_;
  std::vector<std::string> input_names_, output_names_;
  mutable std::mutex mutex_;
  std::set<std::string> needed_;  // graph inputs imported as values (learned)
  ModelStats stats_;
};

}  // namespace carve::onnx
