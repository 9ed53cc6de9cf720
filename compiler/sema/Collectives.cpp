// Collectives: only inside a mesh context (a shmap body, or code it calls). Axis names are
// resolved to indices of the context's mesh; the group size n is the product of the sizes of
// the listed axes. Shapes follow JAX (see docs/language.md and runtime/abi/shmap_runtime.h).
#include "sema/SemaImpl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>

namespace shmapc::sema {

void Sema::requireMesh(const std::string &what, Loc loc) {
  if (cur_->mesh) return;
  failWithCallChain(DiagId::CollectiveOutsideShmap, loc,
                    what + " is only allowed inside a shmap body, but this is host code",
                    "move it into a @shmap function, or into a function called from one");
}

// Where axis `name` was written in `e` (for a tuple: its nth occurrence).
static Loc axisLoc(const ast::Expr &e, const std::string &name, int nth = 0) {
  if (e.kind == ast::Expr::TupleLit)
    for (const auto &item : e.items)
      if (item->kind == ast::Expr::StringLit && item->name == name && nth-- == 0) return item->loc;
  return e.loc;
}

std::vector<int64_t> Sema::resolveAxes(const ast::Expr &e, const std::string &what, Loc callLoc,
                                       int64_t *groupSize) {
  requireMesh(what, callLoc);
  auto names = staticAxesOpt(e);
  if (!names || names->empty())
    fail(DiagId::BadArgument, e.loc, "the axes of " + what + " must be axis names",
         "write an axis name such as \"x\" or a tuple (\"x\", \"y\")");
  const ir::Mesh &mesh = *cur_->mesh;
  std::vector<int64_t> axes;
  int64_t n = 1;
  for (const std::string &name : *names) {
    int idx = axisIndex(mesh, name, axisLoc(e, name));
    if (std::find(axes.begin(), axes.end(), idx) != axes.end())
      fail(DiagId::AxisRepeated, axisLoc(e, name, 1),
           "axis \"" + name + "\" is listed twice in the axes of " + what,
           "list each axis once");
    axes.push_back(idx);
    n *= mesh.sizes[idx];
  }
  if (groupSize) *groupSize = n;
  return axes;
}

// psum / pmax / pmin / psum2 / pbroadcast: same type in and out.
SVal Sema::simpleCollective(const ast::Expr &c, ir::Prim p) {
  auto a = bindArgs(c, {"x", "axes"}, 2);
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, nullptr);
  ir::Value *x = evalArray(*a[0]);
  // (the rules refuse a bool for an all-reduce, at the operand)
  return SVal::array(emitByRules(p, {x}, {{"axes", axes}}, {c.loc, {a[0]->loc}}), c.loc);
}
SVal Sema::bPsum(const ast::Expr &c) { return simpleCollective(c, ir::Prim::Psum); }
SVal Sema::bPmax(const ast::Expr &c) { return simpleCollective(c, ir::Prim::Pmax); }
SVal Sema::bPmin(const ast::Expr &c) { return simpleCollective(c, ir::Prim::Pmin); }
SVal Sema::bPprod(const ast::Expr &c) { return simpleCollective(c, ir::Prim::Pprod); }
SVal Sema::bPsum2(const ast::Expr &c) { return simpleCollective(c, ir::Prim::Psum2); }

// pand / por / pxor: integers and bools (PyTorch's band, bor, bxor, which have no gradient).
SVal Sema::bitwiseCollective(const ast::Expr &c, ir::Prim p) {
  auto a = bindArgs(c, {"x", "axes"}, 2);
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, nullptr);
  ir::Value *x = evalArray(*a[0]);
  // (the rules refuse a float, at the operand)
  return SVal::array(emitByRules(p, {x}, {{"axes", axes}}, {c.loc, {a[0]->loc}}), c.loc);
}
SVal Sema::bPand(const ast::Expr &c) { return bitwiseCollective(c, ir::Prim::Pand); }
SVal Sema::bPor(const ast::Expr &c) { return bitwiseCollective(c, ir::Prim::Por); }
SVal Sema::bPxor(const ast::Expr &c) { return bitwiseCollective(c, ir::Prim::Pxor); }
SVal Sema::bPbroadcast(const ast::Expr &c) { return simpleCollective(c, ir::Prim::Pbroadcast); }

