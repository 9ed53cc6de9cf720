// Element-wise primitives as loops in LLVM IR, fused: a group of consecutive element-wise
// eqns of one shape (FuncEmitter::plan) becomes a single counted loop. Values used only inside
// the group stay in registers; the rest are stored to their buffers. The loop is the simple
// shape LLVM's loop vectorizer wants (i64 induction from 0 to a constant n, one load per input,
// one store per output), and alias-scope metadata tells it that the buffers are disjoint (every
// value has its own buffer; callers never pass an input buffer as an output), so it needs no
// runtime overlap checks.
//
// Integer division and remainder by zero, and INT_MIN / -1, produce 0 instead of trapping.
// Integer pow is computed in double precision and converted back with saturation.
#include "codegen/CodegenContext.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include <algorithm>
#include <cmath>

namespace shmapc::codegen {

using P = ir::Prim;

bool FuncEmitter::isFusible(const ir::Eqn &e) {
  ir::PrimKind k = ir::primInfo(e.prim).kind;
  if (k == ir::PrimKind::Unary || k == ir::PrimKind::Binary || k == ir::PrimKind::Compare)
    return true;
  // pbroadcast moves no data: inside a loop it is the identity, so it does not split a group.
  if (e.prim == P::Select || e.prim == P::Pbroadcast) return true;
  // A splat constant and a broadcast of a single element are a value repeated per element.
  if (e.prim == P::Constant) return e.doublesParam("value").size() == 1;
  if (e.prim == P::BroadcastInDim) return e.ins[0]->type.numElements() == 1;
  return false;
}

namespace {

// Computes one element of an element-wise eqn from its operands' elements.
class ScalarOps {
public:
  ScalarOps(FuncEmitter &fe) : fe(fe), b(fe.b) {}

  llvm::Value *apply(const ir::Eqn &e, const std::vector<llvm::Value *> &x);

private:
  FuncEmitter &fe;
  llvm::IRBuilder<> &b;

