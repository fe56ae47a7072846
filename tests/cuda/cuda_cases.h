// The CUDA test cases shared by the jit suite (codegen, NVRTC, cuda_runner on the GPU) and
// the runtime suite (the same graphs through Session on a cuda device): one graph per op
// family and dtype, tolerances, random inputs, and run_gpu_family (skips without a GPU).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/jit/cuda/cuda_codegen.h"
#include "carve/runtime/cuda/cuda_device.h"
#include "carve/runtime/cuda/cuda_runner.h"
#include "carve/jit/cuda/nvrtc.h"
#include "carve/jit/fusion.h"
#include "carve/ir/half.h"
#include "carve/reference/reference.h"
#include "test_support.h"

namespace carve::jit::cuda {

using namespace carve::runtime::cuda;
using namespace carve::reference;
namespace {

using ir::DType;
using ir::GraphBuilder;
using ir::ValueId;

struct Case {
  std::string name;
  std::function<void(GraphBuilder&)> build;
  double rtol = 0, atol = 0;  // GPU vs reference tolerance
  double lo = -2, hi = 2;     // random input range
  FusionOptions fusion{};
};

const std::vector<DType> kFloats = {DType::kF32, DType::kF64, DType::kF16, DType::kBf16};
const std::vector<DType> kInts = {DType::kI8, DType::kI32, DType::kI64, DType::kU8,
                                  DType::kI16, DType::kU16, DType::kU32, DType::kU64};

// Tolerance by dtype for transcendental/accumulating results.
double tol(DType d, double f32 = 1e-5) {
  switch (d) {
    case DType::kF16: return 2e-3;
    case DType::kBf16: return 1.6e-2;
    case DType::kF64: return 1e-12;
    default: return f32;
  }
}

std::string dn(DType d) { return std::string(ir::dtype_name(d)); }

// ---- cases per family ----

std::vector<Case> elementwise_cases() {
  std::vector<Case> cases;
  cases.push_back({"float4 chain with two outputs f32", [](GraphBuilder& b) {
                     auto x = b.input("x", DType::kF32, {8, 512});
                     auto y = b.input("y", DType::kF32, {8, 512});
                     auto t = b.sub(x, y);
                     b.output(t);
                     b.output(b.silu(b.add(b.mul(x, y), t)));
                   }, 2e-6, 2e-6});
  for (DType d : kFloats) {
    cases.push_back({"unary chain " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {3, 37});
                       auto t = b.abs(b.neg(x));
                       t = b.sqrt(b.relu(t));
                       t = b.log(b.exp(t));
                       t = b.rsqrt(b.add(t, b.input("one", d, {1})));
                       t = b.tanh(b.sigmoid(t));
                       t = b.erf(b.gelu(t));
                       t = b.silu(b.hard_sigmoid(t, 0.3, 0.4));
                       b.output(b.clip(t, -0.25, 0.75));
                     }, tol(d, 2e-6), tol(d, 2e-6), 0.5, 2});
    cases.push_back({"binary broadcast chain " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {2, 3, 8});
                       auto r = b.input("row", d, {8});
                       auto c = b.input("col", d, {3, 1});
                       auto t = b.add(x, r);
                       t = b.sub(t, c);
                       t = b.mul(t, r);
                       t = b.div(t, b.input("den", d, {1, 3, 1}));
                       t = b.max(t, c);
                       t = b.min(t, r);
                       b.output(b.pow(b.abs(t), b.input("e", d, {1})));
                     }, tol(d, 1e-6), tol(d, 1e-6), 0.5, 2});
    cases.push_back({"where of less " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {4, 5});
                       auto y = b.input("y", d, {5});
                       b.output(b.where(b.less(x, y), x, y));
                     }});
    // rounding and fmod are exact; every trigonometric/hyperbolic op gets an in-domain argument
    cases.push_back({"rounding trigonometric fmod " + dn(d), [d](GraphBuilder& b) {
                       using ir::OpKind;
                       auto f = [&](OpKind op, ValueId v) { return b.op1(op, {v}); };
                       auto x = b.input("x", d, {3, 37});
                       auto r = b.add(b.add(f(OpKind::kFloor, x), f(OpKind::kCeil, x)),
                                      b.add(f(OpKind::kRound, x), f(OpKind::kTrunc, x)));
                       b.output(b.fmod(r, b.input("y", d, {37})));
                       auto s = f(OpKind::kSin, x), c = f(OpKind::kCos, x);
                       auto t = b.add(f(OpKind::kAsin, s), f(OpKind::kAcos, c));
                       t = b.add(t, f(OpKind::kAtan, f(OpKind::kTan, x)));
                       t = b.add(t, f(OpKind::kAtanh, b.tanh(x)));
                       t = b.add(t, b.add(f(OpKind::kSinh, s), f(OpKind::kCosh, c)));
                       t = b.add(t, b.add(f(OpKind::kAsinh, x), f(OpKind::kAcosh, f(OpKind::kCosh, x))));
                       b.output(t);
                     }, tol(d, 2e-6), tol(d, 2e-6)});
  }
  for (DType d : kInts) {
    cases.push_back({"integer chain " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {4, 9});
                       auto y = b.input("y", d, {9});
                       auto t = b.relu(b.abs(b.neg(x)));
                       t = b.add(t, y);
                       t = b.sub(t, x);
                       t = b.mul(t, y);
                       t = b.div(t, b.input("z", d, {4, 1}));
                       t = b.max(t, b.min(x, y));
                       t = b.pow(t, b.input("e", d, {1}));
                       t = b.fmod(t, b.input("m", d, {9}));  // zero divisors included
                       t = b.op1(ir::OpKind::kRound, {t});
                       b.output(b.clip(t, -7.5, 100.25));
                     }, 0, 0, -9, 9});
  }
  for (DType d : {DType::kU8, DType::kU16, DType::kU32, DType::kU64}) {
    cases.push_back({"bit shifts " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {4, 9});
                       auto s = b.input("s", d, {9});  // 0..70: past every width
                       b.output(b.op1(ir::OpKind::kBitShiftLeft, {x, s}));
                       b.output(b.op1(ir::OpKind::kBitShiftRight, {x, s}));
                     }, 0, 0, 0, 70});
  }
  for (DType d : ir::all_dtypes()) {
    cases.push_back({"comparisons " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {6, 4});
                       auto y = b.input("y", d, {4});
                       b.output(b.equal(x, y));
                       b.output(b.not_equal(x, y));
                       b.output(b.less_equal(x, y));
                       b.output(b.greater(x, y));
                       b.output(b.greater_equal(x, y));
                     }, 0, 0, -3, 3});
    // Round trips from d through every dtype: every ordered cast pair, both directions.
    cases.push_back({"casts from " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {5, 7});
                       ValueId t = x;
                       for (DType to : ir::all_dtypes()) {
                         if (to == d) continue;
                         t = b.cast(b.cast(t, to), d);
                       }
                       b.output(t);
                       b.output(b.cast(x, DType::kF16));
                     }, 0, 0, -300, 300});
  }
  return cases;
}

