// hoist-loop-reductions: in the backward bodies autodiff makes for shmaps, a gradient sum over
// devices (psum2) inside a loop whose result only accumulates into a loop carry is taken once,
// of the carry, after the loop.
//
// The transpose of a loop runs the iterations backwards and accumulates each const's cotangent
// in a carry. A weight read per iteration through a pbroadcast inside the loop (a slice
// `dynamic_slice(w, [l, ...])` of a stacked [L, ...] weight, a scan over it) has its
// cotangent summed over devices in every iteration:
//     w_ct' = w_ct + dynamic_update_slice(zeros, psum2[A](g), l, ...)
// L all-reduces of one slice each, where one of the accumulated [L, ...] array after the loop
// moves the same bytes. psum2 is linear, so when the carry's new value is a linear function F
// of the carry and of psum2 results s_j = psum2[A](g_j) (add, sub, neg, reshape, transpose,
// broadcast_in_dim, reduce_sum, convert, slice, dynamic_slice, dynamic_update_slice,
// concatenate, zeros, mul and div by a factor free of the sums), F(psum2 c, psum2 g_1, ...) =
// psum2 F(c, g_1, ...): the carry may accumulate the unreduced g_j (varying over A) and be
// summed once after the loop. The carry starts at zero (each device's share of the sum) and
// the sum after the loop is the carry's value, or, where the carry's initial value is not
// zero and the body only adds to it (c' = c + x), that value plus the sum. (F must be linear,
// not affine: a constant added in every iteration would be summed n times.)
//
// Only where it never adds bytes: the runtime's all-reduce of E bytes over a group of n
// devices moves (n-1)/n of E per device (the all-reduces' `comm` rule, prims/AllReduce.cpp), so over the same axes the bytes go as
// the array's. The rewrite is made where the carry has no more bytes than the sums it replaces
// over all iterations (trip count x the bytes of the g_j): a slice of an [L, ...] weight per
// iteration of L gives the same bytes in 1 call instead of L; a weight read whole gives 1/L of
// the bytes. It is made only where nothing else in the body reads the carry or the values
// between the sums and the carry (they hold summed values), and the sums are all over the
// same axes.
//
// Variance: g_j varies over A (psum2's rule) and s_j does not, so every value of F varies over
// A in addition to what it did: the carry's param, result and initial value (a zero lifted by
// pbroadcast), and the zeros and factors F reads (lifted where they are read). The psum2
// after the loop makes the loop's result invariant over A again, its type as before.
//
// Nested loops. Loops in a loop body are rewritten first, so a sum that leaves an inner loop
// may then leave the outer one; the sum after the inner loop counts, for the rule, the bytes
// of the sums it replaced. A carry whose sums would add bytes after its loop alone (a long
// loop's checkpoint block: its carry is the whole gradient, a block sums a few slices) is
// rewritten anyway if the loop around it then takes that sum out too, so that the one sum
// after both is no larger than all the slices' were; otherwise it is put back as it was
// (Snapshot). Likewise in the backward body's own equations: such a sum after a loop is kept
// if it is then added up, by linear equations, with the body's other sums into one value no
// larger than they all were, and that value is summed once (a gradient summed by slices, one
// per iteration and the last after the loop).
//
// Loops under a conditional and while loops (never transposed) are left, and so is anything
// outside backward bodies: forward code communicates as its author wrote it. sink-reductions
// and combine-reductions run next: the sums after the loops are combined with the body's
// others.
#include "passes/reductions/HoistLoopReductions.h"
#include "passes/reductions/Reductions.h"
#include "rules/Rules.h"

#include <map>
#include <set>
#include <tuple>

