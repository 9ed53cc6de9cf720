// Element-wise primitives as loops in LLVM IR, fused: a group of consecutive element-wise
// eqns of one shape (FuncEmitter::plan) becomes a single counted loop. Values used only inside
// the group stay in registers; the rest are stored to their buffers. The loop is the simple
// shape LLVM's loop vectorizer wants (i64 induction from 0 to a constant n, one load per input,
// one store per output), and alias-scope metadata tells it that the buffers are disjoint (every
// value has its own buffer; callers never pass an input buffer as an output), so it needs no
// runtime overlap checks. Each element is computed by its primitive's `scalar` rule
// (compiler/prims/).
#include "codegen/CodegenContext.h"
#include "prims/Rules.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include <algorithm>

namespace shmapc::codegen {

using P = ir::Prim;

// Whether an eqn can be computed inside a fused element-wise loop: it has a scalar rule, and
// a constant or broadcast is one value repeated per element.
bool FuncEmitter::isFusible(const ir::Eqn &e) {
  if (!prims::rulesOf(e.prim).scalar) return false;
  if (e.prim == P::Constant) return e.doublesParam("value").size() == 1;
  if (e.prim == P::BroadcastInDim) return e.ins[0]->type.numElements() == 1;
  return true;
}

llvm::Value *ScalarCtx::error(const std::string &why) {
  fe.fail(std::string(ir::primName(e.prim)) + ": " + why);
  return nullptr;
}

llvm::Value *ScalarCtx::convert(llvm::Value *v, ir::DType from, ir::DType to) {
  if (from == to) return v;
  llvm::Type *dst = fe.me.elemType(to);
  bool fromFp = ir::isFloat(from), toFp = ir::isFloat(to);
  if (to == ir::DType::Bool) {  // != 0 (NaN counts as true, as in C)
    llvm::Value *nz = fromFp ? b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                             : b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    return b.CreateZExt(nz, dst);
  }
  if (fromFp && toFp) return b.CreateFPCast(v, dst);
  if (fromFp)  // saturating: out-of-range values clamp and NaN gives 0, never poison
    return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {dst, v->getType()}, {v});
  if (from == ir::DType::Bool) return toFp ? b.CreateUIToFP(v, dst) : b.CreateZExt(v, dst);
  return toFp ? b.CreateSIToFP(v, dst) : b.CreateSExtOrTrunc(v, dst);
}

bool FuncEmitter::emitElementwiseGroup(size_t first, size_t last) {
  int64_t n = f.eqns[first].outs[0]->type.numElements();
  if (n == 0) return true;
  llvm::LLVMContext &ctx = me.ctx;

  // One alias scope per buffer the loop touches (inputs read, outputs written).
  std::vector<llvm::Value *> bufs;
  auto addBuf = [&](llvm::Value *p) {
    if (std::find(bufs.begin(), bufs.end(), p) == bufs.end()) bufs.push_back(p);
  };
  // Outputs stored by the loop: not Fused (registers only) nor Alias (a pbroadcast whose
  // input buffer already holds the bytes).
  auto stored = [&](const ir::Value *v) {
    StorageKind k = storage(v).kind;
    return k != StorageKind::Fused && k != StorageKind::Alias;
  };
  std::unordered_map<const ir::Value *, bool> inGroup;
  size_t numStored = 0;
  for (size_t i = first; i <= last; ++i) {
    for (const ir::Value *v : f.eqns[i].ins)
      if (!inGroup.count(v)) addBuf(buffer(v));
    for (const ir::Value *v : f.eqns[i].outs) {
      inGroup[v] = true;
      if (stored(v)) addBuf(buffer(v)), ++numStored;
    }
  }
  if (numStored == 0) return true;  // e.g. only dead values, or a pbroadcast alias
  llvm::MDBuilder mdb(ctx);
  llvm::MDNode *domain = mdb.createAnonymousAliasScopeDomain("shmapc.elementwise");
  std::vector<llvm::Metadata *> scopes;
  for (size_t i = 0; i < bufs.size(); ++i)
    scopes.push_back(mdb.createAnonymousAliasScope(domain));
  auto tagAccess = [&](llvm::Instruction *inst, llvm::Value *buf) {
    size_t k = std::find(bufs.begin(), bufs.end(), buf) - bufs.begin();
    std::vector<llvm::Metadata *> others;
    for (size_t j = 0; j < scopes.size(); ++j)
      if (j != k) others.push_back(scopes[j]);
    inst->setMetadata(llvm::LLVMContext::MD_alias_scope, llvm::MDNode::get(ctx, {scopes[k]}));
    if (!others.empty())
      inst->setMetadata(llvm::LLVMContext::MD_noalias, llvm::MDNode::get(ctx, others));
  };

  // The loop (none for a single element).
  llvm::BasicBlock *loop = nullptr, *exit = nullptr;
  llvm::PHINode *phi = nullptr;
  llvm::Value *idx = i64(0);
  if (n > 1) {
    llvm::BasicBlock *pre = b.GetInsertBlock();
    loop = llvm::BasicBlock::Create(ctx, "ew.loop", fn);
    exit = llvm::BasicBlock::Create(ctx, "ew.exit", fn);
    b.CreateBr(loop);
    b.SetInsertPoint(loop);
    phi = b.CreatePHI(me.i64Ty, 2, "i");
    phi->addIncoming(i64(0), pre);
    idx = phi;
  }

  std::unordered_map<const ir::Value *, llvm::Value *> elem;  // this iteration's elements
  auto load = [&](const ir::Value *v, bool single) -> llvm::Value * {
    auto it = elem.find(v);
    if (it != elem.end()) return it->second;
    llvm::Type *t = me.elemType(v->type.dtype);
    llvm::Value *buf = buffer(v);
    llvm::LoadInst *ld = b.CreateLoad(t, b.CreateInBoundsGEP(t, buf, single ? i64(0) : idx));
    tagAccess(ld, buf);
    return elem[v] = ld;
  };

  for (size_t i = first; i <= last; ++i) {
    const ir::Eqn &e = f.eqns[i];
    std::vector<llvm::Value *> x;
    for (const ir::Value *v : e.ins) x.push_back(load(v, e.prim == P::BroadcastInDim));
    ir::DType outType = e.outs[0]->type.dtype;
    ir::DType t = e.ins.empty() ? outType : e.ins.back()->type.dtype;  // select: the data operands
    ScalarCtx c{*this, b, e, x, t, outType, ir::isFloat(t), t == ir::DType::Bool};
    llvm::Value *r = prims::rulesOf(e.prim).scalar(c);
    if (!r) return false;
    const ir::Value *out = e.outs[0];
    elem[out] = r;
    if (stored(out)) {
      llvm::Value *buf = buffer(out);
      llvm::Type *t = me.elemType(out->type.dtype);
      tagAccess(b.CreateStore(r, b.CreateInBoundsGEP(t, buf, idx)), buf);
    }
  }

  if (n > 1) {
    llvm::Value *next = b.CreateAdd(phi, i64(1), "i.next", /*HasNUW=*/true, /*HasNSW=*/true);
    phi->addIncoming(next, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpNE(next, i64(n)), loop, exit);
    b.SetInsertPoint(exit);
  }
  return true;
}

} // namespace shmapc::codegen
