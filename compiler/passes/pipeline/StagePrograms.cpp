// The stage functions and stage programs that replace a pipeline function's grad (the
// split-micro-batches pass; Splitter.h).
#include "passes/inline/Inline.h"
#include "passes/pipeline/Copy.h"
#include "passes/pipeline/Splitter.h"
#include "rules/Rules.h"

#include <algorithm>
#include <tuple>

namespace shmapc::passes::pipeline {

void Splitter::marker(Func &f, const PipelineStep &step, bool begin) {
  Eqn e;
  e.prim = Prim::PipeStep;
  e.params = {{"kind", (int64_t)step.kind}, {"stage", (int64_t)step.stage}, {"mb", (int64_t)step.mb},
              {"begin", (int64_t)begin}};
  e.loc = p_.loc;
  f.eqns.push_back(std::move(e));
}

void Splitter::send(Func &f, Value *x, int64_t channel) {
  Eqn e;
  e.prim = Prim::PipeSend;
  e.ins = {x};
  e.params["channel"] = channel;
  e.loc = p_.loc;
  f.eqns.push_back(std::move(e));
}

std::vector<Splitter::StageFn> Splitter::stageFuncs(Func *mb) {
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
    std::map<const Func *, Func *> copies;
    auto copy = [&](const Eqn &e) { copyEqnInto(m_, e, *sf.f, vm, copies, sf.f->eqns); };
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

std::vector<int64_t> Splitter::deviceGroups() const {
  std::vector<int64_t> of;
  if (!p_.groupMeshes.empty()) {  // each group's mesh's devices after the previous groups'
    for (size_t g = 0; g < p_.groupMeshes.size(); ++g)
      of.insert(of.end(), (size_t)m_.meshes[(size_t)p_.groupMeshes[g]]->numDevices(), (int64_t)g);
    return of;
  }
  const Mesh &mesh = *m_.meshes[(size_t)p_.mesh];
  int64_t stride = 1;  // (devices numbered row-major over the mesh's axes)
  for (size_t a = (size_t)p_.stageAxis + 1; a < mesh.sizes.size(); ++a) stride *= mesh.sizes[a];
  for (int64_t d = 0; d < mesh.numDevices(); ++d) of.push_back((d / stride) % mesh.sizes[(size_t)p_.stageAxis]);
  return of;
}

Value *Splitter::microBatchArgument(Func &P, const std::vector<Value *> &params,
                                    std::map<std::pair<int, int>, Value *> &batchSlices, int i, int m) {
  if (i == 0) return constant(P, (double)m, Type{DType::I32, {}, 0});  // the micro-batch's index
  if (i <= (int)n_ && batchParam_[(size_t)i - 1]) {  // a batch argument: its micro-batch, sliced once
    Value *&sl = batchSlices[{i - 1, m}];
    if (!sl) sl = slice(P, params[(size_t)i - 1], 0, constant(P, (double)m, Type{DType::I32, {}, 0}));
    return sl;
  }
  return params[(size_t)i - 1];  // a parameter, or a whole-batch data value (they follow T's)
}

Eqn Splitter::pipelineEqn(Loc loc, const std::vector<Value *> &consts, const std::vector<Func *> &programs,
                          const std::vector<std::pair<int, int>> &ends, bool remat) {
  const int64_t G = (int64_t)programs.size();
  std::vector<int64_t> channelEnds;
  for (auto [from, to] : ends) channelEnds.insert(channelEnds.end(), {schedule_.groupOf(from), schedule_.groupOf(to)});
  Eqn pipe;
  pipe.prim = Prim::Pipeline;
  pipe.loc = loc;
  pipe.ins = consts;
  pipe.bodies = programs;
  pipe.params = {{"groups", G}, {"channels", (int64_t)ends.size()},
                 {"schedule", std::string(scheduleName(p_.schedule))}, {"remat", (int64_t)remat},
                 {"label", p_.name + " (" + scheduleName(p_.schedule) + ", " + std::to_string(G) + " groups, " +
                               std::to_string(M_) + " micro-batches)"},
                 {"predicted_bubble", std::vector<double>{bubble_}},
                 {"device_groups", deviceGroups()}, {"channel_ends", channelEnds}};
  return pipe;
}

std::vector<Value *> Splitter::wholeBatchInputs(Func &F, const std::vector<Value *> &args) {
  std::map<const Value *, Value *> pm;
  for (size_t j = 0; j < n_; ++j) pm[T_->params[j]] = args[j];
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
  std::map<const Func *, Func *> noBodies;  // (refused above)
  for (size_t idx = 0; idx < T_->eqns.size(); ++idx)
    if (copy[idx]) copyEqnInto(m_, T_->eqns[idx], F, pm, noBodies, F.eqns);
  std::vector<Value *> consts;
  for (size_t j = 0; j < n_; ++j) consts.push_back(args[j]);
  for (const Value *r : dataRoots_) consts.push_back(pm.at(r));
  return consts;
}

void Splitter::rewrite(Func &F, Func *mb) {
  Eqn V = std::move(F.eqns[vIndex_]);
  std::vector<Eqn> after(std::make_move_iterator(F.eqns.begin() + (long)vIndex_ + 1),
                         std::make_move_iterator(F.eqns.end()));
  F.eqns.resize(vIndex_);
  const std::vector<Value *> consts = wholeBatchInputs(F, V.ins);

  const std::vector<StageFn> stages = stageFuncs(mb);
  const PipelineSchedule &schedule = schedule_;
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
      if (it != mbParam.end()) return microBatchArgument(*P, params, batchSlice, it->second, m);
      auto [u, k] = producer.at(src);
      if (schedule_.groupOf(u) == g) return act.at({u, k, m});
      P->eqns.push_back(rules::makeEqn(*P, Prim::PipeRecv, {}, {{"channel", channel(0, u, v, k, m)}}, V.loc,
                                       {.declared = &src->type, .untyped = true}));
      return P->eqns.back().outs[0];
    };
    for (const PipelineStep &step : schedule.steps[(size_t)g]) {
      const int v = step.stage, m = step.mb;
      const StageFn &sf = stages[(size_t)v];
      // A step begins once it has received what it reads (a wait for a message is then the
      // group's idle time, between steps, as the schedule's grid shows it) and ends after its
      // last equation.
      struct End {
        Splitter &s;
        Func &P;
        const PipelineStep &step;
        ~End() { s.marker(P, step, false); }
      } end{*this, *P, step};
      if (step.kind == PipelineStep::F) {
        std::vector<Value *> a;
        for (const Value *src : sf.inputs) a.push_back(argument(v, m, src));
        marker(*P, step, true);
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
            } else if (schedule_.groupOf(w) != g) {
              send(*P, outs[k], channel(0, v, w, (int)k, m));
            }
          }
        }
        continue;
      }
      if (step.kind == PipelineStep::W) {  // (keep-stage-residuals moves the weights' gradients here)
        marker(*P, step, true);
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
                          : schedule_.groupOf(w) == g ? cotFrom.at({v, (int)k, m, w})
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
      marker(*P, step, true);
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
        if (schedule_.groupOf(u) == g) cotFrom[{u, k, m, v}] = cts[q];
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

  std::vector<std::pair<int, int>> ends(channels.size());  // per channel: (sending stage, receiving stage)
  for (const auto &[key, id] : channels) ends[(size_t)id] = {std::get<1>(key), std::get<2>(key)};
  Eqn pipe = pipelineEqn(V.loc, consts, programs, ends, p_.remat);
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

} // namespace shmapc::passes::pipeline
