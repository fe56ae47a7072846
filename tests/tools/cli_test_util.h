// Shared by the CLI test files (tools/…, cuda/dryrun/…): the CLI run in process and the
// small graph several of them compile.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace carve::cli_test {

// Two kernels when fused (add+tanh, reduce_sum); outputs t and r.
inline constexpr const char* kSmallGraph = R"(graph small {
  input x: f32[3,5]
  input y: f32[5]
  a = add(x, y) -> s: f32[3,5]
  t = tanh(s) -> t: f32[3,5]
  r = reduce_sum(t) {axes=[1], keepdims=0} -> r: f32[3]
  output t, r
}
)";

// `carve ARGS...` in process (args without the program name); the exit code, and what it
// wrote to its output and error streams where asked.
inline int carve_cli(const std::vector<std::string>& args, std::string* out_text = nullptr,
                     std::string* err_text = nullptr) {
  std::ostringstream out, err;
  const int code = cli::run(args, out, err);
  if (out_text) *out_text = out.str();
  if (err_text) *err_text = err.str();
  return code;
}

}  // namespace carve::cli_test
