// split-micro-batches: a pipeline function's grad computed over micro-batches of its batch
// arguments, with the same value and gradients as over the whole batch.
//
// Which values are per example, summed over examples, or of the whole batch is read off the
// differentiated function with the primitives' sharding factors: micro-batching is sharding
// dimension 0 of the batch arguments over a virtual axis of M parts run one after another. A
// value whose factor carries that split is per example (its micro-batch part computed alone);
// a factor the equation reduces is a sum over examples. Such a sum of values that depend on the
// parameters is accumulated: if the loss is an affine function of these sums,
//   loss(S) = loss(0) + c . S   and   S = sum_m S_m,
// then loss = 1/M sum_m loss(M S_m): each micro-batch computes the loss with its sums scaled by
// M, and the gradients of loss/M are summed over micro-batches. The pass checks the affinity
// (a sum scaled, added, divided by a value that does not depend on the sums: mean, sum, masked
// mean) and names the equation that breaks it. A reduction over examples of the batch's data
// alone (a masked mean's count) is the whole batch's, computed once before the micro-batches.
// A stage_boundary() in code no pipeline differentiates (the model evaluated outside the
// pipeline) marks nothing and is dropped.
#include "passes/inline/Inline.h"
#include "passes/pipeline/Copy.h"
#include "passes/pipeline/Splitter.h"
#include "rules/Rules.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace shmapc::passes {

