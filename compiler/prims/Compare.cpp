// Comparisons (eq, ne, lt, le, gt, ge: bool results, no tangent) and select, fused into
// element-wise loops. ne is unordered (NaN != NaN is true); the others are ordered (false on
// NaN), as in C and numpy.
#include "prims/Prim.h"

namespace shmapc::prims {

namespace {

using CP = llvm::CmpInst;

llvm::Value *compare(ScalarCtx &c, CP::Predicate fp, CP::Predicate in) {
  llvm::Value *r = c.fp ? c.b.CreateFCmp(fp, c.x[0], c.x[1]) : c.b.CreateICmp(in, c.x[0], c.x[1]);
  return c.b.CreateZExt(r, c.fe.me.i8Ty);
}


} // namespace

template <> const Rules &define<Prim::Eq>() {
  static const Rules r = elementwise(compareAny, noTangent, notLinear, [](ScalarCtx &c) { return compare(c, CP::FCMP_OEQ, CP::ICMP_EQ); });
  return r;
}

template <> const Rules &define<Prim::Ne>() {
  static const Rules r = elementwise(compareAny, noTangent, notLinear, [](ScalarCtx &c) { return compare(c, CP::FCMP_UNE, CP::ICMP_NE); });
  return r;
}

template <> const Rules &define<Prim::Lt>() {
  static const Rules r = elementwise(compareNumbers, noTangent, notLinear, [](ScalarCtx &c) { return compare(c, CP::FCMP_OLT, CP::ICMP_SLT); });
  return r;
}

template <> const Rules &define<Prim::Le>() {
  static const Rules r = elementwise(compareNumbers, noTangent, notLinear, [](ScalarCtx &c) { return compare(c, CP::FCMP_OLE, CP::ICMP_SLE); });
  return r;
}

template <> const Rules &define<Prim::Gt>() {
  static const Rules r = elementwise(compareNumbers, noTangent, notLinear, [](ScalarCtx &c) { return compare(c, CP::FCMP_OGT, CP::ICMP_SGT); });
  return r;
}

template <> const Rules &define<Prim::Ge>() {
  static const Rules r = elementwise(compareNumbers, noTangent, notLinear, [](ScalarCtx &c) { return compare(c, CP::FCMP_OGE, CP::ICMP_SGE); });
  return r;
}

// select(pred, a, b): linear in a and b (the predicate has no tangent).
template <> const Rules &define<Prim::Select>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // (pred bool, on_true, on_false) of one shape
        if (c.in(0).dtype != DType::Bool) return c.fail("predicate " + typeText(c.in(0)) + " is not bool");
        if (!c.in(1).sameShape(c.in(2)) || c.in(0).shape != c.in(1).shape)
          return c.fail("operands " + typeText(c.in(0)) + ", " + typeText(c.in(1)) + ", " + typeText(c.in(2)) +
                        " differ (the choices have one type, the predicate their shape)");
        return c.out(c.in(1));
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = [](JvpCtx &c) {
        if (!c.t[1] && !c.t[2]) return;
        const Eqn &e = c.e;
        c.set(c.linear(Prim::Select, {e.ins[0], c.zerosIfNull(c.t[1], e.ins[1]), c.zerosIfNull(c.t[2], e.ins[2])},
                       c.ty));
      },
      .transpose = [](TransposeCtx &c) {
        Value *zero = c.b.zerosLike(c.c->type);
        if (c.isLinear(1)) c.accumulate(1, c.b.select(c.e.ins[0], c.c, zero));
        if (c.isLinear(2)) c.accumulate(2, c.b.select(c.e.ins[0], zero, c.c));
      },
      .lower = lowerFused,
      .scalar = [](ScalarCtx &c) {
        return c.b.CreateSelect(c.b.CreateICmpNE(c.x[0], c.b.getInt8(0)), c.x[1], c.x[2]);
      },
      .sharding = elementwiseFactors,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
