// The all-reduce family over mesh `axes` and its partner in variance typing: psum (the user-level
// one, which insertPbroadcasts rewrites to psum2 after automatic pbroadcasts), psum2 (varying ->
// invariant), pbroadcast (invariant -> varying, no communication), pmax, pmin, pprod, and the
// bitwise pand, por, pxor. psum2 and pbroadcast transpose to each other. invariant_cast,
// pbroadcast's internal inverse on values known equal, is here beside them.
#include "prims/Prim.h"
#include "shmap_runtime.h"  // (SHM_REDUCE_*: the bitwise ops)

#include <algorithm>
#include <climits>

namespace shmapc::prims {

namespace {

// Numbers, not bools (a user's error: sema reports it at the operand).
bool allReduceShape(ShapeCtx &c) {
  int64_t n;
  if (!c.groupSize(n)) return false;
  if (!isNumeric(c.in(0).dtype))
    return c.failOperand(0, DiagId::DTypeMismatch, std::string(primName(c.e.prim)) + " needs numbers, got " + typeText(c.in(0)),
                         "cast(x, i32) first");
  return c.out(c.in(0));
}

// The runtime's all-reduce (runtime/all_reduce.cpp): member r of a group of n reduces chunk r,
// elements [E r / n, E (r+1) / n) of the E-element operand, of every member's operand, and
// pushes it to the n-1 others: it sends and receives (n-1) * chunk_r elements.
CollectiveBytes allReduceBytes(const Eqn &e, int64_t n, int64_t groups) {
  const Type &t = e.ins[0]->type;
  const int64_t es = dtypeSize(t.dtype), elems = t.numElements();
  CollectiveBytes c;
  c.chunkMin = INT64_MAX;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t chunk = elems * (r + 1) / n - elems * r / n;
    c.chunkMin = std::min(c.chunkMin, chunk);
    c.chunkMax = std::max(c.chunkMax, chunk);
  }
  c.sentMin = c.receivedMin = (n - 1) * c.chunkMin * es;
  c.sentMax = c.receivedMax = (n - 1) * c.chunkMax * es;
  c.sent = c.received = groups * (n - 1) * elems * es;  // (a group's chunks add up to E elements)
  return c;
}
// psum, psum2, pmax, pmin write a result that nothing else on the device may read into a
// buffer left null where the block is not used (SHM_OUT_COLLECTIVE_ONLY); the others do not.
constexpr Communication allReduce(CollectiveKind kind, bool collectiveOnlyOutput) {
  return {Communication::Collective, kind, allReduceBytes, collectiveOnlyOutput};
}

bool lowerAllReduce(FuncEmitter &fe, size_t i, const char *runtimeFn) {
  const Eqn &e = fe.f.eqns[i];
  const Type &t = e.ins[0]->type;
  AxesArg a = axesOf(fe, e);
  fe.callRt(runtimeFn, {fe.dev, fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]),
                        fe.i32(t.rank()), fe.me.i64Array(t.shape), a.ptr, a.count});
  return true;
}

// The cotangent goes to the device holding the extremum; ties share it.
void extremumJvp(JvpCtx &c) {
  Prim sum = c.b.f.checkVma ? Prim::Psum2 : Prim::Psum;  // untyped bodies keep the user-level psum
  const Attr &axes = c.e.params.at("axes");
  c.set(c.linear(sum, {c.scaled(c.t[0], extremumShare(c.b, c.x, c.y, axes))}, c.ty, {{"axes", axes}}));
}

// The tangent is psum(share * t), and the transpose share * ct, with no communication.
void productJvp(JvpCtx &c) {
  Prim sum = c.b.f.checkVma ? Prim::Psum2 : Prim::Psum;
  const Attr &axes = c.e.params.at("axes");
  Type invariant = c.y->type;
  c.set(c.linear(sum, {c.scaled(c.t[0], productShare(c.b, c.x, invariant, axes))}, c.ty, {{"axes", axes}}));
}

// Integers and bools, not floats (a user's error: sema reports it at the operand).
bool bitwiseShape(ShapeCtx &c) {
  int64_t n;
  if (!c.groupSize(n)) return false;
  if (isFloat(c.in(0).dtype))
    return c.failOperand(0, DiagId::BitwiseOfFloat,
                         std::string(primName(c.e.prim)) + " reduces integers and bools bit by bit, and " +
                             typeText(c.in(0)) + " is a float: a bitwise reduction is not differentiable",
                         "for floats use psum, pmax or pmin; for bits, cast(x, i32) or compare to get bools");
  return c.out(c.in(0));
}

template <int32_t Op>
bool lowerBitwise(FuncEmitter &fe, size_t i) {
  const int32_t op = Op;
  const Eqn &e = fe.f.eqns[i];
  const Type &t = e.ins[0]->type;
  AxesArg a = axesOf(fe, e);
  fe.callRt("shm_pbitwise", {fe.dev, fe.i32(op), fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]),
                             fe.i32(t.rank()), fe.me.i64Array(t.shape), a.ptr, a.count});
  return true;
}

// pand, por, pxor: integers and bools only (PyTorch's note on backward formulas for
// collectives: bitwise reductions have no gradient; their results are integers, which carry
// none). pand and por over axes the operand does not
// vary over are the identity there; pxor is not (x ^ x = 0), so its operand is lifted.
template <int32_t Op>
Rules bitwiseRules() {
  return Rules{
      .shape = bitwiseShape,
      .variance = Op == SHM_REDUCE_XOR ? VarianceRule::VaryingToInvariant : VarianceRule::MaxMin,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = lowerBitwise<Op>,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = allReduce(Op == SHM_REDUCE_AND  ? CollectiveKind::Pand
                        : Op == SHM_REDUCE_OR ? CollectiveKind::Por
                                              : CollectiveKind::Pxor,
                        false),
  };
}

} // namespace

