// MiniMalloc CSV reader and writer.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "carve/planner/csv.h"
#include "carve/planner/strategy.h"
#include "planner_test_util.h"
#include "test_support.h"

using namespace carve;
using namespace carve::planner;

namespace {

// Expects a kParseError whose message starts with "line <line>:" and contains `part`.
void expect_error(std::string_view text, int line, std::string_view part) {
  auto r = parse_minimalloc_csv(text);
  INFO(text);
  REQUIRE_FALSE(r.ok());
  INFO(r.status().to_string());
  CHECK(r.status().code() == ErrorCode::kParseError);
  CHECK(r.status().message().rfind(fmt::format("line {}:", line), 0) == 0);
  CHECK(r.status().message().find(part) != std::string::npos);
}

}  // namespace

TEST_CASE("planner/csv/parses_basic_file") {
  auto r = parse_minimalloc_csv("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n");
  REQUIRE(r.ok());
  REQUIRE(r->buffers.size() == 2);
  CHECK(r->buffers[0].id == "b1");
  CHECK(r->buffers[0].start == 0);
  CHECK(r->buffers[0].end == 3);
  CHECK(r->buffers[0].size == 4);
  CHECK(r->buffers[0].alignment == 1);
  CHECK(r->buffers[1].id == "b2");
  CHECK(r->buffers[1].end == 9);
}

TEST_CASE("planner/csv/columns_by_name_extras_ignored") {
  auto r = parse_minimalloc_csv(
      "size, offset ,upper,hint,alignment,lower,id\r\n"
      "16,999,10,x,8,2,tensor:0\r\n"
      "\r\n"
      " 0 ,0, 3 ,,1, 1 ,z\r\n");
  REQUIRE(r.ok());
  REQUIRE(r->buffers.size() == 2);
  const BufferRequest& b = r->buffers[0];
  CHECK(b.id == "tensor:0");
  CHECK(b.start == 2);
  CHECK(b.end == 10);
  CHECK(b.size == 16);
  CHECK(b.alignment == 8);
  CHECK(r->buffers[1].size == 0);
  CHECK(r->buffers[1].start == 1);
  // No trailing newline, negative times.
  auto n = parse_minimalloc_csv("id,lower,upper,size\na,-4,-2,7");
  REQUIRE(n.ok());
  CHECK(n->buffers[0].start == -4);
}

TEST_CASE("planner/csv/header_only_is_an_empty_problem") {
  auto r = parse_minimalloc_csv("id,lower,upper,size\n");
  REQUIRE(r.ok());
  CHECK(r->buffers.empty());
}

TEST_CASE("planner/csv/errors_carry_line_numbers") {
  expect_error("", 1, "empty");
  expect_error("\n\n", 1, "empty");
  expect_error("id,lower,size\n", 1, "upper");
  expect_error("name,lower,upper,size\n", 1, "id");
  expect_error("id,lower,upper,size,size\n", 1, "twice");
  expect_error("id,lower,upper,size\na,0,1,2\nb,0,1\n", 3, "expected 4 fields, found 3");
  expect_error("id,lower,upper,size\na,0,1,2,9\n", 2, "found 5");
  expect_error("id,lower,upper,size\na,0,1,2\n\nb,x,1,2\n", 4, "lower 'x'");
  expect_error("id,lower,upper,size\nb,0,1.5,2\n", 2, "upper '1.5'");
  expect_error("id,lower,upper,size\nb,0,1,12abc\n", 2, "size '12abc'");
  expect_error("id,lower,upper,size\nb,0,1,\n", 2, "size ''");
  expect_error("id,lower,upper,size\nb,0,1,99999999999999999999\n", 2, "size");
  expect_error("id,lower,upper,size,alignment\nb,0,1,4,two\n", 2, "alignment 'two'");
  expect_error("id,lower,upper,size\nb,0,1,-4\n", 2, "negative size -4");
  expect_error("id,lower,upper,size\nb,5,5,4\n", 2, "lower 5 >= upper 5");
  expect_error("id,lower,upper,size\nb,6,5,4\n", 2, "lower 6 >= upper 5");
  expect_error("id,lower,upper,size,alignment\nb,0,1,4,0\n", 2, "alignment 0 < 1");
  expect_error("id,lower,upper,size\nb,0,1,4\nc,0,1,4\nb,2,3,4\n", 4, "duplicate id 'b' (first on line 2)");
  expect_error("id,lower,upper,size\n,0,1,4\n", 2, "empty id");
}

