// hoist-stage-reductions: a stage's data-parallel all-reduce of a weight gradient once per step,
// not once per micro-batch.
//
// A parameter a stage's shmap reads invariant along an axis ("data") whose devices compute
// different examples is broadcast to them; the transpose of that broadcast is a psum over the
// axis of each device's part of the gradient, in every backward step. The group's program then
// sums the micro-batches' psummed gradients. psum is linear, so that sum is the psum of the sum
// of the parts: each backward shmap returns its devices' parts instead (stacked along a leading
// dimension split over the axis: each device keeps its own, so summing them over micro-batches
// moves nothing), and one shmap after the last micro-batch psums the sums, every hoisted
// parameter's in it (so combine-reductions may join them into one all-reduce).
#include "passes/inline/Inline.h"
#include "passes/pipeline/Copy.h"
#include "passes/pipeline/Pipeline.h"
#include "rules/Rules.h"

#include <algorithm>
#include <map>
#include <set>

namespace shmapc::passes {

namespace {

using namespace ir;

struct Leaf {
  size_t eqn;        // the backward shmap
  size_t result;     // its result that is a psum's
};

class StageHoist {
public:
  StageHoist(Module &m, Func &P) : m_(m), P_(P) {}

  void run() {
    // (with remat the backward steps are still calls of the stage's derived function: their
    // shmaps inlined here, as keep-stage-residuals does otherwise)
    inlineCallsIn(m_, P_);
    std::map<const Value *, size_t> def;
    std::map<const Value *, int> uses;
    for (size_t i = 0; i < P_.eqns.size(); ++i) {
      for (const Value *o : P_.eqns[i].outs) def[o] = i;
      for (const Value *in : P_.eqns[i].ins) ++uses[in];
    }
    for (const Value *r : P_.results) ++uses[r];
    // Each result that is a sum (an add chain, each link read once) of psum results of shmaps.
    struct Plan {
      size_t result;
      std::vector<size_t> adds;
      std::vector<Leaf> leaves;
      AxisSet axes = 0;
      const Eqn *psum = nullptr;  // one of the leaves' psums (its params)
    };
    std::vector<Plan> plans;
    for (size_t r = 0; r < P_.results.size(); ++r) {
      Plan plan{r, {}, {}, 0, nullptr};
      bool ok = true;
      std::vector<const Value *> work = {P_.results[r]};
      while (ok && !work.empty()) {
        const Value *v = work.back();
        work.pop_back();
        auto d = def.find(v);
        if (d == def.end() || uses[v] != 1) {
          ok = false;
          break;
        }
        const Eqn &e = P_.eqns[d->second];
        if (e.prim == Prim::Add) {
          plan.adds.push_back(d->second);
          work.insert(work.end(), e.ins.begin(), e.ins.end());
          continue;
        }
        size_t k = (size_t)(std::find(e.outs.begin(), e.outs.end(), v) - e.outs.begin());
        const Eqn *psum = e.prim == Prim::Shmap ? psumResult(*e.bodies[0], k) : nullptr;
        if (!psum || (plan.psum && (psum->axesParamSet() != plan.axes || !sameLeafSpec(e, k, plan)))) {
          ok = false;
          break;
        }
        if (!plan.psum) {
          plan.psum = psum;
          plan.axes = psum->axesParamSet();
          first_[r] = {&e, k};
          spec_[r] = e.specsParam("out_specs")[k];
        }
        plan.leaves.push_back({d->second, k});
      }
      if (ok && plan.leaves.size() >= 2) plans.push_back(std::move(plan));
    }
    if (plans.empty()) return;
    // One final shmap per (mesh, axes): the hoisted psums, after the last accumulation.
    std::map<std::pair<int64_t, AxisSet>, std::vector<const Plan *>> finals;
    for (const Plan &plan : plans) {
      const Eqn &s = *first_[plan.result].first;
      finals[{s.intParam("mesh"), plan.axes}].push_back(&plan);
    }
    std::map<size_t, Func *> rebuilt;  // backward shmap -> its body with the parts returned
    std::map<const Value *, Value *> replace;  // a hoisted result -> what P returns now
    size_t insertAt = 0;
    for (const Plan &plan : plans) {
      for (size_t a : plan.adds) insertAt = std::max(insertAt, a + 1);
      for (const Leaf &l : plan.leaves) insertAt = std::max(insertAt, l.eqn + 1);
    }
    for (const Plan &plan : plans) {
      const Eqn &first = *first_[plan.result].first;
      const Mesh &mesh = *first.bodies[0]->mesh;
      const PartitionSpec stacked = stackedSpec(spec_.at(plan.result), plan.axes);
      Type global = P_.results[plan.result]->type;
      global.shape.insert(global.shape.begin(), mesh.groupSize(plan.axes));
      for (const Leaf &l : plan.leaves) {
        Eqn &s = P_.eqns[l.eqn];
        Func *&body = rebuilt[l.eqn];
        if (!body) {
          body = pipeline::copyFunc(m_, *s.bodies[0], s.bodies[0]->mesh);
          s.bodies[0] = body;
        }
        // The body's result: the psum's operand, stacked (a leading dimension of 1).
        const Eqn &psum = definer(*body, body->results[l.result]);
        Value *part = psum.ins[0];
        Type one = part->type;
        one.shape.insert(one.shape.begin(), 1);
        Eqn stack = rules::makeEqn(*body, Prim::Reshape, {part}, {}, psum.loc, {.declared = &one});
        body->results[l.result] = stack.outs[0];
        // (the psum, read by nothing else, goes: a collective runs even when nothing reads it)
        body->eqns.erase(body->eqns.begin() + (&psum - body->eqns.data()));
        body->eqns.push_back(std::move(stack));
        std::vector<PartitionSpec> outSpecs = s.specsParam("out_specs");
        outSpecs[l.result] = stacked;
        s.params["out_specs"] = outSpecs;
        Value *out = P_.newValue(global, s.outs[l.result]->hint);
        retarget(s.outs[l.result], out);
        s.outs[l.result] = out;
      }
      for (size_t a : plan.adds) P_.eqns[a].outs[0]->type = global;
    }
    std::vector<Eqn> tail;
    for (const auto &[key, group] : finals) tail.push_back(finalShmap(key.first, key.second, group, replace));
    P_.eqns.insert(P_.eqns.begin() + (long)insertAt, std::make_move_iterator(tail.begin()),
                   std::make_move_iterator(tail.end()));
    for (Value *&r : P_.results) {
      auto it = replace.find(r);
      if (it != replace.end()) r = it->second;
    }
  }

private:
  // The psum2 whose result body `b` returns as result k, read nowhere else, over some axes.
  static const Eqn *psumResult(const Func &b, size_t k) {
    const Value *r = b.results[k];
    if (std::count(b.results.begin(), b.results.end(), r) != 1) return nullptr;
    const Eqn *found = nullptr;
    for (const Eqn &e : b.eqns) {
      if (std::count(e.ins.begin(), e.ins.end(), r)) return nullptr;
      if (e.outs.size() == 1 && e.outs[0] == r) found = &e;
    }
    return found && found->prim == Prim::Psum2 && found->axesParamSet() ? found : nullptr;
  }

