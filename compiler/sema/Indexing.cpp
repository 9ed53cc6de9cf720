// Builtins along one axis: take (and scatter_add, its transpose), argmax / argmin, cumsum, and
// the composites one_hot and clip. numpy's defaults: without `axis`, take, argmax and cumsum
// work on the flattened array.
#include "sema/SemaImpl.h"

namespace shmapc::sema {

// An array of integer indices (a list literal becomes i32).
ir::Value *Sema::indexArray(const ast::Expr &e, const std::string &what) {
  ir::Value *idx = evalArray(e);
  if (idx->type.dtype == ir::DType::I64)
    fail(DiagId::DTypeMismatch, e.loc, what + " must be i32, got " + str(idx->type),
         "indices are i32: cast(idx, i32)");
  if (idx->type.dtype != ir::DType::I32)
    fail(DiagId::DTypeMismatch, e.loc, what + " must be integers, got " + str(idx->type),
         idx->type.dtype == ir::DType::Bool ? "boolean masks are not supported; use where(mask, x, 0)"
                                             : "cast(idx, i32)");
  return idx;
}

// `x` itself and the axis an `axis=` argument names, or the flattened `x` and 0 without one.
std::pair<ir::Value *, int64_t> Sema::alongAxis(ir::Value *x, const ast::Expr *axisArg, Loc loc) {
  if (axisArg) return {x, normAxis(staticInt(*axisArg, "axis"), x->type.rank(), axisArg->loc, "axis")};
  return {reshape(x, {x->type.numElements()}, loc), 0};
}

ir::Value *Sema::gatherAlong(ir::Value *x, ir::Value *idx, int64_t axis, Loc loc) {
  if (x->type.rank() == 0)
    fail(DiagId::IndexOutOfRange, loc, "cannot take from " + str(x->type), "index an array of rank >= 1");
  return emitByRules(ir::Prim::Gather, {x, idx}, {{"axis", axis}}, {loc});
}

// take(x, indices, axis=None): numpy's take.
SVal Sema::bTake(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "indices", "axis"}, 2);
  ir::Value *x = evalArray(*a[0]);
  ir::Value *idx = indexArray(*a[1], "the indices of take");
  auto [flat, axis] = alongAxis(x, a[2], c.loc);
  return SVal::array(gatherAlong(flat, idx, axis, c.loc), c.loc);
}

// scatter_add(x, indices, v, axis=0): x with v's slices added at the indices (repeated indices
// add up), v shaped like take(x, indices, axis).
SVal Sema::bScatterAdd(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "indices", "v", "axis"}, 3);
  ir::Value *x = evalArray(*a[0]);
  ir::Value *idx = indexArray(*a[1], "the indices of scatter_add");
  int64_t axis = a[3] ? normAxis(staticInt(*a[3], "axis"), x->type.rank(), a[3]->loc, "axis") : 0;
  std::vector<int64_t> want(x->type.shape.begin(), x->type.shape.begin() + axis);
  want.insert(want.end(), idx->type.shape.begin(), idx->type.shape.end());
  want.insert(want.end(), x->type.shape.begin() + axis + 1, x->type.shape.end());
  SVal v = eval(*a[2]);
  ir::Value *vv = v.kind == SVal::Literal ? literalAs(v, x->type.dtype, want, a[2]->loc) : toArray(v);
  if (vv->type.dtype != x->type.dtype)
    fail(DiagId::DTypeMismatch, a[2]->loc,
         "scatter_add adds " + str(vv->type) + " into " + str(x->type), "cast the values to " + str(x->type));
  ir::Type wantType{x->type.dtype, want, 0};
  if (!broadcastsTo(vv->type.shape, want))
    fail(DiagId::ShapeMismatch, a[2]->loc,
         "scatter_add's values are " + str(vv->type) + ", but x " + str(x->type) + " with indices " +
             str(idx->type) + " along axis " + std::to_string(axis) + " takes " + str(wantType),
         "give values shaped like take(x, indices, axis=" + std::to_string(axis) + "), or broadcastable to it");
  vv = broadcastTo(vv, want, a[2]->loc);
  return SVal::array(emit(ir::Prim::ScatterAdd, {x, idx, vv}, x->type, c.loc, {{"axis", axis}}), c.loc);
}

