// The math functions' entry point and the operations they are written with (Math.h).
#include "codegen/Math.h"

#include <llvm/IR/Intrinsics.h>

namespace shmapc::codegen::math {

Ops::Ops(llvm::IRBuilder<> &b, llvm::Type *t) : b(b), t(t) {
  single = t->getScalarType()->isFloatTy();
  mantissaBits = single ? 23 : 52;
  exponentBias = single ? 127 : 1023;
  llvm::Type *ie = single ? b.getInt32Ty() : b.getInt64Ty();
  if (auto *vt = llvm::dyn_cast<llvm::VectorType>(t))
    it = llvm::VectorType::get(ie, vt->getElementCount());
  else
    it = ie;
}

llvm::Value *Ops::c(double v) { return llvm::ConstantFP::get(t, v); }

llvm::Value *Ops::ci(int64_t v) { return llvm::ConstantInt::get(it, (uint64_t)v, /*isSigned=*/true); }

llvm::Value *Ops::abs(llvm::Value *x) { return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }

llvm::Value *Ops::copySign(llvm::Value *magnitude, llvm::Value *sign) {
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, magnitude, sign);
}

llvm::Value *Ops::horner(llvm::Value *z, llvm::ArrayRef<double> coeffs) {
  llvm::Value *acc = c(coeffs.back());
  for (size_t i = coeffs.size() - 1; i-- > 0;) acc = add(c(coeffs[i]), mul(z, acc));
  return acc;
}

llvm::Value *Ops::roundToInt(llvm::Value *v, llvm::Value **k) {
  const double magic = single ? 12582912.0 : 6755399441055744.0;  // 1.5 * 2^23, 1.5 * 2^52
  llvm::Value *shifted = add(v, c(magic));
  if (k) *k = b.CreateSub(bits(shifted), bits(c(magic)));
  return sub(shifted, c(magic));
}

llvm::Value *Ops::scaleBy2(llvm::Value *p, llvm::Value *k) {
  llvm::Value *k1 = b.CreateAShr(k, ci(1));
  llvm::Value *k2 = b.CreateSub(k, k1);
  auto pow2 = [&](llvm::Value *e) { return fromBits(b.CreateShl(b.CreateAdd(e, ci(exponentBias)), ci(mantissaBits))); };
  return mul(mul(p, pow2(k1)), pow2(k2));
}

void Ops::twoSum(llvm::Value *x, llvm::Value *y, llvm::Value *&s, llvm::Value *&e) {
  s = add(x, y);
  llvm::Value *yv = sub(s, x);
  llvm::Value *xv = sub(s, yv);
  e = add(sub(x, xv), sub(y, yv));
}

void Ops::twoProduct(llvm::Value *x, llvm::Value *y, llvm::Value *&h, llvm::Value *&l) {
  const double splitter = single ? 4097.0 : 134217729.0;  // 2^12 + 1, 2^27 + 1
  auto split = [&](llvm::Value *v, llvm::Value *&hi, llvm::Value *&lo) {
    llvm::Value *scaled = mul(v, c(splitter));
    hi = sub(scaled, sub(scaled, v));
    lo = sub(v, hi);
  };
  llvm::Value *xh, *xl, *yh, *yl;
  split(x, xh, xl);
  split(y, yh, yl);
  h = mul(x, y);
  l = add(add(add(sub(mul(xh, yh), h), mul(xh, yl)), mul(xl, yh)), mul(xl, yl));
}

namespace {

// The always-inlined scalar function `shm.math.NAME.f32|f64`: its body is the function on
// the scalar type; the call sits in the fused loop, and once inlined the loop vectorizer widens
// it (or -O0 runs it as it is).
llvm::Function *scalarFunction(llvm::Module &m, const std::string &name, llvm::Type *t, unsigned arity) {
  const bool single = t->isFloatTy();
  const std::string fnName = "shm.math." + name + (single ? ".f32" : ".f64");
  if (llvm::Function *f = m.getFunction(fnName)) return f;
  std::vector<llvm::Type *> params(arity, t);
  llvm::Function *f = llvm::Function::Create(llvm::FunctionType::get(t, params, false),
                                             llvm::Function::InternalLinkage, fnName, m);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  f->addFnAttr(llvm::Attribute::WillReturn);
  f->setDoesNotAccessMemory();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "entry", f));
  llvm::Value *x = f->getArg(0);
  llvm::Type *d = b.getDoubleTy();
  llvm::Value *result = nullptr;
  if (name == "exp" || name == "log" || name == "tanh") {
    Ops o(b, t);
    result = name == "exp" ? exp(o, x) : name == "log" ? log(o, x) : tanh(o, x);
  } else if (name == "pow") {
    Ops o(b, d);
    llvm::Value *y = f->getArg(1);
    result = powDouble(o, single ? b.CreateFPExt(x, d) : x, single ? b.CreateFPExt(y, d) : y);
  } else {  // sin, cos
    const bool cosine = name == "cos";
    Ops o(b, d);
    result = sinCosDouble(o, single ? b.CreateFPExt(x, d) : x, cosine, single,
                          sinCosHugeFunction(m, cosine, single));
  }
  if (result->getType() != t) result = b.CreateFPTrunc(result, t);
  b.CreateRet(result);
  return f;
}

} // namespace

llvm::Value *call(llvm::IRBuilder<> &b, llvm::Module &m, const std::string &name,
                  llvm::ArrayRef<llvm::Value *> args) {
  llvm::Function *f = scalarFunction(m, name, args[0]->getType(), (unsigned)args.size());
  return b.CreateCall(f, args);
}

} // namespace shmapc::codegen::math
