// Structural primitives that move elements without arithmetic: broadcast_in_dim, reshape,
// transpose, concatenate. All are linear; each transposes to the structural operation that
// undoes it (summing where the forward copied).
#include "prims/Prim.h"

#include <algorithm>
#include <numeric>

namespace shmapc::prims {

// Operand dim i -> out dim broadcast_dimensions[i]. Transpose: sum over the dimensions the
// broadcast added or stretched from size 1. A broadcast of one element is fused into the
// loops that read it; otherwise a runtime kernel.
namespace {

// Operand dimension i is result dimension bd[i] where their sizes agree (a size-1 dimension
// stretched is not); the result's other dimensions repeat the operand, so any sharding of
// them needs no communication: they are factors of the result alone.
FactorRule broadcastFactors(const Eqn &e) {
  const std::vector<int64_t> &bd = e.intsParam("broadcast_dimensions");
  const ir::Type &in = e.ins[0]->type, &out = e.outs[0]->type;
  FactorRule r;
  std::vector<bool> mapped((size_t)out.rank(), false);
  for (size_t i = 0; i < bd.size(); ++i)
    if (in.shape[i] == out.shape[(size_t)bd[i]]) {
      r.factors.push_back({{{0, (int)i}}, {{0, (int)bd[i]}}});
      mapped[(size_t)bd[i]] = true;
    }
  for (int d = 0; d < (int)out.rank(); ++d)
    if (!mapped[(size_t)d]) r.factors.push_back({{}, {{0, d}}});
  return r;
}

// The operand's and the result's dimensions in groups of equal size products (a dimension
// split in several, several merged in one, or kept). In each group the two sides are factored
// major first by their common divisors: 8 -> 2 x 4 is the factor of size 2 (the operand's
// dimension's major part, the result's first dimension) and the one of size 4; 6 x 4 -> 4 x 6
// has only the factor of size 2 (then 3 and 2 have no common divisor: the layouts part). A
// sharding of factors gives each device the same elements on both sides, so the reshape needs
// no communication; Shardy's sub-axes shard the parts ({"x"} of 8 -> {"x":(1)2}, {"x":(2)2}).
FactorRule reshapeFactors(const Eqn &e) {
  const std::vector<int64_t> &in = e.ins[0]->type.shape, &out = e.outs[0]->type.shape;
  FactorRule r;
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    const size_t i0 = i, j0 = j;
    int64_t pi = i < in.size() ? in[i++] : 1, pj = j < out.size() ? out[j++] : 1;
    while (pi != pj) {
      if (pi < pj && i < in.size()) pi *= in[i++];
      else if (pj < pi && j < out.size()) pj *= out[j++];
      else return FactorRule{FactorRule::Replicated, {}, {}, nullptr};  // (a zero-size dimension)
    }
    while (i < in.size() && in[i] == 1 && j < out.size() && out[j] == 1) ++i, ++j;  // (1-dims: own groups)
    // What is left of the current dimension on each side, and the product before it.
    size_t a = i0, b = j0;
    int64_t leftA = 0, leftB = 0, preA = 1, preB = 1;
    auto nextA = [&] {
      while (a < i && in[a] == 1) ++a;
      leftA = a < i ? in[a] : 0, preA = 1;
    };
    auto nextB = [&] {
      while (b < j && out[b] == 1) ++b;
      leftB = b < j ? out[b] : 0, preB = 1;
    };
    nextA();
    nextB();
    while (leftA > 1 && leftB > 1) {
      const int64_t g = std::gcd(leftA, leftB);
      if (g == 1) break;
      Factor f;
      f.ins = {{0, (int)a, preA}};
      f.outs = {{0, (int)b, preB}};
      f.size = g == in[a] && g == out[b] ? 0 : g;
      r.factors.push_back(f);
      leftA /= g, leftB /= g, preA *= g, preB *= g;
      if (leftA == 1) ++a, nextA();
      if (leftB == 1) ++b, nextB();
    }
  }
  return r;
}

// Result dimension i is operand dimension perm[i].
FactorRule transposeFactors(const Eqn &e) {
  const std::vector<int64_t> &perm = e.intsParam("permutation");
  FactorRule r;
  for (size_t i = 0; i < perm.size(); ++i) r.factors.push_back({{{0, (int)perm[i]}}, {{0, (int)i}}});
  return r;
}

// Every dimension but the one joined along is one factor of the operands and the result.
FactorRule concatenateFactors(const Eqn &e) {
  FactorRule r;
  const int along = (int)e.intParam("dimension");
  for (int d = 0; d < (int)e.outs[0]->type.rank(); ++d) {
    if (d == along) continue;
    Factor f;
    for (int i = 0; i < (int)e.ins.size(); ++i) f.ins.push_back({i, d});
    f.outs = {{0, d}};
    r.factors.push_back(f);
  }
  return r;
}

} // namespace