std::vector<Case> layout_cases() {
  std::vector<Case> cases;
  for (DType d : {DType::kF32, DType::kBf16, DType::kBool, DType::kI64}) {
    const std::string s = dn(d);
    cases.push_back({"transpose " + s, [d](GraphBuilder& b) { b.output(b.transpose(b.input("x", d, {2, 3, 5}), {2, 0, 1})); }});
    cases.push_back({"slice with steps " + s, [d](GraphBuilder& b) {
                       b.output(b.slice(b.input("x", d, {6, 7}), {-1, 1}, {-7, 7}, {0, 1}, {-2, 3}));
                     }});
    cases.push_back({"pad " + s, [d](GraphBuilder& b) { b.output(b.pad(b.input("x", d, {2, 3}), {1, 0, 2, 3}, 1.5)); }});
    cases.push_back({"concat " + s, [d](GraphBuilder& b) {
                       b.output(b.concat({b.input("a", d, {2, 1, 3}), b.input("b", d, {2, 4, 3}), b.input("c", d, {2, 2, 3})}, 1));
                     }});
    cases.push_back({"split " + s, [d](GraphBuilder& b) {
                       for (ValueId v : b.split(b.input("x", d, {3, 8}), 1, {2, 5, 1})) b.output(v);
                     }});
    cases.push_back({"gather " + s, [d](GraphBuilder& b) {
                       auto idx = b.constant("idx", DType::kI32, {2, 2}, std::vector<uint8_t>(16, 0));
                       b.output(b.gather(b.input("x", d, {3, 4, 2}), idx, 1));
                     }});
  }
  cases.push_back({"gather i64 negative indices", [](GraphBuilder& b) {
                     std::vector<int64_t> idx = {-1, 0, 2, -3};
                     std::vector<uint8_t> bytes(idx.size() * 8);
                     std::memcpy(bytes.data(), idx.data(), bytes.size());
                     b.output(b.gather(b.input("x", DType::kF16, {3, 5}), b.constant("i", DType::kI64, {4}, bytes), 0));
                   }});
  cases.push_back({"gather_elements i64 negative indices", [](GraphBuilder& b) {
                     std::vector<int64_t> idx = {-1, 0, 2, -3, 1, 1};
                     std::vector<uint8_t> bytes(idx.size() * 8);
                     std::memcpy(bytes.data(), idx.data(), bytes.size());
                     auto i = b.constant("i", DType::kI64, {2, 3}, bytes);
                     b.output(b.gather_elements(b.input("x", DType::kF16, {3, 5}), i, 0));
                     b.output(b.gather_elements(b.input("y", DType::kI32, {2, 4}), i, -1));
                   }});
  cases.push_back({"gather_nd scatter_nd top_k", [](GraphBuilder& b) {
                     auto i64_const = [&](const char* name, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
                       std::vector<uint8_t> bytes(v.size() * 8);
                       std::memcpy(bytes.data(), v.data(), bytes.size());
                       return b.constant(name, DType::kI64, ir::Shape(std::move(shape)), bytes);
                     };
                     auto x = b.input("x", DType::kF32, {3, 4, 5});
                     b.output(b.gather_nd(x, i64_const("g", {2, 2}, {-1, 0, 2, 3}), 0));
                     b.output(b.gather_nd(x, i64_const("gb", {3, 2, 1}, {0, 3, -1, 1, 2, 2}), 1));
                     // duplicate rows: the updates reduce in index order
                     auto idx = i64_const("s", {4, 2}, {0, 1, 2, 3, 0, 1, -3, -4});
                     b.output(b.scatter_nd(x, idx, b.input("u", DType::kF32, {4, 5}), "add"));
                     b.output(b.scatter_nd(b.input("h", DType::kF16, {3, 4, 5}), idx, b.input("uh", DType::kF16, {4, 5}), "max"));
                     b.output(b.scatter_nd(b.input("n", DType::kI32, {3, 4, 5}), idx, b.input("un", DType::kI32, {4, 5})));
                     for (ValueId v : b.top_k(x, 3, 1, true)) b.output(v);
                     for (ValueId v : b.top_k(b.input("t", DType::kI32, {2, 9}), 4, -1, false)) b.output(v);
                   }});
  cases.push_back({"view copy of an input", [](GraphBuilder& b) {
                     b.output(b.reshape(b.input("x", DType::kF32, {4, 6}), {2, 12}));
                   }});
  cases.push_back({"kv cache state ops", [](GraphBuilder& b) {
                     b.handle("cache", DType::kF16, {2, 8, 4});
                     auto v = b.input("v", DType::kF16, {2, 3, 4});
                     auto pos = b.input("pos", DType::kI64, {});
                     b.op(ir::OpKind::kWriteHandleAt, {v, pos}, {{"handle", "cache"}, {"axis", 1}});
                     b.handle("whole", DType::kI32, {5});
                     b.op(ir::OpKind::kWriteHandle, {b.input("w", DType::kI32, {5})}, {{"handle", "whole"}});
                     b.output(b.op1(ir::OpKind::kReadHandle, {}, {{"handle", "whole"}}));
                   }, 0, 0, 0, 9});
  return cases;
}