namespace pipeline {

namespace {

bool hasVjp(const Func &f) {
  for (const Eqn &e : f.eqns) {
    if (e.prim == Prim::Vjp || e.prim == Prim::Jvp) return true;
    for (const Func *b : e.bodies)
      if (b->isNested && hasVjp(*b)) return true;
  }
  return false;
}

int64_t flopsOf(const Eqn &e) {
  if (e.outs.empty()) return 0;
  if (e.prim == Prim::Shmap) {  // its body's, on every device of its mesh
    int64_t body = 0;
    for (const Eqn &x : e.bodies[0]->eqns) body += flopsOf(x);
    return body * e.bodies[0]->mesh->numDevices();
  }
  const Type &t = e.outs[0]->type;
  if (!isFloat(t.dtype)) return 0;
  if (e.prim == Prim::Matmul) {
    const Type &a = e.ins[0]->type;
    int64_t k = a.shape[a.shape.size() - (e.has("transpose_lhs") && e.intParam("transpose_lhs") ? 2 : 1)];
    return 2 * t.numElements() * k;
  }
  if (e.prim == Prim::ReduceSum || e.prim == Prim::ReduceMax || e.prim == Prim::ReduceMin)
    return e.ins[0]->type.numElements();

  PrimKind k = primInfo(e.prim).kind;
  return k == PrimKind::Unary || k == PrimKind::Binary ? t.numElements() : 0;
}

} // namespace

void Splitter::run() {
  Func &F = *p_.func;
  if (p_.schedule == Schedule::Inference) return runInference();
  findGrad(F);
  Eqn &V = F.eqns[vIndex_];
  T_ = V.bodies[0];
  n_ = T_->params.size();
  findBatch(F, V);
  rewrite(F, stagedMicroBatchFunc());
}

Func *Splitter::stagedMicroBatchFunc() {
  inlineCallsIn(m_, *T_);
  // (a shmap body of its own per equation: its values are typed at micro-batch sizes alone)
  for (Eqn &e : T_->eqns)
    if (e.prim == Prim::Shmap) e.bodies[0] = copyFunc(m_, *e.bodies[0], e.bodies[0]->mesh);
  checkStages();
  analyse();
  recordStages((int64_t)boundaries_.size() + 1);
  Func *mb = microBatchFunc();
  stageShmapsOnSubmeshes(*mb);
  return mb;
}

void Splitter::fail(DiagId id, Loc loc, const std::string &msg, const std::string &hint) {
  diags_.fatal(id, loc.valid() ? loc : p_.loc, msg, hint);
}

void Splitter::findGrad(Func &F) {
  bool found = false;
  for (size_t i = 0; i < F.eqns.size(); ++i) {
    const Eqn &e = F.eqns[i];
    bool nested = false;
    for (const Func *b : e.bodies) nested |= b->isNested && hasVjp(*b);
    if (nested)
      fail(DiagId::PipelineGrad, e.loc, "the pipeline function " + p_.name + " differentiates inside a loop or an if",
           "call grad once in the pipeline function's own body: the pipeline runs it over the micro-batches");
    if (e.prim != Prim::Vjp && e.prim != Prim::Jvp) continue;
    if (e.prim == Prim::Jvp || e.intParam("linear"))
      fail(DiagId::PipelineGrad, e.loc,
           std::string(e.prim == Prim::Jvp ? "jvp" : "transpose") + " in the pipeline function " + p_.name,
           "a pipeline function differentiates its loss once with grad, value_and_grad or vjp");
    if (found)
      fail(DiagId::PipelineGrad, e.loc, "a second grad in the pipeline function " + p_.name,
           "a pipeline function is one train step: differentiate the loss once and update the parameters with "
           "the gradient");
    if (e.bodies[0]->results.size() != 1)
      fail(DiagId::PipelineGrad, e.loc, "the function the pipeline differentiates has " +
               std::to_string(e.bodies[0]->results.size()) + " results",
           "differentiate a loss: one float scalar");
    found = true;
    vIndex_ = i;
  }
  if (!found)
    fail(DiagId::PipelineGrad, p_.loc, "the pipeline function " + p_.name + " has no grad or value_and_grad call",
         "a pipeline function is a train step: call grad(loss)(params, batch...) once and update the parameters "
         "with the gradient");
}

void Splitter::findBatch(Func &F, const Eqn &V) {
  std::set<const Value *> dep;
  std::map<const Value *, size_t> leafOf;
  for (size_t k = 0; k < p_.batchLeaves.size(); ++k) {
    dep.insert(F.params[(size_t)p_.batchLeaves[k]]);
    leafOf[F.params[(size_t)p_.batchLeaves[k]]] = k;
  }
  for (size_t i = 0; i < vIndex_; ++i)
    for (const Value *in : F.eqns[i].ins)
      if (dep.count(in)) dep.insert(F.eqns[i].outs.begin(), F.eqns[i].outs.end());
  batchParam_.assign(n_, false);
  std::vector<bool> passed(p_.batchLeaves.size(), false);
  for (size_t j = 0; j < n_; ++j) {
    const Value *a = V.ins[j];
    auto it = leafOf.find(a);
    if (it != leafOf.end()) {
      batchParam_[j] = true;
      passed[it->second] = true;
    } else if (dep.count(a)) {
      fail(DiagId::PipelineBatch, V.loc,
           "argument " + std::to_string(j) + " of the grad call is computed from the batch",
           "pass the batch arguments to grad unchanged; compute from them inside the differentiated function");
    }
  }
  for (size_t k = 0; k < passed.size(); ++k)
    if (!passed[k])
      fail(DiagId::PipelineBatch, p_.batchLocs[k], "this batch argument is not passed to the grad call",
           "batch= names the arguments of the differentiated function that hold the batch");
  wrt_ = V.intsParam("wrt");
  for (int64_t w : wrt_)
    if (batchParam_[(size_t)w])
      fail(DiagId::PipelineBatch, V.loc, "the grad call differentiates with respect to a batch argument",
           "differentiate with respect to the parameters (argnums=...), not the batch");
}

void Splitter::analyse() {
  for (size_t j = 0; j < n_; ++j) {
    Info &i = info_[T_->params[j]];
    if (batchParam_[j]) i.split = 0, i.batch = true;
    if (std::find(wrt_.begin(), wrt_.end(), (int64_t)j) != wrt_.end()) i.theta = true;
  }
  analyseEqns(*T_);
}

void Splitter::checkStages() {
  stageOf_.assign(T_->eqns.size(), 0);
  for (size_t idx = 0; idx < T_->eqns.size(); ++idx) {
    if (T_->eqns[idx].prim == Prim::StageBoundary) boundaries_.push_back(idx);
    else stageOf_[idx] = (int)boundaries_.size();
  }
  const int64_t want = p_.numStages();
  const int64_t got = (int64_t)boundaries_.size() + 1;
  if (got != want)
    fail(DiagId::PipelineStages, boundaries_.empty() ? T_->loc : T_->eqns[boundaries_.back()].loc,
         "the differentiated function has " + std::to_string(got) + " stage(s) but the pipeline " + p_.name +
             " runs " + std::to_string(want),
         "mark " + std::to_string(want - 1) + " stage_boundary() in it: " +
             (!p_.placement.empty() ? std::string("one stage per entry of placement=")
                                    : std::string("one stage per device group along the stage axis") +
                                          (p_.virtualStages > 1 ? ", times virtual_stages" : "")));
  // Every stage computes something (a constant alone is no stage).
  std::vector<int64_t> work(got, 0);
  for (size_t idx = 0; idx < T_->eqns.size(); ++idx)
    if (T_->eqns[idx].prim != Prim::StageBoundary && primInfo(T_->eqns[idx].prim).kind != PrimKind::Const)
      ++work[(size_t)stageOf_[idx]];
  for (int64_t s = 0; s < got; ++s)
    if (!work[(size_t)s]) {
      Loc at = s < (int64_t)boundaries_.size() ? T_->eqns[boundaries_[(size_t)s]].loc
                                                 : T_->eqns[boundaries_.back()].loc;
      fail(DiagId::PipelineStages, at, "stage " + std::to_string(s) + " of the pipeline " + p_.name + " is empty",
           "move this stage_boundary() so that every stage computes part of the loss");
    }
}

void Splitter::recordStages(int64_t stages) {
  p_.stages.assign((size_t)stages, {});
  p_.stages[0].begin = T_->loc;
  std::map<const Value *, int> definedIn;
  std::set<std::pair<const Value *, int>> sent;
  for (size_t j = 0; j < n_; ++j) definedIn[T_->params[j]] = -1;
  for (size_t idx = 0; idx < T_->eqns.size(); ++idx) {
    const Eqn &e = T_->eqns[idx];
    if (e.prim == Prim::StageBoundary) {
      size_t b = (size_t)(std::find(boundaries_.begin(), boundaries_.end(), idx) - boundaries_.begin());
      p_.stages[b + 1].begin = e.loc;
      continue;
    }
    PipelineStage &st = p_.stages[(size_t)stageOf_[idx]];
    ++st.eqns;
    bool perExample = !e.outs.empty() && info_[e.outs[0]].split >= 0;
    for (const Value *v : e.ins) perExample |= info_[v].split >= 0;  // (a shmap of the examples)
    st.flops += flopsOf(e) / (perExample ? M_ : 1);
    for (const Value *v : e.ins) {
      auto it = definedIn.find(v);
      if (it == definedIn.end()) continue;
      if (it->second < 0) {
        auto w = std::find(T_->params.begin(), T_->params.end(), v) - T_->params.begin();
        if (std::find(wrt_.begin(), wrt_.end(), (int64_t)w) != wrt_.end() &&
            std::find(st.params.begin(), st.params.end(), v->hint) == st.params.end()) {
          st.params.push_back(v->hint);
          st.paramBytes += v->type.byteSize();
        }
      } else if (it->second < stageOf_[idx] && sent.insert({v, stageOf_[idx]}).second) {
        int64_t bytes = v->type.byteSize() / (info_[v].split >= 0 ? M_ : 1);
        p_.stages[(size_t)it->second].sendBytes += bytes;
      }
    }
    for (const Value *o : e.outs) definedIn[o] = stageOf_[idx];
  }
}

Value *Splitter::constant(Func &f, double v, const Type &t) {
  f.eqns.push_back(rules::makeEqn(f, Prim::Constant, {}, {{"value", std::vector<double>{v}}}, p_.loc,
                                  {.declared = &t, .untyped = true}));
  return f.eqns.back().outs[0];
}

Value *Splitter::binary(Func &f, Prim p, Value *a, Value *b, Value *into) {
  f.eqns.push_back(rules::makeEqn(f, p, {a, b}, {}, p_.loc, {.into = into, .untyped = true}));
  return f.eqns.back().outs[0];
}

Value *Splitter::slice(Func &f, Value *x, int d, Value *index, Loc loc) {
  const Type &t = x->type;
  Type part = t;
  part.shape[(size_t)d] /= M_;
  for (size_t i = f.eqns.size(); i-- > 0;) {
    const Eqn &e = f.eqns[i];
    if (e.outs.size() != 1 || e.outs[0] != x) continue;
    const std::vector<int64_t> *bd = e.prim == Prim::BroadcastInDim ? &e.intsParam("broadcast_dimensions") : nullptr;
    bool splat = e.prim == Prim::Constant && e.doublesParam("value").size() == 1;
    bool flat = bd && std::find(bd->begin(), bd->end(), (int64_t)d) == bd->end();
    if (splat || flat) {
      f.eqns.push_back(rules::makeEqn(f, e.prim, e.ins, e.params, e.loc, {.declared = &part, .untyped = true}));
      return f.eqns.back().outs[0];
    }
    break;
  }
  if (!index)
    fail(DiagId::PipelineNotSplittable, loc,
         "a value of the whole batch meets per-example values inside a shmap, which computes one micro-batch",
         "compute it per example, or pass it to the shmap as a per-example operand");
  std::vector<Value *> ins = {x};
  Type i32{DType::I32, {}, 0};
  for (int k = 0; k < (int)t.rank(); ++k)
    ins.push_back(k == d ? binary(f, Prim::Mul, index, constant(f, (double)(t.shape[(size_t)d] / M_), i32))
                         : constant(f, 0, i32));
  f.eqns.push_back(rules::makeEqn(f, Prim::DynamicSlice, ins, {{"sizes", part.shape}}, p_.loc, {.untyped = true}));
  return f.eqns.back().outs[0];
}

void Splitter::removeUnread(Func &f, std::vector<int> *stageOf) {
  std::set<const Value *> live(f.results.begin(), f.results.end());
  std::vector<bool> keep(f.eqns.size(), false);
  for (size_t i = f.eqns.size(); i-- > 0;) {
    const Eqn &e = f.eqns[i];
    bool needed = hasEffects(e);
    for (const Value *o : e.outs) needed |= live.count(o) > 0;
    if (!needed) continue;
    keep[i] = true;
    live.insert(e.ins.begin(), e.ins.end());
  }
  std::vector<Eqn> kept;
  std::vector<int> stages;
  for (size_t i = 0; i < f.eqns.size(); ++i)
    if (keep[i]) {
      kept.push_back(std::move(f.eqns[i]));
      if (stageOf) stages.push_back((*stageOf)[i]);
    }
  f.eqns = std::move(kept);
  if (stageOf) *stageOf = std::move(stages);
}

void Splitter::copyAtMicroBatch(const Func &src, Func &dst, std::map<const Value *, Value *> &vm,
                                const std::vector<bool> *keep, Value *index, const std::vector<int> *stageOf) {
  const std::set<const Value *> scaled(summedRoots_.begin(), summedRoots_.end());
  for (size_t idx = 0; idx < src.eqns.size(); ++idx) {
    if (keep && !(*keep)[idx]) continue;
    const Eqn &e = src.eqns[idx];
    Eqn c;
    c.prim = e.prim;
    c.loc = e.loc;
    c.params = e.params;
    for (const Value *v : e.ins) c.ins.push_back(vm.at(v));
    auto sl = slices_.find(&e);
    if (sl != slices_.end())
      for (auto [j, d] : sl->second) c.ins[(size_t)j] = slice(dst, c.ins[(size_t)j], d, index, e.loc);
    for (Func *b : e.bodies)
      c.bodies.push_back(splitBodies_.count(b) ? rebuildBody(*b)
                         : b->isNested || b->isTrace ? cloneFunc(m_, *b, dst.mesh ? dst.mesh : b->mesh)
                                                     : b);
    bool split = false;
    for (const Value *o : e.outs) {
      Type t = o->type;
      int d = info_[o].split;
      if (d >= 0) {
        t.shape[(size_t)d] /= M_;
        split = true;
      }
      c.outs.push_back(dst.newValue(t, o->hint));
    }
    if (split) {
      rules::FactorRule r = rules::rulesOf(e.prim).sharding(e);
      if (r.localize) r.localize(e, c);
    }
    std::string why = rules::shapeProblem(c, dst);
    if (!why.empty()) throw InternalError("split-micro-batches: " + std::string(primName(e.prim)) + ": " + why);
    dst.eqns.push_back(c);
    for (size_t k = 0; k < e.outs.size(); ++k) {
      Value *out = c.outs[k];
      if (scaled.count(e.outs[k])) out = binary(dst, Prim::Mul, out, constant(dst, (double)M_, out->type));
      vm[e.outs[k]] = out;
    }
    if (stageOf) mbStage_.resize(dst.eqns.size(), (*stageOf)[idx]);
  }
}

Func *Splitter::rebuildBody(const Func &b) {
  Func *nb = m_.newFunc(b.name);
  nb->loc = b.loc;
  nb->mesh = b.mesh;
  nb->returnLoc = b.returnLoc;
  nb->isNested = b.isNested;
  nb->isTrace = b.isTrace;
  nb->isShmapBody = b.isShmapBody;
  nb->checkVma = b.checkVma;
  nb->autoPbroadcast = b.autoPbroadcast;
  nb->outSpecLocs = b.outSpecLocs;
  std::map<const Value *, Value *> vm;
  for (const Value *p : b.params) {
    Type t = p->type;
    if (info_[p].split >= 0) t.shape[(size_t)info_[p].split] /= M_;
    vm[p] = nb->newValue(t, p->hint);
    nb->params.push_back(vm[p]);
  }
  copyAtMicroBatch(b, *nb, vm, nullptr, nullptr, nullptr);
  for (const Value *r : b.results) nb->results.push_back(vm.at(r));
  return nb;
}

Func *Splitter::microBatchFunc() {
  Func *mb = m_.newFunc(T_->name + "_microbatch");
  mb->isTrace = true;
  mb->loc = T_->loc;
  mb->mesh = T_->mesh;
  mb->returnLoc = T_->returnLoc;
  Value *index = mb->newValue(Type{DType::I32, {}, 0}, "microbatch");
  mb->params.push_back(index);
  std::map<const Value *, Value *> vm;
  for (size_t j = 0; j < n_; ++j) {
    Type t = T_->params[j]->type;
    if (batchParam_[j]) t.shape[0] /= M_;
    vm[T_->params[j]] = mb->newValue(t, T_->params[j]->hint);
    mb->params.push_back(vm[T_->params[j]]);
  }
  std::set<const Value *> roots(dataRoots_.begin(), dataRoots_.end());
  for (const Value *r : dataRoots_) {
    vm[r] = mb->newValue(r->type, r->hint);
    mb->params.push_back(vm[r]);
  }
  // What the loss needs, the whole-batch values being parameters now.
  std::set<const Value *> live(T_->results.begin(), T_->results.end());
  std::vector<bool> keep(T_->eqns.size(), false);
  for (size_t idx = T_->eqns.size(); idx-- > 0;) {
    const Eqn &e = T_->eqns[idx];
    bool needed = hasEffects(e) && e.prim != Prim::StageBoundary;
    for (const Value *o : e.outs) needed |= live.count(o) && !roots.count(o);
    if (!needed) continue;
    keep[idx] = true;
    live.insert(e.ins.begin(), e.ins.end());
  }
  copyAtMicroBatch(*T_, *mb, vm, &keep, index, &stageOf_);
  for (const Value *r : T_->results) mb->results.push_back(vm.at(r));
  removeUnread(*mb, &mbStage_);
  return mb;
}

} // namespace pipeline

