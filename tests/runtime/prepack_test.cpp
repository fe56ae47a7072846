// Compile-time pre-packing of GEMV weights (CompileOptions::prepack_weights, issue 14):
// a matmul/gemm with m <= kGemvMaxRows rows and a constant B reads B packed once at
// compile time in the GEMV strip layout (jit/tiles.h). Checked here: the same bytes as
// the unpacked program (which streams or packs B per run) and as the blocked GEMM
// (m > 12 rows, first m rows), parallel == sequential, within the reference's
// tolerance, the constant replaced in place only when nothing else reads it, and
// caller-bound constants (CompileOptions::constants) packed into a copy.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "carve/ir/builder.h"
#include "carve/ir/half.h"
#include "carve/jit/host_target.h"
#include "carve/jit/tiles.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "runtime_test_util.h"
#include "test_support.h"

using namespace carve;
using ir::DType;

namespace {

std::vector<uint8_t> random_bytes(DType dt, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const size_t es = ir::dtype_size(dt);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * es);
  for (int64_t i = 0; i < n; ++i) {
    double d = dist(rng);
    float f = static_cast<float>(d);
    std::memcpy(bytes.data() + static_cast<size_t>(i) * es, dt == DType::kF64 ? static_cast<void*>(&d) : &f, es);
  }
  return bytes;
}

struct Case {
  int64_t m, k, n;
  bool gemm = false, trans_b = false, bias = false, relu = false;
  DType dt = DType::kF32;
};

std::string describe(const Case& c) {
  return (c.gemm ? std::string("gemm") : std::string("matmul")) + " m" + std::to_string(c.m) + " k" +
         std::to_string(c.k) + " n" + std::to_string(c.n) + (c.trans_b ? " trans_b" : "") +
         (c.bias ? " bias" : "") + (c.relu ? " relu" : "") + " " + std::string(ir::dtype_name(c.dt));
}

