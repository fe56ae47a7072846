// JIT gather_nd, scatter_nd and top_k against the reference: exact (f16 scatter
// reductions within 1e-3: the kernel adds in f32 before rounding to f16, the reference
// in double), out-of-range indices (zeros / skipped updates), and scatter_nd/top_k as one
// tile (a fixed order whatever the thread count).
#include "compute_test_util.h"

namespace carve::jit::computetest {
namespace {

using ir::DType;
using ir::OpKind;

// Index rows [rows, k] into dims [first, first + k) of `dims`, each in [-d, d).
HostTensor random_indices(DType dtype, std::vector<int64_t> lead, int64_t k, const std::vector<int64_t>& dims,
                          size_t first) {
  int64_t rows = 1;
  for (int64_t d : lead) rows *= d;
  std::vector<double> v;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t d = dims[first + static_cast<size_t>(j)];
      v.push_back(static_cast<double>(*rc::gen::inRange<int64_t>(-d, d)));
    }
  }
  lead.push_back(k);
  return HostTensor::from_doubles(dtype, ir::Shape(lead), v);
}

std::vector<int64_t> random_dims(int rank) {
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (auto& d : dims) d = *rc::gen::inRange<int64_t>(1, 5);
  return dims;
}

const std::vector<DType> kDtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBf16, DType::kI8,
                                    DType::kU8,  DType::kI32, DType::kI64, DType::kBool};

TEST_CASE("jit/compute/gather_nd/property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("gather_nd random shapes, batch_dims, k, negative indices, dtypes", 60, [] {
    const int rank = *rc::gen::inRange(1, 5);
    const std::vector<int64_t> dims = random_dims(rank);
    const int batch = *rc::gen::inRange(0, rank);
    const int64_t k = *rc::gen::inRange<int64_t>(1, rank - batch + 1);
    std::vector<int64_t> lead(dims.begin(), dims.begin() + batch);
    lead.push_back(*rc::gen::inRange<int64_t>(0, 4));
    const DType dt = *rc::gen::elementOf(kDtypes);
    const DType it = *rc::gen::element(DType::kI32, DType::kI64);
    HostTensor idx = random_indices(it, lead, k, dims, static_cast<size_t>(batch));
    GraphBuilder b;
    auto x = b.input("x", dt, ir::Shape(dims));  // inputs declared in the order they are given
    b.output(b.gather_nd(x, b.input("i", it, idx.type.shape), batch));
    auto g = b.build();
    RC_ASSERT(g.ok());
    std::mt19937_64 rng(*rc::gen::arbitrary<uint32_t>());
    RC_ASSERT(jit_vs_reference(*g, {random_tensor(rng, dt, ir::Shape(dims)), idx}, 0, 0) == std::string());
  }));
}

TEST_CASE("jit/compute/gather_nd/out of range reads zeros") {
  if (skip_without_jit()) return;
  GraphBuilder b;
  auto x = b.input("x", DType::kF32, {2, 3});
  b.output(b.gather_nd(x, b.input("i", DType::kI64, {3, 2})));
  auto e = b.input("e", DType::kF32, {0, 3});
  b.output(b.gather_nd(e, b.input("j", DType::kI64, {2, 1})));
  auto g = b.build();
  REQUIRE(g.ok());
  auto out = run_jit(*shared_jit(), *g, {HostTensor::from<float>(ir::Shape{2, 3}, {1, 2, 3, 4, 5, 6}),
                                         HostTensor::from<int64_t>(ir::Shape{3, 2}, {-1, -1, 2, 0, 0, INT64_MIN}),
                                         HostTensor::from<float>(ir::Shape{0, 3}, {}),
                                         HostTensor::from<int64_t>(ir::Shape{2, 1}, {0, -1})});
  REQUIRE(out.ok());
  CHECK((*out)[0].as<float>() == std::vector<float>{6, 0, 0});
  CHECK((*out)[1].as<float>() == std::vector<float>(6, 0.0f));
}

TEST_CASE("jit/compute/gather_nd/tiles cover every output once") {
  if (skip_without_jit()) return;
  GraphBuilder b;
  auto x = b.input("x", DType::kF32, {3, 5, 4});
  b.output(b.gather_nd(x, b.input("i", DType::kI64, {3, 7, 1}), 1));  // 21 slices of 4
  auto g = b.build();
  REQUIRE(g.ok());
  std::mt19937_64 rng(11);
  std::vector<double> idx;
  for (int i = 0; i < 21; ++i) idx.push_back(static_cast<double>(static_cast<int>(rng() % 10) - 5));
  const std::vector<HostTensor> in = {random_tensor(rng, DType::kF32, ir::Shape{3, 5, 4}),
                                      HostTensor::from_doubles(DType::kI64, ir::Shape{3, 7, 1}, idx)};
  auto ref = run_reference(*g, in);
  REQUIRE(ref.ok());
  // 84 outputs in 5 tiles (a tile boundary inside a slice), run out of order.
  auto got = run_node_tiles(*g, g->nodes.front().id, in, 5, {{3, 5}, {0, 1}, {1, 3}});
  REQUIRE(got.ok());
  CHECK(compare(*got, (*ref)[0]) == std::string());
}

