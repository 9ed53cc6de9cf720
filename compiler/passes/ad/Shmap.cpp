// Shmaps under autodiff (JAX's shard_map partial evaluation, in IR form):
//   jvp — one shmap of the body's jvp that returns the primal results and their tangents (the
//         forward runs once);
//   vjp — the body's vjp is split in two shmaps. The forward shmap replaces the primal one: it
//         computes the results and also returns the residuals the backward part reads, each
//         device's own values stacked along a new leading dimension mapped over the axes they
//         vary over (so residuals never move between devices). The backward shmap, built by
//         the transposer with in_specs and out_specs swapped (variance types: no rescaling), takes
//         the residuals and the results' cotangents. Collectives run once, in the forward
//         shmap: their results are residuals, never recomputed. (A sum whose result is only
//         returned moves to the backward shmap afterwards: DeferPrimalReductions.cpp.) Local work needed only by the
//         backward part is recomputed there, constants are remade rather than stored, and so
//         are element-wise residuals computable from the other residuals (remade next to
//         their readers: remakeElementwiseResiduals, copyBackwardEqns).
#include "passes/ad/AD.h"
#include "rules/Rules.h"

#include <algorithm>
#include <functional>

namespace shmapc::passes::ad {

namespace {

bool differentiable(const Value *v) { return isFloat(v->type.dtype); }

bool cheapToRemake(Prim p) { return p == Prim::Pbroadcast || changesOnlyShape(p); }

AxisSet allAxes(const Mesh &mesh) { return (AxisSet(1) << mesh.axes.size()) - 1; }

// The forward part's values the backward part reads: those defined by forward equations that
// are not remade, read by the backward part's equations or returned as cotangents.
std::vector<Value *> residualsOf(const Func &v, size_t K, const std::vector<bool> &forward,
                                 const std::vector<bool> &remake) {
  std::set<const Value *> fwdDefined;
  for (size_t i = 0; i < v.eqns.size(); ++i)
    if (forward[i] && !remake[i]) fwdDefined.insert(v.eqns[i].outs.begin(), v.eqns[i].outs.end());
  std::vector<Value *> residuals;
  std::set<const Value *> seen;
  auto noteRead = [&](Value *in) {
    if (fwdDefined.count(in) && seen.insert(in).second) residuals.push_back(in);
  };
  for (size_t i = 0; i < v.eqns.size(); ++i)
    if (!forward[i] || remake[i])
      for (Value *in : v.eqns[i].ins) noteRead(in);
  for (size_t k = K; k < v.results.size(); ++k) noteRead(v.results[k]);
  return residuals;
}

// An equation a fused loop computes element by element from its operands (codegen fuses
// those with a scalar rule), or a change of shape: cheap to do again where its result is read.
bool elementwise(const Eqn &q) {
  if (!q.bodies.empty() || rules::communicatesOver(q) || q.outs.size() != 1) return false;
  if (q.prim == Prim::Reshape || q.prim == Prim::BroadcastInDim || q.prim == Prim::Pbroadcast) return true;
  return q.prim != Prim::Transpose && rules::rulesOf(q.prim).scalar != nullptr;
}

// What a residual may be remade from: element-wise equations, and transposes (a matmul's
// operand transposed in the forward part is read through BLAS's flag where it is remade:
// fold-transposes).
bool remakable(const Eqn &q) { return elementwise(q) || (q.prim == Prim::Transpose && !rules::communicatesOver(q)); }

// At most this many equations are remade for one residual: a longer chain would cost the
// backward part more arithmetic than the store and load of the residual it saves.
constexpr size_t kMaxRemadeChain = 12;

// Marks for remaking (in the backward part as well as the forward) each element-wise residual
// that can be computed from values the backward part has anyway: the residuals kept, the
// primal params and what was remade before this pass, through at most kMaxRemadeChain
// element-wise forward equations in all. Residuals are decided in the order they are defined,
// so a chain may pass through earlier residuals that were remade (a GELU's products and tanh,
// all from its pre-activation), its count including theirs: remaking any value costs at most
// kMaxRemadeChain equations, and a long element-wise forward is remade in pieces, never from
// its start at every reader. No residual is added: every value a chain starts from is one the
// backward part reads already. Returns whether any was remade.
bool remakeElementwiseResiduals(const Func &v, size_t P, const std::vector<bool> &forward,
                                const std::vector<bool> &backward, std::vector<bool> &remake,
                                const std::vector<Value *> &residuals) {
  std::map<const Value *, size_t> definer;
  for (size_t i = 0; i < v.eqns.size(); ++i)
    for (const Value *o : v.eqns[i].outs) definer[o] = i;
  std::set<const Value *> kept(residuals.begin(), residuals.end());
  std::set<const Value *> available(v.params.begin(), v.params.begin() + P);
  for (size_t i = 0; i < v.eqns.size(); ++i)
    if (remake[i]) available.insert(v.eqns[i].outs.begin(), v.eqns[i].outs.end());
  std::vector<Value *> order = residuals;
  std::sort(order.begin(), order.end(), [&](const Value *a, const Value *b) {
    auto da = definer.find(a), db = definer.find(b);
    return (da == definer.end() ? 0 : da->second + 1) < (db == definer.end() ? 0 : db->second + 1);
  });
  bool any = false;
  for (Value *r : order) {
    kept.erase(r);
    // The forward equations to remake for r, found depth first from r.
    std::set<size_t> chain;
    std::function<bool(const Value *)> derivable = [&](const Value *x) {
      if (kept.count(x) || available.count(x)) return true;
      auto d = definer.find(x);
      if (d == definer.end()) return false;
      const size_t i = d->second;
      if (chain.count(i)) return true;
      if (!forward[i] || backward[i] || !remakable(v.eqns[i]) || chain.size() >= kMaxRemadeChain) return false;
      chain.insert(i);
      for (const Value *in : v.eqns[i].ins)
        if (!derivable(in)) return false;
      return true;
    };
    auto d = definer.find(r);
    if (d == definer.end() || remake[d->second]) {
      kept.insert(r);
      continue;
    }
    if (!derivable(r)) {
      // A transpose's result is stored as its operand instead (the same bytes), which the
      // backward part transposes again where it reads it: into a matmul's flag, mostly.
      const Eqn &q = v.eqns[d->second];
      const bool swap = q.prim == Prim::Transpose && forward[d->second] && !backward[d->second] &&
                        !rules::communicatesOver(q) && definer.count(q.ins[0]) && forward[definer.at(q.ins[0])];
      if (!swap) {
        kept.insert(r);
        continue;
      }
      kept.insert(q.ins[0]);
      chain = {d->second};
    }
    for (size_t i : chain) remake[i] = true;
    any = true;
  }
  return any;
}

// The backward body's equations: those that read a cotangent in order, and each of the others
// (remade, or local work only the backward part needs) just before the first equation that
// reads its result: next to its readers, codegen computes it in their fused loop rather than
// in a loop of its own that stores it for later. An element-wise one is computed again for
// readers past a matmul, reduction or collective (those end a fused loop), rather than
// stored at its first readers and loaded at the later ones.
void copyBackwardEqns(const Func &v, size_t K, const std::vector<bool> &forward, const std::vector<bool> &remake,
                      const std::vector<bool> &backward, Func &bw, std::map<const Value *, Value *> &bmap) {
  std::map<const Value *, size_t> deferred;  // such an equation's results -> the equation
  for (size_t i = 0; i < v.eqns.size(); ++i)
    if ((!forward[i] || remake[i]) && !backward[i])
      for (const Value *o : v.eqns[i].outs) deferred[o] = i;
  // The stretch of element-wise equations being copied (a fused loop, roughly) and the one
  // each deferred equation was last copied in (0: not yet).
  size_t stretch = 1;
  std::vector<size_t> copiedIn(v.eqns.size(), 0);
  std::function<void(size_t)> copy = [&](size_t i) {
    const bool cheap = elementwise(v.eqns[i]);
    if (copiedIn[i] && (!cheap || copiedIn[i] == stretch)) return;
    for (const Value *in : v.eqns[i].ins)
      if (auto d = deferred.find(in); d != deferred.end()) copy(d->second);
    if (!cheap) ++stretch;
    copiedIn[i] = stretch;
    copyEqn(v.eqns[i], bw, bmap);
  };
  for (size_t i = 0; i < v.eqns.size(); ++i)
    if (backward[i]) copy(i);
  for (size_t k = K; k < v.results.size(); ++k)
    if (auto d = deferred.find(v.results[k]); d != deferred.end()) copy(d->second);
}

} // namespace

std::vector<bool> pruneParams(Func &g, size_t count) {
  std::set<const Value *> used(g.results.begin(), g.results.end());
  for (const Eqn &e : g.eqns) used.insert(e.ins.begin(), e.ins.end());
  std::vector<bool> keep;
  std::vector<Value *> params;
  for (size_t i = 0; i < g.params.size(); ++i) {
    bool k = i >= count || used.count(g.params[i]);
    if (i < count) keep.push_back(k);
    if (k) params.push_back(g.params[i]);
  }
  g.params = params;
  return keep;
}

void Linearizer::shmapRule(const Eqn &e) {
  std::vector<Value *> t;
  bool any = false;
  for (Value *v : e.ins) {
    t.push_back(differentiable(v) ? tangentOf(v) : nullptr);
    any |= t.back() != nullptr;
  }
  if (!any) return;
  if (!emitTangents) return splitShmap(e, t);
  // jvp: one shmap over (primals, tangents) returning (results, tangents); it replaces the
  // primal shmap already emitted.
  popPrimal(e);
  Eqn j = e;
  j.bodies = {d.jvpFunc(*e.bodies[0], false)};
  auto specIn = e.specsParam("in_specs"), specOut = e.specsParam("out_specs");
  for (size_t i = 0; i < e.ins.size(); ++i) {
    j.ins.push_back(t[i] ? t[i] : b.zerosLike(e.ins[i]->type));
    specIn.push_back(e.specsParam("in_specs")[i]);
  }
  for (size_t k = 0; k < e.outs.size(); ++k) {
    Value *o = e.outs[k];
    Value *to = differentiable(o) ? newTangent(o->type) : b.f.newValue(o->type);
    if (differentiable(o)) tangent[o] = to;
    j.outs.push_back(to);
    specOut.push_back(e.specsParam("out_specs")[k]);
  }
  j.params["in_specs"] = specIn;
  j.params["out_specs"] = specOut;
  b.emitEqn(std::move(j));
}

// vjp: splits the body's vjp into the forward shmap (emitted now, in place of the primal one)
// and the backward body (taped; the transposer emits its shmap).
void Linearizer::splitShmap(const Eqn &e, const std::vector<Value *> &t) {
  Module &m = d.module();
  Func &body = *e.bodies[0];
  const Mesh &mesh = *body.mesh;
  std::vector<int64_t> wrt;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i]) wrt.push_back((int64_t)i);
  // (primals..., cts...) -> (results..., cts of wrt...)
  Func *v = d.vjpFuncFor(body, wrt, true, false, e.loc, &e);
  size_t P = body.params.size(), K = e.outs.size();

  // Which equations read a cotangent (backward), and which the backward part remakes rather
  // than stores: those computed from constants alone, and pbroadcasts and shape changes of
  // params (a replicated weight's pbroadcast costs nothing to redo).
  std::vector<bool> backward = readsCotangent(*v, P), remake(v->eqns.size());
  std::set<const Value *> remade(v->params.begin(), v->params.begin() + P), constOnly;
  for (size_t i = 0; i < v->eqns.size(); ++i) {
    const Eqn &q = v->eqns[i];
    if (backward[i]) continue;
    bool local = q.bodies.empty() && !rules::communicatesOver(q), c = local, cheap = local && cheapToRemake(q.prim);
    for (Value *in : q.ins) {
      c = c && constOnly.count(in);
      cheap = cheap && (remade.count(in) || constOnly.count(in));
    }
    remake[i] = c || cheap;
    for (Value *o : q.outs) {
      if (c) constOnly.insert(o);
      if (remake[i]) remade.insert(o);
    }
  }
  // The forward part: what the results need, and every communicating equation that reads no
  // cotangent (with what it needs), so no collective runs twice.
  std::set<const Value *> need(v->results.begin(), v->results.begin() + K);
  std::vector<bool> forward(v->eqns.size());
  for (size_t i = v->eqns.size(); i-- > 0;) {
    const Eqn &q = v->eqns[i];
    if (backward[i]) continue;
    bool used = rules::communicatesOver(q);
    for (Value *o : q.outs) used |= need.count(o) != 0;
    if (!used) continue;
    forward[i] = true;
    need.insert(q.ins.begin(), q.ins.end());
  }

  // The backward body reads: primal params (passed through), constants (remade), and the
  // forward part's other values (residuals).
  std::vector<Value *> residuals = residualsOf(*v, K, forward, remake);
  // Element-wise residuals the backward part can compute again from residuals it reads anyway
  // are remade there instead of stored (a GELU's tanh, its products and sums, an exp of
  // logits: each a whole activation written by the forward and read back, where recomputing
  // it inside the backward's fused loop costs a few instructions per element).
  if (remakeElementwiseResiduals(*v, P, forward, backward, remake, residuals))
    residuals = residualsOf(*v, K, forward, remake);

  // The forward shmap's body: (primals...) -> (results..., packed residuals...).
  Func *fw = newFuncLike(m, body, body.name + "_fwd");
  fw->singleUse = true;
  std::map<const Value *, Value *> fmap;
  for (size_t i = 0; i < P; ++i) fmap[v->params[i]] = param(*fw, v->params[i]->type, v->params[i]->hint);
  for (size_t i = 0; i < v->eqns.size(); ++i)
    if (forward[i]) copyEqn(v->eqns[i], *fw, fmap);
  Builder fb{m, *fw, e.loc};
  for (size_t k = 0; k < K; ++k) fw->results.push_back(lookup(fmap, v->results[k]));
  Eqn fwd = e;
  fwd.bodies = {fw};
  auto outSpecs = e.specsParam("out_specs");
  std::vector<Value *> hostResiduals;
  std::vector<PartitionSpec> residualSpecs;
  std::vector<Type> packedTypes;
  for (Value *r : residuals) {
    AxisSet V = body.checkVma ? r->type.vary : allAxes(mesh);
    Value *local = lookup(fmap, r);
    Type host = r->type;
    host.vary = 0;
    PartitionSpec spec;
    if (V) {  // each device's own copy, stacked along a new dimension mapped over V
      std::vector<int64_t> shape = r->type.shape;
      shape.insert(shape.begin(), 1);
      local = fb.reshape(local, shape);  // varies over V already (untyped: over nothing)
      int64_t n = 1;
      std::vector<int> axes;
      for (int64_t a : axisList(V)) {
        n *= mesh.sizes[a];
        axes.push_back((int)a);
      }
      spec.dims = {axes};
      host.shape = shape;
      host.shape[0] = n;
    }
    fw->results.push_back(local);
    packedTypes.push_back(local->type);
    outSpecs.push_back(spec);
    residualSpecs.push_back(spec);
    Value *h = b.f.newValue(host, r->hint.empty() ? "res" : r->hint + "_res");
    fwd.outs.push_back(h);
    hostResiduals.push_back(h);
  }
  fwd.params["out_specs"] = outSpecs;
  popPrimal(e);
  b.emitEqn(std::move(fwd));

  // The backward body: (primals..., packed residuals..., cts...) -> (cts of wrt...).
  v->name += "_split";  // unreachable after this; the backward body takes its name
  Func *bw = newFuncLike(m, body, body.name + "_vjp");
  bw->isBackward = true;
  bw->forwardPart = fw;
  Builder bb{m, *bw, e.loc};
  std::map<const Value *, Value *> bmap;
  for (size_t i = 0; i < P; ++i) bmap[v->params[i]] = param(*bw, v->params[i]->type, v->params[i]->hint);
  for (size_t r = 0; r < residuals.size(); ++r) {
    Value *p = param(*bw, packedTypes[r], residuals[r]->hint);
    bmap[residuals[r]] = packedTypes[r].shape == residuals[r]->type.shape
                             ? p
                             : bb.reshape(p, residuals[r]->type.shape);
  }
  for (size_t k = 0; k < K; ++k) bmap[v->params[P + k]] = param(*bw, v->params[P + k]->type, v->params[P + k]->hint);
  copyBackwardEqns(*v, K, forward, remake, backward, *bw, bmap);
  for (size_t k = K; k < v->results.size(); ++k) bw->results.push_back(lookup(bmap, v->results[k]));
  pruneDeadCode(*bw);

  LinearEqn le;
  le.e = e;
  le.tangentIns = t;
  le.backward = bw;
  le.residuals = hostResiduals;
  le.residualSpecs = residualSpecs;
  for (Value *o : e.outs) {
    Value *to = differentiable(o) ? newTangent(o->type) : nullptr;
    le.tangentOuts.push_back(to);
    if (to) tangent[o] = to;
  }
  tape.push_back(std::move(le));
}

