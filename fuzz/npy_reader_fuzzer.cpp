// libFuzzer target: the .npy reader. Any bytes must read or fail with a Status; an array
// that reads must round-trip: read(write(read(x))) has the same dtype, shape and bytes.
// Headers announcing more data than the input holds must fail before allocating it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "carve/runtime/npy.h"

using carve::runtime::Buffer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  (void)carve::runtime::parse_npy_header(bytes, "<fuzz>");
  auto array = carve::runtime::read_npy_bytes(bytes, "<fuzz>");
  if (!array.ok()) return 0;
  auto encoded = carve::runtime::write_npy_bytes(*array);
  if (!encoded.ok()) {
    std::fprintf(stderr, "a read array does not write: %s\n", encoded.status().to_string().c_str());
    std::abort();
  }
  auto again = carve::runtime::read_npy_bytes(*encoded, "<fuzz round trip>");
  if (!again.ok()) {
    std::fprintf(stderr, "a written array does not read: %s\n", again.status().to_string().c_str());
    std::abort();
  }
  const Buffer& a = *array;
  const Buffer& b = *again;
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.size() != b.size() ||
      (a.size() > 0 && std::memcmp(a.unsafe_data(), b.unsafe_data(), a.size()) != 0)) {
    std::fprintf(stderr, "npy round trip changed the array\n");
    std::abort();
  }
  return 0;
}
