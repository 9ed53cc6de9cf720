// scan(f, init, xs, length=n, reverse=false, consts=(w, ...)), as jax.lax.scan:
// f(carries..., x slices..., consts...) returns (carries..., ys...); scan returns the final
// carries, then each y stacked along a new leading axis of size n. Each carry, xs, const and y
// may be a tree (stacked layers: a record of [L, ...] leaves scanned row by row); the loop
// carries and stacks their leaves. `consts` stands for what a
// JAX step function would close over (the language has no closures): passed unchanged to
// every step. It lowers to a `loop` over range(n) whose carries are f's carries
// and the stacks, each iteration writing its ys at row i with dynamic_update_slice; so it is
// differentiated as loops are (the stacks are updated linearly and never saved per
// iteration).
#include "sema/SemaImpl.h"

namespace shmapc::sema {

namespace {

ir::Type scalarI32() {
  ir::Type t;
  t.dtype = ir::DType::I32;
  return t;
}

} // namespace

// The values of an argument written as a tuple literal (one per element), or one value (an
// array or a tree), or None / absent (none).
std::vector<SVal> Sema::scanValues(const ast::Expr *e) {
  std::vector<SVal> out;
  if (!e || e->kind == ast::Expr::NoneLit) return out;
  auto value = [&](const ast::Expr &x) {
    SVal v = eval(x);
    if (v.kind == SVal::Axes || v.kind == SVal::Literal) v = SVal::array(toArray(v), x.loc);
    return v;
  };
  if (e->kind != ast::Expr::TupleLit) return {value(*e)};
  for (const ast::ExprPtr &item : e->items) out.push_back(value(*item));
  return out;
}

std::vector<SVal> Sema::scan(const ast::Expr &c) {
  auto a = bindArgs(c, {"f", "init", "xs", "length", "reverse", "consts"}, 2);
  FnValue f = evalFn(*a[0], "the first argument of scan");
  std::vector<SVal> initVals = scanValues(a[1]), xsVals = scanValues(a[2]), constVals = scanValues(a[5]);
  std::vector<ir::Value *> init = argLeaves(initVals), xs = argLeaves(xsVals), consts = argLeaves(constVals);
  bool reverse = a[4] ? staticBool(*a[4], "reverse") : false;
  const char *form = "write scan(f, init, xs) or scan(f, init, None, length=n)";
  // The trip count: the leading axis every xs shares, or length=.
  std::optional<int64_t> n;
  for (size_t j = 0; j < xs.size(); ++j) {
    if (xs[j]->type.rank() == 0)
      fail(DiagId::RankMismatch, a[2]->loc, "scan's xs must have a leading axis to scan over, got " + str(xs[j]->type),
           "pass arrays whose first axis is the one to scan");
    if (n && *n != xs[j]->type.shape[0])
      fail(DiagId::ShapeMismatch, a[2]->loc,
           "scan's xs differ in their leading axis: " + std::to_string(*n) + " and " +
               std::to_string(xs[j]->type.shape[0]),
           "every scanned array needs the same number of rows");
    n = xs[j]->type.shape[0];
  }
  if (a[3]) {
    int64_t len = staticInt(*a[3], "length");
    if (n && *n != len)
      fail(DiagId::ShapeMismatch, a[3]->loc,
           "length=" + std::to_string(len) + " but xs have " + std::to_string(*n) + " rows",
           "leave out length= when scanning arrays");
    n = len;
  }
  if (!n) fail(DiagId::ArgCount, c.loc, "scan needs xs or length= to know how many steps", form);
  if (*n < 1 || *n > INT32_MAX)
    fail(DiagId::BadArgument, a[3] ? a[3]->loc : a[2]->loc,
         "scan over " + std::to_string(*n) + " steps", "scan runs between 1 and 2^31 - 1 steps");

  // The body: params (i, captures..., carries..., stacks...).
  FuncCtx *outerCtx = cur_;
  Scope *outerScope = scope_;
  ir::Func *body = newNestedFunc("scan", c.loc);
  FuncCtx ctx;
  enterNested(ctx, body);
  Scope top;
  top.parent = scope_;
  top.owner = &ctx;
  ir::Value *index = body->newValue(scalarI32(), "i");
  std::vector<ir::Value *> carryParams;
  for (ir::Value *v : init) carryParams.push_back(body->newValue(v->type, v->hint));
  cur_ = &ctx;
  scope_ = &top;

  ir::Value *row = index;  // the row of xs and ys this step reads and writes
  if (reverse)
    row = emit(ir::Prim::Sub, {constant(ir::DType::I32, {}, {(double)(*n - 1)}, c.loc), index},
               scalarI32(), c.loc);
  ir::Value *zero = constant(ir::DType::I32, {}, {0.0}, c.loc);
  std::vector<SVal> args;
  size_t next = 0;
  for (const SVal &v : initVals) args.push_back(withLeaves(v, carryParams, next, c.loc));
  std::vector<ir::Value *> slices;
  for (ir::Value *x : xs) {
    ir::Value *inner = importValue(&ctx, x, outerCtx);
    std::vector<int64_t> sizes = x->type.shape;
    sizes[0] = 1;
    std::vector<ir::Value *> ins{inner, row};
    for (size_t d = 1; d < sizes.size(); ++d) ins.push_back(zero);
    ir::Type t = x->type;
    t.shape = sizes;
    ir::Value *slice = emit(ir::Prim::DynamicSlice, ins, t, c.loc, {{"sizes", sizes}});
    slices.push_back(reshape(slice, {sizes.begin() + 1, sizes.end()}, c.loc));
  }
  next = 0;
  for (const SVal &v : xsVals) args.push_back(withLeaves(v, slices, next, c.loc));
  std::vector<ir::Value *> constLeaves;
  for (ir::Value *k : consts) constLeaves.push_back(importValue(&ctx, k, outerCtx));
  next = 0;
  for (const SVal &v : constVals) args.push_back(withLeaves(v, constLeaves, next, c.loc));
  std::vector<SVal> res = applyFn(f, args, c.loc);
  if (res.size() < initVals.size())
    fail(DiagId::ArgCount, c.loc,
         f.text + " returns " + std::to_string(res.size()) + " value(s) but scan carries " +
             std::to_string(initVals.size()),
         "f(carries..., xs...) must return the new carries first, then the values to stack");
  std::vector<ir::Value *> results, stackParams;
  for (size_t k = 0; k < initVals.size(); ++k) {
    std::vector<ir::Value *> leaves;
    std::vector<std::string> paths;
    if (initVals[k].kind == SVal::Tuple || res[k].kind == SVal::Tuple) {  // a tree carry keeps its structure
      leavesOf(assignedTuple("carry " + std::to_string(k) + " of scan", initVals[k], res[k], c.loc, true), "",
               leaves, paths);
      results.insert(results.end(), leaves.begin(), leaves.end());
      continue;
    }
    const ir::Type &start = initVals[k].value->type;
    ir::Value *r = res[k].kind == SVal::Literal ? literalAs(res[k], start.dtype, start.shape, c.loc) : toArray(res[k]);
    if (!r->type.sameShape(start))
      fail(DiagId::AssignType, c.loc,
           f.text + " returns " + str(r->type) + " for carry " + std::to_string(k) +
               ", which starts as " + str(start),
           "a carry keeps its type from step to step: return the same dtype and shape");
    results.push_back(r);
  }
  std::vector<SVal> ysVals(res.begin() + (std::ptrdiff_t)initVals.size(), res.end());
  for (ir::Value *y : argLeaves(ysVals)) {
    ir::Type st = y->type;
    st.shape.insert(st.shape.begin(), *n);
    ir::Value *stack = body->newValue(st, "ys");
    stackParams.push_back(stack);
    std::vector<int64_t> one = y->type.shape;
    one.insert(one.begin(), 1);
    std::vector<ir::Value *> ins{stack, reshape(y, one, c.loc), row};
    for (size_t d = 1; d < one.size(); ++d) ins.push_back(zero);
    results.push_back(emit(ir::Prim::DynamicUpdateSlice, ins, st, c.loc));
  }
  cur_ = outerCtx;
  scope_ = outerScope;
  body->results = results;
  body->params = {index};
  for (ir::Value *outer : ctx.captureOrder) body->params.push_back(ctx.captures[outer]);
  body->params.insert(body->params.end(), carryParams.begin(), carryParams.end());
  body->params.insert(body->params.end(), stackParams.begin(), stackParams.end());

  ir::Eqn e;
  e.prim = ir::Prim::Loop;
  e.ins = ctx.captureOrder;
  e.ins.insert(e.ins.end(), init.begin(), init.end());
  for (ir::Value *s : stackParams) e.ins.push_back(constant(s->type.dtype, s->type.shape, {0.0}, c.loc));
  e.bodies = {body};
  e.loc = c.loc;
  e.params["lo"] = (int64_t)0;
  e.params["hi"] = *n;
  e.params["num_consts"] = (int64_t)ctx.captureOrder.size();
  for (ir::Value *v : init) e.outs.push_back(cur_->func->newValue(v->type, v->hint));
  for (ir::Value *s : stackParams) e.outs.push_back(cur_->func->newValue(s->type, "ys"));
  std::vector<SVal> out;
  next = 0;
  for (const SVal &v : initVals) out.push_back(withLeaves(v, e.outs, next, c.loc));
  for (const SVal &y : ysVals) out.push_back(withLeaves(y, e.outs, next, c.loc));
  pushEqn(std::move(e));
  return out;
}

} // namespace shmapc::sema