SVal Sema::argExtremum(const ast::Expr &c, bool isMin) {
  auto a = bindArgs(c, {"x", "axis"}, 1);
  auto [x, axis] = alongAxis(evalArray(*a[0]), a[1], c.loc);
  if (x->type.rank() == 0) fail(DiagId::BadAxis, c.loc, c.name + " of a scalar", "pass an array");
  return SVal::array(emitByRules(ir::Prim::Argmax, {x}, {{"axis", axis}, {"is_min", (int64_t)isMin}}, {c.loc}), c.loc);
}
SVal Sema::bArgmax(const ast::Expr &c) { return argExtremum(c, false); }
SVal Sema::bArgmin(const ast::Expr &c) { return argExtremum(c, true); }

// Bools count as integers (numpy: cumsum of bool is an int count).
SVal Sema::bCumsum(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axis"}, 1);
  auto [x, axis] = alongAxis(evalArray(*a[0]), a[1], c.loc);
  if (x->type.dtype == ir::DType::Bool) x = convert(x, ir::DType::I32, c.loc);
  return SVal::array(emit(ir::Prim::Cumsum, {x}, x->type, c.loc, {{"axis", axis}, {"reverse", (int64_t)0}}), c.loc);
}

// roll(x, shift, axis=None): numpy's roll by a static shift (negative: towards the start);
// without `axis` the flattened array rolls and keeps x's shape.
SVal Sema::bRoll(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "shift", "axis"}, 2);
  ir::Value *x = evalArray(*a[0]);
  const int64_t shift = staticInt(*a[1], "shift");
  auto [v, axis] = alongAxis(x, a[2], c.loc);
  const int64_t n = v->type.shape[axis];  // (a scalar has no axis to name, and flattens to [1])
  const int64_t by = n == 0 ? 0 : (shift % n + n) % n;
  ir::Value *r = emit(ir::Prim::Roll, {v}, v->type, c.loc, {{"axis", axis}, {"shift", by}});
  return SVal::array(a[2] ? r : reshape(r, x->type.shape, c.loc), c.loc);
}

// one_hot(indices, n, dtype=f32): [..., n] with 1 where the last index equals the value
// (jax.nn.one_hot; an index outside [0, n) gives a row of zeros).
SVal Sema::bOneHot(const ast::Expr &c) {
  auto a = bindArgs(c, {"indices", "num_classes", "dtype"}, 2);
  ir::Value *idx = indexArray(*a[0], "the indices of one_hot");
  int64_t n = staticInt(*a[1], "num_classes");
  if (n < 1) fail(DiagId::BadArgument, a[1]->loc, "num_classes must be positive", "pass the number of classes");
  ir::DType dt = a[2] ? dtypeArg(*a[2], "dtype") : ir::DType::F32;
  std::vector<int64_t> shape = idx->type.shape;
  shape.push_back(1);
  ir::Value *column = reshape(idx, shape, c.loc);
  ir::Value *classes = emit(ir::Prim::Iota, {}, ir::Type{ir::DType::I32, {n}, 0}, c.loc, {{"dimension", (int64_t)0}});
  SVal eq = binaryOp("==", SVal::array(column, c.loc), SVal::array(classes, c.loc), c.loc);
  return SVal::array(convert(toArray(eq), dt, c.loc), c.loc);
}

// clip(x, lo, hi) = minimum(maximum(x, lo), hi), as numpy (NaN stays NaN).
SVal Sema::bClip(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "lo", "hi"}, 3);
  SVal lower = elementwise(ir::Prim::Max, "clip", eval(*a[0]), eval(*a[1]), c.loc);
  return elementwise(ir::Prim::Min, "clip", lower, eval(*a[2]), c.loc);
}

