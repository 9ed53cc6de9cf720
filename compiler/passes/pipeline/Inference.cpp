// The inference schedule: a pipeline function that evaluates its model forward over
// micro-batches (no grad). Its body is cut into stages at the markers like a differentiated
// function; each micro-batch runs through the stages' forward steps, and the results are put
// back together: a per-example result's micro-batch parts concatenated along its batch
// dimension, a result computed from sums over examples averaged over micro-batches (each
// computed with its sums scaled by M, as a loss is), any other taken from micro-batch 0.
#include "passes/inline/Inline.h"
#include "passes/pipeline/Copy.h"
#include "passes/pipeline/Splitter.h"
#include "rules/Rules.h"

#include <algorithm>
#include <tuple>

namespace shmapc::passes::pipeline {

void Splitter::runInference() {
  Func &F = *p_.func;
  for (const Eqn &e : F.eqns)
    if (e.prim == Prim::Vjp || e.prim == Prim::Jvp)
      fail(DiagId::PipelineGrad, e.loc, "the inference schedule runs forward steps only, but the pipeline function " +
               p_.name + " differentiates",
           "train with schedule=\"gpipe\", \"1f1b\", \"interleaved\" or \"zb-h1\", or drop the grad to evaluate the "
           "model");
  // The function itself is what runs over the micro-batches: a copy of it is analysed, and
  // every parameter that is not the batch is a parameter of the model.
  T_ = cloneFunc(m_, F, F.mesh);
  n_ = T_->params.size();
  batchParam_.assign(n_, false);
  for (int k : p_.batchLeaves) batchParam_[(size_t)k] = true;
  for (size_t j = 0; j < n_; ++j)
    if (!batchParam_[j]) wrt_.push_back((int64_t)j);
  rewriteInference(F, stagedMicroBatchFunc());
}

void Splitter::rewriteInference(Func &F, Func *mb) {
  const std::vector<Value *> args = F.params;
  F.eqns.clear();
  const std::vector<Value *> consts = wholeBatchInputs(F, args);
  const std::vector<StageFn> stages = stageFuncs(mb);
  const int G = schedule_.groups, S = (int)stages.size();
  const size_t R = T_->results.size();
  std::map<std::tuple<int, int, int, int>, int64_t> channels;  // (from stage, to stage, output, mb)
  auto channel = [&](int from, int to, int k, int m) {
    auto [it, fresh] = channels.try_emplace(std::make_tuple(from, to, k, m), (int64_t)channels.size());
    return it->second;
  };
  std::map<const Value *, std::pair<int, int>> producer;
  for (int v = 0; v < S; ++v)
    for (size_t k = 0; k < stages[(size_t)v].outputs.size(); ++k) producer[stages[(size_t)v].outputs[k]] = {v, (int)k};
  std::map<std::pair<int, int>, std::vector<int>> consumers;
  for (int w = 0; w < S; ++w)
    for (const Value *in : stages[(size_t)w].inputs)
      if (producer.count(in)) consumers[producer.at(in)].push_back(w);
  std::map<const Value *, int> mbParam;
  for (size_t i = 0; i < mb->params.size(); ++i) mbParam[mb->params[i]] = (int)i;
  const size_t firstResult = stages[(size_t)S - 1].outputs.size() - R;  // (the last stage's last outputs)

  std::vector<Func *> programs;
  for (int g = 0; g < G; ++g) {
    Func *P = m_.newFunc(F.name + "_group" + std::to_string(g));
    P->loc = p_.loc;
    programs.push_back(P);
    std::vector<Value *> params;
    for (Value *c : consts) {
      params.push_back(P->newValue(c->type, c->hint));
      P->params.push_back(params.back());
    }
    std::map<std::pair<int, int>, Value *> batchSlice;
    std::map<std::tuple<int, int, int>, Value *> act;  // (stage, output, mb) computed here
    std::vector<std::vector<Value *>> parts(R);        // per result, per micro-batch
    for (const PipelineStep &step : schedule_.steps[(size_t)g]) {
      const int v = step.stage, m = step.mb;
      const StageFn &sf = stages[(size_t)v];
      std::vector<Value *> a;  // (received before the step begins: a wait is idle time, not the step's)
      for (const Value *src : sf.inputs) {
        auto it = mbParam.find(src);
        if (it != mbParam.end()) {
          a.push_back(microBatchArgument(*P, params, batchSlice, it->second, m));
          continue;
        }
        auto [u, k] = producer.at(src);
        if (schedule_.groupOf(u) == g) {
          a.push_back(act.at({u, k, m}));
          continue;
        }
        P->eqns.push_back(rules::makeEqn(*P, Prim::PipeRecv, {}, {{"channel", channel(u, v, k, m)}}, p_.loc,
                                         {.declared = &src->type, .untyped = true}));
        a.push_back(P->eqns.back().outs[0]);
      }
      marker(*P, step, true);
      Eqn call;
      call.prim = Prim::Call;
      call.loc = p_.loc;
      call.bodies = {sf.f};
      call.ins = a;
      for (const Value *r : sf.f->results) call.outs.push_back(P->newValue(r->type, r->hint));
      std::vector<Value *> outs = call.outs;
      P->eqns.push_back(std::move(call));
      for (size_t k = 0; k < outs.size(); ++k) {
        act[{v, (int)k, m}] = outs[k];
        if (v == S - 1 && k >= firstResult) parts[k - firstResult].push_back(outs[k]);
        std::set<int> sentTo;
        for (int w : consumers[{v, (int)k}])
          if (schedule_.groupOf(w) != g && sentTo.insert(w).second) send(*P, outs[k], channel(v, w, (int)k, m));
      }
      marker(*P, step, false);
    }
    if (schedule_.groupOf(S - 1) != g) continue;
    // The results, from the micro-batches' parts (in micro-batch order: a group runs its
    // forward steps in it).
    for (size_t r = 0; r < R; ++r) {
      const Info &info = info_[T_->results[r]];
      Value *whole = nullptr;
      if (info.split >= 0) {
        P->eqns.push_back(rules::makeEqn(*P, Prim::Concatenate, parts[r], {{"dimension", (int64_t)info.split}}, p_.loc,
                                         {.untyped = true}));
        whole = P->eqns.back().outs[0];
      } else if (info.tail) {
        for (Value *part : parts[r]) whole = whole ? binary(*P, Prim::Add, whole, part) : part;
        whole = binary(*P, Prim::Mul, whole, constant(*P, 1.0 / (double)M_, whole->type));
      } else {
        whole = parts[r][0];
      }
      P->results.push_back(whole);
    }
  }

  std::vector<std::pair<int, int>> ends(channels.size());  // per channel: (sending stage, receiving stage)
  for (const auto &[key, id] : channels) ends[(size_t)id] = {std::get<0>(key), std::get<1>(key)};
  Eqn pipe = pipelineEqn(p_.loc, consts, programs, ends, false);
  for (Func *P : programs)
    for (const Value *r : P->results) pipe.outs.push_back(F.newValue(r->type));
  std::string why = rules::shapeProblem(pipe, F);
  if (!why.empty()) throw InternalError("split-micro-batches: inference pipeline: " + why);
  F.results.assign(pipe.outs.begin(), pipe.outs.end());
  F.eqns.push_back(std::move(pipe));
}

} // namespace shmapc::passes::pipeline
