// Parallel == sequential on random graphs, through the whole Session pipeline: fusion,
// views, in-place reuse, a random planner strategy and order, JIT kernels (large enough
// to split into tiles), the hazard DAG and the oneTBB executor.
//  - a parallel run writes exactly the bytes a sequential run writes, and the hazard
//    checker, watching the parallel run, reports nothing;
//  - with one DAG edge removed, the static verifier reports that pair, and the dynamic
//    checker catches the race in at least one stretched run over the whole property run.
// Case counts: rapidcheck's default (100); scripts/property.sh runs thousands
// (RC_PARAMS="max_success=N").
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/jit/host_target.h"
#include "carve/runtime/hazard_check.h"
#include "carve/runtime/session.h"
#include "test_support.h"

namespace rt = carve::runtime;
using carve::ir::DType;
using carve::ir::GraphBuilder;
using carve::ir::Shape;
using carve::ir::ValueId;

namespace {

int pick(int lo, int hi) { return *rc::gen::inRange(lo, hi + 1); }
bool coin() { return pick(0, 1) == 1; }

// Deterministic floats in [-1, 1) from a seed.
std::vector<float> floats(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 12345u;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// One random f32 graph: values of rank 1..3, inputs and seeded weights, a random op per
// step over random earlier values (branching), views and in-place chances everywhere.
class RandomGraph {
 public:
  GraphBuilder b{"random"};

  void run() {
    for (int i = pick(1, 3); i > 0; --i) pool_.push_back(b.input(name("in"), DType::kF32, random_shape()));
    for (int steps = pick(1, 14); steps > 0 && b.status().ok(); --steps) step();
    if (!b.status().ok()) return;
    // Outputs: 1..3 distinct computed values, the last one always among them.
    std::vector<ValueId> computed;
    for (ValueId v : pool_)
      if (b.graph().value(v).kind == carve::ir::ValueKind::kIntermediate) computed.push_back(v);
    if (computed.empty()) computed.push_back(b.neg(pool_.front()));
    std::vector<ValueId> outs{computed.back()};
    for (int i = pick(0, 2); i > 0; --i) {
      ValueId v = *rc::gen::elementOf(computed);
      if (std::find(outs.begin(), outs.end(), v) == outs.end()) outs.push_back(v);
    }
    for (ValueId v : outs) b.output(v);
  }

 private:
  std::vector<ValueId> pool_;
  int counter_ = 0;

  std::string name(const char* prefix) { return prefix + std::to_string(counter_++); }
  const Shape& shape(ValueId v) const { return b.graph().value(v).type.shape; }

  // Mostly large enough for a compute op to split into tiles (>= ~16K elements a tile).
  Shape random_shape() {
    const int64_t n = *rc::gen::element<int64_t>(1, 7, 16, 33, 64, 128, 257);
    switch (pick(0, 2)) {
      case 0: return Shape{int64_t{pick(1, 300)} * 4};
      case 1: return Shape{pick(1, 1200), n};
      default: return Shape{pick(1, 4), pick(1, 300), n};
    }
  }

  ValueId weight(Shape s) {
    const int64_t n = *s.num_elements();
    std::vector<float> values = floats(n, static_cast<uint32_t>(counter_));
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return b.constant(name("w"), DType::kF32, std::move(s), std::move(bytes));
  }

  ValueId any() { return *rc::gen::elementOf(pool_); }

  // A partner for x: another pool value of x's shape, or a weight that broadcasts.
  ValueId partner(ValueId x) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      ValueId y = any();
      if (shape(y) == shape(x)) return y;
    }
    std::vector<int64_t> dims = shape(x).dims();
    const auto drop = static_cast<size_t>(pick(0, static_cast<int>(dims.size()) - 1));
    dims.erase(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(drop));
    for (int64_t& d : dims)
      if (coin()) d = 1;
    return weight(Shape(std::move(dims)));
  }

  // A failed builder call returns no value; build() then reports the sticky error.
  void add(ValueId v) {
    if (b.status().ok() && v != carve::ir::kNoValue) pool_.push_back(v);
  }

