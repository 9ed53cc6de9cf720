// differentiate: replaces each jvp/vjp equation by a call of a new Func that computes it
// (printed by --emit=ir, like jax.make_jaxpr). It runs after insertPbroadcasts, so shmap
// bodies carry variance types and their transposes need no defensive psums (JAX's note on
// efficient transposition):
// t(shmap(f, in_specs, out_specs)) = shmap(t(f), out_specs, in_specs), with no rescaling.
//
// A vjp is the function's primal equations, its linear (tangent) equations taped by the
// jvp rules, and the tape transposed. A shmap splits in two (ad/Shmap.cpp): a forward shmap
// that also returns the residuals its backward part reads (each device's own; they never
// move between devices) and a backward shmap over the residuals and the cotangents; results
// nobody reads are pruned — e.g. the loss and its psum2 in a gradient.
// A loop differentiates as a loop: its transpose runs the iterations backwards from
// checkpointed carries (ad/Loop.cpp). A cond differentiates as a cond: its transpose is a cond
// over the branches' vjps, so only the taken branch runs (ad/Cond.cpp).
//
// With --transpose=naive (naiveTranspose), bodies are untyped (check_vma=false) and a
// shmap transposes as JAX's note on efficient transposition says it was done before:
// cotangents of unmapped outputs are divided by the size of the axes they are unmapped over,
// and cotangents of inputs are psummed over the axes their in_specs leave unmapped.
#include "passes/ad/AD.h"
#include "passes/inline/Inline.h"


#include <algorithm>

