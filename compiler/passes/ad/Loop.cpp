// Loops differentiated as loops (JAX's fori_loop under jvp and vjp), not unrolled:
//   jvp       — one loop whose body is the jvp of the body: carries are the primal carries
//               and the tangents of the float carries; consts are the primal consts and the
//               tangents of the float consts that have one;
//   vjp       — the forward loop also checkpoints each iteration's input carries into a stack
//               [trip count, ...carry shape] (dynamic_update_slice at i - lo); the transpose is
//               a loop over j in [0, n) that runs the iterations backwards (i = hi - 1 - j),
//               reads carry_i from the stacks, recomputes the body and applies its vjp: the
//               carries of the backward loop are the carries' cotangents and the accumulated
//               cotangents of the consts. A loop of more than kBlockAbove iterations is first
//               split into a loop over blocks of ~sqrt(n) iterations plus a remainder loop
//               (blockedLoop), so only block starts are stacked.
// Every float carry is differentiated (a zero tangent on entry may become nonzero in the
// body). Derived bodies are built by jvpFunc/vjpFunc of the body Func and copied into the
// loop's new nested body (no calls), mapping its params. pruneDeadCode then drops the carries
// and consts a loop does not need — e.g. transpose(f) keeps no forward loop for a linear
// body, and a stack is kept only for the carries the body's vjp reads.
#include "passes/ad/AD.h"
#include "rules/Rules.h"

#include <algorithm>

#include <cmath>
#include <set>
#include <unordered_map>

