// Conditionals differentiated as conditionals (JAX's lax.cond under jvp and vjp), not as
// "both branches, then select": only the branch taken runs, so a NaN or Inf the other branch
// would compute (log of a negative, sqrt(-1), a division the if guards) cannot reach the
// gradient.
//   jvp — one cond whose branches are the jvps of the branches: operands are the primal
//         operands and the tangents of the float operands that have one; results are the
//         primal results and the tangents of the float results (a branch whose tangent is
//         structurally zero returns zeros of the result's type);
//   vjp — the primal cond runs as is and is taped whole; its transpose is a cond over the
//         branches' vjps (recomputing the taken branch from the operands), taking the
//         operands and the results' cotangents and returning the cotangents of the
//         differentiated operands (zeros where a branch does not use one). A cond whose
//         branches communicate keeps its collectives' results instead (savingCond): the
//         forward cond returns them as extra results, one slot per saved value of each
//         branch (zeros from the other branch), and the backward branches read them, so
//         each forward collective runs once, as in a loop (ad/Loop.cpp).
// Derived branches are built by jvpFunc/vjpFunc of the branch Funcs and copied into new nested
// branches (no calls); pruneDeadCode then drops the results a cond need not compute and the
// operands neither branch reads (so transpose(f) keeps no primal operand of a linear branch).
//
// A device-varying predicate: devices may take different branches, so a branch's collectives
// must not combine contributions across devices. flattenInto lifts the float operands to vary
// over the predicate's axes before the cond and retypes the branches (retypeWithParams): the
// pbroadcasts that made invariant operands varying inside a branch move out of it, so their
// transposes (psum2) sum the branches' per-device cotangents outside the cond. A branch that
// communicates over the predicate's axes (psum over them, say) runs on every device (codegen
// runs both branches then), so its value is a function of every device's operands: such a
// cond is differentiated as "both branches, then select", as is one in an untyped body
// (check_vma=false, where any predicate may diverge) whose branches communicate.
#include "passes/ad/AD.h"
#include "passes/variance/Variance.h"
#include "rules/Rules.h"

#include <set>

