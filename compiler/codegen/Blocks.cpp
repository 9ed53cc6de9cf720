// Host values in the blocks form (ModuleEmitter::blocksLayout, SHM_BLOCKS): a value only
// shmaps read, in one layout, is kept as the rank's blocks of it, so that under MPI a rank's
// parameters and optimizer state are 1/N of the model. Its size is known only at run time
// (the devices a rank runs are), so it has its own allocation (StorageKind::Blocks) and its
// copies and scratch buffers ask the runtime for its bytes.
#include "codegen/CodegenContext.h"

namespace shmapc::codegen {

std::vector<int32_t> encodeSpec(const ir::PartitionSpec &spec, int64_t rank) {
  std::vector<int32_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    const std::vector<int> none;
    const std::vector<int> &axes = d < (int64_t)spec.dims.size() ? spec.dims[d] : none;
    out.push_back((int32_t)axes.size());
    for (int a : axes) out.push_back(a);
  }
  return out;
}

std::vector<llvm::Value *> FuncEmitter::blocksArgs(const ir::Value *v) {
  const ShmapLayout &layout = *me.blocksLayout(v);
  const ir::Mesh &mesh = *me.irm.meshes[(size_t)layout.mesh];
  const ir::Type &t = v->type;
  return {i32((int64_t)mesh.sizes.size()), me.i64Array(mesh.sizes), dtypeCode(t.dtype), i32(t.rank()),
          me.i64Array(t.shape), me.i32Array(encodeSpec(layout.spec, t.rank()))};
}

llvm::Value *FuncEmitter::bytesOf(const ir::Value *v) {
  if (!me.blocksLayout(v)) return i64(v->type.byteSize());
  return callRt("shm_blocks_bytes", blocksArgs(v), "blocks.bytes");
}

llvm::Value *FuncEmitter::scratchFor(const ir::Value *v) {
  if (!me.blocksLayout(v)) return scratch(v->type);
  llvm::Value *p = callRt("shm_alloc", {bytesOf(v)});
  scratch_.push_back(p);
  return p;
}

void FuncEmitter::copyValue(llvm::Value *dst, llvm::Value *src, const ir::Value *v) {
  if (!me.blocksLayout(v)) return copyBytes(dst, src, v->type.byteSize());
  b.CreateMemCpy(dst, llvm::MaybeAlign(1), src, llvm::MaybeAlign(1), bytesOf(v));
}

bool FuncEmitter::writesBlocks(const ir::Eqn &e, size_t k) const {
  const ShmapLayout *layout = me.blocksLayout(e.outs[k]);
  if (!layout) return false;
  switch (e.prim) {
  case ir::Prim::Shmap:  // its spec, and each rank's devices write its blocks (staysSplit)
    return *layout == ShmapLayout{e.intParam("mesh"), e.specsParam("out_specs")[k]} && staysSplit(e, k);
  case ir::Prim::Load: return !e.has("spec");
  case ir::Prim::RandomNormal:
  case ir::Prim::RandomUniform: return true;
  case ir::Prim::Constant: return e.doublesParam("value").size() == 1;  // a splat
  case ir::Prim::Call:  // (the callee's, the bodies' values share the form)
  case ir::Prim::Loop:
  case ir::Prim::While:
  case ir::Prim::Cond: return true;
  default: return false;
  }
}

// `v`, computed whole (its buffer valid on this rank), to its blocks: a value the host
// computed, or a shmap output in another layout, that only shmaps read.
void FuncEmitter::convertToBlocks(const ir::Value *v) {
  llvm::Value *global = buffer(v);
  llvm::Value *blocks = callRt("shm_alloc", {bytesOf(v)}, "blocks");
  scratch_.push_back(blocks);
  std::vector<llvm::Value *> args = blocksArgs(v);
  args.push_back(global);
  args.push_back(blocks);
  callRt("shm_to_blocks", args);
  buffers_[v] = blocks;
}

} // namespace shmapc::codegen
