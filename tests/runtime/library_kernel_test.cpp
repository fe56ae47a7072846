// Library kernels (CompileOptions::library_kernels, jit/library_kernel.h): f32 convs with
// their fused epilogue through oneDNN. Checked: which groups the library takes and which stay
// generated; results within the reference's tolerance (another summation order, so not bit-
// equal to the generated kernels); the same bytes sequentially and at 1 and 2 threads;
// library_kernels = false generates every kernel. In a build without oneDNN
// (CARVE_WITH_DNNL=OFF) the same cases check that every group is generated. Chains of library
// convs keep the values between them blocked (nChw16c, nChw8c on AVX2: no reorders), through
// pools and folded concats too, and the kernels worth running only that way are dropped with
// the chain when something else reads it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "carve/ir/builder.h"
#include "carve/jit/host_target.h"
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

struct Case {
  std::string name;
  int64_t c, o, h, k;
  ir::Conv2dOptions conv;
  // The epilogue over the conv's result y; `residual` is a second input of y's shape.
  std::function<ir::ValueId(ir::GraphBuilder&, ir::ValueId y, ir::ValueId residual)> epilogue;
  bool residual = false;
  bool taken = true;  // by the library, when the build has one
};

int64_t out_size(const Case& c) {
  const auto& o = c.conv;
  const int64_t dk = o.dilations[0] * (c.k - 1) + 1;
  return (c.h + o.pads[0] + o.pads[2] - dk) / o.strides[0] + 1;
}

ir::Graph make_graph(const Case& c) {
  ir::GraphBuilder b(c.name);
  auto x = b.input("x", DType::kF32, {1, c.c, c.h, c.h});
  const int64_t cg = c.c / c.conv.groups;
  auto w = b.constant("w", DType::kF32, {c.o, cg, c.k, c.k}, test::random_f32_bytes(c.o * cg * c.k * c.k, 11));
  auto bias = b.constant("bias", DType::kF32, {c.o}, test::random_f32_bytes(c.o, 12));
  const int64_t oh = out_size(c);
  ir::ValueId residual = c.residual ? b.input("r", DType::kF32, {1, c.o, oh, oh}) : ir::kNoValue;
  auto y = b.conv2d(x, w, bias, c.conv);
  b.output(b.rename(c.epilogue ? c.epilogue(b, y, residual) : y, "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

std::vector<Case> cases() {
  const ir::Conv2dOptions same{.pads = {1, 1, 1, 1}};
  auto relu = [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.relu(y); };
  auto to_nhwc = [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.transpose(y, {0, 2, 3, 1}); };
  std::vector<Case> list = {
      {"conv3x3 relu", 16, 32, 12, 3, same, relu},
      {"conv3x3 stride 2, uneven pads", 32, 64, 13, 3, {.strides = {2, 2}, .pads = {1, 0, 2, 1}}, relu},
      {"conv3x3 dilation 2", 16, 16, 14, 3, {.pads = {2, 2, 2, 2}, .dilations = {2, 2}}, relu},
      {"conv7x7 stride 2 stem", 3, 32, 30, 7, {.strides = {2, 2}, .pads = {3, 3, 3, 3}}, relu},
      {"conv3x3 no epilogue", 32, 32, 9, 3, same, nullptr},
      {"conv3x3 + residual add + relu", 32, 32, 10, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId r) { return b.relu(b.add(r, y)); }, true},
      {"conv3x3 clip 0..6", 16, 24, 8, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.clip(y, 0.0, 6.0); }},
      {"conv3x3 x*sigmoid(x)", 16, 24, 8, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.mul(y, b.sigmoid(y)); }},
      {"conv3x3 silu", 16, 24, 8, 3, same, [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.silu(y); }},
      {"conv3x3 tanh", 16, 24, 8, 3, same, [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.tanh(y); }},
      {"conv3x3 hard-swish", 16, 24, 8, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.mul(y, b.hard_sigmoid(y, 1.0 / 6, 0.5)); }},
      {"1x1 conv, wide", 256, 512, 7, 1, {}, relu},
      // Grouped, 8 channels a group (regnet): one chunk in oneDNN's nChw8c.
      {"grouped 3x3", 32, 32, 12, 3, {.groups = 4, .pads = {1, 1, 1, 1}}, relu},
      // Big enough for chunks of whole groups (two 8-channel groups a 16-block).
      {"grouped 3x3 in chunks", 208, 208, 14, 3, {.groups = 26, .pads = {1, 1, 1, 1}}, relu},
      // 13 groups of 8: chunks of whole 8-channel groups (nChw8c), the input reordered into
      // it in slices of whole blocks run as separate tiles.
      {"grouped 3x3, chunks of one group, input in slices", 104, 104, 56, 3, {.groups = 13, .pads = {1, 1, 1, 1}},
       relu},
      // Channels not whole blocks: two chunks sharing one input layout.
      {"1x1 conv, 200 channels, in two chunks", 200, 200, 12, 1, {}, relu},
      // From 2.5M multiply-adds (mobilenet_v3_large's 80 -> 200 1x1 at 14x14: 3.1M) as well:
      // 3.0M here. Below, one chunk: 0.86M.
      {"conv3x3 24->72 hard-swish, in two chunks", 24, 72, 14, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.mul(y, b.hard_sigmoid(y, 1.0 / 6, 0.5)); }},
      {"conv3x3 24->40, channels not whole blocks, one chunk", 24, 40, 10, 3, same, relu},
      // brgemm's NHWC on AVX-512 (28x28, 64 outputs, not Winograd's 3x3), the input
      // reordered in slices of rows.
      {"conv5x5 192->64 at 28x28, input in row slices", 192, 64, 28, 5, {.pads = {2, 2, 2, 2}}, relu},
      // Winograd on AVX-512 (nChw16c): F(2x2, 3x3) in two chunks, F(4x4, 3x3) with the sum.
      {"conv3x3 64->64 at 56x56 (Winograd)", 64, 64, 56, 3, same, relu},
      {"conv3x3 128->128 at 28x28 + residual add + relu (Winograd)", 128, 128, 28, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId r) { return b.relu(b.add(r, y)); }, true},
      {"grouped 3x3 stride 2 + residual", 48, 48, 14, 3, {.groups = 6, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId r) { return b.relu(b.add(r, y)); }, true},
      // The result transposed to NHWC by the library kernel (convnext's depthwise convs).
      {"depthwise 7x7 transposed to NHWC", 96, 96, 28, 7, {.groups = 96, .pads = {3, 3, 3, 3}}, to_nhwc},
      {"conv3x3 relu transposed to NHWC", 32, 48, 14, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.transpose(b.relu(y), {0, 2, 3, 1}); }},
      // Left to the generated kernels:
      {"conv3x3 x*hard_sigmoid(x) with alpha 0.2 (no library equivalent)", 16, 24, 8, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.mul(y, b.hard_sigmoid(y)); }, false, false},
      {"patchify 4x4 stride 4, 3->8, transposed to NHWC (reorders would dominate)", 3, 8, 32, 4,
       {.strides = {4, 4}}, to_nhwc, false, false},
      {"depthwise 3x3 (generated is faster)", 32, 32, 12, 3, {.groups = 32, .pads = {1, 1, 1, 1}}, relu, false, false},
      {"1x1 conv, few channels (reorders would dominate)", 16, 16, 12, 1, {}, relu, false, false},
      {"conv3x3 + gelu (no library equivalent)", 16, 24, 8, 3, same,
       [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.gelu(y); }, false, false},
  };
  // Groups of 3 channels: oneDNN has a JIT kernel for them in NHWC only, the layout kept
  // beside 16-channel blocks (AVX-512); a reference one elsewhere (declined).
  list.push_back({"grouped 3x3, 3 channels a group (a JIT kernel in nhwc only)", 12, 12, 10, 3, {.groups = 4, .pads = {1, 1, 1, 1}}, relu,
                  false, jit::library_blocked_layout() == "nChw16c"});
  return list;
}

