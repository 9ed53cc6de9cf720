// Element-wise binary arithmetic: add, sub, mul, div, floor_div, rem, max, min, pow, and, or.
// Operands have identical shapes (sema inserts broadcast_in_dim) and are fused into loops.
//
// Division and remainder follow numpy (floor division; the remainder has the divisor's sign),
// for floats too. Integer division and remainder never trap: by zero they give 0 (as numpy),
// and INT_MIN // -1 gives INT_MIN (the wrapped quotient, as numpy). maximum / minimum
// propagate NaN as numpy's do. i32 pow is computed in double precision (exact for every i32
// result) and converted back with saturation; i64 pow is exact integer arithmetic, wrapping. Bool arithmetic is arithmetic mod 2 clamped to {0, 1}: + is or, * is and.
#include "prims/Prim.h"

#include <llvm/IR/Intrinsics.h>

namespace shmapc::prims {

namespace {

// Floor division and its remainder (numpy's // and %). The C quotient truncates; where the
// C remainder is nonzero and its sign differs from the divisor's, the floor quotient is one
// less and the floor remainder is r + y. A safe divisor (1) is selected first so the division
// never traps: for y == 0 the result is then replaced by 0; for INT_MIN / -1 dividing by 1
// gives INT_MIN and remainder 0, which is what numpy gives. Branch-free, so loops vectorize.
llvm::Value *intDivRem(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y, bool rem) {
  llvm::Type *t = x->getType();
  unsigned bits = t->getIntegerBitWidth();
  llvm::Value *zero = llvm::ConstantInt::get(t, 0);
  llvm::Value *byZero = b.CreateICmpEQ(y, zero);
  llvm::Value *overflow =
      b.CreateAnd(b.CreateICmpEQ(x, llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(bits))),
                  b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(t, -1)));
  llvm::Value *safe = b.CreateSelect(b.CreateOr(byZero, overflow), llvm::ConstantInt::get(t, 1), y);
  llvm::Value *q = b.CreateSDiv(x, safe), *r = b.CreateSRem(x, safe);
  llvm::Value *signsDiffer = b.CreateICmpSLT(b.CreateXor(r, safe), zero);
  llvm::Value *adjust = b.CreateAnd(b.CreateICmpNE(r, zero), signsDiffer);
  llvm::Value *out = rem ? b.CreateSelect(adjust, b.CreateAdd(r, safe), r)
                         : b.CreateSub(q, b.CreateZExt(adjust, t));
  return b.CreateSelect(byZero, zero, out);
}

// Whether fmod's result `m` is nonzero with a sign other than the divisor `y`'s: there the
// floor remainder is m + y and the floor quotient one less than the truncated one.
llvm::Value *fmodNeedsAdjust(llvm::IRBuilder<> &b, llvm::Value *m, llvm::Value *y) {
  llvm::Value *zero = llvm::ConstantFP::get(m->getType(), 0.0);
  llvm::Value *signsDiffer = b.CreateXor(b.CreateFCmpOLT(y, zero), b.CreateFCmpOLT(m, zero));
  return b.CreateAnd(b.CreateFCmpONE(m, zero), signsDiffer);
}

// numpy's remainder for floats (npy_remainder): fmod, plus the divisor where fmod's sign
// differs from the divisor's; a zero result takes the divisor's sign. fmod(x, 0) is NaN.
llvm::Value *floatRem(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
  llvm::Value *zero = llvm::ConstantFP::get(x->getType(), 0.0);
  llvm::Value *m = b.CreateFRem(x, y);  // frem is C fmod
  m = b.CreateSelect(fmodNeedsAdjust(b, m, y), b.CreateFAdd(m, y), m);
  llvm::Value *signedZero = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, zero, y);
  return b.CreateSelect(b.CreateFCmpOEQ(m, zero), signedZero, m);
}