TEST_CASE("jit/compute/scatter_nd/property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("scatter_nd random shapes, k, duplicates, reductions, dtypes", 80, [] {
    const int rank = *rc::gen::inRange(1, 4);
    const std::vector<int64_t> dims = random_dims(rank);
    const int64_t k = *rc::gen::inRange<int64_t>(1, rank + 1);
    const std::vector<int64_t> lead = {*rc::gen::inRange<int64_t>(0, 7)};  // rows > data: duplicates
    DType dt = *rc::gen::elementOf(kDtypes);
    const std::string reduction = *rc::gen::elementOf(std::vector<std::string>{"none", "add", "mul", "max", "min"});
    if (reduction != "none" && dt == DType::kBool) dt = DType::kI8;
    const DType it = *rc::gen::element(DType::kI32, DType::kI64);
    HostTensor idx = random_indices(it, lead, k, dims, 0);
    std::vector<int64_t> upd = lead;
    upd.insert(upd.end(), dims.begin() + k, dims.end());
    GraphBuilder b;
    auto x = b.input("x", dt, ir::Shape(dims));
    auto i = b.input("i", it, idx.type.shape);
    b.output(b.scatter_nd(x, i, b.input("u", dt, ir::Shape(upd)), reduction));
    auto g = b.build();
    RC_ASSERT(g.ok());
    std::mt19937_64 rng(*rc::gen::arbitrary<uint32_t>());
    const double rtol = dt == DType::kF16 || dt == DType::kBf16 ? 1e-2 : 0;
    RC_ASSERT(jit_vs_reference(*g, {random_tensor(rng, dt, ir::Shape(dims), -3, 3), idx,
                                    random_tensor(rng, dt, ir::Shape(upd), -3, 3)}, rtol, 0) == std::string());
  }));
}

TEST_CASE("jit/compute/scatter_nd/out of range updates are skipped and it runs as one tile") {
  if (skip_without_jit()) return;
  GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4});
  auto i = b.input("i", DType::kI64, {4, 1});
  b.output(b.scatter_nd(x, i, b.input("u", DType::kF32, {4}), "add"));
  auto g = b.build();
  REQUIRE(g.ok());
  auto out = run_jit(*shared_jit(), *g, {HostTensor::from<float>(ir::Shape{4}, {1, 2, 3, 4}),
                                         HostTensor::from<int64_t>(ir::Shape{4, 1}, {4, -1, -5, -1}),
                                         HostTensor::from<float>(ir::Shape{4}, {10, 20, 30, 40})});
  REQUIRE(out.ok());
  CHECK((*out)[0].as<float>() == std::vector<float>{1, 2, 3, 64});
  auto group = make_single_node_group(*g, g->nodes.front().id);
  REQUIRE(group.ok());
  CHECK(group->num_tiles == 1);  // duplicates reduce in index order whatever the thread count
}

TEST_CASE("jit/compute/top_k/property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("top_k random shape, axis, k, largest, ties, NaN", 60, [] {
    const int rank = *rc::gen::inRange(1, 4);
    std::vector<int64_t> dims = random_dims(rank);
    dims[0] = *rc::gen::element<int64_t>(1, 3, 17);
    const int64_t axis = *rc::gen::inRange<int64_t>(-rank, rank);
    const int64_t extent = dims[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
    const int64_t k = *rc::gen::inRange<int64_t>(0, extent + 1);
    const bool largest = *rc::gen::arbitrary<bool>();
    const DType dt = *rc::gen::element(DType::kF32, DType::kF64, DType::kF16, DType::kBf16, DType::kI8, DType::kU8,
                                       DType::kI32, DType::kI64);
    GraphBuilder b;
    for (ValueId v : b.top_k(b.input("x", dt, ir::Shape(dims)), k, axis, largest)) b.output(v);
    auto g = b.build();
    RC_ASSERT(g.ok());
    const std::vector<double> pool = ir::is_float(dt) ? std::vector<double>{-1.5, 0, 2, 2, NAN, -0.0, 7}
                                                      : std::vector<double>{-3, 0, 1, 1, 100};
    std::vector<double> v(static_cast<size_t>(*ir::Shape(dims).num_elements()));
    for (double& e : v) e = pool[static_cast<size_t>(*rc::gen::inRange<size_t>(0, pool.size()))];
    RC_ASSERT(jit_vs_reference(*g, {HostTensor::from_doubles(dt, ir::Shape(dims), v)}, 0, 0) == std::string());
  }));
}

}  // namespace
}  // namespace carve::jit::computetest
