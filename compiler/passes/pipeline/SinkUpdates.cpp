// sink-updates-into-stages: the parameter update after a training pipeline runs in the stage
// program of the device group whose gradients it reads, not on the host after the run.
//
// A pipeline equation returns each group's gradients (a tied parameter's parts summed after
// it); the step's update (SGD, AdamW: element-wise per leaf, reading the leaf, its gradient,
// its optimizer state and scalars) follows. Every equation after the pipeline that computes
// from one group's results alone, from values the host had before the pipeline (passed in as
// further pipeline operands) and from constants, moves to the end of that group's program,
// between "update" step markers, and its results that the host still reads become the
// group's results; gradients only the moved update read are no longer returned. So each group
// updates its parameters as soon as its last backward step ends, while the others still run
// theirs (the drain's idle time), and under MPI only the group's ranks compute it. An equation
// reading two groups' results (a tied parameter's summed gradient and its update) stays on the
// host, as does anything with an effect or a body.
#include "passes/pipeline/Copy.h"
#include "passes/pipeline/Pipeline.h"
#include "rules/Rules.h"

#include <algorithm>
#include <map>
#include <set>

namespace shmapc::passes {

namespace {

using namespace ir;

// Equations a stage program may compute in place of the host: pure, without bodies.
bool movable(const Eqn &e) {
  if (!e.bodies.empty()) return false;
  switch (primInfo(e.prim).kind) {
  case PrimKind::Unary:
  case PrimKind::Binary:
  case PrimKind::Compare: return true;
  case PrimKind::Other: return e.prim != Prim::ShardingConstraint;
  case PrimKind::Const: return e.prim == Prim::Constant || e.prim == Prim::Iota || e.prim == Prim::ArgValue;
  default: return false;
  }
}

constexpr int kAnywhere = -1;  // computed from values the host had before the pipeline, or constants
constexpr int kHost = -2;      // stays on the host
constexpr int kGone = -3;      // computed anywhere, read by none of what stays: dropped

class UpdateSinker {
public:
  UpdateSinker(Module &m, Func &f, size_t at, std::map<const Func *, int> &uses)
      : m_(m), f_(f), at_(at), uses_(uses) {}

  void run() {
    Eqn &pipe = f_.eqns[at_];
    const size_t G = pipe.bodies.size();
    resultsOf_.assign(G, {});
    for (size_t g = 0, next = 0; g < G; ++g)
      for (size_t r = 0; r < pipe.bodies[g]->results.size(); ++r, ++next) {
        where_[pipe.outs[next]] = (int)g;
        resultsOf_[g].push_back(pipe.outs[next]);
      }
    // Each equation after the pipeline: the group it can move to, anywhere, or the host.
    std::vector<int> placeOf(f_.eqns.size(), kHost);
    for (size_t i = at_ + 1; i < f_.eqns.size(); ++i) {
      const Eqn &e = f_.eqns[i];
      int place = movable(e) ? kAnywhere : kHost;
      for (const Value *in : e.ins) {
        auto w = where_.find(in);
        const int p = w == where_.end() ? kAnywhere : w->second;  // (else defined before the pipeline)
        if (place == kHost || p == kHost) place = kHost;
        else if (p >= 0 && place >= 0 && p != place) place = kHost;
        else if (p >= 0) place = p;
      }
      placeOf[i] = place;
      for (const Value *o : e.outs) {
        where_[o] = place;
        if (place == kAnywhere) definer_[o] = i;
      }
    }
    if (std::none_of(placeOf.begin(), placeOf.end(), [](int p) { return p >= 0; })) return;
    // (a pipeline function called twice has its programs shared by both pipelines: this one's
    // are changed, so it gets copies of its own)
    for (Func *&P : pipe.bodies)
      if (--uses_[P] > 0) P = pipeline::copyFunc(m_, *P, nullptr);

    // The moved equations, group by group, at the end of the group's program.
    std::vector<std::map<const Value *, Value *>> vm(G);
    for (size_t g = 0; g < G; ++g) {
      Func &P = *pipe.bodies[g];
      for (size_t r = 0; r < P.results.size(); ++r) vm[g][resultsOf_[g][r]] = P.results[r];
      bool any = false;
      for (size_t i = at_ + 1; i < f_.eqns.size(); ++i) {
        if (placeOf[i] != (int)g) continue;
        if (!any) marker(P, g, true);
        any = true;
        copyInto(pipe, g, f_.eqns[i], vm[g]);
      }
      if (any) marker(P, g, false);
    }

    // What the host still reads: of the moved values, the group's new results; of the
    // pipeline's results, only those.
    std::set<const Value *> read(f_.results.begin(), f_.results.end());
    for (size_t i = 0; i < f_.eqns.size(); ++i)
      if (i <= at_ || placeOf[i] < 0) read.insert(f_.eqns[i].ins.begin(), f_.eqns[i].ins.end());
    for (size_t g = 0; g < G; ++g) {
      Func &P = *pipe.bodies[g];
      std::vector<Value *> results, values;
      for (size_t r = 0; r < P.results.size(); ++r)
        if (read.count(resultsOf_[g][r])) results.push_back(P.results[r]), values.push_back(resultsOf_[g][r]);
      for (size_t i = at_ + 1; i < f_.eqns.size(); ++i)
        if (placeOf[i] == (int)g)
          for (Value *o : f_.eqns[i].outs)
            if (read.count(o)) results.push_back(vm[g].at(o)), values.push_back(o);
      P.results = results;
      resultsOf_[g] = values;
    }
    pipe.outs.clear();
    for (size_t g = 0; g < G; ++g) pipe.outs.insert(pipe.outs.end(), resultsOf_[g].begin(), resultsOf_[g].end());
    // (what was computed anywhere and only the moved equations read goes too)
    std::set<const Value *> live(f_.results.begin(), f_.results.end());
    for (size_t i = f_.eqns.size(); i-- > at_ + 1;) {
      const Eqn &e = f_.eqns[i];
      if (placeOf[i] >= 0) continue;
      if (placeOf[i] == kAnywhere && std::none_of(e.outs.begin(), e.outs.end(), [&](const Value *o) {
            return live.count(o) > 0;
          })) {
        placeOf[i] = kGone;
        continue;
      }
      live.insert(e.ins.begin(), e.ins.end());
    }
    std::vector<Eqn> kept;
    for (size_t i = 0; i < f_.eqns.size(); ++i)
      if (i <= at_ || placeOf[i] == kAnywhere || placeOf[i] == kHost) kept.push_back(std::move(f_.eqns[i]));
    f_.eqns = std::move(kept);
    const std::string why = rules::shapeProblem(f_.eqns[at_], f_);
    if (!why.empty()) throw InternalError("sink-updates-into-stages: pipeline: " + why);
  }

private:
  // Where group g's update begins or ends (--trace: an "update" span; --stats=pipeline).
  void marker(Func &P, size_t g, bool begin) {
    Eqn e;
    e.prim = Prim::PipeStep;
    e.params = {{"kind", (int64_t)3}, {"stage", (int64_t)g}, {"mb", (int64_t)0}, {"begin", (int64_t)begin}};
    e.loc = f_.eqns[at_].loc;
    P.eqns.push_back(std::move(e));
  }

