// Collectives: runtime calls with `dev` and the eqn's mesh axis list (an i32 global).
// Shapes passed are per-device block shapes, as the IR types inside a shmap body are.
#include "codegen/CodegenContext.h"

namespace shmapc::codegen {

namespace {
// The group's axes as (pointer to i32 array, count) arguments.
struct AxesArg {
  llvm::Value *ptr, *count;
};
AxesArg axesOf(FuncEmitter &fe, const ir::Eqn &e) {
  const std::vector<int64_t> &axes = e.intsParam("axes");
  return {fe.i32List(axes), fe.i32((int64_t)axes.size())};
}
} // namespace

bool FuncEmitter::emitAllReduce(const ir::Eqn &e, const char *runtimeFn) {
  const ir::Type &t = e.ins[0]->type;
  AxesArg a = axesOf(*this, e);
  callRt(runtimeFn, {dev, dtypeCode(t.dtype), buffer(e.ins[0]), buffer(e.outs[0]),
                     i64(t.numElements()), a.ptr, a.count});
  return true;
}

bool FuncEmitter::emitAllGather(const ir::Eqn &e) {
  const ir::Type &t = e.ins[0]->type;
  AxesArg a = axesOf(*this, e);
  callRt("shm_all_gather", {dev, dtypeCode(t.dtype), buffer(e.ins[0]), buffer(e.outs[0]),
                            i32(t.rank()), me.i64Array(t.shape), i32(e.intParam("axis")),
                            i32(e.intParam("tiled") != 0), a.ptr, a.count});
  return true;
}

// No communication: the block of dimension `axis` at this device's group index. Tiled: a block
// of out.shape[axis] rows; untiled: one row, whose dimension the output drops (same bytes).
bool FuncEmitter::emitPscatter(const ir::Eqn &e) {
  const ir::Type &in = e.ins[0]->type, &out = e.outs[0]->type;
  int64_t axis = e.intParam("axis");
  bool tiled = e.intParam("tiled") != 0;
  if (axis < 0 || axis >= in.rank()) return fail("pscatter: axis out of range");
  if (tiled && out.rank() != in.rank()) return fail("pscatter: tiled output rank differs");
  int64_t block = tiled ? out.shape[axis] : 1;
  AxesArg a = axesOf(*this, e);
  llvm::Value *index = callRt("shm_axis_index", {dev, a.ptr, a.count});
  llvm::Value *starts = entryAlloca(me.i64Ty, std::max<int64_t>(1, in.rank()), "starts");
  for (int64_t d = 0; d < in.rank(); ++d) {
    llvm::Value *s = d == axis ? b.CreateMul(b.CreateSExt(index, me.i64Ty), i64(block)) : i64(0);
    b.CreateStore(s, b.CreateConstGEP1_64(me.i64Ty, starts, d));
  }
  std::vector<int64_t> sizes = in.shape;
  sizes[axis] = block;
  callRt("shm_dynamic_slice", {dtypeCode(in.dtype), buffer(e.ins[0]), i32(in.rank()),
                               me.i64Array(in.shape), starts, me.i64Array(sizes),
                               buffer(e.outs[0])});
  return true;
}

bool FuncEmitter::emitPsumScatter(const ir::Eqn &e) {
  const ir::Type &t = e.ins[0]->type;
  AxesArg a = axesOf(*this, e);
  callRt("shm_psum_scatter",
         {dev, dtypeCode(t.dtype), buffer(e.ins[0]), buffer(e.outs[0]), i32(t.rank()),
          me.i64Array(t.shape), i32(e.intParam("scatter_dimension")),
          i32(e.intParam("tiled") != 0), a.ptr, a.count});
  return true;
}

bool FuncEmitter::emitAllToAll(const ir::Eqn &e) {
  const ir::Type &t = e.ins[0]->type;
  AxesArg a = axesOf(*this, e);
  callRt("shm_all_to_all",
         {dev, dtypeCode(t.dtype), buffer(e.ins[0]), buffer(e.outs[0]), i32(t.rank()),
          me.i64Array(t.shape), i32(e.intParam("split_axis")), i32(e.intParam("concat_axis")),
          i32(e.intParam("tiled") != 0), a.ptr, a.count});
  return true;
}

bool FuncEmitter::emitPpermute(const ir::Eqn &e) {
  const ir::Type &t = e.ins[0]->type;
  const std::vector<int64_t> &perm = e.intsParam("perm");
  if (perm.size() % 2) return fail("ppermute: perm must hold (src, dst) pairs");
  AxesArg a = axesOf(*this, e);
  callRt("shm_ppermute", {dev, dtypeCode(t.dtype), buffer(e.ins[0]), buffer(e.outs[0]),
                          i64(t.numElements()), me.i64Array(perm), i32((int64_t)perm.size() / 2),
                          a.ptr, a.count});
  return true;
}

bool FuncEmitter::emitAxisIndex(const ir::Eqn &e) {
  AxesArg a = axesOf(*this, e);
  b.CreateStore(callRt("shm_axis_index", {dev, a.ptr, a.count}), buffer(e.outs[0]));
  return true;
}

} // namespace shmapc::codegen
