// The linearizer: applies each primitive's jvp rule (compiler/prims/) to an equation already
// emitted as primal, taping the linear tangent equations (vjp) or emitting them (jvp).
// Coefficients such as cos(x) for sin are primal computations (residuals); only the
// multiplication by the tangent is linear.
#include "passes/ad/AD.h"
#include "rules/Rules.h"

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
  // (typed by the rules, as Builder::emit's equations are: the tape's equations are transposed,
  // never emitted as they are, but a wrong type here would be a wrong transpose)
  le.e = rules::makeEqn(b.f, p, ins, std::move(params), b.loc, {.declared = &out, .into = v});
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
  rules::rulesOf(e.prim).jvp(c);
}

} // namespace shmapc::passes::ad