  // v in group g's program: a result or a moved value, a value of the host before the pipeline
  // (a further operand of the pipeline, a parameter of every program), or computed anywhere
  // (its equations copied).
  Value *in(Eqn &pipe, size_t g, const Value *v, std::map<const Value *, Value *> &vm) {
    auto it = vm.find(v);
    if (it != vm.end()) return it->second;
    auto d = definer_.find(v);
    if (d != definer_.end()) {
      copyInto(pipe, g, f_.eqns[d->second], vm);
      return vm.at(v);
    }
    auto at = std::find(pipe.ins.begin(), pipe.ins.end(), v);
    const size_t k = (size_t)(at - pipe.ins.begin());
    if (at == pipe.ins.end()) {
      pipe.ins.push_back(const_cast<Value *>(v));
      for (Func *P : pipe.bodies) P->params.push_back(P->newValue(v->type, v->hint));
    }
    return vm[v] = pipe.bodies[g]->params[k];
  }

  // e at the end of group g's program, its operands made there first.
  void copyInto(Eqn &pipe, size_t g, const Eqn &e, std::map<const Value *, Value *> &vm) {
    for (const Value *x : e.ins) in(pipe, g, x, vm);
    Func &P = *pipe.bodies[g];
    std::map<const Func *, Func *> noBodies;  // (movable equations have none)
    pipeline::copyEqnInto(m_, e, P, vm, noBodies, P.eqns);
  }

  Module &m_;
  Func &f_;
  size_t at_;
  std::map<const Func *, int> &uses_;  // how many pipeline equations run each stage program
  std::map<const Value *, int> where_;       // values defined after the pipeline: their place
  std::map<const Value *, size_t> definer_;  // ... computed anywhere: their equation
  std::vector<std::vector<Value *>> resultsOf_;  // per group: the host's values of its results
};

void sinkIn(Module &m, Func &f, std::map<const Func *, int> &uses) {
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    for (Func *body : f.eqns[i].bodies) sinkIn(m, *body, uses);
    if (f.eqns[i].prim == Prim::Pipeline && f.eqns[i].strParam("schedule") != "inference")
      UpdateSinker(m, f, i, uses).run();
  }
}

} // namespace

void sinkUpdatesIntoStages(Module &m, Diagnostics &) {
  std::map<const Func *, int> uses;
  for (const auto &f : m.funcs)
    for (const Eqn &e : f->eqns)
      if (e.prim == Prim::Pipeline)
        for (const Func *P : e.bodies) ++uses[P];
  if (m.main) sinkIn(m, *m.main, uses);
}

} // namespace shmapc::passes