// The transpose of a taped shmap: the backward body's shmap over (primal operands it reads,
// residuals, cotangents of the results), with in_specs and out_specs swapped.
void Transposer::shmapRule(const LinearEqn &le) {
  const Eqn &e = le.e;
  std::vector<int64_t> wrt;
  for (size_t i = 0; i < le.tangentIns.size(); ++i)
    if (le.tangentIns[i]) wrt.push_back((int64_t)i);
  bool anyCt = false;
  for (Value *to : le.tangentOuts) anyCt |= to && ctOf(to);
  if (!anyCt) return;  // a zero cotangent: no backward shmap
  Func *body = le.backward;
  size_t P = e.ins.size(), R = le.residuals.size();
  std::vector<bool> used = pruneParams(*body, P + R);

  const auto &inSpecs = e.specsParam("in_specs"), &outSpecs = e.specsParam("out_specs");
  Eqn t{Prim::Shmap, {}, {}, {{"mesh", e.params.at("mesh")}}, {body}, e.loc};
  std::vector<PartitionSpec> specIn, specOut;
  for (size_t i = 0; i < P + R; ++i)
    if (used[i]) {
      t.ins.push_back(i < P ? e.ins[i] : le.residuals[i - P]);
      specIn.push_back(i < P ? inSpecs[i] : le.residualSpecs[i - P]);
    }
  for (size_t k = 0; k < e.outs.size(); ++k) {
    Value *c = le.tangentOuts[k] ? ctOf(le.tangentOuts[k]) : nullptr;
    t.ins.push_back(c ? c : b.zerosLike(e.outs[k]->type));
    specIn.push_back(outSpecs[k]);
  }
  for (int64_t w : wrt) {
    t.outs.push_back(b.f.newValue(e.ins[w]->type, e.ins[w]->hint.empty() ? "" : e.ins[w]->hint + "_ct"));
    specOut.push_back(inSpecs[w]);
  }
  t.params["in_specs"] = specIn;
  t.params["out_specs"] = specOut;
  std::vector<Value *> outs = t.outs;
  b.emitEqn(std::move(t));
  for (size_t j = 0; j < wrt.size(); ++j) accumulate(le.tangentIns[wrt[j]], outs[j]);
}

