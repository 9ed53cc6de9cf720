// slice (static start, limit, strides), dynamic_slice and dynamic_update_slice (start indices
// are i32[] operands, clamped into range as in JAX). All are linear in their array operands;
// a slice transposes to an update of zeros, and an update to a slice.
#include "prims/Prim.h"

namespace shmapc::prims {

namespace {

// In a jit function: a dimension a slice (or dynamic_slice) keeps whole is one factor of the
// operand and the result. A dimension a slice cuts with stride 1 is a shifted factor (the
// partitioner computes it on the local blocks, with a halo from the neighbours where a block
// reaches past its own); other cut dimensions are computed unsharded. The params that give
// the kept dimensions' sizes are then the local blocks'.
FactorRule sliceFactors(const Eqn &e) {
  FactorRule r;
  const std::vector<int64_t> &shape = e.ins[0]->type.shape;
  for (int d = 0; d < (int)shape.size(); ++d) {
    const bool whole = e.prim == Prim::Slice ? e.intsParam("start")[(size_t)d] == 0 &&
                                                   e.intsParam("limit")[(size_t)d] == shape[(size_t)d] &&
                                                   e.intsParam("strides")[(size_t)d] == 1
                                             : e.intsParam("sizes")[(size_t)d] == shape[(size_t)d];
    if (whole) r.factors.push_back({{{0, d}}, {{0, d}}});
    else if (e.prim == Prim::Slice && e.intsParam("strides")[(size_t)d] == 1)
      r.factors.push_back({.ins = {{0, d}}, .outs = {{0, d}}, .shifted = true});
  }
  r.localize = [](const Eqn &global, Eqn &local) {
    const std::vector<int64_t> &shape = global.ins[0]->type.shape, &now = local.ins[0]->type.shape;
    std::vector<int64_t> sizes = global.intsParam(global.prim == Prim::Slice ? "limit" : "sizes");
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] == shape[d]) sizes[d] = now[d];
    local.params[global.prim == Prim::Slice ? "limit" : "sizes"] = sizes;
  };
  return r;
}

// A dimension the update covers whole is one factor of the operand, the update and the
// result; the others are computed unsharded.
FactorRule updateSliceFactors(const Eqn &e) {
  FactorRule r;
  const std::vector<int64_t> &x = e.ins[0]->type.shape, &u = e.ins[1]->type.shape;
  for (int d = 0; d < (int)x.size(); ++d)
    if (u[(size_t)d] == x[(size_t)d]) r.factors.push_back({{{0, d}, {1, d}}, {{0, d}}});
  return r;
}

} // namespace