  llvm::Value *error(const ir::Eqn &e, const std::string &why) {
    fe.fail(std::string(ir::primName(e.prim)) + ": " + why);
    return nullptr;
  }
  llvm::Value *splat(const ir::Eqn &e);
  llvm::Value *convert(llvm::Value *v, ir::DType from, ir::DType to);
  llvm::Value *intDivRem(llvm::Value *x, llvm::Value *y, bool rem);
  llvm::Value *compare(llvm::CmpInst::Predicate fp, llvm::CmpInst::Predicate in, bool isFp,
                       llvm::Value *x, llvm::Value *y) {
    llvm::Value *c = isFp ? b.CreateFCmp(fp, x, y) : b.CreateICmp(in, x, y);
    return b.CreateZExt(c, fe.me.i8Ty);
  }
  llvm::Value *floatOnly(const ir::Eqn &e, bool isFp, llvm::Intrinsic::ID id, llvm::Value *x) {
    if (!isFp) return error(e, "needs a floating-point operand");
    return b.CreateUnaryIntrinsic(id, x);
  }
};

llvm::Value *ScalarOps::splat(const ir::Eqn &e) {
  double v = e.doublesParam("value")[0];
  ir::DType t = e.outs[0]->type.dtype;
  switch (t) {
  case ir::DType::F32:
  case ir::DType::F64: return llvm::ConstantFP::get(fe.me.elemType(t), v);
  case ir::DType::I32: {
    double c = std::isnan(v) ? 0.0 : std::fmax(-2147483648.0, std::fmin(2147483647.0, v));
    return b.getInt32((uint32_t)(int32_t)c);
  }
  case ir::DType::Bool: return b.getInt8(v != 0 ? 1 : 0);
  }
  return nullptr;
}

llvm::Value *ScalarOps::convert(llvm::Value *v, ir::DType from, ir::DType to) {
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

// Select a safe divisor first so the division itself never traps, then select 0 for the
// undefined cases; branch-free, so the loop still vectorizes.
llvm::Value *ScalarOps::intDivRem(llvm::Value *x, llvm::Value *y, bool rem) {
  llvm::Type *t = x->getType();
  unsigned bits = t->getIntegerBitWidth();
  llvm::Value *zero = llvm::ConstantInt::get(t, 0);
  llvm::Value *byZero = b.CreateICmpEQ(y, zero);
  llvm::Value *overflow =
      b.CreateAnd(b.CreateICmpEQ(x, llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(bits))),
                  b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(t, -1)));
  llvm::Value *bad = b.CreateOr(byZero, overflow);
  llvm::Value *safe = b.CreateSelect(bad, llvm::ConstantInt::get(t, 1), y);
  llvm::Value *q = rem ? b.CreateSRem(x, safe) : b.CreateSDiv(x, safe);
  return b.CreateSelect(bad, zero, q);
}

llvm::Value *ScalarOps::apply(const ir::Eqn &e, const std::vector<llvm::Value *> &x) {
  ir::DType out = e.outs[0]->type.dtype;
  ir::DType t = e.ins.empty() ? out : e.ins.back()->type.dtype;  // select: the data operands
  bool fp = ir::isFloat(t), isBool = t == ir::DType::Bool;
  llvm::Intrinsic::ID id;
  using CP = llvm::CmpInst;
  switch (e.prim) {
  case P::Constant: return splat(e);
  case P::BroadcastInDim:
  case P::Pbroadcast: return x[0];
  case P::Neg: return fp ? b.CreateFNeg(x[0]) : isBool ? x[0] : b.CreateNeg(x[0]);
  case P::Exp: return floatOnly(e, fp, llvm::Intrinsic::exp, x[0]);
  case P::Log: return floatOnly(e, fp, llvm::Intrinsic::log, x[0]);
  case P::Sin: return floatOnly(e, fp, llvm::Intrinsic::sin, x[0]);
  case P::Cos: return floatOnly(e, fp, llvm::Intrinsic::cos, x[0]);
  case P::Sqrt: return floatOnly(e, fp, llvm::Intrinsic::sqrt, x[0]);
  case P::Tanh:
    if (!fp) return error(e, "needs a floating-point operand");
    return b.CreateCall(fe.me.runtime(t == ir::DType::F32 ? "tanhf" : "tanh"), {x[0]});
  case P::Abs:
    if (fp) return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x[0]);
    return isBool ? x[0] : b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x[0], b.getFalse());
  case P::Not: return isBool ? b.CreateXor(x[0], b.getInt8(1)) : b.CreateNot(x[0]);
  case P::Convert: return convert(x[0], t, out);
  // bool arithmetic is arithmetic mod 2 clamped to {0, 1}: + is or, * is and.
  case P::Add: return fp ? b.CreateFAdd(x[0], x[1]) : isBool ? b.CreateOr(x[0], x[1]) : b.CreateAdd(x[0], x[1]);
  case P::Sub: return fp ? b.CreateFSub(x[0], x[1]) : isBool ? b.CreateXor(x[0], x[1]) : b.CreateSub(x[0], x[1]);
  case P::Mul: return fp ? b.CreateFMul(x[0], x[1]) : isBool ? b.CreateAnd(x[0], x[1]) : b.CreateMul(x[0], x[1]);
  case P::Div:
    if (fp) return b.CreateFDiv(x[0], x[1]);
    return isBool ? b.CreateAnd(x[0], x[1]) : intDivRem(x[0], x[1], false);
  case P::Rem:
    if (fp) return b.CreateFRem(x[0], x[1]);  // frem is C fmod
    return isBool ? b.getInt8(0) : intDivRem(x[0], x[1], true);
  case P::Max:
    id = fp ? llvm::Intrinsic::maxnum : llvm::Intrinsic::smax;
    return b.CreateBinaryIntrinsic(id, x[0], x[1]);
  case P::Min:
    id = fp ? llvm::Intrinsic::minnum : llvm::Intrinsic::smin;
    return b.CreateBinaryIntrinsic(id, x[0], x[1]);
  case P::Pow:
    if (fp) return b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x[0], x[1]);
    if (isBool) return b.CreateOr(x[0], b.CreateXor(x[1], b.getInt8(1)));  // x^0 = 1
    return convert(b.CreateBinaryIntrinsic(llvm::Intrinsic::pow,
                                           convert(x[0], t, ir::DType::F64),
                                           convert(x[1], t, ir::DType::F64)),
                   ir::DType::F64, t);
  case P::And: return b.CreateAnd(x[0], x[1]);
  case P::Or: return b.CreateOr(x[0], x[1]);
  // ne is unordered (NaN != NaN is true); the others are ordered (false on NaN), as in C.
  case P::Eq: return compare(CP::FCMP_OEQ, CP::ICMP_EQ, fp, x[0], x[1]);
  case P::Ne: return compare(CP::FCMP_UNE, CP::ICMP_NE, fp, x[0], x[1]);
  case P::Lt: return compare(CP::FCMP_OLT, CP::ICMP_SLT, fp, x[0], x[1]);
  case P::Le: return compare(CP::FCMP_OLE, CP::ICMP_SLE, fp, x[0], x[1]);
  case P::Gt: return compare(CP::FCMP_OGT, CP::ICMP_SGT, fp, x[0], x[1]);
  case P::Ge: return compare(CP::FCMP_OGE, CP::ICMP_SGE, fp, x[0], x[1]);
  case P::Select: return b.CreateSelect(b.CreateICmpNE(x[0], b.getInt8(0)), x[1], x[2]);

  case P::Iota:
  case P::RandomNormal:
  case P::RandomUniform:
  case P::Reshape:
  case P::Transpose:
  case P::ReduceSum:
  case P::ReduceMax:
  case P::ReduceMin:
  case P::Matmul:
  case P::Slice:
  case P::DynamicSlice:
  case P::DynamicUpdateSlice:
  case P::Concatenate:
  case P::Psum:
  case P::Pmax:
  case P::Pmin:
  case P::Psum2:
  case P::AllGather:
  case P::AllGatherInvariant:
  case P::Pscatter:
  case P::PsumScatter:
  case P::AllToAll:
  case P::Ppermute:
  case P::AxisIndex:
  case P::Call:
  case P::Shmap:
  case P::Loop:
  case P::Cond:
  case P::Jvp:
  case P::Vjp:
  case P::Print: break;
  }
  return error(e, "internal error: not an element-wise primitive");
}

} // namespace

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

  ScalarOps ops(*this);
  for (size_t i = first; i <= last; ++i) {
    const ir::Eqn &e = f.eqns[i];
    std::vector<llvm::Value *> x;
    for (const ir::Value *v : e.ins) x.push_back(load(v, e.prim == P::BroadcastInDim));
    llvm::Value *r = ops.apply(e, x);
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
