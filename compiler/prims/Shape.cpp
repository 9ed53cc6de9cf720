// Structural primitives that move elements without arithmetic: broadcast_in_dim, reshape,
// transpose, concatenate. All are linear; each transposes to the structural operation that
// undoes it (summing where the forward copied).
#include "prims/Prim.h"

#include <algorithm>

namespace shmapc::prims {

// Operand dim i -> out dim broadcast_dimensions[i]. Transpose: sum over the dimensions the
// broadcast added or stretched from size 1. A broadcast of one element is fused into the
// loops that read it; otherwise a runtime kernel.
template <> const Rules &define<Prim::BroadcastInDim>() {
  static const Rules r{
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
      .scalar = [](ScalarCtx &c) { return c.x[0]; },  // the one element, loaded once
  };
  return r;
}

// The same bytes under another shape: the output aliases the input (codegen's storage plan)
// unless it must land in a result buffer.
template <> const Rules &define<Prim::Reshape>() {
  static const Rules r{
      .variance = VarianceRule::SameAsOperands,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) { c.accumulate(0, c.b.reshape(c.c, c.xt.shape)); },
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitCopy(fe.f.eqns[i]); },
      .scalar = nullptr,
  };
  return r;
}

// Out dim i = operand dim permutation[i]; transposes to the inverse permutation.
template <> const Rules &define<Prim::Transpose>() {
  static const Rules r{
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
      .scalar = nullptr,
  };
  return r;
}

// Along `dimension`; each operand's cotangent is its slice of the result's.
template <> const Rules &define<Prim::Concatenate>() {
  static const Rules r{
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
      .scalar = nullptr,
  };
  return r;
}

} // namespace shmapc::prims
