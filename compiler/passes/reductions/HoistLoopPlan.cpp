// hoist-loop-reductions' analysis: the linear chain from a loop carry's new value back to the
// psum2s it accumulates, and whether taking them after the loop keeps to the pass's rules
// (HoistLoopReductions.cpp's header comment).
#include "passes/reductions/HoistLoopReductions.h"

namespace shmapc::passes::hoist {

using namespace ir;

namespace {

bool isZeroConstant(const Eqn &e) {
  if (e.prim != Prim::Constant || !e.has("value")) return false;
  for (double v : e.doublesParam("value"))
    if (v != 0.0) return false;
  return true;
}

} // namespace

bool linearOperands(const Eqn &e, Operands &o, const std::function<bool(const Value *)> &fromSums) {
  o = Operands{};
  if (e.outs.size() != 1 || !e.bodies.empty() || !isFloat(e.outs[0]->type.dtype)) return false;
  switch (e.prim) {
  case Prim::Add:
  case Prim::Sub:
  case Prim::DynamicUpdateSlice:
    o.linear = {0, 1};
    return true;
  case Prim::Neg:
  case Prim::Reshape:
  case Prim::Transpose:
  case Prim::BroadcastInDim:
  case Prim::ReduceSum:
  case Prim::Slice:
  case Prim::DynamicSlice:
    o.linear = {0};
    return true;
  case Prim::Convert:
    o.linear = {0};
    return isFloat(e.ins[0]->type.dtype);
  case Prim::Concatenate:
    for (size_t k = 0; k < e.ins.size(); ++k) o.linear.push_back(k);
    return true;
  case Prim::Mul:
  case Prim::Div: {
    const bool a = fromSums(e.ins[0]), b = fromSums(e.ins[1]);
    if (a == b || (e.prim == Prim::Div && !a)) return false;
    o.linear = {a ? size_t(0) : size_t(1)};
    o.scale = {a ? size_t(1) : size_t(0)};
    return true;
  }
  default:
    return false;
  }
}

Uses::Uses(const Func &f) {
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    for (const Value *v : f.eqns[i].ins) reads[v].push_back(i);
    for (const Value *v : f.eqns[i].outs) def[v] = i;
  }
  for (const Value *v : f.results) ++resultReads[v];
}

bool isZero(const Uses &u, const Func &f, const Value *v) {
  for (;;) {
    auto d = u.def.find(v);
    if (d == u.def.end()) return false;
    const Eqn &e = f.eqns[d->second];
    if (isZeroConstant(e)) return true;
    if ((e.prim != Prim::Pbroadcast && e.prim != Prim::BroadcastInDim && e.prim != Prim::Reshape) || e.ins.size() != 1)
      return false;
    v = e.ins[0];
  }
}

