// .npy reading and writing: round trips, numpy-written fixtures (tests/data/npy, made by
// make_fixtures.py there; numpy is not needed to run these tests) and every error path.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "carve/runtime/npy.h"
#include "test_support.h"

namespace {

using namespace carve;
using namespace carve::runtime;
using ir::DType;
using ir::Shape;

std::string fixture(const std::string& name) {
  std::string path = carve::test::source_dir();
  path += "/tests/data/npy/";
  path += name;
  return path;
}

std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// A fresh path in the system temp dir, removed when the object dies.
struct TempPath {
  std::string path;
  TempPath() {
    static std::atomic<int> counter{0};
    path = (std::filesystem::temp_directory_path() /
            ("carve_npy_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".npy"))
               .string();
  }
  ~TempPath() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

std::vector<std::byte> to_bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// A hand-made .npy (version 1.0) with the given header dict and data bytes.
std::vector<std::byte> make_npy(std::string dict, size_t data_bytes, uint8_t fill = 0, int major = 1) {
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const size_t len_bytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  out += dict;
  out.append(data_bytes, static_cast<char>(fill));
  return to_bytes(out);
}

template <typename T>
std::vector<T> elements(const Buffer& b) {
  Result<std::span<const T>> s = b.span<T>();
  REQUIRE(s.ok());
  return std::vector<T>(s->begin(), s->end());
}

Buffer make_buffer(DType dtype, Shape shape, const std::vector<uint8_t>& bytes) {
  Result<Buffer> b = Buffer::allocate(cpu_allocator(), dtype, std::move(shape));
  REQUIRE(b.ok());
  REQUIRE(b->copy_in(std::as_bytes(std::span(bytes))).ok());
  return *b;
}

void check_error(const Status& s, ErrorCode code, std::initializer_list<std::string_view> parts) {
  INFO(s.to_string());
  CHECK(s.code() == code);
  for (std::string_view p : parts) CHECK(s.message().find(p) != std::string::npos);
}

TEST_CASE("runtime/npy/reads numpy-written files of every supported dtype") {
  Result<Buffer> f32 = read_npy(fixture("f32_2x3.npy"));
  REQUIRE(f32.ok());
  CHECK(f32->dtype() == DType::kF32);
  CHECK(f32->shape() == Shape{2, 3});
  CHECK(elements<float>(*f32) == std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f});
  CHECK(f32->ownership() == Ownership::kOwned);

  Result<Buffer> f64 = read_npy(fixture("f64_scalar.npy"));
  REQUIRE(f64.ok());
  CHECK(f64->shape() == Shape{});
  CHECK(f64->item<double>().value() == 3.141592653589793);

  Result<Buffer> f16 = read_npy(fixture("f16_4.npy"));
  REQUIRE(f16.ok());
  CHECK(f16->dtype() == DType::kF16);
  std::vector<F16Bits> h = elements<F16Bits>(*f16);
  CHECK(h == std::vector<F16Bits>{{0x3c00}, {0xb800}, {0x7bff}, {0x0001}});

  CHECK(elements<int8_t>(read_npy(fixture("i8_3.npy")).value()) == std::vector<int8_t>{-128, 0, 127});
  CHECK(elements<int32_t>(read_npy(fixture("i32_2x2.npy")).value()) ==
        std::vector<int32_t>{1, -2, INT32_MAX, INT32_MIN});
  CHECK(elements<int64_t>(read_npy(fixture("i64_3.npy")).value()) == std::vector<int64_t>{INT64_MIN, 0, INT64_MAX});
  Result<Buffer> u8 = read_npy(fixture("u8_2x2x1.npy"));
  REQUIRE(u8.ok());
  CHECK(u8->shape() == Shape{2, 2, 1});
  CHECK(elements<uint8_t>(*u8) == std::vector<uint8_t>{0, 255, 7, 128});
  CHECK(elements<bool>(read_npy(fixture("bool_4.npy")).value()) == std::vector<bool>{true, false, false, true});
  CHECK(elements<int16_t>(read_npy(fixture("i16_3.npy")).value()) == std::vector<int16_t>{INT16_MIN, -1, INT16_MAX});
  CHECK(elements<uint16_t>(read_npy(fixture("u16_3.npy")).value()) == std::vector<uint16_t>{0, 40000, UINT16_MAX});
  CHECK(elements<uint32_t>(read_npy(fixture("u32_3.npy")).value()) ==
        std::vector<uint32_t>{0, 3000000000u, UINT32_MAX});
  CHECK(elements<uint64_t>(read_npy(fixture("u64_3.npy")).value()) ==
        std::vector<uint64_t>{0, (uint64_t{1} << 63) + 1, UINT64_MAX});
  Result<Buffer> empty = read_npy(fixture("empty_0x3.npy"));
  REQUIRE(empty.ok());
  CHECK(empty->shape() == Shape{0, 3});
  CHECK(empty->size() == 0);
}

TEST_CASE("runtime/npy/reads format versions 2.0 and 3.0") {
  for (const char* name : {"f32_v2.npy", "f32_v3.npy"}) {
    INFO(name);
    Result<Buffer> b = read_npy(fixture(name));
    REQUIRE(b.ok());
    CHECK(b->shape() == Shape{4});
    CHECK(elements<float>(*b) == std::vector<float>{0, 1, 2, 3});
    Result<NpyHeader> h = parse_npy_header(file_bytes(fixture(name)), name);
    REQUIRE(h.ok());
    CHECK(h->major_version == (name[5] == '2' ? 2 : 3));
    CHECK(h->data_offset % 64 == 0);
  }
}

TEST_CASE("runtime/npy/writes the same bytes numpy writes") {
  for (const char* name : {"f32_2x3.npy", "f64_scalar.npy", "f16_4.npy", "i8_3.npy", "i32_2x2.npy", "i64_3.npy",
                           "u8_2x2x1.npy", "bool_4.npy", "empty_0x3.npy", "i16_3.npy", "u16_3.npy", "u32_3.npy",
                           "u64_3.npy"}) {
    INFO(name);
    Result<Buffer> b = read_npy(fixture(name));
    REQUIRE(b.ok());
    Result<std::vector<std::byte>> written = write_npy_bytes(*b);
    REQUIRE(written.ok());
    CHECK(*written == file_bytes(fixture(name)));
  }
}

TEST_CASE("runtime/npy/round trips every dtype through bytes and files") {
  CHECK(rc::check("read_npy_bytes(write_npy_bytes(b)) == b", [] {
    const DType dtype = *rc::gen::element(DType::kF32, DType::kF64, DType::kF16, DType::kI8, DType::kI32, DType::kI64,
                                          DType::kU8, DType::kBool, DType::kI16, DType::kU16, DType::kU32, DType::kU64);
    const int rank = *rc::gen::inRange(0, 5);
    std::vector<int64_t> dims;
    for (int i = 0; i < rank; ++i) dims.push_back(*rc::gen::inRange<int64_t>(0, 4));
    const Shape shape(dims);
    const auto size = static_cast<size_t>(ir::byte_size(dtype, shape).value());
    std::vector<uint8_t> bytes = *rc::gen::container<std::vector<uint8_t>>(size, rc::gen::arbitrary<uint8_t>());
    if (dtype == DType::kBool) {
      for (uint8_t& b : bytes) b &= 1;
    }
    const Buffer original = make_buffer(dtype, shape, bytes);
    Result<std::vector<std::byte>> encoded = write_npy_bytes(original);
    RC_ASSERT(encoded.ok());
    Result<Buffer> decoded = read_npy_bytes(*encoded);
    RC_ASSERT(decoded.ok());
    RC_ASSERT(decoded->dtype() == dtype);
    RC_ASSERT(decoded->shape() == shape);
    const std::span<const std::byte> a = original.bytes().value(), b = decoded->bytes().value();
    RC_ASSERT(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }));
  TempPath tmp;
  const Buffer b = make_buffer(DType::kI32, Shape{2, 2}, {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0});
  REQUIRE(write_npy(tmp.path, b).ok());
  Result<Buffer> back = read_npy(tmp.path);
  REQUIRE(back.ok());
  CHECK(elements<int32_t>(*back) == std::vector<int32_t>{1, 2, 3, 4});
  // Overwriting an existing file truncates it.
  REQUIRE(write_npy(tmp.path, make_buffer(DType::kU8, Shape{1}, {9})).ok());
  CHECK(elements<uint8_t>(read_npy(tmp.path).value()) == std::vector<uint8_t>{9});
}

TEST_CASE("runtime/npy/map_npy maps the data without copying") {
  Result<Buffer> m = map_npy(fixture("f32_2x3.npy"));
  REQUIRE(m.ok());
  CHECK(m->ownership() == Ownership::kFileBacked);
  CHECK(!m->is_mutable());
  CHECK(m->shape() == Shape{2, 3});
  CHECK(elements<float>(*m) == std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f});
  Result<Buffer> e = map_npy(fixture("empty_0x3.npy"));
  REQUIRE(e.ok());
  CHECK(e->size() == 0);
  check_error(map_npy(fixture("fortran_2x3.npy")).status(), ErrorCode::kUnsupported, {"fortran_2x3.npy", "Fortran"});
  check_error(map_npy("/nonexistent/x.npy").status(), ErrorCode::kIoError, {"/nonexistent/x.npy"});
}

TEST_CASE("runtime/npy/unsupported numpy files are kUnsupported naming the file") {
  check_error(read_npy(fixture("fortran_2x3.npy")).status(), ErrorCode::kUnsupported, {"fortran_2x3.npy", "Fortran"});
  check_error(read_npy(fixture("big_endian_f4.npy")).status(), ErrorCode::kUnsupported,
              {"big_endian_f4.npy", ">f4", "big-endian"});
  check_error(read_npy(fixture("c64.npy")).status(), ErrorCode::kUnsupported, {"c64.npy", "<c8"});
  check_error(read_npy(fixture("structured.npy")).status(), ErrorCode::kUnsupported, {"structured.npy", "structured"});
  // Fortran order does not matter for rank <= 1.
  CHECK(read_npy_bytes(make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8)).ok());
  check_error(read_npy_bytes(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4))
                  .status(),
              ErrorCode::kUnsupported, {"rank 9"});
  check_error(read_npy_bytes(make_npy("{'descr': '<f16', 'fortran_order': False, 'shape': (), }", 16)).status(),
              ErrorCode::kUnsupported, {"<f16"});
  std::vector<std::byte> v9 = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4);
  v9[6] = std::byte{9};
  check_error(read_npy_bytes(v9, "v9.npy").status(), ErrorCode::kUnsupported, {"v9.npy", "version 9.0"});
  // Writing bf16 has no numpy dtype.
  check_error(write_npy_bytes(make_buffer(DType::kBf16, Shape{1}, {0, 0})).status(), ErrorCode::kUnsupported, {"bf16"});
  TempPath tmp;
  check_error(write_npy(tmp.path, make_buffer(DType::kBf16, Shape{1}, {0, 0})), ErrorCode::kUnsupported,
              {tmp.path, "bf16"});
  CHECK(!std::filesystem::exists(tmp.path));
}