// sharding_constraint(x, S) (JAX's with_sharding_constraint): the identity; in a jit
// function its result is held in S (propagation starts from it, and the partitioner moves x
// there).
template <> const Rules &define<Prim::ShardingConstraint>() {
  static const Rules r{
      .shape = sameAsFirstOperand,
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) { c.accumulate(0, c.c); },
      .lower = lowerFused,
      .scalar = identityScalar,
      .sharding = elementwiseFactors,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::BroadcastInDim>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        // Out shape = the declared type's; each operand dim maps to a later out dim (strictly
        // increasing, as JAX: the transpose rule reshapes the summed cotangent back) of its size, or is 1.
        const Type &x = c.in(0), &out = c.declared();
        std::vector<int64_t> bd;
        if (!c.param("broadcast_dimensions", bd)) return false;
        if ((int64_t)bd.size() != x.rank())
          return c.fail("broadcast_dimensions has " + std::to_string(bd.size()) + " entries for " + typeText(x));
        for (size_t i = 0; i < bd.size(); ++i) {
          if (!c.inRange(bd[i], out.rank(), "broadcast dimension")) return false;
          if (i > 0 && bd[i] <= bd[i - 1]) return c.fail("broadcast_dimensions are not strictly increasing");
          if (x.shape[i] != 1 && x.shape[i] != out.shape[bd[i]])
            return c.fail("operand dimension " + std::to_string(i) + " of " + typeText(x) + " does not fit dimension " +
                          std::to_string(bd[i]) + " of " + typeText(out));
        }
        return c.out(x.dtype, out.shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        const auto &bd = c.e.intsParam("broadcast_dimensions");
        std::vector<int64_t> axes;
        for (int64_t d = 0; d < c.c->type.rank(); ++d) {
          auto it = std::find(bd.begin(), bd.end(), d);
          if (it == bd.end() || c.xt.shape[it - bd.begin()] != c.c->type.shape[d]) axes.push_back(d);
        }
        c.accumulate(0, c.b.reshape(c.b.reduceSum(c.c, axes), c.xt.shape));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        if (FuncEmitter::isFusible(e)) return fe.emitElementwiseGroup(i, i);
        const Type &in = e.ins[0]->type, &out = e.outs[0]->type;
        fe.callRt("shm_broadcast_in_dim",
                  {fe.dtypeCode(in.dtype), fe.buffer(e.ins[0]), fe.i32(in.rank()), fe.me.i64Array(in.shape),
                   fe.buffer(e.outs[0]), fe.i32(out.rank()), fe.me.i64Array(out.shape),
                   fe.me.i64Array(e.intsParam("broadcast_dimensions"))});
        return true;
      },
      .scalar = [](ScalarCtx &c) { return c.x[0]; },  // the one element, loaded once,
      .sharding = broadcastFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// The same bytes under another shape: the output aliases the input (codegen's storage plan)
// unless it must land in a result buffer.
template <> const Rules &define<Prim::Reshape>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // out shape = the declared type's
        if (c.declared().numElements() != c.in(0).numElements())
          return c.fail("cannot reshape " + typeText(c.in(0)) + " to " + typeText(c.declared()) + ": element counts differ");
        return c.out(c.in(0).dtype, c.declared().shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) { c.accumulate(0, c.b.reshape(c.c, c.xt.shape)); },
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitCopy(fe.f.eqns[i]); },
      .scalar = nullptr,
      .sharding = reshapeFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// Out dim i = operand dim permutation[i]; transposes to the inverse permutation.