std::vector<Case> reduction_cases() {
  std::vector<Case> cases;
  for (DType d : kFloats) {
    const std::string s = dn(d);
    cases.push_back({"reduce sum mean max " + s, [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {3, 50, 4});
                       b.output(b.reduce_sum(x, {1}));
                       b.output(b.reduce_mean(x, {0, 2}, false));
                       b.output(b.reduce_max(x, {}));
                       b.output(b.reduce_sum(x, {-1}, false));
                     }, tol(d, 1e-6), tol(d, 1e-6)});
    cases.push_back({"arg max min " + s, [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {3, 50, 4});
                       b.output(b.arg_max(x, 1));
                       b.output(b.arg_min(x, -1, false, true));
                     }});
    cases.push_back({"softmax " + s, [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {4, 70});
                       b.output(b.softmax(x, -1));
                       b.output(b.softmax(b.input("y", d, {3, 5, 2}), 1));
                     }, tol(d, 1e-6), tol(d, 1e-7)});
    cases.push_back({"layer norm " + s, [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {3, 4, 16});
                       b.output(b.layer_norm(x, b.input("s", d, {4, 16}), b.input("b", d, {4, 16}), 1));
                       b.output(b.layer_norm(b.input("y", d, {5, 8}), b.input("s2", d, {8}), std::nullopt));
                     }, tol(d, 1e-5), tol(d, 1e-5)});
    cases.push_back({"batch norm and global avg pool " + s, [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {2, 3, 5, 7});
                       b.output(b.batch_norm(x, b.input("s", d, {3}), b.input("b", d, {3}), b.input("m", d, {3}),
                                             b.abs(b.input("v", d, {3})), 1e-3));
                       b.output(b.global_avg_pool(x));
                     }, tol(d, 1e-5), tol(d, 1e-5)});
  }
  for (DType d : kFloats) {
    cases.push_back({"reduce prod " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {3, 50, 4});
                       b.output(b.op1(ir::OpKind::kReduceProd, {x}, {{"axes", std::vector<int64_t>{1}}}));
                       b.output(b.op1(ir::OpKind::kReduceProd, {x}, {{"axes", std::vector<int64_t>{2}}}));
                     }, tol(d, 1e-5), tol(d, 1e-30), 0.9, 1.1});
  }
  for (DType d : {DType::kI32, DType::kI8, DType::kI16, DType::kU16, DType::kU32, DType::kU64}) {
    cases.push_back({"integer reduce sum max prod " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {3, 40});
                       b.output(b.reduce_sum(x, {1}));
                       b.output(b.reduce_max(x, {0}));
                       b.output(b.op1(ir::OpKind::kReduceProd, {x}, {{"axes", std::vector<int64_t>{1}}}));
                       b.output(b.arg_max(x, 1, true, true));  // ties: values from [-100, 100]
                       b.output(b.arg_min(x, 0));
                     }, 0, 0, -100, 100});
  }
  return cases;
}

