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
#include "passes/pipeline/Pipeline.h"
#include "passes/pipeline/Schedule.h"
#include "rules/Rules.h"

#include <algorithm>
#include <map>
#include <set>

namespace shmapc::passes {

namespace {

using namespace ir;

// What a value of the differentiated function is with respect to the batch.
struct Info {
  int split = -1;     // the dimension whose major part indexes examples; -1: not per example
  bool batch = false; // depends on the batch arguments
  bool theta = false; // depends on the differentiated parameters
  bool tail = false;  // depends on a sum over examples of values that depend on the parameters
};

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

class Splitter {
public:
  Splitter(Module &m, PipelineFunc &p, Diagnostics &diags) : m_(m), p_(p), diags_(diags), M_(p.microbatches) {}

  void run() {
    Func &F = *p_.func;
    if (p_.schedule == Schedule::Inference)
      fail(DiagId::PipelineGrad, p_.scheduleLoc, "the inference schedule runs forward steps only, but a pipeline "
           "function differentiates its loss",
           "train with schedule=\"gpipe\", \"1f1b\", \"interleaved\" or \"zb-h1\" (forward-only pipelines are not "
           "built yet)");
    findGrad(F);
    Eqn &V = F.eqns[vIndex_];
    T_ = V.bodies[0];
    n_ = T_->params.size();
    findBatch(F, V);
    inlineCallsIn(m_, *T_);
    checkStages();
    analyse();
    recordStages((int64_t)boundaries_.size() + 1);
    Func *mb = microBatchFunc();
    rewrite(F, mb);
  }

private:
  [[noreturn]] void fail(DiagId id, Loc loc, const std::string &msg, const std::string &hint) {
    diags_.fatal(id, loc.valid() ? loc : p_.loc, msg, hint);
  }