namespace shmapc::passes::ad {

// ---- jvp and taping

void Linearizer::condRule(const Eqn &e) {
  Module &m = d.module();
  size_t N = e.ins.size() - 1, K = e.outs.size();
  std::vector<Value *> t;
  bool any = false;
  for (size_t i = 0; i < N; ++i) {
    Value *v = e.ins[1 + i];
    t.push_back(isFloat(v->type.dtype) ? tangentOf(v) : nullptr);
    any |= t.back() != nullptr;
  }
  if (!any) return;
  auto floatOut = [&](size_t k) { return isFloat(e.outs[k]->type.dtype); };

  if (!emitTangents && (rules::communicatesOver(*e.bodies[0]) || rules::communicatesOver(*e.bodies[1])) &&
      savingCond(e, t))
    return;
  if (!emitTangents) {  // vjp: the primal cond stays; taped whole
    LinearEqn le;
    le.e = e;
    le.tangentIns = t;
    for (size_t k = 0; k < K; ++k) {
      Value *to = floatOut(k) ? newTangent(e.outs[k]->type) : nullptr;
      le.tangentOuts.push_back(to);
      if (to) tangent[e.outs[k]] = to;
    }
    tape.push_back(std::move(le));
    return;
  }

  // jvp: one cond over (operands..., tangents...) -> (outs..., tangent outs...).
  Eqn j = e;
  j.bodies.clear();
  for (Func *br : e.bodies) {
    Func *g = d.jvpFunc(*br, false);  // (params..., tangents of params...) -> (res..., tangents)
    Func *w = nestedLike(m, *br, "_jvp");
    Builder wb{m, *w, e.loc};
    std::map<const Value *, Value *> map;
    std::vector<Value *> wp, wt;
    for (size_t i = 0; i < N; ++i) wp.push_back(param(*w, br->params[i]->type, br->params[i]->hint));
    for (size_t i = 0; i < N; ++i)
      if (t[i]) wt.push_back(param(*w, br->params[i]->type, br->params[i]->hint + "_dot"));
    for (size_t i = 0, p = 0; i < N; ++i) {
      map[g->params[i]] = wp[i];
      map[g->params[N + i]] = t[i] ? wt[p++] : wb.zerosLike(br->params[i]->type);
    }
    std::vector<Value *> res = d.flattenInto(*g, *w, map);
    std::vector<Value *> results(res.begin(), res.begin() + K);
    for (size_t k = 0; k < K; ++k)
      if (floatOut(k)) results.push_back(wb.liftTo(res[K + k], e.outs[k]->type.vary));
    w->results = results;
    removeDeadEqns(*w);
    j.bodies.push_back(w);
  }
  popPrimal(e);  // the jvp cond computes the primal results too
  for (size_t i = 0; i < N; ++i)
    if (t[i]) j.ins.push_back(b.liftTo(t[i], e.ins[1 + i]->type.vary));
  emitWithTangentOuts(std::move(j), e);
}

// vjp of a cond whose branches communicate: each branch's vjp `v` is split into its primal
// part (run by the forward cond) and the rest (the backward branch); the results of the
// primal part's collectives are the forward cond's extra results. False (and nothing done)
// where a saved value is invariant over an axis the predicate varies over: the cond's result
// would vary there, and the backward branch could not read it at the value's type.
bool Linearizer::savingCond(const Eqn &e, const std::vector<Value *> &t) {
  Module &m = d.module();
  size_t N = e.ins.size() - 1, K = e.outs.size();
  AxisSet pred = e.ins[0]->type.vary;
  std::vector<int64_t> wrt;
  for (size_t i = 0; i < N; ++i)
    if (t[i]) wrt.push_back((int64_t)i);
  struct Split {
    Func *v;
    std::vector<bool> backward, saved;
    std::vector<Value *> values;  // the saved values, in v
    size_t firstSlot;
  };
  std::vector<Split> splits;
  std::vector<Type> slotTypes;
  for (Func *br : e.bodies) {
    Split s;
    s.v = d.vjpFunc(*br, wrt, true, false, e.loc);  // (params..., cts...) -> (outs..., cts of wrt...)
    s.backward = readsCotangent(*s.v, N);
    s.saved.resize(s.v->eqns.size());
    s.firstSlot = slotTypes.size();
    for (size_t i = 0; i < s.v->eqns.size(); ++i) {
      s.saved[i] = !s.backward[i] && rules::communicatesOver(s.v->eqns[i]);
      if (!s.saved[i]) continue;
      for (Value *o : s.v->eqns[i].outs) {
        s.values.push_back(o);
        Type slot = o->type;
        slot.vary |= pred;  // a cond's results vary over its predicate's axes
        if (slot.vary != o->type.vary) return false;
        slotTypes.push_back(slot);
      }
    }
    splits.push_back(std::move(s));
  }

  // Forward branches: (operands...) -> (outs..., slots...).
  Eqn fwd = e;
  fwd.bodies.clear();
  for (size_t bi = 0; bi < e.bodies.size(); ++bi) {
    const Func &br = *e.bodies[bi];
    Split &s = splits[bi];
    Func *f = nestedLike(m, br, "_fwd");
    Builder fb{m, *f, e.loc};
    std::map<const Value *, Value *> map;
    for (size_t i = 0; i < N; ++i) map[s.v->params[i]] = param(*f, br.params[i]->type, br.params[i]->hint);
    for (size_t i = 0; i < s.v->eqns.size(); ++i)
      if (!s.backward[i]) copyEqn(s.v->eqns[i], *f, map);
    for (size_t k = 0; k < K; ++k) f->results.push_back(fb.liftTo(lookup(map, s.v->results[k]), e.outs[k]->type.vary));
    for (size_t q = 0; q < slotTypes.size(); ++q) {
      bool own = q >= s.firstSlot && q < s.firstSlot + s.values.size();
      f->results.push_back(own ? fb.liftTo(lookup(map, s.values[q - s.firstSlot]), slotTypes[q].vary)
                               : fb.zerosLike(slotTypes[q]));
    }
    removeDeadEqns(*f);
    fwd.bodies.push_back(f);
  }
  popPrimal(e);
  LinearEqn le;
  le.e = e;
  le.tangentIns = t;
  for (const Type &st : slotTypes) {
    Value *sv = b.f.newValue(st, "saved");
    fwd.outs.push_back(sv);
    le.residuals.push_back(sv);
  }
  b.emitEqn(std::move(fwd));

  // Backward branches: v without its saved equations, their results read from params after
  // the cotangents, and without the primal results.
  for (size_t bi = 0; bi < e.bodies.size(); ++bi) {
    Split &s = splits[bi];
    Func *w = newFuncLike(m, *e.bodies[bi], e.bodies[bi]->name + "_bwd_vjp");
    std::map<const Value *, Value *> wmap;
    for (Value *p : s.v->params) wmap[p] = param(*w, p->type, p->hint);
    for (Value *sv : s.values) wmap[sv] = param(*w, sv->type, sv->hint);
    for (size_t i = 0; i < s.v->eqns.size(); ++i)
      if (!s.saved[i]) copyEqn(s.v->eqns[i], *w, wmap);
    for (size_t r = K; r < s.v->results.size(); ++r) w->results.push_back(lookup(wmap, s.v->results[r]));
    removeDeadEqns(*w);
    le.branchBackward.push_back(w);
  }
  for (size_t k = 0; k < K; ++k) {
    Value *o = e.outs[k];
    Value *to = isFloat(o->type.dtype) ? newTangent(o->type) : nullptr;
    le.tangentOuts.push_back(to);
    if (to) tangent[o] = to;
  }
  tape.push_back(std::move(le));
  return true;
}

// ---- transpose

void Transposer::condRule(const LinearEqn &le) {
  const Eqn &e = le.e;
  Module &m = d.module();
  size_t N = e.ins.size() - 1, K = e.outs.size();
  std::vector<Value *> cts;
  bool anyCt = false;
  for (size_t k = 0; k < K; ++k) {
    cts.push_back(le.tangentOuts[k] ? ctOf(le.tangentOuts[k]) : nullptr);
    anyCt |= cts.back() != nullptr;
  }
  std::vector<int64_t> wrt;
  for (size_t i = 0; i < N; ++i)
    if (le.tangentIns[i]) wrt.push_back((int64_t)i);
  if (!anyCt || wrt.empty()) return;

  Eqn t = e;
  t.ins.assign(e.ins.begin(), e.ins.end());  // the predicate and the primal operands
  t.outs.clear();
  t.bodies.clear();
  size_t slot = 0;  // the first saved slot of the branch (savingCond)
  for (size_t bi = 0; bi < e.bodies.size(); ++bi) {
    Func *br = e.bodies[bi];
    // (params..., cts of results... [, the branch's saved values...]) -> cts
    Func *v = le.branchBackward.empty() ? d.vjpFunc(*br, wrt, false, false, e.loc) : le.branchBackward[bi];
    Func *w = nestedLike(m, *br, "_vjp");
    Builder wb{m, *w, e.loc};
    std::map<const Value *, Value *> map;
    for (size_t i = 0; i < N; ++i) map[v->params[i]] = param(*w, br->params[i]->type, br->params[i]->hint);
    for (size_t k = 0; k < K; ++k) {
      const Type &ty = br->results[k]->type;
      map[v->params[N + k]] = le.tangentOuts[k] ? param(*w, ty, br->results[k]->hint + "_ct") : wb.zerosLike(ty);
    }
    std::vector<Value *> slots;
    for (Value *r : le.residuals) slots.push_back(param(*w, r->type, "saved"));
    for (size_t q = N + K; q < v->params.size(); ++q, ++slot)
      map[v->params[q]] = slots[slot];
    std::vector<Value *> res = d.flattenInto(*v, *w, map);
    for (size_t q = 0; q < wrt.size(); ++q) res[q] = wb.liftTo(res[q], e.ins[1 + wrt[q]]->type.vary);
    w->results = res;
    removeDeadEqns(*w);
    t.bodies.push_back(w);
  }
  for (size_t k = 0; k < K; ++k)
    if (le.tangentOuts[k]) {
      const Type &ty = e.outs[k]->type;
      t.ins.push_back(cts[k] ? b.liftTo(cts[k], ty.vary) : b.zerosLike(ty));
    }
  t.ins.insert(t.ins.end(), le.residuals.begin(), le.residuals.end());
  for (int64_t w : wrt) {
    Value *in = e.ins[1 + w];
    t.outs.push_back(b.f.newValue(in->type, in->hint.empty() ? "ct" : in->hint + "_ct"));
  }
  std::vector<Value *> outs = t.outs;
  b.emitEqn(std::move(t));
  for (size_t q = 0; q < wrt.size(); ++q) accumulate(le.tangentIns[wrt[q]], outs[q]);
}

// ---- dead code

void pruneCond(Eqn &e, const std::set<const Value *> &liveAfter) {
  std::vector<size_t> live;
  for (size_t k = 0; k < e.outs.size(); ++k)
    if (liveAfter.count(e.outs[k])) live.push_back(k);
  std::set<const Value *> read;
  for (Func *br : e.bodies) {
    std::vector<Value *> results;
    for (size_t k : live) results.push_back(br->results[k]);
    br->results = results;
    pruneDeadCode(*br);
    read.insert(br->results.begin(), br->results.end());
    for (const Eqn &be : br->eqns) read.insert(be.ins.begin(), be.ins.end());
  }
  std::vector<Value *> outs, ins = {e.ins[0]};
  for (size_t k : live) outs.push_back(e.outs[k]);
  std::vector<bool> keep(e.ins.size() - 1, false);
  for (size_t i = 0; i + 1 < e.ins.size(); ++i)
    for (Func *br : e.bodies) keep[i] = keep[i] || read.count(br->params[i]);
  for (size_t i = 0; i + 1 < e.ins.size(); ++i)
    if (keep[i]) ins.push_back(e.ins[1 + i]);
  for (Func *br : e.bodies) {
    std::vector<Value *> params;
    for (size_t i = 0; i < keep.size(); ++i)
      if (keep[i]) params.push_back(br->params[i]);
    br->params = params;
  }
  e.ins = ins;
  e.outs = outs;
}

} // namespace shmapc::passes::ad
