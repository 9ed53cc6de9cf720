// Reductions over `axes` (sorted; the reduced dimensions are removed): reduce_sum (linear:
// transposes to a broadcast back), reduce_max and reduce_min (the tangent flows through the
// extremum, ties sharing it). Float sums are numpy's pairwise tree (docs/numerics.md).
#include "prims/Prim.h"

#include <algorithm>

namespace shmapc::prims {

namespace {

std::vector<int64_t> keptDims(const Type &t, const std::vector<int64_t> &axes) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < t.rank(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(d);
  return kept;
}

// axes: sorted, distinct dimensions of a numeric operand, removed from the result.
bool reduceShape(ShapeCtx &c) {
  const Type &x = c.in(0);
  std::vector<int64_t> axes, shape;
  if (!c.param("axes", axes)) return false;
  if (x.dtype == DType::Bool) return c.fail("needs a numeric operand, got " + typeText(x));
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!c.inRange(axes[i], x.rank(), "axis")) return false;
    if (i > 0 && axes[i] <= axes[i - 1]) return c.fail("axes are not sorted and distinct");
  }
  for (int64_t d : keptDims(x, axes)) shape.push_back(x.shape[d]);
  return c.out(x.dtype, shape);
}

// op: SHM_REDUCE_SUM, SHM_REDUCE_MAX or SHM_REDUCE_MIN.
bool lowerReduce(FuncEmitter &fe, size_t i, int op) {
  const Eqn &e = fe.f.eqns[i];
  const Type &in = e.ins[0]->type;
  const std::vector<int64_t> &axes = e.intsParam("axes");
  fe.callRt("shm_reduce", {fe.dtypeCode(in.dtype), fe.i32(op), fe.buffer(e.ins[0]), fe.i32(in.rank()),
                           fe.me.i64Array(in.shape), fe.me.i64Array(axes), fe.i32((int64_t)axes.size()),
                           fe.buffer(e.outs[0])});
  return true;
}

// The tangent at the extremum; ties share it equally.
void extremumJvp(JvpCtx &c) {
  Builder &b = c.b;
  const auto &axes = c.e.intsParam("axes");
  const Type &xt = c.x->type;
  Value *yb = b.broadcastTo(c.y, xt, keptDims(xt, axes));
  Value *mask = b.convert(b.compare(Prim::Eq, c.x, yb), xt.dtype);
  Value *count = b.broadcastTo(b.reduceSum(mask, axes), xt, keptDims(xt, axes));
  Value *w = b.binary(Prim::Div, mask, count);
  c.set(c.linear(Prim::ReduceSum, {c.scaled(c.t[0], w)}, c.ty, {{"axes", axes}}));
}

// The kept dimensions are the result's; each reduced one a factor finished by psum / pmax /
// pmin.
FactorRule reduceFactors(const Eqn &e) {
  const std::vector<int64_t> &axes = e.intsParam("axes");
  const Prim combine = e.prim == Prim::ReduceSum ? Prim::Psum : e.prim == Prim::ReduceMax ? Prim::Pmax : Prim::Pmin;
  FactorRule r;
  int out = 0;
  for (int d = 0; d < (int)e.ins[0]->type.rank(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) r.factors.push_back({{{0, d}}, {}, combine});
    else r.factors.push_back({{{0, d}}, {{0, out++}}});
  }
  return r;
}

} // namespace

template <> const Rules &define<Prim::ReduceSum>() {
  static const Rules r{
      .shape = reduceShape,
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        Type full = c.xt;
        full.vary = c.c->type.vary;
        c.accumulate(0, c.b.broadcastTo(c.c, full, keptDims(c.xt, c.e.intsParam("axes"))));
      },
      .lower = [](FuncEmitter &fe, size_t i) { return lowerReduce(fe, i, 0); },
      .scalar = nullptr,
      .sharding = reduceFactors,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::ReduceMax>() {
  static const Rules r{
      .shape = reduceShape,
      .variance = VarianceRule::SameAsOperands,
      .jvp = extremumJvp,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerReduce(fe, i, 1); },
      .scalar = nullptr,
      .sharding = reduceFactors,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::ReduceMin>() {
  static const Rules r{
      .shape = reduceShape,
      .variance = VarianceRule::SameAsOperands,
      .jvp = extremumJvp,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerReduce(fe, i, 2); },
      .scalar = nullptr,
      .sharding = reduceFactors,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
