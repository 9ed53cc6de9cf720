// Slices of a jit function on the local blocks (passes/jit/Partitioner.h): each dimension a slice
// cuts is computed from the device's own block, with a halo from its neighbours, as a masked
// sum, as every stride-th element gathered, or whole, whichever moves fewest bytes.
#include "passes/jit/Partitioner.h"

#include <algorithm>

namespace shmapc::passes::partition {

Partitioner::Halo Partitioner::haloOf(int64_t n, int64_t s, int64_t o, const Refs &axes) {
  Halo h;
  h.inBlock = blockSize(n, axes), h.outBlock = blockSize(o, axes);
  for (int64_t k = 0; k < shardCount(axes); ++k) {
    const int64_t off = s + k * (h.outBlock - h.inBlock);
    h.left = std::max(h.left, -off);
    h.right = std::max(h.right, off + h.outBlock - h.inBlock);
  }
  h.fits = h.left <= h.inBlock && h.right <= h.inBlock;
  return h;
}

std::pair<std::vector<Refs>, std::vector<Refs>> Partitioner::sliceShardings(const std::vector<SliceDim> &dims) {
  std::vector<Refs> want, result;
  for (const SliceDim &d : dims) {
    want.push_back(d.mode == SliceDim::Cut ? Refs{} : d.axes);
    result.push_back(d.mode == SliceDim::Whole || d.mode == SliceDim::Shift ? d.axes : Refs{});
  }
  return {want, result};
}

int64_t Partitioner::sliceCost(const Eqn &e, const std::vector<SliceDim> &dims, const std::vector<Refs> &to) const {
  const auto [want, result] = sliceShardings(dims);
  const Value *x = e.ins[0];
  int64_t bytes = moveCost(x, want);
  std::vector<int64_t> shape = localType(x->type, want).shape;
  const std::vector<int64_t> &start = e.intsParam("start"), &out = e.outs[0]->type.shape;
  const size_t rank = shape.size();
  auto elements = [&](size_t except) {
    int64_t n = 1;
    for (size_t k = 0; k < shape.size(); ++k) n *= k == except ? 1 : shape[k];
    return n;
  };
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d].mode == SliceDim::Cut) shape[d] = out[d];
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d].mode == SliceDim::Thin) {
      shape[d] /= e.intsParam("strides")[d];
      bytes += elements(rank) * dtypeSize(x->type.dtype);
      shape[d] = out[d];
    }
  bool masked = false;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].mode == SliceDim::Shift) {
      const Halo h = haloOf(x->type.shape[d], start[d], out[d], dims[d].axes);
      bytes += (h.left + h.right) * elements(d) * dtypeSize(x->type.dtype);
      shape[d] = h.outBlock;
    } else if (dims[d].mode == SliceDim::Mask) {
      shape[d] = out[d];
      masked = true;
    }
  }
  if (masked) bytes += elements(rank) * dtypeSize(x->type.dtype);
  return bytes + moveBytes(split_, e.outs[0], result, to);
}

