// The all-reduce family over mesh `axes` and its seed 000 partner: psum (the user-level one,
// which insertPbroadcasts rewrites to psum2 after automatic pbroadcasts), psum2 (varying ->
// invariant), pbroadcast (invariant -> varying, no communication), pmax and pmin.
// psum2 and pbroadcast transpose to each other.
#include "prims/Prim.h"

namespace shmapc::prims {

namespace {

bool allReduceShape(ShapeCtx &c) { return collectiveSameShape(c, isNumeric, "numeric"); }

bool lowerAllReduce(FuncEmitter &fe, size_t i, const char *runtimeFn) {
  const Eqn &e = fe.f.eqns[i];
  const Type &t = e.ins[0]->type;
  AxesArg a = axesOf(fe, e);
  fe.callRt(runtimeFn, {fe.dev, fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]),
                        fe.i64(t.numElements()), a.ptr, a.count});
  return true;
}

// The cotangent goes to the device holding the extremum; ties share it.
void extremumJvp(JvpCtx &c) {
  Builder &b = c.b;
  Prim sum = b.f.checkVma ? Prim::Psum2 : Prim::Psum;  // untyped bodies keep the user-level psum
  const Attr &axes = c.e.params.at("axes");
  Value *yb = b.liftTo(c.y, c.x->type.vary);
  Value *mask = b.convert(b.compare(Prim::Eq, c.x, yb), c.x->type.dtype);
  Value *count = b.emit(sum, {mask}, c.y->type, {{"axes", axes}});
  Value *w = b.binary(Prim::Div, mask, b.liftTo(count, c.x->type.vary));
  c.set(c.linear(sum, {c.scaled(c.t[0], w)}, c.ty, {{"axes", axes}}));
}

} // namespace

// Only left in bodies with check_vma=false (the pre-seed-000 behaviour): transposes to itself.
template <> const Rules &define<Prim::Psum>() {
  static const Rules r{
      .shape = allReduceShape,
      .variance = VarianceRule::UserPsum,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) { c.accumulate(0, c.apply(Prim::Psum, c.c, c.e.params, c.xt)); },
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAllReduce(fe, i, "shm_psum"); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
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
  };
  return r;
}

} // namespace shmapc::prims
