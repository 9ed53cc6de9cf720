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
//         differentiated operands (zeros where a branch does not use one).
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
#include "passes/AD.h"

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
  for (Func *br : e.bodies) {
    Func *v = d.vjpFunc(*br, wrt, false, false, e.loc);  // (params..., cts of results...) -> cts
    Func *w = nestedLike(m, *br, "_vjp");
    Builder wb{m, *w, e.loc};
    std::map<const Value *, Value *> map;
    for (size_t i = 0; i < N; ++i) map[v->params[i]] = param(*w, br->params[i]->type, br->params[i]->hint);
    for (size_t k = 0; k < K; ++k) {
      const Type &ty = br->results[k]->type;
      map[v->params[N + k]] = le.tangentOuts[k] ? param(*w, ty, br->results[k]->hint + "_ct") : wb.zerosLike(ty);
    }
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