// pmean = psum, then divide by the group size.
SVal Sema::bPmean(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axes"}, 2);
  int64_t n = 1;
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, &n);
  ir::Value *x = evalArray(*a[0]);
  if (!ir::isFloat(x->type.dtype))
    fail(DiagId::DTypeMismatch, a[0]->loc, "pmean needs a float array, got " + str(x->type),
         "cast(x, f32) first");
  ir::Value *s = emit(ir::Prim::Psum, {x}, x->type, c.loc, {{"axes", axes}});
  ir::Value *count = constant(x->type.dtype, x->type.shape, {(double)n}, c.loc);
  return SVal::array(emit(ir::Prim::Div, {s, count}, x->type, c.loc), c.loc);
}

namespace {

// (x, axes, root, axis, tiled) as bound, reordered as (x, axes, axis, tiled, root): the rooted
// gather and scatter take the root third, and share the rest with all_gather / pscatter.
std::vector<const ast::Expr *> rootLast(std::vector<const ast::Expr *> a) {
  std::rotate(a.begin() + 2, a.begin() + 3, a.end());
  return a;
}

} // namespace

// all_gather / all_gather_invariant: untiled inserts a dimension of size n at `axis`; tiled
// multiplies dimension `axis` by n.
SVal Sema::gather(const ast::Expr &c, ir::Prim p) {
  const bool rooted = p == ir::Prim::GatherTo;
  auto a = rooted ? rootLast(bindArgs(c, {"x", "axes", "root", "axis", "tiled"}, 3))
                  : bindArgs(c, {"x", "axes", "axis", "tiled"}, 2);
  int64_t n = 1;
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, &n);
  ir::Value *x = evalArray(*a[0]);
  bool tiled = a[3] ? staticBool(*a[3], "tiled") : false;
  int64_t rank = x->type.rank();
  int64_t axis = a[2] ? staticInt(*a[2], "axis") : 0;
  axis = normAxis(axis, tiled ? rank : rank + 1, a[2] ? a[2]->loc : c.loc, "axis");
  // (a limit, not a shape: the result has n times the operand's elements; checked before the
  // shape rule multiplies a dimension by n, which could overflow int64 a few gathers later)
  int64_t elements;
  if (__builtin_mul_overflow(x->type.numElements(), n, &elements) || elements > SHM_MAX_ELEMENTS)
    fail(DiagId::ArrayTooLarge, c.loc, c.name + " would make an array of more than 2^40 elements",
         "gather a smaller array; split the data over a mesh or over several arrays");
  std::map<std::string, ir::Attr> params = {{"axes", axes}, {"axis", axis}, {"tiled", (int64_t)tiled}};
  if (rooted) params["root"] = staticRoot(*a[4], n, "root");
  return SVal::array(emitByRules(p, {x}, params, {c.loc}), c.loc);
}
SVal Sema::bAllGather(const ast::Expr &c) { return gather(c, ir::Prim::AllGather); }
SVal Sema::bAllGatherInvariant(const ast::Expr &c) {
  return gather(c, ir::Prim::AllGatherInvariant);
}