template <> const Rules &define<Prim::Transpose>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        const Type &x = c.in(0);
        std::vector<int64_t> perm;
        if (!c.param("permutation", perm)) return false;
        std::vector<int64_t> sorted = perm, shape;
        std::sort(sorted.begin(), sorted.end());
        for (int64_t i = 0; i < (int64_t)sorted.size(); ++i)
          if (sorted[i] != i || (int64_t)perm.size() != x.rank())
            return c.fail("permutation is not a permutation of the " + std::to_string(x.rank()) + " dimensions of " + typeText(x));
        for (int64_t p : perm) shape.push_back(x.shape[p]);
        return c.out(x.dtype, shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        const auto &perm = c.e.intsParam("permutation");
        std::vector<int64_t> inv(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = (int64_t)i;
        c.accumulate(0, c.b.transpose(c.c, inv));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &in = e.ins[0]->type;
        fe.callRt("shm_transpose", {fe.dtypeCode(in.dtype), fe.buffer(e.ins[0]), fe.i32(in.rank()),
                                    fe.me.i64Array(in.shape), fe.me.i64Array(e.intsParam("permutation")),
                                    fe.buffer(e.outs[0])});
        return true;
      },
      .scalar = [](ScalarCtx &c) { return c.x[0]; },  // loaded at the permuted index (Elementwise.cpp),
      .sharding = transposeFactors,
      .comm = communicatesNothing,
  };
  return r;
}

// Along `dimension`; each operand's cotangent is its slice of the result's.
template <> const Rules &define<Prim::Concatenate>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        if (c.numIns() == 0) return c.fail("needs an operand");
        int64_t dim;
        Type t = c.in(0);
        if (!c.param("dimension", dim) || !c.inRange(dim, t.rank(), "dimension")) return false;
        // (a user's errors: sema reports each at the operand that does not fit)
        for (size_t i = 1; i < c.numIns(); ++i) {
          const Type &o = c.in(i);
          const std::string both = "cannot concatenate " + typeText(c.in(0)) + " and " + typeText(o);
          if (o.dtype != t.dtype)
            return c.failOperand(i, DiagId::DTypeMismatch, both + ": dtypes differ",
                                 std::string("cast(x, ") + dtypeName(t.dtype) + ") first");
          if (o.rank() != t.rank())
            return c.failOperand(i, DiagId::RankMismatch, both + ": ranks differ", "reshape or expand_dims one of them");
          for (int64_t d = 0; d < t.rank(); ++d)
            if (d != dim && o.shape[d] != t.shape[d])
              return c.failOperand(i, DiagId::ShapeMismatch,
                                   both + " along axis " + std::to_string(dim) + ": dimension " + std::to_string(d) +
                                       " differs",
                                   "all dimensions except the concatenated one must be equal");
          if (!growDim(t.shape[dim], o.shape[dim])) return c.fail("the result's size overflows");
        }
        return c.out(t);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = [](JvpCtx &c) {
        std::vector<Value *> ins;
        for (size_t i = 0; i < c.e.ins.size(); ++i) ins.push_back(c.zerosIfNull(c.t[i], c.e.ins[i]));
        c.set(c.linear(c.e.prim, ins, c.ty, c.e.params));
      },
      .transpose = [](TransposeCtx &c) {
        int64_t axis = c.e.intParam("dimension"), offset = 0;
        for (size_t i = 0; i < c.e.ins.size(); ++i) {
          const Type &it = c.e.ins[i]->type;
          if (c.isLinear(i)) {
            std::vector<int64_t> start(it.rank(), 0), limit = c.c->type.shape, strides(it.rank(), 1);
            start[axis] = offset;
            limit[axis] = offset + it.shape[axis];
            Type out{it.dtype, it.shape, c.c->type.vary};
            c.accumulate(i, c.b.emit(Prim::Slice, {c.c}, out,
                                     {{"start", start}, {"limit", limit}, {"strides", strides}}));
          }
          offset += it.shape[axis];
        }
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &out = e.outs[0]->type;
        std::vector<llvm::Value *> ins;
        std::vector<int64_t> shapes;
        for (const Value *v : e.ins) {
          ins.push_back(fe.buffer(v));
          shapes.insert(shapes.end(), v->type.shape.begin(), v->type.shape.end());
        }
        fe.callRt("shm_concatenate",
                  {fe.dtypeCode(out.dtype), fe.i32((int64_t)e.ins.size()), fe.ptrArray(ins),
                   fe.i32(out.rank()), fe.me.i64Array(shapes), fe.i32(e.intParam("dimension")),
                   fe.buffer(e.outs[0])});
        return true;
      },
      // (no scalar rule: not element-wise, though a fused loop reads one along a leading axis
      // from the operand its range is in: FuncEmitter::isFusible)
      .scalar = nullptr,
      .sharding = concatenateFactors,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