// numpy's floor_divide for floats (npy_floor_divide / npy_divmod), not floor(x / y): the
// quotient is (x - fmod(x, y)) / y, one less where the remainder is adjusted as above, then
// snapped to the nearest integer. So 1.0 // 0.1 is 9, as in numpy and Python (floor(1 / 0.1)
// would be 10, because 1 / 0.1 rounds up to 10). A zero quotient takes the sign of x / y; a
// zero divisor gives x / y (inf or NaN).
llvm::Value *floatFloorDiv(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
  llvm::Type *t = x->getType();
  llvm::Value *zero = llvm::ConstantFP::get(t, 0.0), *one = llvm::ConstantFP::get(t, 1.0);
  llvm::Value *m = b.CreateFRem(x, y);
  llvm::Value *q = b.CreateFDiv(b.CreateFSub(x, m), y);
  q = b.CreateSelect(fmodNeedsAdjust(b, m, y), b.CreateFSub(q, one), q);
  llvm::Value *fl = b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, q);
  llvm::Value *roundUp = b.CreateFCmpOGT(b.CreateFSub(q, fl), llvm::ConstantFP::get(t, 0.5));
  fl = b.CreateSelect(roundUp, b.CreateFAdd(fl, one), fl);
  llvm::Value *trueQuotient = b.CreateFDiv(x, y);
  llvm::Value *signedZero = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, zero, trueQuotient);
  llvm::Value *r = b.CreateSelect(b.CreateFCmpOEQ(q, zero), signedZero, fl);
  return b.CreateSelect(b.CreateFCmpOEQ(y, zero), trueQuotient, r);
}

// i64 power, exact: repeated squaring over the exponent's 63 low bits, wrapping modulo 2^64
// as numpy's int64 power (and JAX's) does. A negative exponent gives what the i32 rule (pow in
// f64, truncated and saturated) gives: 1 for x = 1, +-1 for x = -1, INT64_MAX for x = 0 (1/0
// is inf), 0 otherwise. Unrolled and branch-free, so loops vectorize.
llvm::Value *i64Pow(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
  llvm::Type *t = x->getType();
  auto c = [&](int64_t v) { return llvm::ConstantInt::getSigned(t, v); };
  llvm::Value *result = c(1), *base = x;
  for (int k = 0; k < 63; ++k) {
    llvm::Value *bit = b.CreateICmpNE(b.CreateAnd(y, c(int64_t(1) << k)), c(0));
    result = b.CreateSelect(bit, b.CreateMul(result, base), result);
    if (k < 62) base = b.CreateMul(base, base);
  }
  llvm::Value *odd = b.CreateICmpNE(b.CreateAnd(y, c(1)), c(0));
  llvm::Value *negative =
      b.CreateSelect(b.CreateICmpEQ(x, c(1)), c(1),
                     b.CreateSelect(b.CreateICmpEQ(x, c(-1)), b.CreateSelect(odd, c(-1), c(1)),
                                    b.CreateSelect(b.CreateICmpEQ(x, c(0)), c(INT64_MAX), c(0))));
  return b.CreateSelect(b.CreateICmpSLT(y, c(0)), negative, result);
}

// numpy's maximum / minimum: (x >= y || isnan(x)) ? x : y, so a NaN on either side wins (and
// of -0 and +0 the first operand). LLVM's maxnum / minnum would drop the NaN. Bools are 0/1.
llvm::Value *maxMin(ScalarCtx &c, bool isMax) {
  llvm::IRBuilder<> &b = c.b;
  llvm::Value *x = c.x[0], *y = c.x[1];
  if (!c.fp) return b.CreateBinaryIntrinsic(isMax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, x, y);
  llvm::Value *keepX = isMax ? b.CreateFCmpOGE(x, y) : b.CreateFCmpOLE(x, y);
  return b.CreateSelect(b.CreateOr(keepX, b.CreateFCmpUNO(x, x)), x, y);
}

// The tangent of the larger (smaller) operand; ties share it equally.
void maxMinJvp(JvpCtx &c) {
  Builder &b = c.b;
  const Eqn &e = c.e;
  Value *wins = b.compare(e.prim == Prim::Max ? Prim::Gt : Prim::Lt, e.ins[0], e.ins[1]);
  Value *ties = b.compare(Prim::Eq, e.ins[0], e.ins[1]);
  Value *wa = b.select(wins, b.full(1, c.ty), b.select(ties, b.full(0.5, c.ty), b.zerosLike(c.ty)));
  Value *wb = b.binary(Prim::Sub, b.full(1, c.ty), wa);
  c.set(c.add(c.scaled(c.t[0], wa), c.scaled(c.t[1], wb)));
}

} // namespace

