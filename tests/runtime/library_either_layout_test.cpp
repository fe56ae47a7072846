// carve's own kernels in either layout (jit/dnnl/either_layout.cpp): inference batch norm,
// relu, the two as one group, and concat copies. Checked: which groups they take; results within the reference's
// tolerance (batch norm), or its exact bytes (relu, concat); the same bytes sequentially and
// at 1 and 2 threads; and that between library convs they keep the values blocked (a
// DenseNet block). In a build without oneDNN (CARVE_WITH_DNNL=OFF) every group is generated.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/jit/library_kernel.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "library_test_util.h"
#include "runtime_test_util.h"
#include "test_support.h"

using namespace carve;
using namespace carve::libtest;
using ir::DType;

namespace {

bool have_library() { return !jit::library_provider_name().empty(); }

// Random f32 bytes in [lo, lo + 2) (a variance must be positive).
std::vector<uint8_t> shifted_f32_bytes(int64_t n, uint32_t seed, float lo) {
  std::vector<uint8_t> bytes = test::random_f32_bytes(n, seed);
  for (int64_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + i * 4, 4);
    f += lo + 1.f;
    std::memcpy(bytes.data() + i * 4, &f, 4);
  }
  return bytes;
}

// batch_norm(x) with constant parameters (c channels), seeds from `seed`.
ir::ValueId batch_norm(ir::GraphBuilder& b, ir::ValueId x, int64_t c, uint32_t seed) {
  const std::string s = std::to_string(seed);
  auto scale = b.constant("scale" + s, DType::kF32, {c}, test::random_f32_bytes(c, seed));
  auto bias = b.constant("bias" + s, DType::kF32, {c}, test::random_f32_bytes(c, seed + 1));
  auto mean = b.constant("mean" + s, DType::kF32, {c}, test::random_f32_bytes(c, seed + 2));
  auto var = b.constant("var" + s, DType::kF32, {c}, shifted_f32_bytes(c, seed + 3, 0.1f));
  return b.batch_norm(x, scale, bias, mean, var, 1e-3);
}

ir::Graph build(ir::GraphBuilder& b) {
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

// Runs g (sequentially, at 1 and 2 threads): the reference's bytes exactly; the library
// kernels' count (-1: no CPU session).
int64_t check_exact(const ir::Graph& g, const std::vector<reference::HostTensor>& in) {
  auto one = runtime::testing::cpu_session_or_skip(1);
  if (!one) return -1;
  auto two = runtime::testing::cpu_session_or_skip(2);
  auto want = reference::run_reference(g, in);
  REQUIRE(want.ok());
  runtime::CompileOptions sequential;
  sequential.schedule.sequential = true;
  const RunResult got = run(*one, g, in, {});
  CHECK(got.bytes == want->at(0).bytes);
  CHECK(run(*two, g, in, {}).bytes == got.bytes);
  CHECK(run(*one, g, in, sequential).bytes == got.bytes);
  return got.library_kernels;
}

}  // namespace

TEST_CASE("runtime/library/batch norm and relu in NCHW: taken as one group, within the reference's tolerance") {
  struct Case {
    std::string name;
    ir::Shape shape;
  };
  for (const Case& c : std::vector<Case>{{"one image, whole blocks", {1, 32, 9, 9}},
                                         {"two images, 12 channels", {2, 12, 5, 7}},
                                         {"rank 2 (one element a channel)", {6, 10}},
                                         {"many tiles", {1, 48, 40, 40}}}) {
    CAPTURE(c.name);
    ir::GraphBuilder b("bn");
    auto x = b.input("x", DType::kF32, c.shape);
    b.output(b.rename(b.relu(batch_norm(b, x, c.shape[1], 10)), "y"));
    const ir::Graph g = build(b);
    const int64_t n = *c.shape.num_elements();
    const int64_t taken = check_run(g, tensor(c.shape, test::random_f32_bytes(n, 5)), {}, true);
    if (taken < 0) return;
    CHECK(taken == (have_library() ? 1 : 0));
  }
}