// y = [relu](a @ w [+ bias]) with w a constant ([n, k] when trans_b), a an input.
ir::Graph make_graph(const Case& c, int64_t rows, bool w_input = false) {
  ir::GraphBuilder b("gemv");
  auto a = b.input("a", c.dt, {rows, c.k});
  ir::Shape ws = c.trans_b ? ir::Shape{c.n, c.k} : ir::Shape{c.k, c.n};
  auto w = w_input ? b.input("w", c.dt, ws) : b.constant("w", c.dt, ws, random_bytes(c.dt, c.k * c.n, 7));
  ir::ValueId y;
  if (c.gemm) {
    std::optional<ir::ValueId> bias;
    if (c.bias) bias = b.constant("bias", c.dt, {c.n}, random_bytes(c.dt, c.n, 9));
    y = b.gemm(a, w, bias, false, c.trans_b, 0.75, 1.5);
  } else {
    y = b.matmul(a, w);
    if (c.bias) y = b.add(y, b.constant("bias", c.dt, {c.n}, random_bytes(c.dt, c.n, 9)));
  }
  if (c.relu) y = b.relu(y);
  b.output(b.rename(y, "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

reference::HostTensor tensor(DType dt, ir::Shape shape, std::vector<uint8_t> bytes) {
  reference::HostTensor t;
  t.type = {dt, std::move(shape)};
  t.bytes = std::move(bytes);
  return t;
}

runtime::Buffer borrow(const reference::HostTensor& t) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(t.bytes.data()), t.bytes.size());
  return *runtime::Buffer::borrow(bytes, t.type.dtype, t.type.shape);
}

std::vector<uint8_t> output_bytes(const runtime::Buffer& out) {
  auto bytes = out.bytes();
  REQUIRE(bytes.ok());
  const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
  return std::vector<uint8_t>(p, p + bytes->size());
}

std::vector<uint8_t> run(runtime::Session& s, const ir::Graph& g, const std::vector<reference::HostTensor>& in,
                         runtime::CompileOptions options, bool expect_prepacked) {
  auto program = s.compile(g, options);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  bool prepacked = false;
  for (const ir::Node& n : (*program)->program().graph.nodes)
    prepacked |= n.attrs.count(jit::tiling::kPrepackedAttr) > 0;
  CHECK(prepacked == expect_prepacked);
  std::vector<runtime::Buffer> inputs;
  for (const auto& t : in) inputs.push_back(borrow(t));
  auto out = (*program)->run(inputs);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  return output_bytes(out->at(0));
}

// |got - want| <= tol * (1 + |want|), elementwise, as doubles.
bool close(const std::vector<uint8_t>& got, const reference::HostTensor& want, DType dt, double tol) {
  const size_t es = ir::dtype_size(dt);
  REQUIRE(got.size() == want.bytes.size());
  for (size_t i = 0; i < got.size() / es; ++i) {
    double g, w;
    if (dt == DType::kF64) {
      std::memcpy(&g, got.data() + i * es, es);
      std::memcpy(&w, want.bytes.data() + i * es, es);
    } else {
      float gf, wf;
      std::memcpy(&gf, got.data() + i * es, es);
      std::memcpy(&wf, want.bytes.data() + i * es, es);
      g = gf;
      w = wf;
    }
    if (!(std::fabs(g - w) <= tol * (1 + std::fabs(w)))) return false;
  }
  return true;
}

// Case c compiled with and without pre-packing: the same bytes, within the reference's
// tolerance; the packed program's B is [k, n] (trans_b 0).
void check_packed_vs_unpacked(runtime::Session& session, const Case& c, uint32_t seed) {
  CAPTURE(describe(c));
  ir::Graph g = make_graph(c, c.m);
  std::vector<reference::HostTensor> in{tensor(c.dt, {c.m, c.k}, random_bytes(c.dt, c.m * c.k, seed))};
  auto program = session.compile(g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const ir::Graph& pg = (*program)->program().graph;
  const ir::Node& node = pg.nodes.front();
  if (c.gemm) CHECK(node.attrs.at("trans_b").as_int() == 0);
  CHECK(pg.value(node.inputs[1]).type.shape == ir::Shape({c.k, c.n}));
  auto packed = run(session, g, in, {}, true);
  auto unpacked = run(session, g, in, {.prepack_weights = false}, false);
  CHECK(packed == unpacked);
  auto want = reference::run_reference(g, in);
  REQUIRE(want.ok());
  const double tol = c.dt == DType::kF64 ? 1e-12 : 2e-6 * std::sqrt(static_cast<double>(c.k)) + 1e-6;
  CHECK(close(packed, want->at(0), c.dt, tol));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  // n: tails only (7), one vector strip (16), wide + vector + scalar (100), exactly one
  // column tile (256), several column tiles with tails (600, 1000); k: one K block, and
  // several (300, 700: K blocks of 256 summed in order).
  for (int64_t m : {1, 2, 3, 4})
    for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 7}, {5, 16}, {33, 100}, {300, 256},
                                                                 {700, 600}, {64, 1000}}) {
      out.push_back({m, k, n});
      out.push_back({m, k, n, true, true, true});
      out.push_back({m, k, n, true, false, true, true});
    }
  out.push_back({2, 300, 129, false, false, true, true});
  out.push_back({1, 513, 77, true, true, true, false, DType::kF64});
  out.push_back({3, 20, 45, false, false, false, false, DType::kF64});
  return out;
}

}  // namespace

TEST_CASE("runtime/prepack/gemv weights: packed and unpacked programs write the same bytes") {
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  for (const Case& c : cases()) check_packed_vs_unpacked(*session, c, 3);
}

// A's rows 4 KiB apart (K = 1024, 2048): each row micro-tile's A block is copied before
// the column strips run (emit_gemm); row tails of 1-11 rows and bias/relu epilogues too.
TEST_CASE("runtime/prepack/A rows 4 KiB apart: packed and unpacked programs write the same bytes") {
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  for (const Case& c : {Case{37, 1024, 70}, Case{130, 2048, 64, true, true, true, true}, Case{25, 1024, 300, false, false, true},
                        Case{13, 3072, 33, true, false, false, true}})
    check_packed_vs_unpacked(*session, c, 5);
}

TEST_CASE("runtime/prepack/gemv rows equal the blocked GEMM's rows byte for byte") {
  // The first m rows of a 13-row product (the MR-row micro-kernel, B packed per run)
  // equal the m-row GEMV's, pre-packed or streamed: one summation order per element.
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  for (const Case& c : cases()) {
    if (c.relu) continue;
    CAPTURE(describe(c));
    const int64_t big = 13;
    auto a13 = random_bytes(c.dt, big * c.k, 5);
    const size_t es = ir::dtype_size(c.dt);
    std::vector<uint8_t> am(a13.begin(), a13.begin() + static_cast<std::ptrdiff_t>(c.m * c.k * es));
    auto blocked = run(*session, make_graph(c, big), {tensor(c.dt, {big, c.k}, a13)}, {.prepack_weights = false}, false);
    // The 13-row product with B pre-packed (the micro-kernel reads the panels) as well.
    CHECK(run(*session, make_graph(c, big), {tensor(c.dt, {big, c.k}, a13)}, {}, true) == blocked);
    blocked.resize(static_cast<size_t>(c.m * c.n) * es);
    auto gemv = run(*session, make_graph(c, c.m), {tensor(c.dt, {c.m, c.k}, am)}, {}, true);
    CHECK(gemv == blocked);
    // B as a run-time input: streamed (row-major) or packed per run (trans_b).
    ir::Graph gi = make_graph(c, c.m, true);
    const ir::Graph gc = make_graph(c, c.m);
    const ir::Value* w = gc.find_value("w");
    REQUIRE(w != nullptr);
    auto streamed = run(*session, gi, {tensor(c.dt, {c.m, c.k}, am), tensor(c.dt, w->type.shape, *w->data)}, {},
                        false);
    CHECK(streamed == blocked);
  }
}

