// `carve demo`: the whole pipeline on a small real model shipped in the repository
// (demo_pipeline.cpp): import the ONNX model, plan its arena (arena vs no reuse vs lower
// bound, in place, views; plan.svg), JIT-compile it (times, kernels, fused groups), run it
// in parallel with the hazard checker (races: 0; trace.json) and sequentially
// (bit-identical; against the PyTorch reference), then decode tokens with the KV decoder
// (examples/kv_decoder) whose caches live in handles.
// A build without the ONNX importer shows the plan of a built-in block instead (built with
// the C++ API, printed in the text format, with its order and lifetimes); one without the
// CPU JIT stops after the plan, saying why.
#pragma once

#include <ostream>
#include <string>

namespace carve::cli {

struct DemoCommandOptions {
  std::string model;             // "" = the shipped gpt_tiny.onnx
  std::string out_dir = "carve-demo";  // where plan.svg and trace.json go
  int tokens = 8;                // tokens the KV decoder generates
};

int run_demo_command(const DemoCommandOptions& options, std::ostream& out, std::ostream& err);

// The built-in block's plan (the demo of a build without ONNX).
int run_builtin_demo(std::ostream& out, std::ostream& err);
// The pipeline on an ONNX model (demo_pipeline.cpp).
int run_pipeline_demo(const DemoCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace carve::cli