// psum_scatter / pscatter: untiled needs the dimension to have size n and removes it; tiled
// needs it divisible by n and divides it.
SVal Sema::scatter(const ast::Expr &c, ir::Prim p, const std::string &dimName) {
  const bool rooted = p == ir::Prim::ScatterFrom;
  auto a = rooted ? rootLast(bindArgs(c, {"x", "axes", "root", dimName, "tiled"}, 3))
                  : bindArgs(c, {"x", "axes", dimName, "tiled"}, 2);
  int64_t n = 1;
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, &n);
  ir::Value *x = evalArray(*a[0]);
  bool tiled = a[3] ? staticBool(*a[3], "tiled") : false;
  Loc dimAt = a[2] ? a[2]->loc : c.loc;
  int64_t dim = normAxis(a[2] ? staticInt(*a[2], dimName) : 0, x->type.rank(), dimAt, dimName);
  std::map<std::string, ir::Attr> params = {{"axes", axes}, {dimName, dim}, {"tiled", (int64_t)tiled}};
  if (rooted) params["root"] = staticRoot(*a[4], n, "root");
  // (the shape rule divides or removes the dimension, and refuses one the group does not
  // split, at the dimension's argument)
  return SVal::array(emitByRules(p, {x}, params, {c.loc, {a[0]->loc}, {{dimName, dimAt}}}), c.loc);
}
SVal Sema::bPsumScatter(const ast::Expr &c) {
  return scatter(c, ir::Prim::PsumScatter, "scatter_dimension");
}
SVal Sema::bPscatter(const ast::Expr &c) { return scatter(c, ir::Prim::Pscatter, "axis"); }

// Rooted collectives (PyTorch's broadcast, reduce, gather, scatter). The root (or
// broadcast's source) is a static group index: row-major over the listed axes, as axis_index.
int64_t Sema::staticRoot(const ast::Expr &e, int64_t n, const std::string &what) {
  const int64_t root = staticInt(e, what);
  if (root < 0 || root >= n)
    fail(DiagId::BadRoot, e.loc,
         what + " " + std::to_string(root) + " is not a device of the group, which has " + std::to_string(n) +
             " device(s)",
         "give the device's index in the group, from 0 to " + std::to_string(n - 1) +
             " (row-major over the listed axes, as axis_index counts)");
  return root;
}

SVal Sema::bBroadcast(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axes", "source"}, 3);
  int64_t n = 1;
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, &n);
  ir::Value *x = evalArray(*a[0]);
  const int64_t source = staticRoot(*a[2], n, "source");
  return SVal::array(emit(ir::Prim::Broadcast, {x}, x->type, c.loc, {{"axes", axes}, {"root", source}}), c.loc);
}

SVal Sema::bReduce(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axes", "root", "op"}, 3);
  int64_t n = 1;
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, &n);
  ir::Value *x = evalArray(*a[0]);
  const int64_t root = staticRoot(*a[2], n, "root");
  int64_t op = 0;  // (the runtime's SHM_REDUCE_SUM, _MAX, _MIN, _PROD; 4: mean, a sum divided)
  if (a[3]) {
    const std::vector<std::string> ops = {"sum", "max", "min", "prod", "mean"};
    auto it = a[3]->kind == ast::Expr::StringLit ? std::find(ops.begin(), ops.end(), a[3]->name) : ops.end();
    if (it == ops.end())
      fail(DiagId::BadReduceOp, a[3]->loc, "reduce's op is one of \"sum\", \"mean\", \"max\", \"min\", \"prod\"",
           "write op=\"sum\" (the default), \"mean\", \"max\", \"min\" or \"prod\"; bitwise reductions are pand, "
           "por, pxor");
    op = it - ops.begin();
  }
  if (x->type.dtype == ir::DType::Bool)
    fail(DiagId::DTypeMismatch, a[0]->loc, c.name + " needs numbers, got " + str(x->type), "cast(x, i32) first");
  if (op == 4 && !ir::isFloat(x->type.dtype))
    fail(DiagId::DTypeMismatch, a[0]->loc, "reduce with op=\"mean\" needs a float array, got " + str(x->type),
         "cast(x, f32) first");
  ir::Value *r = emit(ir::Prim::ReduceTo, {x}, x->type, c.loc, {{"axes", axes}, {"root", root}, {"op", op == 4 ? 0 : op}});
  if (op == 4)  // (PyTorch's avg: the sum over the group divided by its size, as pmean)
    r = emit(ir::Prim::Div, {r, constant(x->type.dtype, x->type.shape, {(double)n}, c.loc)}, x->type, c.loc);
  return SVal::array(r, c.loc);
}

SVal Sema::bGather(const ast::Expr &c) { return gather(c, ir::Prim::GatherTo); }
SVal Sema::bScatter(const ast::Expr &c) { return scatter(c, ir::Prim::ScatterFrom, "axis"); }

