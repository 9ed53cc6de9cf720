// Structural builtins: matmul (numpy semantics lowered to a rank >= 2 batched matmul),
// reshape, transpose, expand_dims, concatenate and the dynamic slices.
#include "sema/SemaImpl.h"

#include <algorithm>
#include <numeric>

namespace shmapc::sema {

static std::string shapeText(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

static int64_t product(const std::vector<int64_t> &s) {
  return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<int64_t>());
}

// numpy broadcasting of two shapes; nullopt if they do not broadcast.
static std::optional<std::vector<int64_t>> broadcastDims(const std::vector<int64_t> &a,
                                                         const std::vector<int64_t> &b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

SVal Sema::bMatmul(const ast::Expr &c) {
  auto a = bindArgs(c, {"a", "b"}, 2);
  SVal x = eval(*a[0]);
  return matmul(x, eval(*a[1]), c.loc);
}

// numpy matmul: a 1-D left operand is a row [1,k] and a 1-D right operand a column [k,1]
// (the added dimension is removed again), leading batch dimensions broadcast.
SVal Sema::matmul(const SVal &a, const SVal &b, Loc loc) {
  for (const SVal *s : {&a, &b})
    if (s->kind != SVal::Array || s->value->type.rank() == 0)
      fail(DiagId::RankMismatch, s->loc, "cannot matmul " + describe(*s) + ": it is not an array",
           "matmul needs operands with at least one dimension; use * to scale");
  ir::DType dt = commonDType({a, b}, "matmul", loc);  // mixed dtypes promote, as jnp.matmul
  ir::Value *l = convert(a.value, dt, loc), *r = convert(b.value, dt, loc);
  if (l->type.dtype == ir::DType::Bool)
    fail(DiagId::DTypeMismatch, loc, "cannot matmul bool arrays", "cast(x, f32) first");
  std::string both = str(l->type) + " and " + str(r->type);
  bool squeezeM = l->type.rank() == 1, squeezeN = r->type.rank() == 1;
  if (squeezeM) l = reshape(l, {1, l->type.shape[0]}, loc);
  if (squeezeN) r = reshape(r, {r->type.shape[0], 1}, loc);
  const auto &ls = l->type.shape, &rs = r->type.shape;
  int64_t m = ls[ls.size() - 2], k = ls.back(), k2 = rs[rs.size() - 2], n = rs.back();
  if (k != k2)
    fail(DiagId::ShapeMismatch, loc,
         "cannot matmul " + both + ": contracting dimensions differ (" + std::to_string(k) +
             " vs " + std::to_string(k2) + ")",
         "the left operand's last dimension must equal the right operand's " +
             std::string(squeezeN ? "only" : "second-to-last") +
             " dimension; transpose or reshape an operand");
  auto batch = broadcastDims({ls.begin(), ls.end() - 2}, {rs.begin(), rs.end() - 2});
  if (!batch)
    fail(DiagId::ShapeMismatch, loc, "cannot matmul " + both + ": batch dimensions do not broadcast",
         "leading dimensions must be equal or 1");
  auto withTail = [&](int64_t p, int64_t q) {
    std::vector<int64_t> s = *batch;
    s.push_back(p);
    s.push_back(q);
    return s;
  };
  l = broadcastTo(l, withTail(m, k), loc);
  r = broadcastTo(r, withTail(k, n), loc);
  ir::Value *out = emitByRules(ir::Prim::Matmul, {l, r}, {}, {loc});
  std::vector<int64_t> finalShape = *batch;
  if (!squeezeM) finalShape.push_back(m);
  if (!squeezeN) finalShape.push_back(n);
  return SVal::array(reshape(out, finalShape, loc), loc);
}

SVal Sema::bReshape(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "shape"}, 2);
  ir::Value *x = evalArray(*a[0]);
  std::vector<int64_t> shape = staticIntList(*a[1], "the shape");
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && unknown < 0) {
      unknown = (int64_t)i;
    } else if (shape[i] <= 0) {
      fail(DiagId::BadReshape, a[1]->loc, "bad target shape " + shapeText(shape),
           "dimensions must be positive, with at most one -1 (inferred)");
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      // (a wrapped product could match the element count, or be 0 and divide by zero)
      fail(DiagId::BadReshape, a[1]->loc,
           "bad target shape " + shapeText(shape) + ": its dimensions multiply past 2^63",
           "the new shape must have the same number of elements as " + str(x->type) + " (" +
               std::to_string(x->type.numElements()) + ")");
    }
  }
  int64_t total = x->type.numElements();
  if (unknown >= 0 && total % known == 0) shape[unknown] = total / known;
  if (product(shape) != total || (unknown >= 0 && total % known != 0))
    fail(DiagId::BadReshape, c.loc,
         "cannot reshape " + str(x->type) + " (" + std::to_string(total) + " elements) to " +
             shapeText(shape) + (unknown < 0 ? " (" + std::to_string(product(shape)) + " elements)" : ""),
         "the new shape must have the same number of elements");
  return SVal::array(reshape(x, shape, c.loc), c.loc);
}