TEST_CASE("runtime/npy/bf16 is written and read as <u2 bit patterns when asked") {
  // 1.0, -2.0, +inf, a NaN: bit patterns kept exactly.
  const std::vector<uint16_t> bits = {0x3F80, 0xC000, 0x7F80, 0x7FC1};
  std::vector<uint8_t> raw(bits.size() * 2);
  std::memcpy(raw.data(), bits.data(), raw.size());
  const Buffer bf16 = make_buffer(DType::kBf16, Shape{2, 2}, raw);
  TempPath tmp;
  REQUIRE(write_npy(tmp.path, bf16, {.bf16_as_u2 = true}).ok());
  Result<Buffer> read = read_npy(tmp.path);
  REQUIRE(read.ok());
  CHECK(read->dtype() == DType::kU16);
  CHECK(elements<uint16_t>(*read) == bits);
  Result<Buffer> back = bf16_from_u2(*read, tmp.path);
  REQUIRE(back.ok());
  CHECK(back->dtype() == DType::kBf16);
  CHECK(back->shape() == Shape{2, 2});
  CHECK(elements<uint16_t>(back->view(0, DType::kU16, back->shape()).value()) == bits);
  // Only uint16 files hold bit patterns; the option leaves other dtypes alone.
  check_error(bf16_from_u2(make_buffer(DType::kI16, Shape{1}, {0, 0}), "i16.npy").status(), ErrorCode::kInvalidArgument,
              {"i16.npy", "<u2"});
  Result<std::vector<std::byte>> f32 = write_npy_bytes(make_buffer(DType::kF32, Shape{1}, {0, 0, 128, 63}),
                                                       {.bf16_as_u2 = true});
  REQUIRE(f32.ok());
  CHECK(read_npy_bytes(*f32).value().dtype() == DType::kF32);
}

