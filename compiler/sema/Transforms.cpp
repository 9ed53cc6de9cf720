// Program transformations in the language, like JAX's: grad, value_and_grad, vjp, jvp and
// transpose take a function and return a function; applying it lowers to a `jvp` or `vjp`
// equation over a Func that applies the inner function to the argument types at hand (its
// trace). The differentiate pass later replaces each equation by a call of the derived Func.
//
//   grad(f, argnums=0)(x...)            -> df/dx[argnums]            (f returns one float scalar)
//   value_and_grad(f, argnums=0)(x...)  -> f(x), df/dx[argnums]
//   vjp(f, argnums=all)(x..., ct...)    -> f(x)..., cotangents of x[argnums]
//   jvp(f)(x..., t...)                  -> f(x)..., tangents of f's results
//   transpose(f, argnums=all)(y..., ct...) -> cotangents of the linear params x[argnums];
//                                          y are the other params; the linear params' types
//                                          come from f's declaration
//   check_grads(f, x..., seed=0, eps=1e-3) -> the largest relative error between central finite
//                                          differences, jvp and vjp along random directions
#include "sema/SemaImpl.h"

#include <algorithm>

namespace shmapc::sema {

namespace {

const char *const kTransforms[] = {"grad", "value_and_grad", "vjp", "jvp", "transpose"};

bool isTransformName(const std::string &n) {
  return std::find(std::begin(kTransforms), std::end(kTransforms), n) != std::end(kTransforms);
}

} // namespace

// ---- function values

std::optional<FnValue> Sema::evalFnOpt(const ast::Expr &e, bool builtinsToo) {
  if (e.kind == ast::Expr::Name) {
    if (e.module.empty() && findScope(e.name)) return std::nullopt;  // a local value shadows
    if (!e.module.empty() && findScope(e.module)) return std::nullopt;  // a record's field: p.w
    const Unit *unit = nullptr;
    const ast::FuncDecl *decl = findFunction(e, unit);
    if (!decl && builtinsToo && e.module.empty() && builtins().count(e.name)) {
      FnValue f;
      f.kind = FnValue::Builtin;
      f.loc = e.loc;
      f.text = e.name;
      return f;
    }
    if (!decl) return std::nullopt;
    FnValue f;
    f.decl = decl;
    f.unit = unit;
    f.loc = e.loc;
    f.text = (e.module.empty() ? "" : e.module + ".") + e.name;
    return f;
  }
  if (e.kind != ast::Expr::Call || e.callee || !e.module.empty() || !isTransformName(e.name))
    return std::nullopt;
  if (e.items.empty())
    fail(DiagId::TransformArgs, e.loc, e.name + " takes a function",
         "write " + e.name + "(f), where f is a function defined with def");
  std::optional<FnValue> inner = evalFnOpt(*e.items[0]);
  if (!inner) {
    if (e.name == "transpose") return std::nullopt;  // transpose(x, perm) of an array
    fail(DiagId::NotAFunction, e.items[0]->loc, e.name + " takes a function, not a value",
         "pass the name of a function defined with def, e.g. " + e.name + "(loss)");
  }
  FnValue f;
  f.kind = e.name == "grad"             ? FnValue::Grad
           : e.name == "value_and_grad" ? FnValue::ValueAndGrad
           : e.name == "vjp"            ? FnValue::Vjp
           : e.name == "jvp"            ? FnValue::Jvp
                                        : FnValue::Transpose;
  f.inner = std::make_shared<FnValue>(*inner);
  f.loc = e.loc;
  f.text = e.name + "(" + inner->text + ")";
  if (e.items.size() > 1)
    fail(DiagId::TransformArgs, e.items[1]->loc,
         e.name + " takes one function; its other options are keywords",
         f.kind == FnValue::Jvp ? "write jvp(f)(primals..., tangents...)"
                                : "write " + e.name + "(f, argnums=(0, 1))");
  for (const ast::Expr::KwArg &kw : e.kwargs) {
    if (kw.name != "argnums" || f.kind == FnValue::Jvp)
      fail(DiagId::TransformArgs, kw.loc, e.name + " has no option " + kw.name,
           f.kind == FnValue::Jvp ? "jvp differentiates with respect to every argument"
                                  : "its one option is argnums=");
    f.argnums = staticIntList(*kw.value, "argnums");
    if (f.argnums.empty())
      fail(DiagId::TransformArgs, kw.loc, "argnums is empty: " + e.name + " would differentiate nothing",
           "list at least one argument position, e.g. argnums=0");
    f.argnumsLoc = kw.loc;
    f.hasArgnums = true;
  }
  return f;
}

FnValue Sema::evalFn(const ast::Expr &e, const std::string &what, bool builtinsToo) {
  if (auto f = evalFnOpt(e, builtinsToo)) return *f;
  fail(DiagId::NotAFunction, e.loc, what + " must be a function",
       "pass the name of a function defined with def, or a transform of one such as grad(f)");
}

// A call whose callee is a function value: `grad(f)(x)`, or a transform used without
// arguments, which is an error.
std::vector<SVal> Sema::evalApply(const ast::Expr &call) {
  FnValue f = evalFn(*call.callee, "the called expression");
  if (!call.kwargs.empty())
    fail(DiagId::BadArgument, call.kwargs[0].loc,
         "keyword argument " + call.kwargs[0].name + " passed to " + f.text,
         "transformed functions take positional arguments only");
  std::vector<SVal> args;
  for (const ast::ExprPtr &item : call.items) args.push_back(eval(*item));
  return applyFn(f, args, call.loc);
}

void Sema::rejectUnappliedTransform(const ast::Expr &call) {
  if (call.callee || !evalFnOpt(call)) return;
  fail(DiagId::FunctionNotCalled, call.loc,
       call.name + "(...) is a function; apply it to arguments",
       "write e.g. " + call.name + "(f)(x); functions are not values that can be bound or printed");
}

// ---- tracing: a Func that applies `f` to parameters of the given types

Sema::Trace Sema::traceFn(const FnValue &f, const std::vector<ArgDesc> &args, Loc loc) {
  // Named after what it applies (transpose(f) -> transpose_f); traces vanish once
  // differentiated, so their names need not be unique.
  std::string name;
  for (char ch : f.text)
    if (ch != ')') name += ch == '(' || ch == '.' ? '_' : ch;
  ir::Func *w = module_->newFunc(name);
  w->isTrace = true;
  w->loc = loc;
  w->mesh = cur_->mesh;
  FuncCtx ctx;
  ctx.func = w;
  ctx.mesh = cur_->mesh;
  ctx.unit = cur_->unit;
  Scope scope;
  scope.owner = &ctx;
  std::vector<SVal> params;
  for (size_t i = 0; i < args.size(); ++i) {
    // Named like the function's params, so that messages about them read naturally; a tree
    // argument is one param per leaf, named by path, and f sees the tree rebuilt.
    std::string hint = f.decl && i < f.decl->params.size() ? f.decl->params[i].name : "";
    if (args[i].isTuple) {
      params.push_back(tupleParam(args[i], *w, hint, loc));
      continue;
    }
    ir::Value *p = w->newValue(args[i].type, hint);
    w->params.push_back(p);
    params.push_back(SVal::array(p, loc));
  }
  FuncCtx *savedCtx = cur_;
  Scope *savedScope = scope_;
  cur_ = &ctx;
  scope_ = &scope;
  std::vector<SVal> results = applyFn(f, params, loc);
  std::vector<std::string> paths;
  for (const SVal &r : results) leavesOf(r, "", w->results, paths);
  cur_ = savedCtx;
  scope_ = savedScope;
  Trace t{w, {}, results};
  for (ir::Value *r : w->results) t.results.push_back(r->type);
  return t;
}

ArgDesc Sema::describeArg(const SVal &v) {
  ArgDesc d;
  if (v.kind != SVal::Tuple) {
    d.type = toArray(v)->type;
    return d;
  }
  d.isTuple = true;
  d.keys = v.keys;
  for (const SVal &item : v.items) d.items.push_back(describeArg(item));
  return d;
}

static std::vector<ArgDesc> arrayDescs(const std::vector<ir::Type> &types) {
  std::vector<ArgDesc> out(types.size());
  for (size_t i = 0; i < types.size(); ++i) out[i].type = types[i];
  return out;
}

static void descLeafTypes(const ArgDesc &d, std::vector<ir::Type> &out) {
  if (!d.isTuple) {
    out.push_back(d.type);
    return;
  }
  for (const ArgDesc &item : d.items) descLeafTypes(item, out);
}

// How many arguments `f` takes when applied to `args` (the first ones decide the rest).
size_t Sema::fnArity(const FnValue &f, const std::vector<ArgDesc> &args, Loc loc) {
  switch (f.kind) {
  case FnValue::Named: return f.decl->params.size();
  case FnValue::Builtin: return args.size();  // (only tree_map / tree_reduce apply builtins)
  case FnValue::Grad:
  case FnValue::ValueAndGrad: return fnArity(*f.inner, args, loc);
  case FnValue::Jvp: return 2 * fnArity(*f.inner, args, loc);
  case FnValue::Vjp: {
    size_t n = fnArity(*f.inner, args, loc);
    if (args.size() < n) return n;
    return n + traceFn(*f.inner, {args.begin(), args.begin() + n}, loc).trees.size();
  }
  case FnValue::Transpose: {
    std::vector<ir::Type> p = fnParamTypes(*f.inner, loc);
    std::vector<int64_t> wrt = wrtParams(f, p.size());
    return p.size() - wrt.size() + traceFn(*f.inner, arrayDescs(p), loc).results.size();
  }
  }
  return 0;
}

// The parameter types of `f` where its declaration fixes them (transpose needs them: its
// linear arguments are not passed). A shmap function's are global: block types times splits.
std::vector<ir::Type> Sema::fnParamTypes(const FnValue &f, Loc loc) {
  switch (f.kind) {
  case FnValue::Builtin: return {};  // (never transposed: transforms take defined functions)
  case FnValue::Named: {
    std::vector<ir::Type> out;
    for (const ast::Param &p : f.decl->params) {
      if (!p.type)
        failWithNote(DiagId::TransposeNeedsTypes, loc,
                     "transpose needs the type of every parameter of " + f.decl->name +
                         ", but " + p.name + " has none",
                     "declare it, e.g. " + p.name + ": f32[4]" +
                         (f.decl->shmap ? " (the per-device block type)" : ""),
                     p.loc, "parameter " + p.name + " is declared here");
      ir::Type t = typeOf(*p.type);
      if (f.decl->shmap) {
        const ir::Mesh &mesh = *module_->meshes[meshIndex(f.decl->shmap->mesh, f.decl->shmap->loc)];
        size_t i = &p - f.decl->params.data();
        if (i < f.decl->shmap->inSpecs.size()) {
          ir::PartitionSpec spec = convertSpec(f.decl->shmap->inSpecs[i], mesh);
          for (size_t d = 0; d < spec.dims.size() && d < t.shape.size(); ++d)
            for (int a : spec.dims[d]) t.shape[d] *= mesh.sizes[a];
        }
      }
      out.push_back(t);
    }
    return out;
  }
  case FnValue::Grad:
  case FnValue::ValueAndGrad: return fnParamTypes(*f.inner, loc);
  case FnValue::Jvp: {
    std::vector<ir::Type> p = fnParamTypes(*f.inner, loc), out = p;
    out.insert(out.end(), p.begin(), p.end());
    return out;
  }
  case FnValue::Vjp: {
    std::vector<ir::Type> p = fnParamTypes(*f.inner, loc), out = p;
    for (const ir::Type &t : traceFn(*f.inner, arrayDescs(p), loc).results) out.push_back(t);
    return out;
  }
  case FnValue::Transpose: {
    std::vector<ir::Type> p = fnParamTypes(*f.inner, loc), out;
    std::vector<int64_t> wrt = wrtParams(f, p.size());
    for (size_t i = 0; i < p.size(); ++i)
      if (std::find(wrt.begin(), wrt.end(), (int64_t)i) == wrt.end()) out.push_back(p[i]);
    for (const ir::Type &t : traceFn(*f.inner, arrayDescs(p), loc).results) out.push_back(t);
    return out;
  }
  }
  return {};
}

// argnums, checked against `n` params; the default: 0 for grad, every param otherwise.
std::vector<int64_t> Sema::wrtParams(const FnValue &f, size_t n) {
  std::vector<int64_t> wrt = f.argnums;
  if (!f.hasArgnums) {
    if (f.kind == FnValue::Grad || f.kind == FnValue::ValueAndGrad) {
      wrt = {0};
    } else {
      for (size_t i = 0; i < n; ++i) wrt.push_back((int64_t)i);
    }
  }
  if (n == 0)
    fail(DiagId::TransformArgs, f.loc,
         f.inner->text + " takes no arguments: " + f.text + " has nothing to differentiate",
         "differentiate a function of at least one float argument");
  std::vector<int64_t> seen;
  for (int64_t &a : wrt) {
    if (a < -(int64_t)n || a >= (int64_t)n)
      fail(DiagId::TransformArgs, f.argnumsLoc.valid() ? f.argnumsLoc : f.loc,
           "argnums " + std::to_string(a) + " is out of range: " + f.inner->text + " takes " +
               std::to_string(n) + " argument(s)",
           "list argument positions from 0 to " + std::to_string((int64_t)n - 1));
    if (a < 0) a += (int64_t)n;
    if (std::find(seen.begin(), seen.end(), a) != seen.end())
      fail(DiagId::TransformArgs, f.argnumsLoc, "argnums lists argument " + std::to_string(a) + " twice",
           "list each argument once");
    seen.push_back(a);
  }
  return wrt;
}

// ---- application

std::vector<SVal> Sema::applyFn(const FnValue &f, const std::vector<SVal> &args, Loc loc) {
  if (f.kind == FnValue::Named) return callFunctionWith(*f.decl, *f.unit, args, loc);
  if (f.kind == FnValue::Builtin) return applyBuiltin(f, args, loc);
  // Arrays and trees of arrays (a tree is differentiated leaf by leaf, and its gradient, tangent
  // or cotangent is a tree of the same structure, as for JAX's pytrees)
  std::vector<SVal> xs;
  std::vector<ArgDesc> descs;
  for (const SVal &a : args) {
    if (a.kind == SVal::Axes)
      fail(DiagId::BadArgument, a.loc, f.text + " takes arrays, not axis names " + describe(a),
           "call a function taking axis names from inside the differentiated function");
    xs.push_back(a.kind == SVal::Literal ? SVal::array(toArray(a), a.loc) : a);
    descs.push_back(describeArg(xs.back()));
  }
  // Each rule works out how many arguments it takes itself: for vjp and transpose that needs
  // a trace of the inner function, which the rule makes anyway.
  switch (f.kind) {
  case FnValue::Named:
  case FnValue::Builtin: break;
  case FnValue::Grad:
  case FnValue::ValueAndGrad: return applyGrad(f, xs, fnArity(f, descs, loc), loc);
  case FnValue::Vjp: return applyVjp(f, xs, loc);
  case FnValue::Jvp: return applyJvp(f, xs, fnArity(f, descs, loc), loc);
  case FnValue::Transpose: {
    std::vector<ir::Value *> arrays;
    for (const SVal &x : xs) {
      if (x.kind == SVal::Tuple)
        fail(DiagId::BadArgument, x.loc, f.text + " takes arrays, not " + describe(x),
             "transpose a function of arrays (its linear parameters' types are declared)");
      arrays.push_back(x.value);
    }
    return applyTranspose(f, arrays, loc);
  }
  }
  return {};
}

// A builtin applied to values: its handler reads a call whose arguments are names bound to
// the values in a scope of their own (names no program can write).
std::vector<SVal> Sema::applyBuiltin(const FnValue &f, const std::vector<SVal> &args, Loc loc) {
  auto call = std::make_unique<ast::Expr>();
  call->kind = ast::Expr::Call;
  call->name = f.text;
  call->loc = loc;
  Scope scope;
  scope.parent = scope_;
  scope.owner = cur_;
  for (size_t i = 0; i < args.size(); ++i) {
    auto name = std::make_unique<ast::Expr>();
    name->kind = ast::Expr::Name;
    name->name = "%" + std::to_string(i);
    name->loc = args[i].loc.valid() ? args[i].loc : loc;
    scope.names[name->name] = args[i];
    call->items.push_back(std::move(name));
  }
  Scope *saved = scope_;
  scope_ = &scope;
  SVal r = (this->*builtins().at(f.text))(*call);
  scope_ = saved;
  syntheticCalls_.push_back(std::move(call));
  return {r};
}

void Sema::checkTransformArgCount(const FnValue &f, size_t want, size_t given, Loc loc,
                                  const std::string &shape) {
  if (want != given)
    fail(DiagId::TransformArgs, loc,
         f.text + " takes " + std::to_string(want) + " argument(s) but " +
             std::to_string(given) + " were given",
         "pass " + shape);
}

void Sema::requireFloat(const FnValue &f, const ir::Type &t, size_t argnum, Loc loc,
                        const std::string &path) {
  if (!ir::isFloat(t.dtype))
    fail(DiagId::NotDifferentiable, loc,
         f.text + " differentiates argument " + std::to_string(argnum) +
             (path.empty() ? ", which is " : ", whose leaf " + path + " is ") + str(t),
         path.empty() ? "differentiate only float arguments: choose them with argnums=, or cast(x, f32)"
                      : "every leaf of a differentiated tree is a float array: keep integers in another argument");
}

void Sema::requireFloatLeaves(const FnValue &f, const ArgDesc &d, size_t argnum, Loc loc,
                              const std::string &path) {
  if (!d.isTuple) return requireFloat(f, d.type, argnum, loc, path);
  for (size_t i = 0; i < d.items.size(); ++i)
    requireFloatLeaves(f, d.items[i], argnum, loc,
                       path + d.step(i));
}

// A tangent or cotangent tree has the structure and leaf shapes of the primal or result it
// stands for (`what` says which, e.g. "cotangent 0").
void Sema::checkTreeLike(const FnValue &f, const std::string &what, const SVal &given, const SVal &like,
                         const std::string &path, Loc loc) {
  const std::string at = what + path;
  if (like.kind != SVal::Tuple && given.kind != SVal::Tuple) {
    const ir::Type &g = toArray(given)->type, &l = toArray(like)->type;
    if (!g.sameShape(l))
      fail(DiagId::ArgType, loc, at + " of " + f.text + " is " + str(g) + " but must be " + str(l),
           "pass tangents and cotangents of their primals' and results' types, in the same structure");
    return;
  }
  if (like.kind != given.kind || like.keys != given.keys || like.items.size() != given.items.size())
    fail(DiagId::ArgType, loc, at + " of " + f.text + " is " + describe(given) + " but must be " + describe(like),
         "pass tangents and cotangents of their primals' and results' structure");
  for (size_t i = 0; i < like.items.size(); ++i)
    checkTreeLike(f, what, given.items[i], like.items[i], path + like.step(i), loc);
}

void Sema::checkCotangent(const FnValue &f, size_t k, const ir::Type &given,
                          const ir::Type &result, Loc loc) {
  if (!given.sameShape(result))
    fail(DiagId::ArgType, loc,
         "cotangent " + std::to_string(k) + " of " + f.text + " is " + str(given) + " but result " +
             std::to_string(k) + " of " + f.inner->text + " is " + str(result),
         "pass one cotangent per result, of the result's type");
}

// A vjp equation: `ins` = one primal per param of `body`, then one cotangent per result.
std::vector<ir::Value *> Sema::emitVjp(ir::Func *body, const std::vector<ir::Value *> &ins,
                                       const std::vector<ir::Type> &outs,
                                       const std::vector<int64_t> &wrt, bool withValue,
                                       bool linear, Loc loc) {
  ir::Eqn &e = emitTransform(ir::Prim::Vjp, body, ins, outs, loc);
  e.params["wrt"] = wrt;
  e.params["with_value"] = (int64_t)withValue;
  e.params["linear"] = (int64_t)linear;
  checkShapeRule(e);
  return e.outs;
}

ir::Eqn &Sema::emitTransform(ir::Prim p, ir::Func *body, std::vector<ir::Value *> ins,
                             const std::vector<ir::Type> &outs, Loc loc) {
  ir::Eqn e;
  e.prim = p;
  e.ins = std::move(ins);
  e.bodies = {body};
  e.loc = loc;
  for (const ir::Type &t : outs) e.outs.push_back(cur_->func->newValue(t));
  return pushEqn(std::move(e), /*check=*/p != ir::Prim::Vjp);  // a vjp is checked once its params are set
}

static std::vector<SVal> asSVals(const std::vector<ir::Value *> &vs, Loc loc) {
  std::vector<SVal> out;
  for (ir::Value *v : vs) out.push_back(SVal::array(v, loc));
  return out;
}

// Every leaf of `args`, in order, and where each argument's leaves start (one past the last
// argument's too).
std::vector<ir::Value *> Sema::argLeaves(const std::vector<SVal> &args, std::vector<size_t> *starts) {
  std::vector<ir::Value *> leaves;
  std::vector<std::string> paths;
  for (const SVal &a : args) {
    if (starts) starts->push_back(leaves.size());
    leavesOf(a, "", leaves, paths);
  }
  if (starts) starts->push_back(leaves.size());
  return leaves;
}

// The leaves of the differentiated arguments `wrt` (`starts`: where each argument's leaves
// begin in `ins`), as the vjp's wrt; each one's type is appended to `outs` (its gradient's).
static std::vector<int64_t> wrtLeafParams(const std::vector<int64_t> &wrt, const std::vector<size_t> &starts,
                                          const std::vector<ir::Value *> &ins, std::vector<ir::Type> &outs) {
  std::vector<int64_t> leaves;
  for (int64_t w : wrt)
    for (size_t i = starts[(size_t)w]; i < starts[(size_t)w + 1]; ++i) {
      leaves.push_back((int64_t)i);
      outs.push_back(ins[i]->type);
    }
  return leaves;
}

std::vector<SVal> Sema::applyGrad(const FnValue &f, const std::vector<SVal> &args, size_t n,
                                  Loc loc) {
  checkTransformArgCount(f, n, args.size(), loc, "one argument per parameter of " + f.inner->text);
  std::vector<ArgDesc> descs;
  for (const SVal &a : args) descs.push_back(describeArg(a));
  std::vector<int64_t> wrt = wrtParams(f, n);
  for (int64_t w : wrt) requireFloatLeaves(f, descs[w], w, loc);
  Trace t = traceFn(*f.inner, descs, loc);
  if (t.trees.size() != 1 || t.trees[0].kind == SVal::Tuple || !t.results[0].shape.empty() ||
      !ir::isFloat(t.results[0].dtype)) {
    std::string got;
    for (const SVal &r : t.trees) got += (got.empty() ? "" : ", ") + describe(r);
    fail(DiagId::GradNotScalar, loc,
         f.text + " needs a function returning one float scalar, but " + f.inner->text +
             " returns " + (got.empty() ? "nothing" : got),
         "reduce the result (e.g. sum(...)), or use vjp for several or non-scalar results");
  }
  std::vector<size_t> starts;
  std::vector<ir::Value *> ins = argLeaves(args, &starts);
  ins.push_back(constant(t.results[0].dtype, {}, {1.0}, loc));
  bool withValue = f.kind == FnValue::ValueAndGrad;
  std::vector<ir::Type> outs;
  if (withValue) outs.push_back(t.results[0]);
  std::vector<int64_t> wrtLeaves = wrtLeafParams(wrt, starts, ins, outs);
  std::vector<ir::Value *> res = emitVjp(t.func, ins, outs, wrtLeaves, withValue, false, loc);
  std::vector<SVal> out;
  size_t next = 0;
  if (withValue) out.push_back(SVal::array(res[next++], loc));
  for (int64_t w : wrt) out.push_back(withLeaves(args[w], res, next, loc));
  return out;
}

std::vector<SVal> Sema::applyVjp(const FnValue &f, const std::vector<SVal> &args, Loc loc) {
  std::vector<ArgDesc> descs;
  for (const SVal &a : args) descs.push_back(describeArg(a));
  size_t n = fnArity(*f.inner, descs, loc);
  if (args.size() < n)
    checkTransformArgCount(f, n, args.size(), loc, "the primal arguments, then one cotangent per result");
  Trace t = traceFn(*f.inner, {descs.begin(), descs.begin() + n}, loc);
  checkTransformArgCount(f, n + t.trees.size(), args.size(), loc,
                         std::to_string(n) + " primal argument(s), then " +
                             std::to_string(t.trees.size()) + " cotangent(s), one per result");
  std::vector<int64_t> wrt = wrtParams(f, n);
  for (int64_t w : wrt) requireFloatLeaves(f, descs[w], w, loc);
  for (size_t k = 0; k < t.trees.size(); ++k)
    checkTreeLike(f, "cotangent " + std::to_string(k), args[n + k], t.trees[k], "", loc);
  std::vector<size_t> starts;
  std::vector<ir::Value *> ins = argLeaves(args, &starts);
  std::vector<ir::Type> outs = t.results;
  std::vector<int64_t> wrtLeaves = wrtLeafParams(wrt, starts, ins, outs);
  std::vector<ir::Value *> res = emitVjp(t.func, ins, outs, wrtLeaves, true, false, loc);
  std::vector<SVal> out;
  size_t next = 0;
  for (const SVal &r : t.trees) out.push_back(withLeaves(r, res, next, loc));
  for (int64_t w : wrt) out.push_back(withLeaves(args[w], res, next, loc));
  return out;
}

std::vector<SVal> Sema::applyJvp(const FnValue &f, const std::vector<SVal> &args, size_t n,
                                 Loc loc) {
  checkTransformArgCount(f, n, args.size(), loc,
                         "the primal arguments, then one tangent per primal");
  size_t k = n / 2;
  std::vector<ArgDesc> descs;
  for (size_t i = 0; i < k; ++i) {
    descs.push_back(describeArg(args[i]));
    checkTreeLike(f, "tangent " + std::to_string(i), args[k + i], args[i], "", loc);
  }
  Trace t = traceFn(*f.inner, descs, loc);
  std::vector<ir::Type> outs = t.results;
  outs.insert(outs.end(), t.results.begin(), t.results.end());
  emitTransform(ir::Prim::Jvp, t.func, argLeaves(args), outs, loc);
  const std::vector<ir::Value *> &res = cur_->func->eqns.back().outs;
  std::vector<SVal> out;
  size_t next = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (const SVal &r : t.trees) out.push_back(withLeaves(r, res, next, loc));
  return out;
}

std::vector<SVal> Sema::applyTranspose(const FnValue &f, const std::vector<ir::Value *> &xs,
                                       Loc loc) {
  std::vector<ir::Type> p = fnParamTypes(*f.inner, loc);
  std::vector<int64_t> wrt = wrtParams(f, p.size());
  for (int64_t w : wrt) requireFloat(f, p[w], w, loc);
  Trace t = traceFn(*f.inner, arrayDescs(p), loc);
  for (size_t k = 0; k < t.results.size(); ++k)
    if (!ir::isFloat(t.results[k].dtype))
      fail(DiagId::NotDifferentiable, loc,
           f.text + " needs float results, but result " + std::to_string(k) + " of " +
               f.inner->text + " is " + str(t.results[k]),
           "a linear function maps floats to floats; transpose a function with float results");
  size_t n = p.size() - wrt.size() + t.results.size();
  checkTransformArgCount(f, n, xs.size(), loc,
                         "the non-linear arguments, then one cotangent per result of " +
                             f.inner->text);
  std::vector<ir::Value *> ins;
  size_t next = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    bool linear = std::find(wrt.begin(), wrt.end(), (int64_t)i) != wrt.end();
    if (linear) {  // transpose never reads a linear argument's value
      ins.push_back(constant(p[i].dtype, p[i].shape, {0.0}, loc));
      continue;
    }
    if (!xs[next]->type.sameShape(p[i]))
      fail(DiagId::ArgType, loc,
           "argument " + std::to_string(next) + " of " + f.text + " is " + str(xs[next]->type) +
               " but parameter " + std::to_string(i) + " of " + f.inner->text + " is " + str(p[i]),
           "pass the non-linear arguments first, in order, then the cotangents");
    ins.push_back(xs[next++]);
  }
  for (size_t k = 0; k < t.results.size(); ++k, ++next) {
    checkCotangent(f, k, xs[next]->type, t.results[k], loc);
    ins.push_back(xs[next]);
  }
  std::vector<ir::Type> outs;
  for (int64_t w : wrt) outs.push_back(p[w]);
  return asSVals(emitVjp(t.func, ins, outs, wrt, false, true, loc), loc);
}

