// The carve command line: `carve demo`, `carve plan INPUT ...`, `carve run GRAPH ...`,
// `carve compile MODEL ...`.
// run() parses argv, executes one subcommand, writes to out/err and returns the
// process exit code (0 ok, 1 failure, 2 usage error). Tests call it in-process.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace carve::cli {

int run(int argc, char** argv, std::ostream& out, std::ostream& err);
// Convenience for tests: args exclude the program name.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace carve::cli