namespace {

int64_t bytesSummed(const Replaced &replaced, const Eqn &psum2) {
  auto r = replaced.find(psum2.outs[0]);
  return r != replaced.end() ? r->second : psum2.ins[0]->type.byteSize();
}

// The linear chain from `ret` back to the psum2s (roots) it sums, through the carry `p` (or
// none), with what reads them checked: nothing but the chain reads p, the sums or the chain's
// values; `ret` is read `retReads` times as a result and by no equation, or, with retReads
// < 0, by anything. False where there is no such chain.
bool walkChain(const Func &b, const Uses &u, Value *ret, const Value *p, int retReads, Plan &plan) {
  std::set<const Value *> fromSums;  // computed from the carry or a psum2
  if (p) fromSums.insert(p);
  for (const Eqn &e : b.eqns) {
    bool from = e.prim == Prim::Psum2;
    for (const Value *v : e.ins) from = from || fromSums.count(v);
    if (from) fromSums.insert(e.outs.begin(), e.outs.end());
  }
  std::set<const Value *> seen;
  std::vector<Value *> work = {ret};
  Operands o;
  while (!work.empty()) {
    Value *v = work.back();
    work.pop_back();
    if (!seen.insert(v).second || v == p) continue;
    auto d = u.def.find(v);
    if (d == u.def.end()) return false;  // another param: not linear in the carry and sums
    const Eqn &e = b.eqns[d->second];
    if (e.prim == Prim::Psum2 && e.ins.size() == 1 && e.outs.size() == 1 && !e.has("combined")) {
      const std::vector<int64_t> &axes = e.intsParam("axes");
      if (plan.roots.empty()) {
        plan.axes = axes;
        plan.params = e.params;
        plan.loc = e.loc;
        for (int64_t a : axes) plan.over |= AxisSet(1) << a;
      } else if (axes != plan.axes) {
        return false;
      }
      if (e.ins[0]->type.vary != (e.outs[0]->type.vary | plan.over)) return false;
      plan.roots.insert(d->second);
      continue;
    }
    if (isZero(u, b, v)) continue;  // lifted where it is read
    if (!linearOperands(e, o, [&](const Value *x) { return fromSums.count(x) != 0; })) return false;
    for (size_t pos : o.linear) work.push_back(e.ins[pos]);
    plan.chain[d->second] = std::move(o);
  }
  if (plan.roots.empty()) return false;

  auto readOnlyByChain = [&](const Value *v) {
    auto r = u.reads.find(v);
    if (r == u.reads.end()) return true;
    for (size_t i : r->second)
      if (!plan.chain.count(i)) return false;
    return true;
  };
  auto resultReads = [&](const Value *v) {
    auto r = u.resultReads.find(v);
    return r == u.resultReads.end() ? 0 : r->second;
  };
  auto retOk = [&](const Value *v) { return retReads < 0 || (!u.reads.count(v) && resultReads(v) == retReads); };
  if (p && (!readOnlyByChain(p) || resultReads(p) != 0 || (p->type.vary & plan.over))) return false;
  for (size_t i : plan.roots) {
    const Value *v = b.eqns[i].outs[0];
    if (v == ret ? !retOk(v) : (!readOnlyByChain(v) || resultReads(v) != 0)) return false;
  }
  for (const auto &[i, _] : plan.chain) {
    const Value *v = b.eqns[i].outs[0];
    if (v == ret ? !retOk(v) : (!readOnlyByChain(v) || resultReads(v) != 0)) return false;
    if (v->type.vary & plan.over) return false;  // (a chain value is a sum: invariant over A)
  }
  return true;
}

int64_t summedBytes(const Func &b, const Plan &plan, const Replaced &replaced) {
  int64_t summed = 0;
  for (size_t i : plan.roots) summed += bytesSummed(replaced, b.eqns[i]);
  return summed;
}

} // namespace

Verdict planCarry(const Eqn &loop, const Func &b, const Uses &u, size_t k, bool zeroInit, const Replaced &replaced,
                  Plan &plan) {
  const size_t C = (size_t)loop.intParam("num_consts");
  Value *p = b.params[1 + C + k], *ret = b.results[k];
  const int64_t trips = loop.intParam("hi") - loop.intParam("lo");
  if (!isFloat(p->type.dtype) || ret == p || trips < 1) return Verdict::No;
  plan = Plan{};
  plan.carry = k;
  if (!walkChain(b, u, ret, p, 1, plan)) return Verdict::No;

  // A carry not known to start at zero: only c' = c + x, x free of c, is its initial value
  // plus the sum after the loop.
  if (!zeroInit) {
    auto d = u.def.find(ret);
    if (d == u.def.end()) return Verdict::No;
    const Eqn &add = b.eqns[d->second];
    if (add.prim != Prim::Add || (add.ins[0] == p) == (add.ins[1] == p)) return Verdict::No;
    const auto r = u.reads.find(p);
    if (r == u.reads.end() || r->second.size() != 1) return Verdict::No;
  }

  // Never more bytes: the carry's bytes against the sums' over all iterations.
  plan.replaces = trips * summedBytes(b, plan, replaced);
  return p->type.byteSize() <= plan.replaces ? Verdict::Yes : Verdict::MoreBytes;
}

Verdict planEnd(const Func &f, const Uses &u, Value *end, const Replaced &replaced, Plan &plan) {
  plan = Plan{};
  if (!isFloat(end->type.dtype) || !walkChain(f, u, end, nullptr, -1, plan)) return Verdict::No;
  plan.replaces = summedBytes(f, plan, replaced);
  return end->type.byteSize() <= plan.replaces ? Verdict::Yes : Verdict::MoreBytes;
}

} // namespace shmapc::passes::hoist
