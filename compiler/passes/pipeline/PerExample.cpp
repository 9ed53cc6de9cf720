// split-micro-batches, the analysis: which values of the differentiated function are per
// example (and along which dimension, split over which mesh axes inside a shmap), which are sums
// over the examples, and which are the batch's data alone, equation by equation, into shmap
// bodies, loops and conditionals; and the located refusals where a micro-batch cannot compute
// its part alone (MicroBatches.cpp explains the accumulation this makes exact).
#include "passes/pipeline/Splitter.h"
#include "rules/Rules.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace shmapc::passes::pipeline {

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
  // The body's parameters are (i, consts..., carries...): the counter is no example's.
  const Func &b = *e.bodies[0];
  info_[b.params[0]] = Info{};
  splitCarries(e, in, {&b}, b, 1, true, "loop");
}

void Splitter::checkCondition(const Eqn &e, const Info &pred, const char *what) {
  if (pred.split >= 0 || pred.tail || (pred.batch && pred.theta))
    fail(DiagId::PipelineNotSplittable, e.loc,
         std::string("the ") + what + " depends on the batch's examples, so each micro-batch would decide it for itself",
         "decide it from the parameters, the step or the batch's data alone (computed once, on the whole batch)");
}

void Splitter::splitWhile(const Eqn &e, const Info &in) {
  // The condition's and the body's parameters are (consts..., carries...).
  const Func &cond = *e.bodies[0];
  splitCarries(e, in, {&cond, e.bodies[1]}, *e.bodies[1], 0, false, "while loop");
  checkCondition(e, info_[cond.results[0]], "while loop's condition");
}

void Splitter::splitCarries(const Eqn &e, const Info &in, const std::vector<const Func *> &bodies, const Func &step,
                            size_t first, bool introduce, const char *what) {
  const size_t consts = (size_t)e.intParam("num_consts");
  // The operands as the bodies' parameters from `first` on; a carry whose examples the step
  // introduces (a splat or broadcast to fill, as scan's stacked outputs start) is per example
  // from the start, where `introduce`. Round until the carries' results agree with their
  // parameters (their flags only grow, so the rounds end).
  std::vector<Info> carry;
  for (const Value *v : e.ins) carry.push_back(info_[v]);
  for (const Func *b : bodies) splitBodies_.insert(b);
  ++loopDepth_;
  std::function<void(const Func &)> forget = [&](const Func &f) {  // (a round's slices: the next decides again)
    for (const Eqn &x : f.eqns) {
      slices_.erase(&x);
      for (const Func *nested : x.bodies) forget(*nested);
    }
  };
  for (int round = 0;; ++round) {
    for (const Func *b : bodies) {
      forget(*b);
      for (size_t k = 0; k < e.ins.size(); ++k) info_[b->params[k + first]] = carry[k];
      analyseEqns(*b);
    }
    bool again = false;
    for (size_t c = 0; consts + c < e.ins.size(); ++c) {
      Info &p = carry[consts + c];
      const Info &r = info_[step.results[c]];
      if (r.split != p.split || r.axes != p.axes) {
        if (!introduce || p.split >= 0 || round > 2)
          fail(DiagId::PipelineNotSplittable, e.loc,
               "the " + std::string(what) + "'s carry " + std::to_string(c) + " holds its examples along dimension " +
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
    Info out = info_[step.results[c]];
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

} // namespace shmapc::passes::pipeline