TEST_CASE("planner/csv/read_file_and_io_errors") {
  auto r = read_minimalloc_csv(carve::test::minimalloc_dir() + "/examples__input.12.csv");
  REQUIRE(r.ok());
  CHECK(r->buffers.size() == 5);
  CHECK(r->buffers[0].id == "b1");
  auto missing = read_minimalloc_csv("/nonexistent/carve/planner.csv");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == ErrorCode::kIoError);
  CHECK(missing.status().message().find("/nonexistent/carve/planner.csv") != std::string::npos);

  // A parse error from a file names the path and the line.
  const auto path = std::filesystem::temp_directory_path() / "carve_planner_csv_bad.csv";
  {
    std::ofstream out(path);
    out << "id,lower,upper,size\na,0,1,4\nb,0,1,-1\n";
  }
  auto bad = read_minimalloc_csv(path.string());
  std::filesystem::remove(path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::kParseError);
  CHECK(bad.status().message().find(path.string()) != std::string::npos);
  CHECK(bad.status().message().find("line 3:") != std::string::npos);
}

TEST_CASE("planner/csv/write_round_trips") {
  using carve::planner::testing::buf;
  Problem p{{buf("a", 0, 3, 10), buf("b", 2, 5, 6, 4), buf("z", 1, 2, 0)}};
  const MemoryPlan plan{16, {0, 12, 0}};
  auto text = write_minimalloc_csv(p, plan);
  REQUIRE(text.ok());
  CHECK(*text == "id,lower,upper,size,alignment,offset\na,0,3,10,1,0\nb,2,5,6,4,12\nz,1,2,0,1,0\n");
  auto back = parse_minimalloc_csv(*text);
  REQUIRE(back.ok());
  REQUIRE(back->buffers.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(back->buffers[i].id == p.buffers[i].id);
    CHECK(back->buffers[i].start == p.buffers[i].start);
    CHECK(back->buffers[i].end == p.buffers[i].end);
    CHECK(back->buffers[i].size == p.buffers[i].size);
    CHECK(back->buffers[i].alignment == p.buffers[i].alignment);
  }
  // Without alignments the column is left out (MiniMalloc's own layout).
  Problem q{{buf("x", 0, 1, 5)}};
  auto plain = write_minimalloc_csv(q, MemoryPlan{5, {0}});
  REQUIRE(plain.ok());
  CHECK(*plain == "id,lower,upper,size,offset\nx,0,1,5,0\n");
  // Errors: wrong offset count, unwritable id.
  CHECK(write_minimalloc_csv(q, MemoryPlan{5, {}}).status().code() == ErrorCode::kInvalidArgument);
  Problem comma{{buf("a,b", 0, 1, 5)}};
  CHECK(write_minimalloc_csv(comma, MemoryPlan{5, {0}}).status().code() == ErrorCode::kInvalidArgument);

  const auto path = std::filesystem::temp_directory_path() / "carve_planner_csv_out.csv";
  REQUIRE(write_minimalloc_csv_file(path.string(), p, plan).ok());
  auto reread = read_minimalloc_csv(path.string());
  std::filesystem::remove(path);
  REQUIRE(reread.ok());
  CHECK(reread->buffers.size() == 3);
  CHECK(write_minimalloc_csv_file("/nonexistent/dir/x.csv", p, plan).code() == ErrorCode::kIoError);
}

TEST_CASE("planner/property/csv_reports_a_repeated_id_with_its_first_line") {
  // Thousands of lines, so the id table grows (rehashes) while the file is read; one id
  // repeated at a random later line is reported there, naming the line it first appeared.
  CHECK(rc::check("a repeated id names both lines", [] {
    const int n = *rc::gen::inRange(2, 3000);
    const int first = *rc::gen::inRange(0, n - 1);
    const int later = *rc::gen::inRange(first + 1, n);
    std::string text = "id,lower,upper,size\n";
    for (int i = 0; i < n; ++i) {
      const int id = i == later ? first : i;
      text += fmt::format("t{},{},{},4\n", id * 7919 % 100003, i, i + 1);
    }
    auto r = parse_minimalloc_csv(text);
    RC_ASSERT(!r.ok());
    // Line 1 is the header: buffer k is on line k + 2.
    const std::string expected = fmt::format("line {}: duplicate id 't{}' (first on line {})", later + 2,
                                             first * 7919 % 100003, first + 2);
    RC_ASSERT(r.status().message().rfind(expected, 0) == 0);
  }));
}
