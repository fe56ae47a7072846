// Planned values are views: each its own BufferId over the one arena Storage, and launches
// reach arena bytes only through them.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "carve/ir/builder.h"
#include "carve/jit/host_target.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "test_support.h"

using namespace carve;
using ir::DType;

namespace {

// x -> exp -> neg -> exp -> neg -> ... : each value dies right after its reader, so a
// plan reuses bytes between values that are alive at different times.
ir::Graph chain(int length) {
  ir::GraphBuilder b("chain");
  auto v = b.input("x", DType::kF32, {256});
  for (int i = 0; i < length; ++i) v = b.rename(i % 2 == 0 ? b.exp(v) : b.neg(v), "v" + std::to_string(i));
  b.output(b.rename(b.relu(v), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

std::unique_ptr<runtime::CompiledProgram> compile_or_skip(const ir::Graph& graph) {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return nullptr;
  }
  auto session = runtime::Session::create({.threads = 2});
  REQUIRE(session.ok());
  auto program = (*session)->compile(graph, {.inplace = false, .fuse = false});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  return std::move(*program);
}

bool overlap(const runtime::Buffer& a, const runtime::Buffer& b) {
  return a.offset() < b.offset() + b.size() && b.offset() < a.offset() + a.size();
}

}  // namespace

TEST_CASE("runtime/views/values sharing arena bytes over time are distinct views of one storage") {
  const ir::Graph graph = chain(6);
  auto program = compile_or_skip(graph);
  if (!program) return;
  const runtime::StorageId arena = program->program().arena->storage_id();
  std::map<std::string, runtime::Buffer> views;
  for (int i = 0; i < 6; ++i) {
    const std::string name = "v" + std::to_string(i);
    auto view = program->value_view(name);
    REQUIRE_MESSAGE(view.ok(), view.status().to_string());
    CHECK(view->storage_id() == arena);
    CHECK(view->dtype() == DType::kF32);
    CHECK(view->shape() == ir::Shape{256});
    views.emplace(name, *view);
  }
  // v0 and v2 are never alive together (v1 = neg(v0) is v0's last reader): the plan puts
  // them on the same bytes, as two views.
  int shared = 0;
  std::set<uint64_t> ids;
  for (const auto& [name, view] : views) ids.insert(view.id().value);
  CHECK(ids.size() == views.size());  // every value its own BufferId
  for (auto a = views.begin(); a != views.end(); ++a)
    for (auto b = std::next(a); b != views.end(); ++b)
      if (overlap(a->second, b->second)) {
        ++shared;
        CHECK(a->second.id() != b->second.id());
        CHECK(a->second.storage_id() == b->second.storage_id());
      }
  CHECK(shared > 0);
  // Asking again gives the same view (same BufferId), not a new one.
  CHECK(program->value_view("v3")->id() == views.at("v3").id());
}

TEST_CASE("runtime/views/every arena operand of every launch lies in the view it names") {
  auto program = compile_or_skip(chain(4));
  if (!program) return;
  const runtime::Program& p = program->program();
  int arena_refs = 0;
  for (const runtime::Launch& launch : p.launches)
    for (const auto* refs : {&launch.operands, &launch.reads, &launch.writes})
      for (const runtime::MemoryRef& r : *refs) {
        if (r.region != runtime::Region::kArena) continue;
        ++arena_refs;
        REQUIRE(r.view >= 0);
        const runtime::Buffer& v = p.arena->views()[static_cast<size_t>(r.view)].buffer;
        CHECK(v.storage_id() == p.arena->storage_id());
        CHECK(r.offset >= static_cast<int64_t>(v.offset()));
        CHECK(r.offset + r.bytes <= static_cast<int64_t>(v.offset() + v.size()));
      }
  CHECK(arena_refs > 0);
}

TEST_CASE("runtime/views/value_view names why a value has none") {
  auto program = compile_or_skip(chain(2));
  if (!program) return;
  auto input = program->value_view("x");
  CHECK(input.status().code() == ErrorCode::kNotFound);
  CHECK(input.status().message().find("input") != std::string::npos);
  auto output = program->value_view("y");
  CHECK(output.status().code() == ErrorCode::kNotFound);
  CHECK(output.status().message().find("output") != std::string::npos);
  auto unknown = program->value_view("nope");
  CHECK(unknown.status().code() == ErrorCode::kNotFound);
  CHECK(unknown.status().message().find("'nope'") != std::string::npos);
}

TEST_CASE("runtime/views/explain lists every value's view") {
  auto program = compile_or_skip(chain(3));
  if (!program) return;
  const std::string text = program->explain();
  for (const char* name : {"v0", "v1", "v2"}) {
    auto view = program->value_view(name);
    REQUIRE(view.ok());
    const std::string line = fmt::format("  {}: buffer #{} = storage #{} [{}, {}) f32[256]", name, view->id().value,
                                         view->storage_id().value, view->offset(), view->offset() + view->size());
    CHECK_MESSAGE(text.find(line) != std::string::npos, text);
  }
}

namespace {

// x -> four branches -> concat on channels -> relu. Each branch is 1 KiB, so every slice
// of the concat keeps the arena's alignment.
ir::Graph branches_into_concat() {
  ir::GraphBuilder b("concat");
  auto x = b.input("x", DType::kF32, {1, 4, 8, 8});
  std::vector<ir::ValueId> parts{b.rename(b.exp(x), "p0"), b.rename(b.tanh(x), "p1"), b.rename(b.sigmoid(x), "p2"),
                                 b.rename(b.neg(x), "p3")};
  b.output(b.rename(b.relu(b.rename(b.concat(parts, 1), "c")), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

}  // namespace

TEST_CASE("runtime/views/concat inputs are written into the concat's view at 1 and 4 threads") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  const ir::Graph graph = branches_into_concat();
  std::vector<float> values(256);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 37) * 0.25f - 4.0f;
  const auto x = reference::HostTensor::from<float>({1, 4, 8, 8}, values);
  auto want = reference::run_reference(graph, std::vector<reference::HostTensor>{x});
  REQUIRE_MESSAGE(want.ok(), want.status().to_string());
  std::span<const std::byte> x_bytes(reinterpret_cast<const std::byte*>(x.bytes.data()), x.bytes.size());
  auto input = runtime::Buffer::borrow(x_bytes, DType::kF32, {1, 4, 8, 8});
  REQUIRE(input.ok());
  std::vector<std::vector<float>> results;
  for (int threads : {1, 4}) {
    for (bool concat_views : {true, false}) {
      CAPTURE(threads);
      CAPTURE(concat_views);
      auto session = runtime::Session::create({.threads = threads});
      REQUIRE(session.ok());
      auto program = (*session)->compile(graph, {.concat_views = concat_views});
      REQUIRE_MESSAGE(program.ok(), program.status().to_string());
      const runtime::Program& p = (*program)->program();
      const bool concat_runs = std::any_of(p.launches.begin(), p.launches.end(), [](const runtime::Launch& l) {
        return l.name.find("concat") != std::string::npos;
      });
      CHECK(concat_runs == !concat_views);
      auto c = (*program)->value_view("c");
      REQUIRE_MESSAGE(c.ok(), c.status().to_string());
      for (int i = 0; i < 4; ++i) {
        auto part = (*program)->value_view("p" + std::to_string(i));
        REQUIRE(part.ok());
        const bool inside = part->storage_id() == c->storage_id() && part->offset() == c->offset() + 1024 * i;
        CHECK(inside == concat_views);
      }
      std::vector<runtime::Buffer> inputs{*input};
      auto out = (*program)->run(inputs);
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      std::vector<float> got(256 * 4);
      REQUIRE(out->at(0).copy_out(std::as_writable_bytes(std::span(got))).ok());
      results.push_back(std::move(got));
    }
  }
  // The same bytes whatever the thread count and wherever the branches write.
  for (const auto& r : results) CHECK(r == results.front());
  std::vector<float> reference_values(256 * 4);
  std::memcpy(reference_values.data(), want->at(0).bytes.data(), want->at(0).bytes.size());
  int far = 0;  // exp/tanh/sigmoid are polynomials within a few ulp of the reference
  for (size_t i = 0; i < reference_values.size(); ++i)
    far += std::abs(results.front()[i] - reference_values[i]) > 1e-5f * std::max(1.0f, std::abs(reference_values[i]));
  CHECK(far == 0);
}