namespace shmapc::passes {

namespace {

using namespace ir;
using namespace hoist;

// f's equations without those in `dropped`, each other one i with before[i] spliced in ahead
// of it and after[i] behind it.
void splice(Func &f, const std::set<size_t> &dropped, std::map<size_t, std::vector<Eqn>> &before,
            std::map<size_t, std::vector<Eqn>> after) {
  std::vector<Eqn> eqns;
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    if (dropped.count(i)) continue;
    if (auto l = before.find(i); l != before.end())
      for (Eqn &e : l->second) eqns.push_back(std::move(e));
    eqns.push_back(std::move(f.eqns[i]));
    if (auto a = after.find(i); a != after.end())
      for (Eqn &e : a->second) eqns.push_back(std::move(e));
  }
  f.eqns = std::move(eqns);
}

Value *zeros(Func &f, const Type &t, Loc loc, std::vector<Eqn> &into) {
  const Type invariant{t.dtype, t.shape, 0};
  into.push_back(rules::makeEqn(f, Prim::Constant, {}, {{"value", std::vector<double>{0.0}}}, loc,
                                {.declared = &invariant}));
  if (t.vary == 0) return into.back().outs[0];
  into.push_back(rules::makeEqn(f, Prim::Pbroadcast, {into.back().outs[0]}, {{"axes", axisList(t.vary)}}, loc));
  return into.back().outs[0];
}

// Makes the plan's chain (in b) take the psum2s' operands instead of their results
// (`replace`): everything between the sums and the carry `p` (or the end) now varies over the
// sums' axes too, and the zeros and factors it reads are lifted (`lifts`, before the equation
// reading them) to vary as it does.
void rewriteChain(Func &b, const Plan &plan, const Value *p, const std::map<Value *, Value *> &replace,
                  std::map<size_t, std::vector<Eqn>> &lifts) {
  std::set<const Value *> linear;
  if (p) linear.insert(p);
  for (size_t i : plan.roots) linear.insert(b.eqns[i].ins[0]);
  for (const auto &[i, _] : plan.chain) {
    b.eqns[i].outs[0]->type.vary |= plan.over;
    linear.insert(b.eqns[i].outs[0]);
  }
  for (const auto &[i, operands] : plan.chain) {
    Eqn &e = b.eqns[i];
    const AxisSet vary = e.outs[0]->type.vary;
    for (size_t pos : operands.linear)
      if (auto r = replace.find(e.ins[pos]); r != replace.end()) e.ins[pos] = r->second;
    for (const std::vector<size_t> *list : {&operands.linear, &operands.scale})
      for (size_t pos : *list) {
        Value *&in = e.ins[pos];
        if (linear.count(in) || in->type.vary == vary) continue;
        // a zero or a factor, lifted to vary as the chain now does
        lifts[i].push_back(rules::makeEqn(b, Prim::Pbroadcast, {in}, {{"axes", axisList(vary & ~in->type.vary)}}, e.loc));
        in = lifts[i].back().outs[0];
      }
  }
}

// Rewrites the body of `loop` for the plans (the carries' sums out of it) and returns the
// equations that stand before the loop (the carries' zero initial values) and after it (the
// sums), which become the loop's results.
void rewrite(Func &f, Eqn &loop, const std::vector<Plan> &plans, const Uses &fu, std::vector<Eqn> &before,
             std::vector<Eqn> &after, std::vector<Value *> &oldInits, Replaced &replaced, std::vector<Value *> &made) {
  Func &b = *loop.bodies[0];
  const size_t C = (size_t)loop.intParam("num_consts");
  std::set<size_t> dropped;
  std::map<size_t, std::vector<Eqn>> lifts;  // zeros lifted before chain equation i
  std::map<Value *, Value *> replace;        // a dropped psum2's result -> its operand
  for (const Plan &plan : plans) {
    for (size_t i : plan.roots) {
      dropped.insert(i);
      replace[b.eqns[i].outs[0]] = b.eqns[i].ins[0];
    }
  }
  for (const Plan &plan : plans) {
    Value *p = b.params[1 + C + plan.carry];
    p->type.vary |= plan.over;
    rewriteChain(b, plan, p, replace, lifts);
    Value *&ret = b.results[plan.carry];
    if (auto r = replace.find(ret); r != replace.end()) ret = r->second;

    // In the loop's function: a zero initial value, the loop's result summed after it.
    Value *init = loop.ins[C + plan.carry], *old = loop.outs[plan.carry];
    Type varying = old->type;
    varying.vary |= plan.over;
    loop.ins[C + plan.carry] = zeros(f, varying, loop.loc, before);
    Value *acc = loop.outs[plan.carry] = f.newValue(varying, old->hint);
    std::map<std::string, Attr> params = plan.params;
    Value *sum = old;
    if (isZero(fu, f, init)) {
      oldInits.push_back(init);
      after.push_back(rules::makeEqn(f, Prim::Psum2, {acc}, params, plan.loc, {.into = old}));
    } else {
      after.push_back(rules::makeEqn(f, Prim::Psum2, {acc}, params, plan.loc));
      sum = after.back().outs[0];
      after.push_back(rules::makeEqn(f, Prim::Add, {init, sum}, {}, plan.loc, {.into = old}));
    }
    replaced[sum] = plan.replaces;
    made.push_back(sum);
  }
  splice(b, dropped, lifts, {});
}

// Drops the equations that computed the zeros in `values` (constants, their lifts and
// broadcasts) where nothing reads them any more.
void dropUnreadZeros(Func &f, std::vector<Value *> values) {
  std::set<size_t> gone;
  const Uses u(f);
  auto unread = [&](const Value *v) {
    if (u.resultReads.count(v)) return false;
    auto r = u.reads.find(v);
    if (r != u.reads.end())
      for (size_t i : r->second)
        if (!gone.count(i)) return false;
    return true;
  };
  while (!values.empty()) {
    Value *v = values.back();
    values.pop_back();
    auto d = u.def.find(v);
    if (d == u.def.end() || !unread(v) || gone.count(d->second)) continue;
    const Eqn &e = f.eqns[d->second];
    if (e.outs.size() != 1) continue;
    gone.insert(d->second);
    if (e.prim != Prim::Constant) values.push_back(e.ins[0]);
  }
  if (gone.empty()) return;
  std::vector<Eqn> eqns;
  for (size_t i = 0; i < f.eqns.size(); ++i)
    if (!gone.count(i)) eqns.push_back(std::move(f.eqns[i]));
  f.eqns = std::move(eqns);
}

struct Context {
  Replaced replaced;
  std::set<const Func *> shared;  // loop bodies of more than one loop: left as they are
};

// The plans for the carries of loop equation i of f whose sums may leave it. `larger`: the
// carries whose sums could leave it but would then sum more bytes.
std::vector<Plan> planLoop(Func &f, size_t i, const Uses &fu, const Context &ctx, std::vector<size_t> *larger) {
  const Eqn &loop = f.eqns[i];
  const Func &b = *loop.bodies[0];
  if (ctx.shared.count(&b)) return {};
  const Uses bu(b);
  const size_t C = (size_t)loop.intParam("num_consts");
  std::vector<Plan> plans;
  std::set<size_t> taken;  // each psum2 moves with one carry
  for (size_t k = 0; k < loop.outs.size(); ++k) {
    Plan plan;
    const Verdict v = planCarry(loop, b, bu, k, isZero(fu, f, loop.ins[C + k]), ctx.replaced, plan);
    if (v == Verdict::MoreBytes && larger) larger->push_back(k);
    if (v != Verdict::Yes) continue;
    bool shared = false;
    for (size_t r : plan.roots) shared = shared || taken.count(r);
    if (shared) continue;
    taken.insert(plan.roots.begin(), plan.roots.end());
    plans.push_back(std::move(plan));
  }
  return plans;
}

// Makes the plans (per loop equation of f); returns the psum2 results put after the loops.
std::vector<Value *> apply(Func &f, std::map<size_t, std::vector<Plan>> &plans, const Uses &fu, Context &ctx) {
  std::map<size_t, std::pair<std::vector<Eqn>, std::vector<Eqn>>> around;  // loop -> before, after
  std::vector<Value *> oldInits;  // the zeros the carries started at, perhaps unread now
  std::vector<Value *> made;
  for (auto &[i, list] : plans) {
    if (list.empty()) continue;
    auto &[before, after] = around[i];
    rewrite(f, f.eqns[i], list, fu, before, after, oldInits, ctx.replaced, made);
  }
  if (around.empty()) return made;
  std::vector<Eqn> eqns;
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    auto a = around.find(i);
    if (a != around.end())
      for (Eqn &e : a->second.first) eqns.push_back(std::move(e));
    eqns.push_back(std::move(f.eqns[i]));
    if (a != around.end())
      for (Eqn &e : a->second.second) eqns.push_back(std::move(e));
  }
  f.eqns = std::move(eqns);
  dropUnreadZeros(f, oldInits);
  return made;
}

