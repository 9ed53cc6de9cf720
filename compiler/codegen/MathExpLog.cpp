// exp, log and tanh in the dtype's own precision (Math.h). The constants are
// MathCoefficients.h's, made by tools/math_coefficients.py.
#include "codegen/Math.h"
#include "codegen/MathCoefficients.h"

#include <cmath>
#include <limits>

namespace shmapc::codegen::math {

namespace {

template <size_t N> llvm::ArrayRef<double> coeffs(const float (&c)[N], std::vector<double> &store) {
  store.assign(c, c + N);
  return store;
}

llvm::ArrayRef<double> expPoly(Ops &o, std::vector<double> &store) {
  if (o.single) return coeffs(kExpPolyF32, store);
  return kExpPolyF64;
}

// exp(x + lo) for x already within [lo, hi] of exp() below (or NaN) and |lo| below an ulp of x
// (or null): x = k ln2 + r with |r| <= ln2/2, r = hi + lo exactly (k ln2's high part is exact
// and x - k * hi cancels exactly), exp(r) = 1 + r + r^2 P(r) with 1 + hi kept exact until the
// last addition; times 2^k.
// `normal`: x is known to lie where exp(x) and 2^k are normal (tanh's 2|x| <= 2 * 9.25), so one
// scaling does what scaleBy2's two do, with the same bits.
// `exact` false (lo null): r = (x - k ln2hi) - k ln2lo rounded once and 1 + (r + r^2 P(r)),
// without the error-free steps: 8 additions fewer a vector, for f32 tanh (below), whose largest
// error does not move.
llvm::Value *expOfClamped(Ops &o, llvm::Value *x, llvm::Value *lo, bool normal = false, bool exact = true) {
  const double log2e = o.single ? (double)kLog2eF32[0] : kLog2eF64[0];
  const double ln2hi = o.single ? (double)kLn2PartsF32[0] : kLn2PartsF64[0];
  const double ln2lo = o.single ? (double)kLn2PartsF32[1] : kLn2PartsF64[1];
  llvm::Value *k;
  llvm::Value *kf = o.roundToInt(o.mul(x, o.c(log2e)), &k);
  llvm::Value *reduced = o.sub(x, o.mul(kf, o.c(ln2hi)));
  std::vector<double> store;
  llvm::Value *e;
  if (exact) {
    llvm::Value *rhi, *rlo, *one, *oneErr;
    o.twoSum(reduced, o.neg(o.mul(kf, o.c(ln2lo))), rhi, rlo);
    if (lo) o.twoSum(rhi, o.add(rlo, lo), rhi, rlo);  // r = hi + lo again, now with lo's part
    llvm::Value *p = o.horner(rhi, expPoly(o, store));
    o.fastTwoSum(o.c(1.0), rhi, one, oneErr);  // (|hi| <= ln2/2 < 1)
    e = o.add(one, o.add(oneErr, o.add(rlo, o.mul(o.mul(rhi, rhi), p))));
  } else {
    llvm::Value *r = o.sub(reduced, o.mul(kf, o.c(ln2lo)));
    llvm::Value *p = o.horner(r, expPoly(o, store));
    e = o.add(o.c(1.0), o.add(r, o.mul(o.mul(r, r), p)));
  }
  return normal ? o.scaleBy2Normal(e, k) : o.scaleBy2(e, k);
}

} // namespace

// Below lo the result rounds to 0, above hi it is infinite; clamping there keeps k within the
// exponent's range (and NaN passes through the ordered compares).
llvm::Value *exp(Ops &o, llvm::Value *x, llvm::Value *lo) {
  const double min = o.single ? -104.0 : -746.0, max = o.single ? 89.0 : 710.0;
  llvm::Value *xc = o.select(o.lt(x, o.c(min)), o.c(min), x);
  xc = o.select(o.gt(xc, o.c(max)), o.c(max), xc);
  return expOfClamped(o, xc, lo);
}

void splitExponent(Ops &o, llvm::Value *x, llvm::Value *&ef, llvm::Value *&m) {
  llvm::IRBuilder<> &b = o.b;
  const double minNormal = o.single ? (double)std::numeric_limits<float>::min() : std::numeric_limits<double>::min();
  const int up = o.single ? 24 : 54;  // subnormals times 2^up are normal
  llvm::Value *subnormal = o.lt(x, o.c(minNormal));
  llvm::Value *xs = o.select(subnormal, o.mul(x, o.c(std::ldexp(1.0, up))), x);
  llvm::Value *ix = o.bits(xs);
  const int64_t sqrtHalfBits = o.single ? 0x3f3504f3 : 0x3fe6a09e667f3bcdLL;  // sqrt(1/2) rounded
  llvm::Value *e = b.CreateAShr(b.CreateSub(ix, o.ci(sqrtHalfBits)), o.ci(o.mantissaBits));
  m = o.fromBits(b.CreateSub(ix, b.CreateShl(e, o.ci(o.mantissaBits))));
  ef = b.CreateSIToFP(b.CreateSub(e, o.select(subnormal, o.ci(up), o.ci(0))), o.t);
}

// x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f):
// log(x) = e ln2 + f - (f^2/2 - s (f^2/2 + R(s^2))), R(z) = 2z/3 + 2z^2/5 + ... (fitted).
llvm::Value *log(Ops &o, llvm::Value *x) {
  llvm::Value *ef, *m;
  splitExponent(o, x, ef, m);
  llvm::Value *f = o.sub(m, o.c(1.0));
  llvm::Value *s = o.div(f, o.add(o.c(2.0), f));
  llvm::Value *z = o.mul(s, s);
  std::vector<double> store;
  llvm::ArrayRef<double> poly = o.single ? coeffs(kLogPolyF32, store) : llvm::ArrayRef<double>(kLogPolyF64);
  llvm::Value *R = o.mul(z, o.horner(z, poly));
  llvm::Value *hfsq = o.mul(o.c(0.5), o.mul(f, f));
  const double ln2hi = o.single ? (double)kLn2PartsF32[0] : kLn2PartsF64[0];
  const double ln2lo = o.single ? (double)kLn2PartsF32[1] : kLn2PartsF64[1];
  llvm::Value *tail = o.add(o.mul(s, o.add(hfsq, R)), o.mul(ef, o.c(ln2lo)));
  llvm::Value *r = o.add(o.mul(ef, o.c(ln2hi)), o.sub(f, o.sub(hfsq, tail)));
  const double inf = std::numeric_limits<double>::infinity();
  r = o.select(o.eq(x, o.c(inf)), o.c(inf), r);
  r = o.select(o.eq(x, o.c(0.0)), o.c(-inf), r);  // also -0, as C's log
  // negative or NaN: NaN (a NaN input is returned as it is)
  r = o.select(o.lt(x, o.c(0.0)), o.c(std::numeric_limits<double>::quiet_NaN()), r);
  return o.select(o.isNan(x), x, r);
}

// |x| < T: x + x^3 Q(x^2) (fitted); otherwise 1 - 2 / (exp(2|x|) + 1) with the sign of x, where
// the subtraction loses less than a bit; beyond the cap tanh rounds to +-1.
llvm::Value *tanh(Ops &o, llvm::Value *x) {
  const double T = 0.625, cap = o.single ? 9.25 : 19.5;
  llvm::Value *a = o.abs(x);
  llvm::Value *w = o.mul(x, x);
  std::vector<double> store;
  llvm::ArrayRef<double> poly = o.single ? coeffs(kTanhPolyF32, store) : llvm::ArrayRef<double>(kTanhPolyF64);
  llvm::Value *small = o.add(x, o.mul(o.mul(x, w), o.horner(w, poly)));
  llvm::Value *ac = o.select(o.gt(a, o.c(cap)), o.c(cap), a);
  // (2|x| as a product: the same bits as |x| + |x|, on the multiplier, where the additions
  // around it leave room)
  llvm::Value *u = o.mul(ac, o.c(2.0));
  // (f32: exp's inexact steps; tanh's 1 - 2 / (exp(u) + 1) scales exp's error by at most 0.45,
  // and its largest error stays its last rounding's: 1.3303 ulp over every f32 of [0.625, 9.25]
  // with the exact steps or without them)
  llvm::Value *e = expOfClamped(o, u, nullptr, /*normal=*/true, /*exact=*/!o.single);
  llvm::Value *large = o.copySign(o.sub(o.c(1.0), o.div(o.c(2.0), o.add(e, o.c(1.0)))), x);
  return o.select(o.lt(a, o.c(T)), small, large);
}

} // namespace shmapc::codegen::math
