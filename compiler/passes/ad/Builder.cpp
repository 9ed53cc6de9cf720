// Builder helpers, flattening (calls inlined, loop bodies and cond branches flattened) and
// dead equation removal for the differentiate pass.
#include "passes/ad/AD.h"
#include "passes/variance/Variance.h"
#include "rules/Rules.h"

#include <algorithm>
#include <numeric>

namespace shmapc::passes::ad {

Value *Builder::emit(Prim p, std::vector<Value *> ins, const Type &out,
                     std::map<std::string, Attr> params, const std::string &hint) {
  // Always on (a few comparisons per equation): `out` must be what the primitive's shape and
  // variance rules give; a mismatch is a bug in a jvp or transpose rule, an internal error.
  f.eqns.push_back(rules::makeEqn(f, p, std::move(ins), std::move(params), loc, {.declared = &out, .hint = hint}));
  return f.eqns.back().outs[0];
}

Value *Builder::scalar(double v, DType t) {
  return emit(Prim::Constant, {}, Type{t, {}, 0}, {{"value", std::vector<double>{v}}});
}

Value *Builder::full(double v, const Type &like) {
  Type inv{like.dtype, like.shape, 0};
  Value *c = emit(Prim::Constant, {}, inv, {{"value", std::vector<double>{v}}});
  return liftTo(c, like.vary);
}

Value *Builder::liftTo(Value *v, AxisSet vary) {
  if (v->type.vary == vary) return v;
  std::vector<int64_t> axes;
  for (int a = 0; a < 32; ++a)
    if ((vary & ~v->type.vary) & (AxisSet(1) << a)) axes.push_back(a);
  Type t = v->type;
  t.vary = vary;
  return emit(Prim::Pbroadcast, {v}, t, {{"axes", axes}});
}

Value *Builder::binary(Prim p, Value *a, Value *b) {
  AxisSet u = a->type.vary | b->type.vary;
  a = liftTo(a, u);
  b = liftTo(b, u);
  return emit(p, {a, b}, a->type);
}

Value *Builder::unary(Prim p, Value *a) { return emit(p, {a}, a->type); }

Value *Builder::compare(Prim p, Value *a, Value *b) {
  AxisSet u = a->type.vary | b->type.vary;
  a = liftTo(a, u);
  b = liftTo(b, u);
  Type t = a->type;
  t.dtype = DType::Bool;
  return emit(p, {a, b}, t);
}

Value *Builder::convert(Value *a, DType d) {
  if (a->type.dtype == d) return a;
  Type t = a->type;
  t.dtype = d;
  return emit(Prim::Convert, {a}, t);
}

Value *Builder::select(Value *pred, Value *a, Value *b) {
  AxisSet u = pred->type.vary | a->type.vary | b->type.vary;
  if (pred->type.shape != a->type.shape) {
    Type pt{DType::Bool, a->type.shape, pred->type.vary};
    pred = broadcastTo(pred, pt, {});
  }
  pred = liftTo(pred, u);
  a = liftTo(a, u);
  b = liftTo(b, u);
  return emit(Prim::Select, {pred, a, b}, a->type);
}

Value *Builder::broadcastTo(Value *v, const Type &target, std::vector<int64_t> bdims) {
  Type t{v->type.dtype, target.shape, v->type.vary};
  if (t.shape == v->type.shape) return v;
  return emit(Prim::BroadcastInDim, {v}, t, {{"broadcast_dimensions", bdims}});
}

Value *Builder::reduceSum(Value *v, std::vector<int64_t> axes) {
  if (axes.empty()) return v;
  std::sort(axes.begin(), axes.end());
  Type t{v->type.dtype, {}, v->type.vary};
  for (int64_t d = 0; d < v->type.rank(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) t.shape.push_back(v->type.shape[d]);
  return emit(Prim::ReduceSum, {v}, t, {{"axes", axes}});
}

Value *Builder::reshape(Value *v, std::vector<int64_t> shape) {
  if (v->type.shape == shape) return v;
  Type t{v->type.dtype, shape, v->type.vary};
  return emit(Prim::Reshape, {v}, t);
}

Value *Builder::transpose(Value *v, std::vector<int64_t> perm) {
  Type t{v->type.dtype, {}, v->type.vary};
  for (int64_t p : perm) t.shape.push_back(v->type.shape[p]);
  return emit(Prim::Transpose, {v}, t, {{"permutation", perm}});
}

Func *nestedLike(Module &m, const Func &body, const std::string &suffix) {
  Func *f = newFuncLike(m, body, body.name + suffix);
  f->isNested = true;
  return f;
}

Value *param(Func &f, const Type &t, const std::string &hint) {
  Value *v = f.newValue(t, hint);
  f.params.push_back(v);
  return v;
}

void copyEqn(const Eqn &e, Func &dst, std::map<const Value *, Value *> &map) {
  Eqn c = e;
  for (Value *&in : c.ins) in = lookup(map, in);
  for (Value *&o : c.outs) {
    Value *n = dst.newValue(o->type, o->hint);
    map[o] = n;
    o = n;
  }
  dst.eqns.push_back(std::move(c));
}

std::vector<bool> readsCotangent(const Func &v, size_t firstCt) {
  std::set<const Value *> dep(v.params.begin() + firstCt, v.params.end());
  std::vector<bool> reads(v.eqns.size());
  for (size_t i = 0; i < v.eqns.size(); ++i) {
    const Eqn &q = v.eqns[i];
    for (const Value *in : q.ins) reads[i] = reads[i] || dep.count(in);
    if (reads[i]) dep.insert(q.outs.begin(), q.outs.end());
  }
  return reads;
}

// ---- the linearizer's shared steps for higher-order equations (loop, cond)

void Linearizer::popPrimal(const Eqn &e) {
  Func &f = b.f;
  if (!f.eqns.empty() && f.eqns.back().prim == e.prim && f.eqns.back().outs == e.outs)
    f.eqns.pop_back();
}

void Linearizer::emitWithTangentOuts(Eqn j, const Eqn &e) {
  for (Value *o : e.outs)
    if (isFloat(o->type.dtype)) {
      Value *to = newTangent(o->type);
      j.outs.push_back(to);
      tangent[o] = to;
    }
  b.emitEqn(std::move(j));
}

// ---- flattening

Value *lookup(const std::map<const Value *, Value *> &map, const Value *v) {
  auto it = map.find(v);
  return it == map.end() ? const_cast<Value *>(v) : it->second;
}

std::vector<Value *> Differentiator::flattenInto(const Func &src, Func &dst,
                                                 std::map<const Value *, Value *> &map) {
  // Appends `c` (a copy of a source equation, operands already mapped) with fresh results.
  auto emitCopy = [&](Eqn c) {
    for (Value *&o : c.outs) {
      Value *n = dst.newValue(o->type, o->hint);
      map[o] = n;
      o = n;
    }
    dst.eqns.push_back(std::move(c));
  };
  // A nested body (loop body, while predicate or body) copied flattened.
  auto flatCopy = [&](const Func &body) {
    Func *copy = newFuncLike(m_, body, body.name);
    copy->isNested = true;
    std::map<const Value *, Value *> inner;
    for (Value *p : body.params) {
      Value *np = copy->newValue(p->type, p->hint);
      copy->params.push_back(np);
      inner[p] = np;
    }
    copy->results = flattenInto(body, *copy, inner);
    return copy;
  };
  for (const Eqn &e : src.eqns) {
    std::vector<Value *> ins;
    for (Value *v : e.ins) ins.push_back(lookup(map, v));
    Builder b{m_, dst, e.loc};
    switch (e.prim) {
    case Prim::Call: {
      std::map<const Value *, Value *> inner;
      for (size_t i = 0; i < ins.size(); ++i) inner[e.bodies[0]->params[i]] = ins[i];
      std::vector<Value *> res = flattenInto(*e.bodies[0], dst, inner);
      for (size_t i = 0; i < e.outs.size(); ++i) map[e.outs[i]] = res[i];
      break;
    }
    case Prim::Loop: {
      // Kept as a loop, its body copied flattened too (no calls left in it):
      // the jvp and transpose rules differentiate it as one (ad/Loop.cpp). An empty loop's
      // results are its initial carries.
      size_t consts = (size_t)e.intParam("num_consts");
      if (e.intParam("hi") <= e.intParam("lo")) {
        for (size_t k = 0; k < e.outs.size(); ++k) map[e.outs[k]] = ins[consts + k];
        break;
      }
      Eqn c = e;
      c.ins = ins;
      c.bodies = {flatCopy(*e.bodies[0])};
      emitCopy(std::move(c));
      break;
    }
    case Prim::While: {
      // Kept as a while, its predicate and body copied flattened (ad/Loop.cpp's whileRule).
      Eqn c = e;
      c.ins = ins;
      c.bodies = {flatCopy(*e.bodies[0]), flatCopy(*e.bodies[1])};
      emitCopy(std::move(c));
      break;
    }
    case Prim::Cond: {
      // Kept as a cond, its branches copied flattened (ad/Cond.cpp differentiates it as one).
      // A device-varying predicate: the float operands are lifted to vary over its axes and
      // the branches retyped (retypeWithParams), so no branch sums cotangents across devices that
      // may take the other branch. Where devices may diverge and a branch communicates over
      // the predicate's axes, or a branch cannot be retyped, both branches run and the
      // results are selected (the value codegen computes then, and its gradient).
      std::vector<Value *> operands(ins.begin() + 1, ins.end());
      AxisSet p = ins[0]->type.vary;
      bool untyped = src.mesh && !src.checkVma;
      std::vector<AxisSet> vary;
      bool widen = false;
      for (Value *v : operands) {
        vary.push_back(v->type.vary | (isFloat(v->type.dtype) ? p : 0));
        widen |= vary.back() != v->type.vary;
      }
      std::vector<Func *> copies;
      bool ok = true;
      for (const Func *branch : e.bodies)
        if ((p || untyped) && rules::communicatesOver(*branch, untyped ? ~AxisSet(0) : p)) ok = false;
      for (const Func *branch : e.bodies) {
        if (!ok) break;
        Func *copy = newFuncLike(m_, *branch, branch->name);
        copy->isNested = true;
        std::map<const Value *, Value *> inner;
        for (Value *q : branch->params) {
          Value *np = copy->newValue(q->type, q->hint);
          copy->params.push_back(np);
          inner[q] = np;
        }
        copy->results = flattenInto(*branch, *copy, inner);
        if (widen) {
          ok = ok && retypeWithParams(*copy, vary, diags_.sources());
          if (ok) {
            Builder cb{m_, *copy, e.loc};
            for (size_t k = 0; k < e.outs.size(); ++k)
              copy->results[k] = cb.liftTo(copy->results[k], e.outs[k]->type.vary);
          }
        }
        copies.push_back(copy);
      }
      if (!ok) {
        std::vector<std::vector<Value *>> results;
        for (const Func *branch : e.bodies) {
          std::map<const Value *, Value *> inner;
          for (size_t k = 0; k < operands.size(); ++k) inner[branch->params[k]] = operands[k];
          results.push_back(flattenInto(*branch, dst, inner));
        }
        for (size_t k = 0; k < e.outs.size(); ++k)
          map[e.outs[k]] = b.select(ins[0], results[0][k], results[1][k]);
        break;
      }
      Eqn c = e;
      c.ins = {ins[0]};
      for (size_t k = 0; k < operands.size(); ++k) c.ins.push_back(b.liftTo(operands[k], vary[k]));
      c.bodies = copies;
      emitCopy(std::move(c));
      break;
    }
    default: {
      Eqn c = e;
      c.ins = ins;
      emitCopy(std::move(c));
    }
    }
  }
  std::vector<Value *> res;
  for (Value *r : src.results) res.push_back(lookup(map, r));
  return res;
}

// ---- dead equations

void removeDeadEqns(Func &f) {
  std::set<const Value *> live(f.results.begin(), f.results.end());
  std::vector<bool> keep(f.eqns.size(), false);
  for (size_t i = f.eqns.size(); i-- > 0;) {
    const Eqn &e = f.eqns[i];
    bool used = hasEffects(e);
    for (const Value *o : e.outs) used |= live.count(o) != 0;
    if (!used) continue;
    keep[i] = true;
    live.insert(e.ins.begin(), e.ins.end());
  }
  std::vector<Eqn> kept;
  for (size_t i = 0; i < f.eqns.size(); ++i)
    if (keep[i]) kept.push_back(std::move(f.eqns[i]));
  f.eqns = std::move(kept);
}

} // namespace shmapc::passes::ad
