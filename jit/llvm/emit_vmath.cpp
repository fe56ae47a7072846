// Vectorisable float math (emit_util.h, "float math"): exp, log, tanh, erf, sigmoid, silu
// and gelu on f32 scalars or <N x float>, as straight-line IR (FMA-able polynomials,
// integer bit tricks, selects; no calls, no branches), so a loop of them vectorises at
// the host's width and a vector epilogue stays in registers.
//
// Polynomial coefficients are near-minimax fits made by scripts/fit_vmath.py (Lawson's
// algorithm in double, then rounded to float); the fit errors there are below 0.02 ulp,
// so the bounds below come from float rounding in the evaluation. The bounds are
// measured against double references over a dense sweep of every float range
// (tests/jit/vmath_test.cpp asserts them); "ulp" is the result's unit in the last place,
// 2^-149 for subnormal results.
//
//   exp      <= 1 ulp        (0 below -103.97, +inf above 88.72, subnormal results kept)
//   log      <= 1 ulp        (x < 0: NaN, +-0: -inf, +inf: +inf, subnormal inputs exact)
//   tanh     <= 2 ulp
//   erf      <= 2 ulp
//   sigmoid  <= 2 ulp        (subnormal results for x < -87.3 kept)
//   silu     <= 3 ulp        (x * sigmoid(x) rounded once in spirit: no subnormal loss)
//   gelu     <= 6 ulp where |result| >= 2^-126; below, error <= 2^-140 absolute
//
// NaN in gives NaN out; silu(-inf) and gelu(-inf) are NaN (-inf * 0, as the reference
// computes them). Results may differ between hosts with and without FMA (llvm.fmuladd),
// never between runs or thread counts on one host.
#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <initializer_list>

#include "emit_util.h"

