// Helpers shared by the library kernel tests (tests/runtime/library_*_test.cpp): runs a
// graph through a CPU session and compares with the reference.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/ir/graph.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "runtime_test_util.h"
#include "test_support.h"

namespace carve::libtest {

// conv(in) ci -> co, k x k, stride 1, "same" padding, with random weights "w<seed>" (and
// bias "b<seed>" when `bias`); advances `seed`.
inline ir::ValueId random_conv(ir::GraphBuilder& b, uint32_t& seed, ir::ValueId in, int64_t ci, int64_t co, int64_t k,
                               bool bias = true, int64_t groups = 1) {
  auto w = b.constant("w" + std::to_string(seed), ir::DType::kF32, {co, ci / groups, k, k},
                      test::random_f32_bytes(co * (ci / groups) * k * k, seed));
  std::optional<ir::ValueId> b_value;
  if (bias)
    b_value = b.constant("b" + std::to_string(seed), ir::DType::kF32, {co}, test::random_f32_bytes(co, seed + 100));
  ++seed;
  const int64_t p = k / 2;
  return b.conv2d(in, w, b_value, {.groups = groups, .pads = {p, p, p, p}});
}

using ir::DType;

inline reference::HostTensor tensor(ir::Shape shape, std::vector<uint8_t> bytes) {
  reference::HostTensor t;
  t.type = {DType::kF32, std::move(shape)};
  t.bytes = std::move(bytes);
  return t;
}

struct RunResult {
  std::vector<uint8_t> bytes;
  int64_t library_kernels = 0, kernels = 0;
};

inline RunResult run(runtime::Session& s, const ir::Graph& g, const std::vector<reference::HostTensor>& in,
                     runtime::CompileOptions options) {
  auto program = s.compile(g, options);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  RunResult r;
  for (const auto& k : (*program)->program().kernels) r.library_kernels += k.library != nullptr;
  r.kernels = static_cast<int64_t>((*program)->program().kernels.size());
  std::vector<runtime::Buffer> inputs;
  for (const auto& t : in) {
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(t.bytes.data()), t.bytes.size());
    inputs.push_back(*runtime::Buffer::borrow(bytes, t.type.dtype, t.type.shape));
  }
  auto out = (*program)->run(inputs);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  auto bytes = out->at(0).bytes();
  REQUIRE(bytes.ok());
  const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
  r.bytes.assign(p, p + bytes->size());
  return r;
}

// |got - want| <= tol * (1 + |want|) elementwise; counts the elements outside.
inline int64_t outside(const std::vector<uint8_t>& got, const reference::HostTensor& want, double tol) {
  REQUIRE(got.size() == want.bytes.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size() / sizeof(float); ++i) {
    float g, w;
    std::memcpy(&g, got.data() + i * sizeof(float), sizeof g);
    std::memcpy(&w, want.bytes.data() + i * sizeof(float), sizeof w);
    bad += !(std::fabs(double(g) - double(w)) <= tol * (1 + std::fabs(double(w))));
  }
  return bad;
}

// Elements off by more than tol * max |want| (a deep chain sums large terms that cancel:
// its error scales with the terms, not with each result).
inline int64_t outside_scaled(const std::vector<uint8_t>& got, const reference::HostTensor& want, double tol) {
  double scale = 0;
  for (size_t i = 0; i < want.bytes.size() / sizeof(float); ++i) {
    float w;
    std::memcpy(&w, want.bytes.data() + i * sizeof(float), sizeof w);
    scale = std::max(scale, std::fabs(double(w)));
  }
  int64_t bad = 0;
  for (size_t i = 0; i < got.size() / sizeof(float); ++i) {
    float g, w;
    std::memcpy(&g, got.data() + i * sizeof(float), sizeof g);
    std::memcpy(&w, want.bytes.data() + i * sizeof(float), sizeof w);
    bad += !(std::fabs(double(g) - double(w)) <= tol * scale);
  }
  return bad;
}

// Runs g on `inputs` with `options`: within the reference's tolerance, the same bytes
// sequentially and at 1 and 2 threads, and with `generated_too` within it with every kernel
// generated as well; returns the library kernels' count (-1: no CPU session).
inline int64_t check_run(const ir::Graph& g, const std::vector<reference::HostTensor>& inputs,
                         runtime::CompileOptions options, bool generated_too) {
  auto one = runtime::testing::cpu_session_or_skip(1);
  if (!one) return -1;
  auto two = runtime::testing::cpu_session_or_skip(2);
  auto want = reference::run_reference(g, inputs);
  REQUIRE(want.ok());
  RunResult library = run(*one, g, inputs, options);
  CHECK(outside_scaled(library.bytes, want->at(0), 1e-5) == 0);
  if (generated_too) {
    runtime::CompileOptions generated = options;
    generated.library_kernels = false;
    CHECK(outside_scaled(run(*one, g, inputs, generated).bytes, want->at(0), 1e-5) == 0);
  }
  CHECK(run(*two, g, inputs, options).bytes == library.bytes);
  runtime::CompileOptions sequential = options;
  sequential.schedule.sequential = true;
  CHECK(run(*one, g, inputs, sequential).bytes == library.bytes);
  return library.library_kernels;
}

inline int64_t check_run(const ir::Graph& g, const reference::HostTensor& in, runtime::CompileOptions options,
                         bool generated_too) {
  return check_run(g, std::vector<reference::HostTensor>{in}, options, generated_too);
}

}  // namespace carve::libtest
