// carve::no_exceptions: the boundary every public entry point that allocates by its input's
// size runs its body in (parse, compile, run, planner strategies, CSV, ONNX import).
#include <doctest/doctest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "carve/status.h"

using namespace carve;

TEST_CASE("ir/status/no_exceptions turns exceptions into a Status naming the call") {
  CHECK(no_exceptions("ok", [] { return Status(); }).ok());
  Result<int> value = no_exceptions("value", []() -> Result<int> { return 7; });
  REQUIRE(value.ok());
  CHECK(*value == 7);

  Status oom = no_exceptions("parsing 'x'", []() -> Status { throw std::bad_alloc(); });
  CHECK(oom.code() == ErrorCode::kOutOfMemory);
  CHECK(oom.message() == "parsing 'x': out of memory");

  Result<int> other = no_exceptions("planning", []() -> Result<int> { throw std::length_error("vector too long"); });
  CHECK(other.status().code() == ErrorCode::kInternal);
  CHECK(other.status().message().find("planning: unexpected exception: vector too long") != std::string::npos);

  Status unknown = no_exceptions("running", []() -> Status { throw 42; });
  CHECK(unknown.code() == ErrorCode::kInternal);
}