void Partitioner::partitionSlice(const Eqn &e, const rules::FactorRule &rule) {
  const Value *x = e.ins[0];
  const std::vector<Refs> to = target(e.outs[0]), &now = held_.at(x).dims;
  const size_t rank = x->type.shape.size();
  const std::vector<int64_t> &start = e.intsParam("start"), &limit = e.intsParam("limit");
  std::vector<std::vector<SliceDim>> candidates(rank);
  for (size_t d = 0; d < rank; ++d) {
    const rules::Factor *f = nullptr;
    for (const rules::Factor &g : rule.factors)
      if (g.ins[0].dim == (int)d) f = &g;
    auto add = [&](SliceDim c) {
      for (const SliceDim &o : candidates[d])
        if (o.mode == c.mode && o.axes == c.axes) return;
      candidates[d].push_back(std::move(c));
    };
    if (f && !f->shifted) {
      for (const Refs &a : {to[d], now[d], Refs{}}) add({SliceDim::Whole, a});
      continue;
    }
    if (f) {
      for (const Refs &a : {to[d], now[d]})
        if (!a.empty() && haloOf(x->type.shape[d], start[d], limit[d] - start[d], a).fits) add({SliceDim::Shift, a});
      if (!now[d].empty()) add({SliceDim::Mask, now[d]});
    }
    const int64_t stride = e.intsParam("strides")[d];
    if (!f && !now[d].empty() && blockSize(x->type.shape[d], now[d]) % stride == 0) add({SliceDim::Thin, now[d]});
    add({SliceDim::Cut, {}});
  }
  int64_t combinations = 1;
  for (const auto &c : candidates) combinations *= (int64_t)c.size();
  std::vector<SliceDim> best;
  int64_t bestBytes = -1;
  for (int64_t n = 0; n < std::min<int64_t>(combinations, 4096); ++n) {
    std::vector<SliceDim> dims;
    int64_t rest = n;
    for (size_t d = 0; d < rank; ++d) {
      dims.push_back(candidates[d][(size_t)(rest % (int64_t)candidates[d].size())]);
      rest /= (int64_t)candidates[d].size();
    }
    Refs seen;
    bool valid = true;
    for (const SliceDim &d : dims)
      for (const AxisRef &r : d.axes) {
        valid = valid && std::none_of(seen.begin(), seen.end(), [&](const AxisRef &s) { return s.overlaps(r); });
        seen.push_back(r);
      }
    if (!valid) continue;
    const int64_t bytes = sliceCost(e, dims, to);
    if (bestBytes < 0 || bytes < bestBytes) bestBytes = bytes, best = std::move(dims);
  }
  const auto [want, result] = sliceShardings(best);
  Value *v = moved(x, want);
  // The cut dimensions computed unsharded: the slice itself, on them only.
  std::vector<int64_t> lo(rank, 0), hi = v->type.shape, strides(rank, 1);
  bool cut = false;
  for (size_t d = 0; d < rank; ++d)
    if (best[d].mode == SliceDim::Cut) {
      lo[d] = start[d], hi[d] = limit[d], strides[d] = e.intsParam("strides")[d];
      cut = cut || lo[d] != 0 || hi[d] != v->type.shape[d] || strides[d] != 1;
    }
  if (cut) {
    Type t = e.outs[0]->type;
    t.vary = 0;
    t.shape = v->type.shape;
    for (size_t d = 0; d < rank; ++d)
      if (best[d].mode == SliceDim::Cut) t.shape[d] = e.outs[0]->type.shape[d];
    v = emit(Prim::Slice, {v}, t, {{"start", lo}, {"limit", hi}, {"strides", strides}}, e.loc);
  }
  for (size_t d = 0; d < rank; ++d)
    if (best[d].mode == SliceDim::Thin) {
      const int64_t stride = e.intsParam("strides")[d];
      std::vector<int64_t> from(rank, 0), to = v->type.shape, by(rank, 1);
      from[d] = start[d] % stride, by[d] = stride;
      Type t = v->type;
      t.vary = 0;
      t.shape[d] /= stride;
      v = emit(Prim::Slice, {v}, t, {{"start", from}, {"limit", to}, {"strides", by}}, e.loc);
      t.shape[d] *= shardCount(best[d].axes);
      v = emit(Prim::AllGatherInvariant, {v}, t,
               {{"axes", axesParam(best[d].axes)}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}}, e.loc);
      v = sliceAlong(v, d, start[d] / stride, e.outs[0]->type.shape[d], e.loc);
    }
  std::vector<int64_t> sums;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t o = limit[d] - start[d];
    if (best[d].mode == SliceDim::Shift) {
      v = shifted(v, d, haloOf(x->type.shape[d], start[d], o, best[d].axes), start[d], best[d].axes, e.loc);
    } else if (best[d].mode == SliceDim::Mask) {
      v = masked(v, d, start[d], o, best[d].axes, e.loc);
      const std::vector<int64_t> more = axesParam(best[d].axes);
      sums.insert(sums.end(), more.begin(), more.end());
    }
  }
  if (!sums.empty()) {
    std::sort(sums.begin(), sums.end());  // (in mesh order, as a spec names them)
    v = emit(Prim::Psum, {v}, v->type, {{"axes", sums}}, e.loc);
  }
  held_[e.outs[0]] = {v, result, body_};
}

Value *Partitioner::sliceAlong(Value *x, size_t d, int64_t from, int64_t size, Loc loc) {
  const size_t rank = x->type.shape.size();
  std::vector<int64_t> lo(rank, 0), hi = x->type.shape, strides(rank, 1);
  lo[d] = from, hi[d] = from + size;
  Type t = x->type;
  t.vary = 0;
  t.shape[d] = size;
  return emit(Prim::Slice, {x}, t, {{"start", lo}, {"limit", hi}, {"strides", strides}}, loc);
}

