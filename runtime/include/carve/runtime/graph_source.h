// GraphSource: a family of graphs, one per input signature, for models whose input shapes
// (or inputs used as shapes) change between runs. Session::compile(source) takes one and
// returns a DynamicProgram (dynamic_program.h), which asks the source for the graph of
// each new signature it meets and compiles it then.
//
// Why a source and not one polymorphic graph: carve's graphs are static (shapes fixed,
// shape arithmetic folded, memory planned per shape), so the graph of a new shape is
// rebuilt by whoever can (onnx::Model re-imports its ModelProto at the new shapes).
//
// Contract for implementers
//  - inputs (key, specialise): one CPU buffer per input_names() entry, in that order, of
//    whatever shape the caller brings. The source may read the bytes of inputs it needs
//    as values (a shape fed as an input), and then must put those bytes in the key.
//  - key(): equal keys mean the same graph (a cached program is reused); cheap, called
//    on every run. specialise(): the graph for these inputs and its key, which is what
//    key() returns for them from then on. A source may learn while specialising (that
//    it needs an input's value, say): the key it returns then differs from the key() it
//    gave just before, and the DynamicProgram drops every program it cached, whose keys
//    were made the old way.
//  - The graph's inputs are a subset of input_names() (inputs imported as constants are
//    left out), its outputs a subset of output_names(). Errors as the source words them
//    (naming the model, node or input); a failed specialisation caches nothing.
//  - Thread-safety: a DynamicProgram calls its source under its own lock; a source shared
//    by several DynamicPrograms must be safe to call concurrently.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/runtime/buffer.h"
#include "carve/status.h"

namespace carve::runtime {

struct GraphSpecialisation {
  std::string key;
  ir::Graph graph;
  // Added to CompileOptions::constants for this graph (e.g. an import's mapped weights).
  std::map<std::string, Buffer> constants{};
};

class GraphSource {
 public:
  virtual ~GraphSource() = default;
  virtual const std::string& source_name() const = 0;  // appears in messages
  virtual const std::vector<std::string>& input_names() const = 0;
  virtual const std::vector<std::string>& output_names() const = 0;
  virtual Result<std::string> key(std::span<const Buffer> inputs) const = 0;
  virtual Result<GraphSpecialisation> specialise(std::span<const Buffer> inputs) = 0;
};

}  // namespace carve::runtime
