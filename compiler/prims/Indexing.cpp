// Primitives along one axis of an array, with runtime kernels in runtime/indexing.cpp that view
// it as [outer, n, inner]: gather (numpy's take; `x[idx]` with an integer array) and its
// transpose scatter_add, argmax / argmin, cumsum, roll, argsort. Indices are i32 in [-n, n) (negative from
// the end); any other index stops the program with a runtime error, as numpy raises.
#include "prims/Prim.h"

namespace shmapc::prims {

namespace {

// x.shape[:axis] + idx.shape + x.shape[axis+1:] (numpy's take), i32 indices.
bool gatheredShape(ShapeCtx &c, std::vector<int64_t> &shape) {
  const Type &x = c.in(0), &idx = c.in(1);
  int64_t axis;
  if (!c.param("axis", axis) || !c.inRange(axis, x.rank(), "axis")) return false;
  if (idx.dtype != DType::I32) return c.fail("indices must be i32, got " + typeText(idx));
  shape.assign(x.shape.begin(), x.shape.begin() + axis);
  shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  return true;
}

// In a jit function: gather's x dimensions other than `axis` are factors with the result's
// (before and after the indices' dimensions), and so are the indices' dimensions; `axis`
// itself is computed whole (any index may ask for any row). scatter_add pairs x's other
// dimensions with the update's and the result's; the indices and the update's dimensions
// for them are computed whole (their sums land anywhere along `axis`).
FactorRule gatherFactors(const Eqn &e) {
  FactorRule r;
  const int axis = (int)e.intParam("axis"), rank = (int)e.ins[0]->type.rank();
  const int idx = (int)e.ins[1]->type.rank();  // (the indices, both primitives' operand 1)
  for (int d = 0; d < rank; ++d) {
    if (d == axis) continue;
    const int at = d < axis ? d : d + idx - 1;  // (the dimension in the result / the update)
    if (e.prim == Prim::Gather) r.factors.push_back({{{0, d}}, {{0, at}}});
    else r.factors.push_back({{{0, d}, {2, at}}, {{0, d}}});
  }
  if (e.prim == Prim::Gather)
    for (int j = 0; j < idx; ++j) r.factors.push_back({{{1, j}}, {{0, axis + j}}});
  return r;
}

// argmax, cumsum, roll, argsort: every dimension but `axis` is a factor of the operand and the
// result (argmax's result without `axis`); `axis` is computed whole.
FactorRule alongAxisFactors(const Eqn &e) {
  FactorRule r;
  const int axis = (int)e.intParam("axis");
  int out = 0;
  for (int d = 0; d < (int)e.ins[0]->type.rank(); ++d) {
    if (d == axis) {
      if (e.prim != Prim::Argmax) ++out;
      continue;
    }
    r.factors.push_back({{{0, d}}, {{0, out++}}});
  }
  return r;
}

// argmax, cumsum, argsort: `axis` a dimension of the operand, `flag` a 0/1 param.
bool alongAxis(ShapeCtx &c, const char *flag, int64_t &axis) {
  bool f;
  return c.param("axis", axis) && c.inRange(axis, c.in(0).rank(), "axis") && c.flag(flag, f);
}

struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView viewAlong(const Type &t, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < t.rank(); ++d) {
    if (d < axis) v.outer *= t.shape[d];
    else if (d == axis) v.n = t.shape[d];
    else v.inner *= t.shape[d];
  }
  return v;
}

// A kernel (dtype, flag, x, outer, n, inner, out) along the eqn's `axis`: argmax, cumsum,
// argsort; `flag` names the int param passed as the second argument.
bool lowerAlongAxis(FuncEmitter &fe, size_t i, const char *runtimeFn, const char *flag) {
  const Eqn &e = fe.f.eqns[i];
  const Type &x = e.ins[0]->type;
  AxisView v = viewAlong(x, e.intParam("axis"));
  fe.callRt(runtimeFn, {fe.dtypeCode(x.dtype), fe.i32(e.intParam(flag)), fe.buffer(e.ins[0]), fe.i64(v.outer),
                        fe.i64(v.n), fe.i64(v.inner), fe.buffer(e.outs[0])});
  return true;
}

// gather(x, idx) with x's dtype and the given variance.
Value *gather(Builder &b, Value *x, Value *idx, const Eqn &like, AxisSet vary) {
  const Type &xt = x->type, &it = idx->type;
  int64_t axis = like.intParam("axis");
  Type out{xt.dtype, {}, vary};
  out.shape.assign(xt.shape.begin(), xt.shape.begin() + axis);
  out.shape.insert(out.shape.end(), it.shape.begin(), it.shape.end());
  out.shape.insert(out.shape.end(), xt.shape.begin() + axis + 1, xt.shape.end());
  return b.emit(Prim::Gather, {b.liftTo(x, vary), b.liftTo(idx, vary)}, out, like.params);
}

} // namespace

