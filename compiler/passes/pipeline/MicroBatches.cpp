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

namespace {

// In a shmap body: the axes a collective's result may differ along, given its operand's.
AxisSet variesAfter(const Eqn &e, AxisSet varies) {
  const AxisSet a = e.axesParamSet();
  switch (e.prim) {
  case Prim::Psum: case Prim::Pmax: case Prim::Pmin: case Prim::Pprod: case Prim::Pand: case Prim::Por:
  case Prim::Pxor: case Prim::Psum2: case Prim::AllGather: case Prim::AllGatherInvariant:
  case Prim::InvariantCast: case Prim::Broadcast:
    return varies & ~a;
  default: return primInfo(e.prim).kind == PrimKind::Collective ? varies | a : varies;
  }
}

std::string axisNames(const Mesh &mesh, const std::vector<int> &axes) {
  if (axes.empty()) return "no axis";
  std::string s;
  for (int a : axes) s += (s.empty() ? "" : ", ") + std::string("\"") + mesh.axes[(size_t)a] + "\"";
  return s;
}

AxisSet setOf(const std::vector<int> &axes) {
  AxisSet s = 0;
  for (int a : axes) s |= AxisSet(1) << a;
  return s;
}

} // namespace

void Splitter::analyseEqns(const Func &f) {
  const bool inBody = f.mesh != nullptr;
  for (const Eqn &e : f.eqns) {
    if (e.prim == Prim::StageBoundary) continue;
    Info in;
    const Info *split = nullptr;
    for (const Value *v : e.ins) {
      const Info &o = info_[v];
      in.batch |= o.batch;
      in.theta |= o.theta;
      in.tail |= o.tail;
      in.varies |= o.varies;
      if (o.split < 0) continue;
      if (split && split->axes != o.axes)
        fail(DiagId::PipelineNotSplittable, e.loc,
             "'" + std::string(primName(e.prim)) + "' combines per-example values whose examples are split over " +
                 axisNames(*f.mesh, split->axes) + " and over " + axisNames(*f.mesh, o.axes),
             "split every per-example operand's batch dimension over the same mesh axes");
      split = &o;
    }
    if (!split) {
      if (in.tail) checkAffine(e);
      Info out{-1, in.batch, in.theta, in.tail, {}, inBody ? variesAfter(e, in.varies) : 0};
      for (const Value *o : e.outs) info_[o] = out;
      continue;
    }
    if (in.tail && e.prim != Prim::Loop)  // (a loop may carry a sum beside its examples: its body says)
      fail(DiagId::PipelineNotSplittable, e.loc,
           "'" + std::string(primName(e.prim)) + "' combines per-example values with a sum over the batch",
           "a pipeline computes each micro-batch's examples alone; normalise by statistics of the batch data "
           "alone, or outside the pipeline");
    if (inBody) {
      // Each device computes its own examples: a value that differs along the axes splitting
      // them pairs with other examples in a micro-batch than in the whole batch.
      const AxisSet examples = setOf(split->axes);
      for (const Value *v : e.ins)
        if (info_[v].split < 0 && (info_[v].varies & examples))
          fail(DiagId::PipelineNotSplittable, e.loc,
               "'" + std::string(primName(e.prim)) + "' combines per-example values with a value that differs "
               "from device to device along the axes splitting the examples (" + axisNames(*f.mesh, split->axes) + ")",
               "make it the same on those devices (psum or all_gather it over them) before combining it with the "
               "examples");
    }
    const std::vector<int> axes = split->axes;
    if (e.prim == Prim::Loop) {
      splitLoop(e, in);
      continue;
    }
    if (e.prim == Prim::While) {
      splitWhile(e, in);
      continue;
    }
    if (e.prim == Prim::Cond) {
      splitCond(e, in);
      continue;
    }
    if (e.prim == Prim::Shmap) {
      splitShmap(e, in);
      continue;
    }
    if (primInfo(e.prim).kind == PrimKind::Collective) {
      splitCollective(e, in, *f.mesh);
      continue;
    }
    splitEqn(e, in, inBody || loopDepth_ > 0);
    for (const Value *o : e.outs) {
      Info &i = info_[o];
      i.varies = in.varies;
      if (i.split >= 0) i.axes = axes;
    }
  }
}

