// `carve demo`: builds a small transformer-style block with the C++ API, verifies it,
// prints it in the text format, prints its execution order and tensor lifetimes, plans
// its arena and materialises the plan as Storage/Buffer views.
#pragma once

#include <ostream>

namespace carve::cli {

int run_demo_command(std::ostream& out, std::ostream& err);

}  // namespace carve::cli
