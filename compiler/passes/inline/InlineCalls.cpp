// inlineCalls: replaces every `call` equation by the callee's equations, as tracing a Python
// function does in JAX. Afterwards variance inference and autodiff see one flat body per
// shmap, and a callee used with differently-varying arguments needs no separate typing.
#include "passes/inline/Inline.h"

#include <map>
#include <set>

namespace shmapc::passes {

namespace {

using namespace ir;

class Inliner {
public:
  explicit Inliner(Module &m) : m_(m) {}

  // Only what main reaches is inlined, and a callee is copied into its callers without being
  // flattened itself: a chain of n functions costs O(n) equations, not O(n^2).
  void run() {
    if (m_.main) inlineInto(*m_.main);
  }
  void runOn(Func &f) { inlineInto(f); }
  Func *copy(const Func &src, const Mesh *mesh) { return cloneFunc(src, mesh); }

private:
  // Inlines all calls in `f` and in the bodies its equations hold (once per Func).
  void inlineInto(Func &f) {
    if (!done_.insert(&f).second) return;
    std::map<Value *, Value *> replace;
    std::vector<Eqn> out;
    for (Eqn &e : f.eqns) expand(std::move(e), f, out, replace);
    f.eqns = std::move(out);
    for (Value *&r : f.results) r = lookup(replace, r);
  }

  // Appends `e` to `out` (a call: the callee's equations, copied and expanded in turn).
  // `replace` maps results of calls to the values that replaced them.
  void expand(Eqn e, Func &f, std::vector<Eqn> &out, std::map<Value *, Value *> &replace) {
    for (Value *&v : e.ins) v = lookup(replace, v);
    // (a pipeline's forward step stays a call: keep-stage-residuals replaces it after autodiff)
    if (e.prim != Prim::Call || e.has("pipeline_forward")) {
      for (Func *b : e.bodies) inlineInto(*b);
      out.push_back(std::move(e));
      return;
    }
    const Func &callee = *e.bodies[0];
    std::map<Value *, Value *> map;
    for (size_t i = 0; i < callee.params.size(); ++i) map[callee.params[i]] = e.ins[i];
    for (const Eqn &ce : callee.eqns) expand(cloneEqn(ce, f, map), f, out, replace);
    for (size_t i = 0; i < e.outs.size(); ++i)
      replace[e.outs[i]] = lookup(replace, lookup(map, callee.results[i]));
  }

  static Value *lookup(const std::map<Value *, Value *> &map, Value *v) {
    auto it = map.find(v);
    return it == map.end() ? v : it->second;
  }

  // Copies `e` into `into`, mapping operands through `map` and making new result values.
  // Nested bodies are cloned too: passes after this one retype values in place.
  Eqn cloneEqn(const Eqn &e, Func &into, std::map<Value *, Value *> &map) {
    Eqn c = e;
    for (Value *&v : c.ins) v = lookup(map, v);
    for (Value *&v : c.outs) {
      Value *nv = into.newValue(v->type, v->hint);
      map[v] = nv;
      v = nv;
    }
    // A traced function is typed per application: each inlined copy gets its own.
    for (Func *&b : c.bodies)
      if (b->isNested || b->isTrace) b = cloneFunc(*b, into.mesh);
    return c;
  }

  Func *cloneFunc(const Func &src, const Mesh *mesh) {
    Func *f = m_.newFunc(src.name);
    f->loc = src.loc;
    f->mesh = mesh;
    f->isNested = src.isNested;
    f->isTrace = src.isTrace;
    f->returnLoc = src.returnLoc;
    std::map<Value *, Value *> map;
    for (Value *p : src.params) {
      Value *np = f->newValue(p->type, p->hint);
      map[p] = np;
      f->params.push_back(np);
    }
    for (const Eqn &e : src.eqns) f->eqns.push_back(cloneEqn(e, *f, map));
    for (Value *r : src.results) f->results.push_back(lookup(map, r));
    return f;
  }

  Module &m_;
  std::set<Func *> done_;
};

} // namespace

// Drops functions no longer referenced from main (callees that were inlined everywhere).
void removeUnreachableFuncs(Module &m) {
  std::set<const Func *> live;
  std::vector<const Func *> work = {m.main};
  while (!work.empty()) {
    const Func *f = work.back();
    work.pop_back();
    if (!f || !live.insert(f).second) continue;
    for (const Eqn &e : f->eqns)
      for (const Func *b : e.bodies) work.push_back(b);
  }
  std::vector<std::unique_ptr<Func>> kept;
  for (auto &f : m.funcs)
    if (live.count(f.get())) kept.push_back(std::move(f));
  m.funcs = std::move(kept);
  for (JitFunc &j : m.jits)  // (a jit function inlined into its callers is gone)
    if (!live.count(j.func)) {
      j.func = nullptr;
      j.propagated.clear();
    }
  for (PipelineFunc &p : m.pipelines)
    if (!live.count(p.func)) p.func = nullptr;
}

ir::Func *cloneFunc(ir::Module &m, const ir::Func &src, const ir::Mesh *mesh) { return Inliner(m).copy(src, mesh); }

void inlineCallsIn(ir::Module &m, ir::Func &f) { Inliner(m).runOn(f); }

void inlineCalls(ir::Module &m, Diagnostics &) {
  Inliner(m).run();
  removeUnreachableFuncs(m);
}

} // namespace shmapc::passes