  void step() {
    ValueId x = any();
    const Shape s = shape(x);  // a copy: adding values may move the graph's storage
    const int rank = s.rank();
    if (rank == 0) return add(b.reshape(x, {1}));  // a full reduction's scalar
    const int64_t last = s.dim(rank - 1);
    int choice = pick(0, 15);
    if (choice > 12) choice = *rc::gen::element(2, 4, 10);  // more tiled compute ops
    switch (choice) {
      case 0: {
        using carve::ir::OpKind;
        const OpKind op = *rc::gen::element(OpKind::kNeg, OpKind::kAbs, OpKind::kTanh, OpKind::kSigmoid, OpKind::kRelu,
                                            OpKind::kGelu, OpKind::kSilu, OpKind::kExp);
        return add(b.op1(op, {x}));
      }
      case 1: {
        using carve::ir::OpKind;
        const OpKind op = *rc::gen::element(OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kMax, OpKind::kMin);
        ValueId y = partner(x);
        return add(coin() ? b.op1(op, {x, y}) : b.op1(op, {y, x}));
      }
      case 2: {  // matmul with a weight [last, p]
        const int64_t p = *rc::gen::element<int64_t>(1, 8, 17, 64, 130, 256);
        if (rank < 2) return add(b.matmul(b.reshape(x, {1, last}), weight(Shape{last, p})));
        return add(b.matmul(x, weight(Shape{last, p})));
      }
      case 3: {
        const bool keep = coin();
        switch (pick(0, 2)) {
          case 0: return add(b.reduce_sum(x, {-1}, keep));
          case 1: return add(b.reduce_mean(x, {-1}, keep));
          default: return add(b.reduce_max(x, {-1}, keep));
        }
      }
      case 4: return add(b.softmax(x, -1));
      case 5:  // views: flatten to 1-D, or split the leading dim back
        if (coin() || rank == 1) return add(b.reshape(x, {-1}));
        return add(b.flatten(x, 1));
      case 6: return add(coin() ? b.identity(x) : b.squeeze(b.unsqueeze(x, {0}), {0}));
      case 7: {  // a contiguous slice along the first axis (a view) or a strided one (a copy)
        const int64_t d0 = s.dim(0);
        if (d0 < 2) return add(b.neg(x));
        const int64_t start = pick(0, static_cast<int>(d0) - 1);
        return add(b.slice(x, {start}, {d0}, {0}, {coin() ? 1 : 2}));
      }
      case 8:
        if (rank < 2) return add(b.abs(x));
        return add(rank == 2 ? b.transpose(x, {1, 0}) : b.transpose(x, {0, 2, 1}));
      case 9: return add(b.concat({x, coin() ? x : weight(s)}, -1));
      case 10: return add(b.layer_norm(x, weight(Shape{last}), weight(Shape{last}), -1, 1e-5));
      case 11: {
        ValueId y = partner(x);
        return add(b.where(b.greater(x, y), x, y));
      }
      default: {  // an elementwise chain: fusion and in-place candidates
        ValueId v = b.tanh(x);
        for (int i = pick(1, 3); i > 0; --i) v = coin() ? b.mul(v, partner(v)) : b.relu(v);
        return add(v);
      }
    }
  }
};

std::vector<rt::Buffer> make_inputs(const rt::CompiledProgram& program) {
  std::vector<rt::Buffer> inputs;
  const auto types = program.input_types();
  for (size_t i = 0; i < types.size(); ++i) {
    auto b = rt::Buffer::allocate(rt::cpu_allocator(), types[i].dtype, types[i].shape);
    RC_ASSERT(b.ok());
    auto values = floats(*types[i].shape.num_elements(), static_cast<uint32_t>(1000 + i));
    std::memcpy(b->mutable_bytes()->data(), values.data(), values.size() * sizeof(float));
    inputs.push_back(std::move(*b));
  }
  return inputs;
}

bool same_bytes(const std::vector<rt::Buffer>& a, const std::vector<rt::Buffer>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto x = a[i].bytes(), y = b[i].bytes();
    if (!x.ok() || !y.ok() || x->size() != y->size()) return false;
    if (std::memcmp(x->data(), y->data(), x->size()) != 0) return false;
  }
  return true;
}

