#include <doctest/doctest.h>

#include <limits>

#include "carve/ir/dtype.h"
#include "carve/ir/shape.h"
#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

TEST_CASE("ir/dtype/names sizes and parse round trip") {
  CHECK(all_dtypes().size() == 13);
  for (DType d : all_dtypes()) {
    Result<DType> back = parse_dtype(dtype_name(d));
    REQUIRE(back.ok());
    CHECK(*back == d);
    CHECK(dtype_size(d) > 0);
  }
  CHECK(dtype_name(DType::kBool) == "bool");
  CHECK(dtype_size(DType::kF32) == 4);
  CHECK(dtype_size(DType::kBf16) == 2);
  CHECK(dtype_size(DType::kF64) == 8);
  CHECK(dtype_size(DType::kBool) == 1);
  CHECK(is_float(DType::kBf16));
  CHECK(is_integer(DType::kU8));
  CHECK_FALSE(is_integer(DType::kBool));
}

TEST_CASE("ir/dtype/16-bit and wide unsigned integers") {
  struct Expect {
    DType dtype;
    std::string_view name;
    int64_t size;
    bool is_unsigned;
  };
  for (const Expect& e : {Expect{DType::kI16, "i16", 2, false}, Expect{DType::kU16, "u16", 2, true},
                          Expect{DType::kU32, "u32", 4, true}, Expect{DType::kU64, "u64", 8, true}}) {
    CAPTURE(e.name);
    CHECK(dtype_name(e.dtype) == e.name);
    CHECK(dtype_size(e.dtype) == e.size);
    CHECK(is_integer(e.dtype));
    CHECK_FALSE(is_float(e.dtype));
    CHECK(is_unsigned_int(e.dtype) == e.is_unsigned);
    Result<DType> back = parse_dtype(e.name);
    REQUIRE(back.ok());
    CHECK(*back == e.dtype);
  }
  CHECK(is_unsigned_int(DType::kU8));
  for (DType signed_or_not_int : {DType::kI8, DType::kI32, DType::kI64, DType::kBool, DType::kF32}) {
    CHECK_FALSE(is_unsigned_int(signed_or_not_int));
  }
  // The names the parser suggests cover the new types.
  Result<DType> bad = parse_dtype("u128");
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.status().message(), "u64"));
}

TEST_CASE("ir/dtype/unknown name is rejected") {
  Result<DType> d = parse_dtype("f33");
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == ErrorCode::kInvalidArgument);
  CHECK(contains(d.status().message(), "f33"));
  CHECK(dtype_name(static_cast<DType>(200)) == "?");
}

TEST_CASE("ir/shape/element count and byte size") {
  Shape s{2, 3, 4};
  CHECK(s.rank() == 3);
  CHECK(*s.num_elements() == 24);
  CHECK(*byte_size(DType::kF16, s) == 48);
  CHECK(*Shape{}.num_elements() == 1);  // scalar
  CHECK(*Shape{0, 7}.num_elements() == 0);
  CHECK(Shape{2, 3}.to_string() == "[2,3]");
  CHECK(f32({2, 3}).to_string() == "f32[2,3]");
  CHECK(*f32({}).byte_size() == 4);
}

TEST_CASE("ir/shape/validate rejects rank over 8 and negative dims") {
  CHECK(Shape{1, 1, 1, 1, 1, 1, 1, 1}.validate().ok());
  Status too_big = Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}.validate();
  CHECK(too_big.code() == ErrorCode::kShapeError);
  CHECK(contains(too_big.message(), "rank 9"));
  Status negative = Shape{2, -1}.validate();
  CHECK(negative.code() == ErrorCode::kShapeError);
  CHECK(contains(negative.message(), "negative"));
}

TEST_CASE("ir/shape/element count overflow is rejected") {
  const int64_t big = int64_t{1} << 40;
  Result<int64_t> n = Shape{big, big}.num_elements();
  REQUIRE_FALSE(n.ok());
  CHECK(n.status().code() == ErrorCode::kShapeError);
  CHECK(contains(n.status().message(), "overflows int64"));
}

TEST_CASE("ir/shape/byte size overflow is rejected") {
  // 2^62 elements fit in int64, their f32 bytes (2^64) do not.
  Shape s{int64_t{1} << 62};
  CHECK(s.num_elements().ok());
  CHECK(byte_size(DType::kU8, s).ok());
  Result<int64_t> bytes = byte_size(DType::kF32, s);
  REQUIRE_FALSE(bytes.ok());
  CHECK(bytes.status().code() == ErrorCode::kShapeError);
  CHECK(contains(bytes.status().message(), "byte size of f32"));
  CHECK(f32(s).validate().code() == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/inference rejects outputs whose byte size overflows") {
  // Each input fits; the concatenation's f32 byte size does not.
  const int64_t half = int64_t{1} << 61;
  const TensorType part = tt(DType::kF16, {half});
  auto r = infer(OpKind::kConcat, {part, part}, {{"axis", 0}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kShapeError);
  CHECK(contains(r.status().message(), "output #0"));
  // pad arithmetic that overflows int64 itself.
  auto p = infer(OpKind::kPad, {tt(DType::kU8, {8})},
                 {{"pads", std::vector<int64_t>{std::numeric_limits<int64_t>::max(), 0}}});
  CHECK(p.status().code() == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/builder rejects an overflowing declaration") {
  GraphBuilder b;
  b.input("x", DType::kF64, {int64_t{1} << 31, int64_t{1} << 31});  // 2^62 * 8 bytes
  Result<Graph> g = b.build();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kShapeError);
  CHECK(contains(g.status().message(), "input 'x'"));
}
