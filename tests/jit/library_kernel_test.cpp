// The oneDNN provider's contract (jit/library_kernel.h) at the jit level: what it takes,
// and which operands it offers to keep blocked (nChw16c on AVX-512, nChw8c on AVX2). A
// blocked layout is offered only where it has exactly the bytes of the NCHW value: one
// image and whole channel blocks (nChw16c pads 24 channels to 32; keeping such a value
// blocked would write past it).
// Without oneDNN in the build every group is declined.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>

#include "carve/ir/builder.h"
#include "carve/jit/fusion.h"
#include "carve/jit/library_kernel.h"
#include "test_support.h"

using namespace carve;
using ir::DType;

namespace {

struct Taken {
  std::unique_ptr<jit::LibraryKernel> kernel;
  jit::KernelGroup group;
  ir::Graph graph;
};

// y = conv(x) over x f32[n, c, 14, 14], weights [o, c/groups, k, k].
Taken take(int64_t n, int64_t c, int64_t o, int64_t k, int64_t groups = 1) {
  ir::GraphBuilder b("conv");
  auto x = b.input("x", DType::kF32, {n, c, 14, 14});
  auto w = b.constant("w", DType::kF32, {o, c / groups, k, k}, test::random_f32_bytes(o * (c / groups) * k * k, 1));
  const int64_t p = k / 2;
  b.output(b.rename(b.conv2d(x, w, std::nullopt, {.groups = groups, .pads = {p, p, p, p}}), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  Taken t{nullptr, {}, std::move(*g)};
  auto group = jit::make_single_node_group(t.graph, t.graph.nodes.front().id);
  REQUIRE_MESSAGE(group.ok(), group.status().to_string());
  t.group = std::move(*group);
  const ir::Graph& graph = t.graph;
  t.kernel = jit::make_library_kernel(graph, t.group, [&graph](ir::ValueId v) -> const void* {
    const auto& data = graph.value(v).data;
    return data ? data->data() : nullptr;
  });
  return t;
}

}  // namespace

TEST_CASE("jit/library/blocked layouts are offered only where they have the value's bytes") {
  if (jit::library_provider_name().empty()) {
    CHECK(take(1, 32, 32, 3).kernel == nullptr);
    return;
  }
  // Operands: x 0, w 1, y 2.
  Taken whole = take(1, 144, 32, 1);
  REQUIRE(whole.kernel);
  const std::string layout = jit::library_blocked_layout();
  if (layout.empty()) {  // no blocked kernels: NCHW only
    CHECK(whole.kernel->blocked_layout(0).empty());
    CHECK(whole.kernel->blocked_layout(2).empty());
    Taken other = take(1, 32, 32, 3);
    REQUIRE(other.kernel);
    CHECK(other.kernel->blocked_layout(0).empty());
    CHECK(other.kernel->blocked_layout(2).empty());
    return;
  }
  REQUIRE((layout == "nChw16c" || layout == "nChw8c"));
  const int64_t block = layout == "nChw16c" ? 16 : 8;
  CHECK(whole.kernel->blocked_layout(0) == layout);
  CHECK(whole.kernel->blocked_layout(2) == layout);
  // MobileNet's project conv: 24 output channels, whole blocks of 8, not of 16.
  Taken project = take(1, 144, 24, 1);
  REQUIRE(project.kernel);
  CHECK(project.kernel->blocked_layout(0) == layout);
  CHECK(project.kernel->blocked_layout(2) == (24 % block == 0 ? layout : ""));
  Taken project_in = take(1, 24, 144, 1);
  REQUIRE(project_in.kernel);
  CHECK(project_in.kernel->blocked_layout(0) == (24 % block == 0 ? layout : ""));
  Taken padded = take(1, 144, 20, 1);  // 20 channels: no whole blocks either way
  REQUIRE(padded.kernel);
  CHECK(padded.kernel->blocked_layout(0) == layout);
  CHECK(padded.kernel->blocked_layout(2).empty());
  Taken two_images = take(2, 32, 32, 3);
  REQUIRE(two_images.kernel);
  CHECK(two_images.kernel->blocked_layout(0).empty());
  CHECK(two_images.kernel->blocked_layout(2).empty());
}

TEST_CASE("jit/library/what a kernel is worth depends on the reorders left") {
  if (jit::library_provider_name().empty()) return;
  // 3x3, 64 channels: worth it even reordering both sides.
  Taken wide = take(1, 64, 64, 3);
  REQUIRE(wide.kernel);
  CHECK(wide.kernel->worth_it({}));
  // Depthwise: only with input and result kept blocked (so declined where no value is).
  Taken dw = take(1, 64, 64, 3, 64);
  if (jit::library_blocked_layout().empty()) {
    CHECK(dw.kernel == nullptr);
    return;
  }
  REQUIRE(dw.kernel);
  CHECK_FALSE(dw.kernel->worth_it({}));
  CHECK_FALSE(dw.kernel->worth_it({0}));
  CHECK(dw.kernel->worth_it({0, 2}));
  // 1x1 32->192: the result's reorder is too dear, the input's is not.
  Taken expand = take(1, 32, 192, 1);
  REQUIRE(expand.kernel);
  CHECK_FALSE(expand.kernel->worth_it({0}));
  CHECK(expand.kernel->worth_it({2}));
}

TEST_CASE("jit/library/grouped convs of 8 channels a group run as one chunk") {
  Taken grouped = take(1, 32, 32, 3, 4);
  if (jit::library_provider_name().empty()) {  // built without oneDNN: generated kernels only
    CHECK(grouped.kernel == nullptr);
    return;
  }
  REQUIRE(grouped.kernel);
  CHECK(grouped.kernel->phase_tiles().back() == 1);
  CHECK(grouped.kernel->worth_it({}));  // both reorders: still far faster than the generated kernel
}

TEST_CASE("jit/library/grouped convs big enough run in chunks of whole groups") {
  // regnet's 8 channels a group: each chunk reads its own slice of the input (one image:
  // contiguous), in whole blocks on both sides.
  Taken grouped = take(1, 208, 208, 3, 26);
  if (jit::library_provider_name().empty()) {
    CHECK(grouped.kernel == nullptr);
    return;
  }
  REQUIRE(grouped.kernel);
  const int64_t chunks = grouped.kernel->phase_tiles().back();
  CHECK(chunks > 1);
  // Beside 16-channel blocks (AVX-512) such a graph keeps NHWC: chunks of rows.
  const std::string unit = jit::library_blocked_layout() == "nChw16c" ? " row chunks" : " channel chunks";
  CHECK(grouped.kernel->describe().find("x" + std::to_string(chunks) + unit) != std::string::npos);
  // 13 groups of 8: no whole 16-blocks of groups, but oneDNN runs them in nChw8c, where
  // chunks of whole 8-channel groups are contiguous.
  Taken odd = take(1, 104, 104, 3, 13);
  REQUIRE(odd.kernel);
  CHECK(odd.kernel->phase_tiles().back() > 1);
  // Two images: a channel slice is not contiguous, so one chunk.
  Taken batched = take(2, 208, 208, 3, 26);
  REQUIRE(batched.kernel);
  CHECK(batched.kernel->phase_tiles().back() == 1);
}

TEST_CASE("jit/library/groups it cannot run exactly are declined") {
  // Grouped with 3 channels a group: oneDNN has only its reference kernel for it in the
  // blocked layouts, a JIT one in NHWC (kept beside 16-channel blocks, AVX-512).
  Taken three = take(1, 12, 12, 3, 4);
  if (jit::library_blocked_layout() == "nChw16c") {
    REQUIRE(three.kernel);
    CHECK(three.kernel->describe().find("ref") == std::string::npos);
  } else {
    CHECK(three.kernel == nullptr);
  }
  ir::GraphBuilder b("f64");
  auto x = b.input("x", DType::kF64, {1, 16, 8, 8});
  auto w = b.constant("w", DType::kF64, {16, 16, 3, 3}, std::vector<uint8_t>(16 * 16 * 9 * 8, 0));
  b.output(b.rename(b.conv2d(x, w, std::nullopt, {.pads = {1, 1, 1, 1}}), "y"));
  auto g = b.build();
  REQUIRE(g.ok());
  auto group = jit::make_single_node_group(*g, g->nodes.front().id);
  REQUIRE(group.ok());
  CHECK(jit::make_library_kernel(*g, *group, [](ir::ValueId) -> const void* { return nullptr; }) == nullptr);
}
