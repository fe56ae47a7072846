// The JIT's vectorisable float math (jit/llvm/emit_vmath.cpp) against double references,
// in ulps of the float result: exp, log, tanh, erf, sigmoid, silu, gelu as f32 kernels
// (one-op graphs through run_jit, so the code under test is the vectorised loop the
// runtime runs, tail included).
//
// Inputs: every 256th float bit pattern (2^24 values spanning both signs, subnormals to
// NaN) plus the edge cases (+-0, +-inf, NaNs, the smallest subnormal, FLT_MIN, FLT_MAX,
// each function's overflow/underflow thresholds and branch points, with neighbours).
// CARVE_VMATH_EXHAUSTIVE=1 sweeps all 2^32 floats instead (minutes; how the bounds in
// emit_vmath.cpp were measured).
//
// The references are accurate in double where the ops' textbook formulas are not
// (sigmoid from e^-|x|, gelu from erfc), so the bounds are about the float code alone.
#include <doctest/doctest.h>

#include <cfloat>
#include <cstdlib>
#include <functional>

#include "engine_test_util.h"

namespace carve::jit::jittest {
namespace {

struct MathCase {
  OpKind op;
  double max_ulp;        // bound for normal (or zero/inf) results
  double subnormal_abs;  // bound on |error| where the reference is subnormal (0: ulp bound)
  std::function<double(double)> ref;
};

double sigmoid_ref(double x) {
  double e = std::exp(-std::fabs(x));
  return (x >= 0 ? 1.0 : e) / (1.0 + e);
}

const std::vector<MathCase>& cases() {
  static const std::vector<MathCase> c = {
      {OpKind::kExp, 1, 0, [](double x) { return std::exp(x); }},
      {OpKind::kLog, 1, 0, [](double x) { return std::log(x); }},
      {OpKind::kTanh, 2, 0, [](double x) { return std::tanh(x); }},
      {OpKind::kErf, 2, 0, [](double x) { return std::erf(x); }},
      {OpKind::kSigmoid, 2, 0, sigmoid_ref},
      {OpKind::kSilu, 3, 0, [](double x) { return std::isinf(x) && x < 0 ? NAN : x * sigmoid_ref(x); }},
      {OpKind::kGelu, 6, 0x1p-140,
       [](double x) { return std::isinf(x) && x < 0 ? NAN : 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }},
  };
  return c;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> edge_cases() {
  std::vector<float> base = {0.0f, 1.0f, 0.5f, 2.0f, FLT_MIN, FLT_MAX, FLT_TRUE_MIN, 1e-30f, 1e-8f,
                             88.7228317f, 88.7228394f, 87.3365479f, 103.972076f, 104.0f, 89.0f,
                             0.625f, 0.921875f, 9.1f, 10.5f, 15.0f, 14.8f, 3.9f, 5.5f, 0.3f,
                             0.70710677f, 1.41421354f, 170.0f, 100.0f, 1e10f};
  std::vector<float> v;
  for (float b : base) {
    for (float s : {b, -b}) {
      v.push_back(s);
      v.push_back(std::nextafter(s, INFINITY));
      v.push_back(std::nextafter(s, -INFINITY));
    }
  }
  for (float f : {INFINITY, -INFINITY, NAN, -NAN, from_bits(0x7f800001u), from_bits(0xffc00001u)}) v.push_back(f);
  return v;
}

// Error of `got` in ulps of the reference's float rounding (inf: 2^128 for the count).
double ulp_error(float got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isnan(got)) return INFINITY;
  float rf = static_cast<float>(ref);  // beyond FLT_MAX's rounding range: must be inf
  if (std::isinf(rf)) return got == rf ? 0 : INFINITY;
  double g = std::isinf(got) ? std::copysign(0x1p128, got) : got;
  double r = std::isinf(ref) ? std::copysign(0x1p128, ref) : ref;
  if (g == r) return 0;
  int e = r == 0 ? -126 : std::max(std::ilogb(r), -126);
  return std::fabs(g - r) / std::ldexp(1.0, e - 23);
}

struct Worst {
  double ulp = 0;
  float x = 0;
  float got = 0;
  double ref = 0;
  int64_t failures = 0;
};

// Runs `op` on `xs` through the JIT and folds the errors into `worst`.
void sweep(JitCompiler& jit, const MathCase& mc, const std::vector<float>& xs, Worst& worst) {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {static_cast<int64_t>(xs.size())});
  b.output(b.op1(mc.op, {x}, {}, "f"));
  auto g = b.build();
  REQUIRE(g.ok());
  auto out = run_jit(jit, *g, {HostTensor::from<float>(Shape{static_cast<int64_t>(xs.size())}, xs)});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  std::vector<float> ys = (*out)[0].as<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    double ref = mc.ref(xs[i]);
    double err = ulp_error(ys[i], ref);
    bool sub = mc.subnormal_abs > 0 && std::fabs(ref) < 0x1p-126;
    bool ok = sub ? std::fabs(static_cast<double>(ys[i]) - ref) <= mc.subnormal_abs : err <= mc.max_ulp;
    if (!ok && worst.failures++ < 5) {
      MESSAGE(fmt::format("{}({:a}) = {:a}, reference {:a}: {} ulp", ir::op_name(mc.op), xs[i], ys[i], ref, err));
    }
    if (!sub && err > worst.ulp) worst = Worst{err, xs[i], ys[i], ref, worst.failures};
  }
}

