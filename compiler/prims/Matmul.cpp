// matmul: lhs [B..., m, k] x rhs [B..., k, n] -> [B..., m, n] (rank >= 2, equal batch dims),
// by the runtime's BLAS call. Bilinear: linear in each operand when the other is primal; the
// transposes multiply the cotangent by the other operand transposed.
#include "prims/Prim.h"

#include <algorithm>

namespace shmapc::prims {

namespace {

std::vector<int64_t> swapLastTwo(int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

} // namespace

template <> const Rules &define<Prim::Matmul>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // [B..., m, k] @ [B..., k, n] -> [B..., m, n]
        const Type &l = c.in(0), &r = c.in(1);
        if (l.dtype != r.dtype || l.dtype == DType::Bool || l.rank() < 2 || l.rank() != r.rank())
          return c.fail("cannot matmul " + typeText(l) + " and " + typeText(r) +
                        ": needs numeric operands of one dtype and one rank >= 2");
        int64_t rank = l.rank();
        if (!std::equal(l.shape.begin(), l.shape.end() - 2, r.shape.begin()) || l.shape[rank - 1] != r.shape[rank - 2])
          return c.fail("cannot matmul " + typeText(l) + " and " + typeText(r) +
                        ": batch dimensions differ or contracting dimensions differ");
        std::vector<int64_t> shape = l.shape;
        shape.back() = r.shape.back();
        return c.out(l.dtype, shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = [](JvpCtx &c) {
        Value *ta = c.t[0] ? c.linear(Prim::Matmul, {c.t[0], c.e.ins[1]}, c.ty) : nullptr;
        Value *tb = c.t[1] ? c.linear(Prim::Matmul, {c.e.ins[0], c.t[1]}, c.ty) : nullptr;
        c.set(c.add(ta, tb));
      },
      .transpose = [](TransposeCtx &c) {
        Builder &b = c.b;
        const Eqn &e = c.e;
        if (c.isLinear(0)) {
          Value *bt = b.transpose(e.ins[1], swapLastTwo(e.ins[1]->type.rank()));
          c.accumulate(0, b.emit(Prim::Matmul, {c.c, b.liftTo(bt, c.c->type.vary)}, e.ins[0]->type));
        }
        if (c.isLinear(1)) {
          Value *at = b.transpose(e.ins[0], swapLastTwo(e.ins[0]->type.rank()));
          c.accumulate(1, b.emit(Prim::Matmul, {b.liftTo(at, c.c->type.vary), c.c}, e.ins[1]->type));
        }
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &lhs = e.ins[0]->type, &rhs = e.ins[1]->type;
        if (lhs.rank() < 2 || rhs.rank() < 2) return fe.fail("matmul: operands must have rank >= 2");
        int64_t batch = 1;
        for (int64_t d = 0; d + 2 < lhs.rank(); ++d) batch *= lhs.shape[d];
        int64_t m = lhs.shape[lhs.rank() - 2], k = lhs.shape[lhs.rank() - 1];
        int64_t n = rhs.shape[rhs.rank() - 1];
        fe.callRt("shm_matmul", {fe.dtypeCode(lhs.dtype), fe.buffer(e.ins[0]), fe.buffer(e.ins[1]),
                                 fe.buffer(e.outs[0]), fe.i64(batch), fe.i64(m), fe.i64(k), fe.i64(n)});
        return true;
      },
      .scalar = nullptr,
  };
  return r;
}

} // namespace shmapc::prims
