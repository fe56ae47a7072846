// FileBacked buffers: a real temp file, mapped read-only, at aligned and unaligned offsets.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "carve/runtime/buffer.h"

namespace rt = carve::runtime;
using carve::ErrorCode;
using carve::ir::DType;

namespace {

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i % 251); }

// A temp file of `bytes` pattern bytes, removed when this goes out of scope.
struct TempFile {
  std::string path;
  explicit TempFile(size_t bytes) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "carve-rt-XXXXXX").string();
    int fd = ::mkstemp(tmpl.data());
    REQUIRE(fd >= 0);
    ::close(fd);
    path = tmpl;
    std::ofstream out(path, std::ios::binary);
    for (size_t i = 0; i < bytes; ++i) out.put(static_cast<char>(pattern(i)));
  }
  ~TempFile() { std::remove(path.c_str()); }
};

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

}  // namespace

TEST_CASE("runtime/file_backed/content_at_page_aligned_offset") {
  TempFile file(3 * kPage + 123);
  auto b = rt::Buffer::map_file(file.path, kPage, kPage + 50);
  REQUIRE(b.ok());
  CHECK(b->ownership() == rt::Ownership::kFileBacked);
  CHECK(b->storage()->path() == file.path);
  CHECK(b->is_allocated());
  CHECK(b->is_cpu_accessible());
  CHECK(b->dtype() == DType::kU8);
  CHECK(b->size() == kPage + 50);
  auto bytes = *b->span<uint8_t>();
  bool all_match = true;
  for (size_t i = 0; i < bytes.size(); ++i) all_match = all_match && bytes[i] == pattern(kPage + i);
  CHECK(all_match);
}

TEST_CASE("runtime/file_backed/unaligned_offset") {
  TempFile file(2 * kPage + 10);
  for (size_t offset : {size_t{1}, size_t{7}, kPage - 1, kPage + 3}) {
    CAPTURE(offset);
    auto b = rt::Buffer::map_file(file.path, offset, 100);
    REQUIRE(b.ok());
    auto bytes = *b->bytes();
    CHECK(static_cast<uint8_t>(bytes[0]) == pattern(offset));
    CHECK(static_cast<uint8_t>(bytes[99]) == pattern(offset + 99));
  }
  // The very last bytes of the file.
  auto tail = rt::Buffer::map_file(file.path, 2 * kPage + 5, 5);
  REQUIRE(tail.ok());
  CHECK(*tail->at<uint8_t>(4) == pattern(2 * kPage + 9));
}

TEST_CASE("runtime/file_backed/is_read_only_and_views_too") {
  TempFile file(256);
  auto b = *rt::Buffer::map_file(file.path, 0, 256);
  CHECK_FALSE(b.is_mutable());
  auto mb = b.mutable_bytes();
  CHECK(mb.status().code() == ErrorCode::kReadOnly);
  CHECK(mb.status().message().find("FileBacked") != std::string::npos);
  std::vector<std::byte> src(256);
  CHECK(b.copy_in(src).code() == ErrorCode::kReadOnly);
  auto view = *b.view(16, 32);
  CHECK(view.ownership() == rt::Ownership::kAliased);
  CHECK_FALSE(view.is_mutable());
  CHECK(view.mutable_bytes().status().code() == ErrorCode::kReadOnly);
  CHECK(*view.at<uint8_t>(0) == pattern(16));
  // Copying out of a mapped file into owned memory is fine.
  auto owned = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {32});
  REQUIRE(owned.copy_from(view).ok());
  CHECK(*owned.at<uint8_t>(31) == pattern(47));
}

TEST_CASE("runtime/file_backed/missing_file") {
  auto b = rt::Buffer::map_file("/nonexistent/carve/weights.bin", 0, 16);
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == ErrorCode::kIoError);
  CHECK(b.status().message().find("/nonexistent/carve/weights.bin") != std::string::npos);
}

TEST_CASE("runtime/file_backed/region_past_end") {
  TempFile file(1000);
  auto past = rt::Buffer::map_file(file.path, 900, 101);
  REQUIRE_FALSE(past.ok());
  CHECK(past.status().code() == ErrorCode::kOutOfBounds);
  CHECK(past.status().message().find(file.path) != std::string::npos);
  CHECK(past.status().message().find("1000 bytes") != std::string::npos);
  CHECK(rt::Buffer::map_file(file.path, 1001, 0).status().code() == ErrorCode::kOutOfBounds);
  CHECK(rt::Buffer::map_file(file.path, UINT64_MAX, 2).status().code() == ErrorCode::kOutOfBounds);  // no wrap
  CHECK(rt::Buffer::map_file(file.path, 900, 100).ok());  // exactly to the end
  auto empty = rt::Buffer::map_file(file.path, 1000, 0);   // empty region at the end
  REQUIRE(empty.ok());
  CHECK(empty->bytes()->empty());
}

TEST_CASE("runtime/file_backed/truncated_file") {
  // A weights file cut short: the declared region no longer fits.
  TempFile file(4096);
  std::filesystem::resize_file(file.path, 100);
  auto b = rt::Buffer::map_file(file.path, 64, 512);
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == ErrorCode::kOutOfBounds);
  CHECK(b.status().message().find(file.path) != std::string::npos);
  CHECK(b.status().message().find("100 bytes") != std::string::npos);
}

TEST_CASE("runtime/file_backed/directory_is_io_error") {
  auto b = rt::Buffer::map_file(std::filesystem::temp_directory_path().string(), 0, 1);
  CHECK(b.status().code() == ErrorCode::kIoError);
}