void check_math(OpKind op) {
  if (skip_without_jit()) return;
  const MathCase* mc = nullptr;
  for (const MathCase& c : cases()) mc = c.op == op ? &c : mc;
  REQUIRE(mc != nullptr);
  const char* all = std::getenv("CARVE_VMATH_EXHAUSTIVE");
  const bool exhaustive = all != nullptr && std::string(all) == "1";
  const uint64_t stride = exhaustive ? 1 : 256;
  const uint64_t chunk = uint64_t{1} << 24;
  Worst worst;
  sweep(*shared_jit(), *mc, edge_cases(), worst);
  std::vector<float> xs;
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += chunk * stride) {
    xs.clear();
    for (uint64_t i = 0; i < chunk; ++i) xs.push_back(from_bits(static_cast<uint32_t>(start + i * stride + 37 % stride)));
    sweep(*shared_jit(), *mc, xs, worst);
  }
  MESSAGE(fmt::format("{}: max {:.3f} ulp at {:a} (got {:a}, reference {:a}); bound {}", ir::op_name(op), worst.ulp,
                      worst.x, worst.got, worst.ref, mc->max_ulp));
  CHECK(worst.failures == 0);
}

// Softmax's exp of non-positive arguments (exp_nonpos_f32), through softmax rows of 17:
// [0, x repeated 16 times], so one vector and the scalar tail both run it. y = e^x / (1 +
// 16 e^x) within 4 ulp (exp 1 ulp, the sum, 1 / sum and the product); where e^x < 2^-126
// the kernel flushes it to 0 (absolute error below 2^-126).
struct SoftmaxWorst {
  double ulp = 0;
  int64_t failures = 0;
};

void softmax_exp_sweep(const std::vector<float>& xs, SoftmaxWorst& worst) {
  const int64_t rows = static_cast<int64_t>(xs.size()), len = 17;
  std::vector<float> in(static_cast<size_t>(rows * len));
  for (int64_t r = 0; r < rows; ++r) {
    in[static_cast<size_t>(r * len)] = 0.0f;
    for (int64_t k = 1; k < len; ++k) in[static_cast<size_t>(r * len + k)] = xs[static_cast<size_t>(r)];
  }
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {rows, len});
  b.output(b.softmax(x));
  auto g = b.build();
  REQUIRE(g.ok());
  auto out = run_jit(*shared_jit(), *g, {HostTensor::from<float>(Shape{rows, len}, in)});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  std::vector<float> ys = (*out)[0].as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const double xd = xs[static_cast<size_t>(r)];
    const double e = std::exp(xd);
    for (int64_t k = 0; k < len; ++k) {
      const double ref = std::isnan(xd) ? NAN : (k == 0 ? 1.0 : e) / (1.0 + 16.0 * e);
      const float got = ys[static_cast<size_t>(r * len + k)];
      const bool flushed = k > 0 && e < 0x1p-126;
      const double err = ulp_error(got, ref);
      const bool ok = flushed ? std::fabs(static_cast<double>(got) - ref) < 0x1p-126 : err <= 4;
      if (!ok && worst.failures++ < 5) {
        MESSAGE(fmt::format("softmax row [0, {:a} x16]: {} = {:a}, reference {:a}", xd, k, got, ref));
      }
      if (!flushed) worst.ulp = std::max(worst.ulp, err);
    }
  }
}

void check_softmax_exp(uint64_t stride) {
  SoftmaxWorst worst;
  std::vector<float> xs;
  for (float e : edge_cases()) {
    if (!(e > 0)) xs.push_back(e);  // <= 0, -inf, NaN
  }
  softmax_exp_sweep(xs, worst);
  // Negative floats down to -105 (below, e^x underflows to 0 even in subnormals).
  const uint64_t chunk = uint64_t{1} << 20;
  xs.clear();
  for (uint64_t bits = 0x80000000u; bits <= 0xc2d20000u; bits += stride) {
    xs.push_back(from_bits(static_cast<uint32_t>(bits)));
    if (xs.size() == chunk) {
      softmax_exp_sweep(xs, worst);
      xs.clear();
    }
  }
  if (!xs.empty()) softmax_exp_sweep(xs, worst);
  MESSAGE(fmt::format("softmax exp: max {:.3f} ulp; bound 4", worst.ulp));
  CHECK(worst.failures == 0);
}

}  // namespace

TEST_CASE("jit/vmath/softmax exp of non-positive arguments within 4 ulp") {
  if (skip_without_jit()) return;
  const char* all = std::getenv("CARVE_VMATH_EXHAUSTIVE");
  check_softmax_exp(all != nullptr && std::string(all) == "1" ? 1 : 1024);
}
TEST_CASE("jit/vmath/exp f32 within 1 ulp") { check_math(OpKind::kExp); }
TEST_CASE("jit/vmath/log f32 within 1 ulp") { check_math(OpKind::kLog); }
TEST_CASE("jit/vmath/tanh f32 within 2 ulp") { check_math(OpKind::kTanh); }
TEST_CASE("jit/vmath/erf f32 within 2 ulp") { check_math(OpKind::kErf); }
TEST_CASE("jit/vmath/sigmoid f32 within 2 ulp") { check_math(OpKind::kSigmoid); }
TEST_CASE("jit/vmath/silu f32 within 3 ulp") { check_math(OpKind::kSilu); }
TEST_CASE("jit/vmath/gelu f32 within 6 ulp") { check_math(OpKind::kGelu); }

}  // namespace carve::jit::jittest