// ---- check_grads

// <a, b>: the sum of the element-wise product, as f32[].
ir::Value *Sema::innerProduct(ir::Value *a, ir::Value *b, Loc loc) {
  ir::Value *p = toArray(binaryOp("*", SVal::array(a, loc), SVal::array(b, loc), loc));
  p = convert(p, ir::DType::F32, loc);
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < p->type.rank(); ++d) axes.push_back(d);
  if (axes.empty()) return p;
  return emitByRules(ir::Prim::ReduceSum, {p}, {{"axes", axes}}, {loc});
}

SVal Sema::bCheckGrads(const ast::Expr &c) {
  if (c.items.empty())
    fail(DiagId::ArgCount, c.loc, "check_grads takes a function and its arguments",
         "write check_grads(f, x, y)");
  FnValue f = evalFn(*c.items[0], "the first argument of check_grads");
  int64_t seed = 0;
  double eps = 1e-3;
  for (const ast::Expr::KwArg &kw : c.kwargs) {
    if (kw.name == "seed") {
      seed = staticInt(*kw.value, "seed");
    } else if (kw.name == "eps" && kw.value->kind == ast::Expr::FloatLit) {
      eps = kw.value->floatValue;
    } else {
      fail(DiagId::BadArgument, kw.loc, "check_grads has no option " + kw.name + " of this form",
           "its options are seed=<int> and eps=<float literal>");
    }
  }
  if (cur_->mesh)
    failWithCallChain(DiagId::TransformInShmap, c.loc,
                      "check_grads inside a shmap body is not supported",
                      "call it from host code");
  std::vector<ir::Value *> xs;
  std::vector<ir::Type> types;
  for (size_t i = 1; i < c.items.size(); ++i) {
    xs.push_back(evalArray(*c.items[i]));
    types.push_back(xs.back()->type);
  }
  Loc loc = c.loc;
  Trace t = traceFn(f, arrayDescs(types), loc);
  // A seeded random direction per float argument (zero for the others) and a random
  // cotangent per float result.
  std::vector<ir::Value *> dirs, plus, minus, cts;
  std::vector<int64_t> wrt;
  for (size_t i = 0; i < xs.size(); ++i) {
    ir::Type ty = types[i];
    ty.vary = 0;
    if (!ir::isFloat(ty.dtype)) {
      dirs.push_back(constant(ty.dtype, ty.shape, {0.0}, loc));
      plus.push_back(xs[i]);
      minus.push_back(xs[i]);
      continue;
    }
    wrt.push_back((int64_t)i);
    dirs.push_back(emit(ir::Prim::RandomNormal, {}, ty, loc, {{"seed", seed * 1000 + (int64_t)i}}));
    SVal step = binaryOp("*", SVal::array(dirs.back(), loc), SVal::lit(eps, true, loc), loc);
    plus.push_back(toArray(binaryOp("+", SVal::array(xs[i], loc), step, loc)));
    minus.push_back(toArray(binaryOp("-", SVal::array(xs[i], loc), step, loc)));
  }
  for (size_t k = 0; k < t.results.size(); ++k) {
    ir::Type ty = t.results[k];
    if (!ir::isFloat(ty.dtype))
      fail(DiagId::NotDifferentiable, loc,
           "check_grads needs float results, but result " + std::to_string(k) + " of " + f.text +
               " is " + str(ty),
           "check a function with float results");
    cts.push_back(emit(ir::Prim::RandomNormal, {}, ty, loc, {{"seed", seed * 1000 + 500 + (int64_t)k}}));
  }
  if (wrt.empty())
    fail(DiagId::NotDifferentiable, loc, "check_grads needs a float argument to differentiate",
         "pass float arrays");
  std::vector<SVal> fp = applyFn(f, asSVals(plus, loc), loc);
  std::vector<SVal> fm = applyFn(f, asSVals(minus, loc), loc);

  std::vector<ir::Value *> jvpIns = xs;
  jvpIns.insert(jvpIns.end(), dirs.begin(), dirs.end());
  std::vector<ir::Type> jvpOuts = t.results;
  jvpOuts.insert(jvpOuts.end(), t.results.begin(), t.results.end());
  std::vector<ir::Value *> jvpRes = emitTransform(ir::Prim::Jvp, t.func, jvpIns, jvpOuts, loc).outs;

  Trace t2 = traceFn(f, arrayDescs(types), loc);  // a Func per transform: each is differentiated once
  std::vector<ir::Value *> vjpIns = xs;
  vjpIns.insert(vjpIns.end(), cts.begin(), cts.end());
  std::vector<ir::Type> vjpOuts;
  for (int64_t w : wrt) vjpOuts.push_back(types[w]);
  std::vector<ir::Value *> vjpRes = emitVjp(t2.func, vjpIns, vjpOuts, wrt, false, false, loc);

  // fd = <ct, (f(x+eps d) - f(x-eps d)) / 2eps>, fwd = <ct, jvp(d)>, rev = <vjp(ct), d>.
  SVal fd = SVal::lit(0.0, true, loc), fwd = fd, rev = fd;
  for (size_t k = 0; k < cts.size(); ++k) {
    ir::Value *diff = toArray(binaryOp("-", fp[k], fm[k], loc));
    fd = binaryOp("+", fd, SVal::array(innerProduct(cts[k], diff, loc), loc), loc);
    fwd = binaryOp("+", fwd, SVal::array(innerProduct(cts[k], jvpRes[t.results.size() + k], loc), loc), loc);
  }
  fd = binaryOp("/", fd, SVal::lit(2 * eps, true, loc), loc);
  for (size_t j = 0; j < wrt.size(); ++j)
    rev = binaryOp("+", rev, SVal::array(innerProduct(vjpRes[j], dirs[wrt[j]], loc), loc), loc);
  auto absv = [&](SVal v) { return SVal::array(emit(ir::Prim::Abs, {toArray(v)}, toArray(v)->type, loc), loc); };
  auto maxv = [&](SVal a, SVal b) {
    ir::Value *x = toArray(a), *y = toArray(b);
    return SVal::array(emit(ir::Prim::Max, {x, y}, x->type, loc), loc);
  };
  SVal scale = maxv(maxv(absv(fd), absv(fwd)), maxv(absv(rev), SVal::array(constant(ir::DType::F32, {}, {1e-6}, loc), loc)));
  SVal err = maxv(absv(binaryOp("-", fd, fwd, loc)), absv(binaryOp("-", rev, fwd, loc)));
  return binaryOp("/", err, scale, loc);
}

} // namespace shmapc::sema
