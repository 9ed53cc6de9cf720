// The transpose rule of every linear primitive: given the cotangent of a linear equation's
// result, emit the cotangents of its linear operands. Collectives follow seed 000's table:
// psum2 and pbroadcast transpose to each other, all_gather to psum_scatter,
// all_gather_invariant to pscatter (and back), all_to_all to all_to_all with the axes
// swapped, ppermute to the inverse permutation. The user-level psum (only left in bodies
// with check_vma=false, the pre-seed-000 behaviour) transposes to psum.
#include "passes/AD.h"

#include <algorithm>

namespace shmapc::passes::ad {

void Transposer::accumulate(Value *tv, Value *c) {
  if (!tv || !c) return;
  auto it = ct.find(tv);
  if (it == ct.end()) {
    ct[tv] = c;
    return;
  }
  it->second = b.binary(Prim::Add, it->second, c);
}

namespace {

std::vector<int64_t> swapLastTwo(int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

} // namespace

void Transposer::rule(const LinearEqn &le) {
  const Eqn &e = le.e;
  b.loc = e.loc;
  if (e.prim == Prim::Shmap) return shmapRule(le);
  if (e.prim == Prim::Loop) return loopRule(le);
  if (e.prim == Prim::Cond) return condRule(le);
  Value *c = ctOf(e.outs[0]);
  if (!c) return;  // a zero cotangent contributes nothing
  auto in = [&](size_t i) { return le.linear[i] ? e.ins[i] : nullptr; };
  auto same = [&](Prim p, Value *v, std::map<std::string, Attr> params, const Type &t) {
    return b.emit(p, {v}, t, std::move(params));
  };
  const Type &xt = e.ins[0]->type;

  switch (e.prim) {
  case Prim::Neg: return accumulate(in(0), b.unary(Prim::Neg, c));
  case Prim::Add:
    accumulate(in(0), c);
    return accumulate(in(1), c);
  case Prim::Sub:
    accumulate(in(0), c);
    if (in(1)) accumulate(in(1), b.unary(Prim::Neg, c));
    return;
  case Prim::Mul:
    if (in(0)) accumulate(in(0), b.binary(Prim::Mul, c, e.ins[1]));
    if (in(1)) accumulate(in(1), b.binary(Prim::Mul, e.ins[0], c));
    return;
  case Prim::Div: return accumulate(in(0), b.binary(Prim::Div, c, e.ins[1]));
  case Prim::Convert: return accumulate(in(0), b.convert(c, xt.dtype));
  case Prim::Select: {
    Value *zero = b.zerosLike(c->type);
    if (in(1)) accumulate(in(1), b.select(e.ins[0], c, zero));
    if (in(2)) accumulate(in(2), b.select(e.ins[0], zero, c));
    return;
  }
  case Prim::BroadcastInDim: {
    // Sum over the dimensions the broadcast added or stretched from size 1.
    const auto &bd = e.intsParam("broadcast_dimensions");
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < c->type.rank(); ++d) {
      auto it = std::find(bd.begin(), bd.end(), d);
      if (it == bd.end() || xt.shape[it - bd.begin()] != c->type.shape[d]) axes.push_back(d);
    }
    return accumulate(in(0), b.reshape(b.reduceSum(c, axes), xt.shape));
  }
  case Prim::Reshape: return accumulate(in(0), b.reshape(c, xt.shape));
  case Prim::Transpose: {
    const auto &perm = e.intsParam("permutation");
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = (int64_t)i;
    return accumulate(in(0), b.transpose(c, inv));
  }
  case Prim::ReduceSum: {
    const auto &axes = e.intsParam("axes");
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < xt.rank(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(d);
    Type full = xt;
    full.vary = c->type.vary;
    return accumulate(in(0), b.broadcastTo(c, full, kept));
  }
  case Prim::Slice: {
    // A strided dimension first gets its gaps back: zeros interleaved after each element
    // (reshape to [m, 1], concatenate [m, s - 1] zeros, reshape to m * s, cut to the slice's
    // extent); then the block goes into zeros at the slice's start.
    const auto &start = e.intsParam("start"), &limit = e.intsParam("limit");
    const auto &strides = e.intsParam("strides");
    for (size_t dim = 0; dim < strides.size(); ++dim) {
      int64_t stride = strides[dim], m = c->type.shape[dim];
      if (stride == 1) continue;
      if (m == 0) return;  // nothing was sliced: a zero cotangent
      std::vector<int64_t> shape = c->type.shape;
      shape[dim] = 1;
      shape.insert(shape.begin() + dim, m);
      Value *column = b.reshape(c, shape);
      shape[dim + 1] = stride - 1;
      Value *gaps = b.zerosLike(Type{c->type.dtype, shape, c->type.vary});
      shape[dim + 1] = stride;
      Value *spread = b.emit(Prim::Concatenate, {column, gaps}, Type{c->type.dtype, shape, c->type.vary},
                             {{"dimension", (int64_t)dim + 1}});
      std::vector<int64_t> flat = c->type.shape;
      flat[dim] = m * stride;
      spread = b.reshape(spread, flat);
      std::vector<int64_t> lo(flat.size(), 0), hi = flat, one(flat.size(), 1);
      hi[dim] = limit[dim] - start[dim];
      std::vector<int64_t> cut = flat;
      cut[dim] = hi[dim];
      c = b.emit(Prim::Slice, {spread}, Type{c->type.dtype, cut, c->type.vary},
                 {{"start", lo}, {"limit", hi}, {"strides", one}});
    }
    std::vector<Value *> ins = {b.zerosLike(Type{xt.dtype, xt.shape, c->type.vary}), c};
    for (int64_t s : e.intsParam("start")) ins.push_back(b.i32(s));
    Type out{xt.dtype, xt.shape, c->type.vary};
    return accumulate(in(0), b.emit(Prim::DynamicUpdateSlice, ins, out));
  }
  case Prim::DynamicSlice: {
    Type out{xt.dtype, xt.shape, c->type.vary};
    std::vector<Value *> ins = {b.zerosLike(out), c};
    ins.insert(ins.end(), e.ins.begin() + 1, e.ins.end());
    return accumulate(in(0), b.emit(Prim::DynamicUpdateSlice, ins, out));
  }
  case Prim::DynamicUpdateSlice: {
    std::vector<Value *> idx(e.ins.begin() + 2, e.ins.end());
    const Type &ut = e.ins[1]->type;
    if (in(0)) {
      std::vector<Value *> ins = {c, b.zerosLike(Type{ut.dtype, ut.shape, c->type.vary})};
      ins.insert(ins.end(), idx.begin(), idx.end());
      accumulate(in(0), b.emit(Prim::DynamicUpdateSlice, ins, c->type));
    }
    if (in(1)) {
      std::vector<Value *> ins = {c};
      ins.insert(ins.end(), idx.begin(), idx.end());
      Type out{ut.dtype, ut.shape, c->type.vary};
      accumulate(in(1), b.emit(Prim::DynamicSlice, ins, out, {{"sizes", ut.shape}}));
    }
    return;
  }
  case Prim::Concatenate: {
    int64_t axis = e.intParam("dimension"), offset = 0;
    for (size_t i = 0; i < e.ins.size(); ++i) {
      const Type &it = e.ins[i]->type;
      if (in(i)) {
        std::vector<int64_t> start(it.rank(), 0), limit = c->type.shape, strides(it.rank(), 1);
        start[axis] = offset;
        limit[axis] = offset + it.shape[axis];
        Type out{it.dtype, it.shape, c->type.vary};
        accumulate(in(i), b.emit(Prim::Slice, {c}, out,
                                 {{"start", start}, {"limit", limit}, {"strides", strides}}));
      }
      offset += it.shape[axis];
    }
    return;
  }
  case Prim::Matmul:
    if (in(0)) {
      Value *bt = b.transpose(e.ins[1], swapLastTwo(e.ins[1]->type.rank()));
      accumulate(in(0), b.emit(Prim::Matmul, {c, b.liftTo(bt, c->type.vary)}, e.ins[0]->type));
    }
    if (in(1)) {
      Value *at = b.transpose(e.ins[0], swapLastTwo(e.ins[0]->type.rank()));
      accumulate(in(1), b.emit(Prim::Matmul, {b.liftTo(at, c->type.vary), c}, e.ins[1]->type));
    }
    return;
  // ---- collectives (seed 000's transpose column)
  case Prim::Psum: return accumulate(in(0), same(Prim::Psum, c, e.params, xt));
  case Prim::Psum2: return accumulate(in(0), same(Prim::Pbroadcast, c, e.params, xt));
  case Prim::Pbroadcast: return accumulate(in(0), same(Prim::Psum2, c, e.params, xt));
  case Prim::AllGather:
    return accumulate(in(0), same(Prim::PsumScatter, c,
                                  {{"axes", e.params.at("axes")},
                                   {"scatter_dimension", e.params.at("axis")},
                                   {"tiled", e.params.at("tiled")}}, xt));
  case Prim::PsumScatter:
    return accumulate(in(0), same(Prim::AllGather, c,
                                  {{"axes", e.params.at("axes")},
                                   {"axis", e.params.at("scatter_dimension")},
                                   {"tiled", e.params.at("tiled")}}, xt));
  case Prim::AllGatherInvariant:
    if (!b.f.checkVma)  // untyped (naive mode): all_gather's old transpose, a psum_scatter
      return accumulate(in(0), same(Prim::PsumScatter, c,
                                    {{"axes", e.params.at("axes")},
                                     {"scatter_dimension", e.params.at("axis")},
                                     {"tiled", e.params.at("tiled")}}, xt));
    return accumulate(in(0), same(Prim::Pscatter, c, e.params, xt));
  case Prim::Pscatter: return accumulate(in(0), same(Prim::AllGatherInvariant, c, e.params, xt));
  case Prim::AllToAll:
    return accumulate(in(0), same(Prim::AllToAll, c,
                                  {{"axes", e.params.at("axes")},
                                   {"split_axis", e.params.at("concat_axis")},
                                   {"concat_axis", e.params.at("split_axis")},
                                   {"tiled", e.params.at("tiled")}}, xt));
  case Prim::Ppermute: {
    std::vector<int64_t> inv = e.intsParam("perm");
    for (size_t i = 0; i + 1 < inv.size(); i += 2) std::swap(inv[i], inv[i + 1]);
    return accumulate(in(0), same(Prim::Ppermute, c, {{"axes", e.params.at("axes")}, {"perm", inv}}, xt));
  }
  // Not linear: the linearizer never tapes them.
  case Prim::Constant: case Prim::Iota: case Prim::RandomNormal: case Prim::RandomUniform:
  case Prim::Exp: case Prim::Log: case Prim::Sin: case Prim::Cos: case Prim::Tanh:
  case Prim::Sqrt: case Prim::Abs: case Prim::Not: case Prim::Rem: case Prim::Max:
  case Prim::Floor: case Prim::FloorDiv:
  case Prim::Min: case Prim::Pow: case Prim::And: case Prim::Or: case Prim::Eq: case Prim::Ne:
  case Prim::Lt: case Prim::Le: case Prim::Gt: case Prim::Ge: case Prim::ReduceMax:
  case Prim::ReduceMin: case Prim::Pmax: case Prim::Pmin: case Prim::AxisIndex:
  case Prim::Call: case Prim::Shmap: case Prim::Loop: case Prim::Cond: case Prim::Jvp:
  case Prim::Vjp: case Prim::Print:
    return;
  }
}

} // namespace shmapc::passes::ad