// The batch norm's result read by more than its relu (here a graph output): two groups, each
// the library's, with the same bytes as the pair as one group.
TEST_CASE("runtime/library/a batch norm read by more than its relu stays its own group") {
  const ir::Shape shape{1, 32, 9, 9};
  auto graph = [&](bool bn_out) {
    ir::GraphBuilder b("bn_relu");
    auto x = b.input("x", DType::kF32, shape);
    auto n = batch_norm(b, x, 32, 10);
    b.output(b.rename(b.relu(n), "y"));
    if (bn_out) b.output(b.rename(n, "n"));
    return build(b);
  };
  const reference::HostTensor in = tensor(shape, test::random_f32_bytes(32 * 81, 5));
  const ir::Graph both = graph(true), pair = graph(false);
  const int64_t taken = check_run(both, in, {}, true);
  if (taken < 0) return;
  CHECK(taken == (have_library() ? 2 : 0));
  auto session = runtime::testing::cpu_session_or_skip(1);
  CHECK(run(*session, both, {in}, {}).bytes == run(*session, pair, {in}, {}).bytes);
  if (!have_library()) return;
  auto program = session->compile(pair, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  CHECK((*program)->explain().find("carve batch norm + relu, plain") != std::string::npos);
}

TEST_CASE("runtime/library/relu is the reference's, NaN and -0 included") {
  ir::GraphBuilder b("relu");
  auto x = b.input("x", DType::kF32, {3, 1000});
  b.output(b.rename(b.relu(x), "y"));
  const ir::Graph g = build(b);
  reference::HostTensor in = tensor({3, 1000}, test::random_f32_bytes(3000, 6));
  const float special[] = {std::nanf(""), -0.f, -INFINITY, INFINITY};
  for (size_t i = 0; i < 4; ++i) std::memcpy(in.bytes.data() + (i * 997) * 4, &special[i], 4);
  const int64_t taken = check_exact(g, {in});
  if (taken < 0) return;
  CHECK(taken == (have_library() ? 1 : 0));
}

TEST_CASE("runtime/library/a batch norm whose parameters are computed at run time stays generated") {
  ir::GraphBuilder b("bn_input_scale");
  auto x = b.input("x", DType::kF32, {1, 16, 6, 6});
  auto scale = b.input("scale", DType::kF32, {16});
  auto mean = b.constant("mean", DType::kF32, {16}, test::random_f32_bytes(16, 3));
  auto var = b.constant("var", DType::kF32, {16}, shifted_f32_bytes(16, 4, 0.5f));
  b.output(b.rename(b.batch_norm(x, scale, mean, mean, var, 1e-5), "y"));
  const ir::Graph g = build(b);
  const int64_t taken = check_run(
      g, {tensor({1, 16, 6, 6}, test::random_f32_bytes(576, 5)), tensor({16}, test::random_f32_bytes(16, 6))}, {}, true);
  if (taken < 0) return;
  CHECK(taken == 0);
}

TEST_CASE("runtime/library/concat copies: any axis and dtype, a repeated input, an empty one, many tiles") {
  struct Case {
    std::string name;
    DType dtype;
    std::vector<ir::Shape> shapes;  // the inputs, in concat order (an index repeats one)
    std::vector<int> order;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {"rows crossing tiles (480 KB, axis -1)", DType::kF32, {{1000, 50}, {1000, 70}}, {0, 1}, -1},
      {"channels of one image", DType::kF32, {{1, 16, 5, 5}, {1, 8, 5, 5}, {1, 24, 5, 5}}, {0, 1, 2}, 1},
      {"the same input twice, i32, axis 0", DType::kI32, {{3, 4}, {5, 4}}, {0, 1, 0}, 0},
      {"an empty input, u8, middle axis", DType::kU8, {{2, 0, 3}, {2, 7, 3}}, {0, 1}, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    ir::GraphBuilder b("concat");
    std::vector<ir::ValueId> inputs;
    std::vector<reference::HostTensor> in;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      inputs.push_back(b.input("x" + std::to_string(i), c.dtype, c.shapes[i]));
      const int64_t bytes = *c.shapes[i].num_elements() * ir::dtype_size(c.dtype);
      reference::HostTensor t = tensor(c.shapes[i], test::random_f32_bytes((bytes + 3) / 4, 7 + i));
      t.type.dtype = c.dtype;
      t.bytes.resize(static_cast<size_t>(bytes));
      in.push_back(std::move(t));
    }
    std::vector<ir::ValueId> operands;
    for (int i : c.order) operands.push_back(inputs[static_cast<size_t>(i)]);
    b.output(b.rename(b.concat(operands, c.axis), "y"));
    const int64_t taken = check_exact(build(b), in);
    if (taken < 0) return;
    CHECK(taken == (have_library() ? 1 : 0));
  }
}

namespace {

// A DenseNet block, x f32[1, 16, 12, 12] (channels whole 16-blocks):
//   c0 = relu(conv3x3(x)); layer(v, c) = conv3x3(relu(conv1x1(relu(bn(v)), c->32)), 32->16)
//   a1 = layer(c0, 16); a2 = layer(concat(c0, a1), 32); f = relu(bn(concat(c0, a1, a2)))
//   outputs y = conv3x3(f, 48->16) and tanh(f)
// The first concat folds into views (c0 and a1 are written side by side); the second, over
// the same values, is a copy. Each batch norm -> relu is one group. f is read by a
// generated kernel (tanh), so it is plain: its batch norm + relu reads blocked and writes
// plain ("mixed"), and the last conv reads it plain. The relu after each 1x1 conv is
// its epilogue; a lone relu (mixed, in place) is the case below.
ir::Graph make_dense_block() {
  ir::GraphBuilder b("dense");
  auto x = b.input("x", DType::kF32, {1, 16, 12, 12});
  uint32_t seed = 80;
  auto conv = [&](ir::ValueId in, int64_t ci, int64_t co, int64_t k) { return random_conv(b, seed, in, ci, co, k, false); };
  auto norm = [&](ir::ValueId v, int64_t c) { return b.relu(batch_norm(b, v, c, seed += 4)); };
  auto layer = [&](ir::ValueId v, int64_t c) { return conv(b.relu(conv(norm(v, c), c, 32, 1)), 32, 16, 3); };
  auto c0 = b.relu(conv(x, 16, 16, 3));
  auto a1 = layer(c0, 16);
  auto a2 = layer(b.concat({c0, a1}, 1), 32);
  auto f = norm(b.concat({c0, a1, a2}, 1), 48);
  b.output(b.rename(conv(f, 48, 16, 3), "y"));
  b.output(b.rename(b.tanh(f), "f"));
  return build(b);
}

}  // namespace

TEST_CASE("runtime/library/a DenseNet block stays blocked through batch norms, relus and concat copies") {
  const ir::Graph g = make_dense_block();
  const int64_t taken = check_run(g, tensor({1, 16, 12, 12}, test::random_f32_bytes(16 * 144, 9)), {}, true);
  if (taken < 0 || !have_library()) return;
  const std::string layout = jit::library_blocked_layout();
  // Six convs, three batch norm + relu pairs (the other relus fused into convs), a concat copy.
  if (!layout.empty()) CHECK(taken == 6 + 3 + 1);
  auto session = runtime::testing::cpu_session_or_skip(1);
  auto program = session->compile(g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const std::string text = (*program)->explain();
  for (const char* what : {"carve batch norm + relu", "carve concat copy"}) {
    CAPTURE(what);
    CHECK(text.find(std::string(what) + ", " + (layout.empty() ? "plain" : layout)) != std::string::npos);
  }
  CHECK(text.find("carve batch norm + relu, " + std::string(layout.empty() ? "plain" : "mixed")) != std::string::npos);
}