TEST_CASE("runtime/prepack/parallel runs write the sequential run's bytes") {
  auto session = runtime::testing::cpu_session_or_skip(4);
  if (!session) return;
  for (Case c : {Case{1, 512, 3000, true, true, true}, Case{4, 300, 1500}, Case{2, 64, 2000, false, false, true, true},
                 Case{200, 300, 1100, true, true, true, true}}) {
    CAPTURE(describe(c));
    ir::Graph g = make_graph(c, c.m);
    std::vector<reference::HostTensor> in{tensor(c.dt, {c.m, c.k}, random_bytes(c.dt, c.m * c.k, 11))};
    runtime::CompileOptions seq;
    seq.schedule.sequential = true;
    runtime::CompileOptions par;
    par.schedule.threads = 4;
    auto a = run(*session, g, in, seq, true);
    auto b = run(*session, g, in, par, true);
    CHECK(a == b);
  }
}

TEST_CASE("runtime/prepack/a constant that something else reads keeps its bytes") {
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  // w [4, 6] feeds a GEMV (a[1,4] @ w), is added to x, and is a graph output itself.
  ir::GraphBuilder b("shared");
  auto a = b.input("a", DType::kF32, {1, 4});
  auto x = b.input("x", DType::kF32, {4, 6});
  auto w = b.constant("w", DType::kF32, {4, 6}, random_bytes(DType::kF32, 24, 1));
  b.output(b.rename(b.matmul(a, w), "y"));
  b.output(b.rename(b.add(x, w), "z"));
  b.output(w);
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  std::vector<reference::HostTensor> in{tensor(DType::kF32, {1, 4}, random_bytes(DType::kF32, 4, 2)),
                                        tensor(DType::kF32, {4, 6}, random_bytes(DType::kF32, 24, 3))};
  auto program = session->compile(*g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const ir::Graph& pg = (*program)->program().graph;
  const ir::Value* packed = pg.find_value("w#prepacked");
  REQUIRE(packed != nullptr);
  CHECK(pg.find_value("w")->data == g->find_value("w")->data);  // the original kept as is
  std::vector<runtime::Buffer> inputs{borrow(in[0]), borrow(in[1])};
  auto out = (*program)->run(inputs);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  auto want = reference::run_reference(*g, in);
  REQUIRE(want.ok());
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(close(output_bytes(out->at(i)), want->at(i), DType::kF32, 1e-6));
  }
  CHECK(output_bytes(out->at(2)) == *g->find_value("w")->data);
}

