// The jvp rule of every primitive: given an equation already emitted as primal, emit its
// linear tangent equations (a switch over ir::Prim with no default). Coefficients such as
// cos(x) for sin are primal computations (residuals); only the multiplication by the tangent
// is linear.
#include "passes/AD.h"

#include <algorithm>

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

namespace {

bool differentiable(const Value *v) { return isFloat(v->type.dtype); }

std::vector<int64_t> keptDims(const Type &t, const std::vector<int64_t> &axes) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < t.rank(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(d);
  return kept;
}

} // namespace

void Linearizer::rule(const Eqn &e) {
  b.loc = e.loc;
  std::vector<Value *> t;
  bool any = false;
  for (Value *v : e.ins) {
    t.push_back(differentiable(v) ? tangentOf(v) : nullptr);
    any |= t.back() != nullptr;
  }
  if (!any && e.prim != Prim::Shmap) return;
  Value *x = e.ins.empty() ? nullptr : e.ins[0];
  Value *y = e.outs.empty() ? nullptr : e.outs[0];
  auto set = [&](Value *tv) {
    if (tv) tangent[y] = tv;
  };
  auto scaled = [&](Value *tv, Value *coef) {  // tv * coef, linear in tv
    return tv ? linear(Prim::Mul, {tv, b.liftTo(coef, tv->type.vary)}, tv->type) : nullptr;
  };
  auto zerosIfNull = [&](Value *tv, const Value *primal) { return tv ? tv : b.zerosLike(primal->type); };
  const Type &ty = y ? y->type : x->type;

  switch (e.prim) {
  case Prim::Constant:
  case Prim::Iota:
  case Prim::RandomNormal:
  case Prim::RandomUniform:
  case Prim::AxisIndex:
  case Prim::Not:
  case Prim::And:
  case Prim::Or:
  case Prim::Eq: case Prim::Ne: case Prim::Lt: case Prim::Le: case Prim::Gt: case Prim::Ge:
  case Prim::Floor: case Prim::FloorDiv:  // piecewise constant: zero gradient, as in JAX
    return;  // no tangent (integer/boolean results or constants)
  case Prim::Neg: return set(linear(Prim::Neg, {t[0]}, ty));
  case Prim::Exp: return set(scaled(t[0], y));
  case Prim::Log: return set(t[0] ? linear(Prim::Div, {t[0], x}, ty) : nullptr);
  case Prim::Sin: return set(scaled(t[0], b.unary(Prim::Cos, x)));
  case Prim::Cos: return set(scaled(t[0], b.unary(Prim::Neg, b.unary(Prim::Sin, x))));
  case Prim::Tanh: {  // 1 - y^2
    Value *d = b.binary(Prim::Sub, b.full(1, y->type), b.binary(Prim::Mul, y, y));
    return set(scaled(t[0], d));
  }
  case Prim::Sqrt: return set(t[0] ? linear(Prim::Div, {t[0], b.binary(Prim::Mul, y, b.full(2, y->type))}, ty) : nullptr);
  case Prim::Abs: {
    Value *pos = b.compare(Prim::Ge, x, b.zerosLike(x->type));
    return set(scaled(t[0], b.select(pos, b.full(1, x->type), b.full(-1, x->type))));
  }
  case Prim::Convert:
    if (!isFloat(ty.dtype)) return;
    return set(linear(Prim::Convert, {t[0]}, ty));
  case Prim::Add: return set(addTangents(t[0], t[1]));
  case Prim::Sub:
    if (!t[0]) return set(linear(Prim::Neg, {t[1]}, ty));
    return set(t[1] ? linear(Prim::Sub, {t[0], t[1]}, ty) : t[0]);
  case Prim::Mul: {
    Value *ta = t[0] ? linear(Prim::Mul, {t[0], e.ins[1]}, ty) : nullptr;
    Value *tb = t[1] ? linear(Prim::Mul, {e.ins[0], t[1]}, ty) : nullptr;
    return set(addTangents(ta, tb));
  }
  case Prim::Div: {  // ta / b - tb * (y / b)
    Value *ta = t[0] ? linear(Prim::Div, {t[0], e.ins[1]}, ty) : nullptr;
    if (!t[1]) return set(ta);
    Value *tb = linear(Prim::Neg, {scaled(t[1], b.binary(Prim::Div, y, e.ins[1]))}, ty);
    return set(addTangents(ta, tb));
  }
  case Prim::Rem: {  // a - b * floor(a / b): the b term's coefficient is -(a - y) / b
    if (!t[1]) return set(t[0]);
    Value *q = b.binary(Prim::Div, b.binary(Prim::Sub, e.ins[0], y), e.ins[1]);
    return set(addTangents(t[0], linear(Prim::Neg, {scaled(t[1], q)}, ty)));
  }
  case Prim::Max:
  case Prim::Min: {  // the tangent of the larger (smaller) operand; ties share it equally
    Value *wins = b.compare(e.prim == Prim::Max ? Prim::Gt : Prim::Lt, e.ins[0], e.ins[1]);
    Value *ties = b.compare(Prim::Eq, e.ins[0], e.ins[1]);
    Value *wa = b.select(wins, b.full(1, ty), b.select(ties, b.full(0.5, ty), b.zerosLike(ty)));
    Value *wb = b.binary(Prim::Sub, b.full(1, ty), wa);
    return set(addTangents(scaled(t[0], wa), scaled(t[1], wb)));
  }
  case Prim::Pow: {  // b * a^(b-1) and log(a) * a^b
    Value *ta = nullptr, *tb = nullptr;
    if (t[0]) {
      Value *bm1 = b.binary(Prim::Sub, e.ins[1], b.full(1, e.ins[1]->type));
      ta = scaled(t[0], b.binary(Prim::Mul, e.ins[1], b.binary(Prim::Pow, e.ins[0], bm1)));
    }
    if (t[1]) tb = scaled(t[1], b.binary(Prim::Mul, b.unary(Prim::Log, e.ins[0]), y));
    return set(addTangents(ta, tb));
  }
  case Prim::Select:
    if (!t[1] && !t[2]) return;
    return set(linear(Prim::Select, {e.ins[0], zerosIfNull(t[1], e.ins[1]), zerosIfNull(t[2], e.ins[2])}, ty));
  case Prim::BroadcastInDim:
  case Prim::Reshape:
  case Prim::Transpose:
  case Prim::ReduceSum:
  case Prim::Slice:
  case Prim::Psum:
  case Prim::Psum2:
  case Prim::Pbroadcast:
  case Prim::AllGather:
  case Prim::AllGatherInvariant:
  case Prim::Pscatter:
  case Prim::PsumScatter:
  case Prim::AllToAll:
  case Prim::Ppermute:
    return set(linear(e.prim, {t[0]}, ty, e.params));  // linear primitives
  case Prim::DynamicSlice: {
    std::vector<Value *> ins = {t[0]};
    ins.insert(ins.end(), e.ins.begin() + 1, e.ins.end());
    return set(t[0] ? linear(e.prim, ins, ty, e.params) : nullptr);
  }
  case Prim::DynamicUpdateSlice: {
    if (!t[0] && !t[1]) return;
    std::vector<Value *> ins = {zerosIfNull(t[0], e.ins[0]), zerosIfNull(t[1], e.ins[1])};
    ins.insert(ins.end(), e.ins.begin() + 2, e.ins.end());
    return set(linear(e.prim, ins, ty, e.params));
  }
  case Prim::Concatenate: {
    std::vector<Value *> ins;
    for (size_t i = 0; i < e.ins.size(); ++i) ins.push_back(zerosIfNull(t[i], e.ins[i]));
    return set(linear(e.prim, ins, ty, e.params));
  }
  case Prim::Matmul: {
    Value *ta = t[0] ? linear(Prim::Matmul, {t[0], e.ins[1]}, ty) : nullptr;
    Value *tb = t[1] ? linear(Prim::Matmul, {e.ins[0], t[1]}, ty) : nullptr;
    return set(addTangents(ta, tb));
  }
  case Prim::ReduceMax:
  case Prim::ReduceMin: {  // the tangent at the extremum; ties share it equally
    const auto &axes = e.intsParam("axes");
    Value *yb = b.broadcastTo(y, x->type, keptDims(x->type, axes));
    Value *mask = b.convert(b.compare(Prim::Eq, x, yb), x->type.dtype);
    Value *count = b.broadcastTo(b.reduceSum(mask, axes), x->type, keptDims(x->type, axes));
    Value *w = b.binary(Prim::Div, mask, count);
    return set(linear(Prim::ReduceSum, {scaled(t[0], w)}, ty, {{"axes", axes}}));
  }
  case Prim::Pmax:
  case Prim::Pmin: {  // the cotangent goes to the device holding the extremum; ties share it
    bool typed = b.f.checkVma;
    Prim sum = typed ? Prim::Psum2 : Prim::Psum;
    Value *yb = b.liftTo(y, x->type.vary);
    Value *mask = b.convert(b.compare(Prim::Eq, x, yb), x->type.dtype);
    Value *count = b.emit(sum, {mask}, y->type, {{"axes", e.params.at("axes")}});
    Value *w = b.binary(Prim::Div, mask, b.liftTo(count, x->type.vary));
    return set(linear(sum, {scaled(t[0], w)}, ty, {{"axes", e.params.at("axes")}}));
  }
  case Prim::Shmap: return shmapRule(e);
  case Prim::Loop: return loopRule(e);
  case Prim::Cond: return condRule(e);
  case Prim::Call:
  case Prim::Jvp:
  case Prim::Vjp:
  case Prim::Print:
    return;  // removed by flattening / differentiated before
  }
}

} // namespace shmapc::passes::ad
