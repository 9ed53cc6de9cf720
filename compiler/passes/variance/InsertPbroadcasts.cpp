// insertPbroadcasts: device-variance inference for shmap bodies (JAX's note on efficient
// transposition).
//
// Every value in a shmap body gets the set of mesh axes it may vary over. Body params start
// from their in_specs; each equation's result follows the rule of its primitive
// (VarianceRules.h; each primitive names its kind in compiler/prims/). Where operands disagree, each is lifted to the union of their variance
// sets with a pbroadcast — once per (value, target), so the transpose does not turn repeated
// pbroadcasts into a sum of psums. With auto_pbroadcast=false a disagreement is an error that
// says which pbroadcast to write.
//
// The user-level psum becomes psum2 over the axes its operand varies over; over axes where
// the operand is invariant, psum(x) is n*x, so it becomes a multiplication and no collective
// (psum(1, "i") is the axis size). Loops find their carries' variance by a fixed point (a carry
// that becomes varying in the body is pbroadcast before the loop); a conditional's results vary
// over the union of its branches' and its predicate's variance.
#include "passes/variance/Variance.h"
#include "rules/VarianceRules.h"
#include "rules/Rules.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

namespace shmapc::passes {

namespace {

using namespace ir;
using rules::VarianceRule;

AxisSet bit(int64_t axis) { return AxisSet(1) << axis; }

AxisSet axesParam(const Eqn &e) { return e.axesParamSet(); }

// The eqn's axes that are in `keep`, in the order the user listed them.
std::vector<int64_t> axesIn(const Eqn &e, AxisSet keep) {
  std::vector<int64_t> out;
  for (int64_t a : e.intsParam("axes"))
    if (keep & bit(a)) out.push_back(a);
  return out;
}


// `"i"` or `("x", "y")`, as the user would write it.
std::string axesSource(const Mesh &mesh, AxisSet s) {
  std::vector<int64_t> axes = axisList(s);
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? ", \"" : "\"") + mesh.axes[axes[i]] + "\"";
  return axes.size() == 1 ? text : "(" + text + ")";
}

std::string valueName(const Value *v) { return v->hint.empty() ? "this value" : "'" + v->hint + "'"; }

class VarianceInference {
public:
  VarianceInference(Diagnostics &diags, const Mesh &mesh, bool autoPbroadcast)
      : diags_(diags), mesh_(mesh), auto_(autoPbroadcast) {}

  // A result whose out_spec maps axes it is invariant over is seen by the caller once per
  // device along them (implicit fan-out): it is lifted to vary over them, an implicit
  // pbroadcast whose transpose is the psum2 that sums the copies' cotangents.
  void shmapBody(Func &body, const std::vector<PartitionSpec> &inSpecs,
                 const std::vector<PartitionSpec> &outSpecs) {
    for (size_t i = 0; i < body.params.size(); ++i) body.params[i]->type.vary = inSpecs[i].axes();
    std::vector<AxisSet> mapped;
    for (const PartitionSpec &spec : outSpecs) mapped.push_back(spec.axes());
    func(body, true, nullptr, &mapped);
  }

  void retype(Func &f, const std::vector<AxisSet> &paramVary) {
    for (size_t i = 0; i < f.params.size(); ++i) f.params[i]->type.vary = paramVary[i];
    func(f, true, nullptr);
  }

private:
  // One pass over a Func. A dry run (mutate = false) only computes variance sets, for the
  // fixed point of loops; the final run rewrites the equations.
  struct Scope {
    Func &f;
    bool mutate;
    std::vector<Eqn> out;
    std::map<std::pair<Value *, AxisSet>, Value *> lifted;
    std::map<Value *, Value *> replace;  // results of equations that became the identity
    std::map<Value *, Eqn> reshapes;     // values made by a changesOnlyShape eqn: a pbroadcast
                                         // of them is applied before it (lift)
  };

