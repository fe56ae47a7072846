// libFuzzer target: the text-format parser. Any input must parse or fail with a Status
// (never crash, hang or leak); a graph that parses must print to a fixed point:
// print(parse(print(g))) == print(g). verify() runs too (shape inference on fuzzed attrs).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "carve/ir/text.h"
#include "carve/ir/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = carve::ir::parse(text);
  if (!graph.ok()) return 0;
  (void)carve::ir::verify(*graph);
  const std::string printed = carve::ir::print(*graph);
  auto again = carve::ir::parse(printed);
  if (!again.ok()) {
    std::fprintf(stderr, "printed graph does not parse: %s\n%s\n", again.status().to_string().c_str(),
                 printed.c_str());
    std::abort();
  }
  if (carve::ir::print(*again) != printed) {
    std::fprintf(stderr, "print/parse is not a fixed point:\n%s\n--- became ---\n%s\n", printed.c_str(),
                 carve::ir::print(*again).c_str());
    std::abort();
  }
  return 0;
}
