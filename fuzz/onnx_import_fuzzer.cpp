// libFuzzer target: the ONNX importer on arbitrary bytes. Any input must import or fail
// with a Status -- no crash, no exception, no allocation past the fold cap (set low here,
// with libFuzzer's -rss_limit_mb as the memory limit). A model that imports must verify.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "carve/ir/verify.h"
#include "carve/onnx/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  carve::onnx::ImportOptions options;
  options.max_folded_bytes = int64_t{64} << 20;
  // External data is resolved against the working directory's contents; a fuzzer must
  // not read arbitrary files, so point it at an empty place.
  options.external_data_dir = "/nonexistent-carve-fuzz";
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto model = carve::onnx::import_model_bytes(bytes, "<fuzz>", options);
  if (!model.ok()) return 0;
  const carve::Status verified = carve::ir::verify(model->graph);
  if (!verified.ok()) {
    std::fprintf(stderr, "an imported graph does not verify: %s\n", verified.to_string().c_str());
    std::abort();
  }
  return 0;
}