void Splitter::splitLoop(const Eqn &e, const Info &in) {
  const Func &b = *e.bodies[0];
  const size_t consts = (size_t)e.intParam("num_consts");
  // The body's parameters (i, consts..., carries...) as the operands; a carry whose examples
  // the body introduces (a splat or broadcast to fill, as scan's stacked outputs start) is
  // per example from the start. Round until the carries' results agree with their parameters.
  std::vector<Info> carry;
  for (const Value *v : e.ins) carry.push_back(info_[v]);
  splitBodies_.insert(&b);
  ++loopDepth_;
  std::function<void(const Func &)> forget = [&](const Func &f) {  // (a round's slices: the next decides again)
    for (const Eqn &x : f.eqns) {
      slices_.erase(&x);
      for (const Func *nested : x.bodies) forget(*nested);
    }
  };
  for (int round = 0;; ++round) {
    forget(b);
    info_[b.params[0]] = Info{};
    for (size_t k = 0; k < e.ins.size(); ++k) info_[b.params[k + 1]] = carry[k];
    analyseEqns(b);
    bool again = false;
    for (size_t c = 0; consts + c < e.ins.size(); ++c) {
      Info &p = carry[consts + c];
      const Info &r = info_[b.results[c]];
      if (r.split != p.split || r.axes != p.axes) {
        if (p.split >= 0 || round > 2)
          fail(DiagId::PipelineNotSplittable, e.loc,
               "the loop's carry " + std::to_string(c) + " holds its examples along dimension " +
                   std::to_string(p.split) + " but its step returns them along dimension " + std::to_string(r.split),
               "keep each carry's batch dimension where the loop starts it");
        p.split = r.split;
        p.axes = r.axes;
        std::vector<std::pair<int, int>> &sliced = slices_[&e];  // (the initial value made at micro-batch size)
        sliced.push_back({(int)(consts + c), r.split});
        again = true;
      }
      if ((r.batch && !p.batch) || (r.theta && !p.theta) || (r.tail && !p.tail) || (r.varies & ~p.varies)) {
        p.batch |= r.batch, p.theta |= r.theta, p.tail |= r.tail, p.varies |= r.varies;
        again = true;
      }
    }
    if (!again) break;
  }
  --loopDepth_;
  for (size_t c = 0; c < e.outs.size(); ++c) {
    Info out = info_[b.results[c]];
    out.batch |= in.batch;
    info_[e.outs[c]] = out;
  }
}

void Splitter::checkCondition(const Eqn &e, const Info &pred, const char *what) {
  if (pred.split >= 0 || pred.tail || (pred.batch && pred.theta))
    fail(DiagId::PipelineNotSplittable, e.loc,
         std::string("the ") + what + " depends on the batch's examples, so each micro-batch would decide it for itself",
         "decide it from the parameters, the step or the batch's data alone (computed once, on the whole batch)");
}

void Splitter::splitWhile(const Eqn &e, const Info &in) {
  const Func &cond = *e.bodies[0], &b = *e.bodies[1];
  const size_t consts = (size_t)e.intParam("num_consts");
  // As splitLoop, the body's (and the condition's) parameters being (consts..., carries...).
  std::vector<Info> carry;
  for (const Value *v : e.ins) carry.push_back(info_[v]);
  splitBodies_.insert(&b);
  splitBodies_.insert(&cond);
  ++loopDepth_;
  for (int round = 0;; ++round) {
    for (const Func *f : {&cond, &b})
      for (size_t k = 0; k < e.ins.size(); ++k) info_[f->params[k]] = carry[k];
    analyseEqns(cond);
    analyseEqns(b);
    bool again = false;
    for (size_t c = 0; consts + c < e.ins.size(); ++c) {
      Info &p = carry[consts + c];
      const Info &r = info_[b.results[c]];
      if (r.split != p.split || r.axes != p.axes)
        fail(DiagId::PipelineNotSplittable, e.loc,
             "the while loop's carry " + std::to_string(c) + " holds its examples along dimension " +
                 std::to_string(p.split) + " but its step returns them along dimension " + std::to_string(r.split),
             "keep each carry's batch dimension where the loop starts it");
      if ((r.batch && !p.batch) || (r.theta && !p.theta) || (r.tail && !p.tail) || (r.varies & ~p.varies)) {
        p.batch |= r.batch, p.theta |= r.theta, p.tail |= r.tail, p.varies |= r.varies;
        again = true;
      }
    }
    if (!again || round > 64) break;
  }
  --loopDepth_;
  checkCondition(e, info_[cond.results[0]], "while loop's condition");
  for (size_t c = 0; c < e.outs.size(); ++c) {
    Info out = info_[b.results[c]];
    out.batch |= in.batch;
    info_[e.outs[c]] = out;
  }
}

