// ONNX import: an ONNX model file (opset 11-17, as PyTorch exports them) -> a carve graph.
//
//   auto model = onnx::import_model_file("resnet18.onnx");
//   runtime::CompileOptions options;
//   options.constants = model->mapped_weights;        // external-data weights, mmapped
//   auto program = session->compile(model->graph, options);
//
// What it does
//  - Every ONNX node becomes IR ops (ops_*.cpp lower the ONNX operators carve lacks onto
//    existing ones: Trilu -> where with a constant mask, Expand -> where broadcast, ...).
//  - Shapes are static: graph inputs take their declared dims; a symbolic or unknown dim
//    takes ImportOptions::input_shapes when given, else ImportOptions::symbolic_dim (1:
//    batch 1). Everything computed from shapes and constants alone (Shape, Range,
//    ConstantOfShape, the integer arithmetic on shapes, Reshape targets, ...) is folded
//    to constants at import, so the graph holds only the data-dependent computation.
//  - Weights: initializers stored in the .onnx file become graph constants that own
//    their bytes (one copy, the protobuf message is freed after import). Initializers in
//    external data files are mapped read-only (runtime::Buffer::map_file, FileBacked)
//    and left out of the graph's data: ImportedModel::mapped_weights binds them by value
//    name (CompileOptions::constants), so they are never copied. A mapping whose offset
//    is not aligned to its element size is copied into the graph instead.
//  - Operators (default domain; each also under the opset forms 7-18 that move
//    attributes to inputs: Clip min/max, Pad pads, Split split, Squeeze/Unsqueeze/Reduce*
//    axes, Slice starts/ends/axes/steps; such size inputs must be known at import):
//      elementwise  Relu Sigmoid Tanh Sqrt Erf Exp Log Neg Abs Reciprocal Add Sub Mul Div
//                   Pow Max Min Sum Equal Less LessOrEqual Greater GreaterOrEqual Not And
//                   Or Where Cast Clip HardSigmoid HardSwish LeakyRelu PRelu Gelu(exact)
//                   Identity Dropout(inference)
//      nn           Conv MaxPool AveragePool (1-D and 2-D; no pool dilations)
//                   GlobalAveragePool GlobalMaxPool BatchNormalization Gemm MatMul Softmax
//                   LogSoftmax LayerNormalization (Mean/InvStdDev in float32) ReduceMean
//                   ReduceSum ReduceMax ReduceMin ArgMax ArgMin NegativeLogLikelihoodLoss
//                   SoftmaxCrossEntropyLoss
//      layout       Reshape Flatten Squeeze Unsqueeze Transpose Concat Split Slice Expand
//                   Tile Pad(constant mode) Gather GatherElements Trilu
//      at import    Constant ConstantOfShape Shape Size Range, and Floor Ceil Round on
//                   known values only
//    Anything else, or an attribute a lowering does not read, is kUnsupported naming the
//    node: the importer never guesses. Tile is lowered as a concat of copies, so more than
//    65536 repeats on one axis is kUnsupported.
//  - load_weights = false (`carve plan --no-weights`): float initializers of more than
//    64 elements become constants without data (enough to plan memory); integer and small
//    float initializers are still read because shapes may be computed from them.
//
// Errors (Status, never exceptions; messages name the ONNX node as
// "onnx node 'NAME' (OpType)" and say what is missing):
//   kIoError       the file (or an external data file) cannot be read;
//   kParseError    the bytes are not an ONNX ModelProto, or a tensor's data is malformed;
//   kUnsupported   an operator, attribute value, dtype or opset carve does not handle
//                  (e.g. Pad mode 'reflect', a non-constant Reshape shape);
//   kInvalidArgument / kShapeError / kTypeMismatch  an inconsistent model or node (among
//                  them: an operator given more or fewer inputs than ONNX allows, a node
//                  without outputs, an initializer name defined twice, an external-data
//                  location that, resolved with symlinks followed, leaves the model's
//                  directory: absolute, '..' components, or a symlink pointing out);
//   kOutOfMemory   a tensor folded at import would exceed ImportOptions::max_folded_bytes,
//                  or an allocation failed (std::bad_alloc is caught at these functions'
//                  boundary; any other exception becomes kInternal).
// Thread-safety: no shared state; concurrent imports are fine.
// Layering: the frontend depends on ir and reference (folding at import), and on runtime
// only for runtime::Buffer, the FileBacked mapping of external-data weights that
// CompileOptions::constants takes without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "carve/ir/graph.h"
#include "carve/runtime/buffer.h"
#include "carve/status.h"

namespace carve::onnx {

struct ImportOptions {
  // false: float initializers over 64 elements carry no data (plan from the structure).
  bool load_weights = true;
  // Shapes for graph inputs by name: they fix the symbolic/unknown dims and must agree
  // with the declared rank and fixed dims (kShapeError otherwise).
  std::map<std::string, ir::Shape, std::less<>> input_shapes{};
  // Size of a symbolic or unknown input dim not fixed by input_shapes.
  int64_t symbolic_dim = 1;
  // Directory external data paths are relative to ("" = the model file's directory).
  std::string external_data_dir{};
  // Cap on the bytes of any one tensor computed at import (folded Expand, Tile,
  // ConstantOfShape, Range, and any op on constants), counted at 8 bytes per element for
  // the int64/double working copy where folding builds one. Checked before allocating: a
  // few hundred bytes of model can ask for exabytes. Over it: kOutOfMemory naming the
  // node. Raise it for a model that really folds larger constants.
  int64_t max_folded_bytes = int64_t{1} << 30;  // 1 GiB
  // Import exporters' op-by-op forms as the one op they compute (onnx/src/patterns.cpp:
  // a decomposed LayerNorm becomes layer_norm). false: every node lowers by itself.
  bool fuse_patterns = true;
};

struct ImportedModel {
  ir::Graph graph;
  // Read-only FileBacked buffers, by graph constant name, for constants without data.
  std::map<std::string, runtime::Buffer> mapped_weights;
  int64_t opset = 0;           // of the default ("" / "ai.onnx") domain
  std::string producer;        // e.g. "pytorch 1.13.1"
  int64_t folded_nodes = 0;    // ONNX nodes evaluated at import (constant inputs)
  int64_t fused_patterns = 0;  // subgraphs imported as one op (ImportOptions::fuse_patterns)
};

// Reads and imports `path`.
Result<ImportedModel> import_model_file(const std::string& path, const ImportOptions& options = {});
// Imports a serialized ModelProto; `name` appears in messages.
Result<ImportedModel> import_model_bytes(std::span<const std::byte> bytes, std::string_view name,
                                         const ImportOptions& options = {});

// Copies mapped_weights into the graph's constants (and clears the map), for consumers
// that need every constant's bytes in the graph (e.g. the reference interpreter).
Status materialize_weights(ImportedModel& model);

// True when `path` names an ONNX model (by its ".onnx" extension).
bool is_onnx_path(std::string_view path);

}  // namespace carve::onnx