// A conv oneDNN runs with its Winograd kernels where the layout is nChw16c.
bool winograd_shape(const Case& c) {
  return c.taken && c.k == 3 && c.conv.groups == 1 && c.conv.strides[0] == 1 && c.conv.dilations[0] == 1 &&
         c.c % 16 == 0 && c.o % 16 == 0;
}

}  // namespace

TEST_CASE("runtime/library/conv groups: taken where expected, within the reference's tolerance") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session) return;
  const bool have_library = !jit::library_provider_name().empty();
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    ir::Graph g = make_graph(c);
    std::vector<reference::HostTensor> in{tensor({1, c.c, c.h, c.h}, test::random_f32_bytes(c.c * c.h * c.h, 5))};
    const int64_t oh = out_size(c);
    if (c.residual) in.push_back(tensor({1, c.o, oh, oh}, test::random_f32_bytes(c.o * oh * oh, 6)));
    auto want = reference::run_reference(g, in);
    REQUIRE(want.ok());
    RunResult library = run(*session, g, in, {});
    CHECK(library.library_kernels == (have_library && c.taken ? 1 : 0));
    RunResult generated = run(*session, g, in, {.library_kernels = false});
    CHECK(generated.library_kernels == 0);
    const double tol = 2e-6 * std::sqrt(static_cast<double>(c.c / c.conv.groups * c.k * c.k)) + 1e-6;
    // Winograd's transforms spread each product's rounding over the tile: its error scales
    // with the largest result, not each one (F(4x4, 3x3) 128->128: 2.1e-6 of it).
    if (have_library && winograd_shape(c))
      CHECK(outside_scaled(library.bytes, want->at(0), 1e-5) == 0);
    else
      CHECK(outside(library.bytes, want->at(0), tol) == 0);
    CHECK(outside(generated.bytes, want->at(0), tol) == 0);
    if (!library.library_kernels) CHECK(library.bytes == generated.bytes);
  }
}

TEST_CASE("runtime/library/conv groups write the same bytes at any thread count") {
  auto one = runtime::testing::cpu_session_or_skip(1);
  if (!one) return;
  auto two = runtime::testing::cpu_session_or_skip(2);
  for (const Case& c : cases()) {
    if (!c.taken) continue;
    CAPTURE(c.name);
    ir::Graph g = make_graph(c);
    std::vector<reference::HostTensor> in{tensor({1, c.c, c.h, c.h}, test::random_f32_bytes(c.c * c.h * c.h, 8))};
    const int64_t oh = out_size(c);
    if (c.residual) in.push_back(tensor({1, c.o, oh, oh}, test::random_f32_bytes(c.o * oh * oh, 9)));
    runtime::CompileOptions sequential;
    sequential.schedule.sequential = true;
    const std::vector<uint8_t> bytes = run(*one, g, in, sequential).bytes;
    CHECK(run(*one, g, in, {}).bytes == bytes);
    CHECK(run(*two, g, in, {}).bytes == bytes);
  }
}

TEST_CASE("runtime/library/a conv whose channels are not whole blocks runs in two chunks from 2.5M multiply-adds") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session || jit::library_blocked_layout() != "nChw16c") return;
  for (const Case& c : cases()) {
    if (!c.taken || c.conv.groups != 1 || (c.c % 16 == 0 && c.o % 16 == 0)) continue;
    CAPTURE(c.name);
    auto program = session->compile(make_graph(c), {});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const std::string text = (*program)->explain();
    CAPTURE(text);
    const int64_t oh = out_size(c), macs = c.o * c.c * c.k * c.k * oh * oh;
    CHECK((text.find("x2 channel chunks") != std::string::npos) == (macs >= 2'500'000));
  }
}

TEST_CASE("runtime/library/3x3 stride-1 convs of whole blocks run Winograd in nChw16c") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session) return;
  const bool winograd = !jit::library_provider_name().empty() && jit::library_blocked_layout() == "nChw16c";
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    auto program = session->compile(make_graph(c), {});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const std::string text = (*program)->explain();
    CAPTURE(text);
    CHECK((text.find("wino") != std::string::npos) == (winograd && winograd_shape(c)));
  }
}