void Splitter::splitCond(const Eqn &e, const Info &in) {
  checkCondition(e, info_[e.ins[0]], "condition of this if");
  ++loopDepth_;
  for (const Func *b : e.bodies) {
    splitBodies_.insert(b);
    for (size_t k = 0; k < b->params.size(); ++k) info_[b->params[k]] = info_[e.ins[k + 1]];
    analyseEqns(*b);
  }
  --loopDepth_;
  for (size_t c = 0; c < e.outs.size(); ++c) {
    const Info &a = info_[e.bodies[0]->results[c]], &b = info_[e.bodies[1]->results[c]];
    if (a.split != b.split || a.axes != b.axes)
      fail(DiagId::PipelineNotSplittable, e.loc,
           "result " + std::to_string(c) + " of this if holds examples along dimension " + std::to_string(a.split) +
               " in one branch and " + std::to_string(b.split) + " in the other",
           "make both branches' results per example alike: compute the other one from the examples too "
           "(x * 0.0 rather than a constant of the batch's shape)");
    Info out = a;
    out.batch |= b.batch || in.batch;
    out.theta |= b.theta;
    out.tail |= b.tail;
    out.varies |= b.varies;
    info_[e.outs[c]] = out;
  }
}

void Splitter::splitShmap(const Eqn &e, const Info &in) {
  const Func &b = *e.bodies[0];
  const Mesh &mesh = *b.mesh;
  const std::vector<PartitionSpec> &inSpecs = e.specsParam("in_specs"), &outSpecs = e.specsParam("out_specs");
  auto axesOf = [](const PartitionSpec &s, int d) {
    return d < (int)s.dims.size() ? s.dims[(size_t)d] : std::vector<int>{};
  };
  for (size_t k = 0; k < e.ins.size(); ++k) {
    const Info &o = info_[e.ins[k]];
    Info p{-1, o.batch, o.theta, o.tail, {}, inSpecs[k].axes()};
    if (o.split >= 0) {
      p.split = o.split;
      p.axes = axesOf(inSpecs[k], o.split);
      const int64_t devices = mesh.groupSize(setOf(p.axes));
      const int64_t size = e.ins[k]->type.shape[(size_t)o.split];
      if (size % (M_ * devices) != 0)
        fail(DiagId::PipelineBatch, e.loc,
             "operand " + std::to_string(k) + " of the shmap has " + std::to_string(size) + " examples along dimension " +
                 std::to_string(o.split) + ", so " + std::to_string(size / M_) + " per micro-batch, which do not " +
                 "split over " + axisNames(mesh, p.axes) + " (" + std::to_string(devices) + " devices)",
             "choose microbatches= so that each micro-batch's examples split evenly over the devices");
    }
    info_[b.params[k]] = p;
  }
  splitBodies_.insert(&b);
  analyseEqns(b);
  for (size_t r = 0; r < e.outs.size(); ++r) {
    const Info &br = info_[b.results[r]];
    Info out{br.split, br.batch || in.batch, br.theta, br.tail, {}, 0};
    if (br.split >= 0 && axesOf(outSpecs[r], br.split) != br.axes)
      fail(DiagId::PipelineNotSplittable, e.loc,
           "result " + std::to_string(r) + " of the shmap holds each device's examples along dimension " +
               std::to_string(br.split) + ", split over " + axisNames(mesh, br.axes) + ", but its out_spec splits " +
               "that dimension over " + axisNames(mesh, axesOf(outSpecs[r], br.split)),
           "give the result's out_spec the axes that split its examples, so that they come back in order");
    info_[e.outs[r]] = out;
  }
}

