// Concatenation of a jit function on the local blocks (passes/jit/Partitioner.h): where the joined
// dimension of the result is to be sharded, each device builds its result block from windows of
// the operands at their offsets in the result (a padding constant made where it is, an operand
// sharded along the same axes from its own block and a halo from its neighbours, any other
// from the whole operand), each masked to where that operand lies. So padding a sharded
// dimension (concatenate([zeros, a, zeros])) moves at most the boundary elements, as XLA's pad
// does, where gathering `a` moved all of it.
#include "passes/jit/Partitioner.h"

#include <algorithm>

namespace shmapc::passes::partition {

// The halo a window of operand i needs from the neighbours: operand dimension of n elements in
// blocks of bi along the axes, placed at `offset` in a result whose blocks are bo. Only the
// positions that hold the operand's elements count (the rest is masked).
Partitioner::Halo Partitioner::windowHalo(int64_t n, int64_t offset, int64_t bo, const Refs &axes) {
  Halo h;
  h.inBlock = blockSize(n, axes), h.outBlock = bo;
  for (int64_t k = 0; k < shardCount(axes); ++k) {
    const int64_t lo = std::max<int64_t>(k * bo - offset, 0), hi = std::min<int64_t>(k * bo - offset + bo, n);
    if (lo >= hi) continue;
    h.left = std::max(h.left, k * h.inBlock - lo);
    h.right = std::max(h.right, hi - (k + 1) * h.inBlock);
  }
  h.fits = h.left <= h.inBlock && h.right <= h.inBlock;
  return h;
}

bool Partitioner::partitionConcat(const Eqn &e) {
  const size_t d = (size_t)e.intParam("dimension");
  const std::vector<Refs> to = target(e.outs[0]);
  const Refs &axes = to[d];
  if (axes.empty()) return false;
  const Value *out = e.outs[0];
  const int64_t bo = blockSize(out->type.shape[d], axes);
  // Each operand from its blocks along `axes` (a halo), or whole: whichever moves fewer bytes.
  struct Piece {
    std::vector<Refs> want;
    Halo halo;
    bool blocks;
  };
  std::vector<Piece> pieces;
  int64_t offset = 0;
  for (const Value *x : e.ins) {
    const int64_t n = x->type.shape[d];
    Piece whole{to, {}, false};
    whole.want[d].clear();
    Piece split{to, windowHalo(n, offset, bo, axes), true};
    int64_t rest = dtypeSize(x->type.dtype);
    const std::vector<int64_t> local = localType(x->type, split.want).shape;
    for (size_t k = 0; k < local.size(); ++k) rest *= k == d ? 1 : local[k];
    const int64_t splitBytes = moveCost(x, split.want) + (split.halo.left + split.halo.right) * rest;
    // (at equal bytes the halo: its transpose moves the halo back, where the whole operand's
    // gradient is summed)
    pieces.push_back(split.halo.fits && splitBytes <= moveCost(x, whole.want) ? split : whole);
    offset += n;
  }
  const Loc loc = e.loc;
  Type t = localType(out->type, to);
  t.vary = 0;
  Value *acc = constant(0, out->type.dtype, t.shape);
  offset = 0;
  for (size_t i = 0; i < e.ins.size(); ++i) {
    const Value *x = e.ins[i];
    const int64_t n = x->type.shape[d];
    const Piece &p = pieces[i];
    Value *v = moved(x, p.want);
    int64_t first = bo - offset, step = bo;  // (where this device's window starts, bo zeros before v)
    if (p.blocks) {
      v = withHalo(v, d, p.halo, axes, loc);
      first += p.halo.left;
      step = bo - p.halo.inBlock;
    } else {
      // (the whole operand made device-varying before it is padded: the backward then sums
      // the operand's gradient, not the padded window's)
      Type b = v->type;
      b.vary = 0;
      v = emit(Prim::Pbroadcast, {v}, b, {{"axes", axesParam(axes)}}, loc);
    }
    // (bo zeros on each side: a window reaching past the operand reads zeros, never a clamped
    // start that would shift the elements it does hold)
    Value *window = blockAt(betweenZeros(v, d, bo, loc), d, first, step, bo, axes, loc);
    // Where the window holds this operand: 0 <= k * bo + j - offset < n.
    Value *q = indexAlong(t.shape, d, axes, bo, -offset, loc);
    const Type flags{DType::Bool, t.shape, 0};
    Value *inside = emit(Prim::And, {emit(Prim::Ge, {q, constant(0, DType::I32, t.shape)}, flags, {}, loc),
                                     emit(Prim::Lt, {q, constant((double)n, DType::I32, t.shape)}, flags, {}, loc)},
                         flags, {}, loc);
    acc = emit(Prim::Select, {inside, window, acc}, t, {}, loc);
    offset += n;
  }
  held_[out] = {acc, to, body_};
  return true;
}

} // namespace shmapc::passes::partition
