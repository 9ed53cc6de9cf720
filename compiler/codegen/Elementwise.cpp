// Element-wise primitives as loops in LLVM IR, fused: a group of consecutive element-wise
// eqns of one shape (FuncEmitter::plan) becomes a single counted loop. Values used only inside
// the group stay in registers; the rest are stored to their buffers. The loop is the simple
// shape LLVM's loop vectorizer wants (i64 induction from 0 to a constant n, one load per input,
// one store per output), and alias-scope metadata tells it that the buffers are disjoint (every
// value has its own buffer; callers never pass an input buffer as an output), so it needs no
// runtime overlap checks.
//
// Division and remainder follow numpy (floor division; the remainder has the divisor's sign),
// for floats too. Integer division and remainder never trap: by zero they give 0 (as numpy),
// and INT_MIN // -1 gives INT_MIN (the wrapped quotient, as numpy). maximum / minimum
// propagate NaN as numpy's do. Integer pow is computed in double precision and converted back
// with saturation.
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
  llvm::Value *fmodNeedsAdjust(llvm::Value *m, llvm::Value *y);
  llvm::Value *floatRem(llvm::Value *x, llvm::Value *y);
  llvm::Value *floatFloorDiv(llvm::Value *x, llvm::Value *y);
  llvm::Value *maxMin(llvm::Value *x, llvm::Value *y, bool fp, bool isMax);
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

// Floor division and its remainder (numpy's // and %). The C quotient truncates; where the
// C remainder is nonzero and its sign differs from the divisor's, the floor quotient is one
// less and the floor remainder is r + y. A safe divisor (1) is selected first so the division
// never traps: for y == 0 the result is then replaced by 0; for INT_MIN / -1 dividing by 1
// gives INT_MIN and remainder 0, which is what numpy gives. Branch-free, so loops vectorize.
llvm::Value *ScalarOps::intDivRem(llvm::Value *x, llvm::Value *y, bool rem) {
  llvm::Type *t = x->getType();
  unsigned bits = t->getIntegerBitWidth();
  llvm::Value *zero = llvm::ConstantInt::get(t, 0);
  llvm::Value *byZero = b.CreateICmpEQ(y, zero);
  llvm::Value *overflow =
      b.CreateAnd(b.CreateICmpEQ(x, llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(bits))),
                  b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(t, -1)));
  llvm::Value *safe = b.CreateSelect(b.CreateOr(byZero, overflow), llvm::ConstantInt::get(t, 1), y);
  llvm::Value *q = b.CreateSDiv(x, safe), *r = b.CreateSRem(x, safe);
  llvm::Value *signsDiffer = b.CreateICmpSLT(b.CreateXor(r, safe), zero);
  llvm::Value *adjust = b.CreateAnd(b.CreateICmpNE(r, zero), signsDiffer);
  llvm::Value *out = rem ? b.CreateSelect(adjust, b.CreateAdd(r, safe), r)
                         : b.CreateSub(q, b.CreateZExt(adjust, t));
  return b.CreateSelect(byZero, zero, out);
}

// Whether fmod's result `m` is nonzero with a sign other than the divisor `y`'s: there the
// floor remainder is m + y and the floor quotient one less than the truncated one.
llvm::Value *ScalarOps::fmodNeedsAdjust(llvm::Value *m, llvm::Value *y) {
  llvm::Value *zero = llvm::ConstantFP::get(m->getType(), 0.0);
  llvm::Value *signsDiffer = b.CreateXor(b.CreateFCmpOLT(y, zero), b.CreateFCmpOLT(m, zero));
  return b.CreateAnd(b.CreateFCmpONE(m, zero), signsDiffer);
}

// numpy's remainder for floats (npy_remainder): fmod, plus the divisor where fmod's sign
// differs from the divisor's; a zero result takes the divisor's sign. fmod(x, 0) is NaN.
llvm::Value *ScalarOps::floatRem(llvm::Value *x, llvm::Value *y) {
  llvm::Value *zero = llvm::ConstantFP::get(x->getType(), 0.0);
  llvm::Value *m = b.CreateFRem(x, y);  // frem is C fmod
  m = b.CreateSelect(fmodNeedsAdjust(m, y), b.CreateFAdd(m, y), m);
  llvm::Value *signedZero = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, zero, y);
  return b.CreateSelect(b.CreateFCmpOEQ(m, zero), signedZero, m);
}

// numpy's floor_divide for floats (npy_floor_divide / npy_divmod), not floor(x / y): the
// quotient is (x - fmod(x, y)) / y, one less where the remainder is adjusted as above, then
// snapped to the nearest integer. So 1.0 // 0.1 is 9, as in numpy and Python (floor(1 / 0.1)
// would be 10, because 1 / 0.1 rounds up to 10). A zero quotient takes the sign of x / y; a
// zero divisor gives x / y (inf or NaN).
llvm::Value *ScalarOps::floatFloorDiv(llvm::Value *x, llvm::Value *y) {
  llvm::Type *t = x->getType();
  llvm::Value *zero = llvm::ConstantFP::get(t, 0.0), *one = llvm::ConstantFP::get(t, 1.0);
  llvm::Value *m = b.CreateFRem(x, y);
  llvm::Value *q = b.CreateFDiv(b.CreateFSub(x, m), y);
  q = b.CreateSelect(fmodNeedsAdjust(m, y), b.CreateFSub(q, one), q);
  llvm::Value *fl = b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, q);
  llvm::Value *roundUp = b.CreateFCmpOGT(b.CreateFSub(q, fl), llvm::ConstantFP::get(t, 0.5));
  fl = b.CreateSelect(roundUp, b.CreateFAdd(fl, one), fl);
  llvm::Value *trueQuotient = b.CreateFDiv(x, y);
  llvm::Value *signedZero = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, zero, trueQuotient);
  llvm::Value *r = b.CreateSelect(b.CreateFCmpOEQ(q, zero), signedZero, fl);
  return b.CreateSelect(b.CreateFCmpOEQ(y, zero), trueQuotient, r);
}

// numpy's maximum / minimum: (x >= y || isnan(x)) ? x : y, so a NaN on either side wins (and
// of -0 and +0 the first operand). LLVM's maxnum / minnum would drop the NaN.
llvm::Value *ScalarOps::maxMin(llvm::Value *x, llvm::Value *y, bool fp, bool isMax) {
  if (!fp) return b.CreateBinaryIntrinsic(isMax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, x, y);
  llvm::Value *keepX = isMax ? b.CreateFCmpOGE(x, y) : b.CreateFCmpOLE(x, y);
  return b.CreateSelect(b.CreateOr(keepX, b.CreateFCmpUNO(x, x)), x, y);
}

llvm::Value *ScalarOps::apply(const ir::Eqn &e, const std::vector<llvm::Value *> &x) {
  ir::DType out = e.outs[0]->type.dtype;
  ir::DType t = e.ins.empty() ? out : e.ins.back()->type.dtype;  // select: the data operands
  bool fp = ir::isFloat(t), isBool = t == ir::DType::Bool;
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
  case P::Floor: return floatOnly(e, fp, llvm::Intrinsic::floor, x[0]);
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
  case P::FloorDiv:
    if (fp) return floatFloorDiv(x[0], x[1]);
    return isBool ? b.CreateAnd(x[0], x[1]) : intDivRem(x[0], x[1], false);
  case P::Rem:
    if (fp) return floatRem(x[0], x[1]);
    return isBool ? b.getInt8(0) : intDivRem(x[0], x[1], true);
  case P::Max:
  case P::Min: return maxMin(x[0], x[1], fp, e.prim == P::Max);  // bool: smax/smin of 0/1
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
