// NumPy .npy files <-> Buffers.
//
// Format: the .npy format versions 1.0, 2.0 and 3.0 (3.0 = 2.0 with a UTF-8 header):
// "\x93NUMPY", major, minor, a little-endian header length (2 bytes in 1.0, 4 bytes
// after), a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}
// padded with spaces and a newline, then the raw elements.
//
// Supported dtypes (descr): <f4 f32, <f8 f64, <f2 f16, |i1 i8, <i2 i16, <i4 i32, <i8 i64,
// |u1 u8, <u2 u16, <u4 u32, <u8 u64, |b1 bool ('=' is accepted for native little-endian,
// and '<' / '=' for the 1-byte types).
// bf16 has no numpy dtype. Its files hold the raw 16-bit patterns as '<u2' (what numpy's
// `a.view(np.uint16)` of an ml_dtypes/torch bfloat16 array writes), opted into per call:
// write_npy(..., {.bf16_as_u2 = true}) and bf16_from_u2 on what read_npy returned; without
// the option writing bf16 is kUnsupported. Only C order,
// little-endian data is read (fortran_order True is accepted for rank <= 1, where the
// layouts coincide). Writing always produces version 1.0 (2.0 if the header would not
// fit), C order, 64-byte aligned data, exactly as numpy.save does.
//
// Errors (messages start with "npy '<path or name>': " and say what is wrong):
//   kIoError     the file cannot be opened, read or written;
//   kParseError  bad magic, a header over 1 MiB, malformed header dict, a shape or size that makes no sense,
//                truncated data, trailing bytes after the data, a bool byte not 0 or 1;
//   kUnsupported a format version other than 1.x/2.x/3.x, big-endian data, Fortran
//                order (rank >= 2), a structured or unsupported dtype, rank > 8, bf16 on
//                write without bf16_as_u2;
//   plus whatever Buffer reports (kNotCpuAccessible, kNotAllocated, kOutOfMemory).
// Thread-safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "carve/ir/dtype.h"
#include "carve/ir/shape.h"
#include "carve/runtime/buffer.h"
#include "carve/status.h"

namespace carve::runtime {

// The parsed header of a .npy file.
struct NpyHeader {
  int major_version = 1;
  int minor_version = 0;
  ir::DType dtype = ir::DType::kF32;
  ir::Shape shape;
  size_t data_offset = 0;  // bytes before the first element
  size_t data_bytes = 0;   // byte_size(dtype, shape)
};

// Parses the header at the start of `bytes` (the data need not follow). `name` is used in
// messages (a path, or e.g. "<memory>").
Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes, std::string_view name);

// A new Owned CPU buffer (cpu_allocator()) holding the array. The header is read and
// checked first (at most 1 MiB), then exactly the bytes it announces: a file or stream
// that goes on (e.g. /dev/zero) is never read without bound.
Result<Buffer> read_npy(const std::string& path);
Result<Buffer> read_npy_bytes(std::span<const std::byte> bytes,
                              std::string_view name = "<memory>");
// Zero-copy: a read-only FileBacked buffer mapping the file's data (Buffer::map_file).
Result<Buffer> map_npy(const std::string& path);

struct NpyWriteOptions {
  bool bf16_as_u2 = false;  // a bf16 buffer is written as '<u2' bit patterns
};

// The .npy encoding of a CPU-accessible, allocated buffer (its shape and dtype).
Result<std::vector<std::byte>> write_npy_bytes(const Buffer& buffer, NpyWriteOptions options = {});
// Writes write_npy_bytes(buffer, options) to `path` (created or truncated).
Status write_npy(const std::string& path, const Buffer& buffer, NpyWriteOptions options = {});

// A bf16 view (same bytes, same shape) of a u16 buffer read from a '<u2' file that holds
// bf16 bit patterns; kInvalidArgument naming `name` for any other dtype.
Result<Buffer> bf16_from_u2(const Buffer& bits, std::string_view name);

}  // namespace carve::runtime
