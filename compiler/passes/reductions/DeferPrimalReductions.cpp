// defer-primal-reductions: a forward shmap's sum whose result is only a primal output of the
// differentiated function (value_and_grad's loss: a psum or pmean over the batch axes) runs in
// the backward shmap instead, where combine-reductions can join it with the gradient sums.
//
// autodiff splits a shmap's vjp in two (ad/Shmap.cpp): the forward shmap computes the results
// and the residuals, the backward one the cotangents. A result the enclosing function only
// returns (no equation of it reads it: not the cotangents' computation, not other host code)
// is needed only when the function returns, after the backward shmap. If the forward body
// computes it as psum2(x) followed by element-wise steps with constants (pmean's division by
// the group size), the forward returns x instead, each device's own value stacked as a
// residual is (a new leading dimension mapped over the axes x varies over: no bytes move),
// and the backward body takes it as a parameter, runs the psum2 and the steps after it, and
// returns the value as an extra result with the result's own out_spec; the function returns
// that. The values are the same (the same sum of the same operands), one meeting fewer where
// the sum joins the gradients'.
#include "passes/reductions/Reductions.h"
#include "rules/Rules.h"

#include <algorithm>
#include <map>
#include <set>

namespace shmapc::passes {

namespace {

using namespace ir;

// The steps after the psum2 that may move with it: element-wise, one result, every other
// operand a constant (copied along).
bool movableStep(const Eqn &e) {
  return e.bodies.empty() && e.outs.size() == 1 && !rules::communicatesOver(e) &&
         rules::rulesOf(e.prim).scalar != nullptr;
}

struct Deferred {
  const Eqn *sum = nullptr;          // the psum2 in the forward body
  std::vector<const Eqn *> steps;    // after it, in order, ending at the result
  std::vector<const Eqn *> consts;   // the constants the steps read
};

// Whether forward result k is psum2(x) then movable steps, none of whose values anything else
// in the body reads.
bool findDeferred(const Func &fw, size_t k, Deferred &d) {
  std::map<const Value *, const Eqn *> definer;
  std::map<const Value *, int> reads;
  for (const Eqn &e : fw.eqns) {
    for (const Value *o : e.outs) definer[o] = &e;
    for (const Value *in : e.ins) ++reads[in];
  }
  for (const Value *r : fw.results) ++reads[r];
  const Value *v = fw.results[k];
  std::vector<const Eqn *> steps;
  while (true) {
    if (reads[v] != 1) return false;  // (the result itself: read once, by the return)
    auto it = definer.find(v);
    if (it == definer.end()) return false;
    const Eqn &e = *it->second;
    if (e.prim == Prim::Psum2) {
      if (e.ins.size() != 1 || e.outs.size() != 1) return false;
      d.sum = &e;
      break;
    }
    if (!movableStep(e)) return false;
    const Value *chain = nullptr;
    for (const Value *in : e.ins) {
      auto def = definer.find(in);
      const bool constant = def != definer.end() && def->second->prim == Prim::Constant;
      if (constant && in->type.vary == 0) {
        d.consts.push_back(def->second);
        continue;
      }
      if (chain) return false;  // two non-constant operands: not a chain
      chain = in;
    }
    if (!chain) return false;
    steps.push_back(&e);
    v = chain;
  }
  d.steps.assign(steps.rbegin(), steps.rend());
  std::reverse(d.consts.begin(), d.consts.end());  // (found from the result back)
  return true;
}

// Defers result k of forward shmap `F` (equation fi of host function h) into backward shmap
// `B` (equation bi).
void defer(Func &h, size_t fi, size_t bi, size_t k, const Deferred &d) {
  Eqn &F = h.eqns[fi];
  Func &fw = *F.bodies[0];
  Value *x = d.sum->ins[0];
  // The forward returns each device's x stacked, as ADShmap's residuals.
  std::vector<int64_t> packedShape = x->type.shape;
  packedShape.insert(packedShape.begin(), 1);
  Value *packed = fw.newValue(Type{x->type.dtype, packedShape, x->type.vary}, x->hint);
  const Loc loc = d.sum->loc;
  // The backward body: the partial as a parameter, then copies of the sum, of the constants
  // the steps read and of the steps.
  Func &bw = *h.eqns[bi].bodies[0];
  std::map<const Value *, Value *> map;
  Value *param = bw.newValue(packed->type, x->hint.empty() ? "partial" : x->hint);
  bw.params.push_back(param);
  bw.eqns.push_back(rules::makeEqn(bw, Prim::Reshape, {param}, {}, loc, {.declared = &x->type, .hint = x->hint}));
  map[x] = bw.eqns.back().outs[0];
  auto copy = [&](const Eqn &e) {
    Eqn c = e;
    for (Value *&in : c.ins) in = map.at(in);
    for (Value *&o : c.outs) {
      Value *n = bw.newValue(o->type, o->hint);
      map[o] = n;
      o = n;
    }
    bw.eqns.push_back(std::move(c));
  };
  for (const Eqn *c : d.consts)
    if (!map.count(c->outs[0])) copy(*c);
  copy(*d.sum);
  for (const Eqn *s : d.steps) copy(*s);
  Value *value = map.at(fw.results[k]);
  bw.results.push_back(value);

  // The forward body without them (a constant only they read goes too).
  std::set<const Eqn *> moved(d.steps.begin(), d.steps.end());
  moved.insert(d.sum);
  std::set<const Value *> stillRead(fw.results.begin(), fw.results.end());
  for (const Eqn &e : fw.eqns)
    if (!moved.count(&e)) stillRead.insert(e.ins.begin(), e.ins.end());
  for (const Eqn *c : d.consts)
    if (!stillRead.count(c->outs[0])) moved.insert(c);
  std::vector<Eqn> kept;
  for (Eqn &e : fw.eqns)
    if (!moved.count(&e)) kept.push_back(std::move(e));
  kept.push_back(rules::makeEqn(fw, Prim::Reshape, {x}, {}, loc, {.declared = &packed->type, .into = packed}));
  fw.eqns = std::move(kept);
  fw.results[k] = packed;

  // The host: F's result k becomes the stacked partial (mapped over x's axes), B takes it and
  // gives the value, with the out_spec the result had.
  Value *old = F.outs[k];
  int64_t n = 1;
  for (int64_t a : axisList(x->type.vary)) n *= fw.mesh->sizes[(size_t)a];
  std::vector<int64_t> hostShape = packedShape;
  hostShape[0] = n;
  Value *partial = h.newValue(Type{x->type.dtype, hostShape, 0}, old->hint.empty() ? "partial" : old->hint + "_partial");
  F.outs[k] = partial;
  auto fwSpecs = F.specsParam("out_specs");
  PartitionSpec resultSpec = fwSpecs[k];
  PartitionSpec packedSpec;
  std::vector<int> axes;
  for (int64_t a : axisList(x->type.vary)) axes.push_back((int)a);
  packedSpec.dims = {axes};
  fwSpecs[k] = packedSpec;
  F.params["out_specs"] = fwSpecs;

  Eqn &B = h.eqns[bi];
  B.ins.push_back(partial);
  auto inSpecs = B.specsParam("in_specs");
  inSpecs.push_back(packedSpec);
  B.params["in_specs"] = inSpecs;
  Value *result = h.newValue(old->type, old->hint);
  B.outs.push_back(result);
  auto outSpecs = B.specsParam("out_specs");
  outSpecs.push_back(resultSpec);
  B.params["out_specs"] = outSpecs;
  for (Value *&r : h.results)
    if (r == old) r = result;
}

void deferIn(Func &h) {
  for (size_t bi = 0; bi < h.eqns.size(); ++bi) {
    const Eqn &B = h.eqns[bi];
    if (B.prim != Prim::Shmap || B.bodies.empty() || !B.bodies[0]->isBackward || !B.bodies[0]->forwardPart)
      continue;
    const Func *fwBody = B.bodies[0]->forwardPart;
    size_t fi = bi;
    for (size_t i = 0; i < bi; ++i)
      if (h.eqns[i].prim == Prim::Shmap && !h.eqns[i].bodies.empty() && h.eqns[i].bodies[0] == fwBody) fi = i;
    if (fi == bi || !fwBody->checkVma || !fwBody->mesh) continue;
    // The forward shmap's results no equation of h reads (only returned).
    std::set<const Value *> read;
    for (const Eqn &e : h.eqns) read.insert(e.ins.begin(), e.ins.end());
    std::set<const Value *> returned(h.results.begin(), h.results.end());
    for (size_t k = 0; k < h.eqns[fi].outs.size(); ++k) {
      const Value *o = h.eqns[fi].outs[k];
      if (read.count(o) || !returned.count(o)) continue;
      Deferred d;
      if (findDeferred(*h.eqns[fi].bodies[0], k, d)) defer(h, fi, bi, k, d);
    }
  }
}

} // namespace

void deferPrimalReductions(Module &m, Diagnostics &) {
  for (auto &f : m.funcs)
    if (!f->mesh) deferIn(*f);
}

} // namespace shmapc::passes
