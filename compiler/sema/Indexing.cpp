// Builtins along one axis: take (and scatter_add, its transpose), argmax / argmin, cumsum, and
// the composites one_hot and clip. numpy's defaults: without `axis`, take, argmax and cumsum
// work on the flattened array.
#include "sema/SemaImpl.h"

namespace shmapc::sema {

namespace {

std::vector<int64_t> withoutAxis(const std::vector<int64_t> &shape, int64_t axis) {
  std::vector<int64_t> out = shape;
  out.erase(out.begin() + axis);
  return out;
}

} // namespace

// An array of integer indices (a list literal becomes i32).
ir::Value *Sema::indexArray(const ast::Expr &e, const std::string &what) {
  ir::Value *idx = evalArray(e);
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
  ir::Type t = x->type;
  t.shape.assign(x->type.shape.begin(), x->type.shape.begin() + axis);
  t.shape.insert(t.shape.end(), idx->type.shape.begin(), idx->type.shape.end());
  t.shape.insert(t.shape.end(), x->type.shape.begin() + axis + 1, x->type.shape.end());
  return emit(ir::Prim::Gather, {x, idx}, t, loc, {{"axis", axis}});
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
  vv = broadcastTo(vv, want, a[2]->loc);
  return SVal::array(emit(ir::Prim::ScatterAdd, {x, idx, vv}, x->type, c.loc, {{"axis", axis}}), c.loc);
}

SVal Sema::argExtremum(const ast::Expr &c, bool isMin) {
  auto a = bindArgs(c, {"x", "axis"}, 1);
  auto [x, axis] = alongAxis(evalArray(*a[0]), a[1], c.loc);
  if (x->type.rank() == 0) fail(DiagId::BadAxis, c.loc, c.name + " of a scalar", "pass an array");
  ir::Type t{ir::DType::I32, withoutAxis(x->type.shape, axis), 0};
  return SVal::array(emit(ir::Prim::Argmax, {x}, t, c.loc, {{"axis", axis}, {"is_min", (int64_t)isMin}}), c.loc);
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

} // namespace shmapc::sema
