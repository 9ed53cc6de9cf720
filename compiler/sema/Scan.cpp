// scan(f, init, xs, length=n, reverse=false, consts=(w, ...)), as jax.lax.scan:
// f(carries..., x slices..., consts...) returns (carries..., ys...); scan returns the final
// carries, then each y stacked along a new leading axis of size n. `consts` stands for what a
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

// The arrays of an argument that is one array, a tuple of arrays, or None / absent (none).
std::vector<ir::Value *> Sema::arrayOrTuple(const ast::Expr *e) {
  std::vector<ir::Value *> out;
  if (!e || e->kind == ast::Expr::NoneLit) return out;
  if (e->kind != ast::Expr::TupleLit) return {evalArray(*e)};
  for (const ast::ExprPtr &item : e->items) out.push_back(evalArray(*item));
  return out;
}

std::vector<SVal> Sema::scan(const ast::Expr &c) {
  auto a = bindArgs(c, {"f", "init", "xs", "length", "reverse", "consts"}, 2);
  FnValue f = evalFn(*a[0], "the first argument of scan");
  std::vector<ir::Value *> init = arrayOrTuple(a[1]), xs = arrayOrTuple(a[2]);
  std::vector<ir::Value *> consts = arrayOrTuple(a[5]);
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
  for (ir::Value *p : carryParams) args.push_back(SVal::array(p, c.loc));
  for (ir::Value *x : xs) {
    ir::Value *inner = importValue(&ctx, x, outerCtx);
    std::vector<int64_t> sizes = x->type.shape;
    sizes[0] = 1;
    std::vector<ir::Value *> ins{inner, row};
    for (size_t d = 1; d < sizes.size(); ++d) ins.push_back(zero);
    ir::Type t = x->type;
    t.shape = sizes;
    ir::Value *slice = emit(ir::Prim::DynamicSlice, ins, t, c.loc, {{"sizes", sizes}});
    args.push_back(SVal::array(reshape(slice, {sizes.begin() + 1, sizes.end()}, c.loc), c.loc));
  }
  for (ir::Value *k : consts) args.push_back(SVal::array(importValue(&ctx, k, outerCtx), c.loc));
  std::vector<SVal> res = applyFn(f, args, c.loc);
  if (res.size() < init.size())
    fail(DiagId::ArgCount, c.loc,
         f.text + " returns " + std::to_string(res.size()) + " value(s) but scan carries " +
             std::to_string(init.size()),
         "f(carries..., xs...) must return the new carries first, then the values to stack");
  std::vector<ir::Value *> results, stackParams;
  for (size_t k = 0; k < init.size(); ++k) {
    ir::Value *r = res[k].kind == SVal::Literal ? literalAs(res[k], init[k]->type.dtype, init[k]->type.shape, c.loc)
                                                : toArray(res[k]);
    if (!r->type.sameShape(init[k]->type))
      fail(DiagId::AssignType, c.loc,
           f.text + " returns " + str(r->type) + " for carry " + std::to_string(k) +
               ", which starts as " + str(init[k]->type),
           "a carry keeps its type from step to step: return the same dtype and shape");
    results.push_back(r);
  }
  for (size_t j = init.size(); j < res.size(); ++j) {
    ir::Value *y = toArray(res[j]);
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
  std::vector<SVal> out;
  for (ir::Value *v : init) e.outs.push_back(cur_->func->newValue(v->type, v->hint));
  for (ir::Value *s : stackParams) e.outs.push_back(cur_->func->newValue(s->type, "ys"));
  for (ir::Value *o : e.outs) out.push_back(SVal::array(o, c.loc));
  pushEqn(std::move(e));
  return out;
}

} // namespace shmapc::sema
