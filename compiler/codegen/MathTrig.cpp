// sin and cos in double (f32 rounds the result once, with shorter polynomials): x = j pi/2 + r
// with |r| <= pi/4, r carried as two doubles, then sin(r) or cos(r) by the quadrant j mod 4.
// For |x| < 2^20 the reduction subtracts j * pi/2 in four parts, the first three exact
// (Cody and Waite); beyond that (and at infinity) a rare path calls the runtime's exact
// reduction (runtime/math_reduce.cpp, Payne and Hanek's method) through a function with vector
// variants, so the loop stays vectorized: the variants return at once when no lane is that
// large, which is every vector in practice.
#include "codegen/Math.h"
#include "codegen/MathCoefficients.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

namespace shmapc::codegen::math {

namespace {

// sin or cos of x = j pi/2 + hi + lo, from the quadrant j (an integer of o.it).
llvm::Value *fromReduced(Ops &o, llvm::Value *hi, llvm::Value *lo, llvm::Value *j, bool cosine, bool shortPolys) {
  llvm::IRBuilder<> &b = o.b;
  llvm::Value *z = o.mul(hi, hi);
  llvm::ArrayRef<double> sinPoly = shortPolys ? llvm::ArrayRef<double>(kSinPolyF32) : kSinPolyF64;
  llvm::ArrayRef<double> cosPoly = shortPolys ? llvm::ArrayRef<double>(kCosPolyF32) : kCosPolyF64;
  // sin(hi + lo) = hi + (hi z S(z) + lo), to within lo * z / 2
  llvm::Value *sinR = o.add(hi, o.add(o.mul(o.mul(hi, z), o.horner(z, sinPoly)), lo));
  // cos(hi + lo) = 1 - z/2 + z^2 C(z) - hi lo, with 1 - z/2 split so its rounding error is kept
  llvm::Value *hz = o.mul(o.c(0.5), z);
  llvm::Value *w = o.sub(o.c(1.0), hz);
  llvm::Value *corr = o.add(o.sub(o.sub(o.c(1.0), w), hz), o.sub(o.mul(o.mul(z, z), o.horner(z, cosPoly)), o.mul(hi, lo)));
  llvm::Value *cosR = o.add(w, corr);
  // sin(x): quadrants 0..3 give sin r, cos r, -sin r, -cos r; cos(x) is sin(x + pi/2).
  llvm::Value *q = cosine ? b.CreateAdd(j, o.ci(1)) : j;
  llvm::Value *swap = b.CreateICmpNE(b.CreateAnd(q, o.ci(1)), o.ci(0));
  llvm::Value *negate = b.CreateICmpNE(b.CreateAnd(q, o.ci(2)), o.ci(0));
  llvm::Value *v = o.select(swap, cosR, sinR);
  return o.select(negate, o.neg(v), v);
}

llvm::Function *hugeScalar(llvm::Module &m, const std::string &name, bool cosine, bool shortPolys) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Type *d = llvm::Type::getDoubleTy(ctx);
  // Not inlined, so the loop vectorizer sees a call it can replace with a variant; no memory
  // the caller sees (the reduction writes this function's own stack).
  llvm::Function *f = pureFunction(m, name, d, 1);
  f->addFnAttr(llvm::Attribute::NoInline);
  llvm::BasicBlock *entry = &f->getEntryBlock();
  llvm::BasicBlock *reduce = llvm::BasicBlock::Create(ctx, "reduce", f);
  llvm::BasicBlock *small = llvm::BasicBlock::Create(ctx, "small", f);
  llvm::IRBuilder<> b(entry);
  llvm::Value *x = f->getArg(0);
  llvm::Value *hiSlot = b.CreateAlloca(d), *loSlot = b.CreateAlloca(d);
  llvm::Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  b.CreateCondBr(b.CreateFCmpOGE(ax, llvm::ConstantFP::get(d, kHugeArgument)), reduce, small);
  b.SetInsertPoint(small);
  b.CreateRet(llvm::ConstantFP::get(d, 0.0));
  b.SetInsertPoint(reduce);
  llvm::FunctionCallee rt = m.getOrInsertFunction(
      "shm_rem_pio2", llvm::FunctionType::get(b.getInt32Ty(), {d, b.getPtrTy(), b.getPtrTy()}, false));
  llvm::Value *j32 = b.CreateCall(rt, {x, hiSlot, loSlot});
  Ops o(b, d);
  llvm::Value *hi = b.CreateLoad(d, hiSlot), *lo = b.CreateLoad(d, loSlot);
  b.CreateRet(fromReduced(o, hi, lo, b.CreateSExt(j32, o.it), cosine, shortPolys));
  return f;
}

// The variant on `lanes` doubles: nothing to do unless a lane is huge, then the scalar function
// on each lane (which returns 0 for the others).
llvm::Function *hugeVariant(llvm::Module &m, llvm::Function *scalar, unsigned lanes) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Type *vt = llvm::FixedVectorType::get(llvm::Type::getDoubleTy(ctx), lanes);
  llvm::Function *f = pureFunction(m, scalar->getName().str() + ".v" + std::to_string(lanes), vt, 1);
  llvm::BasicBlock *entry = &f->getEntryBlock();
  llvm::BasicBlock *lanesBlock = llvm::BasicBlock::Create(ctx, "lanes", f);
  llvm::BasicBlock *none = llvm::BasicBlock::Create(ctx, "none", f);
  llvm::IRBuilder<> b(entry);
  llvm::Value *x = f->getArg(0);
  llvm::Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  llvm::Value *huge = b.CreateFCmpOGE(ax, llvm::ConstantFP::get(vt, kHugeArgument));
  b.CreateCondBr(b.CreateOrReduce(huge), lanesBlock, none);
  b.SetInsertPoint(none);
  b.CreateRet(llvm::Constant::getNullValue(vt));
  b.SetInsertPoint(lanesBlock);
  llvm::Value *out = llvm::Constant::getNullValue(vt);
  for (unsigned i = 0; i < lanes; ++i)
    out = b.CreateInsertElement(out, b.CreateCall(scalar, {b.CreateExtractElement(x, i)}), i);
  b.CreateRet(out);
  return f;
}

} // namespace