  // `fanOut`: per result, the axes its out_spec maps (shmap bodies only); a result invariant
  // over some of them is lifted, unless it varies over unmapped axes (checkOutSpecs reports
  // that with the user's type).
  std::vector<AxisSet> func(Func &f, bool mutate, const std::vector<AxisSet> *targets,
                            const std::vector<AxisSet> *fanOut = nullptr) {
    Scope s{f, mutate, {}, {}, {}, {}};
    if (mutate) {
      std::vector<Eqn> eqns = std::move(f.eqns);
      for (Eqn &e : eqns) eqn(s, std::move(e));
    } else {
      for (const Eqn &e : f.eqns) eqn(s, e);
    }
    std::vector<AxisSet> varies;
    for (size_t k = 0; k < f.results.size(); ++k) {
      Value *r = resolve(s, f.results[k]);
      if (targets) r = requireResult(s, r, (*targets)[k]);
      if (fanOut && !(r->type.vary & ~(*fanOut)[k]))
        r = lift(s, r, r->type.vary | (*fanOut)[k], f.returnLoc.valid() ? f.returnLoc : f.loc);
      if (mutate) f.results[k] = r;
      varies.push_back(targets ? (*targets)[k] : r->type.vary);
    }
    if (mutate) f.eqns = dropUnusedReshapes(std::move(s.out), f.results);
    return varies;
  }

  // A broadcast remade from a lifted operand may leave the invariant original unused.
  static std::vector<Eqn> dropUnusedReshapes(std::vector<Eqn> eqns, const std::vector<Value *> &results) {
    std::set<const Value *> used(results.begin(), results.end());
    std::vector<Eqn> kept;
    for (size_t i = eqns.size(); i-- > 0;) {
      Eqn &e = eqns[i];
      if (changesOnlyShape(e.prim) && !used.count(e.outs[0])) continue;
      used.insert(e.ins.begin(), e.ins.end());
      kept.push_back(std::move(e));
    }
    std::reverse(kept.begin(), kept.end());
    return kept;
  }

  Value *resolve(Scope &s, Value *v) {
    auto it = s.replace.find(v);
    return it == s.replace.end() ? v : it->second;
  }

  void emit(Scope &s, Eqn e) {
    if (!s.mutate) return;
    if (changesOnlyShape(e.prim)) s.reshapes[e.outs[0]] = e;
    s.out.push_back(std::move(e));
  }


  static void setOut(Eqn &e, AxisSet vary) {
    for (Value *o : e.outs) o->type.vary = vary;
  }

  // The result becomes its operand (a collective with nothing left to do).
  void alias(Scope &s, Eqn &e) {
    e.outs[0]->type.vary = e.ins[0]->type.vary;
    s.replace[e.outs[0]] = e.ins[0];
  }

  // `v` lifted to vary over `target` (a superset of its variance) by one pbroadcast, at the
  // smallest shape: a value made by broadcast_in_dim, reshape, convert or transpose is
  // remade from its lifted operand, so the pbroadcast's transpose (a psum2) all-reduces the
  // cotangent after the broadcast's transpose reduced it, not before (the note's bytes).
  Value *lift(Scope &s, Value *v, AxisSet target, Loc loc) {
    if (!s.mutate || v->type.vary == target) return v;
    auto key = std::make_pair(v, target);
    auto it = s.lifted.find(key);
    if (it != s.lifted.end()) return it->second;
    Type t = v->type;
    t.vary = target;
    Value *out = s.f.newValue(t, v->hint);
    if (auto def = s.reshapes.find(v); def != s.reshapes.end()) {
      Eqn remade = def->second;
      remade.ins[0] = lift(s, remade.ins[0], target, loc);
      remade.outs = {out};
      s.reshapes[out] = remade;
      s.out.push_back(std::move(remade));
      s.lifted[key] = out;
      return out;
    }
    s.out.push_back(rules::makeEqn(s.f, Prim::Pbroadcast, {v}, {{"axes", axisList(target & ~v->type.vary)}}, loc,
                                   {.into = out}));
    s.lifted[key] = out;
    return out;
  }