namespace carve::jit::detail::util {

using llvm::Type;
using llvm::Value;

namespace {

// ln2 in two parts (Cody-Waite): kLn2Hi has 9 significant bits, so n * kLn2Hi is exact
// for |n| < 2^15 and x - n * kLn2Hi is exact near x.
constexpr double kLn2Hi = 0.693359375;
constexpr double kLn2Lo = -2.12194440e-4;

// Fits (scripts/fit_vmath.py), lowest power first.
// (e^r - 1 - r) / r^2 on [-ln2/2, ln2/2]
constexpr std::initializer_list<double> kExpP = {0.5, 0.166666657, 0.0416662954, 0.00833349675,
                                                 0.00139446498, 0.000197903573};
// (log1p(f) - f + f^2/2) / f^3 on [sqrt(1/2) - 1, sqrt(2) - 1]
constexpr std::initializer_list<double> kLogP = {0.333333135, -0.250000089, 0.200021192,
                                                 -0.166679963, 0.142195508, -0.124055915,
                                                 0.118881747, -0.116756409, 0.0674660131};
// (tanh(x) - x) / x^3 in z = x^2 on [0, 0.625^2]
constexpr std::initializer_list<double> kTanhP = {-0.333333313, 0.133332059, -0.0539467633,
                                                  0.0217007007, -0.00817739498, 0.00214295881};
// erf(x) / x - 1 in z = x^2 on [0, 0.921875^2] (the fit's c0 less 1: x + x * P keeps
// the leading 2/sqrt(pi) - 1 to float precision instead of 2/sqrt(pi)'s rounding)
constexpr std::initializer_list<double> kErfP = {0.1283791670955126, -0.376126349, 0.112837017, -0.0268597025,
                                                 0.00520171598, -0.000814980711, 8.39780187e-05};
// log(erfc(a) / t) + a^2 in u = t - kErfcT0, t = 1 / (1 + a/2), for a in [0.921875, 10.5]
// (centred: smaller terms, less rounding in Horner's steps)
constexpr double kErfcT0 = 0.42224597930908203;
constexpr std::initializer_list<double> kErfcQ = {-0.7750808, 1.30937922, 0.269906193, -0.310390621,
                                                  -0.252763808, 0.194192916, 0.25332585, -0.196118087,
                                                  -0.230190963, 0.206599534};
// erf(a) in u = a - kErfBigC0 on [kErfSplit, kErfBigMax] (absolute error, erf >= 0.8 there);
// erf rounds to 1 above kErfBigMax. One polynomial: no exp, no divide (erf_f32), where
// gelu keeps the erfc form for its relative accuracy on the negative side.
constexpr double kErfBigC0 = 2.4296875;
constexpr double kErfBigMax = 3.9375;
constexpr std::initializer_list<double> kErfBigP = {
    0.999409854, 0.00308068492, -0.00748515688, 0.0110977143, -0.0109864138, 0.00734689878,
    -0.00302238832, 0.000351955183, 0.000437164679, -0.000308684219, 6.9149035e-05, 2.32430939e-05,
    -1.82418898e-05, 2.07905077e-06, 1.23371785e-06, -3.09602939e-07};
// Below this |x|, erf uses x * kErfP(x^2); above, kErfBigP (gelu: erfc).
constexpr double kErfSplit = 0.921875;
constexpr double kErfcMax = 10.5;  // erfc(10.5) < 2^-160: zero in float

Value* poly(EmitContext& ec, Value* x, std::initializer_list<double> c) {
  Type* t = x->getType();
  const double* hi = c.end() - 1;
  Value* p = fpc(t, *hi);
  for (const double* k = hi; k-- != c.begin();) p = mul_add(ec, p, x, fpc(t, *k));
  return p;
}

Value* fabs(EmitContext& ec, Value* x) { return ec.b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
Value* copysign(EmitContext& ec, Value* mag, Value* sign) {
  return ec.b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sign);
}
// Exact fused a*b+c (the hi/lo products below rely on one rounding, unlike fmuladd).
Value* fma(EmitContext& ec, Value* a, Value* b, Value* c) {
  return ec.b.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c});
}
// min(x, hi) and max(x, lo) that keep NaN (so the final NaN select sees it).
Value* min_c(EmitContext& ec, Value* x, double hi) {
  Value* h = fpc(x->getType(), hi);
  return ec.b.CreateSelect(ec.b.CreateFCmpOGT(x, h), h, x);
}
Value* max_c(EmitContext& ec, Value* x, double lo) {
  Value* l = fpc(x->getType(), lo);
  return ec.b.CreateSelect(ec.b.CreateFCmpOLT(x, l), l, x);
}
Value* keep_nan(EmitContext& ec, Value* x, Value* result) {
  return ec.b.CreateSelect(ec.b.CreateFCmpUNO(x, x), x, result);
}
Type* i32_like(EmitContext& ec, Value* x) { return like_shape(ec.b.getInt32Ty(), x->getType()); }

// e^(hi + lo) as p * 2^n, p in [0.70, 1.42], n an i32: hi carries the magnitude (exact),
// lo a small correction (|lo| << 1 relative to the reduced argument's scale), so
// arguments known to more than float precision (a^2 as hi + lo) lose nothing.
struct ExpParts {
  Value* p;
  Value* n;
};

ExpParts exp_parts(EmitContext& ec, Value* hi, Value* lo) {
  auto& b = ec.b;
  Type* t = hi->getType();
  // Clamped so 2^n splits into two normal halves (ldexp2): e^-170 and e^100 already
  // underflow/overflow float.
  Value* h = max_c(ec, min_c(ec, hi, 100.0), -170.0);
  Value* n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {t},
                               {b.CreateFMul(b.CreateFAdd(h, lo), fpc(t, M_LOG2E))});
  n = b.CreateSelect(b.CreateFCmpUNO(n, n), zero(t), n);  // NaN lanes: no poison from fptosi
  Value* r = mul_add(ec, n, fpc(t, -kLn2Hi), h);           // exact
  r = b.CreateFAdd(r, lo);
  r = mul_add(ec, n, fpc(t, -kLn2Lo), r);
  Value* q = mul_add(ec, poly(ec, r, kExpP), b.CreateFMul(r, r), r);
  return {b.CreateFAdd(q, fpc(t, 1.0)), b.CreateFPToSI(n, i32_like(ec, n))};
}

