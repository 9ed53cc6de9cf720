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

// How a fused loop reads the operand of a broadcast_in_dim at flat output index i: the one
// element (a scalar), i % size (the operand fills the trailing dimensions: a bias [n] added to
// [m, n]) or i / (out size / size) (it fills the leading ones); None: not fusible.
enum class BroadcastRead { None, Scalar, Trailing, Leading };

static BroadcastRead broadcastRead(const ir::Eqn &e) {
  const ir::Type &in = e.ins[0]->type, &out = e.outs[0]->type;
  if (in.numElements() == 1) return BroadcastRead::Scalar;
  // The output dimensions the operand's non-1 dimensions fill, in order (a dimension of size
  // 1 repeats along its output dimension and does not move the operand's index).
  const std::vector<int64_t> &bd = e.intsParam("broadcast_dimensions");
  std::vector<int64_t> filled;
  for (size_t d = 0; d < bd.size(); ++d) {
    if (in.shape[d] == 1) continue;
    if (in.shape[d] != out.shape[bd[d]]) return BroadcastRead::None;
    filled.push_back(bd[d]);
  }
  int64_t k = (int64_t)filled.size(), R = out.rank();
  bool trailing = true, leading = true;
  for (int64_t j = 0; j < k; ++j) {
    trailing = trailing && filled[j] == R - k + j;
    leading = leading && filled[j] == j;
  }
  return trailing ? BroadcastRead::Trailing : leading ? BroadcastRead::Leading : BroadcastRead::None;
}

// Whether an eqn can be computed inside a fused element-wise loop: it has a scalar rule, a
// constant is one value repeated per element, and a broadcast reads its operand at an index
// computed from the loop's (broadcastRead).
bool FuncEmitter::isFusible(const ir::Eqn &e) {
  if (!prims::rulesOf(e.prim).scalar) return false;
  if (e.prim == P::Constant) return e.doublesParam("value").size() == 1;
  if (e.prim == P::BroadcastInDim) return broadcastRead(e) != BroadcastRead::None;
  return true;
}

llvm::Value *ScalarCtx::error(const std::string &why) {
  fe.fail(std::string(ir::primName(e.prim)) + ": " + why);
  return nullptr;
}

// ---- f16 / bf16 <-> f32 (the algorithms of runtime/half.h, on i32 lanes)

llvm::Value *halfToF32(llvm::IRBuilder<> &b, llvm::Value *bits, ir::DType t) {
  llvm::Type *i32 = b.getInt32Ty();
  llvm::Value *h = b.CreateZExt(bits, i32);
  auto c = [&](uint32_t v) { return b.getInt32(v); };
  if (t == ir::DType::BF16) return b.CreateBitCast(b.CreateShl(h, c(16)), b.getFloatTy());
  llvm::Value *sign = b.CreateShl(b.CreateAnd(h, c(0x8000)), c(16));
  llvm::Value *exp = b.CreateAnd(b.CreateLShr(h, c(10)), c(0x1f));
  llvm::Value *man = b.CreateAnd(h, c(0x3ff));
  llvm::Value *manBits = b.CreateShl(man, c(13));
  // normal: rebias 15 -> 127; inf / NaN: all exponent bits; zero / subnormal: man * 2^-24
  llvm::Value *normal = b.CreateOr(b.CreateShl(b.CreateAdd(exp, c(112)), c(23)), manBits);
  llvm::Value *special = b.CreateOr(c(0x7f800000), manBits);
  llvm::Value *sub = b.CreateBitCast(
      b.CreateFMul(b.CreateUIToFP(man, b.getFloatTy()), llvm::ConstantFP::get(b.getFloatTy(), 0x1p-24)), i32);
  llvm::Value *mag = b.CreateSelect(b.CreateICmpEQ(exp, c(0)), sub,
                                    b.CreateSelect(b.CreateICmpEQ(exp, c(0x1f)), special, normal));
  return b.CreateBitCast(b.CreateOr(sign, mag), b.getFloatTy());
}