  // Operand `v` of `e` must vary over exactly `target` (a superset of its variance). Even in
  // explicit mode a constant (a literal, zeros(...), and what is computed from constants
  // alone) is lifted silently: that costs nothing and its transpose is never needed.
  Value *require(Scope &s, const Eqn &e, Value *v, AxisSet target) {
    if (tracked_)
      if (auto it = trackedRoot_.find(v); it != trackedRoot_.end()) {
        // A reshape or broadcast of a tracked const is lifted through to the const (lift), so
        // the uses of its result are the const's uses.
        if (changesOnlyShape(e.prim)) trackedRoot_[e.outs[0]] = it->second;
        else (*tracked_)[it->second].push_back(target);
      }
    if (v->type.vary == target) return v;
    if (!auto_ && !constants_.count(v)) {
      AxisSet missing = target & ~v->type.vary;
      diags_.fatal(DiagId::VarianceMismatch, e.loc,
                   std::string("operand ") + valueName(v) + " of '" + primName(e.prim) +
                       "' has type " + typeToString(v->type, &mesh_) + " but must vary over " +
                       axesSource(mesh_, target) + " (auto_pbroadcast is off)",
                   "write pbroadcast(" + (v->hint.empty() ? std::string("x") : v->hint) + ", " +
                       axesSource(mesh_, missing) + ") to make it vary over " +
                       axesSource(mesh_, missing));
    }
    return lift(s, v, target, e.loc);
  }

  Value *requireResult(Scope &s, Value *r, AxisSet target) {
    if (r->type.vary == target) return r;
    if (!auto_)
      diags_.fatal(DiagId::VarianceMismatch, s.f.returnLoc.valid() ? s.f.returnLoc : s.f.loc,
                   "result " + valueName(r) + " has type " + typeToString(r->type, &mesh_) +
                       " but the loop or conditional makes it vary over " +
                       axesSource(mesh_, target) + " (auto_pbroadcast is off)",
                   "write pbroadcast(" + (r->hint.empty() ? std::string("x") : r->hint) + ", " +
                       axesSource(mesh_, target & ~r->type.vary) + ")");
    // (a branch of an `if` has no return statement: a result lifted at the `if`)
    return lift(s, r, target, s.f.returnLoc.valid() ? s.f.returnLoc : s.f.loc);
  }

  [[noreturn]] void invariantOperand(const Eqn &e, AxisSet invariant, const std::string &hint) {
    diags_.fatal(DiagId::VarianceCollective, e.loc,
                 std::string("'") + primName(e.prim) + "' over " + axesSource(mesh_, invariant) +
                     " of " + valueName(e.ins[0]) + ", which is invariant over " +
                     axesSource(mesh_, invariant) + " (type " +
                     typeToString(e.ins[0]->type, &mesh_) + ")",
                 hint);
  }

  void eqn(Scope &s, Eqn e) {
    for (Value *&v : e.ins) v = resolve(s, v);
    switch (rules::rulesOf(e.prim).variance) {
    case VarianceRule::Invariant:
      setOut(e, 0);
      constants_.insert(e.outs.begin(), e.outs.end());
      return emit(s, std::move(e));
    case VarianceRule::Sharded:  // each device's block of a file: a constant to autodiff too
      setOut(e, e.has("spec") ? e.specsParam("spec")[0].axes() : 0);
      constants_.insert(e.outs.begin(), e.outs.end());
      return emit(s, std::move(e));
    case VarianceRule::SameAsOperands: return sameAsOperands(s, e);
    case VarianceRule::UserPsum: return userPsum(s, e);
    case VarianceRule::VaryingToInvariant: return varyingToInvariant(s, e);
    case VarianceRule::MaxMin: return maxMin(s, e);
    case VarianceRule::InvariantToVarying: return invariantToVarying(s, e);
    case VarianceRule::InvariantCast:  // (made after this pass; kept as typed if met again)
      setOut(e, e.ins[0]->type.vary & ~axesParam(e));
      return emit(s, std::move(e));
    case VarianceRule::FromRoot: return fromRoot(s, e);
    case VarianceRule::VaryingToVarying: {
      AxisSet target = e.ins[0]->type.vary | axesParam(e);
      e.ins[0] = require(s, e, e.ins[0], target);
      setOut(e, target);
      return emit(s, std::move(e));
    }
    case VarianceRule::AxisIndex: setOut(e, axesParam(e)); return emit(s, std::move(e));
    case VarianceRule::Loop: return loop(s, e);
    case VarianceRule::While: return whileLoop(s, e);
    case VarianceRule::Cond: return cond(s, e);
    case VarianceRule::Effect: return emit(s, std::move(e));
    case VarianceRule::Transform: return transform(s, e);
    case VarianceRule::Shmap:
    case VarianceRule::Call:
      std::fprintf(stderr, "shmapc internal error: %s inside a shmap body at variance inference\n",
                   primName(e.prim));
      std::abort();
    }
  }

