// pow in double (f32 pow rounds it once, Math.cpp): |x|^y = exp(y log|x|) where log|x| and
// the product carry about 64 bits (two doubles), since y log|x| up to 745 in magnitude would
// otherwise lose 10 bits of the result; then C99's (and numpy's) special cases.
#include "codegen/Math.h"
#include "codegen/MathCoefficients.h"

#include <limits>

namespace shmapc::codegen::math {

namespace {

// log(a) = hi + lo to about 64 bits for a > 0 finite (log()'s reduction, with s = f / (2 + f)
// and the leading terms carried in two doubles); hi is -inf at 0, +inf at inf, NaN at NaN.
void logTwoDoubles(Ops &o, llvm::Value *a, llvm::Value *&hi, llvm::Value *&lo) {
  llvm::IRBuilder<> &b = o.b;
  llvm::Value *ef, *m;
  splitExponent(o, a, ef, m);
  llvm::Value *f = o.sub(m, o.c(1.0));  // exact
  // s = f / (2 + f) to about 106 bits: the denominator as two doubles, then one correction.
  llvm::Value *den = o.add(o.c(2.0), f);
  llvm::Value *denLo = o.sub(f, o.sub(den, o.c(2.0)));  // exact: |2| > |f|
  llvm::Value *s = o.div(f, den);
  llvm::Value *ph, *pl;
  o.twoProduct(s, den, ph, pl);
  llvm::Value *rem = o.sub(o.sub(o.sub(f, ph), pl), o.mul(s, denLo));
  llvm::Value *sLo = o.div(rem, den);
  // log(1 + f) = 2s + (2/3) s^3 + s z^2 T(z), z = s^2: the first two terms to about 100 bits,
  // the third (below 4e-4 of the result) in double.
  llvm::Value *zh, *zl, *s3h, *s3l, *th, *tl;
  o.twoProduct(s, s, zh, zl);
  o.twoProduct(s, zh, s3h, s3l);
  s3l = o.add(s3l, o.mul(s, zl));
  o.twoProduct(s3h, o.c(kTwoThirds[0]), th, tl);
  tl = o.add(tl, o.add(o.mul(s3h, o.c(kTwoThirds[1])), o.mul(s3l, o.c(kTwoThirds[0]))));
  llvm::Value *tail = o.mul(o.mul(s, o.mul(zh, zh)), o.horner(zh, kLogTailF64));
  // log(a) = e ln2 + 2s + (2/3)s^3 + ...: e * ln2's high part and 2s are exact; the rounding
  // errors of the leading sums are kept and added to the small terms (s's low part enters
  // through 2 sLo and (2/3) 3 s^2 sLo).
  llvm::Value *a1, *a1e, *a2, *a2e;
  o.twoSum(o.mul(ef, o.c(kLn2PartsF64[0])), o.add(s, s), a1, a1e);
  o.twoSum(a1, th, a2, a2e);
  llvm::Value *small = o.add(o.add(o.mul(ef, o.c(kLn2PartsF64[1])), o.add(tail, o.mul(o.add(zh, zh), sLo))),
                             o.add(o.add(sLo, sLo), o.add(tl, o.add(a1e, a2e))));
  o.twoSum(a2, small, hi, lo);
  const double inf = std::numeric_limits<double>::infinity();
  llvm::Value *special = b.CreateOr(b.CreateOr(o.eq(a, o.c(0.0)), o.eq(a, o.c(inf))), o.isNan(a));
  hi = o.select(o.eq(a, o.c(0.0)), o.c(-inf), o.select(o.eq(a, o.c(inf)), o.c(inf), o.select(o.isNan(a), a, hi)));
  lo = o.select(special, o.c(0.0), lo);
}

} // namespace

llvm::Value *powDouble(Ops &o, llvm::Value *x, llvm::Value *y) {
  llvm::IRBuilder<> &b = o.b;
  const double inf = std::numeric_limits<double>::infinity();
  const double two52 = 4503599627370496.0;
  llvm::Value *a = o.abs(x);
  llvm::Value *lh, *ll;
  logTwoDoubles(o, a, lh, ll);
  llvm::Value *ph, *pl;
  o.twoProduct(y, lh, ph, pl);
  pl = o.add(pl, o.mul(y, ll));
  // Where |y log a| is large the result is 0 or inf whatever pl is, and where |y| is huge
  // while the product is not, log a is 0 (a = 1); Dekker's split of a huge or infinite factor
  // would be NaN.
  pl = o.select(b.CreateAnd(o.lt(o.abs(ph), o.c(1024.0)), o.lt(o.abs(y), o.c(0x1p960))), pl, o.c(0.0));
  llvm::Value *r = exp(o, ph, pl);

  // y integer, and odd: |y| < 2^52 rounds exactly by adding 2^52 (whose last bit is then
  // y's); from 2^52 on every double is an integer, odd only below 2^53.
  llvm::Value *ay = o.abs(y);
  llvm::Value *belowTwo52 = o.lt(ay, o.c(two52));
  llvm::Value *shifted = o.add(ay, o.c(two52));
  llvm::Value *isInt = b.CreateOr(b.CreateNot(belowTwo52), o.eq(o.sub(shifted, o.c(two52)), ay));
  isInt = b.CreateAnd(isInt, b.CreateNot(o.isNan(y)));
  llvm::Value *lastBit = b.CreateAnd(o.bits(o.select(belowTwo52, shifted, ay)), o.ci(1));
  llvm::Value *odd = b.CreateAnd(b.CreateAnd(isInt, o.lt(ay, o.c(2 * two52))), b.CreateICmpNE(lastBit, o.ci(0)));
  llvm::Value *negativeBase = b.CreateICmpSLT(o.bits(x), o.ci(0));  // sign bit: -0 and -inf too
  r = o.select(b.CreateAnd(negativeBase, odd), o.neg(r), r);
  // A finite negative base to a non-integer power: NaN.
  llvm::Value *finiteNegative = b.CreateAnd(o.lt(x, o.c(0.0)), o.gt(x, o.c(-inf)));
  r = o.select(b.CreateAnd(finiteNegative, b.CreateNot(isInt)), o.c(std::numeric_limits<double>::quiet_NaN()), r);
  // (+-1)^(+-inf) = 1, 1^y = 1 (also y NaN), x^0 = 1 (also x NaN).
  r = o.select(b.CreateAnd(o.eq(a, o.c(1.0)), o.eq(ay, o.c(inf))), o.c(1.0), r);
  return o.select(b.CreateOr(o.eq(x, o.c(1.0)), o.eq(y, o.c(0.0))), o.c(1.0), r);
}

} // namespace shmapc::codegen::math