// A forward shmap made for one equation (Func::singleUse) loses the results nobody reads —
// e.g. the loss of a gradient, and with it the loss's all-reduce — and then the params its
// body no longer reads.
void pruneShmap(Eqn &e, const std::set<const Value *> &liveAfter) {
  Func &body = *e.bodies[0];
  if (!body.singleUse) return;
  auto outSpecs = e.specsParam("out_specs");
  std::vector<Value *> outs, results;
  std::vector<PartitionSpec> specs;
  for (size_t k = 0; k < e.outs.size(); ++k)
    if (liveAfter.count(e.outs[k])) {
      outs.push_back(e.outs[k]);
      results.push_back(body.results[k]);
      specs.push_back(outSpecs[k]);
    }
  if (outs.size() == e.outs.size()) return;
  e.outs = outs;
  body.results = results;
  e.params["out_specs"] = specs;
  pruneDeadCode(body);
  std::vector<bool> keep = pruneParams(body, body.params.size());
  auto inSpecs = e.specsParam("in_specs");
  std::vector<Value *> ins;
  std::vector<PartitionSpec> inKept;
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i]) {
      ins.push_back(e.ins[i]);
      inKept.push_back(inSpecs[i]);
    }
  e.ins = ins;
  e.params["in_specs"] = inKept;
}

} // namespace shmapc::passes::ad