  void sameAsOperands(Scope &s, Eqn &e) {
    AxisSet u = 0;
    bool allConstant = true;
    for (Value *v : e.ins) {
      u |= v->type.vary;
      allConstant &= constants_.count(v) != 0;
    }
    if (allConstant) constants_.insert(e.outs.begin(), e.outs.end());
    for (Value *&v : e.ins) v = require(s, e, v, u);
    setOut(e, u);
    emit(s, std::move(e));
  }

  // psum(x, A) = psum2(pbroadcast(x, A \ vary(x)), A); since psum2 of n identical copies is
  // n * x, the invariant axes become a multiplication and no communication.
  void userPsum(Scope &s, Eqn &e) {
    AxisSet a = axesParam(e), v = e.ins[0]->type.vary;
    AxisSet varying = a & v, invariant = a & ~v;
    if (invariant && !auto_)
      invariantOperand(e, invariant,
                       "in explicit mode write psum2(pbroadcast(x, " + axesSource(mesh_, invariant) +
                           "), ...) to sum the copies, or leave out the axes it does not vary over");
    Value *result = e.outs[0];
    result->type.vary = v & ~a;
    if (!s.mutate) return;
    Value *cur = e.ins[0];
    if (varying) {
      Value *out = invariant ? s.f.newValue(result->type) : result;
      emit(s, rules::makeEqn(s.f, Prim::Psum2, {cur}, {{"axes", axesIn(e, varying)}}, e.loc, {.into = out}));
      cur = out;
    }
    if (invariant) {
      int64_t n = 1;
      for (int64_t axis : axisList(invariant)) n *= mesh_.sizes[axis];
      const Type scalar{cur->type.dtype, {}, 0};
      emit(s, rules::makeEqn(s.f, Prim::Constant, {}, {{"value", std::vector<double>{(double)n}}}, e.loc,
                             {.declared = &scalar}));
      Value *c = s.out.back().outs[0];
      if (!cur->type.shape.empty()) {
        const Type full{cur->type.dtype, cur->type.shape, 0};
        emit(s, rules::makeEqn(s.f, Prim::BroadcastInDim, {c}, {{"broadcast_dimensions", std::vector<int64_t>{}}},
                               e.loc, {.declared = &full}));
        c = s.out.back().outs[0];
      }
      c = lift(s, c, cur->type.vary, e.loc);
      emit(s, rules::makeEqn(s.f, Prim::Mul, {cur, c}, {}, e.loc, {.into = result}));
    }
  }

  // psum2, all_gather_invariant: the operand must vary over the axes.
  void varyingToInvariant(Scope &s, Eqn &e) {
    AxisSet a = axesParam(e);
    AxisSet target = e.ins[0]->type.vary | a;
    e.ins[0] = require(s, e, e.ins[0], target);
    setOut(e, target & ~a);
    emit(s, std::move(e));
  }

  // broadcast and scatter_from read the root's operand only: where every device holds the
  // same, broadcast is the identity and scatter_from each device's own block (a pscatter),
  // with nothing to communicate. Otherwise the operand is lifted to vary over all the axes.
  void fromRoot(Scope &s, Eqn &e) {
    const AxisSet a = axesParam(e), v = e.ins[0]->type.vary;
    if (!(a & v)) {
      if (e.prim == Prim::Broadcast) return alias(s, e);
      e.prim = Prim::Pscatter;
      e.params.erase("root");
      setOut(e, v | a);
      return emit(s, std::move(e));
    }
    e.ins[0] = require(s, e, e.ins[0], v | a);
    setOut(e, e.prim == Prim::Broadcast ? v & ~a : v | a);
    emit(s, std::move(e));
  }