  static const Eqn &definer(const Func &b, const Value *v) {
    for (const Eqn &e : b.eqns)
      if (std::count(e.outs.begin(), e.outs.end(), v)) return e;
    throw InternalError("hoist-stage-reductions: a body result without its equation");
  }

  template <class Plan> bool sameLeafSpec(const Eqn &e, size_t k, const Plan &plan) const {
    auto it = first_.find(plan.result);
    const Eqn &f = *it->second.first;
    return e.intParam("mesh") == f.intParam("mesh") && e.specsParam("out_specs")[k] == spec_.at(plan.result);
  }

  // The parameter's spec with a leading dimension split over `axes`.
  static PartitionSpec stackedSpec(const PartitionSpec &s, AxisSet axes) {
    PartitionSpec out = s;
    std::vector<int> lead;
    for (int64_t a : axisList(axes)) lead.push_back((int)a);
    out.dims.insert(out.dims.begin(), lead);
    return out;
  }

  // Replaces operand uses of `from` by `to` in P (the add chain reads the shmap's result).
  void retarget(const Value *from, Value *to) {
    for (Eqn &e : P_.eqns)
      for (Value *&in : e.ins)
        if (in == from) in = to;
  }

  template <class Plan>
  Eqn finalShmap(int64_t meshIndex, AxisSet axes, const std::vector<const Plan *> &group,
                 std::map<const Value *, Value *> &replace) {
    const Mesh &mesh = *m_.meshes[(size_t)meshIndex];
    Func *body = m_.newFunc(P_.name + "_stage_psums");
    body->mesh = &mesh;
    body->isShmapBody = true;
    // (a backward body, as the ones its psums came from: combine-reductions may join them)
    body->isBackward = true;
    body->checkVma = first_.at(group[0]->result).first->bodies[0]->checkVma;
    Eqn e;
    e.prim = Prim::Shmap;
    e.params["mesh"] = meshIndex;
    int64_t steps = 0;  // (--emit=comm says how many backward steps each psum ran in before)
    for (const Plan *plan : group) steps = std::max(steps, (int64_t)plan->leaves.size());
    e.params["hoisted_from_steps"] = steps;
    std::vector<PartitionSpec> inSpecs, outSpecs;
    for (const Plan *plan : group) {
      const Eqn &psum = *plan->psum;
      e.loc = psum.loc;
      body->loc = body->returnLoc = psum.loc;
      const PartitionSpec spec = spec_.at(plan->result);
      Value *sum = P_.results[plan->result];
      // (the body's parameter: this device's summed parts, stacked; the psum's operand type)
      Type part = psum.ins[0]->type;
      Type one = part;
      one.shape.insert(one.shape.begin(), 1);
      Value *p = body->newValue(one, sum->hint);
      body->params.push_back(p);
      body->eqns.push_back(rules::makeEqn(*body, Prim::Reshape, {p}, {}, psum.loc, {.declared = &part}));
      Value *flat = body->eqns.back().outs[0];
      body->eqns.push_back(rules::makeEqn(*body, Prim::Psum2, {flat}, psum.params, psum.loc));
      body->results.push_back(body->eqns.back().outs[0]);
      body->outSpecLocs.push_back(psum.loc);
      e.ins.push_back(sum);
      inSpecs.push_back(stackedSpec(spec, axes));
      outSpecs.push_back(spec);
      Type whole = sum->type;
      whole.shape.erase(whole.shape.begin());
      Value *out = P_.newValue(whole, sum->hint);
      e.outs.push_back(out);
      replace[sum] = out;
    }
    e.params["in_specs"] = inSpecs;
    e.params["out_specs"] = outSpecs;
    e.bodies = {body};
    std::string why = rules::shapeProblem(e, P_);
    if (!why.empty()) throw InternalError("hoist-stage-reductions: " + why);
    return e;
  }

  Module &m_;
  Func &P_;
  std::map<size_t, std::pair<const Eqn *, size_t>> first_;  // result -> (a leaf's shmap, its result)
  std::map<size_t, PartitionSpec> spec_;                     // result -> the leaves' out_spec for it
};

} // namespace

void hoistStageReductions(Module &m, Diagnostics &) {
  std::vector<Func *> programs;  // (collected first: the rewrite adds functions to the module)
  for (const auto &f : m.funcs)
    for (Eqn &e : f->eqns)
      if (e.prim == Prim::Pipeline) programs.insert(programs.end(), e.bodies.begin(), e.bodies.end());
  for (Func *program : programs) StageHoist(m, *program).run();
}

} // namespace shmapc::passes