// A function and the bodies nested in it as they stand, to be put back.
class Snapshot {
public:
  explicit Snapshot(Func &f) { save(f); }
  void restore() {
    for (auto &[f, eqns, results] : funcs_) {
      f->eqns = eqns;
      f->results = results;
    }
    for (auto &[v, t] : types_) v->type = t;
  }

private:
  void save(Func &f) {
    funcs_.push_back({&f, f.eqns, f.results});
    for (Value &v : f.values) types_.push_back({&v, v.type});
    for (const Eqn &e : f.eqns)
      for (Func *b : e.bodies) save(*b);
  }
  std::vector<std::tuple<Func *, std::vector<Eqn>, std::vector<Value *>>> funcs_;
  std::vector<std::pair<Value *, Type>> types_;
};

// A carry of a loop nested in f whose sums would sum more bytes after that loop alone: the
// loop's body and the carry.
struct Deferred {
  const Func *body;
  size_t carry;
};

// Makes the deferred carries' plans of b's loops though their sums then move more bytes after
// them; returns the psum2 results put after the loops.
std::vector<Value *> force(Func &b, const std::vector<Deferred> &deferred, Context &ctx) {
  std::map<size_t, std::vector<Plan>> forced;
  const Uses bu(b);
  for (const Deferred &d : deferred)
    for (size_t j = 0; j < b.eqns.size(); ++j) {
      const Eqn &loop = b.eqns[j];
      if (loop.prim != Prim::Loop || loop.bodies[0] != d.body) continue;
      const Uses lu(*loop.bodies[0]);
      const size_t C = (size_t)loop.intParam("num_consts");
      Plan plan;
      if (planCarry(loop, *loop.bodies[0], lu, d.carry, isZero(bu, b, loop.ins[C + d.carry]), ctx.replaced, plan) ==
          Verdict::MoreBytes)
        forced[j].push_back(std::move(plan));
    }
  return apply(b, forced, bu, ctx);
}