namespace shmapc::passes {

namespace ad {

namespace {

// Derived functions get names no other Func has (the same function may be differentiated
// at several call sites), but for sema's traces, which this pass removes.
std::string unusedName(const Module &m, const std::string &base) {
  auto taken = [&](const std::string &n) {
    for (const auto &f : m.funcs)
      if (f->name == n && !f->isTrace) return true;
    return false;
  };
  std::string name = base;
  for (int k = 1; taken(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

std::vector<Value *> copyParams(const Func &f, Func &g, std::map<const Value *, Value *> &map) {
  std::vector<Value *> out;
  for (Value *p : f.params) {
    Value *np = g.newValue(p->type, p->hint);
    g.params.push_back(np);
    map[p] = np;
    out.push_back(np);
  }
  return out;
}

// Replays the flattened equations of `g` through the linearizer: each primal equation is kept
// and followed by its tangent equations.
void linearize(Linearizer &lin) {
  std::vector<Eqn> primal = std::move(lin.b.f.eqns);
  lin.b.f.eqns.clear();
  for (Eqn &e : primal) {
    lin.b.f.eqns.push_back(e);
    lin.rule(e);
  }
}

AxisSet allAxes(const Mesh &mesh) { return (AxisSet(1) << mesh.axes.size()) - 1; }


} // namespace

Func *newFuncLike(Module &m, const Func &f, const std::string &name) {
  Func *g = m.newFunc(unusedName(m, name));
  g->loc = f.loc;
  g->mesh = f.mesh;
  g->isShmapBody = f.isShmapBody;
  g->checkVma = f.checkVma;
  g->autoPbroadcast = f.autoPbroadcast;
  return g;
}

Func *Differentiator::jvpFunc(Func &f, bool tangentsOnly) {
  auto key = std::make_pair(&f, tangentsOnly);
  if (auto it = jvpCache_.find(key); it != jvpCache_.end()) return it->second;
  Func *g = newFuncLike(m_, f, f.isShmapBody ? f.name + "_jvp" : "jvp_" + f.name);
  jvpCache_[key] = g;
  std::map<const Value *, Value *> map;
  std::vector<Value *> primals = copyParams(f, *g, map);
  std::vector<Value *> res = flattenInto(f, *g, map);

  Linearizer lin{*this, Builder{m_, *g, f.loc}, true, {}, {}, {}};
  for (Value *p : primals) {
    Value *tp = g->newValue(p->type, p->hint.empty() ? "" : p->hint + "_dot");
    g->params.push_back(tp);
    if (isFloat(p->type.dtype)) {
      lin.tangent[p] = tp;
      lin.tangentValues.insert(tp);
    }
  }
  linearize(lin);
  std::vector<Value *> results = tangentsOnly ? std::vector<Value *>{} : res;
  for (Value *r : res) {
    Value *t = lin.tangentOf(r);
    results.push_back(t ? t : lin.b.zerosLike(r->type));
  }
  g->results = results;
  pruneDeadCode(*g);
  return g;
}

Func *Differentiator::vjpFunc(Func &f, const std::vector<int64_t> &wrt, bool withValue,
                              bool linear, Loc loc) {
  return vjpFuncFor(f, wrt, withValue, linear, loc, nullptr);
}

Func *Differentiator::vjpFuncFor(Func &f, const std::vector<int64_t> &wrt, bool withValue,
                                 bool linear, Loc loc, const Eqn *shmap) {
  auto key = std::make_tuple(&f, wrt, withValue, linear);
  if (!shmap)
    if (auto it = vjpCache_.find(key); it != vjpCache_.end()) return it->second;
  std::string name = linear ? "transpose_" + f.name : "vjp_" + f.name;
  if (f.isShmapBody) name = f.name + (linear ? "_transpose" : "_vjp");
  Func *g = newFuncLike(m_, f, name);
  if (!shmap) vjpCache_[key] = g;
  std::map<const Value *, Value *> map;
  std::vector<Value *> primals = copyParams(f, *g, map);
  std::vector<Value *> cts;
  for (Value *r : f.results) {
    Value *c = g->newValue(r->type, r->hint.empty() ? "ct" : r->hint + "_ct");
    g->params.push_back(c);
    cts.push_back(c);
  }
  std::vector<Value *> res = flattenInto(f, *g, map);

  Linearizer lin{*this, Builder{m_, *g, f.loc}, false, {}, {}, {}};
  std::vector<Value *> wrtTangents;
  for (int64_t w : wrt) {
    Value *t = lin.newTangent(primals[w]->type);
    lin.tangent[primals[w]] = t;
    wrtTangents.push_back(t);
  }
  linearize(lin);

  Transposer tr{*this, Builder{m_, *g, f.loc}, {}};
  // Untyped bodies (check_vma=false) can only be transposed by the old rules: without
  // variance types a cotangent's replication is unknown.
  bool naiveBody = shmap && (mode_.naiveTranspose || !f.checkVma);
  for (size_t k = 0; k < res.size(); ++k) {
    Value *c = cts[k];
    if (naiveBody) {  // the old rule: divide by the size of the axes the output is unmapped on
      AxisSet unmapped = allAxes(*f.mesh) & ~shmap->specsParam("out_specs")[k].axes();
      if (unmapped)
        c = tr.b.binary(Prim::Div, c, tr.b.full((double)f.mesh->groupSize(unmapped), c->type));
    }
    tr.accumulate(lin.tangentOf(res[k]), c);
  }
  for (size_t i = lin.tape.size(); i-- > 0;) tr.rule(lin.tape[i]);

  std::vector<Value *> results = withValue ? res : std::vector<Value *>{};
  for (size_t j = 0; j < wrt.size(); ++j) {
    Value *c = tr.ctOf(wrtTangents[j]);
    if (!c) c = tr.b.zerosLike(primals[wrt[j]]->type);
    if (naiveBody) {  // the old rule: psum cotangents of inputs over their unmapped axes
      AxisSet unmapped = allAxes(*f.mesh) & ~shmap->specsParam("in_specs")[wrt[j]].axes();
      if (unmapped) c = tr.b.emit(Prim::Psum, {c}, c->type, {{"axes", axisList(unmapped)}});
    }
    results.push_back(c);
  }
  g->results = results;
  pruneDeadCode(*g);
  if (linear) {  // transpose(f) takes no values for the linear params: drop them
    checkLinear(*g, primals, wrt, loc);
    std::vector<Value *> params;
    for (size_t i = 0; i < g->params.size(); ++i)
      if (std::find(wrt.begin(), wrt.end(), (int64_t)i) == wrt.end()) params.push_back(g->params[i]);
    g->params = params;
  }
  return g;
}

// transpose(f) needs f linear in the wrt params: after dead-code removal no equation may still
// read their primal values (a nonlinear use, such as x * x, keeps one as a residual).
void Differentiator::checkLinear(const Func &g, const std::vector<Value *> &primals,
                                 const std::vector<int64_t> &wrt, Loc loc) {
  for (int64_t w : wrt)
    for (const Eqn &e : g.eqns)
      if (std::find(e.ins.begin(), e.ins.end(), primals[w]) != e.ins.end()) {
        diags_.error(DiagId::NotLinear, e.loc.valid() ? e.loc : loc,
                     std::string("cannot transpose: '") + primName(e.prim) +
                         "' uses parameter " + std::to_string(w) +
                         " nonlinearly (transpose needs a function linear in its arguments)",
                     "use vjp for a nonlinear function");
        if (e.loc.valid() && loc.valid()) diags_.note(loc, "transposed here");
        throw CompileError();
      }
}

} // namespace ad

namespace {

// print and save in a differentiated function run once, with the forward values (as
// jax.debug.print does): the derivative keeps them among the function's primal equations,
// which run once. The derived code of a loop or conditional runs its body again (the
// transposed loop recomputes each iteration from its checkpoint, a cond's transpose reruns
// the taken branch), and transpose() never computes the function's values, so an effect
// there is refused rather than run twice, with made-up values, or dropped.
void refuseRepeatedEffects(const ir::Func &f, const ir::Eqn *enclosing, bool linear, Loc at,
                           Diagnostics &diags) {
  for (const ir::Eqn &e : f.eqns) {
    if (ir::primInfo(e.prim).kind == ir::PrimKind::Effect && (enclosing || linear)) {
      std::string name = ir::primName(e.prim);
      Loc where = e.loc.valid() ? e.loc : at;
      if (linear) {
        diags.error(DiagId::EffectUnderTransform, where,
                    "'" + name + "' in a function that transpose() transposes: the transpose never "
                    "computes the function's values",
                    name + " the inputs before calling it, or the cotangent it returns");
      } else {
        bool cond = enclosing->prim == ir::Prim::Cond;
        std::string in = cond ? "an if" : enclosing->prim == ir::Prim::While ? "a while loop" : "a for loop";
        diags.error(DiagId::EffectUnderTransform, where,
                    "'" + name + "' in " + in + " of a differentiated function: a derivative may run "
                    "its body more than once",
                    name + " what the " + (cond ? "if" : "loop") + " computes after it, or call the "
                    "function outside grad/jvp/vjp to " + name + " its values");
      }
      if (e.loc.valid() && at.valid()) diags.note(at, linear ? "transposed here" : "differentiated here");
      throw CompileError();
    }
    bool body = e.prim == ir::Prim::Loop || e.prim == ir::Prim::While || e.prim == ir::Prim::Cond;
    for (const ir::Func *b : e.bodies) refuseRepeatedEffects(*b, body ? &e : enclosing, linear, at, diags);
  }
}

void differentiateFunc(ad::Differentiator &d, ir::Func &f, std::set<ir::Func *> &done) {
  if (!done.insert(&f).second) return;
  bool changed = false;
  for (ir::Eqn &e : f.eqns) {
    for (ir::Func *b : e.bodies) differentiateFunc(d, *b, done);  // nested transforms first
    if (e.prim == ir::Prim::Jvp || e.prim == ir::Prim::Vjp)
      refuseRepeatedEffects(*e.bodies[0], nullptr, e.prim == ir::Prim::Vjp && e.intParam("linear") != 0, e.loc,
                            d.diags());
    if (e.prim == ir::Prim::Jvp) {
      e.bodies = {d.jvpFunc(*e.bodies[0], false)};
    } else if (e.prim == ir::Prim::Vjp) {
      const std::vector<int64_t> wrt = e.intsParam("wrt");
      bool linear = e.intParam("linear") != 0;
      e.bodies = {d.vjpFunc(*e.bodies[0], wrt, e.intParam("with_value") != 0, linear, e.loc)};
      if (linear) {  // the linear params' placeholder operands go
        std::vector<ir::Value *> ins;
        for (size_t i = 0; i < e.ins.size(); ++i)
          if (std::find(wrt.begin(), wrt.end(), (int64_t)i) == wrt.end()) ins.push_back(e.ins[i]);
        e.ins = ins;
      }
    } else {
      continue;
    }
    e.prim = ir::Prim::Call;
    e.params.clear();
    changed = true;
  }
  if (changed) ad::removeDeadEqns(f);  // e.g. the placeholders transpose's linear params had
}

} // namespace

void differentiate(ir::Module &m, bool naiveTranspose, Diagnostics &diags) {
  ad::Differentiator d(m, diags, ad::Mode{naiveTranspose});
  std::set<ir::Func *> done;
  differentiateFunc(d, *m.main, done);
  removeUnreachableFuncs(m);
}

} // namespace shmapc::passes