// v * 2^n in two steps (each half a normal power of two), so the result rounds once even
// when it is subnormal or overflows. n in [-252, 254].
Value* ldexp2(EmitContext& ec, Value* v, Value* n) {
  auto& b = ec.b;
  Type* it = n->getType();
  Value* half = b.CreateAShr(n, intc(it, 1));
  Value* rest = b.CreateSub(n, half);
  auto pow2 = [&](Value* e) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, intc(it, 127)), intc(it, 23)), v->getType());
  };
  return b.CreateFMul(b.CreateFMul(v, pow2(half)), pow2(rest));
}

// erfc(a) = m * 2^n for a in [kErfSplit, kErfcMax], given a^2 = h + l exactly.
ExpParts erfc_parts(EmitContext& ec, Value* a, Value* h, Value* l) {
  auto& b = ec.b;
  Type* t = a->getType();
  Value* tt = b.CreateFDiv(fpc(t, 1.0), mul_add(ec, a, fpc(t, 0.5), fpc(t, 1.0)));
  Value* q = poly(ec, b.CreateFSub(tt, fpc(t, kErfcT0)), kErfcQ);
  ExpParts e = exp_parts(ec, b.CreateFNeg(h), b.CreateFSub(q, l));
  return {b.CreateFMul(tt, e.p), e.n};
}

// erf on [0, kErfSplit] (odd: x + x * P(x^2)).
Value* erf_small(EmitContext& ec, Value* x) {
  return mul_add(ec, x, poly(ec, ec.b.CreateFMul(x, x), kErfP), x);
}

// e^-|x| as p * 2^n, and as a float.
struct NegExp {
  ExpParts parts;
  Value* e;
};
NegExp exp_neg_abs(EmitContext& ec, Value* x) {
  ExpParts parts = exp_parts(ec, ec.b.CreateFNeg(fabs(ec, x)), zero(x->getType()));
  return {parts, ldexp2(ec, parts.p, parts.n)};
}

// num / (1 + e) for the sigmoid family (0 <= e <= 1) with 1 + e's rounding error taken
// back out: d + lo = 1 + e exactly (Fast2Sum), num / (d + lo) ~ q - q * lo / d. The
// correction is under an ulp, so 1/d's linear estimate on [1, 2] (within 12%) serves.
// Saves about one ulp of the result.
Value* div_one_plus(EmitContext& ec, Value* num, Value* e) {
  auto& b = ec.b;
  Type* t = e->getType();
  Value* d = b.CreateFAdd(fpc(t, 1.0), e);
  Value* lo = b.CreateFSub(e, b.CreateFSub(d, fpc(t, 1.0)));
  Value* q = b.CreateFDiv(num, d);
  Value* inv_d = mul_add(ec, d, fpc(t, -0.5), fpc(t, 1.5));
  return mul_add(ec, b.CreateFNeg(b.CreateFMul(q, lo)), inv_d, q);
}

}  // namespace

Value* exp_f32(EmitContext& ec, Value* x) {
  ExpParts e = exp_parts(ec, x, zero(x->getType()));
  return keep_nan(ec, x, ldexp2(ec, e.p, e.n));
}

