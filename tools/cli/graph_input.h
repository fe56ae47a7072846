// `carve plan GRAPH` / `carve run GRAPH` / `carve compile MODEL`: read a text-format graph
// or an ONNX model (by the .onnx extension), verify it, bind its constants and handles;
// for plan, choose the execution order and turn it into a planner Problem (views,
// in-place), adding notes and facts.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/runtime/buffer.h"
#include "carve/runtime/compile_options.h"
#include "cli/plan_input.h"

namespace carve::cli {

struct LoadedGraph {
  ir::Graph graph;
  // Constants without data bound by name at compile (ONNX external-data weights, mmapped).
  std::map<std::string, runtime::Buffer> constants;
  std::vector<std::string> notes;  // e.g. what the ONNX import did
  // ONNX inputs imported as constants because the import needed their values (a shape
  // fed as an input): their --input files are not graph inputs any more.
  std::vector<std::string> value_inputs;
};

struct LoadGraphOptions {
  bool weights = true;  // false: ONNX float initializers are not read (plan only)
  // The --input .npy files (mapped) of an ONNX model: they fix its inputs' symbolic dims
  // (e.g. a dynamic batch), and give the values of inputs the import needs as values
  // (onnx::Model::import_for: a shape, axes or a Clip bound fed as a graph input).
  std::map<std::string, runtime::Buffer, std::less<>> inputs{};
};

Result<LoadedGraph> load_graph_file(const std::string& path, const LoadGraphOptions& options = {});
// --input NAME=FILE.npy arguments as name -> file; kInvalidArgument names a malformed one.
Result<std::map<std::string, std::string>> parse_input_args(const std::vector<std::string>& args);
// The --input files mapped (LoadGraphOptions::inputs); empty for a text graph. Errors name
// a malformed argument or a file that cannot be read as .npy.
Result<std::map<std::string, runtime::Buffer, std::less<>>> input_files(const std::string& path,
                                                                        const std::vector<std::string>& input_args);
// Compile options binding what the graph needs: its mapped constants, and a zeroed host
// BufferHandle per graph handle.
Result<runtime::CompileOptions> loaded_compile_options(const LoadedGraph& loaded);
Result<ir::Graph> read_graph_file(const std::string& path);
Status load_graph_plan_input(const PlanCommandOptions& options, PlannedInput& input);

}  // namespace carve::cli