void splitMicroBatches(ir::Module &m, Diagnostics &diags) {
  using namespace ir;
  for (PipelineFunc &p : m.pipelines) {
    if (!p.func) continue;
    for (const Eqn &e : p.func->eqns)
      if (e.prim == Prim::StageBoundary && p.schedule != Schedule::Inference)  // (inference: the function is the model)
        diags.fatal(DiagId::StageBoundaryOutsidePipeline, e.loc,
                    "stage_boundary() in the pipeline function " + p.name + " itself, outside what it differentiates",
                    "mark the stages in the loss function the pipeline passes to grad");
    // The schedule exists and cannot deadlock (each device group's steps in order).
    PipelineSchedule s;
    int order = -1, at = -1;
    std::string why = pipelineSchedule(p, s, order, at);
    auto inOrder = [&](int group, int offset) {  // (a step has no escapes: its column in the string)
      Loc loc = p.orderLocs[(size_t)group];
      if (offset >= 0) loc.col += 1 + offset;
      return loc;
    };
    if (!why.empty() && order >= 0)
      diags.fatal(DiagId::BadPipelineAttr, inOrder(order, at), why,
                  "each device group's order lists every step of its stages once: F (forward), B (backward)" +
                      std::string(p.schedule == Schedule::ZeroBubbleH1 ? ", W (weight gradient)" : "") +
                      " with the stage and micro-batch, as --emit=schedule prints them");
    if (!why.empty())
      diags.fatal(DiagId::PipelineBatch, p.microbatchesLoc, why, "choose microbatches= a multiple of the stage axis's size");
    PipelineTimeline t;
    std::pair<int, size_t> stuck{-1, 0};
    std::string dead = simulateSchedule(s, t, &stuck);
    if (!dead.empty() && !p.order.empty())  // (at the stuck step as written)
      diags.fatal(DiagId::PipelineDeadlock,
                  inOrder(stuck.first, (int)orderTokens(p.order[(size_t)stuck.first])[stuck.second].first),
                  "this order deadlocks: " + dead,
                  "run the step that is waited for earlier in its device group's order (--emit=schedule prints an "
                  "order that runs: the schedule's own)");
    if (!dead.empty()) throw InternalError("the " + std::string(scheduleName(p.schedule)) + " schedule deadlocks: " + dead);
    pipeline::Splitter(m, p, diags, s, t.bubble()).run();
  }
  // Elsewhere (the same model evaluated outside the pipeline) a marker marks nothing.
  for (const auto &f : m.funcs)
    f->eqns.erase(std::remove_if(f->eqns.begin(), f->eqns.end(),
                                 [](const Eqn &e) { return e.prim == Prim::StageBoundary; }),
                  f->eqns.end());
}

} // namespace shmapc::passes