void Splitter::splitCollective(const Eqn &e, const Info &in, const Mesh &mesh) {
  const std::string prim = primName(e.prim);
  const Info &x = info_[e.ins[0]];
  Info out = x;
  out.batch = in.batch;
  out.theta = in.theta;
  out.varies = variesAfter(e, in.varies);
  const AxisSet axes = e.axesParamSet(), examples = setOf(x.axes);
  std::vector<int> listed;
  for (int64_t a : e.intsParam("axes")) listed.push_back((int)a);
  auto refuse = [&](const std::string &why, const std::string &hint) {
    fail(DiagId::PipelineNotSplittable, e.loc, "'" + prim + "' of per-example values " + why, hint);
  };
  const std::string sumFirst = "sum over the examples first (reduce_sum along the batch dimension), then combine "
                               "the sums across devices";
  switch (e.prim) {
  case Prim::Psum: case Prim::Pmax: case Prim::Pmin: case Prim::Pprod: case Prim::Pand: case Prim::Por:
  case Prim::Pxor: case Prim::Psum2: case Prim::Pbroadcast: case Prim::InvariantCast: case Prim::Ppermute:
    if (axes & examples) refuse("over the axes splitting the examples combines different devices' examples", sumFirst);
    break;
  case Prim::AllGather: case Prim::AllGatherInvariant: {
    const int k = (int)e.intParam("axis");
    const bool tiled = e.intParam("tiled") != 0;
    if (!(axes & examples)) {
      if (k == x.split) refuse("along the batch dimension over other axes than the examples' repeats examples",
                               "gather the batch dimension over the axes that split it");
      if (!tiled && k <= x.split) ++out.split;
      break;
    }
    const bool suffix = listed.size() <= x.axes.size() &&
                        std::equal(listed.begin(), listed.end(), x.axes.end() - (long)listed.size());
    if (k != x.split || !tiled || !suffix)
      refuse("over the axes splitting the examples mixes different devices' examples",
             "gather tiled along the batch dimension, over the minor axes splitting it");
    out.axes.resize(x.axes.size() - listed.size());
    break;
  }
  case Prim::PsumScatter: case Prim::AllToAll: {
    const bool scatter = e.prim == Prim::PsumScatter;
    const int s = (int)e.intParam(scatter ? "scatter_dimension" : "split_axis");
    if (axes & examples) refuse("over the axes splitting the examples combines different devices' examples", sumFirst);
    if (e.intParam("tiled") == 0 || (!scatter && e.intParam("concat_axis") == x.split))
      refuse("moves the batch dimension", "keep the batch dimension where it is (tiled=true, another concat_axis)");
    if (s == x.split) {
      const int64_t n = mesh.groupSize(setOf(listed));
      const int64_t size = e.ins[0]->type.shape[(size_t)s];
      if (size % (M_ * n) != 0)
        fail(DiagId::PipelineBatch, e.loc,
             "'" + prim + "' splits this device's " + std::to_string(size / M_) + " examples of a micro-batch over " +
                 axisNames(mesh, listed) + " (" + std::to_string(n) + " devices)",
             "choose microbatches= so that each micro-batch's examples split evenly over the devices");
      out.axes.insert(out.axes.end(), listed.begin(), listed.end());
    }
    break;
  }
  default:
    refuse("is not split into micro-batches yet", "compute it outside the pipeline");
  }
  info_[e.outs[0]] = out;
}

void Splitter::splitEqn(const Eqn &e, const Info &in, bool inBody) {
  const std::string prim = primName(e.prim);
  auto wholeBatchInBody = [&] {
    fail(DiagId::PipelineNotSplittable, e.loc,
         "'" + prim + "' reduces the batch's data over its examples inside a shmap or loop, which runs once per "
         "micro-batch",
         "compute the whole batch's statistic outside it (in the stage's own code) and pass it in");
  };
  rules::FactorRule r = rules::rulesOf(e.prim).sharding(e);
  if (r.kind != rules::FactorRule::Factors) {
    if (!in.theta && primInfo(e.prim).kind != PrimKind::HigherOrder) {  // the batch's data alone: computed whole
      if (inBody) wholeBatchInBody();
      for (const Value *o : e.outs) {
        info_[o] = {-1, true, false, false, {}, 0};
        dataRoots_.push_back(o);
      }
      return;
    }
    fail(DiagId::PipelineNotSplittable, e.loc,
         "'" + prim + "' of per-example values is not split into micro-batches yet",
         primInfo(e.prim).kind == PrimKind::HigherOrder
             ? "compute it outside the pipeline"
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
      // (once: several per-example operands may share the factor, as select's two choices do)
      std::vector<std::pair<int, int>> &sliced = slices_[&e];
      if (std::find(sliced.begin(), sliced.end(), std::make_pair(ref.value, ref.dim)) == sliced.end())
        sliced.push_back({ref.value, ref.dim});
    }
  }
  if (reduced) {
    if (in.theta && !sums)
      fail(DiagId::PipelineNotSplittable, e.loc,
           "'" + prim + "' takes the largest or smallest over the batch's examples of a value that depends on the "
           "parameters",
           "a pipeline accumulates sums over micro-batches: sum or average over the batch");
    if (inBody && !in.theta) wholeBatchInBody();
    for (const Value *o : e.outs) {
      info_[o] = {-1, true, in.theta, in.theta, {}, 0};
      (in.theta ? summedRoots_ : dataRoots_).push_back(o);
    }
    return;
  }
  for (size_t k = 0; k < e.outs.size(); ++k) {
    if (outSplit[k] < 0)
      fail(DiagId::PipelineNotSplittable, e.loc, "'" + prim + "' of per-example values is not split into micro-batches",
           "keep the batch dimension apart from the others");
    info_[e.outs[k]] = {outSplit[k], true, in.theta, false, {}, 0};
  }
}