Value* exp_nonpos_f32(EmitContext& ec, Value* x) {
  auto& b = ec.b;
  Type* t = x->getType();
  // ln(2^-126): n = round(x * log2(e)) stays in [-126, 0], so 2^n is one normal power of
  // two and p * 2^n rounds once. Below, and for NaN (ok false), h is the bound (no poison
  // from fptosi); the selects give 0, then NaN back.
  const double lo = -87.3365448;
  Value* ok = b.CreateFCmpOGE(x, fpc(t, lo));
  Value* h = b.CreateSelect(ok, x, fpc(t, lo));
  Value* n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {t}, {b.CreateFMul(h, fpc(t, M_LOG2E))});
  Value* r = mul_add(ec, n, fpc(t, -kLn2Hi), h);
  r = mul_add(ec, n, fpc(t, -kLn2Lo), r);
  Value* p = b.CreateFAdd(mul_add(ec, poly(ec, r, kExpP), b.CreateFMul(r, r), r), fpc(t, 1.0));
  Type* it = i32_like(ec, x);
  Value* scale = b.CreateBitCast(b.CreateShl(b.CreateAdd(b.CreateFPToSI(n, it), intc(it, 127)), intc(it, 23)), t);
  Value* e = b.CreateSelect(ok, b.CreateFMul(p, scale), zero(t));
  return keep_nan(ec, x, e);
}

Value* log_f32(EmitContext& ec, Value* x) {
  auto& b = ec.b;
  Type* t = x->getType();
  Type* it = i32_like(ec, x);
  // Subnormals scaled into the normal range first (exact).
  Value* tiny = b.CreateFCmpOLT(x, fpc(t, 0x1p-126));
  Value* xs = b.CreateSelect(tiny, b.CreateFMul(x, fpc(t, 0x1p23)), x);
  // x = m * 2^k with m in [sqrt(1/2), sqrt(2)): offset the bits by sqrt(1/2)'s.
  Value* ix = b.CreateSub(b.CreateBitCast(xs, it), intc(it, 0x3f3504f3u));
  Value* k = b.CreateAdd(b.CreateAShr(ix, intc(it, 23)), b.CreateSelect(tiny, intc(it, static_cast<uint32_t>(-23)), intc(it, 0)));
  Value* m = b.CreateBitCast(b.CreateAdd(b.CreateAnd(ix, intc(it, 0x7fffff)), intc(it, 0x3f3504f3u)), t);
  Value* f = b.CreateFSub(m, fpc(t, 1.0));  // exact (Sterbenz)
  Value* z = b.CreateFMul(f, f);
  Value* kf = b.CreateSIToFP(k, t);
  Value* y = b.CreateFMul(b.CreateFMul(f, z), poly(ec, f, kLogP));
  y = mul_add(ec, kf, fpc(t, kLn2Lo), y);
  y = mul_add(ec, z, fpc(t, -0.5), y);
  Value* r = mul_add(ec, kf, fpc(t, kLn2Hi), b.CreateFAdd(f, y));
  // Specials: +inf, +-0, negatives (NaN), NaN.
  r = b.CreateSelect(b.CreateFCmpOEQ(x, llvm::ConstantFP::getInfinity(t)), x, r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, zero(t)), llvm::ConstantFP::getInfinity(t, true), r);
  r = b.CreateSelect(b.CreateFCmpOLT(x, zero(t)), llvm::ConstantFP::getNaN(t), r);
  return keep_nan(ec, x, r);
}

Value* tanh_f32(EmitContext& ec, Value* x) {
  auto& b = ec.b;
  Type* t = x->getType();
  Value* a = fabs(ec, x);
  Value* z = b.CreateFMul(x, x);
  Value* small = mul_add(ec, b.CreateFMul(x, z), poly(ec, z, kTanhP), x);
  // 1 - 2 / (e^2a + 1); tanh(9.1) rounds to 1, so larger |x| (inf too) are clamped.
  Value* a2 = b.CreateFMul(min_c(ec, a, 9.1), fpc(t, 2.0));
  ExpParts e = exp_parts(ec, a2, zero(t));
  Value* big = b.CreateFSub(fpc(t, 1.0), b.CreateFDiv(fpc(t, 2.0), b.CreateFAdd(ldexp2(ec, e.p, e.n), fpc(t, 1.0))));
  Value* r = b.CreateSelect(b.CreateFCmpOLT(a, fpc(t, 0.625)), small, copysign(ec, big, x));
  return keep_nan(ec, x, r);
}