llvm::Function *sinCosHugeFunction(llvm::Module &m, bool cosine, bool shortPolys, unsigned lanes) {
  const std::string name = std::string("shm.math.") + (cosine ? "cos" : "sin") + (shortPolys ? ".f32" : ".f64") + ".huge";
  if (llvm::Function *f = m.getFunction(name))
    return lanes == 1 ? f : m.getFunction(name + ".v" + std::to_string(lanes));
  llvm::Function *scalar = hugeScalar(m, name, cosine, shortPolys);
  std::vector<llvm::GlobalValue *> keep;
  for (unsigned lanes : kVariantLanes) keep.push_back(hugeVariant(m, scalar, lanes));
  // The variants are referenced only by the attribute until the vectorizer calls them.
  llvm::appendToCompilerUsed(m, keep);
  return lanes == 1 ? scalar : m.getFunction(name + ".v" + std::to_string(lanes));
}

llvm::Value *sinCosDouble(Ops &o, llvm::Value *x, bool cosine, bool shortPolys, llvm::Function *hugeFn) {
  llvm::IRBuilder<> &b = o.b;
  llvm::Value *j;
  llvm::Value *jf = o.roundToInt(o.mul(x, o.c(kTwoOverPi[0])), &j);
  // x - j p1 is exact (j p1 is, and it is within a factor 2 of x); the next two parts' products
  // are exact too, and the differences keep their rounding errors.
  llvm::Value *t1 = o.sub(x, o.mul(jf, o.c(kPio2Parts[0])));
  llvm::Value *t2, *e2, *t3, *e3;
  o.twoSum(t1, o.neg(o.mul(jf, o.c(kPio2Parts[1]))), t2, e2);
  o.twoSum(t2, o.neg(o.mul(jf, o.c(kPio2Parts[2]))), t3, e3);
  llvm::Value *tail = o.sub(o.add(e2, e3), o.mul(jf, o.c(kPio2Parts[3])));
  llvm::Value *hi = o.add(t3, tail);
  llvm::Value *lo = o.sub(tail, o.sub(hi, t3));
  llvm::Value *fast = fromReduced(o, hi, lo, j, cosine, shortPolys);
  if (!cosine) fast = o.select(o.eq(x, o.c(0.0)), x, fast);  // sin(-0) = -0
  llvm::CallInst *huge = b.CreateCall(hugeFn, {x});
  if (!hugeFn->getReturnType()->isVectorTy())  // the scalar function: the vectorizer may widen it
    huge->addFnAttr(vectorVariants(b.getContext(), hugeFn->getName().str(), 1));
  return o.select(o.ge(o.abs(x), o.c(kHugeArgument)), huge, fast);
}

} // namespace shmapc::codegen::math