void Splitter::checkAffine(const Eqn &e) {
  auto tail = [&](size_t i) { return info_[e.ins[i]].tail; };
  bool ok = false;
  switch (e.prim) {
  case Prim::Add: case Prim::Sub: case Prim::Neg: case Prim::BroadcastInDim: case Prim::Reshape:
  case Prim::Transpose: case Prim::ReduceSum: case Prim::Slice: case Prim::Concatenate:
  case Prim::ShardingConstraint:
  // (in a shmap body: sums across devices, and moves of data, are linear too)
  case Prim::Psum: case Prim::Psum2: case Prim::Pbroadcast: case Prim::InvariantCast: case Prim::AllGather:
  case Prim::AllGatherInvariant: case Prim::PsumScatter: case Prim::AllToAll: case Prim::Ppermute:
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
  case Prim::DynamicUpdateSlice:  // (a scan stacking its steps' sums)
    ok = true;
    for (size_t i = 2; i < e.ins.size(); ++i) ok &= !tail(i);
    break;
  default: break;
  }
  if (!ok && !e.outs.empty() && e.outs[0]->type.dtype == DType::Bool)  // (a decision: an if's, a loop's, a select's)
    fail(DiagId::PipelineNotSplittable, e.loc,
         "'" + std::string(primName(e.prim)) + "' compares a sum over the batch's examples, so each micro-batch would "
         "decide by its own sum",
         "decide from the parameters, the step or the batch's data alone (computed once, on the whole batch)");
  if (!ok)
    fail(DiagId::PipelineNotSplittable, e.loc,
         "'" + std::string(primName(e.prim)) + "' of a sum over the batch: the loss is not an affine function of "
         "its sums over examples, so it cannot be accumulated over micro-batches",
         "sum or average per-example losses, and divide only by values of the batch data alone (a masked "
         "mean's sum(mask)) or of the parameters");
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
    if (!why.empty() && order >= 0) {
      Loc loc = p.orderLocs[(size_t)order];
      if (at >= 0) loc.col += 1 + at;  // (a step has no escapes: its column in the string)
      diags.fatal(DiagId::BadPipelineAttr, loc, why,
                  "each device group's order lists every step of its stages once: F (forward), B (backward)" +
                      std::string(p.schedule == Schedule::ZeroBubbleH1 ? ", W (weight gradient)" : "") +
                      " with the stage and micro-batch, as --emit=schedule prints them");
    }
    if (!why.empty())
      diags.fatal(DiagId::PipelineBatch, p.microbatchesLoc, why, "choose microbatches= a multiple of the stage axis's size");
    PipelineTimeline t;
    std::pair<int, size_t> stuck{-1, 0};
    std::string dead = simulateSchedule(s, t, &stuck);
    if (!dead.empty() && !p.order.empty()) {
      Loc loc = p.orderLocs[(size_t)stuck.first];
      const std::string &text = p.order[(size_t)stuck.first];
      size_t i = 0;  // the stuck step's column: skip stuck.second steps
      for (size_t n = 0;; ++n) {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == ',')) ++i;
        if (n == stuck.second) break;
        while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != ',') ++i;
      }
      loc.col += 1 + (int)i;
      diags.fatal(DiagId::PipelineDeadlock, loc, "this order deadlocks: " + dead,
                  "run the step that is waited for earlier in its device group's order (--emit=schedule prints an "
                  "order that runs: the schedule's own)");
    }
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
