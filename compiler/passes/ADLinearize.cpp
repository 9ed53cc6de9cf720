// The linearizer: applies each primitive's jvp rule (compiler/prims/) to an equation already
// emitted as primal, taping the linear tangent equations (vjp) or emitting them (jvp).
// Coefficients such as cos(x) for sin are primal computations (residuals); only the
// multiplication by the tangent is linear.
#include "passes/AD.h"
#include "prims/Rules.h"

namespace shmapc::passes::ad {

Value *Linearizer::newTangent(const Type &t) {
  Value *v = b.f.newValue(t);
  tangentValues.insert(v);
  return v;
}

Value *Linearizer::linear(Prim p, std::vector<Value *> ins, const Type &out,
                          std::map<std::string, Attr> params) {
  if (emitTangents) {
    Value *v = b.emit(p, ins, out, params);
    tangentValues.insert(v);
    return v;
  }
  Value *v = newTangent(out);
  LinearEqn le;
  le.e = Eqn{p, ins, {v}, std::move(params), {}, b.loc};
  for (Value *in : ins) le.linear.push_back(tangentValues.count(in) != 0);
  tape.push_back(std::move(le));
  return v;
}

Value *Linearizer::addTangents(Value *x, Value *y) {
  if (!x) return y;
  if (!y) return x;
  return linear(Prim::Add, {x, y}, x->type);
}

void Linearizer::rule(const Eqn &e) {
  b.loc = e.loc;
  std::vector<Value *> t;
  bool any = false;
  for (Value *v : e.ins) {
    t.push_back(isFloat(v->type.dtype) ? tangentOf(v) : nullptr);
    any |= t.back() != nullptr;
  }
  if (!any && e.prim != Prim::Shmap) return;
  Value *x = e.ins.empty() ? nullptr : e.ins[0];
  Value *y = e.outs.empty() ? nullptr : e.outs[0];
  JvpCtx c{*this, b, e, std::move(t), x, y, y ? y->type : x->type};
  prims::rulesOf(e.prim).jvp(c);
}

} // namespace shmapc::passes::ad
