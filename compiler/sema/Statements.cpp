// Statements, returns, and control flow. Loop bodies and cond branches become nested Funcs:
// outer names they assign are found syntactically beforehand (loop carries / cond results);
// outer values they only read are captured on first use (Scope.cpp) and become the loop's
// consts / the cond's operands.
#include "sema/SemaImpl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>

namespace shmapc::sema {

// ---- function bodies and returns

void Sema::lowerFunctionBody(const ast::FuncDecl &decl, Instance &inst) {
  for (const ast::StmtPtr &s : decl.body) {
    if (s->kind == ast::Stmt::Return) {
      lowerReturn(*s, decl, inst);
      return;  // statements after a return never run, as in a Python function
    }
    lowerStmt(*s);
  }
  if (decl.hasResultArrow && !decl.results.empty()) {
    std::string types;
    for (const ast::TypeExpr &t : decl.results) types += (types.empty() ? "" : ", ") + str(typeOf(t));
    fail(DiagId::MissingReturn, decl.loc,
         decl.name + " declares result " + types + " but can reach its end without returning",
         "end the function with `return ...;`");
  }
}

void Sema::lowerReturn(const ast::Stmt &s, const ast::FuncDecl &decl, Instance &inst) {
  cur_->func->returnLoc = s.loc;  // variance errors on results point at the return
  std::vector<SVal> vals;
  if (s.values.size() == 1 && s.values[0]->kind == ast::Expr::Call)
    vals = evalMulti(*s.values[0]);  // `return f(x);` passes on all of f's results
  else
    for (const ast::ExprPtr &e : s.values) vals.push_back(eval(*e));
  if (decl.hasResultArrow && vals.size() != decl.results.size())
    fail(DiagId::ResultCount, s.loc,
         decl.name + " declares " + std::to_string(decl.results.size()) +
             " result(s) but this returns " + std::to_string(vals.size()),
         "return one value per declared result type");
  for (size_t i = 0; i < vals.size(); ++i) {
    const ast::TypeExpr *want = decl.hasResultArrow ? &decl.results[i] : nullptr;
    const SVal &v = vals[i];
    if (v.kind == SVal::Axes)
      fail(DiagId::BadArgument, v.loc, "cannot return the axis names " + describe(v),
           "functions return arrays");
    if (v.kind == SVal::Tuple) {  // its leaves, in order; the caller rebuilds it
      if (want)
        fail(DiagId::ReturnType, v.loc, decl.name + " returns " + describe(v) + " as result " + std::to_string(i),
             "a declared result type is an array type: leave out the `->` to return a tuple");
      std::vector<ir::Value *> leaves;
      std::vector<std::string> paths;
      leavesOf(v, "", leaves, paths);
      for (ir::Value *r : leaves) {
        inst.func->results.push_back(r);
        inst.results.push_back(r->type);
      }
      inst.returned.push_back(v);
      continue;
    }
    ir::Value *r = v.kind == SVal::Literal && want ? literalAs(v, typeOf(*want).dtype, {}, v.loc)
                                                   : toArray(v);
    if (want && !r->type.sameShape(typeOf(*want)))
      failWithNote(DiagId::ReturnType, v.loc,
                   decl.name + " returns " + str(r->type) + " as result " + std::to_string(i) +
                       " but declares " + str(typeOf(*want)),
                   decl.shmap ? "shmap result types are per-device block types; fix the "
                                "declared type or the returned value"
                              : "fix the declared result type or the returned value",
                   want->loc, "result type declared here");
    inst.func->results.push_back(r);
    inst.results.push_back(r->type);
    inst.returned.push_back(SVal::array(r, v.loc));
  }
}

// ---- statements

void Sema::lowerBlock(const ast::Block &block) {
  for (const ast::StmtPtr &s : block) lowerStmt(*s);
}

void Sema::lowerStmt(const ast::Stmt &s) {
  switch (s.kind) {
  case ast::Stmt::Let: lowerLet(s); return;
  case ast::Stmt::Assign: lowerAssign(s); return;
  case ast::Stmt::Print: lowerPrint(s); return;
  case ast::Stmt::ExprStmt: evalMulti(*s.value); return;
  case ast::Stmt::For: lowerFor(s); return;
  case ast::Stmt::While: lowerWhile(s); return;
  case ast::Stmt::If: lowerIf(s); return;
  case ast::Stmt::Return:
    fail(DiagId::ReturnInControlFlow, s.loc, "return inside a loop or if branch",
         "assign the value to a name declared before the loop/if and return it at the end "
         "of the function");
  }
}

void Sema::lowerLet(const ast::Stmt &s) {
  if (s.names.size() == 1) {
    SVal v = eval(*s.value);
    // A literal bound to a name becomes a value of its default dtype (i32 / f32).
    if (v.kind == SVal::Literal) v = SVal::array(toArray(v), v.loc);
    nameLeaves(v, s.names[0]);
    bind(s.names[0], v);
    return;
  }
  std::vector<SVal> vals = evalMulti(*s.value);
  // `let a, b = t;` of one tuple binds its elements
  if (vals.size() == 1 && vals[0].kind == SVal::Tuple) vals = destructure(vals[0], s.names.size(), s.loc);
  if (vals.size() != s.names.size())
    fail(DiagId::ResultCount, s.loc,
         "cannot bind " + std::to_string(s.names.size()) + " names to " +
             std::to_string(vals.size()) + " value(s)",
         "bind as many names as the call returns");
  for (size_t i = 0; i < vals.size(); ++i) {
    SVal v = vals[i].kind == SVal::Tuple ? vals[i] : SVal::array(toArray(vals[i]), vals[i].loc);
    nameLeaves(v, s.names[i]);
    bind(s.names[i], v);
  }
}

void Sema::lowerAssign(const ast::Stmt &s) {
  Loc at = s.nameLocs.empty() ? s.loc : s.nameLocs[0];
  if (s.names.size() == 1) return assignName(s.names.at(0), at, eval(*s.value));
  std::vector<SVal> vals = evalMulti(*s.value);
  // `a, b = t;` of one tuple assigns its elements
  if (vals.size() == 1 && vals[0].kind == SVal::Tuple) vals = destructure(vals[0], s.names.size(), s.loc);
  if (vals.size() != s.names.size())
    fail(DiagId::ResultCount, s.loc,
         "cannot assign " + std::to_string(vals.size()) + " value(s) to " +
             std::to_string(s.names.size()) + " names",
         "assign as many names as the call returns");
  for (size_t i = 0; i < vals.size(); ++i) assignName(s.names[i], s.nameLocs[i], vals[i]);
}

void Sema::assignName(const std::string &name, Loc loc, SVal v) {
  Scope *scope = findScope(name);
  if (!scope) {
    lookup(name, loc);  // reports the unknown name
    return;
  }
  SVal &old = scope->names[name];
  if (old.kind == SVal::Tuple || v.kind == SVal::Tuple) {
    if (scope->owner != cur_)
      fail(DiagId::AssignType, loc, "cannot assign to " + name + " from inside this body",
           "assign it outside the loop/if");
    old = assignedTuple(name, old, v, loc, scope->loopCarries);
    nameLeaves(old, name);
    return;
  }
  if (old.kind != SVal::Array)
    fail(DiagId::AssignType, loc, "cannot assign to " + name + ": it holds axis names",
         "bind a new name with let");
  if (scope->owner != cur_)
    fail(DiagId::AssignType, loc, "cannot assign to " + name + " from inside this body",
         "assign it outside the loop/if");
  ir::Type want = old.value->type;
  ir::Value *nv = v.kind == SVal::Literal ? literalAs(v, want.dtype, {}, v.loc) : toArray(v);
  if (!nv->type.sameShape(want))
    fail(DiagId::AssignType, loc,
         "cannot assign " + str(nv->type) + " to " + name + ", which holds " + str(want),
         scope->loopCarries
             ? name + " is carried around the loop, so every iteration must leave it a " +
                   str(want) + "; bind a new name with let for a value of another type"
             : "a name keeps its type when assigned; use `let " + name +
                   " = ...;` to bind a value of another type");
  if (nv->hint.empty()) nv->hint = name;
  old = SVal::array(nv, loc);
}

void Sema::lowerPrint(const ast::Stmt &s) {
  if (cur_->mesh)
    failWithCallChain(DiagId::PrintInsideShmap, s.loc, "print inside a shmap body",
                      "return the value from the shmap function and print it in main");
  printValue(s.label, eval(*s.value), s.loc);
}

// ---- control flow

// `ctx` describes nested body `f` (a loop body, while part or branch) of the current function.
void Sema::enterNested(FuncCtx &ctx, ir::Func *f) {
  ctx.func = f;
  ctx.mesh = cur_->mesh;
  ctx.unit = cur_->unit;
  ctx.parent = cur_;
}

// Names assigned in `block` (recursively) that are not bound by a `let` (or loop variable)
// of the block itself before the assignment: the names the block changes outside itself.
static void collectAssigned(const ast::Block &block, std::set<std::string> locals,
                            std::vector<std::string> &out) {
  for (const ast::StmtPtr &s : block) {
    switch (s->kind) {
    case ast::Stmt::Let:
      locals.insert(s->names.begin(), s->names.end());
      break;
    case ast::Stmt::Assign:
      for (const std::string &n : s->names)
        if (!locals.count(n) && std::find(out.begin(), out.end(), n) == out.end())
          out.push_back(n);
      break;
    case ast::Stmt::For: {
      std::set<std::string> inner = locals;
      inner.insert(s->names.at(0));
      collectAssigned(s->body, inner, out);
      break;
    }
    case ast::Stmt::While:
      collectAssigned(s->body, locals, out);
      break;
    case ast::Stmt::If:
      collectAssigned(s->body, locals, out);
      collectAssigned(s->elseBody, locals, out);
      break;
    default:
      break;
    }
  }
}

std::vector<std::string> Sema::outerAssignedNames(const ast::Block &a, const ast::Block *b,
                                                  const std::string &local) {
  std::vector<std::string> names, out;
  std::set<std::string> locals;
  if (!local.empty()) locals.insert(local);
  collectAssigned(a, locals, names);
  if (b) collectAssigned(*b, locals, names);
  for (const std::string &n : names) {
    Scope *s = findScope(n);
    if (s && (s->names[n].kind == SVal::Array || s->names[n].kind == SVal::Tuple)) out.push_back(n);
  }
  return out;
}

// A bound of range(lo, hi): a static integer that fits the i32 loop variable (else it would
// wrap).
int64_t Sema::loopBound(const ast::Expr &e) {
  std::optional<int64_t> v = staticIntOpt(e);
  if (!v)
    fail(DiagId::BadArgument, e.loc, "loop bounds must be static integers",
         "use literals, x.shape[d], axis_size(...) and + - * // % of them; for a data-dependent "
         "trip count, mask the iterations");
  if (*v < INT32_MIN || *v > INT32_MAX)
    fail(DiagId::LoopBoundTooLarge, e.loc,
         "loop bound " + std::to_string(*v) + " does not fit the loop variable (i32)",
         "loop bounds must lie in [-2^31, 2^31 - 1]; split a longer loop into nested loops");
  return *v;
}

void Sema::lowerFor(const ast::Stmt &s) {
  const std::string &var = s.names.at(0);
  const Carried carries = carried(outerAssignedNames(s.body, nullptr, var), s.loc);
  const std::vector<ir::Value *> &inits = carries.leaves;

  ir::Func *body = newNestedFunc("loop", s.loc);
  FuncCtx ctx;
  enterNested(ctx, body);
  Scope top;  // the carries: what each iteration starts from and leaves behind
  top.parent = scope_;
  top.owner = &ctx;
  top.loopCarries = true;
  ir::Type i32;
  i32.dtype = ir::DType::I32;
  ir::Value *index = body->newValue(i32, var);
  std::vector<ir::Value *> carryParams;
  for (size_t k = 0; k < inits.size(); ++k) carryParams.push_back(body->newValue(inits[k]->type, carries.paths[k]));
  bindCarried(carries, carryParams, &top, s.loc);
  Scope inner;  // the body's own lets
  inner.parent = &top;
  inner.owner = &ctx;
  inner.names[var] = SVal::array(index, s.loc);

  FuncCtx *savedCtx = cur_;
  Scope *savedScope = scope_;
  cur_ = &ctx;
  scope_ = &inner;
  lowerBlock(s.body);
  cur_ = savedCtx;
  scope_ = savedScope;

  carriedLeaves(carries, top, body->results);
  body->params = {index};
  for (ir::Value *outer : ctx.captureOrder) body->params.push_back(ctx.captures[outer]);
  body->params.insert(body->params.end(), carryParams.begin(), carryParams.end());

  ir::Eqn e;
  e.prim = ir::Prim::Loop;
  e.ins = ctx.captureOrder;
  e.ins.insert(e.ins.end(), inits.begin(), inits.end());
  e.bodies = {body};
  e.loc = s.loc;
  e.params["lo"] = loopBound(*s.values[0]);
  e.params["hi"] = loopBound(*s.values[1]);
  e.params["num_consts"] = (int64_t)ctx.captureOrder.size();
  std::vector<ir::Value *> outs;
  for (size_t k = 0; k < inits.size(); ++k) outs.push_back(cur_->func->newValue(inits[k]->type, carries.paths[k]));
  e.outs = outs;
  pushEqn(std::move(e));
  bindCarried(carries, outs, nullptr, s.loc);
}

// The predicate (isPredicate) or the body of a while loop, as a nested Func whose params are
// (captured outer values..., carries...): the captures are added by lowerWhile, which gives
// both Funcs the union of what either reads from outside.
ir::Func *Sema::lowerWhilePart(const ast::Stmt &s, const Carried &carries, bool isPredicate, FuncCtx &ctx) {
  ir::Func *f = newNestedFunc(isPredicate ? "while_cond" : "while_body", s.loc);
  enterNested(ctx, f);
  Scope top;  // the carries
  top.parent = scope_;
  top.owner = &ctx;
  top.loopCarries = true;
  std::vector<ir::Value *> carryParams;  // each carried name's leaves
  for (size_t k = 0; k < carries.leaves.size(); ++k)
    carryParams.push_back(f->newValue(carries.leaves[k]->type, carries.paths[k]));
  bindCarried(carries, carryParams, &top, s.loc);
  Scope inner;
  inner.parent = &top;
  inner.owner = &ctx;

  FuncCtx *savedCtx = cur_;
  Scope *savedScope = scope_;
  cur_ = &ctx;
  scope_ = &inner;
  if (isPredicate) {
    SVal c = eval(*s.value);
    if (c.kind != SVal::Array || c.value->type.dtype != ir::DType::Bool ||
        c.value->type.rank() != 0)
      fail(DiagId::NotScalarBool, s.value->loc,
           "the condition of while must be bool[], got " + describe(c),
           c.kind == SVal::Array && c.value->type.dtype == ir::DType::Bool
               ? "reduce it to one bool first, e.g. while max(x) < 10.0 { ... }"
               : "compare it, e.g. while err > 1e-6 { ... }");
    f->results = {c.value};
  } else {
    lowerBlock(s.body);
    carriedLeaves(carries, top, f->results);
  }
  cur_ = savedCtx;
  scope_ = savedScope;
  f->params = carryParams;  // the captures go in front (lowerWhile)
  return f;
}

// `while cond { body }`: the names the body assigns are the carries; the predicate is a
// Func of the carries evaluated before every iteration.
void Sema::lowerWhile(const ast::Stmt &s) {
  std::vector<std::string> assigned = outerAssignedNames(s.body, nullptr, "");
  if (assigned.empty())
    fail(DiagId::WhileAssignsNothing, s.loc,
         "this while loop assigns no array declared before it, so its condition can never change",
         "assign the values the condition reads in the body, e.g. `i = i + 1;`");
  const Carried carries = carried(std::move(assigned), s.loc);
  const std::vector<ir::Value *> &inits = carries.leaves;
  FuncCtx predCtx, bodyCtx;
  ir::Func *pred = lowerWhilePart(s, carries, true, predCtx);
  ir::Func *body = lowerWhilePart(s, carries, false, bodyCtx);

  std::vector<ir::Value *> consts = predCtx.captureOrder;
  for (ir::Value *v : bodyCtx.captureOrder)
    if (std::find(consts.begin(), consts.end(), v) == consts.end()) consts.push_back(v);
  for (FuncCtx *ctx : {&predCtx, &bodyCtx}) {
    std::vector<ir::Value *> params;
    for (ir::Value *c : consts) {
      auto it = ctx->captures.find(c);
      params.push_back(it != ctx->captures.end() ? it->second
                                                 : ctx->func->newValue(c->type, c->hint));
    }
    params.insert(params.end(), ctx->func->params.begin(), ctx->func->params.end());
    ctx->func->params = params;
  }

  ir::Eqn e;
  e.prim = ir::Prim::While;
  e.ins = consts;
  e.ins.insert(e.ins.end(), inits.begin(), inits.end());
  e.bodies = {pred, body};
  e.loc = s.loc;
  e.params["num_consts"] = (int64_t)consts.size();
  for (size_t k = 0; k < inits.size(); ++k) e.outs.push_back(cur_->func->newValue(inits[k]->type, carries.paths[k]));
  std::vector<ir::Value *> outs = e.outs;
  pushEqn(std::move(e));
  bindCarried(carries, outs, nullptr, s.loc);
}

// One branch of an `if`: its params are the captured outer values, its results the current
// values of the names `outs` carries at its end (unassigned ones pass through).
ir::Func *Sema::lowerBranch(const ast::Block &body, const Carried &outs, const std::string &suffix, Loc loc,
                            FuncCtx &ctx) {
  ir::Func *f = newNestedFunc(suffix, loc);
  enterNested(ctx, f);
  Scope top;
  top.parent = scope_;
  top.owner = &ctx;
  Scope inner;
  inner.parent = &top;
  inner.owner = &ctx;

  FuncCtx *savedCtx = cur_;
  Scope *savedScope = scope_;
  cur_ = &ctx;
  scope_ = &top;
  for (const std::string &n : outs.names) top.names[n] = lookup(n, loc);
  scope_ = &inner;
  lowerBlock(body);
  cur_ = savedCtx;
  scope_ = savedScope;
  carriedLeaves(outs, top, f->results);
  return f;
}

void Sema::lowerIf(const ast::Stmt &s) {
  SVal c = eval(*s.value);
  if (c.kind != SVal::Array || c.value->type.dtype != ir::DType::Bool || c.value->type.rank() != 0)
    fail(DiagId::NotScalarBool, s.value->loc,
         "the condition of if must be bool[], got " + describe(c),
         c.kind == SVal::Array && c.value->type.dtype == ir::DType::Bool
             ? "reduce it to one bool, or use select(c, a, b) for an element-wise choice"
             : "compare it, e.g. if x > 0 { ... }");
  const Carried assigned = carried(outerAssignedNames(s.body, &s.elseBody, ""), s.loc);
  FuncCtx thenCtx, elseCtx;
  ir::Func *thenF = lowerBranch(s.body, assigned, "then", s.loc, thenCtx);
  ir::Func *elseF = lowerBranch(s.elseBody, assigned, "else", s.loc, elseCtx);

  // Both branches take the same operands: everything either of them reads from outside.
  std::vector<ir::Value *> operands = thenCtx.captureOrder;
  for (ir::Value *v : elseCtx.captureOrder)
    if (std::find(operands.begin(), operands.end(), v) == operands.end()) operands.push_back(v);
  for (FuncCtx *ctx : {&thenCtx, &elseCtx})
    for (ir::Value *op : operands) {
      auto it = ctx->captures.find(op);
      ctx->func->params.push_back(it != ctx->captures.end() ? it->second
                                                            : ctx->func->newValue(op->type, op->hint));
    }

  ir::Eqn e;
  e.prim = ir::Prim::Cond;
  e.ins = {c.value};
  e.ins.insert(e.ins.end(), operands.begin(), operands.end());
  e.bodies = {thenF, elseF};
  e.loc = s.loc;
  for (size_t k = 0; k < thenF->results.size(); ++k)
    e.outs.push_back(cur_->func->newValue(thenF->results[k]->type, assigned.paths.at(k)));
  std::vector<ir::Value *> outs = e.outs;
  pushEqn(std::move(e));
  bindCarried(assigned, outs, nullptr, s.loc);
}

} // namespace shmapc::sema