  // pmax/pmin over axes where every device holds the same value is the identity there.
  void maxMin(Scope &s, Eqn &e) {
    AxisSet a = axesParam(e), v = e.ins[0]->type.vary;
    if ((a & ~v) && !auto_)
      invariantOperand(e, a & ~v, "leave out the axes it does not vary over");
    if (!(a & v)) return alias(s, e);
    e.params["axes"] = axesIn(e, a & v);
    setOut(e, v & ~a);
    emit(s, std::move(e));
  }

  // pbroadcast, pscatter: the operand must be invariant over the axes.
  void invariantToVarying(Scope &s, Eqn &e) {
    AxisSet a = axesParam(e), v = e.ins[0]->type.vary;
    if ((a & v) && (!auto_ || e.prim == Prim::Pscatter))
      diags_.fatal(DiagId::VarianceCollective, e.loc,
                   std::string("'") + primName(e.prim) + "' needs an operand invariant over " +
                       axesSource(mesh_, a & v) + ", but " + valueName(e.ins[0]) +
                       " varies over it (type " + typeToString(e.ins[0]->type, &mesh_) + ")",
                   e.prim == Prim::Pscatter
                       ? "for a varying value use psum_scatter, or psum it first"
                       : "drop the pbroadcast: the value already varies over " +
                             axesSource(mesh_, a & v));
    setOut(e, v | a);
    if (e.prim == Prim::Pbroadcast && (a & v)) {
      // Already varying over some axes: pbroadcast only over the others.
      if (!(a & ~v)) return alias(s, e);
      e.params["axes"] = axesIn(e, a & ~v);
    }
    emit(s, std::move(e));
  }

  void loop(Scope &s, Eqn &e) {
    Func &body = *e.bodies[0];
    size_t consts = (size_t)e.intParam("num_consts");
    std::vector<AxisSet> carries;
    for (size_t k = consts; k < e.ins.size(); ++k) carries.push_back(e.ins[k]->type.vary);
    auto setParams = [&] {
      body.params[0]->type.vary = 0;
      for (size_t k = 0; k < consts; ++k) body.params[1 + k]->type.vary = e.ins[k]->type.vary;
      for (size_t k = 0; k < carries.size(); ++k) body.params[1 + consts + k]->type.vary = carries[k];
    };
    // Sets only grow and are bounded by the mesh axes, so this terminates.
    for (bool changed = true; changed;) {
      setParams();
      std::vector<AxisSet> results = func(body, false, nullptr);
      changed = false;
      for (size_t k = 0; k < carries.size(); ++k) {
        AxisSet grown = carries[k] | results[k];
        changed |= grown != carries[k];
        carries[k] = grown;
      }
    }
    for (size_t k = 0; k < carries.size(); ++k)
      e.ins[consts + k] = require(s, e, e.ins[consts + k], carries[k]);
    setParams();
    if (s.mutate && auto_) {
      hoistConstLifts(s, e, body, consts);
      setParams();
    }
    if (s.mutate) func(body, true, &carries);
    for (size_t k = 0; k < carries.size(); ++k) e.outs[k]->type.vary = carries[k];
    emit(s, std::move(e));
  }