  // The one grad / value_and_grad of the pipeline function, in its own body.
  void findGrad(Func &F) {
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

  // Which of the differentiated function's parameters are batch arguments.
  void findBatch(Func &F, const Eqn &V) {
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

  void analyse() {
    for (size_t j = 0; j < n_; ++j) {
      Info &i = info_[T_->params[j]];
      if (batchParam_[j]) i.split = 0, i.batch = true;
      if (std::find(wrt_.begin(), wrt_.end(), (int64_t)j) != wrt_.end()) i.theta = true;
    }
    for (size_t idx = 0; idx < T_->eqns.size(); ++idx) {
      const Eqn &e = T_->eqns[idx];
      if (e.prim == Prim::StageBoundary) continue;
      Info in;
      bool anySplit = false;
      for (const Value *v : e.ins) {
        const Info &o = info_[v];
        in.batch |= o.batch;
        in.theta |= o.theta;
        in.tail |= o.tail;
        anySplit |= o.split >= 0;
      }
      if (!anySplit) {
        if (in.tail) checkAffine(e);
        for (const Value *o : e.outs) info_[o] = {-1, in.batch, in.theta, in.tail};
        continue;
      }
      if (in.tail)
        fail(DiagId::PipelineNotSplittable, e.loc,
             "'" + std::string(primName(e.prim)) + "' combines per-example values with a sum over the batch",
             "a pipeline computes each micro-batch's examples alone; normalise by statistics of the batch data "
             "alone, or outside the pipeline");
      splitEqn(idx, e, in);
    }
  }

  // An equation with a per-example operand: which results are per example, which sum over
  // examples, and which operands without the split must be sliced to the micro-batch.
  void splitEqn(size_t idx, const Eqn &e, const Info &in) {
    const std::string prim = primName(e.prim);
    rules::FactorRule r = rules::rulesOf(e.prim).sharding(e);
    if (r.kind != rules::FactorRule::Factors) {
      if (!in.theta && primInfo(e.prim).kind != PrimKind::HigherOrder) {  // the batch's data alone: computed whole
        for (const Value *o : e.outs) {
          info_[o] = {-1, true, false, false};
          dataRoots_.push_back(o);
        }
        return;
      }
      fail(DiagId::PipelineNotSplittable, e.loc,
           "'" + prim + "' of per-example values is not split into micro-batches yet",
           primInfo(e.prim).kind == PrimKind::HigherOrder
               ? "a pipeline stage's shmaps, loops and conditionals may read parameters but not the batch yet"
               : "compute it from the batch's data alone, or outside the pipeline");
    }
    std::vector<int> outSplit(e.outs.size(), -1);
    bool reduced = false, sums = true;
    for (size_t i = 0; i < e.ins.size(); ++i) {
      int d = info_[e.ins[i]].split;
      if (d < 0) continue;
      const rules::Factor *f = nullptr;
      for (const rules::Factor &cand : r.factors)
        for (const rules::DimRef &ref : cand.ins)
          if (ref.value == (int)i && ref.dim == d && ref.pre == 1) f = &cand;
      int64_t size = f && f->size ? f->size : e.ins[i]->type.shape[(size_t)d];
      if (!f || f->shifted || size % M_ != 0)
        fail(DiagId::PipelineNotSplittable, e.loc,
             "'" + prim + "' mixes the examples of the batch (operand " + std::to_string(i) + ", dimension " +
                 std::to_string(d) + ")",
             "a pipeline splits the batch into micro-batches along dimension 0: keep each example's values apart "
             "until they are summed");
      if (f->outs.empty()) {
        reduced = true;
        sums &= f->combine == Prim::Psum;
      }
      for (const rules::DimRef &o : f->outs) {
        if (o.pre != 1 || (outSplit[(size_t)o.value] >= 0 && outSplit[(size_t)o.value] != o.dim))
          fail(DiagId::PipelineNotSplittable, e.loc, "'" + prim + "' mixes the examples of the batch",
               "keep the batch dimension apart from the others");
        outSplit[(size_t)o.value] = o.dim;
      }
      for (const rules::DimRef &ref : f->ins) {
        if (ref.value == (int)i || info_[e.ins[(size_t)ref.value]].split >= 0) continue;
        if (f->size)
          fail(DiagId::PipelineNotSplittable, e.loc,
               "'" + prim + "' reshapes a value that is not per example together with the batch",
               "compute it per example");
        slices_[idx].push_back({ref.value, ref.dim});
      }
    }
    if (reduced) {
      if (in.theta && !sums)
        fail(DiagId::PipelineNotSplittable, e.loc,
             "'" + prim + "' takes the largest or smallest over the batch's examples of a value that depends on the "
             "parameters",
             "a pipeline accumulates sums over micro-batches: sum or average over the batch");
      for (const Value *o : e.outs) {
        info_[o] = {-1, true, in.theta, in.theta};
        (in.theta ? summedRoots_ : dataRoots_).push_back(o);
      }
      return;
    }
    for (size_t k = 0; k < e.outs.size(); ++k) {
      if (outSplit[k] < 0)
        fail(DiagId::PipelineNotSplittable, e.loc, "'" + prim + "' of per-example values is not split into micro-batches",
             "keep the batch dimension apart from the others");
      info_[e.outs[k]] = {outSplit[k], true, in.theta, false};
    }
  }

  // A value that depends on the batch's sums may only be combined affinely.
  void checkAffine(const Eqn &e) {
    auto tail = [&](size_t i) { return info_[e.ins[i]].tail; };
    bool ok = false;
    switch (e.prim) {
    case Prim::Add: case Prim::Sub: case Prim::Neg: case Prim::BroadcastInDim: case Prim::Reshape:
    case Prim::Transpose: case Prim::ReduceSum: case Prim::Slice: case Prim::Concatenate:
    case Prim::ShardingConstraint:
      ok = true;
      break;
    case Prim::Convert: ok = isFloat(e.ins[0]->type.dtype) && isFloat(e.outs[0]->type.dtype); break;
    case Prim::Mul: ok = !(tail(0) && tail(1)); break;
    case Prim::Div: ok = !tail(1); break;
    case Prim::Select: ok = !tail(0); break;
    case Prim::DynamicSlice:
      ok = true;
      for (size_t i = 1; i < e.ins.size(); ++i) ok &= !tail(i);
      break;
    default: break;
    }
    if (!ok)
      fail(DiagId::PipelineNotSplittable, e.loc,
           "'" + std::string(primName(e.prim)) + "' of a sum over the batch: the loss is not an affine function of "
           "its sums over examples, so it cannot be accumulated over micro-batches",
           "sum or average per-example losses, and divide only by values of the batch data alone (a masked "
           "mean's sum(mask)) or of the parameters");
  }

  // The stages: the equations between markers.
  void checkStages() {
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
           "mark " + std::to_string(want - 1) + " stage_boundary() in it: one stage per device group along the "
           "stage axis" + (p_.virtualStages > 1 ? ", times virtual_stages" : ""));
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

  void recordStages(int64_t stages) {
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
      st.flops += flopsOf(e) / (info_[e.outs.empty() ? nullptr : e.outs[0]].split >= 0 ? M_ : 1);
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

  Value *constant(Func &f, double v, const Type &t) {
    f.eqns.push_back(rules::makeEqn(f, Prim::Constant, {}, {{"value", std::vector<double>{v}}}, p_.loc,
                                    {.declared = &t, .untyped = true}));
    return f.eqns.back().outs[0];
  }
  Value *binary(Func &f, Prim p, Value *a, Value *b, Value *into = nullptr) {
    f.eqns.push_back(rules::makeEqn(f, p, {a, b}, {}, p_.loc, {.into = into, .untyped = true}));
    return f.eqns.back().outs[0];
  }
  // x's micro-batch `index` along dimension d: a splat or a broadcast that does not vary along d
  // made again at the micro-batch's size, anything else sliced.
  Value *slice(Func &f, Value *x, int d, Value *index) {
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
    std::vector<Value *> ins = {x};
    Type i32{DType::I32, {}, 0};
    for (int k = 0; k < (int)t.rank(); ++k)
      ins.push_back(k == d ? binary(f, Prim::Mul, index, constant(f, (double)(t.shape[(size_t)d] / M_), i32))
                           : constant(f, 0, i32));
    f.eqns.push_back(rules::makeEqn(f, Prim::DynamicSlice, ins, {{"sizes", part.shape}}, p_.loc, {.untyped = true}));
    return f.eqns.back().outs[0];
  }

  // Drops equations of `f` whose results nothing reads (the whole-size values slice() made again).
  static void removeUnread(Func &f, std::vector<int> *stageOf) {
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

  // The differentiated function on one micro-batch: (micro-batch index, its params with the
  // batch's micro-batch part, the whole batch's data values) -> the loss with sums scaled by M.
  Func *microBatchFunc() {
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
    std::set<const Value *> scaled(summedRoots_.begin(), summedRoots_.end());
    for (size_t idx = 0; idx < T_->eqns.size(); ++idx) {
      if (!keep[idx]) continue;
      const size_t before = mb->eqns.size();
      const Eqn &e = T_->eqns[idx];
      Eqn c;
      c.prim = e.prim;
      c.loc = e.loc;
      c.params = e.params;
      for (const Value *v : e.ins) c.ins.push_back(vm.at(v));
      for (auto [j, d] : slices_[idx]) c.ins[(size_t)j] = slice(*mb, c.ins[(size_t)j], d, index);
      for (Func *b : e.bodies) c.bodies.push_back(b->isNested || b->isTrace ? cloneFunc(m_, *b, mb->mesh) : b);
      bool split = false;
      for (const Value *o : e.outs) {
        Type t = o->type;
        int d = info_[o].split;
        if (d >= 0) {
          t.shape[(size_t)d] /= M_;
          split = true;
        }
        c.outs.push_back(mb->newValue(t, o->hint));
      }
      if (split) {
        rules::FactorRule r = rules::rulesOf(e.prim).sharding(e);
        if (r.localize) r.localize(e, c);
      }
      std::string why = rules::shapeProblem(c, *mb);
      if (!why.empty()) throw InternalError("split-micro-batches: " + std::string(primName(e.prim)) + ": " + why);
      mb->eqns.push_back(c);
      for (size_t k = 0; k < e.outs.size(); ++k) {
        Value *out = c.outs[k];
        if (scaled.count(e.outs[k])) out = binary(*mb, Prim::Mul, out, constant(*mb, (double)M_, out->type));
        vm[e.outs[k]] = out;
      }
      mbStage_.resize(mb->eqns.size(), stageOf_[idx]);
      (void)before;
    }
    for (const Value *r : T_->results) mb->results.push_back(vm.at(r));
    removeUnread(*mb, &mbStage_);
    return mb;
  }

  // Where a stage program's step begins or ends (--trace spans).
  void marker(Func &f, const PipelineStep &step, bool begin) {
    Eqn e;
    e.prim = Prim::PipeStep;
    e.params = {{"kind", (int64_t)step.kind}, {"stage", (int64_t)step.stage}, {"mb", (int64_t)step.mb},
                {"begin", (int64_t)begin}};
    e.loc = p_.loc;
    f.eqns.push_back(std::move(e));
  }

  static double predictedBubble(const PipelineSchedule &s) {
    PipelineTimeline t;
    simulateSchedule(s, t);
    return t.bubble();
  }

  void send(Func &f, Value *x, int64_t channel) {
    Eqn e;
    e.prim = Prim::PipeSend;
    e.ins = {x};
    e.params["channel"] = channel;
    e.loc = p_.loc;
    f.eqns.push_back(std::move(e));
  }

  // The micro-batch function cut into one function per stage: f_v(its inputs) -> (what later
  // stages read of it, and the loss for the stage that computes it). An input is a parameter of
  // the micro-batch function or a value of an earlier stage (an activation); a constant another
  // stage made is made again rather than sent.
  struct StageFn {
    Func *f = nullptr;
    std::vector<const Value *> inputs;   // per param of f: the micro-batch function's value
    std::vector<const Value *> outputs;  // per result of f: likewise
  };
  std::vector<StageFn> stageFuncs(Func *mb) {
    const int S = (int)boundaries_.size() + 1;
    std::map<const Value *, std::pair<int, size_t>> def;  // value -> (stage, eqn index)
    for (size_t i = 0; i < mb->eqns.size(); ++i)
      for (const Value *o : mb->eqns[i].outs) def[o] = {mbStage_[i], i};
    auto isConstant = [&](const Value *v) {
      auto it = def.find(v);
      return it != def.end() && mb->eqns[it->second.second].ins.empty() &&
             primInfo(mb->eqns[it->second.second].prim).kind == PrimKind::Const;
    };
    // What each stage reads from outside itself, and what later stages (or the end) read of it.
    std::vector<std::vector<const Value *>> reads((size_t)S), sends((size_t)S);
    auto addOnce = [](std::vector<const Value *> &list, const Value *v) {
      if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
    };
    for (size_t i = 0; i < mb->eqns.size(); ++i)
      for (const Value *in : mb->eqns[i].ins) {
        auto it = def.find(in);
        if (it != def.end() && (it->second.first == mbStage_[i] || isConstant(in))) continue;
        addOnce(reads[(size_t)mbStage_[i]], in);
        if (it != def.end()) addOnce(sends[(size_t)it->second.first], in);
      }
    for (const Value *r : mb->results) {  // the loss: computed by the last stage
      auto it = def.find(r);
      if (it == def.end() || it->second.first != S - 1) {
        addOnce(reads[(size_t)S - 1], r);
        if (it != def.end()) addOnce(sends[(size_t)it->second.first], r);
      }
    }
    std::vector<StageFn> out((size_t)S);
    for (int v = 0; v < S; ++v) {
      StageFn &sf = out[(size_t)v];
      sf.f = m_.newFunc(T_->name + "_stage" + std::to_string(v));
      sf.f->isTrace = true;
      sf.f->loc = v == 0 ? T_->loc : T_->eqns[boundaries_[(size_t)v - 1]].loc;
      sf.f->mesh = T_->mesh;
      std::map<const Value *, Value *> vm;
      for (const Value *in : reads[(size_t)v]) {
        vm[in] = sf.f->newValue(in->type, in->hint);
        sf.f->params.push_back(vm[in]);
        sf.inputs.push_back(in);
      }
      auto copy = [&](const Eqn &e) {
        Eqn c = e;
        for (Value *&x : c.ins) x = vm.at(x);
        for (Value *&o : c.outs) {
          Value *no = sf.f->newValue(o->type, o->hint);
          vm[o] = no;
          o = no;
        }
        sf.f->eqns.push_back(c);
      };
      for (size_t i = 0; i < mb->eqns.size(); ++i) {
        const Eqn &e = mb->eqns[i];
        if (mbStage_[i] == v) {
          for (const Value *in : e.ins)
            if (!vm.count(in) && isConstant(in)) copy(mb->eqns[def.at(in).second]);
          copy(e);
        }
      }
      for (const Value *o : sends[(size_t)v]) {
        sf.f->results.push_back(vm.at(o));
        sf.outputs.push_back(o);
      }
      if (v == S - 1)
        for (const Value *r : mb->results) {
          sf.f->results.push_back(vm.at(r));
          sf.outputs.push_back(r);
        }
    }
    return out;
  }

  // F's grad replaced by: the whole-batch data values, then the pipeline: one stage program per
  // device group running its schedule's steps, the groups at once, trading activations and
  // their cotangents; then each parameter's gradient summed over the stages that read it.
  void rewrite(Func &F, Func *mb) {
    Eqn V = std::move(F.eqns[vIndex_]);
    std::vector<Eqn> after(std::make_move_iterator(F.eqns.begin() + (long)vIndex_ + 1),
                           std::make_move_iterator(F.eqns.end()));
    F.eqns.resize(vIndex_);
    // The whole batch's data values, computed once (copies of their equations, on the whole batch).
    std::map<const Value *, Value *> pm;
    for (size_t j = 0; j < n_; ++j) pm[T_->params[j]] = V.ins[j];
    std::set<const Value *> need(dataRoots_.begin(), dataRoots_.end());
    std::vector<bool> copy(T_->eqns.size(), false);
    for (size_t idx = T_->eqns.size(); idx-- > 0;) {
      const Eqn &e = T_->eqns[idx];
      bool needed = false;
      for (const Value *o : e.outs) needed |= need.count(o) > 0;
      if (!needed) continue;
      if (!e.bodies.empty())
        fail(DiagId::PipelineNotSplittable, e.loc,
             "'" + std::string(primName(e.prim)) + "' computes a value of the whole batch that the loss needs",
             "compute it outside the pipeline function and pass it in");
      copy[idx] = true;
      need.insert(e.ins.begin(), e.ins.end());
    }
    for (size_t idx = 0; idx < T_->eqns.size(); ++idx) {
      if (!copy[idx]) continue;
      Eqn c = T_->eqns[idx];
      for (Value *&v : c.ins) v = pm.at(v);
      for (Value *&o : c.outs) {
        Value *no = F.newValue(o->type, o->hint);
        pm[o] = no;
        o = no;
      }
      F.eqns.push_back(c);
    }
    std::vector<Value *> consts;
    for (size_t j = 0; j < n_; ++j) consts.push_back(V.ins[j]);
    for (const Value *r : dataRoots_) consts.push_back(pm.at(r));

    const std::vector<StageFn> stages = stageFuncs(mb);
    PipelineSchedule schedule;
    makeSchedule(p_.schedule, (int)p_.stageAxisSize, (int)p_.virtualStages, (int)M_, schedule);
    const int G = schedule.groups, S = (int)stages.size();
    const Type lossType = T_->results[0]->type;
    const bool withValue = V.intParam("with_value") != 0;
    std::map<std::tuple<int, int, int, int, int>, int64_t> channels;  // (kind, from, to, output, mb)
    auto channel = [&](int kind, int from, int to, int k, int m) {
      auto key = std::make_tuple(kind, from, to, k, m);
      auto it = channels.find(key);
      if (it != channels.end()) return it->second;
      int64_t id = (int64_t)channels.size();
      channels[key] = id;
      return id;
    };
    // Where each micro-batch value comes from: (stage, output index) of the stage producing it.
    std::map<const Value *, std::pair<int, int>> producer;
    for (int v = 0; v < S; ++v)
      for (size_t k = 0; k < stages[(size_t)v].outputs.size(); ++k)
        producer[stages[(size_t)v].outputs[k]] = {v, (int)k};
    // Its consumers: later stages, and -1 for the loss (the end).
    std::map<std::pair<int, int>, std::vector<int>> consumers;
    for (int w = 0; w < S; ++w)
      for (const Value *in : stages[(size_t)w].inputs)
        if (producer.count(in)) consumers[producer.at(in)].push_back(w);
    const Value *loss = mb->results[0];
    const std::pair<int, int> lossAt = {S - 1, (int)stages[(size_t)S - 1].outputs.size() - 1};
    consumers[lossAt].push_back(-1);
    std::map<const Value *, int> mbParam;
    for (size_t i = 0; i < mb->params.size(); ++i) mbParam[mb->params[i]] = (int)i;
    auto isWrt = [&](int j) { return std::find(wrt_.begin(), wrt_.end(), (int64_t)j) != wrt_.end(); };

    // Per stage: what its vjp differentiates (the parameters and the float activations it
    // reads, by param position), and which of those are activations (positions in that list).
    auto wrtOf = [&](int v) {
      std::vector<int64_t> wrt;
      const StageFn &sf = stages[(size_t)v];
      for (size_t p = 0; p < sf.inputs.size(); ++p) {
        const Value *src = sf.inputs[p];
        auto it = mbParam.find(src);
        bool param = it != mbParam.end() && it->second >= 1 && it->second <= (int)n_ && isWrt(it->second - 1);
        bool activation = producer.count(src) && isFloat(src->type.dtype);
        if (param || activation) wrt.push_back((int64_t)p);
      }
      return wrt;
    };
    auto activationResults = [&](int v) {
      std::vector<int64_t> out;
      const std::vector<int64_t> wrt = wrtOf(v);
      for (size_t q = 0; q < wrt.size(); ++q)
        if (producer.count(stages[(size_t)v].inputs[(size_t)wrt[q]])) out.push_back((int64_t)q);
      return out;
    };
    const bool zeroBubble = p_.schedule == Schedule::ZeroBubbleH1;
    std::vector<Func *> programs;
    std::vector<std::vector<std::pair<int, int>>> programGrads;  // per program: (wrt position, result)
    std::vector<int> valueResult(G, -1);
    for (int g = 0; g < G; ++g) {
      Func *P = m_.newFunc(F.name + "_group" + std::to_string(g));
      P->loc = V.loc;
      programs.push_back(P);
      std::vector<Value *> params;
      for (Value *c : consts) {
        params.push_back(P->newValue(c->type, c->hint));
        P->params.push_back(params.back());
      }
      std::map<std::pair<int, int>, Value *> batchSlice;  // (T param, mb)
      std::map<std::tuple<int, int, int>, Value *> act;   // (stage, output, mb) computed here
      std::map<std::tuple<int, int, int, int>, Value *> cotFrom;  // (stage, output, mb, consumer) -> its cotangent
      std::map<std::pair<int, int>, std::vector<Value *>> args;   // (stage, mb) -> the F step's arguments
      std::map<int, Value *> acc;  // T param -> its gradient summed here
      std::map<std::pair<int, int>, std::vector<std::pair<int, Value *>>> pendingW;  // zb-h1: (stage, mb) -> W's sums
      auto accumulate = [&](int j, Value *grad) {
        Value *&a = acc[j];
        a = a ? binary(*P, Prim::Add, a, grad) : grad;
      };
      Value *valueAcc = nullptr;
      auto argument = [&](int v, int m, const Value *src) -> Value * {
        auto it = mbParam.find(src);
        if (it != mbParam.end()) {
          int i = it->second;
          if (i == 0) return constant(*P, (double)m, Type{DType::I32, {}, 0});
          if (i <= (int)n_) {
            int j = i - 1;
            if (!batchParam_[(size_t)j]) return params[(size_t)j];
            Value *&sl = batchSlice[{j, m}];
            if (!sl) sl = slice(*P, params[(size_t)j], 0, constant(*P, (double)m, Type{DType::I32, {}, 0}));
            return sl;
          }
          return params[(size_t)i - 1];  // a whole-batch data value (params follow T's)
        }
        auto [u, k] = producer.at(src);
        if (u % G == g) return act.at({u, k, m});
        P->eqns.push_back(rules::makeEqn(*P, Prim::PipeRecv, {}, {{"channel", channel(0, u, v, k, m)}}, V.loc,
                                         {.declared = &src->type, .untyped = true}));
        return P->eqns.back().outs[0];
      };
      for (const PipelineStep &step : schedule.steps[(size_t)g]) {
        const int v = step.stage, m = step.mb;
        const StageFn &sf = stages[(size_t)v];
        marker(*P, step, true);
        struct End {
          Splitter &s;
          Func &P;
          const PipelineStep &step;
          ~End() { s.marker(P, step, false); }
        } end{*this, *P, step};
        if (step.kind == PipelineStep::F) {
          std::vector<Value *> a;
          for (const Value *src : sf.inputs) a.push_back(argument(v, m, src));
          args[{v, m}] = a;
          Eqn call;
          call.prim = Prim::Call;
          call.loc = V.loc;
          call.bodies = {sf.f};
          call.ins = a;
          call.params = {{"pipeline_forward", (int64_t)1}, {"stage", (int64_t)v}, {"mb", (int64_t)m},
                         {"activation_results", activationResults(v)}};
          for (const Value *r : sf.f->results) call.outs.push_back(P->newValue(r->type, r->hint));
          std::vector<Value *> outs = call.outs;
          P->eqns.push_back(std::move(call));
          for (size_t k = 0; k < outs.size(); ++k) {
            act[{v, (int)k, m}] = outs[k];
            for (int w : consumers[{v, (int)k}]) {
              if (w < 0) {
                if (withValue) valueAcc = valueAcc ? binary(*P, Prim::Add, valueAcc, outs[k]) : outs[k];
              } else if (w % G != g) {
                send(*P, outs[k], channel(0, v, w, (int)k, m));
              }
            }
          }
          continue;
        }
        if (step.kind == PipelineStep::W) {  // (keep-stage-residuals moves the weights' gradients here)
          for (auto [j, grad] : pendingW[{v, m}]) accumulate(j, grad);
          continue;
        }
        std::vector<Value *> ins = args.at({v, m});
        for (size_t k = 0; k < sf.outputs.size(); ++k) {
          const Type &t = sf.f->results[k]->type;
          Value *ct = nullptr;
          if (isFloat(t.dtype))
            for (int w : consumers[{v, (int)k}]) {
              Value *part = w < 0 ? constant(*P, 1.0 / (double)M_, t)
                            : w % G == g ? cotFrom.at({v, (int)k, m, w})
                                         : nullptr;
              if (!part) {
                P->eqns.push_back(rules::makeEqn(*P, Prim::PipeRecv, {}, {{"channel", channel(1, w, v, (int)k, m)}},
                                                 V.loc, {.declared = &t, .untyped = true}));
                part = P->eqns.back().outs[0];
              }
              ct = ct ? binary(*P, Prim::Add, ct, part) : part;
            }
          ins.push_back(ct ? ct : constant(*P, 0.0, t));
        }
        const std::vector<int64_t> wrt = wrtOf(v);
        Eqn vjp;
        vjp.prim = Prim::Vjp;
        vjp.loc = V.loc;
        vjp.bodies = {sf.f};
        vjp.ins = ins;
        vjp.params = {{"wrt", wrt}, {"with_value", (int64_t)1}, {"linear", (int64_t)0}};
        for (const Value *r : sf.f->results) vjp.outs.push_back(P->newValue(r->type));
        for (int64_t p : wrt) vjp.outs.push_back(P->newValue(sf.f->params[(size_t)p]->type));
        std::string why = rules::shapeProblem(vjp, *P);
        if (!why.empty()) throw InternalError("split-micro-batches: vjp: " + why);
        std::vector<Value *> cts(vjp.outs.begin() + (long)sf.f->results.size(), vjp.outs.end());
        P->eqns.push_back(std::move(vjp));
        for (size_t q = 0; q < wrt.size(); ++q) {
          const Value *src = sf.inputs[(size_t)wrt[q]];
          auto it = mbParam.find(src);
          if (it != mbParam.end()) {
            if (zeroBubble) pendingW[{v, m}].push_back({it->second - 1, cts[q]});
            else accumulate(it->second - 1, cts[q]);
            continue;
          }
          auto [u, k] = producer.at(src);
          if (u % G == g) cotFrom[{u, k, m, v}] = cts[q];
          else
            send(*P, cts[q], channel(1, v, u, k, m));
        }
      }
      if (valueAcc) {
        valueResult[(size_t)g] = (int)P->results.size();
        P->results.push_back(valueAcc);
      }
      std::vector<std::pair<int, int>> grads;
      for (size_t w = 0; w < wrt_.size(); ++w) {
        auto it = acc.find((int)wrt_[w]);
        if (it == acc.end()) continue;
        grads.push_back({(int)w, (int)P->results.size()});
        P->results.push_back(it->second);
      }
      programGrads.push_back(grads);
    }
    (void)loss;

    std::vector<int64_t> channelEnds(2 * channels.size());
    for (const auto &[key, id] : channels) {
      channelEnds[2 * (size_t)id] = std::get<1>(key) % G;
      channelEnds[2 * (size_t)id + 1] = std::get<2>(key) % G;
    }
    Eqn pipe;
    pipe.prim = Prim::Pipeline;
    pipe.loc = V.loc;
    pipe.ins = consts;
    pipe.bodies = programs;
    pipe.params = {{"groups", (int64_t)G}, {"channels", (int64_t)channels.size()},
                   {"schedule", std::string(scheduleName(p_.schedule))}, {"remat", (int64_t)p_.remat},
                   {"label", p_.name + " (" + scheduleName(p_.schedule) + ", " + std::to_string(G) + " groups, " +
                                 std::to_string(M_) + " micro-batches)"},
                   {"predicted_bubble", std::vector<double>{predictedBubble(schedule)}},
                   {"mesh", (int64_t)p_.mesh}, {"stage_axis", (int64_t)p_.stageAxis}, {"channel_ends", channelEnds}};
    // A gradient only one group computes is that group's result itself; the others are summed.
    std::vector<int> partsOf(wrt_.size(), 0);
    for (int g = 0; g < G; ++g)
      for (auto [pos, r] : programGrads[(size_t)g]) ++partsOf[(size_t)pos];
    const size_t firstGrad = withValue ? 1 : 0;
    std::vector<std::vector<Value *>> results(G);
    for (int g = 0; g < G; ++g)
      for (size_t r = 0; r < programs[(size_t)g]->results.size(); ++r) {
        Value *out = nullptr;
        for (auto [pos, q] : programGrads[(size_t)g])
          if (q == (int)r && partsOf[(size_t)pos] == 1) out = V.outs[firstGrad + (size_t)pos];
        if (!out) out = F.newValue(programs[(size_t)g]->results[r]->type);
        results[(size_t)g].push_back(out);
        pipe.outs.push_back(out);
      }
    std::string why = rules::shapeProblem(pipe, F);
    if (!why.empty()) throw InternalError("split-micro-batches: pipeline: " + why);
    F.eqns.push_back(std::move(pipe));
    if (withValue) {
      Value *sum = nullptr;
      for (int g = 0; g < G; ++g)
        if (valueResult[(size_t)g] >= 0) sum = results[(size_t)g][(size_t)valueResult[(size_t)g]];
      binary(F, Prim::Mul, sum, constant(F, 1.0 / (double)M_, lossType), V.outs[0]);
    }
    for (size_t w = 0; w < wrt_.size(); ++w) {
      Value *into = V.outs[firstGrad + w];
      if (partsOf[w] == 1) continue;
      const Type &t = T_->params[(size_t)wrt_[w]]->type;
      if (partsOf[w] == 0) {  // a parameter no stage reads
        F.eqns.push_back(rules::makeEqn(F, Prim::Constant, {}, {{"value", std::vector<double>{0.0}}}, V.loc,
                                        {.declared = &t, .into = into, .untyped = true}));
        continue;
      }
      // A parameter several stages read (tied): their gradients summed in stage order, once, so
      // every stage's copy gets the one update.
      std::vector<Value *> parts;
      for (int g = 0; g < G; ++g)
        for (auto [pos, r] : programGrads[(size_t)g])
          if (pos == (int)w) parts.push_back(results[(size_t)g][(size_t)r]);
      Value *sum = parts[0];
      for (size_t i = 1; i < parts.size(); ++i) sum = binary(F, Prim::Add, sum, parts[i], i + 1 == parts.size() ? into : nullptr);
    }
    for (Eqn &e : after) F.eqns.push_back(std::move(e));
  }

  Module &m_;
  PipelineFunc &p_;
  Diagnostics &diags_;
  const int64_t M_;
  size_t vIndex_ = 0, n_ = 0;
  Func *T_ = nullptr;
  std::vector<bool> batchParam_;
  std::vector<int64_t> wrt_;
  std::map<const Value *, Info> info_;
  std::vector<size_t> boundaries_;
  std::vector<int> stageOf_;
  std::vector<const Value *> summedRoots_, dataRoots_;
  std::map<size_t, std::vector<std::pair<int, int>>> slices_;  // equation -> (operand, dimension) to slice
  std::vector<int> mbStage_;  // per equation of the micro-batch function: its stage
};

} // namespace

void splitMicroBatches(Module &m, Diagnostics &diags) {
  for (PipelineFunc &p : m.pipelines) {
    if (!p.func) continue;
    for (const Eqn &e : p.func->eqns)
      if (e.prim == Prim::StageBoundary)
        diags.fatal(DiagId::StageBoundaryOutsidePipeline, e.loc,
                    "stage_boundary() in the pipeline function " + p.name + " itself, outside what it differentiates",
                    "mark the stages in the loss function the pipeline passes to grad");
    // The schedule exists and cannot deadlock (each device group's steps in order).
    PipelineSchedule s;
    std::string why = makeSchedule(p.schedule, (int)p.stageAxisSize, (int)p.virtualStages, (int)p.microbatches, s);
    if (!why.empty())
      diags.fatal(DiagId::PipelineBatch, p.microbatchesLoc, why, "choose microbatches= a multiple of the stage axis's size");
    PipelineTimeline t;
    std::string dead = simulateSchedule(s, t);
    if (!dead.empty()) throw InternalError("the " + std::string(scheduleName(p.schedule)) + " schedule deadlocks: " + dead);
    Splitter(m, p, diags).run();
  }
  // Elsewhere (the same model evaluated outside the pipeline) a marker marks nothing.
  for (const auto &f : m.funcs)
    f->eqns.erase(std::remove_if(f->eqns.begin(), f->eqns.end(),
                                 [](const Eqn &e) { return e.prim == Prim::StageBoundary; }),
                  f->eqns.end());
}

} // namespace shmapc::passes