Value *Partitioner::blockAt(Value *x, size_t d, int64_t first, int64_t step, int64_t size, const Refs &axes, Loc loc) {
  Value *at = deviceOffset(axes, step, first, loc);
  std::vector<Value *> ins = {x};
  for (size_t k = 0; k < x->type.shape.size(); ++k) ins.push_back(k == d ? at : constant(0, DType::I32, {}));
  std::vector<int64_t> sizes = x->type.shape;
  sizes[d] = size;
  Type t = x->type;
  t.vary = 0;
  t.shape = sizes;
  return emit(Prim::DynamicSlice, ins, t, {{"sizes", sizes}}, loc);
}

Value *Partitioner::deviceOffset(const Refs &axes, int64_t step, int64_t first, Loc loc) {
  const Type i32{DType::I32, {}, 0};
  Value *index = emit(Prim::AxisIndex, {}, i32, {{"axes", axesParam(axes)}}, loc);
  Value *at = emit(Prim::Mul, {index, constant((double)step, DType::I32, {})}, i32, {}, loc);
  return first == 0 ? at : emit(Prim::Add, {at, constant((double)first, DType::I32, {})}, i32, {}, loc);
}

Value *Partitioner::indexAlong(const std::vector<int64_t> &shape, size_t d, const Refs &axes, int64_t step,
                               int64_t first, Loc loc) {
  const Type t{DType::I32, shape, 0};
  Value *offsets = emit(Prim::BroadcastInDim, {deviceOffset(axes, step, first, loc)}, t,
                        {{"broadcast_dimensions", std::vector<int64_t>{}}}, loc);
  return emit(Prim::Add, {emit(Prim::Iota, {}, t, {{"dimension", (int64_t)d}}, loc), offsets}, t, {}, loc);
}

Value *Partitioner::withHalo(Value *x, size_t d, const Halo &h, const Refs &axes, Loc loc) {
  const int64_t n = shardCount(axes);
  std::vector<Value *> parts;
  auto neighbour = [&](int64_t from, int64_t size, int64_t towards) {
    std::vector<int64_t> perm;
    for (int64_t k = 0; k < n; ++k)
      if (k + towards >= 0 && k + towards < n) perm.insert(perm.end(), {k, k + towards});
    Value *piece = sliceAlong(x, d, from, size, loc);
    return emit(Prim::Ppermute, {piece}, piece->type, {{"axes", axesParam(axes)}, {"perm", perm}}, loc);
  };
  if (h.left) parts.push_back(neighbour(h.inBlock - h.left, h.left, 1));  // (the block before's end)
  parts.push_back(x);
  if (h.right) parts.push_back(neighbour(0, h.right, -1));  // (the block after's start)
  if (parts.size() == 1) return x;
  Type t = x->type;
  t.vary = 0;
  t.shape[d] = h.left + h.inBlock + h.right;
  return emit(Prim::Concatenate, parts, t, {{"dimension", (int64_t)d}}, loc);
}

Value *Partitioner::betweenZeros(Value *x, size_t d, int64_t count, Loc loc) {
  std::vector<int64_t> zeros = x->type.shape;
  zeros[d] = count;
  Value *z = constant(0, x->type.dtype, zeros);
  Type t = x->type;
  t.vary = 0;
  t.shape[d] += 2 * count;
  return emit(Prim::Concatenate, {z, x, z}, t, {{"dimension", (int64_t)d}}, loc);
}

Value *Partitioner::shifted(Value *x, size_t d, const Halo &h, int64_t start, const Refs &axes, Loc loc) {
  x = withHalo(x, d, h, axes, loc);
  if (h.outBlock == h.inBlock) return h.left + start == 0 ? x : sliceAlong(x, d, h.left + start, h.outBlock, loc);
  return blockAt(x, d, h.left + start, h.outBlock - h.inBlock, h.outBlock, axes, loc);
}

Value *Partitioner::masked(Value *x, size_t d, int64_t start, int64_t o, const Refs &axes, Loc loc) {
  return blockAt(betweenZeros(x, d, o, loc), d, o + start, -x->type.shape[d], o, axes, loc);
}

} // namespace shmapc::passes::partition