TEST_CASE("runtime/prepack/readers of one constant share one packed copy") {
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  // w [4, 4] read transposed by three GEMVs, as an unrolled recurrent layer reads R each step.
  ir::GraphBuilder b("shared_reader");
  auto w = b.constant("w", DType::kF32, {4, 4}, random_bytes(DType::kF32, 16, 5));
  ir::ValueId h = b.input("a", DType::kF32, {1, 4});
  for (int step = 0; step < 3; ++step) h = b.gemm(h, w, std::nullopt, false, true, 1.0, 1.0);
  b.output(b.rename(h, "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto program = session->compile(*g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const ir::Graph& pg = (*program)->program().graph;
  const ir::Value* packed = pg.find_value("w#prepacked");
  REQUIRE(packed != nullptr);
  CHECK(pg.find_value("w#prepacked2") == nullptr);
  int readers = 0;
  for (const ir::Node& n : pg.nodes) readers += n.op == ir::OpKind::kGemm && n.inputs[1] == packed->id ? 1 : 0;
  CHECK(readers == 3);
  std::vector<reference::HostTensor> in{tensor(DType::kF32, {1, 4}, random_bytes(DType::kF32, 4, 6))};
  std::vector<runtime::Buffer> inputs{borrow(in[0])};
  auto out = (*program)->run(inputs);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  auto want = reference::run_reference(*g, in);
  REQUIRE(want.ok());
  CHECK(close(output_bytes(out->at(0)), want->at(0), DType::kF32, 1e-6));
}

TEST_CASE("runtime/prepack/a sole reader packs the constant in place, no copy kept") {
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  Case c{1, 40, 70, true, true, true};
  ir::Graph g = make_graph(c, 1);
  auto program = session->compile(g, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const runtime::Program& p = (*program)->program();
  CHECK(p.graph.num_values() == g.num_values());
  CHECK(p.constants.size() == 2);  // w (packed, now [k, n]) and bias
  const ir::Value* w = p.graph.find_value("w");
  REQUIRE(w != nullptr);
  CHECK(w->type.shape == ir::Shape({40, 70}));
  CHECK(w->data->size() == g.find_value("w")->data->size());
  CHECK(*w->data != *g.find_value("w")->data);
}

TEST_CASE("runtime/prepack/caller-bound constants are packed into a copy") {
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  Case c{2, 300, 130, true, true, true};
  ir::Graph with_data = make_graph(c, c.m);
  ir::Graph g = with_data;
  ir::Value& w = g.value(g.find_value("w")->id);
  const std::vector<uint8_t> bytes = *w.data;
  w.data.reset();
  std::span<const std::byte> span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
  auto bound = runtime::Buffer::borrow(span, w.type.dtype, w.type.shape);
  REQUIRE(bound.ok());
  std::vector<reference::HostTensor> in{tensor(c.dt, {c.m, c.k}, random_bytes(c.dt, c.m * c.k, 4))};
  runtime::CompileOptions options;
  options.constants = {{"w", *bound}};
  auto packed = run(*session, g, in, options, true);
  options.prepack_weights = false;
  auto unpacked = run(*session, g, in, options, false);
  CHECK(packed == unpacked);
  CHECK(packed == run(*session, with_data, in, {}, true));
}

TEST_CASE("runtime/prepack/more rows: the GEMM micro-kernel reads pre-packed panels, the same bytes") {
  // m > kGemvMaxRows: strips of NR columns read in place, the last narrower strip
  // gathered; row tiles and column tiles (n 600: 3 tiles), K blocks (k 300, 513).
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  for (Case c : {Case{5, 300, 130, true, true, true}, Case{40, 70, 600, true, true, true, true},
                 Case{13, 513, 77, true, true, false, false, DType::kF64}, Case{100, 300, 600},
                 Case{7, 5, 3, false, false, true, true}, Case{30, 64, 1000, true, false, true},
                 Case{64, 256, 256}})
    check_packed_vs_unpacked(*session, c, 8);
}

TEST_CASE("runtime/prepack/long K with a cast epilogue: one K block, within the reference") {
  // The output is f16, so K blocks cannot accumulate in it: the whole K is one block
  // (the unpacked GEMM falls back to its scalar loop past a panel's capacity; the
  // pre-packed kernels need no panel). Compared with the reference only.
  auto session = runtime::testing::cpu_session_or_skip();
  if (!session) return;
  for (int64_t m : {3, 19}) {
    for (int64_t k : {600, 3000}) {
      CAPTURE(m);
      CAPTURE(k);
      ir::GraphBuilder b("cast");
      auto x = b.input("x", DType::kF32, {m, k});
      auto w = b.constant("w", DType::kF32, {k, 40}, random_bytes(DType::kF32, k * 40, 12));
      b.output(b.rename(b.cast(b.matmul(x, w), DType::kF16), "y"));
      auto g = b.build();
      REQUIRE_MESSAGE(g.ok(), g.status().to_string());
      std::vector<reference::HostTensor> in{tensor(DType::kF32, {m, k}, random_bytes(DType::kF32, m * k, 13))};
      auto got = run(*session, *g, in, {}, true);
      auto want = reference::run_reference(*g, in);
      REQUIRE(want.ok());
      const auto& wb = want->at(0).bytes;
      REQUIRE(got.size() == wb.size());
      for (size_t i = 0; i < got.size() / 2; ++i) {
        uint16_t gh, wh;
        std::memcpy(&gh, got.data() + 2 * i, 2);
        std::memcpy(&wh, wb.data() + 2 * i, 2);
        const double gv = ir::f16_to_float(gh), wv = ir::f16_to_float(wh);
        if (!(std::fabs(gv - wv) <= 1e-3 + 2e-3 * std::fabs(wv))) {
          FAIL_CHECK("element " << i << ": " << gv << " vs " << wv);
          break;
        }
      }
    }
  }
}