template <> const Rules &define<Prim::Add>() {
  static const Rules r = elementwise(
      numericOperands,
      [](JvpCtx &c) { c.set(c.add(c.t[0], c.t[1])); },
      [](TransposeCtx &c) {
        c.accumulate(0, c.c);
        c.accumulate(1, c.c);
      },
      [](ScalarCtx &c) {
        llvm::Value *x = c.x[0], *y = c.x[1];
        return c.fp ? c.b.CreateFAdd(x, y) : c.isBool ? c.b.CreateOr(x, y) : c.b.CreateAdd(x, y);
      });
  return r;
}

template <> const Rules &define<Prim::Sub>() {
  static const Rules r = elementwise(
      numericOperands,
      [](JvpCtx &c) {
        if (!c.t[0]) return c.set(c.linear(Prim::Neg, {c.t[1]}, c.ty));
        c.set(c.t[1] ? c.linear(Prim::Sub, {c.t[0], c.t[1]}, c.ty) : c.t[0]);
      },
      [](TransposeCtx &c) {
        c.accumulate(0, c.c);
        if (c.isLinear(1)) c.accumulate(1, c.b.unary(Prim::Neg, c.c));
      },
      [](ScalarCtx &c) {
        llvm::Value *x = c.x[0], *y = c.x[1];
        return c.fp ? c.b.CreateFSub(x, y) : c.isBool ? c.b.CreateXor(x, y) : c.b.CreateSub(x, y);
      });
  return r;
}

// Linear in each operand when the other is not a tangent (the product rule otherwise).
template <> const Rules &define<Prim::Mul>() {
  static const Rules r = elementwise(
      numericOperands,
      [](JvpCtx &c) {
        Value *ta = c.t[0] ? c.linear(Prim::Mul, {c.t[0], c.e.ins[1]}, c.ty) : nullptr;
        Value *tb = c.t[1] ? c.linear(Prim::Mul, {c.e.ins[0], c.t[1]}, c.ty) : nullptr;
        c.set(c.add(ta, tb));
      },
      [](TransposeCtx &c) {
        if (c.isLinear(0)) c.accumulate(0, c.b.binary(Prim::Mul, c.c, c.e.ins[1]));
        if (c.isLinear(1)) c.accumulate(1, c.b.binary(Prim::Mul, c.e.ins[0], c.c));
      },
      [](ScalarCtx &c) {
        llvm::Value *x = c.x[0], *y = c.x[1];
        return c.fp ? c.b.CreateFMul(x, y) : c.isBool ? c.b.CreateAnd(x, y) : c.b.CreateMul(x, y);
      });
  return r;
}

// Floats: true division, d(a / b) = da / b - db * (y / b); linear in the numerator.
// Integers: floor division (numpy's //).
template <> const Rules &define<Prim::Div>() {
  static const Rules r = elementwise(
      numericOperands,
      [](JvpCtx &c) {
        Value *ta = c.t[0] ? c.linear(Prim::Div, {c.t[0], c.e.ins[1]}, c.ty) : nullptr;
        if (!c.t[1]) return c.set(ta);
        Value *q = c.b.binary(Prim::Div, c.y, c.e.ins[1]);
        c.set(c.add(ta, c.linear(Prim::Neg, {c.scaled(c.t[1], q)}, c.ty)));
      },
      [](TransposeCtx &c) { c.accumulate(0, c.b.binary(Prim::Div, c.c, c.e.ins[1])); },
      [](ScalarCtx &c) -> llvm::Value * {
        if (c.fp) return c.b.CreateFDiv(c.x[0], c.x[1]);
        return c.isBool ? c.b.CreateAnd(c.x[0], c.x[1]) : intDivRem(c.b, c.x[0], c.x[1], false);
      });
  return r;
}

// numpy's floor_divide: piecewise constant, so a zero gradient (as JAX's).
template <> const Rules &define<Prim::FloorDiv>() {
  static const Rules r = elementwise(numericOperands, noTangent, notLinear, [](ScalarCtx &c) -> llvm::Value * {
    if (c.fp) return floatFloorDiv(c.b, c.x[0], c.x[1]);
    return c.isBool ? c.b.CreateAnd(c.x[0], c.x[1]) : intDivRem(c.b, c.x[0], c.x[1], false);
  });
  return r;
}