Value *extremumShare(Builder &b, Value *x, Value *extremum, const Attr &axes) {
  Prim sum = b.f.checkVma ? Prim::Psum2 : Prim::Psum;
  Value *mask = b.convert(b.compare(Prim::Eq, x, b.liftTo(extremum, x->type.vary)), x->type.dtype);
  Value *count = b.emit(sum, {mask}, extremum->type, {{"axes", axes}});
  return b.binary(Prim::Div, mask, b.liftTo(count, x->type.vary));
}

// PyTorch's note on backward formulas for collectives: the product's derivative with respect to
// device i's operand is the product of the others' (fwd_out / fwd_in where no operand is zero).
// Dividing would be wrong where some are: with z zero operands over the group, device i's share
// is the product of the nonzero operands p if z = 0 (p / x_i) or if z = 1 and x_i is the zero
// one, and 0 otherwise; z (a psum of x == 0) and p (a pprod of x with its zeros as 1) are
// computed for it.
Value *productShare(Builder &b, Value *x, const Type &invariant, const Attr &axes) {
  Prim sum = b.f.checkVma ? Prim::Psum2 : Prim::Psum;
  const Type &xt = x->type;
  Value *zero = b.zerosLike(xt);
  Value *isZero = b.compare(Prim::Eq, x, zero);
  Value *nonzero = b.select(isZero, b.full(1.0, xt), x);
  Value *p = b.liftTo(b.emit(Prim::Pprod, {nonzero}, invariant, {{"axes", axes}}), xt.vary);
  Value *z = b.liftTo(b.emit(sum, {b.convert(isZero, xt.dtype)}, invariant, {{"axes", axes}}), xt.vary);
  Value *alone = b.select(isZero, p, zero);  // (exactly one zero: its device's share)
  return b.select(b.compare(Prim::Eq, z, b.zerosLike(z->type)), b.binary(Prim::Div, p, nonzero),
                  b.select(b.compare(Prim::Eq, z, b.full(1.0, z->type)), alone, zero));
}

// Only left in bodies with check_vma=false (shard_map before variance types): transposes to itself.
template <> const Rules &define<Prim::Psum>() {
  static const Rules r{
      .shape = allReduceShape,
      .variance = VarianceRule::UserPsum,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) { c.accumulate(0, c.apply(Prim::Psum, c.c, c.e.params, c.xt)); },
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAllReduce(fe, i, "shm_psum"); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = allReduce(CollectiveKind::Psum, true),
  };
  return r;
}

template <> const Rules &define<Prim::Psum2>() {
  static const Rules r{
      .shape = allReduceShape,
      .variance = VarianceRule::VaryingToInvariant,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) { c.accumulate(0, c.apply(Prim::Pbroadcast, c.c, c.e.params, c.xt)); },
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAllReduce(fe, i, "shm_psum"); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = allReduce(CollectiveKind::Psum, true),
  };
  return r;
}

// No data moves: an alias or a copy, and the identity inside a fused loop.
template <> const Rules &define<Prim::Pbroadcast>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) { return collectiveSameShape(c, anyDType, "any"); },
      .variance = VarianceRule::InvariantToVarying,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) { c.accumulate(0, c.apply(Prim::Psum2, c.c, c.e.params, c.xt)); },
      .lower = lowerFused,
      .scalar = identityScalar,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

// combine-reductions' cast back to invariant (Primitives.def): the values pass unchanged, so
// it is linear with the identity's derivative: the tangent through the same cast, and the
// cotangent (typed invariant over the axes) back to the operand's type by a pbroadcast, which
// is also free. Made after autodiff, so neither runs today; they keep the primitive complete.
template <> const Rules &define<Prim::InvariantCast>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) { return collectiveSameShape(c, anyDType, "any"); },
      .variance = VarianceRule::InvariantCast,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) { c.accumulate(0, c.apply(Prim::Pbroadcast, c.c, c.e.params, c.xt)); },
      .lower = lowerFused,
      .scalar = identityScalar,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::Pmax>() {
  static const Rules r{
      .shape = allReduceShape,
      .variance = VarianceRule::MaxMin,
      .jvp = extremumJvp,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAllReduce(fe, i, "shm_pmax"); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = allReduce(CollectiveKind::Pmax, true),
  };
  return r;
}

template <> const Rules &define<Prim::Pmin>() {
  static const Rules r{
      .shape = allReduceShape,
      .variance = VarianceRule::MaxMin,
      .jvp = extremumJvp,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAllReduce(fe, i, "shm_pmin"); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = allReduce(CollectiveKind::Pmin, true),
  };
  return r;
}

// The product over the group: of an operand invariant over some axes, its power (as psum
// multiplies), so the operand is lifted first.
template <> const Rules &define<Prim::Pprod>() {
  static const Rules r{
      .shape = allReduceShape,
      .variance = VarianceRule::VaryingToInvariant,
      .jvp = productJvp,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAllReduce(fe, i, "shm_pprod"); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = allReduce(CollectiveKind::Pprod, false),
  };
  return r;
}

template <> const Rules &define<Prim::Pand>() {
  static const Rules r = bitwiseRules<SHM_REDUCE_AND>();
  return r;
}

template <> const Rules &define<Prim::Por>() {
  static const Rules r = bitwiseRules<SHM_REDUCE_OR>();
  return r;
}

template <> const Rules &define<Prim::Pxor>() {
  static const Rules r = bitwiseRules<SHM_REDUCE_XOR>();
  return r;
}

} // namespace shmapc::prims