  // Like loop, with the predicate: where it varies, devices may run different numbers of
  // iterations, so every carry varies over its axes too; and a collective over those axes in
  // the loop would leave some devices waiting for partners that have stopped: an error.
  void whileLoop(Scope &s, Eqn &e) {
    Func &pred = *e.bodies[0], &body = *e.bodies[1];
    size_t consts = (size_t)e.intParam("num_consts");
    std::vector<AxisSet> carries;
    for (size_t k = consts; k < e.ins.size(); ++k) carries.push_back(e.ins[k]->type.vary);
    auto setParams = [&](Func &f) {
      for (size_t k = 0; k < consts; ++k) f.params[k]->type.vary = e.ins[k]->type.vary;
      for (size_t k = 0; k < carries.size(); ++k) f.params[consts + k]->type.vary = carries[k];
    };
    AxisSet predVary = 0;
    for (bool changed = true; changed;) {  // sets only grow: terminates
      setParams(pred);
      predVary = func(pred, false, nullptr)[0];
      setParams(body);
      std::vector<AxisSet> results = func(body, false, nullptr);
      changed = false;
      for (size_t k = 0; k < carries.size(); ++k) {
        AxisSet grown = carries[k] | results[k] | predVary;
        changed |= grown != carries[k];
        carries[k] = grown;
      }
    }
    if (predVary && (rules::communicatesOver(pred, predVary) || rules::communicatesOver(body, predVary)))
      diags_.fatal(DiagId::WhileVaryingPredicate, e.loc,
                   "the condition of this while loop varies over " + axesSource(mesh_, predVary) +
                       " and the loop communicates over " + axesSource(mesh_, predVary) +
                       ": devices that stop early would leave the others waiting in a collective",
                   "make the condition the same on every device, e.g. reduce it with pmax over " +
                       axesSource(mesh_, predVary) +
                       " so the loop runs until every device is done (masking finished devices' "
                       "updates with where), or move the collective out of the loop");
    for (size_t k = 0; k < carries.size(); ++k)
      e.ins[consts + k] = require(s, e, e.ins[consts + k], carries[k]);
    if (s.mutate) {
      std::vector<AxisSet> predTarget{predVary};
      setParams(pred);
      func(pred, true, &predTarget);
      setParams(body);
      func(body, true, &carries);
    }
    for (size_t k = 0; k < carries.size(); ++k) e.outs[k]->type.vary = carries[k];
    emit(s, std::move(e));
  }

  // A loop const that every use in the body lifts to the same variance is lifted once, before
  // the loop: its transpose then all-reduces the cotangent summed over the iterations once,
  // after the backward loop, not once per iteration.
  void hoistConstLifts(Scope &s, Eqn &e, Func &body, size_t consts) {
    if (consts == 0) return;  // no const to hoist: spare the extra pass over the body
    std::map<const Value *, std::vector<AxisSet>> uses;
    for (size_t k = 0; k < consts; ++k) {
      uses[body.params[1 + k]] = {};
      trackedRoot_[body.params[1 + k]] = body.params[1 + k];
    }
    tracked_ = &uses;
    func(body, false, nullptr);
    tracked_ = nullptr;
    trackedRoot_.clear();
    for (size_t k = 0; k < consts; ++k) {
      const Value *p = body.params[1 + k];
      size_t occurrences = usesThroughReshapes(body, p);
      const std::vector<AxisSet> &targets = uses[p];
      if (targets.empty() || targets.size() != occurrences) continue;  // some use not lifted
      AxisSet t = targets[0];
      if (t == p->type.vary || std::count(targets.begin(), targets.end(), t) != (long)targets.size())
        continue;
      e.ins[k] = require(s, e, e.ins[k], t);
    }
  }

  // How many operands and results of `body` read `v`, counting a reshape or broadcast of it
  // by the uses of its result.
  static size_t usesThroughReshapes(const Func &body, const Value *v) {
    size_t n = std::count(body.results.begin(), body.results.end(), v);
    for (const Eqn &q : body.eqns)
      for (const Value *in : q.ins)
        if (in == v) n += changesOnlyShape(q.prim) ? usesThroughReshapes(body, q.outs[0]) : 1;
    return n;
  }

  void cond(Scope &s, Eqn &e) {
    std::vector<AxisSet> outs(e.outs.size(), e.ins[0]->type.vary);
    auto setParams = [&](Func &branch) {
      for (size_t k = 0; k < branch.params.size(); ++k)
        branch.params[k]->type.vary = e.ins[1 + k]->type.vary;
    };
    for (Func *branch : e.bodies) {
      setParams(*branch);
      std::vector<AxisSet> results = func(*branch, false, nullptr);
      for (size_t k = 0; k < outs.size(); ++k) outs[k] |= results[k];
    }
    if (s.mutate)
      for (Func *branch : e.bodies) {
        setParams(*branch);
        func(*branch, true, &outs);
      }
    for (size_t k = 0; k < outs.size(); ++k) e.outs[k]->type.vary = outs[k];
    emit(s, std::move(e));
  }