llvm::Value *f32ToHalf(llvm::IRBuilder<> &b, llvm::Value *f, ir::DType t) {
  llvm::Type *i16 = b.getInt16Ty();
  auto c = [&](uint32_t v) { return b.getInt32(v); };
  llvm::Value *u = b.CreateBitCast(f, b.getInt32Ty());
  llvm::Value *signHalf = b.CreateAnd(b.CreateLShr(u, c(16)), c(0x8000));
  llvm::Value *a = b.CreateAnd(u, c(0x7fffffff));
  llvm::Value *isNan = b.CreateICmpUGT(a, c(0x7f800000));
  if (t == ir::DType::BF16) {
    llvm::Value *odd = b.CreateAnd(b.CreateLShr(u, c(16)), c(1));
    llvm::Value *r = b.CreateLShr(b.CreateAdd(b.CreateAdd(u, c(0x7fff)), odd), c(16));
    return b.CreateTrunc(b.CreateSelect(isNan, b.CreateOr(signHalf, c(0x7fc0)), r), i16);
  }
  // normal f16 (a >= 2^-14): rebias 127 -> 15, round the 13 dropped bits to nearest even
  llvm::Value *r = b.CreateSub(a, c(0x38000000));
  r = b.CreateAdd(b.CreateAdd(r, c(0xfff)), b.CreateAnd(b.CreateLShr(r, c(13)), c(1)));
  llvm::Value *normal = b.CreateLShr(r, c(13));
  // subnormal (a < 2^-14): the 24-bit significand shifted right by 126 - e, to nearest even
  // (the shift clamped to [1, 24] so it is defined in the lanes that do not use it)
  llvm::Value *e = b.CreateLShr(a, c(23));
  llvm::Value *shift = b.CreateSub(c(126), e);
  shift = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax,
                                  b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, shift, c(24)), c(1));
  llvm::Value *m = b.CreateOr(b.CreateAnd(a, c(0x7fffff)), c(0x800000));
  llvm::Value *q = b.CreateLShr(m, shift);
  llvm::Value *rem = b.CreateAnd(m, b.CreateSub(b.CreateShl(c(1), shift), c(1)));
  llvm::Value *halfUlp = b.CreateShl(c(1), b.CreateSub(shift, c(1)));
  llvm::Value *up = b.CreateOr(b.CreateICmpUGT(rem, halfUlp),
                               b.CreateAnd(b.CreateICmpEQ(rem, halfUlp), b.CreateICmpNE(b.CreateAnd(q, c(1)), c(0))));
  llvm::Value *sub = b.CreateAdd(q, b.CreateZExt(up, b.getInt32Ty()));
  sub = b.CreateSelect(b.CreateICmpULT(e, c(102)), c(0), sub);  // below 2^-25: 0
  llvm::Value *mag = b.CreateSelect(
      isNan, c(0x7e00),
      b.CreateSelect(b.CreateICmpUGE(a, c(0x477ff000)), c(0x7c00),  // >= 65520: inf
                     b.CreateSelect(b.CreateICmpUGE(a, c(0x38800000)), normal, sub)));
  return b.CreateTrunc(b.CreateOr(signHalf, mag), i16);
}