namespace shmapc::passes::ad {

namespace {

// Loops with more iterations are checkpointed in blocks under vjp (blockedLoop).
constexpr int64_t kBlockAbove = 64;

Type stackType(const Type &carry, int64_t n) {
  Type t = carry;
  t.shape.insert(t.shape.begin(), n);
  return t;
}

std::vector<int64_t> withLeadingOne(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s = shape;
  s.insert(s.begin(), 1);
  return s;
}

// acc + dynamic_update_slice(0, u, idx...), the cotangent a backward step adds for one slice
// of a stacked const it read (a scanned layer's weights), as dynamic_update_slice(acc,
// dynamic_slice(acc, idx...) + u, idx...): the step then touches its slice of the
// accumulator, not all of it (a whole-size zero array and a whole-size sum every step, L
// steps over [L, ...] stacks), and the accumulator, a carry read last there, is updated in
// place. Null where ct is not such an update (the caller adds). `definedBy`: the index in f's
// eqns of the eqn defining each value (indices: b appends to f's eqns).
Value *addIntoSlice(Builder &b, const Func &f, const std::unordered_map<const Value *, size_t> &definedBy, Value *acc,
                    Value *ct) {
  auto def = [&](const Value *v) -> const Eqn * {
    auto it = definedBy.find(v);
    return it == definedBy.end() ? nullptr : &f.eqns[it->second];
  };
  const Eqn *update = def(ct);
  if (!update || update->prim != Prim::DynamicUpdateSlice || !(acc->type == ct->type)) return nullptr;
  const Eqn *zero = def(update->ins[0]);
  if (zero && zero->prim == Prim::Pbroadcast) zero = def(zero->ins[0]);  // (zeros made device-varying)
  if (!zero || zero->prim != Prim::Constant || zero->doublesParam("value") != std::vector<double>{0.0}) return nullptr;
  Value *u = update->ins[1];
  if (u->type.vary & ~acc->type.vary) return nullptr;
  // (read before b appends to f's eqns, which may move them)
  std::vector<Value *> idx(update->ins.begin() + 2, update->ins.end()), ins = {acc};
  ins.insert(ins.end(), idx.begin(), idx.end());
  Value *old = b.emit(Prim::DynamicSlice, ins, Type{u->type.dtype, u->type.shape, acc->type.vary},
                      {{"sizes", u->type.shape}});
  ins = {acc, b.binary(Prim::Add, old, u)};
  ins.insert(ins.end(), idx.begin(), idx.end());
  return b.emit(Prim::DynamicUpdateSlice, ins, acc->type);
}

} // namespace

// A long loop under vjp becomes a loop over blocks of B ~ sqrt(n) iterations (each an inner
// loop), then a loop over the remaining iterations: the checkpoints are the carries at block
// starts, and the transposed outer loop recomputes one block's carries at a time. Each
// iteration's stack update copies the whole stack (carries are double-buffered), so stacking
// all n iterations would cost O(n^2) carry copies; blocks cost O(n^1.5), with n / B + B
// carries of stack instead of n.
void Linearizer::blockedLoop(const Eqn &e) {
  Module &m = d.module();
  Func &body = *e.bodies[0];
  size_t C = (size_t)e.intParam("num_consts"), K = e.outs.size();
  int64_t lo = e.intParam("lo"), hi = e.intParam("hi"), n = hi - lo;
  int64_t B = (int64_t)std::ceil(std::sqrt((double)n)), q = n / B, r = n - q * B;
  const Type index = body.params[0]->type;

  // The block: (j, consts..., base, carries...), iteration base + j of the loop.
  Func *inner = nestedLike(m, body, "_block");
  Builder ib{m, *inner, e.loc};
  std::map<const Value *, Value *> map;
  Value *j = param(*inner, index, "j");
  for (size_t c = 0; c < C; ++c) map[body.params[1 + c]] = param(*inner, body.params[1 + c]->type, body.params[1 + c]->hint);
  Value *base = param(*inner, index, "base");
  for (size_t k = 0; k < K; ++k) map[body.params[1 + C + k]] = param(*inner, body.params[1 + C + k]->type, body.params[1 + C + k]->hint);
  map[body.params[0]] = ib.binary(Prim::Add, base, j);
  inner->results = d.flattenInto(body, *inner, map);

  // The loop over blocks: (b, consts..., carries...) runs block b.
  Func *outer = nestedLike(m, body, "_blocks");
  Builder ob{m, *outer, e.loc};
  Value *bi = param(*outer, index, "b");
  Eqn in{Prim::Loop, {}, {}, {{"lo", (int64_t)0}, {"hi", B}, {"num_consts", (int64_t)(C + 1)}}, {inner}, e.loc};
  for (size_t c = 0; c < C; ++c) in.ins.push_back(param(*outer, body.params[1 + c]->type, body.params[1 + c]->hint));
  in.ins.push_back(ob.binary(Prim::Add, ob.binary(Prim::Mul, bi, ob.i32(B)), ob.i32(lo)));
  for (size_t k = 0; k < K; ++k) {
    in.ins.push_back(param(*outer, body.params[1 + C + k]->type, body.params[1 + C + k]->hint));
    in.outs.push_back(outer->newValue(e.outs[k]->type, e.outs[k]->hint));
  }
  outer->results = in.outs;
  outer->eqns.push_back(std::move(in));

  popPrimal(e);
  Eqn blocks{Prim::Loop, e.ins, e.outs, {{"lo", (int64_t)0}, {"hi", q}, {"num_consts", (int64_t)C}}, {outer}, e.loc};
  Eqn rest{Prim::Loop, {}, e.outs, {{"lo", lo + q * B}, {"hi", hi}, {"num_consts", (int64_t)C}}, {&body}, e.loc};
  if (r > 0) {
    rest.ins.assign(e.ins.begin(), e.ins.begin() + C);
    for (size_t k = 0; k < K; ++k) {
      blocks.outs[k] = b.f.newValue(e.outs[k]->type, e.outs[k]->hint);
      rest.ins.push_back(blocks.outs[k]);
    }
  }
  b.f.eqns.push_back(blocks);
  rule(blocks);
  if (r > 0) {
    b.f.eqns.push_back(rest);
    rule(rest);
  }
}

// The jvp of loop or while `e` (operands consts..., carries...; tangents `t`, null = zero):
// the same primitive over (consts, the nonzero const tangents; carries, float carries'
// tangents), num_consts counting both. Its last body is the jvp of e's last body, whose params
// are (`leading` params such as a loop's index, consts..., carries...); a while's predicate
// (bodies[0]) is copied to read the primals and ignore the tangents.
Eqn Linearizer::jvpLoop(const Eqn &e, size_t leading, const std::vector<Value *> &t) {
  Module &m = d.module();
  const Func &body = *e.bodies.back();
  size_t C = (size_t)e.intParam("num_consts"), K = e.outs.size(), np = body.params.size();
  auto floatCarry = [&](size_t k) { return isFloat(e.outs[k]->type.dtype); };
  auto bodyParam = [&](size_t p) { return body.params[leading + p]; };
  Func *g = d.jvpFunc(const_cast<Func &>(body), false);  // (params..., tangents) -> (res..., tangents)
  Func *w = nestedLike(m, body, "_jvp");
  Builder wb{m, *w, e.loc};
  std::map<const Value *, Value *> map;
  for (size_t p = 0; p < leading; ++p) {
    map[g->params[p]] = param(*w, body.params[p]->type, body.params[p]->hint);
    map[g->params[np + p]] = wb.zerosLike(body.params[p]->type);  // an index has no tangent
  }
  // Params in order: consts, their tangents, carries, their tangents.
  std::vector<Value *> wc, wcd, wk, wkd;
  for (size_t c = 0; c < C; ++c) wc.push_back(param(*w, bodyParam(c)->type, bodyParam(c)->hint));
  for (size_t c = 0; c < C; ++c)
    if (t[c]) wcd.push_back(param(*w, bodyParam(c)->type, bodyParam(c)->hint + "_dot"));
  for (size_t k = 0; k < K; ++k) wk.push_back(param(*w, bodyParam(C + k)->type, bodyParam(C + k)->hint));
  for (size_t k = 0; k < K; ++k)
    if (floatCarry(k)) wkd.push_back(param(*w, bodyParam(C + k)->type, bodyParam(C + k)->hint + "_dot"));
  for (size_t c = 0, p = 0; c < C; ++c) {
    map[g->params[leading + c]] = wc[c];
    map[g->params[np + leading + c]] = t[c] ? wcd[p++] : wb.zerosLike(wc[c]->type);
  }
  for (size_t k = 0, p = 0; k < K; ++k) {
    map[g->params[leading + C + k]] = wk[k];
    map[g->params[np + leading + C + k]] = floatCarry(k) ? wkd[p++] : wb.zerosLike(wk[k]->type);
  }
  std::vector<Value *> res = d.flattenInto(*g, *w, map);
  std::vector<Value *> results(res.begin(), res.begin() + K);
  for (size_t k = 0; k < K; ++k)
    if (floatCarry(k)) results.push_back(wb.liftTo(res[K + k], wk[k]->type.vary));
  w->results = results;
  removeDeadEqns(*w);

  Eqn j = e;
  j.bodies = {w};
  if (e.prim == Prim::While) {
    // The predicate with the same params as the body, reading only the primals.
    const Func &pred = *e.bodies[0];
    Func *wp = nestedLike(m, pred, "_jvp");
    std::map<const Value *, Value *> predMap;
    for (Value *v : w->params) {
      Value *pv = param(*wp, v->type, v->hint);
      for (size_t c = 0; c < C; ++c)
        if (v == wc[c]) predMap[pred.params[c]] = pv;
      for (size_t k = 0; k < K; ++k)
        if (v == wk[k]) predMap[pred.params[C + k]] = pv;
    }
    wp->results = d.flattenInto(pred, *wp, predMap);
    j.bodies = {wp, w};
  }
  j.ins.assign(e.ins.begin(), e.ins.begin() + C);
  for (size_t c = 0; c < C; ++c)
    if (t[c]) j.ins.push_back(t[c]);
  for (size_t k = 0; k < K; ++k) j.ins.push_back(e.ins[C + k]);
  for (size_t k = 0; k < K; ++k)
    if (floatCarry(k))
      j.ins.push_back(t[C + k] ? b.liftTo(t[C + k], e.outs[k]->type.vary) : b.zerosLike(e.outs[k]->type));
  j.params["num_consts"] = (int64_t)(C + wcd.size());
  return j;
}

// A while loop: its jvp is one while over (consts, const tangents; carries, carry tangents)
// whose predicate reads the primal carries only. Reverse mode would need every iteration's
// carries, and how many iterations there are is known only at run time (JAX's while_loop
// refuses reverse mode too): a located error says what to write instead.
void Linearizer::whileRule(const Eqn &e) {
  size_t K = e.outs.size();
  std::vector<Value *> t;
  for (Value *v : e.ins) t.push_back(isFloat(v->type.dtype) ? tangentOf(v) : nullptr);
  bool anyTangent = std::any_of(t.begin(), t.end(), [](Value *v) { return v != nullptr; });
  bool anyFloatCarry = false;
  for (size_t k = 0; k < K; ++k) anyFloatCarry |= isFloat(e.outs[k]->type.dtype);
  if (!anyTangent || !anyFloatCarry) return;  // no tangent flows: the primal loop stays
  if (!emitTangents)
    d.diags().fatal(DiagId::WhileNotReversible, e.loc,
                    "reverse-mode differentiation (grad, vjp) of a while loop: its trip count is "
                    "known only at run time, so the iterations cannot be saved for the backward "
                    "pass",
                    "use a for loop over a static bound (the most iterations it can need) and "
                    "keep finished iterations unchanged with where(done, x, step(x)); forward "
                    "mode (jvp) differentiates while loops");

  popPrimal(e);  // before jvpLoop emits the tangents' initial values after it
  return emitWithTangentOuts(jvpLoop(e, 0, t), e);
}

void Linearizer::loopRule(const Eqn &e) {
  Module &m = d.module();
  Func &body = *e.bodies[0];
  size_t C = (size_t)e.intParam("num_consts"), K = e.outs.size();
  int64_t lo = e.intParam("lo"), hi = e.intParam("hi"), n = hi - lo;
  std::vector<Value *> t;
  for (Value *v : e.ins) t.push_back(isFloat(v->type.dtype) ? tangentOf(v) : nullptr);

  if (emitTangents) {  // jvp: one loop over (consts, const tangents; carries, carry tangents)
    popPrimal(e);  // before jvpLoop emits the tangents' initial values after it
    return emitWithTangentOuts(jvpLoop(e, 1, t), e);
  }

  // A body that communicates keeps its collectives' results (savingLoop): never blocked, since
  // a block's recomputation would run its collectives again.
  if (rules::communicatesOver(body)) return savingLoop(e, t);
  if (n > kBlockAbove) return blockedLoop(e);

  // vjp: the forward loop also stacks each iteration's input carries (the checkpoints the
  // transposed loop recomputes the body from); the loop is taped whole.
  Func *f = nestedLike(m, body, "_fwd");
  Builder fb{m, *f, e.loc};
  std::map<const Value *, Value *> map;
  for (Value *p : body.params) map[p] = param(*f, p->type, p->hint);
  std::vector<Value *> stacks;
  for (size_t k = 0; k < K; ++k) stacks.push_back(param(*f, stackType(e.outs[k]->type, n), "stack"));
  std::vector<Value *> results = d.flattenInto(body, *f, map);
  Value *at = lo == 0 ? map[body.params[0]] : fb.binary(Prim::Sub, map[body.params[0]], fb.i32(lo));
  for (size_t k = 0; k < K; ++k) {
    Value *carry = map[body.params[1 + C + k]];
    std::vector<Value *> ins = {stacks[k], fb.reshape(carry, withLeadingOne(carry->type.shape)), at};
    for (int64_t r = 0; r < carry->type.rank(); ++r) ins.push_back(fb.i32(0));
    results.push_back(fb.emit(Prim::DynamicUpdateSlice, ins, stacks[k]->type));
  }
  f->results = results;
  removeDeadEqns(*f);

  std::vector<Type> stackTypes;
  for (Value *st : stacks) stackTypes.push_back(st->type);
  tapeStackingLoop(e, t, f, stackTypes, nullptr);
}

// Replaces the primal loop `e` by the forward loop with body `f`, whose extra carries are the
// stacks (starting as zeros; they become the taped loop's residuals), and tapes `e`.
void Linearizer::tapeStackingLoop(const Eqn &e, const std::vector<Value *> &t, Func *f,
                                  const std::vector<Type> &stackTypes, Func *backward) {
  popPrimal(e);
  Eqn fwd = e;
  fwd.bodies = {f};
  LinearEqn le;
  le.e = e;
  le.tangentIns = t;
  le.backward = backward;
  for (const Type &st : stackTypes) {
    fwd.ins.push_back(b.zerosLike(st));
    Value *sv = b.f.newValue(st, "stack");
    fwd.outs.push_back(sv);
    le.residuals.push_back(sv);
  }
  b.emitEqn(std::move(fwd));
  for (Value *o : e.outs) {
    Value *to = isFloat(o->type.dtype) ? newTangent(o->type) : nullptr;
    le.tangentOuts.push_back(to);
    if (to) tangent[o] = to;
  }
  tape.push_back(std::move(le));
}

// vjp of a loop whose body communicates: the results of its collectives (and of communicating
// loops, conds and shmaps in it) are residuals, stacked per iteration by the forward loop like
// the carries, so the backward loop recomputes only local work (each forward
// collective runs once). Both loops are built from the body's vjp `v`: the forward loop runs
// its primal part, the backward loop (le.backward) the rest, reading the saved values.
void Linearizer::savingLoop(const Eqn &e, const std::vector<Value *> &t) {
  Module &m = d.module();
  Func &body = *e.bodies[0];
  size_t C = (size_t)e.intParam("num_consts"), K = e.outs.size(), NP = body.params.size();
  int64_t lo = e.intParam("lo"), hi = e.intParam("hi"), n = hi - lo;
  std::vector<int64_t> wrt;
  for (size_t c = 0; c < C; ++c)
    if (t[c]) wrt.push_back((int64_t)(1 + c));
  for (size_t k = 0; k < K; ++k)
    if (isFloat(e.outs[k]->type.dtype)) wrt.push_back((int64_t)(1 + C + k));
  // (i, consts, carries, cts...) -> (new carries..., cts of wrt...)
  Func *v = d.vjpFunc(body, wrt, true, false, e.loc);

  std::vector<bool> backward = readsCotangent(*v, NP), saved(v->eqns.size());
  for (size_t i = 0; i < v->eqns.size(); ++i) saved[i] = !backward[i] && rules::communicatesOver(v->eqns[i]);
  std::vector<Value *> savedValues;
  for (size_t i = 0; i < v->eqns.size(); ++i)
    if (saved[i]) savedValues.insert(savedValues.end(), v->eqns[i].outs.begin(), v->eqns[i].outs.end());

  // The forward body: (i, consts..., carries..., carry stacks..., saved stacks...) ->
  // (carries..., carry stacks..., saved stacks...).
  Func *f = nestedLike(m, body, "_fwd");
  Builder fb{m, *f, e.loc};
  std::map<const Value *, Value *> map;
  for (size_t p = 0; p < NP; ++p) map[v->params[p]] = param(*f, v->params[p]->type, v->params[p]->hint);
  std::vector<Type> stackTypes;
  for (size_t k = 0; k < K; ++k) stackTypes.push_back(stackType(e.outs[k]->type, n));
  for (Value *sv : savedValues) stackTypes.push_back(stackType(sv->type, n));
  std::vector<Value *> stacks;
  for (const Type &st : stackTypes) stacks.push_back(param(*f, st, "stack"));
  for (size_t i = 0; i < v->eqns.size(); ++i)
    if (!backward[i]) copyEqn(v->eqns[i], *f, map);
  std::vector<Value *> results;
  for (size_t k = 0; k < K; ++k) results.push_back(lookup(map, v->results[k]));
  Value *at = lo == 0 ? map[v->params[0]] : fb.binary(Prim::Sub, map[v->params[0]], fb.i32(lo));
  auto push = [&](Value *stack, Value *x) {
    std::vector<Value *> ins = {stack, fb.reshape(x, withLeadingOne(x->type.shape)), at};
    for (int64_t r = 0; r < x->type.rank(); ++r) ins.push_back(fb.i32(0));
    results.push_back(fb.emit(Prim::DynamicUpdateSlice, ins, stack->type));
  };
  for (size_t k = 0; k < K; ++k) push(stacks[k], map[v->params[1 + C + k]]);
  for (size_t s = 0; s < savedValues.size(); ++s) push(stacks[K + s], lookup(map, savedValues[s]));
  f->results = results;
  removeDeadEqns(*f);

  // The backward part: v without its saved equations, whose results become params after the
  // cotangents, and without the new carries among its results.
  Func *w = newFuncLike(m, body, body.name + "_bwd_vjp");
  std::map<const Value *, Value *> wmap;
  for (Value *p : v->params) wmap[p] = param(*w, p->type, p->hint);
  for (Value *sv : savedValues) wmap[sv] = param(*w, sv->type, sv->hint);
  for (size_t i = 0; i < v->eqns.size(); ++i)
    if (!saved[i]) copyEqn(v->eqns[i], *w, wmap);
  for (size_t r = K; r < v->results.size(); ++r) w->results.push_back(lookup(wmap, v->results[r]));
  removeDeadEqns(*w);

  tapeStackingLoop(e, t, f, stackTypes, w);
}

void Transposer::loopRule(const LinearEqn &le) {
  const Eqn &e = le.e;
  Module &m = d.module();
  Func &body = *e.bodies[0];
  size_t C = (size_t)e.intParam("num_consts"), K = e.outs.size();
  int64_t lo = e.intParam("lo"), hi = e.intParam("hi"), n = hi - lo;

  bool anyCt = false, anyIn = false;
  std::vector<Value *> cts;
  for (size_t k = 0; k < K; ++k) {
    cts.push_back(le.tangentOuts[k] ? ctOf(le.tangentOuts[k]) : nullptr);
    anyCt |= cts.back() != nullptr;
  }
  for (Value *ti : le.tangentIns) anyIn |= ti != nullptr;
  if (!anyCt || !anyIn) return;  // a zero cotangent, or nothing to send one to

  std::vector<size_t> diffConsts, floatCarries;
  std::vector<int64_t> wrt;
  for (size_t c = 0; c < C; ++c)
    if (le.tangentIns[c]) {
      diffConsts.push_back(c);
      wrt.push_back((int64_t)(1 + c));
    }
  for (size_t k = 0; k < K; ++k)
    if (le.tangentOuts[k]) {
      floatCarries.push_back(k);
      wrt.push_back((int64_t)(1 + C + k));
    }
  // (params..., cts of results... [, saved collective results...]) -> cts of wrt
  Func *v = le.backward ? le.backward : d.vjpFunc(body, wrt, false, false, e.loc);
  size_t S = le.residuals.size() - K;  // saved collective results (savingLoop)

  // The backward body: (j, consts..., stacks..., carry cts..., const ct sums...).
  Func *bw = nestedLike(m, body, "_bwd");
  Builder bb{m, *bw, e.loc};
  Value *j = param(*bw, body.params[0]->type, "j");
  std::vector<Value *> bc, bs, bct, bacc;
  for (size_t c = 0; c < C; ++c) bc.push_back(param(*bw, e.ins[c]->type, body.params[1 + c]->hint));
  for (Value *r : le.residuals) bs.push_back(param(*bw, r->type, "stack"));
  for (size_t k : floatCarries) bct.push_back(param(*bw, e.outs[k]->type, body.params[1 + C + k]->hint + "_ct"));
  for (size_t c : diffConsts) bacc.push_back(param(*bw, e.ins[c]->type, body.params[1 + c]->hint + "_ct"));

  Value *at = bb.binary(Prim::Sub, bb.i32(n - 1), j);  // the iteration, counted from lo
  Value *i = lo == 0 ? at : bb.binary(Prim::Add, at, bb.i32(lo));
  std::map<const Value *, Value *> map;
  map[v->params[0]] = i;
  for (size_t c = 0; c < C; ++c) map[v->params[1 + c]] = bc[c];
  for (size_t k = 0; k < K; ++k) {
    const Type &ct = e.outs[k]->type;
    std::vector<Value *> ins = {bs[k], at};
    for (int64_t r = 0; r < ct.rank(); ++r) ins.push_back(bb.i32(0));
    Type slice = stackType(ct, 1);
    Value *s = bb.emit(Prim::DynamicSlice, ins, slice, {{"sizes", slice.shape}});
    map[v->params[1 + C + k]] = bb.reshape(s, ct.shape);
  }
  for (size_t k = 0, p = 0; k < K; ++k)
    map[v->params[1 + C + K + k]] = le.tangentOuts[k] ? bct[p++] : bb.zerosLike(e.outs[k]->type);
  for (size_t q = 0; q < S; ++q) {  // this iteration's saved value, read from its stack
    Value *param = v->params[1 + C + 2 * K + q];
    const Type &st = param->type;
    std::vector<Value *> ins = {bs[K + q], at};
    for (int64_t r = 0; r < st.rank(); ++r) ins.push_back(bb.i32(0));
    Type slice = stackType(st, 1);
    map[param] = bb.reshape(bb.emit(Prim::DynamicSlice, ins, slice, {{"sizes", slice.shape}}), st.shape);
  }
  std::vector<Value *> res = d.flattenInto(*v, *bw, map);
  std::vector<Value *> results;
  for (size_t q = 0; q < floatCarries.size(); ++q)
    results.push_back(bb.liftTo(res[diffConsts.size() + q], bct[q]->type.vary));
  std::unordered_map<const Value *, size_t> definedBy;
  for (size_t i = 0; i < bw->eqns.size(); ++i)
    for (const Value *v : bw->eqns[i].outs) definedBy[v] = i;
  for (size_t p = 0; p < diffConsts.size(); ++p) {
    Value *sum = addIntoSlice(bb, *bw, definedBy, bacc[p], res[p]);
    results.push_back(sum ? sum : bb.binary(Prim::Add, bacc[p], res[p]));
  }
  bw->results = results;
  removeDeadEqns(*bw);

  Eqn t = e;
  t.ins.assign(e.ins.begin(), e.ins.begin() + C);
  t.ins.insert(t.ins.end(), le.residuals.begin(), le.residuals.end());
  t.outs.clear();
  for (size_t k : floatCarries) {
    const Type &ty = e.outs[k]->type;
    t.ins.push_back(cts[k] ? b.liftTo(cts[k], ty.vary) : b.zerosLike(ty));
    t.outs.push_back(b.f.newValue(ty, e.outs[k]->hint.empty() ? "ct" : e.outs[k]->hint + "_ct"));
  }
  for (size_t c : diffConsts) {
    const Type &ty = e.ins[c]->type;
    t.ins.push_back(b.zerosLike(ty));
    t.outs.push_back(b.f.newValue(ty, e.ins[c]->hint.empty() ? "ct" : e.ins[c]->hint + "_ct"));
  }
  t.params["lo"] = (int64_t)0;
  t.params["hi"] = n;
  t.params["num_consts"] = (int64_t)(C + le.residuals.size());
  t.bodies = {bw};
  std::vector<Value *> outs = t.outs;
  b.emitEqn(std::move(t));
  for (size_t q = 0; q < floatCarries.size(); ++q) accumulate(le.tangentIns[C + floatCarries[q]], outs[q]);
  for (size_t p = 0; p < diffConsts.size(); ++p)
    accumulate(le.tangentIns[diffConsts[p]], outs[floatCarries.size() + p]);
}

namespace {

std::vector<bool> liveCarries(const Eqn &e, const std::set<const Value *> &liveAfter);

// The values `f` needs to compute `need` (which it extends): a loop needs only the operands
// of its live carries and the consts those read.
void neededIn(const Func &f, std::set<const Value *> &need) {
  for (size_t i = f.eqns.size(); i-- > 0;) {
    const Eqn &e = f.eqns[i];
    bool used = hasEffects(e);  // (an effect needs its operands, whoever reads its results)
    for (const Value *o : e.outs) used |= need.count(o) != 0;
    if (!used) continue;
    if (e.prim == Prim::Cond) {  // the operands its branches need for the live results
      need.insert(e.ins[0]);
      for (const Func *br : e.bodies) {
        std::set<const Value *> inner;
        for (size_t k = 0; k < e.outs.size(); ++k)
          if (need.count(e.outs[k])) inner.insert(br->results[k]);
        neededIn(*br, inner);
        for (size_t k = 0; k + 1 < e.ins.size(); ++k)
          if (inner.count(br->params[k])) need.insert(e.ins[1 + k]);
      }
      continue;
    }
    if (e.prim != Prim::Loop) {
      need.insert(e.ins.begin(), e.ins.end());
      continue;
    }
    const Func &body = *e.bodies[0];
    size_t C = (size_t)e.intParam("num_consts");
    std::vector<bool> live = liveCarries(e, need);
    std::set<const Value *> inner;
    for (size_t k = 0; k < live.size(); ++k)
      if (live[k]) {
        inner.insert(body.results[k]);
        need.insert(e.ins[C + k]);
      }
    neededIn(body, inner);
    for (size_t c = 0; c < C; ++c)
      if (inner.count(body.params[1 + c])) need.insert(e.ins[c]);
  }
}

// The carries of loop or while `e` needed for its results in `liveAfter` (and, for a while,
// by its predicate): a live carry's body result may read other carries. The body's params
// are (index for a loop, consts..., carries...).
std::vector<bool> liveCarries(const Eqn &e, const std::set<const Value *> &liveAfter) {
  const Func &body = *e.bodies.back();
  size_t first = e.prim == Prim::Loop ? 1 : 0;
  size_t C = (size_t)e.intParam("num_consts"), K = e.outs.size();
  std::vector<bool> live(K);
  for (size_t k = 0; k < K; ++k) live[k] = liveAfter.count(e.outs[k]) != 0;
  if (e.prim == Prim::While) {
    const Func &pred = *e.bodies[0];
    std::set<const Value *> predNeeds(pred.results.begin(), pred.results.end());
    neededIn(pred, predNeeds);
    for (size_t k = 0; k < K; ++k) live[k] = live[k] || predNeeds.count(pred.params[C + k]);
  }
  for (bool changed = true; changed;) {
    std::set<const Value *> need;
    for (size_t k = 0; k < K; ++k)
      if (live[k]) need.insert(body.results[k]);
    neededIn(body, need);
    changed = false;
    for (size_t k = 0; k < K; ++k)
      if (!live[k] && need.count(body.params[first + C + k])) changed = live[k] = true;
  }
  return live;
}

// Narrows the loop `e` to the carries its results in `liveAfter` need.
void pruneLoop(Eqn &e, const std::set<const Value *> &liveAfter) {
  Func &body = *e.bodies[0];
  size_t C = (size_t)e.intParam("num_consts"), K = e.outs.size();
  std::vector<bool> live = liveCarries(e, liveAfter);
  std::vector<Value *> results, outs;
  for (size_t k = 0; k < K; ++k)
    if (live[k]) {
      results.push_back(body.results[k]);
      outs.push_back(e.outs[k]);
    }
  body.results = results;
  pruneDeadCode(body);
  std::set<const Value *> read(body.results.begin(), body.results.end());
  for (const Eqn &be : body.eqns) read.insert(be.ins.begin(), be.ins.end());
  std::vector<Value *> params = {body.params[0]}, ins;
  size_t consts = 0;
  for (size_t c = 0; c < C; ++c)
    if (read.count(body.params[1 + c])) {
      params.push_back(body.params[1 + c]);
      ins.push_back(e.ins[c]);
      ++consts;
    }
  for (size_t k = 0; k < K; ++k)
    if (live[k]) {
      params.push_back(body.params[1 + C + k]);
      ins.push_back(e.ins[C + k]);
    }
  body.params = params;
  e.ins = ins;
  e.outs = outs;
  e.params["num_consts"] = (int64_t)consts;
}

// Narrows the while loop `e` to the carries its results in `liveAfter` and its predicate need
// (a jvp's tangent of a carry that only steers the loop is dropped, with its collectives).
void pruneWhile(Eqn &e, const std::set<const Value *> &liveAfter) {
  Func &pred = *e.bodies[0], &body = *e.bodies[1];
  size_t C = (size_t)e.intParam("num_consts"), K = e.outs.size();
  std::vector<bool> live = liveCarries(e, liveAfter);
  std::vector<Value *> results, outs;
  for (size_t k = 0; k < K; ++k)
    if (live[k]) {
      results.push_back(body.results[k]);
      outs.push_back(e.outs[k]);
    }
  body.results = results;
  pruneDeadCode(body);
  pruneDeadCode(pred);
  std::set<const Value *> read(body.results.begin(), body.results.end());
  read.insert(pred.results.begin(), pred.results.end());
  for (const Func *f : {&pred, &body})
    for (const Eqn &fe : f->eqns) read.insert(fe.ins.begin(), fe.ins.end());
  std::vector<Value *> predParams, bodyParams, ins;
  size_t consts = 0;
  for (size_t c = 0; c < C; ++c)
    if (read.count(pred.params[c]) || read.count(body.params[c])) {
      predParams.push_back(pred.params[c]);
      bodyParams.push_back(body.params[c]);
      ins.push_back(e.ins[c]);
      ++consts;
    }
  for (size_t k = 0; k < K; ++k)
    if (live[k]) {
      predParams.push_back(pred.params[C + k]);
      bodyParams.push_back(body.params[C + k]);
      ins.push_back(e.ins[C + k]);
    }
  pred.params = predParams;
  body.params = bodyParams;
  e.ins = ins;
  e.outs = outs;
  e.params["num_consts"] = (int64_t)consts;
}

} // namespace

void pruneDeadCode(Func &f) {
  std::set<const Value *> live(f.results.begin(), f.results.end());
  for (size_t i = f.eqns.size(); i-- > 0;) {
    Eqn &e = f.eqns[i];
    if (e.prim == Prim::Loop) pruneLoop(e, live);  // then its operands are all needed
    if (e.prim == Prim::While) pruneWhile(e, live);
    if (e.prim == Prim::Cond) pruneCond(e, live);
    if (e.prim == Prim::Shmap) pruneShmap(e, live);
    bool used = hasEffects(e);
    for (const Value *o : e.outs) used |= live.count(o) != 0;
    if (used) live.insert(e.ins.begin(), e.ins.end());
  }
  removeDeadEqns(f);
}

} // namespace shmapc::passes::ad