SVal Sema::bTranspose(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "permutation"}, 1);
  ir::Value *x = evalArray(*a[0]);
  int64_t rank = x->type.rank();
  std::vector<int64_t> perm;
  if (a[1]) {
    std::vector<int64_t> raw = staticIntList(*a[1], "the permutation");
    if ((int64_t)raw.size() != rank)
      fail(DiagId::BadAxis, a[1]->loc,
           "permutation " + shapeText(raw) + " has " + std::to_string(raw.size()) +
               " entries but " + str(x->type) + " has " + std::to_string(rank) + " dimensions",
           "list every dimension once");
    for (int64_t p : raw) perm.push_back(normAxis(p, rank, a[1]->loc, "permutation entry"));
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      fail(DiagId::BadAxis, a[1]->loc, shapeText(raw) + " is not a permutation",
           "list every dimension exactly once");
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  bool identity = true;
  for (int64_t i = 0; i < rank; ++i) identity &= perm[i] == i;
  if (identity) return SVal::array(x, c.loc);
  return SVal::array(emitByRules(ir::Prim::Transpose, {x}, {{"permutation", perm}}, {c.loc}), c.loc);
}

SVal Sema::bExpandDims(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axis"}, 2);
  ir::Value *x = evalArray(*a[0]);
  int64_t axis = normAxis(staticInt(*a[1], "axis"), x->type.rank() + 1, a[1]->loc, "axis");
  std::vector<int64_t> shape = x->type.shape;
  shape.insert(shape.begin() + axis, 1);
  return SVal::array(reshape(x, shape, c.loc), c.loc);
}

SVal Sema::bConcatenate(const ast::Expr &c) {
  auto a = bindArgs(c, {"arrays", "axis"}, 1);
  const ast::Expr &list = *a[0];
  if (list.kind != ast::Expr::ArrayLit && list.kind != ast::Expr::TupleLit)
    fail(DiagId::BadArgument, list.loc, "concatenate takes a list of arrays",
         "write concatenate([a, b], axis=0)");
  std::vector<ir::Value *> xs;
  for (const auto &item : list.items) xs.push_back(evalArray(*item));
  if (xs.empty())
    fail(DiagId::BadArgument, list.loc, "concatenate of no arrays", "pass at least one array");
  const ir::Type &first = xs[0]->type;
  int64_t axis = normAxis(a[1] ? staticInt(*a[1], "axis") : 0, first.rank(),
                          a[1] ? a[1]->loc : c.loc, "axis");
  // The size it makes, as it adds each operand (a limit, not a shape: the shape rule checks the
  // operands fit; each has at most 2^40 elements, so the count cannot wrap before it passes).
  int64_t elements = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    if ((elements += xs[i]->type.numElements()) > SHM_MAX_ELEMENTS)
      fail(DiagId::ArrayTooLarge, c.loc,
           "concatenate would make an array of more than 2^40 elements (by operand " + std::to_string(i + 1) +
               " of " + std::to_string(xs.size()) + ")",
           "concatenate fewer or smaller arrays; split the data over a mesh or over several arrays");
  if (xs.size() == 1) return SVal::array(xs[0], c.loc);
  std::vector<Loc> at;
  for (const auto &item : list.items) at.push_back(item->loc);
  return SVal::array(emitByRules(ir::Prim::Concatenate, xs, {{"dimension", axis}}, {c.loc, at}), c.loc);
}

// `[i, 0]`: one i32[] start per dimension; literals become constants.
std::vector<ir::Value *> Sema::startIndices(const ast::Expr &list, int64_t rank,
                                            const std::string &what) {
  if (list.kind != ast::Expr::ArrayLit && list.kind != ast::Expr::TupleLit)
    fail(DiagId::BadArgument, list.loc, "the start indices of " + what + " must be a list",
         "write [i, 0, ...] with one start per dimension");
  if ((int64_t)list.items.size() != rank)
    fail(DiagId::RankMismatch, list.loc,
         what + " has " + std::to_string(list.items.size()) + " start indices for an array of rank " +
             std::to_string(rank),
         "give one start index per dimension");
  std::vector<ir::Value *> out;
  for (const auto &item : list.items) {
    SVal s = eval(*item);
    ir::Value *v = s.kind == SVal::Literal ? literalAs(s, ir::DType::I32, {}, s.loc) : toArray(s);
    if (v->type.dtype != ir::DType::I32 || v->type.rank() != 0)
      fail(DiagId::DTypeMismatch, item->loc,
           "a start index must be an i32[] scalar, got " + str(v->type),
           "use cast(i, i32) or index a scalar out of it");
    out.push_back(v);
  }
  return out;
}

SVal Sema::bDynamicSlice(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "start_indices", "sizes"}, 3);
  ir::Value *x = evalArray(*a[0]);
  std::vector<ir::Value *> starts = startIndices(*a[1], x->type.rank(), "dynamic_slice");
  std::vector<int64_t> sizes = staticIntList(*a[2], "sizes");
  std::vector<ir::Value *> ins = {x};
  ins.insert(ins.end(), starts.begin(), starts.end());
  // (the shape rule checks the sizes, at the sizes argument)
  return SVal::array(emitByRules(ir::Prim::DynamicSlice, ins, {{"sizes", sizes}}, {c.loc, {}, {{"sizes", a[2]->loc}}}),
                     c.loc);
}

SVal Sema::bDynamicUpdateSlice(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "update", "start_indices"}, 3);
  ir::Value *x = evalArray(*a[0]);
  SVal us = eval(*a[1]);
  ir::Value *u = us.kind == SVal::Literal ? literalAs(us, x->type.dtype, {}, us.loc) : toArray(us);
  std::vector<ir::Value *> ins = {x, u};
  auto starts = startIndices(*a[2], x->type.rank(), "dynamic_update_slice");
  ins.insert(ins.end(), starts.begin(), starts.end());
  // (the shape rule checks the update fits, at the update argument)
  return SVal::array(emitByRules(ir::Prim::DynamicUpdateSlice, ins, {}, {c.loc, {a[0]->loc, a[1]->loc}}), c.loc);
}

} // namespace shmapc::sema