// a % b = a - b * floor(a / b): the tangent of a passes through; b's coefficient is
// -(a - y) / b.
template <> const Rules &define<Prim::Rem>() {
  static const Rules r = elementwise(
      numericOperands,
      [](JvpCtx &c) {
        if (!c.t[1]) return c.set(c.t[0]);
        Value *q = c.b.binary(Prim::Div, c.b.binary(Prim::Sub, c.e.ins[0], c.y), c.e.ins[1]);
        c.set(c.add(c.t[0], c.linear(Prim::Neg, {c.scaled(c.t[1], q)}, c.ty)));
      },
      notLinear,
      [](ScalarCtx &c) -> llvm::Value * {
        if (c.fp) return floatRem(c.b, c.x[0], c.x[1]);
        return c.isBool ? c.b.getInt8(0) : intDivRem(c.b, c.x[0], c.x[1], true);
      });
  return r;
}

template <> const Rules &define<Prim::Max>() {
  static const Rules r = elementwise(numericOperands, maxMinJvp, notLinear, [](ScalarCtx &c) { return maxMin(c, true); });
  return r;
}

template <> const Rules &define<Prim::Min>() {
  static const Rules r = elementwise(numericOperands, maxMinJvp, notLinear, [](ScalarCtx &c) { return maxMin(c, false); });
  return r;
}

// d(a^b) = b a^(b-1) da + log(a) a^b db, with JAX's rule for lax.pow where a is 0: log(a) is
// read as log(1) = 0 there (its _replace_zero), so d/db of 0^b is 0 (log(0) 0^b was -inf
// at b = 0 and nan at b > 0); d/da stays b a^(b-1), as JAX's for a float exponent (nan at
// a = b = 0).
template <> const Rules &define<Prim::Pow>() {
  static const Rules r = elementwise(
      numericOperands,
      [](JvpCtx &c) {
        Builder &b = c.b;
        const Eqn &e = c.e;
        Value *ta = nullptr, *tb = nullptr;
        if (c.t[0]) {
          Value *bm1 = b.binary(Prim::Sub, e.ins[1], b.full(1, e.ins[1]->type));
          ta = c.scaled(c.t[0], b.binary(Prim::Mul, e.ins[1], b.binary(Prim::Pow, e.ins[0], bm1)));
        }
        if (c.t[1]) {
          Value *a = e.ins[0];
          Value *zero = b.compare(Prim::Eq, a, b.full(0, a->type));
          Value *logA = b.unary(Prim::Log, b.select(zero, b.full(1, a->type), a));
          tb = c.scaled(c.t[1], b.binary(Prim::Mul, logA, c.y));
        }
        c.set(c.add(ta, tb));
      },
      notLinear,
      [](ScalarCtx &c) -> llvm::Value * {
        llvm::IRBuilder<> &b = c.b;
        if (c.fp) return c.fe.me.mathFunction(b, "pow", {c.x[0], c.x[1]});  // codegen/Math.h
        if (c.isBool) return b.CreateOr(c.x[0], b.CreateXor(c.x[1], b.getInt8(1)));  // x^0 = 1
        if (c.t == DType::I64) return i64Pow(b, c.x[0], c.x[1]);
        return c.convert(b.CreateBinaryIntrinsic(llvm::Intrinsic::pow,
                                                 c.convert(c.x[0], c.t, DType::F64),
                                                 c.convert(c.x[1], c.t, DType::F64)),
                         DType::F64, c.t);
      });
  return r;
}

template <> const Rules &define<Prim::And>() {
  static const Rules r =
      elementwise(boolOperands, noTangent, notLinear, [](ScalarCtx &c) { return c.b.CreateAnd(c.x[0], c.x[1]); });
  return r;
}

template <> const Rules &define<Prim::Or>() {
  static const Rules r =
      elementwise(boolOperands, noTangent, notLinear, [](ScalarCtx &c) { return c.b.CreateOr(c.x[0], c.x[1]); });
  return r;
}

} // namespace shmapc::prims