  // jvp / vjp applied in device code (grad inside a shmap body): the traced function is typed
  // like a call, its params varying like the primal operands, and the differentiate pass then
  // differentiates the typed trace. A tangent varies like its primal and a cotangent like its
  // result (where they disagree, both are lifted to the union); a cotangent of a param varies
  // like the param: an invariant param's cotangent is invariant, because the transpose of the
  // pbroadcast that made it varying inside the function is a psum2.
  void transform(Scope &s, Eqn &e) {
    Func &f = *e.bodies[0];
    size_t n = f.params.size();
    bool isJvp = e.prim == Prim::Jvp;
    std::vector<AxisSet> params(n);
    for (size_t k = 0; k < n; ++k) {
      params[k] = e.ins[k]->type.vary;
      if (isJvp) params[k] |= e.ins[n + k]->type.vary;
    }
    auto setParams = [&] {
      for (size_t k = 0; k < n; ++k) f.params[k]->type.vary = params[k];
    };
    setParams();
    std::vector<AxisSet> results = func(f, false, nullptr);
    if (!isJvp)
      for (size_t k = 0; k < results.size(); ++k) results[k] |= e.ins[n + k]->type.vary;
    for (size_t k = 0; k < n; ++k) e.ins[k] = require(s, e, e.ins[k], params[k]);
    for (size_t k = n; k < e.ins.size(); ++k)
      e.ins[k] = require(s, e, e.ins[k], isJvp ? params[k - n] : results[k - n]);
    setParams();
    if (s.mutate) func(f, true, &results);
    size_t next = 0;
    if (isJvp || e.intParam("with_value"))
      for (AxisSet r : results) e.outs[next++]->type.vary = r;
    if (isJvp)
      for (AxisSet r : results) e.outs[next++]->type.vary = r;
    else
      for (int64_t w : e.intsParam("wrt")) e.outs[next++]->type.vary = params[w];
    emit(s, std::move(e));
  }

  Diagnostics &diags_;
  const Mesh &mesh_;
  bool auto_;
  std::set<const Value *> constants_;  // values computed from constants alone
  // While set, every require() of a key records its target (hoistConstLifts).
  std::map<const Value *, std::vector<AxisSet>> *tracked_ = nullptr;
  std::map<const Value *, const Value *> trackedRoot_;  // a tracked const, or a reshape of one
};

} // namespace

bool retypeWithParams(ir::Func &f, const std::vector<ir::AxisSet> &paramVary,
                      const SourceManager &sources) {
  std::ostringstream discarded;  // a rule that cannot hold is a "no", not a user error
  Diagnostics quiet(sources, discarded);
  try {
    VarianceInference(quiet, *f.mesh, true).retype(f, paramVary);
    return true;
  } catch (const CompileError &) {
    return false;
  }
}

// Without variance types (check_vma=false) no while predicate is known to be the same on
// every device, so a while loop may not communicate at all.
static void refuseCommunicatingWhiles(const Func &f, Diagnostics &diags) {
  for (const Eqn &e : f.eqns) {
    if (e.prim == Prim::While && rules::communicatesOver(e))
      diags.fatal(DiagId::WhileVaryingPredicate, e.loc,
                  "a while loop that communicates in a shmap body with check_vma=false: nothing "
                  "shows that its condition is the same on every device, and devices that stop "
                  "early would leave the others waiting in a collective",
                  "turn check_vma on (the default) so that the condition's variance is checked, "
                  "or move the collective out of the loop");
    for (const Func *b : e.bodies) refuseCommunicatingWhiles(*b, diags);
  }
}

void insertPbroadcasts(ir::Module &m, Diagnostics &diags) {
  std::set<Func *> done;  // a body shared by several call sites is typed once
  for (auto &f : m.funcs) {
    if (f->mesh) continue;  // host functions hold the shmap equations
    for (Eqn &e : f->eqns) {
      if (e.prim != Prim::Shmap) continue;
      Func &body = *e.bodies[0];
      if (!done.insert(&body).second) continue;
      if (!body.checkVma) {
        refuseCommunicatingWhiles(body, diags);
        continue;
      }
      VarianceInference(diags, *body.mesh, body.autoPbroadcast)
          .shmapBody(body, e.specsParam("in_specs"), e.specsParam("out_specs"));
    }
  }
}

} // namespace shmapc::passes