rt::CompileOptions random_compile_options() {
  rt::CompileOptions o;
  o.strategy = *rc::gen::element<std::string>("greedy-size", "greedy-breadth", "online", "naive");
  o.order = coin() ? "given" : "memory";
  o.inplace = pick(0, 3) != 0;
  o.fuse = pick(0, 3) != 0;
  return o;
}

rt::Session& session() {
  static auto s = rt::Session::create({.threads = 4});
  REQUIRE(s.ok());
  return **s;
}

carve::ir::Graph random_graph() {
  RandomGraph rg;
  rg.run();
  auto g = rg.b.build();
  if (!g.ok()) RC_FAIL("generator built an invalid graph: " + g.status().to_string());
  return std::move(*g);
}

}  // namespace

TEST_CASE("scheduler/session property/parallel equals sequential on random graphs") {
  if (!carve::jit::cpu_jit_available()) {
    carve::test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  CHECK(rc::check("parallel run == sequential run, bit for bit, and no hazard", [] {
    const carve::ir::Graph g = random_graph();
    rt::CompileOptions options = random_compile_options();
    options.schedule.sequential = true;
    auto sequential = session().compile(g, options);
    RC_ASSERT(sequential.ok());
    options.schedule.sequential = false;
    options.schedule.allow_fallback = false;
    options.schedule.chunks_per_launch = pick(0, 8);
    auto parallel = session().compile(g, options);
    RC_ASSERT(parallel.ok());

    const auto inputs = make_inputs(**parallel);
    auto want = (*sequential)->run(inputs);
    RC_ASSERT(want.ok());
    rt::RunRecord record;
    auto got = (*parallel)->run(inputs, {.check_hazards = true}, &record);
    RC_ASSERT(got.ok());
    RC_ASSERT(record.parallel);
    RC_ASSERT(record.hazards.empty());
    RC_ASSERT(same_bytes(*want, *got));
    RC_TAG((*parallel)->schedule().stats().split_launches > 0 ? "tiles split" : "no split");
  }));
}

TEST_CASE("scheduler/session property/removed edge is reported") {
  if (!carve::jit::cpu_jit_available()) {
    carve::test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  int caught_by_checker = 0, runs_with_removed_edge = 0;
  CHECK(rc::check("a removed edge leaves a race: verifier reports it, checker may see it", [&] {
    const carve::ir::Graph g = random_graph();
    rt::CompileOptions options = random_compile_options();
    options.schedule.allow_fallback = false;
    // oneDNN's matmuls keep pointers in their scratch: racing on it (ASan caught one once)
    // crashes, where generated kernels only compute wrong values (schedule.h, drop_edges).
    options.library_kernels = false;
    auto whole = session().compile(g, options);
    RC_ASSERT(whole.ok());
    const auto& edges = (*whole)->schedule().edges();
    RC_PRE(!edges.empty());
    const rt::ScheduleEdge edge = *rc::gen::elementOf(edges);
    options.schedule.drop_edges = {{edge.from, edge.to}};
    auto cut = session().compile(g, options);
    RC_ASSERT(cut.ok());
    // The DAG is transitively reduced: nothing else orders the pair.
    auto violations = rt::verify_schedule((*cut)->program(), (*cut)->schedule());
    RC_ASSERT(violations.ok());
    const bool reported = std::any_of(violations->begin(), violations->end(), [&](const rt::OrderViolation& v) {
      return v.first_task == edge.from && v.second_task == edge.to;
    });
    RC_ASSERT(reported);
    // Dynamic: stretched tasks make the unordered pair likely to overlap.
    const auto inputs = make_inputs(**cut);
    rt::RunRecord record;
    RC_ASSERT((*cut)->run(inputs, {.check_hazards = true, .stretch_us = 2000}, &record).ok());
    ++runs_with_removed_edge;
    for (const rt::Hazard& h : record.hazards) {
      RC_ASSERT((h.first_task == edge.from && h.second_task == edge.to) || h.kinds != 0);
      if (h.first_task == edge.from && h.second_task == edge.to) {
        ++caught_by_checker;
        break;
      }
    }
  }));
  MESSAGE("hazard checker caught the removed edge in " << caught_by_checker << " of " << runs_with_removed_edge
                                                       << " runs");
  if (std::thread::hardware_concurrency() >= 2 && runs_with_removed_edge >= 20) CHECK(caught_by_checker > 0);
}