// Moves the sums out of f's loops (and theirs); returns the carries of f's loops whose sums
// could leave them only at the price of more bytes. Those may still leave both a loop and
// the one around it for no more bytes (a long loop's blocks: each block's sum after it is of
// the whole carry, once per block, but one after the outer loop sums what all the blocks'
// slices did), so f's caller tries that: it makes them, and keeps them only if the loop
// around f takes every sum they put after the loops out of itself.
std::vector<Deferred> hoistIn(Func &f, Context &ctx) {
  std::map<size_t, std::vector<Plan>> plans;
  std::vector<Deferred> deferred;
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    if (f.eqns[i].prim != Prim::Loop) continue;
    Func &b = *f.eqns[i].bodies[0];
    // Inner loops first: a sum they leave after them may then leave this loop.
    std::vector<Deferred> inner = hoistIn(b, ctx);
    const Uses fu(f);
    std::vector<size_t> larger;
    plans[i] = planLoop(f, i, fu, ctx, &larger);
    if (!inner.empty()) {
      Snapshot before(b);
      const std::vector<Value *> made = force(b, inner, ctx);
      std::vector<size_t> larger2;
      std::vector<Plan> through = planLoop(f, i, Uses(f), ctx, &larger2);
      std::set<const Value *> taken;
      for (const Plan &plan : through)
        for (size_t r : plan.roots) taken.insert(b.eqns[r].outs[0]);
      bool all = !made.empty();
      for (const Value *v : made) all = all && taken.count(v);
      if (all) {
        plans[i] = std::move(through);
        larger = std::move(larger2);
      } else {
        before.restore();
      }
    }
    for (size_t k : larger) deferred.push_back({&b, k});
  }
  const Uses fu(f);
  apply(f, plans, fu, ctx);
  return deferred;
}