TEST_CASE("runtime/library/a conv's transpose to NHWC is written by the conv's library kernel") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session || jit::library_provider_name().empty()) return;
  for (const Case& c : cases()) {
    if (!c.taken || c.name.find("NHWC") == std::string::npos) continue;
    CAPTURE(c.name);
    auto program = session->compile(make_graph(c), {});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    CHECK((*program)->program().kernels.size() == 1);
    CHECK((*program)->explain().find("result transposed to NHWC") != std::string::npos);
  }
  // Another permutation stays a transpose kernel of its own.
  Case other = cases().front();
  other.epilogue = [](ir::GraphBuilder& b, ir::ValueId y, ir::ValueId) { return b.transpose(y, {0, 1, 3, 2}); };
  auto program = session->compile(make_graph(other), {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  CHECK((*program)->program().kernels.size() == 2);
}

TEST_CASE("runtime/library/explain names the library and the kernels it runs") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session) return;
  ir::Graph g = make_graph(cases().front());
  auto program = session->compile(g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const std::string text = (*program)->explain();
  const std::string name = jit::library_provider_name();
  if (name.empty()) {
    CHECK(text.find("library kernels") == std::string::npos);
  } else {
    CHECK(text.find("library kernels: 1 through " + name) != std::string::npos);
    CHECK(text.find("| " + name + " ") != std::string::npos);
  }
}