std::vector<Case> pool_cases() {
  std::vector<Case> cases;
  for (DType d : {DType::kF32, DType::kF16, DType::kBf16, DType::kF64}) {
    cases.push_back({"pools " + dn(d), [d](GraphBuilder& b) {
                       auto x = b.input("x", d, {2, 3, 9, 8});
                       ir::PoolOptions o;
                       o.kernel = {3, 2};
                       o.strides = {2, 2};
                       o.pads = {1, 0, 1, 1};
                       b.output(b.max_pool(x, o));
                       b.output(b.avg_pool(x, o));
                       o.ceil_mode = true;
                       o.count_include_pad = true;
                       b.output(b.avg_pool(x, o));
                     }, tol(d, 1e-6), tol(d, 1e-6)});
  }
  cases.push_back({"max pool i8", [](GraphBuilder& b) {
                     ir::PoolOptions o;
                     o.kernel = {2, 2};
                     b.output(b.max_pool(b.input("x", DType::kI8, {1, 2, 5, 5}), o));
                   }, 0, 0, -100, 100});
  return cases;
}

std::vector<Case> matmul_cases() {
  std::vector<Case> cases;
  for (DType d : kFloats) {
    const std::string s = dn(d);
    const double t = d == DType::kF32 ? 1e-5 : tol(d);
    cases.push_back({"matmul bias relu " + s, [d](GraphBuilder& b) {
                       auto y = b.matmul(b.input("a", d, {70, 33}), b.input("w", d, {33, 65}));
                       b.output(b.relu(b.add(y, b.input("bias", d, {65}))));
                     }, t, t});
    cases.push_back({"matmul batched broadcast " + s, [d](GraphBuilder& b) {
                       b.output(b.matmul(b.input("a", d, {2, 1, 5, 7}), b.input("b", d, {3, 7, 4})));
                       b.output(b.matmul(b.input("v", d, {7}), b.input("m", d, {2, 7, 3})));
                       b.output(b.matmul(b.input("m2", d, {4, 7}), b.input("u", d, {7})));
                     }, t, t});
    cases.push_back({"gemm " + s, [d](GraphBuilder& b) {
                       b.output(b.gemm(b.input("a", d, {9, 5}), b.input("b", d, {6, 9}), b.input("c", d, {6}), true, true, 0.5, 2.0));
                       b.output(b.gemm(b.input("a2", d, {4, 3}), b.input("b2", d, {3, 2})));
                     }, t, t});
  }
  for (DType d : {DType::kI32, DType::kI8, DType::kI64, DType::kU8}) {
    cases.push_back({"integer matmul and gemm " + dn(d), [d](GraphBuilder& b) {
                       b.output(b.matmul(b.input("a", d, {5, 20}), b.input("b", d, {20, 3})));
                       b.output(b.gemm(b.input("a2", d, {4, 3}), b.input("b2", d, {3, 2}), b.input("c", d, {4, 1})));
                       b.output(b.gemm(b.input("a3", d, {4, 3}), b.input("b3", d, {3, 2}), b.input("c3", d, {2}), false, false, 3.0, -1.0));
                     }, 0, 0, -20, 20});
  }
  // ONNX QLinearMatMul as the importer lowers it: u8 operands widened to i32 minus their
  // zero points, an i32 matmul, then requantized in f32 (a multiplier of 1/16 makes ties:
  // round is half to even) and saturated to u8.
  cases.push_back({"quantized matmul requantized to u8", [](GraphBuilder& b) {
                     auto f32_scalar = [&b](std::string name, float v) {
                       std::vector<uint8_t> bytes(sizeof v);
                       std::memcpy(bytes.data(), &v, sizeof v);
                       return b.constant(std::move(name), DType::kF32, {}, bytes);
                     };
                     auto shifted = [&b](ValueId x, ValueId zp) {
                       return b.sub(b.cast(x, DType::kI32), b.cast(zp, DType::kI32));
                     };
                     auto a = shifted(b.input("a", DType::kU8, {6, 40}), b.input("az", DType::kU8, {}));
                     auto w = shifted(b.input("w", DType::kU8, {40, 5}), b.input("wz", DType::kU8, {}));
                     auto acc = b.cast(b.matmul(a, w), DType::kF32);
                     auto v = b.add(b.op1(ir::OpKind::kRound, {b.mul(acc, f32_scalar("m", 0.0625f))}), f32_scalar("yz", 128.f));
                     b.output(b.cast(b.clip(v, 0, 255), DType::kU8));
                   }, 0, 0, 0, 40});
  return cases;
}