TEST_CASE("runtime/npy/malformed files are kParseError saying what is wrong") {
  const std::string ok_dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  REQUIRE(read_npy_bytes(make_npy(ok_dict, 24)).ok());
  // Also accepted: double quotes, no trailing comma, Python 2 long dims, other key order.
  CHECK(read_npy_bytes(make_npy("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<i4\"}", 24)).ok());
  CHECK(read_npy_bytes(make_npy(ok_dict, 24, 0, 2)).ok());

  check_error(read_npy_bytes(make_npy(ok_dict, 23), "t.npy").status(), ErrorCode::kParseError,
              {"t.npy", "truncated data", "24"});
  check_error(read_npy_bytes(make_npy(ok_dict, 25)).status(), ErrorCode::kParseError, {"1 trailing bytes"});
  check_error(read_npy_bytes(to_bytes(std::string_view("NUMPY\x93\x01\x00", 8))).status(), ErrorCode::kParseError, {"bad magic"});
  check_error(read_npy_bytes(to_bytes("\x93NUM")).status(), ErrorCode::kParseError, {"too short"});
  std::vector<std::byte> cut = make_npy(ok_dict, 24);
  cut.resize(30);
  check_error(read_npy_bytes(cut).status(), ErrorCode::kParseError, {"truncated header"});
  cut.resize(9);
  check_error(read_npy_bytes(cut).status(), ErrorCode::kParseError, {"truncated header length"});
  auto parse_error = [](std::string dict, std::string_view what) {
    check_error(read_npy_bytes(make_npy(std::move(dict), 4), "bad.npy").status(), ErrorCode::kParseError,
                {"bad.npy", what});
  };
  parse_error("{'descr': '<i4', 'fortran_order': False}", "lacks 'shape'");
  parse_error("{'descr': '<i4', 'fortran_order': False, 'shape': (), 'extra': 1}", "expected a string");
  parse_error("{'descr': '<i4', 'fortran_order': False, 'shape': (), 'extra': True}", "unexpected header key 'extra'");
  parse_error("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': ()}", "repeats");
  parse_error("{'descr': '<i4', 'fortran_order': 0, 'shape': ()}", "malformed header");
  parse_error("{'descr': '<i4', 'fortran_order': 'no', 'shape': ()}", "fortran_order");
  parse_error("{'descr': '<i4', 'fortran_order': False, 'shape': (-1,)}", "non-negative");
  parse_error("{'descr': '<i4', 'fortran_order': False, 'shape': (1,) ", "expected ',' or '}'");
  parse_error("{'descr': '<i4', 'fortran_order': False, 'shape': ()} junk", "after the dict");
  parse_error("{'descr': '<i4, 'fortran_order': False, 'shape': ()}", "malformed header");
  parse_error("{'descr': True, 'fortran_order': False, 'shape': ()}", "'descr' must be a string");
  parse_error("{'descr': '<i4', 'fortran_order': False, 'shape': '2'}", "'shape' must be a tuple");
  parse_error("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "overflows");
  parse_error("{'descr': '<i4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}", "too large");
  // Bool bytes must be 0 or 1.
  check_error(read_npy_bytes(make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 3, 2)).status(),
              ErrorCode::kParseError, {"bool element 0 is 2"});
}