namespace {

// A MobileNet-style chain, x f32[1, c, h, h] (h 20 unless given):
//   a = relu(conv3x3(x, c->c)); b = clip(conv1x1(a, c->mid)); d = clip(dwconv3x3(b));
//   e = conv1x1(d, mid->c) + a; y = relu(conv3x3(e, c->c))
// With `d_out`, d is a graph output as well (read outside the library kernels); with `se`,
// d is scaled by squeeze-excite before the project conv: d * sigmoid(conv1x1(relu(
// conv1x1(global_average_pool(d), mid->8)), 8->mid)).
ir::Graph make_chain(int64_t c, int64_t mid, bool d_out, bool se = false, int64_t h = 20) {
  ir::GraphBuilder b("chain");
  auto x = b.input("x", DType::kF32, {1, c, h, h});
  uint32_t seed = 20;
  auto conv = [&](ir::ValueId in, int64_t ci, int64_t co, int64_t k, int64_t groups) {
    return random_conv(b, seed, in, ci, co, k, true, groups);
  };
  auto a = b.relu(conv(x, c, c, 3, 1));
  auto bb = b.clip(conv(a, c, mid, 1, 1), 0.0, 6.0);
  auto d = b.clip(conv(bb, mid, mid, 3, mid), 0.0, 6.0);
  if (se) {
    auto squeezed = b.relu(conv(b.op1(ir::OpKind::kGlobalAvgPool, {d}), mid, 8, 1, 1));
    d = b.mul(d, b.sigmoid(conv(squeezed, 8, mid, 1, 1)));
  }
  auto e = b.add(conv(d, mid, c, 1, 1), a);
  b.output(b.rename(b.relu(conv(e, c, c, 3, 1)), "y"));
  if (d_out) b.output(b.rename(d, "d"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

// Runs the chain with and without library kernels (check_run); the library kernels' count.
int64_t check_chain(int64_t c, int64_t mid, bool d_out, bool se = false, int64_t h = 20) {
  return check_run(make_chain(c, mid, d_out, se, h), tensor({1, c, h, h}, test::random_f32_bytes(c * h * h, 3)), {},
                   true);
}

// The library kernels a chain test expects: `blocked` where the library keeps values
// blocked between kernels (nChw16c on AVX-512, nChw8c on AVX2), else only the two 3x3
// convs, which pay even with reorders on both sides (the 1x1 and depthwise convs do not).
int64_t expected_taken(int64_t blocked) {
  if (jit::library_provider_name().empty()) return 0;
  return jit::library_blocked_layout().empty() ? 2 : blocked;
}

}  // namespace

TEST_CASE("runtime/library/a chain of convs stays blocked and every kernel is taken") {
  const int64_t taken = check_chain(32, 96, false);
  if (taken < 0) return;
  CHECK(taken == expected_taken(5));
}

TEST_CASE("runtime/library/squeeze-excite keeps the chain blocked: pool and channel scale blocked") {
  // The pool and the scale are library kernels reading d blocked; the two small convs
  // on [1, C, 1, 1] are carve's one-pixel convs (the pool's result has the same bytes in
  // both layouts), in either case.
  const int64_t taken = check_chain(32, 96, false, true);
  if (taken < 0) return;
  CHECK(taken == expected_taken(7) + (jit::library_provider_name().empty() ? 0 : 2));
}

TEST_CASE("runtime/library/squeeze-excite's pool runs in uneven chunks of channel blocks, the scale in equal ones") {
  // 144 channels at 48x48 (efficientnet_b0's 56x56 stage, smaller): 9 blocks of 16, the
  // pool in chunks of 4 and 5, the scale in one (9 blocks split in no equal chunks); in
  // nChw8c 18 blocks, both in two of 9.
  const int64_t taken = check_chain(32, 144, false, true, 48);
  if (taken < 0) return;
  CHECK(taken == expected_taken(7) + (jit::library_provider_name().empty() ? 0 : 2));
  if (jit::library_blocked_layout().empty()) return;
  auto session = runtime::testing::cpu_session_or_skip(1);
  auto program = session->compile(make_chain(32, 144, false, true, 48), {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const std::string text = (*program)->explain();
  CAPTURE(text);
  // The pool's launch line, then the scale's ("  global_avg_pool_N: ...", "  mul_N: ...").
  const bool blocks_of_16 = jit::library_blocked_layout() == "nChw16c";
  for (const auto& [kernel, chunked] : {std::pair<const char*, bool>{"\n  global_avg_pool_", true},
                                        std::pair<const char*, bool>{"\n  mul_", !blocks_of_16}}) {
    CAPTURE(kernel);
    const size_t at = text.find(kernel);
    REQUIRE(at != std::string::npos);
    const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    CHECK((line.find(" x2 channel chunks, " + jit::library_blocked_layout()) != std::string::npos) == chunked);
    CHECK(line.find(jit::library_blocked_layout()) != std::string::npos);  // taken, blocked
  }
}

namespace {

// A regnet block after a stem, x f32[1, c, h, h], groups of 8 channels:
//   x0 = relu(conv3x3(x, c->c)); a = relu(conv1x1(x0, c->w));
//   g = relu(grouped conv3x3(a, w->w, stride s));
//   e = g * sigmoid(conv1x1(relu(conv1x1(global_average_pool(g), w->8)), 8->w));
//   y = relu(conv1x1(e, w->w) + r), r = conv1x1(x0, c->w, stride s) with `proj`, else x;
// with `tail`, the output is conv1x1(y, w->16): y is then read by a library conv.
ir::Graph make_regnet_block(int64_t c, int64_t w, int64_t h, int64_t s, bool proj, bool tail) {
  ir::GraphBuilder b("regnet block");
  auto x = b.input("x", DType::kF32, {1, c, h, h});
  uint32_t seed = 60;
  auto conv = [&](ir::ValueId in, int64_t ci, int64_t co, int64_t k) { return random_conv(b, seed, in, ci, co, k); };
  auto x0 = b.relu(conv(x, c, c, 3));
  auto a = b.relu(conv(x0, c, w, 1));
  auto gw = b.constant("gw", DType::kF32, {w, 8, 3, 3}, test::random_f32_bytes(w * 8 * 9, 70));
  auto g = b.relu(b.conv2d(a, gw, std::nullopt, {.groups = w / 8, .strides = {s, s}, .pads = {1, 1, 1, 1}}));
  auto squeezed = b.relu(conv(b.op1(ir::OpKind::kGlobalAvgPool, {g}), w, 8, 1));
  auto e = b.mul(g, b.sigmoid(conv(squeezed, 8, w, 1)));
  ir::ValueId r = x;
  if (proj) {
    auto pw = b.constant("pw", DType::kF32, {w, c, 1, 1}, test::random_f32_bytes(w * c, 71));
    r = b.conv2d(x0, pw, std::nullopt, {.strides = {s, s}});
  }
  auto y = b.relu(b.add(conv(e, w, w, 1), r));
  b.output(b.rename(tail ? conv(y, w, 16, 1) : y, "y"));
  auto built = b.build();
  REQUIRE_MESSAGE(built.ok(), built.status().to_string());
  return std::move(*built);
}

// The lines of `explain` naming a library kernel that keeps `kept` in NHWC.
int64_t nhwc_lines(const std::string& explain, const std::string& kept) {
  int64_t count = 0;
  for (size_t at = explain.find(", nhwc" + kept); at != std::string::npos; at = explain.find(", nhwc" + kept, at + 1))
    ++count;
  return count;
}

}  // namespace

TEST_CASE("runtime/library/a regnet block keeps NHWC between its kernels") {
  // Groups of 8 channels: oneDNN runs them in nChw8c only, beside 16-channel blocks on
  // AVX-512, so there the library keeps NHWC between every kernel of the block. The block's
  // residual x is a graph input (NCHW) and its result is read by the tail conv (NHWC): the
  // residual's rows are reordered into each chunk's result.
  const bool nhwc = !jit::library_provider_name().empty() && jit::library_blocked_layout() == "nChw16c";
  ir::Graph g = make_regnet_block(80, 80, 14, 1, false, true);
  const int64_t taken = check_run(g, tensor({1, 80, 14, 14}, test::random_f32_bytes(80 * 14 * 14, 4)), {}, true);
  if (taken < 0 || !nhwc) return;
  CHECK(taken == 9);  // six convs, the pool, the scale, and two one-pixel convs
  auto session = runtime::testing::cpu_session_or_skip(1);
  auto program = session->compile(g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const std::string explain = (*program)->explain();
  CAPTURE(explain);
  CHECK(nhwc_lines(explain, "") == 7);                // every kernel reading or writing [1, 80, 14, 14]
  CHECK(nhwc_lines(explain, " input output") == 4);  // the 1x1 conv, the grouped conv, the scale, the last conv
  CHECK(nhwc_lines(explain, " output") == 1);        // the stem
  CHECK(explain.find("row chunks") != std::string::npos);
}

TEST_CASE("runtime/library/a strided regnet block of 13 groups keeps NHWC, its residual from a projection") {
  // 104 channels are not whole 16-channel blocks; the projection's result (NHWC) is the
  // residual of a conv whose result is a graph output (NCHW).
  const bool nhwc = !jit::library_provider_name().empty() && jit::library_blocked_layout() == "nChw16c";
  ir::Graph g = make_regnet_block(32, 104, 28, 2, true, false);
  const int64_t taken = check_run(g, tensor({1, 32, 28, 28}, test::random_f32_bytes(32 * 28 * 28, 5)), {}, true);
  if (taken < 0 || !nhwc) return;
  CHECK(taken == 9);
  auto session = runtime::testing::cpu_session_or_skip(1);
  auto program = session->compile(g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const std::string explain = (*program)->explain();
  CAPTURE(explain);
  CHECK(nhwc_lines(explain, " input residual\n") == 1);
}

TEST_CASE("runtime/library/NHWC row chunks pad, dilate and stride as the reference does") {
  // An 8-channel grouped conv makes the graph keep NHWC (AVX-512); the convs after it run
  // in chunks of output rows, each chunk's rows and pads cut from the whole conv's:
  // dilation 2, then stride 2 with uneven pads.
  ir::GraphBuilder b("nhwc rows");
  auto x = b.input("x", DType::kF32, {1, 32, 24, 24});
  auto w = [&](const char* name, int64_t cg, int64_t k, uint32_t seed) {
    return b.constant(name, DType::kF32, {32, cg, k, k}, test::random_f32_bytes(32 * cg * k * k, seed));
  };
  auto g = b.relu(b.conv2d(x, w("g", 8, 3, 80), std::nullopt, {.groups = 4, .pads = {1, 1, 1, 1}}));
  auto d = b.relu(b.conv2d(g, w("d", 32, 3, 81), std::nullopt, {.pads = {2, 2, 2, 2}, .dilations = {2, 2}}));
  auto y = b.conv2d(d, w("s", 32, 5, 82), std::nullopt, {.strides = {2, 2}, .pads = {1, 0, 2, 1}});
  b.output(b.rename(b.relu(y), "y"));
  auto graph = b.build();
  REQUIRE_MESSAGE(graph.ok(), graph.status().to_string());
  const int64_t taken = check_run(*graph, tensor({1, 32, 24, 24}, test::random_f32_bytes(32 * 24 * 24, 6)), {}, true);
  if (taken < 0 || jit::library_provider_name().empty() || jit::library_blocked_layout() != "nChw16c") return;
  CHECK(taken == 3);
  auto session = runtime::testing::cpu_session_or_skip(1);
  auto program = session->compile(*graph, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const std::string explain = (*program)->explain();
  CAPTURE(explain);
  CHECK(explain.find("x4 row chunks, nhwc input output") != std::string::npos);  // the dilated conv
  CHECK(explain.find("x2 row chunks, nhwc input") != std::string::npos);         // the strided one
}

TEST_CASE("runtime/library/a conv in NHWC between blocked convs keeps its values blocked") {
  // x f32[1, 64, 28, 28]: a = relu(conv3x3(x, 64->32)); r = conv5x5(a, 32->128);
  // c = relu(conv5x5(a, 32->128) + r); y = relu(conv1x1(c, 128->64)). On AVX-512 the 32->128
  // convs run oneDNN's brgemm in NHWC (28x28, 64 outputs or more) and convert from and to
  // the blocked layout themselves, so a, r and c stay blocked: the 1x1 conv is taken (its
  // result's reorder alone is under the budget), and the 64->32 conv writes blocked.
  ir::GraphBuilder b("nhwc between blocked");
  auto x = b.input("x", DType::kF32, {1, 64, 28, 28});
  uint32_t seed = 40;
  auto conv = [&](ir::ValueId in, int64_t ci, int64_t co, int64_t k) { return random_conv(b, seed, in, ci, co, k); };
  auto a = b.relu(conv(x, 64, 32, 3));
  auto r = conv(a, 32, 128, 5);
  auto c = b.relu(b.add(conv(a, 32, 128, 5), r));
  b.output(b.rename(b.relu(conv(c, 128, 64, 1)), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  const int64_t taken = check_run(*g, tensor({1, 64, 28, 28}, test::random_f32_bytes(64 * 28 * 28, 7)), {}, true);
  if (taken < 0) return;
  const std::string layout = jit::library_blocked_layout();
  // Without a blocked layout the 1x1 conv is not worth both its reorders.
  CHECK(taken == (jit::library_provider_name().empty() ? 0 : layout.empty() ? 3 : 4));
  if (layout.empty()) return;
  auto session = runtime::testing::cpu_session_or_skip(1);
  auto program = session->compile(*g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const std::string text = (*program)->explain();
  CAPTURE(text);
  CHECK(text.find(layout + " input residual output") != std::string::npos);
  CHECK(text.find(layout + " input output") != std::string::npos);
}

TEST_CASE("runtime/library/a chain read from outside keeps only the convs worth their reorders") {
  // d is also a graph output: it stays NCHW, so the depthwise conv (worth it only with no
  // reorder) goes back to the JIT, and with it the 1x1 convs beside it; the 3x3s stay.
  const int64_t taken = check_chain(32, 96, true);
  if (taken < 0) return;
  CHECK(taken == expected_taken(2));
}

TEST_CASE("runtime/library/channel counts that are not whole blocks stay NCHW between kernels") {
  // MobileNet's 24-channel stage: nChw16c pads 24 channels to 32, more bytes than the
  // value has, so there a and e stay NCHW while b and d (144) stay blocked (in nChw8c
  // all four are whole blocks). Either way every kernel is taken.
  const int64_t taken = check_chain(24, 144, false);
  if (taken < 0) return;
  CHECK(taken == expected_taken(5));
  // At 56x56 the expand conv reorders its 24-channel input in two slices, the second a
  // partial block (channels 16-23, padded in nChw16c).
  CHECK(check_chain(24, 144, false, false, 56) == expected_taken(5));
}

namespace {

// A SqueezeNet-style fire module, x f32[1, 32, 14, 14]:
//   a = relu(conv3x3(x, 32->32)); s = relu(conv1x1(a, 32->16));
//   cat = concat(relu(conv1x1(s, 16->32)), relu(conv3x3(s, 16->32)));
//   y = relu(conv3x3(after_concat(cat), 64->32))
// The concat is folded into views: its inputs are written straight into its halves.
using AfterConcat = std::function<ir::ValueId(ir::GraphBuilder&, ir::ValueId)>;
ir::Graph make_fire(const AfterConcat& after_concat) {
  ir::GraphBuilder b("fire");
  auto x = b.input("x", DType::kF32, {1, 32, 14, 14});
  uint32_t seed = 40;
  auto conv = [&](ir::ValueId in, int64_t ci, int64_t co, int64_t k) {
    return b.relu(random_conv(b, seed, in, ci, co, k));
  };
  auto s = conv(conv(x, 32, 32, 3), 32, 16, 1);
  auto cat = b.concat({conv(s, 16, 32, 1), conv(s, 16, 32, 3)}, 1);
  if (after_concat) cat = after_concat(b, cat);
  b.output(b.rename(conv(cat, 64, 32, 3), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

// Runs the fire module (check_run); the library kernels' count.
int64_t check_fire(const AfterConcat& after_concat, runtime::CompileOptions options = {}) {
  return check_run(make_fire(after_concat), tensor({1, 32, 14, 14}, test::random_f32_bytes(32 * 196, 5)), options,
                   false);
}

// The three 3x3 convs pay even with reorders; the two 1x1 convs only with their values kept
// blocked on both sides, the expand conv's result through the concat; `blocked_extra`
// library kernels more (a pool) where they are.
int64_t expected_fire(bool blocked_through_concat, int64_t blocked_extra = 0) {
  if (jit::library_provider_name().empty()) return 0;
  return !jit::library_blocked_layout().empty() && blocked_through_concat ? 5 + blocked_extra : 3;
}

}  // namespace

TEST_CASE("runtime/library/a concat folded into views keeps its inputs blocked") {
  const int64_t taken = check_fire(nullptr);
  if (taken < 0) return;
  CHECK(taken == expected_fire(true));
}

TEST_CASE("runtime/library/a concat run as a copy keeps its inputs blocked too") {
  // carve's concat copy runs in either layout (either_layout.cpp): one library kernel more.
  const int64_t taken = check_fire(nullptr, {.concat_views = false});
  if (taken < 0) return;
  const bool blocked = !jit::library_blocked_layout().empty();
  CHECK(taken == (jit::library_provider_name().empty() ? 0 : blocked ? expected_fire(true, 1) : 4));
}

TEST_CASE("runtime/library/a concat a generated kernel reads keeps its inputs NCHW") {
  // tanh on its own is generated and reads the concat's output plain, so its inputs stay plain.
  const int64_t taken = check_fire([](ir::GraphBuilder& b, ir::ValueId cat) { return b.tanh(cat); });
  if (taken < 0) return;
  CHECK(taken == expected_fire(false));
}

TEST_CASE("runtime/library/a concat copy a generated kernel reads converts its blocked inputs") {
  // Run as a copy, the concat reads its inputs blocked and writes its result plain for tanh.
  const int64_t taken = check_fire([](ir::GraphBuilder& b, ir::ValueId cat) { return b.tanh(cat); },
                                   {.concat_views = false});
  if (taken < 0) return;
  const bool blocked = !jit::library_blocked_layout().empty();
  CHECK(taken == (jit::library_provider_name().empty() ? 0 : blocked ? expected_fire(true, 1) : 4));
}

TEST_CASE("runtime/library/a max pool after a folded concat keeps both sides blocked") {
  // GoogLeNet's fourth branch: a 3x3 stride-1 max pool in ceil mode over the concat.
  const int64_t taken = check_fire([](ir::GraphBuilder& b, ir::ValueId cat) {
    return b.max_pool(cat, {.kernel = {3, 3}, .strides = {1, 1}, .pads = {1, 1, 1, 1}, .ceil_mode = true});
  });
  if (taken < 0) return;
  CHECK(taken == expected_fire(true, 1));
}

namespace {

struct PoolCase {
  std::string name;
  int64_t h;
  ir::PoolOptions pool;
  bool max = true;
  int64_t channels = 16;
};

// x f32[1, channels, h, h] -> relu(conv3x3) -> pool -> relu(conv3x3): the pool between two
// library convs; the library kernels' count (check_run).
int64_t check_pool(const PoolCase& c) {
  ir::GraphBuilder b("pool");
  const int64_t n = c.channels;
  auto x = b.input("x", DType::kF32, {1, n, c.h, c.h});
  uint32_t seed = 60;
  auto conv = [&](ir::ValueId in) {
    auto w = b.constant("w" + std::to_string(seed), DType::kF32, {n, n, 3, 3}, test::random_f32_bytes(n * n * 9, seed));
    ++seed;
    return b.relu(b.conv2d(in, w, std::nullopt, {.pads = {1, 1, 1, 1}}));
  };
  auto a = conv(x);
  b.output(b.rename(conv(c.max ? b.max_pool(a, c.pool) : b.avg_pool(a, c.pool)), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return check_run(*g, tensor({1, n, c.h, c.h}, test::random_f32_bytes(n * c.h * c.h, 7)), {}, true);
}

}  // namespace

TEST_CASE("runtime/library/pools between library convs run blocked, ceil mode included") {
  const bool blocked = !jit::library_blocked_layout().empty();
  const std::vector<PoolCase> cases = {
      {"max 3x3 stride 2 pad 1 (resnet stem)", 16, {.kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}},
      {"max 3x3 stride 2 ceil mode (googlenet, squeezenet)", 15, {.kernel = {3, 3}, .strides = {2, 2}, .ceil_mode = true}},
      {"max 2x2 stride 2 (vgg)", 14, {.kernel = {2, 2}, .strides = {2, 2}}},
      // Big enough to run in chunks of channel blocks.
      {"max 3x3 stride 1 pad 1, 64 channels", 32, {.kernel = {3, 3}, .pads = {1, 1, 1, 1}}, true, 64},
      {"max 2x3 stride 1x2, uneven pads", 13, {.kernel = {2, 3}, .strides = {1, 2}, .pads = {0, 1, 1, 2}}},
      {"average 3x3 stride 1 pad 1, pads not counted", 12, {.kernel = {3, 3}, .pads = {1, 1, 1, 1}}, false},
      {"average 3x3 stride 1 pad 1, pads counted (inception)", 12,
       {.kernel = {3, 3}, .pads = {1, 1, 1, 1}, .count_include_pad = true}, false},
      {"average 2x2 stride 2 ceil mode, pads not counted", 13, {.kernel = {2, 2}, .strides = {2, 2}, .ceil_mode = true},
       false},
      // ceil mode's last window reaches past the padded extent: counted only up to it.
      {"average 2x2 stride 2 ceil mode, pads counted", 13,
       {.kernel = {2, 2}, .strides = {2, 2}, .ceil_mode = true, .count_include_pad = true}, false},
      {"average 3x3 stride 2 pad 1 ceil mode, pads counted", 14,
       {.kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .ceil_mode = true, .count_include_pad = true}, false},
  };
  for (const PoolCase& c : cases) {
    CAPTURE(c.name);
    const int64_t taken = check_pool(c);
    if (taken < 0) return;
    const int64_t convs = jit::library_provider_name().empty() ? 0 : 2;
    CHECK(taken == convs + (blocked ? 1 : 0));
  }
}

TEST_CASE("runtime/library/a blocked max pool propagates NaN as the reference does") {
  // conv3x3 -> max pool 3x3 stride 2 -> conv3x3 (no activations: they could drop a NaN), one
  // NaN in x: the NaN outputs are the reference's, and the others within its tolerance.
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session) return;
  ir::GraphBuilder b("pool nan");
  auto x = b.input("x", DType::kF32, {1, 16, 15, 15});
  auto conv = [&](ir::ValueId in, uint32_t seed) {
    auto w = b.constant("w" + std::to_string(seed), DType::kF32, {16, 16, 3, 3}, test::random_f32_bytes(16 * 16 * 9, seed));
    return b.conv2d(in, w, std::nullopt, {.pads = {1, 1, 1, 1}});
  };
  auto pooled = b.max_pool(conv(x, 70), {.kernel = {3, 3}, .strides = {2, 2}, .ceil_mode = true});
  b.output(b.rename(conv(pooled, 71), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  reference::HostTensor in = tensor({1, 16, 15, 15}, test::random_f32_bytes(16 * 15 * 15, 9));
  const float nan = std::nanf("");
  std::memcpy(in.bytes.data() + (3 * 225 + 7 * 15 + 2) * sizeof(float), &nan, sizeof nan);
  auto want = reference::run_reference(*g, {in});
  REQUIRE(want.ok());
  const RunResult got = run(*session, *g, {in}, {});
  REQUIRE(got.bytes.size() == want->at(0).bytes.size());
  int64_t nan_count = 0, mismatched = 0;
  for (size_t i = 0; i < got.bytes.size() / sizeof(float); ++i) {
    float gv, wv;
    std::memcpy(&gv, got.bytes.data() + i * sizeof(float), sizeof gv);
    std::memcpy(&wv, want->at(0).bytes.data() + i * sizeof(float), sizeof wv);
    nan_count += std::isnan(wv);
    mismatched += std::isnan(gv) != std::isnan(wv) || (!std::isnan(wv) && std::fabs(gv - wv) > 1e-4 * (1 + std::fabs(wv)));
  }
  CHECK(nan_count > 0);
  CHECK(mismatched == 0);
  const int64_t expected = jit::library_provider_name().empty() ? 0 : jit::library_blocked_layout().empty() ? 2 : 3;
  CHECK(got.library_kernels == expected);
}

TEST_CASE("runtime/library/runs start no threads of their own") {
  // oneDNN runs on OpenMP: a primitive created for more than one thread would start an
  // OpenMP team when it runs, beside carve's scheduler (and slow everything down). A
  // sequential run of a program full of library kernels starts no thread.
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session) return;
  ir::Graph g = make_chain(32, 96, false);
  std::vector<reference::HostTensor> in{tensor({1, 32, 20, 20}, test::random_f32_bytes(32 * 400, 3))};
  runtime::CompileOptions options;
  options.schedule.sequential = true;
  auto threads = [] {
    int64_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
  };
  auto program = session->compile(g, options);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(in[0].bytes.data()), in[0].bytes.size());
  std::vector<runtime::Buffer> inputs{*runtime::Buffer::borrow(bytes, DType::kF32, in[0].type.shape)};
  REQUIRE((*program)->run(inputs).ok());
  const int64_t before = threads();
  for (int i = 0; i < 3; ++i) REQUIRE((*program)->run(inputs).ok());
  CHECK(threads() == before);
}

TEST_CASE("runtime/library/weights a library kernel copied are freed from the program") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session) return;
  ir::Graph g = make_chain(32, 96, false);
  auto program = session->compile(g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const runtime::Program& p = (*program)->program();
  int64_t freed = 0;
  for (size_t c = 0; c < p.constants.size(); ++c) {
    const ir::Value& v = p.graph.value(p.constants[c]);
    if (p.constant_buffers[c]) continue;
    CHECK_FALSE(v.data.has_value());
    freed += *v.type.byte_size();
  }
  CHECK(freed == p.released_constant_bytes);
  if (jit::library_provider_name().empty()) {
    CHECK(freed == 0);
  } else if (jit::library_blocked_layout().empty()) {
    // Only the two 3x3 convs are library kernels (expected_taken): their weights and biases.
    CHECK(freed == 2 * (32 * 32 * 9 + 32) * 4);
  } else {
    // The five convs' weights and biases: nothing else reads them.
    int64_t weights = 0;
    for (const ir::Value& v : g.values) weights += v.kind == ir::ValueKind::kConstant ? *v.type.byte_size() : 0;
    CHECK(freed == weights);
  }
  // The freed program still computes the chain (against the reference).
  std::vector<reference::HostTensor> in{tensor({1, 32, 20, 20}, test::random_f32_bytes(32 * 400, 3))};
  auto want = reference::run_reference(g, in);
  REQUIRE(want.ok());
  CHECK(outside_scaled(run(*session, g, in, {}).bytes, want->at(0), 1e-5) == 0);
}

TEST_CASE("runtime/library/a weight another kernel reads as well keeps its bytes") {
  // w feeds the library conv and a generated relu (a second output): only the bias,
  // which the conv alone reads, is freed.
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session) return;
  ir::GraphBuilder b("shared_weight");
  auto x = b.input("x", DType::kF32, {1, 16, 12, 12});
  auto w = b.constant("w", DType::kF32, {32, 16, 3, 3}, test::random_f32_bytes(32 * 16 * 9, 5));
  auto bias = b.constant("bias", DType::kF32, {32}, test::random_f32_bytes(32, 6));
  b.output(b.rename(b.relu(b.conv2d(x, w, bias, {.pads = {1, 1, 1, 1}})), "y"));
  b.output(b.rename(b.relu(w), "w_relu"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto program = session->compile(*g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const runtime::Program& p = (*program)->program();
  auto kept = [&](std::string_view name) {
    for (size_t c = 0; c < p.constants.size(); ++c)
      if (p.graph.value(p.constants[c]).name == name) return p.constant_buffers[c].has_value();
    return false;
  };
  CHECK(kept("w"));
  CHECK(kept("bias") == jit::library_provider_name().empty());
  std::vector<reference::HostTensor> in{tensor({1, 16, 12, 12}, test::random_f32_bytes(16 * 144, 7))};
  auto want = reference::run_reference(*g, in);
  REQUIRE(want.ok());
  std::vector<runtime::Buffer> inputs;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(in[0].bytes.data()), in[0].bytes.size());
  inputs.push_back(*runtime::Buffer::borrow(bytes, DType::kF32, in[0].type.shape));
  auto out = (*program)->run(inputs);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  for (size_t i = 0; i < 2; ++i) {
    auto got = out->at(i).bytes();
    REQUIRE(got.ok());
    const auto* d = reinterpret_cast<const uint8_t*>(got->data());
    CHECK(outside(std::vector<uint8_t>(d, d + got->size()), want->at(i), 1e-5) == 0);
  }
}

namespace {

// Matmuls with a constant weight, x f32[1, m, k] @ w[k, n], and their epilogue over y (the
// product); `residual` is a second input of y's shape.
struct MatmulCase {
  std::string name;
  int64_t m, k, n;
  std::function<ir::ValueId(ir::GraphBuilder&, ir::ValueId y, ir::ValueId bias, ir::ValueId residual)> epilogue;
  bool taken = true;   // by the library, when the build has one
  int64_t kernels = 1;  // then (a prefix taken: the rest generated)
};

ir::Graph make_matmul_graph(const MatmulCase& c) {
  ir::GraphBuilder b(c.name);
  auto x = b.input("x", DType::kF32, {1, c.m, c.k});
  auto w = b.constant("w", DType::kF32, {c.k, c.n}, test::random_f32_bytes(c.k * c.n, 31));
  auto bias = b.constant("bias", DType::kF32, {c.n}, test::random_f32_bytes(c.n, 32));
  auto residual = b.input("r", DType::kF32, {1, c.m, c.n});
  b.output(b.rename(c.epilogue(b, b.matmul(x, w), bias, residual), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

std::vector<MatmulCase> matmul_cases() {
  using B = ir::GraphBuilder;
  using V = ir::ValueId;
  return {
      {"bias (qkv)", 64, 256, 192, [](B& b, V y, V bias, V) { return b.add(y, bias); }},
      {"bias first, then residual (projection)", 64, 128, 256,
       [](B& b, V y, V bias, V r) { return b.add(r, b.add(bias, y)); }},
      {"bias, relu", 32, 96, 160, [](B& b, V y, V bias, V) { return b.relu(b.add(y, bias)); }},
      {"no bias, a column tail (head)", 48, 64, 200, [](B& b, V y, V, V) { return b.relu(y); }},
      {"residual alone", 64, 64, 96, [](B& b, V y, V, V r) { return b.add(y, r); }},
      // More rows than columns: chunks of rows (8 of 96 and 112 rows; 2, the last short).
      {"rows (convnext's MLP), bias", 784, 128, 96, [](B& b, V y, V bias, V) { return b.add(y, bias); }},
      {"rows, bias, residual, relu", 520, 64, 64,
       [](B& b, V y, V bias, V r) { return b.relu(b.add(r, b.add(y, bias))); }},
      // The library runs a prefix (matmul, bias; matmul, residual), a generated kernel the rest:
      {"bias, gelu (no post-op here)", 64, 128, 128, [](B& b, V y, V bias, V) { return b.gelu(b.add(y, bias)); },
       true, 2},
      {"bias, erf-gelu chain", 64, 128, 128,
       [](B& b, V y, V bias, V) {
         auto z = b.add(y, bias);
         auto scalar = [&b](const char* name, float v) {
           std::vector<uint8_t> bytes(sizeof v);
           std::memcpy(bytes.data(), &v, sizeof v);
           return b.constant(name, DType::kF32, {}, std::move(bytes));
         };
         auto half = scalar("half", 0.5f), one = scalar("one", 1.0f), root2 = scalar("root2", 1.4142135f);
         return b.mul(b.mul(z, b.add(b.op1(ir::OpKind::kErf, {b.div(z, root2)}), one)), half);
       },
       true, 2},
      {"residual before bias (another rounding)", 64, 128, 128,
       [](B& b, V y, V bias, V r) { return b.add(b.add(y, r), bias); }, true, 2},
      // Left to the generated kernels:
      {"four rows (GEMV path)", 4, 256, 256, [](B& b, V y, V bias, V) { return b.add(y, bias); }, false},
  };
}

}  // namespace

TEST_CASE("runtime/library/matmul groups: taken where expected, within the reference's tolerance") {
  auto one = runtime::testing::cpu_session_or_skip(1);
  if (!one) return;
  auto two = runtime::testing::cpu_session_or_skip(2);
  const bool have_library = !jit::library_provider_name().empty();
  for (const MatmulCase& c : matmul_cases()) {
    CAPTURE(c.name);
    ir::Graph g = make_matmul_graph(c);
    std::vector<reference::HostTensor> in{tensor({1, c.m, c.k}, test::random_f32_bytes(c.m * c.k, 33)),
                                          tensor({1, c.m, c.n}, test::random_f32_bytes(c.m * c.n, 34))};
    auto want = reference::run_reference(g, in);
    REQUIRE(want.ok());
    const double tol = 2e-6 * std::sqrt(static_cast<double>(c.k)) + 1e-6;
    // Weights pre-packed in carve's strips (the default) and not: the library unpacks them.
    for (bool prepack : {true, false}) {
      CAPTURE(prepack);
      runtime::CompileOptions options;
      options.prepack_weights = prepack;
      RunResult library = run(*one, g, in, options);
      CHECK(library.library_kernels == (have_library && c.taken ? 1 : 0));
      if (library.library_kernels) CHECK(library.kernels == c.kernels);
      CHECK(outside(library.bytes, want->at(0), tol) == 0);
      options.schedule.sequential = true;
      CHECK(run(*one, g, in, options).bytes == library.bytes);
      options.schedule.sequential = false;
      CHECK(run(*two, g, in, options).bytes == library.bytes);
      options.library_kernels = false;
      RunResult generated = run(*one, g, in, options);
      CHECK(generated.library_kernels == 0);
      CHECK(outside(generated.bytes, want->at(0), tol) == 0);
      if (!library.library_kernels) CHECK(library.bytes == generated.bytes);
    }
  }
}

TEST_CASE("runtime/library/a matmul with more rows than columns runs in row chunks") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session || jit::library_provider_name().empty()) return;
  for (const MatmulCase& c : matmul_cases()) {
    if (!c.taken || c.kernels != 1) continue;
    CAPTURE(c.name);
    auto program = session->compile(make_matmul_graph(c), {});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const std::string explain = (*program)->explain();
    CHECK((explain.find(" row chunks") != std::string::npos) == (c.m >= c.n));
    if (c.m >= c.n) CHECK(explain.find(" column chunks") == std::string::npos);
  }
}

TEST_CASE("runtime/library/a matmul's weight and bias are held once, by the library kernel") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session || jit::library_provider_name().empty()) return;
  const MatmulCase c = matmul_cases().front();
  auto program = session->compile(make_matmul_graph(c), {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  CHECK((*program)->program().released_constant_bytes == (c.k * c.n + c.n) * int64_t{sizeof(float)});
  CHECK((*program)->explain().find("gemm") != std::string::npos);
}
