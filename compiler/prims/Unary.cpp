// Element-wise unary primitives: neg, exp, log, sin, cos, tanh, sqrt, abs, floor, not,
// convert. Each is one element of a fused loop (codegen/Elementwise.cpp); the math functions
// need a floating-point operand.
#include "prims/Prim.h"

#include <llvm/IR/Intrinsics.h>

namespace shmapc::prims {

namespace {

llvm::Value *floatIntrinsic(ScalarCtx &c, llvm::Intrinsic::ID id) {
  if (!c.fp) return c.error("needs a floating-point operand");
  return c.b.CreateUnaryIntrinsic(id, c.x[0]);
}

// The compiler's own function (codegen/Math.h); f16 / bf16 are computed in f32.
llvm::Value *mathFunction(ScalarCtx &c, const char *name) {
  if (!c.fp) return c.error("needs a floating-point operand");
  return c.fe.me.mathFunction(c.b, name, {c.x[0]});
}

} // namespace

template <> const Rules &define<Prim::Neg>() {
  static const Rules r = elementwise(
      numericOperands,
      [](JvpCtx &c) { c.set(c.linear(Prim::Neg, {c.t[0]}, c.ty)); },
      [](TransposeCtx &c) { c.accumulate(0, c.b.unary(Prim::Neg, c.c)); },
      [](ScalarCtx &c) {
        return c.fp ? c.b.CreateFNeg(c.x[0]) : c.isBool ? c.x[0] : c.b.CreateNeg(c.x[0]);
      });
  return r;
}

// d exp(x) = exp(x) dx: the result is the coefficient.
template <> const Rules &define<Prim::Exp>() {
  static const Rules r = elementwise(floatOperands, [](JvpCtx &c) { c.set(c.scaled(c.t[0], c.y)); }, notLinear,
                               [](ScalarCtx &c) { return mathFunction(c, "exp"); });
  return r;
}

template <> const Rules &define<Prim::Log>() {
  static const Rules r = elementwise(
      floatOperands,
      [](JvpCtx &c) { c.set(c.t[0] ? c.linear(Prim::Div, {c.t[0], c.x}, c.ty) : nullptr); }, notLinear,
      [](ScalarCtx &c) { return mathFunction(c, "log"); });
  return r;
}

template <> const Rules &define<Prim::Sin>() {
  static const Rules r = elementwise(
      floatOperands,
      [](JvpCtx &c) { c.set(c.scaled(c.t[0], c.b.unary(Prim::Cos, c.x))); }, notLinear,
      [](ScalarCtx &c) { return mathFunction(c, "sin"); });
  return r;
}

template <> const Rules &define<Prim::Cos>() {
  static const Rules r = elementwise(
      floatOperands,
      [](JvpCtx &c) { c.set(c.scaled(c.t[0], c.b.unary(Prim::Neg, c.b.unary(Prim::Sin, c.x)))); },
      notLinear, [](ScalarCtx &c) { return mathFunction(c, "cos"); });
  return r;
}

// d tanh(x) = (1 - tanh(x)^2) dx.
template <> const Rules &define<Prim::Tanh>() {
  static const Rules r = elementwise(
      floatOperands,
      [](JvpCtx &c) {
        Value *d = c.b.binary(Prim::Sub, c.b.full(1, c.y->type), c.b.binary(Prim::Mul, c.y, c.y));
        c.set(c.scaled(c.t[0], d));
      },
      notLinear,
      [](ScalarCtx &c) { return mathFunction(c, "tanh"); });
  return r;
}

// d sqrt(x) = dx / (2 sqrt(x)).
template <> const Rules &define<Prim::Sqrt>() {
  static const Rules r = elementwise(
      floatOperands,
      [](JvpCtx &c) {
        if (!c.t[0]) return;
        c.set(c.linear(Prim::Div, {c.t[0], c.b.binary(Prim::Mul, c.y, c.b.full(2, c.y->type))}, c.ty));
      },
      notLinear, [](ScalarCtx &c) { return floatIntrinsic(c, llvm::Intrinsic::sqrt); });
  return r;
}

// d |x| = sign(x) dx, with sign(0) = 1 (as JAX's).
template <> const Rules &define<Prim::Abs>() {
  static const Rules r = elementwise(
      numericOperands,
      [](JvpCtx &c) {
        Value *pos = c.b.compare(Prim::Ge, c.x, c.b.zerosLike(c.x->type));
        c.set(c.scaled(c.t[0], c.b.select(pos, c.b.full(1, c.x->type), c.b.full(-1, c.x->type))));
      },
      notLinear,
      [](ScalarCtx &c) -> llvm::Value * {
        if (c.fp) return c.b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, c.x[0]);
        if (c.isBool) return c.x[0];
        return c.b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, c.x[0], c.b.getFalse());
      });
  return r;
}

// Piecewise constant: a zero gradient, as in JAX.
template <> const Rules &define<Prim::Floor>() {
  static const Rules r = elementwise(floatOperands, noTangent, notLinear,
                               [](ScalarCtx &c) { return floatIntrinsic(c, llvm::Intrinsic::floor); });
  return r;
}

// Piecewise constant: a zero gradient, as in JAX.
template <> const Rules &define<Prim::Ceil>() {
  static const Rules r = elementwise(floatOperands, noTangent, notLinear,
                                     [](ScalarCtx &c) { return floatIntrinsic(c, llvm::Intrinsic::ceil); });
  return r;
}

template <> const Rules &define<Prim::Not>() {
  static const Rules r = elementwise(boolOperands, noTangent, notLinear, [](ScalarCtx &c) {
    return c.isBool ? c.b.CreateXor(c.x[0], c.b.getInt8(1)) : c.b.CreateNot(c.x[0]);
  });
  return r;
}

// Any dtype to any other: the output dtype is the result's own (declared) type.
static bool convertShape(ShapeCtx &c) {
  if (c.declared().shape != c.in(0).shape)
    return c.fail("converts " + typeText(c.in(0)) + " to " + typeText(c.declared()) + ": shapes differ");
  return c.out(c.declared().dtype, c.in(0).shape);
}

// Linear between float dtypes (its transpose converts back); to an integer or bool there is
// no tangent.
template <> const Rules &define<Prim::Convert>() {
  static const Rules r = elementwise(
      convertShape,
      [](JvpCtx &c) {
        if (isFloat(c.ty.dtype)) c.set(c.linear(Prim::Convert, {c.t[0]}, c.ty));
      },
      [](TransposeCtx &c) { c.accumulate(0, c.b.convert(c.c, c.xt.dtype)); },
      [](ScalarCtx &c) { return c.convert(c.x[0], c.t, c.out); });
  return r;
}

} // namespace shmapc::prims