TEST_CASE("runtime/npy/file system errors are kIoError naming the path") {
  check_error(read_npy("/nonexistent/dir/a.npy").status(), ErrorCode::kIoError, {"/nonexistent/dir/a.npy"});
  check_error(write_npy("/nonexistent/dir/a.npy", make_buffer(DType::kU8, Shape{1}, {1})), ErrorCode::kIoError,
              {"/nonexistent/dir/a.npy"});
  // A buffer without host bytes cannot be written.
  Result<Buffer> lazy = Buffer::lazy(cpu_allocator(), DType::kF32, Shape{2});
  REQUIRE(lazy.ok());
  CHECK(write_npy_bytes(*lazy).status().code() == ErrorCode::kNotAllocated);
}

// A stream that goes on past the payload (a FIFO standing for /dev/zero or a pipe): the
// header is read first and then exactly its payload, so the writer is cut off early.
// Before the header came first, read_npy drained the whole stream (unbounded on
// /dev/zero); the writer here stops at 64 MiB so the old behaviour fails, not hangs.
TEST_CASE("runtime/npy/read_npy reads only the payload its header announces") {
  TempPath fifo;
  REQUIRE(::mkfifo(fifo.path.c_str(), 0600) == 0);
  std::signal(SIGPIPE, SIG_IGN);
  constexpr size_t kCap = size_t{64} << 20;
  std::atomic<size_t> written{0};
  std::thread writer([&] {
    const int fd = ::open(fifo.path.c_str(), O_WRONLY);
    if (fd < 0) return;
    const std::vector<std::byte> head =
        make_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", 0);
    std::vector<std::byte> chunk(65536);
    std::memcpy(chunk.data(), head.data(), head.size());
    while (written < kCap) {
      const ssize_t n = ::write(fd, chunk.data(), chunk.size());
      if (n <= 0) break;  // EPIPE: the reader closed its end
      written += static_cast<size_t>(n);
      std::fill_n(chunk.begin(), head.size(), std::byte{0});
    }
    ::close(fd);
  });
  Result<Buffer> r = read_npy(fifo.path);
  writer.join();
  check_error(r.status(), ErrorCode::kParseError, {fifo.path, "trailing bytes"});
  CHECK(written.load() < kCap);
}