// take_along_axis(x, idx, axis): out[..., j, ...] = x[..., idx[..., j, ...], ...] with idx of
// x's rank (its size along `axis` free, equal elsewhere), numpy's. Built from a gather on the
// flattened x at computed flat indices; an index outside [-n, n) along the axis is mapped to
// one past the end, so the gather stops the program with its out-of-range error.
ir::Value *Sema::takeAlongAxis(ir::Value *x, ir::Value *idx, int64_t axis, Loc loc) {
  const ir::Type &xt = x->type, &it = idx->type;
  if (it.rank() != xt.rank())
    fail(DiagId::RankMismatch, loc, "take_along_axis needs indices of the array's rank: " + str(xt) +
                                        " and " + str(it),
         "add axes with expand_dims");
  for (int64_t d = 0; d < xt.rank(); ++d)
    if (d != axis && it.shape[d] != xt.shape[d])
      fail(DiagId::ShapeMismatch, loc,
           "take_along_axis: dimension " + std::to_string(d) + " of the indices " + str(it) +
               " differs from the array's " + str(xt),
           "the indices must match the array except along the axis");
  auto i32 = [&](double v) { return constant(ir::DType::I32, it.shape, {v}, loc); };
  auto arith = [&](ir::Prim p, ir::Value *a, ir::Value *b) { return emit(p, {a, b}, a->type, loc); };
  int64_t n = xt.shape[axis], total = xt.numElements(), stride = 1;
  ir::Value *wrapped = emit(ir::Prim::Select, {emit(ir::Prim::Lt, {idx, i32(0)}, ir::Type{ir::DType::Bool, it.shape, 0}, loc),
                                               arith(ir::Prim::Add, idx, i32((double)n)), idx},
                            it, loc);
  ir::Value *bad = emit(ir::Prim::Or, {emit(ir::Prim::Lt, {wrapped, i32(0)}, ir::Type{ir::DType::Bool, it.shape, 0}, loc),
                                       emit(ir::Prim::Ge, {wrapped, i32((double)n)}, ir::Type{ir::DType::Bool, it.shape, 0}, loc)},
                        ir::Type{ir::DType::Bool, it.shape, 0}, loc);
  ir::Value *flat = nullptr;
  for (int64_t d = xt.rank() - 1; d >= 0; --d) {
    ir::Value *term = d == axis ? wrapped
                                : emit(ir::Prim::Iota, {}, it, loc, {{"dimension", d}});
    if (stride != 1) term = arith(ir::Prim::Mul, term, i32((double)stride));
    flat = flat ? arith(ir::Prim::Add, flat, term) : term;
    stride *= xt.shape[d];
  }
  if (!flat) flat = i32(0);
  flat = emit(ir::Prim::Select, {bad, i32((double)total), flat}, it, loc);
  return gatherAlong(reshape(x, {total}, loc), flat, 0, loc);
}

SVal Sema::bTakeAlongAxis(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "indices", "axis"}, 3);
  ir::Value *x = evalArray(*a[0]);
  ir::Value *idx = indexArray(*a[1], "the indices of take_along_axis");
  int64_t axis = normAxis(staticInt(*a[2], "axis"), x->type.rank(), a[2]->loc, "axis");
  return SVal::array(takeAlongAxis(x, idx, axis, c.loc), c.loc);
}

// argsort(x, axis=-1): stable, NaN last (numpy's kind="stable").
ir::Value *Sema::argsortAlong(ir::Value *x, int64_t axis, bool descending, Loc loc) {
  if (x->type.rank() == 0) fail(DiagId::BadAxis, loc, "cannot sort a scalar", "pass an array");
  return emitByRules(ir::Prim::Argsort, {x}, {{"axis", axis}, {"descending", (int64_t)descending}}, {loc});
}

SVal Sema::bArgsort(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axis"}, 1);
  ir::Value *x = evalArray(*a[0]);
  int64_t axis = normAxis(a[1] ? staticInt(*a[1], "axis") : -1, x->type.rank(), c.loc, "axis");
  return SVal::array(argsortAlong(x, axis, false, c.loc), c.loc);
}

// sort(x, axis=-1): the values in argsort's order; differentiable (through the gather).
SVal Sema::bSort(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axis"}, 1);
  ir::Value *x = evalArray(*a[0]);
  int64_t axis = normAxis(a[1] ? staticInt(*a[1], "axis") : -1, x->type.rank(), c.loc, "axis");
  return SVal::array(takeAlongAxis(x, argsortAlong(x, axis, false, c.loc), axis, c.loc), c.loc);
}

// values, indices = top_k(x, k): the k largest along the last axis, largest first (ties: the
// lower index first), as jax.lax.top_k.
std::vector<SVal> Sema::topK(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "k"}, 2);
  ir::Value *x = evalArray(*a[0]);
  int64_t k = staticInt(*a[1], "k"), axis = x->type.rank() - 1;
  if (axis < 0) fail(DiagId::BadAxis, c.loc, "top_k of a scalar", "pass an array");
  if (k < 1 || k > x->type.shape[axis])
    fail(DiagId::BadArgument, a[1]->loc,
         "k = " + std::to_string(k) + " for an axis of size " + std::to_string(x->type.shape[axis]),
         "take 1 <= k <= " + std::to_string(x->type.shape[axis]));
  ir::Value *order = argsortAlong(x, axis, true, c.loc);
  std::vector<int64_t> start(order->type.rank(), 0), limit = order->type.shape, strides(order->type.rank(), 1);
  limit[axis] = k;
  ir::Value *idx =
      emitByRules(ir::Prim::Slice, {order}, {{"start", start}, {"limit", limit}, {"strides", strides}}, {c.loc});
  return {SVal::array(takeAlongAxis(x, idx, axis, c.loc), c.loc), SVal::array(idx, c.loc)};
}

} // namespace shmapc::sema