Value* erf_f32(EmitContext& ec, Value* x) {
  auto& b = ec.b;
  Type* t = x->getType();
  Value* a = fabs(ec, x);
  Value* big = poly(ec, b.CreateFSub(min_c(ec, a, kErfBigMax), fpc(t, kErfBigC0)), kErfBigP);
  Value* r = b.CreateSelect(b.CreateFCmpOLT(a, fpc(t, kErfSplit)), erf_small(ec, x), copysign(ec, big, x));
  return keep_nan(ec, x, r);
}

Value* sigmoid_f32(EmitContext& ec, Value* x) {
  auto& b = ec.b;
  Type* t = x->getType();
  // 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: e^-|x| never overflows, and small
  // results are the subnormal e^x itself.
  NegExp e = exp_neg_abs(ec, x);
  Value* num = b.CreateSelect(b.CreateFCmpOGE(x, zero(t)), fpc(t, 1.0), e.e);
  return keep_nan(ec, x, div_one_plus(ec, num, e.e));
}

Value* silu_f32(EmitContext& ec, Value* x) {
  auto& b = ec.b;
  Type* t = x->getType();
  // x / (1 + e^-x) for x >= 0, x e^x / (1 + e^x) below, with x * p scaled by 2^n last so
  // a subnormal x e^x rounds once.
  NegExp e = exp_neg_abs(ec, x);
  // Below -120 the result underflows: x is clamped so x * p stays finite.
  Value* neg = ldexp2(ec, b.CreateFMul(max_c(ec, x, -120.0), e.parts.p), e.parts.n);
  Value* num = b.CreateSelect(b.CreateFCmpOGE(x, zero(t)), x, neg);
  Value* r = div_one_plus(ec, num, e.e);
  // +-inf: inf and NaN (-inf * 0), not the correction's inf * 0.
  Value* inf = llvm::ConstantFP::getInfinity(t);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, inf), x, r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, b.CreateFNeg(inf)), llvm::ConstantFP::getNaN(t), r);
  return keep_nan(ec, x, r);
}

Value* gelu_f32(EmitContext& ec, Value* x) {
  auto& b = ec.b;
  Type* t = x->getType();
  // gelu = x/2 * (1 + erf(z)) = x/2 * (2 - erfc(|z|)) for x >= 0 and x/2 * erfc(|z|) below,
  // z = x / sqrt(2): no cancellation on either side. z^2 = x^2 / 2 as an exact hi + lo
  // pair from x, so e^-z^2 does not inherit z's rounding (which grows with z^2).
  Value* hx = b.CreateFMul(x, fpc(t, 0.5));
  Value* a = fabs(ec, b.CreateFMul(x, fpc(t, M_SQRT1_2)));
  Value* xc = max_c(ec, min_c(ec, x, 15.0), -15.0);  // |z| beyond kErfcMax: erfc is 0
  Value* h = b.CreateFMul(b.CreateFMul(xc, xc), fpc(t, 0.5));
  Value* l = b.CreateFMul(fma(ec, xc, xc, b.CreateFNeg(b.CreateFMul(xc, xc))), fpc(t, 0.5));
  ExpParts c = erfc_parts(ec, min_c(ec, a, kErfcMax), h, l);
  Value* small = b.CreateFCmpOLT(a, fpc(t, kErfSplit));
  Value* m = b.CreateSelect(small, b.CreateFSub(fpc(t, 1.0), erf_small(ec, a)), c.p);
  Value* n = b.CreateSelect(small, zero(c.n->getType()), c.n);
  Value* pos = b.CreateFMul(hx, b.CreateFSub(fpc(t, 2.0), ldexp2(ec, m, n)));
  Value* neg = ldexp2(ec, b.CreateFMul(b.CreateFMul(xc, fpc(t, 0.5)), m), n);
  Value* r = b.CreateSelect(b.CreateFCmpOGE(x, zero(t)), pos, neg);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, llvm::ConstantFP::getInfinity(t, true)), llvm::ConstantFP::getNaN(t), r);
  return keep_nan(ec, x, r);
}

}  // namespace carve::jit::detail::util