template <> const Rules &define<Prim::Gather>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        std::vector<int64_t> shape;
        return gatheredShape(c, shape) && c.out(c.in(0).dtype, shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = [](JvpCtx &c) {
        if (c.t[0]) c.set(c.linear(Prim::Gather, {c.t[0], c.e.ins[1]}, c.ty, c.e.params));
      },
      // The cotangent of each gathered element is added back where it came from.
      .transpose = [](TransposeCtx &c) {
        AxisSet vary = c.c->type.vary;
        Type zeros{c.xt.dtype, c.xt.shape, vary};
        c.accumulate(0, c.b.emit(Prim::ScatterAdd, {c.b.zerosLike(zeros), c.b.liftTo(c.e.ins[1], vary), c.c},
                                 zeros, c.e.params));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &x = e.ins[0]->type;
        AxisView v = viewAlong(x, e.intParam("axis"));
        fe.callRt("shm_gather", {fe.dtypeCode(x.dtype), fe.buffer(e.ins[0]), fe.i64(v.outer), fe.i64(v.n),
                                 fe.i64(v.inner), fe.buffer(e.ins[1]), fe.i64(e.ins[1]->type.numElements()),
                                 fe.buffer(e.outs[0])});
        return true;
      },
      .scalar = nullptr,
      .sharding = gatherFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// Linear in x and in v.
template <> const Rules &define<Prim::ScatterAdd>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // (x, idx, v): v shaped like gather(x, idx)
        std::vector<int64_t> shape;
        if (!gatheredShape(c, shape)) return false;
        if (c.in(2).dtype != c.in(0).dtype || c.in(2).shape != shape)
          return c.fail("values " + typeText(c.in(2)) + " are not shaped like the gather " +
                        typeText(Type{c.in(0).dtype, shape, 0}));
        return c.out(c.in(0));
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = [](JvpCtx &c) {
        if (!c.t[0] && !c.t[2]) return;
        const Eqn &e = c.e;
        c.set(c.linear(Prim::ScatterAdd, {c.zerosIfNull(c.t[0], e.ins[0]), e.ins[1], c.zerosIfNull(c.t[2], e.ins[2])},
                       c.ty, e.params));
      },
      .transpose = [](TransposeCtx &c) {
        c.accumulate(0, c.c);
        if (c.isLinear(2)) c.accumulate(2, gather(c.b, c.c, c.e.ins[1], c.e, c.c->type.vary));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &x = e.ins[0]->type;
        AxisView v = viewAlong(x, e.intParam("axis"));
        fe.callRt("shm_scatter_add", {fe.dtypeCode(x.dtype), fe.buffer(e.ins[0]), fe.i64(v.outer), fe.i64(v.n),
                                      fe.i64(v.inner), fe.buffer(e.ins[1]), fe.i64(e.ins[1]->type.numElements()),
                                      fe.buffer(e.ins[2]), fe.buffer(e.outs[0])});
        return true;
      },
      .scalar = nullptr,
      .sharding = gatherFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// An index: no tangent.
template <> const Rules &define<Prim::Argmax>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // i32, the axis removed
        int64_t axis;
        if (!alongAxis(c, "is_min", axis)) return false;
        std::vector<int64_t> shape = c.in(0).shape;
        shape.erase(shape.begin() + axis);
        return c.out(DType::I32, shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAlongAxis(fe, i, "shm_argmax", "is_min"); },
      .scalar = nullptr,
      .sharding = alongAxisFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// Linear; transposes to the cumulative sum in the other direction.
template <> const Rules &define<Prim::Cumsum>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        int64_t axis;
        return alongAxis(c, "reverse", axis) && c.out(c.in(0));
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        c.accumulate(0, c.apply(Prim::Cumsum, c.c,
                                {{"axis", c.e.params.at("axis")}, {"reverse", (int64_t)!c.e.intParam("reverse")}},
                                c.c->type));
      },
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAlongAxis(fe, i, "shm_cumsum", "reverse"); },
      .scalar = nullptr,
      .sharding = alongAxisFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// numpy's roll along `axis` by `shift` (normalized by sema into [0, n)): a permutation of the
// slices, so linear, and its transpose rolls the other way. In a jit function every other
// dimension is a factor; `axis` is computed whole (a shard's slices come from its neighbour's).
template <> const Rules &define<Prim::Roll>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        int64_t axis, shift;
        if (!c.param("axis", axis) || !c.inRange(axis, c.in(0).rank(), "axis") || !c.param("shift", shift))
          return false;
        const int64_t n = c.in(0).shape[axis];
        if (n == 0 && shift != 0) return c.fail("shift " + std::to_string(shift) + " along an empty axis, not 0");
        if (n > 0 && !c.inRange(shift, n, "shift")) return false;
        return c.out(c.in(0));
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        const int64_t n = c.xt.shape[c.e.intParam("axis")], shift = c.e.intParam("shift");
        c.accumulate(0, c.apply(Prim::Roll, c.c, {{"axis", c.e.params.at("axis")}, {"shift", n > 0 ? (n - shift) % n : 0}},
                                c.c->type));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &x = e.ins[0]->type;
        AxisView v = viewAlong(x, e.intParam("axis"));
        fe.callRt("shm_roll", {fe.dtypeCode(x.dtype), fe.buffer(e.ins[0]), fe.i64(v.outer), fe.i64(v.n), fe.i64(v.inner),
                               fe.buffer(e.outs[0]), fe.i64(e.intParam("shift"))});
        return true;
      },
      .scalar = nullptr,
      .sharding = alongAxisFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// Stable, NaN last (numpy's kind="stable"): an index, so no tangent; sort and top_k are
// take_along_axis of it (sema), which differentiates through gather.
template <> const Rules &define<Prim::Argsort>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // i32, the operand's shape
        int64_t axis;
        return alongAxis(c, "descending", axis) && c.out(DType::I32, c.in(0).shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return lowerAlongAxis(fe, i, "shm_argsort", "descending"); },
      .scalar = nullptr,
      .sharding = alongAxisFactors,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