TEST_CASE("runtime/npy/read_npy checks the header before the payload and names the file") {
  TempPath tmp;
  auto write = [&](const std::vector<std::byte>& bytes) {
    std::ofstream(tmp.path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                    static_cast<std::streamsize>(bytes.size()));
  };
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  write(make_npy(dict, 24));
  REQUIRE(read_npy(tmp.path).ok());
  write(make_npy(dict, 10));
  check_error(read_npy(tmp.path).status(), ErrorCode::kParseError, {tmp.path, "truncated data", "24"});
  write(make_npy(dict, 25));
  check_error(read_npy(tmp.path).status(), ErrorCode::kParseError, {tmp.path, "trailing bytes"});
  // A v2 header length of 4 GiB - 1 is refused, not read.
  std::vector<std::byte> huge = make_npy(dict, 24, 0, 2);
  for (int i = 8; i < 12; ++i) huge[static_cast<size_t>(i)] = std::byte{0xff};
  write(huge);
  check_error(read_npy(tmp.path).status(), ErrorCode::kParseError, {tmp.path, "header of 4294967295 bytes"});
  check_error(read_npy_bytes(huge, "h.npy").status(), ErrorCode::kParseError, {"h.npy", "header of"});
  // A shape whose byte size overflows is rejected from the header alone.
  write(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 0));
  check_error(read_npy(tmp.path).status(), ErrorCode::kParseError, {tmp.path, "too large"});
}

}  // namespace