llvm::Value *ScalarCtx::convert(llvm::Value *v, ir::DType from, ir::DType to) {
  // f16 / bf16 elements are f32 values: from them, convert as from f32; to them, convert to
  // f32 (the loop rounds the result to the half type).
  if (ir::isHalf(from)) from = ir::DType::F32;
  if (ir::isHalf(to)) to = ir::DType::F32;
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
  // The loop runs over the group's shape; its one-element values (FuncEmitter::plan) are the
  // same in every iteration, read and written at element 0.
  int64_t n = 0;
  for (size_t i = first; i <= last; ++i) n = std::max(n, f.eqns[i].outs[0]->type.numElements());
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
  // `v`'s element for this iteration; `at` overrides the index (a broadcast's operand).
  // A broadcast's operand is not cached: two broadcasts of one array (a[:, None] * a[None, :])
  // read it at different indices.
  auto load = [&](const ir::Value *v, llvm::Value *at) -> llvm::Value * {
    if (v->type.numElements() == 1) at = nullptr;
    auto it = elem.find(v);
    if (!at && it != elem.end()) return it->second;
    llvm::Type *t = me.elemType(v->type.dtype);
    llvm::Value *buf = buffer(v);
    if (v->type.numElements() == 1) at = i64(0);
    llvm::LoadInst *ld = b.CreateLoad(t, b.CreateInBoundsGEP(t, buf, at ? at : idx));
    tagAccess(ld, buf);
    llvm::Value *x = ir::isHalf(v->type.dtype) ? halfToF32(b, ld, v->type.dtype) : ld;
    if (!at || v->type.numElements() == 1) elem[v] = x;
    return x;
  };

  for (size_t i = first; i <= last; ++i) {
    const ir::Eqn &e = f.eqns[i];
    std::vector<llvm::Value *> x;
    llvm::Value *at = nullptr;  // a broadcast's operand index
    if (e.prim == P::BroadcastInDim) {
      int64_t size = e.ins[0]->type.numElements();
      switch (broadcastRead(e)) {
      case BroadcastRead::Trailing: at = b.CreateURem(idx, i64(size)); break;
      case BroadcastRead::Leading: at = b.CreateUDiv(idx, i64(n / size)); break;
      default: at = i64(0); break;
      }
    }
    for (const ir::Value *v : e.ins) x.push_back(load(v, at));
    ir::DType outType = e.outs[0]->type.dtype;
    ir::DType t = e.ins.empty() ? outType : e.ins.back()->type.dtype;  // select: the data operands
    ScalarCtx c{*this, b, e, x, t, outType, ir::isFloat(t), t == ir::DType::Bool};
    llvm::Value *r = prims::rulesOf(e.prim).scalar(c);
    if (!r) return false;
    const ir::Value *out = e.outs[0];
    // An f16 / bf16 result, computed in f32, is rounded to its type (JAX on CPU rounds every
    // operation's result, also inside a fusion); it is stored as bits and used as f32.
    llvm::Value *bits = nullptr;
    if (ir::isHalf(outType)) {
      bits = f32ToHalf(b, r, outType);
      r = halfToF32(b, bits, outType);
    }
    elem[out] = r;
    if (stored(out)) {  // a one-element value read after the group: element 0
      llvm::Value *buf = buffer(out);
      llvm::Type *t = me.elemType(out->type.dtype);
      llvm::Value *at = out->type.numElements() == 1 ? i64(0) : idx;
      tagAccess(b.CreateStore(bits ? bits : r, b.CreateInBoundsGEP(t, buf, at)), buf);
    }
  }

  if (n > 1) {
    llvm::Value *next = b.CreateAdd(phi, i64(1), "i.next", /*HasNUW=*/true, /*HasNSW=*/true);
    phi->addIncoming(next, b.GetInsertBlock());
    llvm::BranchInst *latch = b.CreateCondBr(b.CreateICmpNE(next, i64(n)), loop, exit);
    if (callsLibm(first, last)) keepScalar(latch);
    b.SetInsertPoint(exit);
  }
  return true;
}

// Whether the group computes exp, log, sin, cos, tanh or pow of floats: libm calls.
bool FuncEmitter::callsLibm(size_t first, size_t last) const {
  for (size_t i = first; i <= last; ++i) {
    const ir::Eqn &e = f.eqns[i];
    bool floatOut = ir::isFloat(e.outs[0]->type.dtype);
    switch (e.prim) {
    case P::Exp: case P::Log: case P::Sin: case P::Cos: case P::Tanh: case P::Pow:
      if (floatOut) return true;
      break;
    default: break;
    }
  }
  return false;
}

// No vector library is used yet (issue 11), so the vectorizer would split every vector call
// of sin, exp, ... back into one scalar libm call per lane, in a loop it also unrolls: no
// faster, and a chain of 1000 sin statements became some 64,000 calls in straight-line code
// for the backend (seconds of compile time, growing faster than the program). Loops that call
// libm stay scalar; the results are the same libm calls either way.
void FuncEmitter::keepScalar(llvm::BranchInst *latch) {
  llvm::LLVMContext &ctx = me.ctx;
  auto option = [&](const char *name, llvm::Constant *value) {
    return llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, name), llvm::ConstantAsMetadata::get(value)});
  };
  llvm::Metadata *ops[] = {nullptr, option("llvm.loop.vectorize.enable", b.getFalse()),
                           option("llvm.loop.interleave.count", b.getInt32(1))};
  llvm::MDNode *loopId = llvm::MDNode::getDistinct(ctx, ops);
  loopId->replaceOperandWith(0, loopId);
  latch->setMetadata(llvm::LLVMContext::MD_loop, loopId);
}

} // namespace shmapc::codegen