SVal Sema::bAllToAll(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axes", "split_axis", "concat_axis", "tiled"}, 4);
  int64_t n = 1;
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, &n);
  ir::Value *x = evalArray(*a[0]);
  bool tiled = a[4] ? staticBool(*a[4], "tiled") : false;
  int64_t rank = x->type.rank();
  int64_t split = normAxis(staticInt(*a[2], "split_axis"), rank, a[2]->loc, "split_axis");
  int64_t concat = normAxis(staticInt(*a[3], "concat_axis"), rank, a[3]->loc, "concat_axis");
  // (the shape rule moves the dimensions, and refuses a split the group does not divide, at
  // the split_axis argument; the element count does not change)
  return SVal::array(emitByRules(ir::Prim::AllToAll, {x},
                                 {{"axes", axes}, {"split_axis", split}, {"concat_axis", concat}, {"tiled", (int64_t)tiled}},
                                 {c.loc, {a[0]->loc}, {{"split_axis", a[2]->loc}, {"concat_axis", a[3]->loc}}}),
                     c.loc);
}

// perm=[(src, dst), ...]: group indices; each source and each destination at most once.
SVal Sema::bPpermute(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "axes", "perm"}, 3);
  int64_t n = 1;
  std::vector<int64_t> axes = resolveAxes(*a[1], c.name, c.loc, &n);
  ir::Value *x = evalArray(*a[0]);
  const ast::Expr &perm = *a[2];
  if (perm.kind != ast::Expr::ArrayLit && perm.kind != ast::Expr::TupleLit)
    fail(DiagId::BadPermutation, perm.loc, "perm must be a list of (source, destination) pairs",
         "write perm=[(0, 1), (1, 0)]");
  std::vector<int64_t> flat;
  std::vector<bool> usedSrc(n, false), usedDst(n, false);
  for (const auto &pair : perm.items) {
    if (pair->kind != ast::Expr::TupleLit || pair->items.size() != 2)
      fail(DiagId::BadPermutation, pair->loc, "each perm entry must be a (source, destination) pair",
           "write perm=[(0, 1), (1, 0)]");
    int64_t src = staticInt(*pair->items[0], "a perm source");
    int64_t dst = staticInt(*pair->items[1], "a perm destination");
    for (int64_t v : {src, dst})
      if (v < 0 || v >= n)
        fail(DiagId::BadPermutation, pair->loc,
             "device index " + std::to_string(v) + " is out of range for a group of " +
                 std::to_string(n),
             "use indices in [0, " + std::to_string(n - 1) + "]");
    if (usedSrc[src])
      fail(DiagId::BadPermutation, pair->loc,
           "device " + std::to_string(src) + " is a source twice", "each device sends at most once");
    if (usedDst[dst])
      fail(DiagId::BadPermutation, pair->loc,
           "device " + std::to_string(dst) + " is a destination twice",
           "each device receives at most once");
    usedSrc[src] = usedDst[dst] = true;
    flat.push_back(src);
    flat.push_back(dst);
  }
  return SVal::array(emit(ir::Prim::Ppermute, {x}, x->type, c.loc, {{"axes", axes}, {"perm", flat}}),
                     c.loc);
}

SVal Sema::bAxisIndex(const ast::Expr &c) {
  auto a = bindArgs(c, {"axes"}, 1);
  std::vector<int64_t> axes = resolveAxes(*a[0], c.name, c.loc, nullptr);
  ir::Type t;
  t.dtype = ir::DType::I32;
  return SVal::array(emit(ir::Prim::AxisIndex, {}, t, c.loc, {{"axes", axes}}), c.loc);
}

// The group size is static: a constant, no eqn of its own.
SVal Sema::bAxisSize(const ast::Expr &c) {
  auto a = bindArgs(c, {"axes"}, 1);
  int64_t n = 1;
  resolveAxes(*a[0], c.name, c.loc, &n);
  return SVal::array(constant(ir::DType::I32, {}, {(double)n}, c.loc), c.loc);
}

} // namespace shmapc::sema
