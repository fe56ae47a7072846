// write_file: every failure carries the operating system's reason.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "carve/file.h"

using namespace carve;

TEST_CASE("ir/file/write_file writes the bytes and replaces an older file") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("carve_write_file_" + std::to_string(::getpid()))).string();
  REQUIRE(write_file(path, std::string_view("first, longer text")).ok());
  REQUIRE(write_file(path, std::string_view("second")).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "second");
  std::remove(path.c_str());
}

TEST_CASE("ir/file/write errors name the path and the reason") {
  const Status missing_dir = write_file("/nonexistent-carve-dir/x.json", std::string_view("{}"));
  CHECK(missing_dir.code() == ErrorCode::kIoError);
  CHECK(missing_dir.message().find("'/nonexistent-carve-dir/x.json'") != std::string::npos);
  CHECK(missing_dir.message().find("No such file or directory") != std::string::npos);
  // /dev/full accepts the open and fails every write with ENOSPC: the disk-full case.
  const Status full = write_file("/dev/full", std::string_view("some bytes"));
  CHECK(full.code() == ErrorCode::kIoError);
  CHECK(full.message().find("No space left on device") != std::string::npos);
}
