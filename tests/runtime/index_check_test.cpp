// Run-time index checks (program.h, IndexCheck): a gather-family node whose index tensor
// holds a value out of range fails the run with kOutOfBounds naming the node, the index
// and its element, instead of reading zeros; indices in range, negative ones included,
// run as before. Sequential and parallel runs report the same.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/runtime/session.h"
#include "runtime_test_util.h"

using namespace carve;
using ir::DType;

namespace {

template <typename T>
runtime::Buffer borrow(const std::vector<T>& v, DType dtype, ir::Shape shape) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T));
  return *runtime::Buffer::borrow(bytes, dtype, std::move(shape));
}

const std::vector<float> kData{1, 2, 3, 4, 5, 6, 7, 8};  // f32[4, 2]

// Runs `g` (inputs: data f32[4,2], then the indices) on 1 and 2 threads; the status of
// both runs must agree, and the outputs too when they succeed.
Status run_both(const ir::Graph& g, const runtime::Buffer& indices, std::vector<float>* out) {
  Status first;
  for (int threads : {1, 2}) {
    auto session = runtime::testing::cpu_session_or_skip(threads);
    if (!session) return Status(ErrorCode::kUnavailable, "no CPU JIT");
    auto program = session->compile(g, {});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    std::vector<runtime::Buffer> inputs{borrow(kData, DType::kF32, {4, 2}), indices};
    auto outputs = (*program)->run(inputs);
    if (threads == 1) {
      first = outputs.status();
      if (outputs.ok() && out) {
        auto s = *outputs->at(0).template span<float>();
        out->assign(s.begin(), s.end());
      }
    } else {
      CHECK(outputs.status().code() == first.code());
      CHECK(outputs.status().message() == first.message());
    }
  }
  return first;
}

}  // namespace

TEST_CASE("runtime/index_check/gather indices out of range fail the run naming the node") {
  ir::GraphBuilder b("gather_check");
  auto data = b.input("data", DType::kF32, {4, 2});
  auto idx = b.input("idx", DType::kI64, {3});
  b.output(b.rename(b.gather(data, idx, 0), "y"));
  auto g = b.build();
  REQUIRE(g.ok());
  std::vector<float> out;
  const std::vector<int64_t> good{3, -4, 1};
  Status ok = run_both(*g, borrow(good, DType::kI64, {3}), &out);
  if (ok.code() == ErrorCode::kUnavailable) return;
  REQUIRE_MESSAGE(ok.ok(), ok.to_string());
  CHECK(out == std::vector<float>{7, 8, 1, 2, 3, 4});
  const std::vector<int64_t> bad{0, 4, 1};
  Status failed = run_both(*g, borrow(bad, DType::kI64, {3}), nullptr);
  CHECK(failed.code() == ErrorCode::kOutOfBounds);
  CHECK(failed.message().find("gather '") != std::string::npos);
  CHECK(failed.message().find("index 4 (element 1) is out of range: it needs -4 <= index < 4") != std::string::npos);
  const std::vector<int64_t> below{-5, 0, 0};
  CHECK(run_both(*g, borrow(below, DType::kI64, {3}), nullptr).code() == ErrorCode::kOutOfBounds);
}

TEST_CASE("runtime/index_check/gather_nd and scatter_nd check each index component against its dim") {
  // i32 indices [2, 2]: (row, column) pairs into f32[4, 2].
  ir::GraphBuilder b("nd_check");
  auto data = b.input("data", DType::kF32, {4, 2});
  auto idx = b.input("idx", DType::kI32, {2, 2});
  auto picked = b.gather_nd(data, idx);
  b.output(b.rename(b.scatter_nd(data, idx, picked, "add"), "y"));
  auto g = b.build();
  REQUIRE(g.ok());
  std::vector<float> out;
  const std::vector<int32_t> good{3, 1, -4, -2};  // data[3][1] = 8, data[0][0] = 1
  Status ok = run_both(*g, borrow(good, DType::kI32, {2, 2}), &out);
  if (ok.code() == ErrorCode::kUnavailable) return;
  REQUIRE_MESSAGE(ok.ok(), ok.to_string());
  CHECK(out == std::vector<float>{2, 2, 3, 4, 5, 6, 7, 16});
  // Column 2 is out of range for a dim of 2, though row 2 would not be.
  const std::vector<int32_t> bad{1, 2, 0, 0};
  Status failed = run_both(*g, borrow(bad, DType::kI32, {2, 2}), nullptr);
  CHECK(failed.code() == ErrorCode::kOutOfBounds);
  CHECK(failed.message().find("index 2 (element 1) is out of range: it needs -2 <= index < 2") != std::string::npos);
}