// The last value of f that the sum `v` may be taken at as one with others: v's only reader's
// result while that reader is linear in v, and so on.
Value *chainEnd(const Func &f, const Uses &u, Value *v) {
  for (;;) {
    auto r = u.reads.find(v);
    if (r == u.reads.end() || r->second.size() != 1 || u.resultReads.count(v)) return v;
    const Eqn &e = f.eqns[r->second[0]];
    Operands o;
    if (!linearOperands(e, o, [&](const Value *x) { return x == v; })) return v;
    bool linear = false;
    for (size_t pos : o.linear) linear = linear || e.ins[pos] == v;
    if (!linear) return v;
    v = e.outs[0];
  }
}

// In a backward body's own equations: the carries of its loops whose sums would move more
// bytes after the loop (a weight's slices summed in it, a few more slices summed after it)
// may still leave it if, after the loop, the sum is added up with the others into one value
// (the weight's gradient) no larger than what they all summed: that value is summed once
// instead. Made only where every such sum is.
void sumAtEnds(Func &f, const std::vector<Deferred> &deferred, Context &ctx) {
  if (deferred.empty()) return;
  Snapshot before(f);
  const std::vector<Value *> made = force(f, deferred, ctx);
  const Uses u(f);
  std::vector<std::pair<Value *, Plan>> ends;
  std::set<const Value *> taken;
  for (Value *v : made) {
    if (taken.count(v)) continue;
    Value *end = chainEnd(f, u, v);
    Plan plan;
    bool ok = end != v && planEnd(f, u, end, ctx.replaced, plan) == Verdict::Yes;
    for (size_t r : plan.roots) ok = ok && taken.insert(f.eqns[r].outs[0]).second;
    if (!ok || !taken.count(v)) {
      before.restore();
      return;
    }
    ends.push_back({end, std::move(plan)});
  }
  std::set<size_t> dropped;
  std::map<size_t, std::vector<Eqn>> lifts, after;  // before / after equation i
  std::map<Value *, Value *> replace;               // a dropped psum2's result -> its operand
  for (auto &[end, plan] : ends)
    for (size_t i : plan.roots) {
      dropped.insert(i);
      replace[f.eqns[i].outs[0]] = f.eqns[i].ins[0];
    }
  for (auto &[end, plan] : ends) {
    // The chain ends in a new value, varying as the chain does; its sum is `end`.
    const size_t d = u.def.at(end);
    Value *partial = f.eqns[d].outs[0] = f.newValue(end->type, end->hint);
    rewriteChain(f, plan, nullptr, replace, lifts);
    after[d].push_back(rules::makeEqn(f, Prim::Psum2, {partial}, plan.params, plan.loc, {.into = end}));
  }
  splice(f, dropped, lifts, std::move(after));
}

} // namespace

void hoistLoopReductions(Module &m, Diagnostics &) {
  Context ctx;
  // (a loop body shared by several loops keeps its carries' types: rewriting one loop's
  // carries would change the others')
  std::map<const Func *, int> loopsOf;
  for (auto &f : m.funcs)
    for (const Eqn &e : f->eqns)
      if (e.prim == Prim::Loop) ++loopsOf[e.bodies[0]];
  for (auto &[body, n] : loopsOf)
    if (n > 1) ctx.shared.insert(body);
  for (auto &f : m.funcs)
    if (f->isBackward && f->checkVma && f->mesh) {
      sumAtEnds(*f, hoistIn(*f, ctx), ctx);
    }
}

} // namespace shmapc::passes
