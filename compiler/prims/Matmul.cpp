// matmul: lhs [B..., m, k] x rhs [B..., k, n] -> [B..., m, n] (rank >= 2, equal batch dims),
// by the runtime's BLAS call. Bilinear: linear in each operand when the other is primal; the
// transposes multiply the cotangent by the other operand transposed. After autodiff,
// foldTransposesIntoMatmul (passes/FoldTransposes.cpp) may set transpose_lhs / transpose_rhs:
// the operand is then stored with its last two dimensions swapped, and BLAS's transpose flag
// reads it so, instead of a transposed copy.
#include "prims/Prim.h"

#include <algorithm>

namespace shmapc::prims {

namespace {

bool flag(const Eqn &e, const char *name) { return e.has(name) && e.intParam(name) != 0; }

// An operand's logical [..., rows, cols] from its stored shape.
std::vector<int64_t> logical(const Type &t, bool transposed) {
  std::vector<int64_t> s = t.shape;
  if (transposed && s.size() >= 2) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}

std::vector<int64_t> swapLastTwo(int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

// [B..., m, k] @ [B..., k, n]: each batch dimension, m, n, and k (reduced: a psum).
FactorRule matmulFactors(const Eqn &e) {
  const int rank = (int)e.outs[0]->type.rank();
  const bool tl = e.has("transpose_lhs") && e.intParam("transpose_lhs"), tr = e.has("transpose_rhs") && e.intParam("transpose_rhs");
  FactorRule r;
  for (int d = 0; d < rank - 2; ++d) r.factors.push_back({{{0, d}, {1, d}}, {{0, d}}});
  const int m = tl ? rank - 1 : rank - 2, kl = tl ? rank - 2 : rank - 1;
  const int kr = tr ? rank - 1 : rank - 2, n = tr ? rank - 2 : rank - 1;
  r.factors.push_back({{{0, m}}, {{0, rank - 2}}});
  r.factors.push_back({{{1, n}}, {{0, rank - 1}}});
  r.factors.push_back({{{0, kl}, {1, kr}}, {}, Prim::Psum});
  return r;
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
        std::vector<int64_t> ls = logical(l, flag(c.e, "transpose_lhs"));
        std::vector<int64_t> rs = logical(r, flag(c.e, "transpose_rhs"));
        if (!std::equal(ls.begin(), ls.end() - 2, rs.begin()) || ls[rank - 1] != rs[rank - 2])
          return c.fail("cannot matmul " + typeText(l) + " and " + typeText(r) +
                        ": batch dimensions differ or contracting dimensions differ");
        std::vector<int64_t> shape = ls;
        shape.back() = rs.back();
        return c.out(l.dtype, shape);
      },
      .variance = VarianceRule::SameAsOperands,
      .jvp = [](JvpCtx &c) {
        // The tangent of each operand is stored as the operand is (transpose flags kept).
        Value *ta = c.t[0] ? c.linear(Prim::Matmul, {c.t[0], c.e.ins[1]}, c.ty, c.e.params) : nullptr;
        Value *tb = c.t[1] ? c.linear(Prim::Matmul, {c.e.ins[0], c.t[1]}, c.ty, c.e.params) : nullptr;
        c.set(c.add(ta, tb));
      },
      .transpose = [](TransposeCtx &c) {
        Builder &b = c.b;
        const Eqn &e = c.e;
        if (flag(e, "transpose_lhs") || flag(e, "transpose_rhs"))  // set only after autodiff
          throw InternalError("matmul with transpose flags reached the transpose rule");
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
        bool tl = flag(e, "transpose_lhs"), tr = flag(e, "transpose_rhs");
        std::vector<int64_t> ls = logical(lhs, tl), rs = logical(rhs, tr);
        int64_t m = ls[ls.size() - 2], k = ls.back(), n = rs.back();
        fe.noteKernel(i, std::string("shm_matmul ") + ir::dtypeName(lhs.dtype) + ", batch " + std::to_string(batch) +
                             ", m " + std::to_string(m) + ", k " + std::to_string(k) + ", n " +
                             std::to_string(n) + (tl ? ", lhs transposed" : "") + (tr ? ", rhs transposed" : "") +
                             " -> " + codegen::matmulKernelWords(lhs.dtype, batch, m, k, n));
        fe.callRt("shm_matmul", {fe.dtypeCode(lhs.dtype), fe.buffer(e.ins[0]), fe.buffer(e.ins[1]),
                                 fe.buffer(e.outs[0]), fe.i64(batch), fe.i64(m), fe.i64(k), fe.i64(n),
                                 fe.i32(tl), fe.i32(tr)});
        return true;
      },
      .scalar = nullptr,
      .sharding = matmulFactors,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
