// keep-stage-residuals: a pipeline's backward step reads what its forward step saved instead of
// computing the stage's forward again.
//
// Before autodiff a stage program's forward step (F) calls the stage's function and its backward
// step (B) takes the vjp of the same function at the same arguments. After it, B is a call of the
// derived function: a forward part that reads no cotangent (the stage's forward, its results
// and the residuals) and a backward part. The forward part replaces the F step's call, where it
// computes the activations it sends; the backward part replaces B's call and reads the
// residuals the F step left. Under zb-h1 the backward part is split again: what the inputs'
// cotangents need stays in B (the previous stage waits for them), the rest (the weights'
// gradients alone) moves to the W step.
#include "passes/pipeline/Copy.h"
#include "passes/pipeline/Pipeline.h"

#include <map>
#include <set>
#include <tuple>

namespace shmapc::passes {

namespace {

using namespace ir;
using pipeline::copyEqnInto;

// Per equation of `g`: whether it reads (directly or through earlier equations) one of `from`.
std::vector<bool> reads(const Func &g, std::set<const Value *> from) {
  std::vector<bool> out(g.eqns.size(), false);
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    for (const Value *in : g.eqns[i].ins) out[i] = out[i] || from.count(in);
    if (out[i]) from.insert(g.eqns[i].outs.begin(), g.eqns[i].outs.end());
  }
  return out;
}

// Per equation of `g`: whether one of `results` needs it.
std::vector<bool> needed(const Func &g, const std::vector<const Value *> &results) {
  std::set<const Value *> live(results.begin(), results.end());
  std::vector<bool> out(g.eqns.size(), false);
  for (size_t i = g.eqns.size(); i-- > 0;) {
    for (const Value *o : g.eqns[i].outs) out[i] = out[i] || live.count(o);
    if (out[i]) live.insert(g.eqns[i].ins.begin(), g.eqns[i].ins.end());
  }
  return out;
}

void splitSteps(Module &m, Func &P) {
  using Key = std::pair<int64_t, int64_t>;  // (stage, micro-batch)
  std::map<Key, size_t> fCall, bCall, wBegin;
  int64_t kind = -1, stage = 0, mb = 0;
  for (size_t i = 0; i < P.eqns.size(); ++i) {
    const Eqn &e = P.eqns[i];
    if (e.prim == Prim::PipeStep) {
      if (e.intParam("begin")) {
        kind = e.intParam("kind"), stage = e.intParam("stage"), mb = e.intParam("mb");
        if (kind == 2) wBegin[{stage, mb}] = i;
      } else {
        kind = -1;
      }
      continue;
    }
    if (e.prim != Prim::Call) continue;
    if (e.has("pipeline_forward")) fCall[{e.intParam("stage"), e.intParam("mb")}] = i;
    else if (kind == 1) bCall[{stage, mb}] = i;
  }
  std::map<size_t, std::vector<Eqn>> replace;  // an equation's index -> what replaces it
  std::map<size_t, std::vector<Eqn>> insertAfter;
  std::map<const Value *, Value *> rename;
  for (const auto &[key, bi] : bCall) {
    std::map<const Func *, Func *> copies;  // (this step's: each step's equations get bodies of their own)
    auto fi = fCall.find(key);
    if (fi == fCall.end()) continue;
    const Eqn &F = P.eqns[fi->second], &B = P.eqns[bi];
    const Func &g = *B.bodies[0];
    const size_t nPrimal = F.ins.size(), nOut = F.outs.size();
    if (B.ins.size() < nPrimal || g.results.size() < nOut) continue;
    bool same = true;
    for (size_t i = 0; i < nPrimal; ++i) same &= B.ins[i] == F.ins[i];
    if (!same) continue;
    std::set<const Value *> cts(g.params.begin() + (long)nPrimal, g.params.end());
    const std::vector<bool> back = reads(g, cts);
    std::map<const Value *, Value *> gm;
    for (size_t i = 0; i < g.params.size(); ++i) gm[g.params[i]] = B.ins[i];
    std::vector<Eqn> fwd, bwd, w;
    for (size_t j = 0; j < g.eqns.size(); ++j)
      if (!back[j]) copyEqnInto(m, g.eqns[j], P, gm, copies, fwd);
    // Under zb-h1 the weights' gradients not on the way to the inputs' cotangents wait for W.
    std::vector<bool> toInputs(g.eqns.size(), true);
    auto wb = wBegin.find(key);
    if (wb != wBegin.end()) {
      std::vector<const Value *> inputCts;
      for (int64_t k : F.intsParam("activation_results")) inputCts.push_back(g.results[nOut + (size_t)k]);
      toInputs = needed(g, inputCts);
    }
    for (size_t j = 0; j < g.eqns.size(); ++j)
      if (back[j]) copyEqnInto(m, g.eqns[j], P, gm, copies, toInputs[j] ? bwd : w);
    for (size_t k = 0; k < nOut; ++k) rename[F.outs[k]] = gm.count(g.results[k]) ? gm.at(g.results[k]) : g.results[k];
    for (size_t k = 0; k < B.outs.size(); ++k)
      rename[B.outs[k]] = gm.count(g.results[k]) ? gm.at(g.results[k]) : g.results[k];
    replace[fi->second] = std::move(fwd);
    replace[bi] = std::move(bwd);
    if (wb != wBegin.end()) insertAfter[wb->second] = std::move(w);
  }
  if (replace.empty()) return;
  auto renamed = [&](Value *v) {
    for (auto it = rename.find(v); it != rename.end(); it = rename.find(v)) v = it->second;
    return v;
  };
  std::vector<Eqn> out;
  for (size_t i = 0; i < P.eqns.size(); ++i) {
    auto r = replace.find(i);
    std::vector<Eqn> here;
    if (r != replace.end()) here = std::move(r->second);
    else here.push_back(std::move(P.eqns[i]));
    auto a = insertAfter.find(i);
    if (a != insertAfter.end())
      for (Eqn &e : a->second) here.push_back(std::move(e));
    for (Eqn &e : here) {
      for (Value *&v : e.ins) v = renamed(v);
      out.push_back(std::move(e));
    }
  }
  P.eqns = std::move(out);
  for (Value *&r : P.results) r = renamed(r);
}

} // namespace

void keepStageResiduals(Module &m, Diagnostics &) {
  std::vector<Func *> programs;
  for (const auto &f : m.funcs)
    for (const Eqn &e : f->eqns)
      if (e.prim == Prim::Pipeline && !(e.has("remat") && e.intParam("remat")))
        for (Func *b : e.bodies) programs.push_back(b);
  for (Func *P : programs) splitSteps(m, *P);
}

} // namespace shmapc::passes