std::vector<Case> conv_cases() {
  std::vector<Case> cases;
  for (DType d : kFloats) {
    const std::string s = dn(d);
    const double t = d == DType::kF32 ? 1e-5 : tol(d);
    cases.push_back({"conv2d bias epilogue " + s, [d](GraphBuilder& b) {
                       ir::Conv2dOptions o;
                       o.strides = {2, 1};
                       o.pads = {1, 2, 0, 1};
                       o.dilations = {1, 2};
                       auto y = b.conv2d(b.input("x", d, {2, 4, 9, 10}), b.input("w", d, {6, 4, 3, 3}), b.input("b", d, {6}), o);
                       b.output(b.relu(b.add(y, b.input("r", d, {6, 1, 1}))));
                     }, t, t});
    cases.push_back({"conv2d grouped and depthwise " + s, [d](GraphBuilder& b) {
                       ir::Conv2dOptions g;
                       g.groups = 2;
                       g.pads = {1, 1, 1, 1};
                       b.output(b.conv2d(b.input("x", d, {1, 4, 6, 6}), b.input("w", d, {6, 2, 3, 3}), std::nullopt, g));
                       ir::Conv2dOptions dw;
                       dw.groups = 4;
                       dw.strides = {2, 2};
                       dw.pads = {1, 1, 1, 1};
                       b.output(b.conv2d(b.input("x2", d, {2, 4, 7, 7}), b.input("w2", d, {8, 1, 3, 3}), b.input("b2", d, {8}), dw));
                     }, t, t});
  }
  cases.push_back({"conv2d i32", [](GraphBuilder& b) {
                     b.output(b.conv2d(b.input("x", DType::kI32, {1, 2, 5, 5}), b.input("w", DType::kI32, {3, 2, 2, 2}),
                                       b.input("b", DType::kI32, {3})));
                   }, 0, 0, -10, 10});
  return cases;
}