template <> const Rules &define<Prim::Slice>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        const Type &x = c.in(0);
        std::vector<int64_t> start, limit, strides, shape;
        if (!c.param("start", start) || !c.param("limit", limit) || !c.param("strides", strides)) return false;
        if ((int64_t)start.size() != x.rank() || limit.size() != start.size() || strides.size() != start.size())
          return c.fail("needs one start, limit and stride per dimension of " + typeText(x));
        for (int64_t d = 0; d < x.rank(); ++d) {
          if (start[d] < 0 || start[d] > limit[d] || limit[d] > x.shape[d] || strides[d] < 1)
            return c.fail("dimension " + std::to_string(d) + " of " + typeText(x) + ": start " + std::to_string(start[d]) +
                          ", limit " + std::to_string(limit[d]) + ", stride " + std::to_string(strides[d]) + " are out of range");
          // ceil((limit - start) / stride) without overflow for a stride near 2^63
          int64_t extent = limit[d] - start[d];
          shape.push_back(extent == 0 ? 0 : (extent - 1) / strides[d] + 1);
        }
        return c.out(x.dtype, shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      // A strided dimension first gets its gaps back: zeros interleaved after each element
      // (reshape to [m, 1], concatenate [m, s - 1] zeros, reshape to m * s, cut to the
      // slice's extent); then the block goes into zeros at the slice's start.
      .transpose = [](TransposeCtx &ctx) {
        Builder &b = ctx.b;
        Value *c = ctx.c;
        const Type &xt = ctx.xt;
        const auto &start = ctx.e.intsParam("start"), &limit = ctx.e.intsParam("limit");
        const auto &strides = ctx.e.intsParam("strides");
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
        for (int64_t s : start) ins.push_back(b.i32(s));
        Type out{xt.dtype, xt.shape, c->type.vary};
        ctx.accumulate(0, b.emit(Prim::DynamicUpdateSlice, ins, out));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &in = e.ins[0]->type;
        if (fe.storage(e.outs[0]).kind == codegen::StorageKind::Alias) return true;  // a view (isContiguousSlice)
        fe.callRt("shm_slice", {fe.dtypeCode(in.dtype), fe.buffer(e.ins[0]), fe.i32(in.rank()),
                                fe.me.i64Array(in.shape), fe.me.i64Array(e.intsParam("start")),
                                fe.me.i64Array(e.intsParam("limit")), fe.me.i64Array(e.intsParam("strides")),
                                fe.buffer(e.outs[0])});
        return true;
      },
      .scalar = nullptr,
      .sharding = sliceFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// (operand, i32[] start per dim...); sizes: the block's shape.
template <> const Rules &define<Prim::DynamicSlice>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        if (c.numIns() == 0) return c.fail("needs an operand");
        const Type &x = c.in(0);
        std::vector<int64_t> sizes;
        if (!c.param("sizes", sizes)) return false;
        if ((int64_t)c.numIns() != 1 + x.rank()) return c.fail("needs one start index per dimension of " + typeText(x));
        // (a user's errors: sema reports them at the sizes argument)
        if ((int64_t)sizes.size() != x.rank())
          return c.failParam("sizes", DiagId::RankMismatch,
                             "dynamic_slice has " + std::to_string(sizes.size()) + " sizes for " + typeText(x),
                             "give one size per dimension");
        for (int64_t d = 0; d < x.rank(); ++d) {
          if (!c.i32Scalar(1 + d, "start index " + std::to_string(d))) return false;
          if (sizes[d] < 0 || sizes[d] > x.shape[d])  // (0: an empty block, as JAX's)
            return c.failParam("sizes", DiagId::IndexOutOfRange,
                               "slice size " + std::to_string(sizes[d]) + " does not fit dimension " +
                                   std::to_string(d) + " of " + typeText(x),
                               "sizes must be between 0 and the dimension's size");
        }
        return c.out(x.dtype, sizes);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = [](JvpCtx &c) {
        if (!c.t[0]) return;
        std::vector<Value *> ins = {c.t[0]};
        ins.insert(ins.end(), c.e.ins.begin() + 1, c.e.ins.end());
        c.set(c.linear(c.e.prim, ins, c.ty, c.e.params));
      },
      .transpose = [](TransposeCtx &c) {
        Type out{c.xt.dtype, c.xt.shape, c.c->type.vary};
        std::vector<Value *> ins = {c.b.zerosLike(out), c.c};
        ins.insert(ins.end(), c.e.ins.begin() + 1, c.e.ins.end());
        c.accumulate(0, c.b.emit(Prim::DynamicUpdateSlice, ins, out));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &in = e.ins[0]->type;
        std::vector<Value *> starts(e.ins.begin() + 1, e.ins.end());
        if ((int64_t)starts.size() != in.rank())
          return fe.fail("dynamic_slice: need one start index per dimension");
        fe.callRt("shm_dynamic_slice", {fe.dtypeCode(in.dtype), fe.buffer(e.ins[0]), fe.i32(in.rank()),
                                        fe.me.i64Array(in.shape), fe.startIndices(starts),
                                        fe.me.i64Array(e.intsParam("sizes")), fe.buffer(e.outs[0])});
        return true;
      },
      .scalar = nullptr,
      .sharding = sliceFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// (operand, update, i32[] start per dim...): linear in the operand and the update.
template <> const Rules &define<Prim::DynamicUpdateSlice>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        if (c.numIns() < 2) return c.fail("needs an operand and an update");
        const Type &x = c.in(0), &u = c.in(1);
        if ((int64_t)c.numIns() != 2 + x.rank()) return c.fail("needs one start index per dimension of " + typeText(x));
        // (a user's errors: sema reports them at the update)
        const std::string both = "cannot update " + typeText(x) + " with " + typeText(u);
        if (u.dtype != x.dtype)
          return c.failOperand(1, DiagId::DTypeMismatch, both + ": dtypes differ",
                               std::string("cast(u, ") + dtypeName(x.dtype) + ") first");
        if (u.rank() != x.rank())
          return c.failOperand(1, DiagId::RankMismatch, both + ": ranks differ", "reshape the update to the array's rank");
        for (int64_t d = 0; d < x.rank(); ++d)
          if (u.shape[d] > x.shape[d])
            return c.failOperand(1, DiagId::ShapeMismatch,
                                 "update " + typeText(u) + " is larger than " + typeText(x) + " in dimension " +
                                     std::to_string(d),
                                 "the update must fit inside the array");
        for (int64_t d = 0; d < x.rank(); ++d)
          if (!c.i32Scalar(2 + d, "start index " + std::to_string(d))) return false;
        return c.out(x);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = [](JvpCtx &c) {
        if (!c.t[0] && !c.t[1]) return;
        std::vector<Value *> ins = {c.zerosIfNull(c.t[0], c.e.ins[0]), c.zerosIfNull(c.t[1], c.e.ins[1])};
        ins.insert(ins.end(), c.e.ins.begin() + 2, c.e.ins.end());
        c.set(c.linear(c.e.prim, ins, c.ty, c.e.params));
      },
      .transpose = [](TransposeCtx &c) {
        std::vector<Value *> idx(c.e.ins.begin() + 2, c.e.ins.end());
        const Type &ut = c.e.ins[1]->type;
        if (c.isLinear(0)) {  // the operand outside the update
          std::vector<Value *> ins = {c.c, c.b.zerosLike(Type{ut.dtype, ut.shape, c.c->type.vary})};
          ins.insert(ins.end(), idx.begin(), idx.end());
          c.accumulate(0, c.b.emit(Prim::DynamicUpdateSlice, ins, c.c->type));
        }
        if (c.isLinear(1)) {  // the update's block
          std::vector<Value *> ins = {c.c};
          ins.insert(ins.end(), idx.begin(), idx.end());
          Type out{ut.dtype, ut.shape, c.c->type.vary};
          c.accumulate(1, c.b.emit(Prim::DynamicSlice, ins, out, {{"sizes", ut.shape}}));
        }
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &in = e.ins[0]->type, &upd = e.ins[1]->type;
        std::vector<Value *> starts(e.ins.begin() + 2, e.ins.end());
        if ((int64_t)starts.size() != in.rank())
          return fe.fail("dynamic_update_slice: need one start index per dimension");
        fe.callRt("shm_dynamic_update_slice",
                  {fe.dtypeCode(in.dtype), fe.buffer(e.ins[0]), fe.i32(in.rank()), fe.me.i64Array(in.shape),
                   fe.buffer(e.ins[1]), fe.me.i64Array(upd.shape), fe.startIndices(starts),
                   fe.buffer(e.outs[0])});
        return true;
      },
      .scalar = nullptr,
      .sharding = updateSliceFactors,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