// ---- helpers ----

Result<ir::Graph> build(const Case& c) {
  GraphBuilder b;
  c.build(b);
  return b.build();
}

NvrtcCompiler* shared_nvrtc() {
  static auto nv = NvrtcCompiler::create([&] { NvrtcOptions o; o.disk_cache = false; return o; }());
  return nv.ok() ? nv->get() : nullptr;
}

// Generates and NVRTC-compiles every kernel group of every case; returns the kernel count.
int compile_cases(const std::vector<Case>& cases, std::string_view arch = "sm_90") {
  NvrtcCompiler* nv = shared_nvrtc();
  int kernels = 0;
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto g = build(c);
    REQUIRE_MESSAGE(g.ok(), g.status().to_string());
    auto order = ir::execution_order(*g);
    REQUIRE(order.ok());
    auto groups = form_kernel_groups(*g, *order, c.fusion);
    REQUIRE_MESSAGE(groups.ok(), groups.status().to_string());
    std::vector<KernelGroup> all = *groups;
    // Views the runtime may need as copies (make_single_node_group) are covered too.
    for (const ir::Node& n : g->nodes) {
      if (ir::is_view(n.op)) {
        auto single = make_single_node_group(*g, n.id);
        REQUIRE(single.ok());
        all.push_back(*single);
      }
    }
    for (const KernelGroup& k : all) {
      CAPTURE(k.name);
      auto src = generate_kernel(*g, k);
      REQUIRE_MESSAGE(src.ok(), src.status().to_string());
      CHECK(src->num_params == static_cast<int>(k.operands.size()));
      CHECK(src->launch.grid[0] >= 1);
      CHECK(src->launch.block[0] >= 32);
      CHECK(src->source.find("extern \"C\" __global__") != std::string::npos);
      CHECK(src->source.find("#include") == std::string::npos);
      if (nv != nullptr) {
        auto bin = nv->compile(src->source, arch);
        CHECK_MESSAGE(bin.ok(), bin.status().to_string() << "\n--- source ---\n" << src->source);
      }
      ++kernels;
    }
  }
  return kernels;
}

[[maybe_unused]] void run_nvrtc_family(const std::vector<Case>& cases, const char* family) {
  if (shared_nvrtc() == nullptr) {
    compile_cases(cases);  // codegen still checked
    carve::test::skip("no NVRTC: " + nvrtc_status().message());
    return;
  }
  const int n = compile_cases(cases);
  MESSAGE(std::string(family) << ": " << n << " kernels compiled by NVRTC for sm_90");
  CHECK(n >= static_cast<int>(cases.size()));
}

// Random inputs; for integer/bool dtypes values are integers in [lo, hi].
HostTensor random_tensor(std::mt19937_64& rng, const ir::TensorType& t, double lo, double hi) {
  const int64_t n = t.shape.num_elements().value();
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& x : v) {
    x = u(rng);
    if (!ir::is_float(t.dtype)) x = std::round(x);
    if (t.dtype == DType::kBool) x = x > (lo + hi) / 2 ? 1 : 0;
    if (t.dtype == DType::kU8 && x < 0) x = -x;
  }
  return HostTensor::from_doubles(t.dtype, t.shape, v);
}

std::string compare(const HostTensor& got, const HostTensor& want, double rtol, double atol) {
  if (got.type != want.type) return "type " + got.type.to_string() + " vs " + want.type.to_string();
  const std::vector<double> a = got.to_doubles(), e = want.to_doubles();
  if (!ir::is_float(want.type.dtype) || (rtol == 0 && atol == 0)) {
    if (got.bytes == want.bytes) return "";
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = (std::isnan(a[i]) && std::isnan(e[i])) || a[i] == e[i] ||
                    (ir::is_float(want.type.dtype) && std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]));
    if (!ok) return "element " + std::to_string(i) + ": got " + std::to_string(a[i]) + ", want " + std::to_string(e[i]);
  }
  return "";
}

// Runs a graph on the GPU: inputs in graph-input order, handles by name (run_graph's contract).
using GpuRunner = std::function<Result<std::vector<HostTensor>>(const ir::Graph&, std::span<const HostTensor>,
                                                                ReferenceHandles*)>;

void run_gpu_family(const std::vector<Case>& cases,
                    const GpuRunner& runner = [](const ir::Graph& g, std::span<const HostTensor> in,
                                                 ReferenceHandles* h) { return run_graph(g, in, h); }) {
  Status s = driver_status();
  if (!s.ok()) {
    carve::test::skip(s.message());
    return;
  }
  std::mt19937_64 rng(1234);
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto g = build(c);
    REQUIRE(g.ok());
    std::vector<HostTensor> inputs;
    for (const ir::Value& v : g->values) {
      if (v.kind == ir::ValueKind::kInput) {
        HostTensor t = random_tensor(rng, v.type, c.lo, c.hi);
        if (v.name == "pos") t = HostTensor::scalar<int64_t>(4);  // in range: rows 4..6 of 8
        inputs.push_back(std::move(t));
      }
    }
    ReferenceHandles ref_handles, gpu_handles;
    for (const ir::Handle& h : g->handles) {
      ref_handles[h.name] = *HostTensor::zeros(h.type);
      gpu_handles[h.name] = *HostTensor::zeros(h.type);
    }
    auto want = run_reference(*g, inputs, &ref_handles);
    REQUIRE_MESSAGE(want.ok(), want.status().to_string());
    auto got = runner(*g, inputs, &gpu_handles);
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    REQUIRE(got->size() == want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      CAPTURE(i);
      CHECK_MESSAGE(compare((*got)[i], (*want)[i], c.rtol, c.atol) == "", compare((*got)[i], (*want)[i], c.rtol, c.atol));
    }
    for (const auto& [name, t] : ref_handles) {
      CAPTURE(name);
      CHECK(compare(gpu_handles[name], t, 0, 0) == "");
    }
  }
}

}  // namespace
}  // namespace carve::jit::cuda
