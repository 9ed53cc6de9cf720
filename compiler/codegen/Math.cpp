// The math functions' entry point and the operations they are written with (Math.h).
#include "codegen/Math.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

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

llvm::Value *Ops::scaleBy2Normal(llvm::Value *p, llvm::Value *k) {
  return mul(p, fromBits(b.CreateShl(b.CreateAdd(k, ci(exponentBias)), ci(mantissaBits))));
}

void Ops::fastTwoSum(llvm::Value *x, llvm::Value *y, llvm::Value *&s, llvm::Value *&e) {
  s = add(x, y);
  e = sub(y, sub(s, x));
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

// t's shape with double elements (pow, sin and cos compute in double).
llvm::Type *doubles(llvm::Type *t) {
  llvm::Type *d = llvm::Type::getDoubleTy(t->getContext());
  if (auto *vt = llvm::dyn_cast<llvm::VectorType>(t)) return llvm::VectorType::get(d, vt->getElementCount());
  return d;
}

// `name` of `args`, of type t (scalar or vector), emitted at b.
llvm::Value *body(llvm::IRBuilder<> &b, llvm::Module &m, const std::string &name, llvm::Type *t,
                  llvm::ArrayRef<llvm::Value *> args) {
  const bool single = t->getScalarType()->isFloatTy();
  llvm::Value *x = args[0];
  llvm::Value *result;
  if (name == "exp" || name == "log" || name == "tanh") {
    Ops o(b, t);
    result = name == "exp" ? exp(o, x) : name == "log" ? log(o, x) : tanh(o, x);
  } else {
    llvm::Type *d = doubles(t);
    Ops o(b, d);
    auto widen = [&](llvm::Value *v) { return single ? b.CreateFPExt(v, d) : v; };
    if (name == "pow") {
      result = powDouble(o, widen(x), widen(args[1]));
    } else {  // sin, cos
      const bool cosine = name == "cos";
      unsigned lanes = 1;
      if (auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) lanes = vt->getNumElements();
      result = sinCosDouble(o, widen(x), cosine, single, sinCosHugeFunction(m, cosine, single, lanes));
    }
  }
  return result->getType() != t ? b.CreateFPTrunc(result, t) : result;
}

llvm::Function *newFunction(llvm::Module &m, const std::string &fnName, const std::string &name, llvm::Type *t,
                            unsigned arity) {
  llvm::Function *f = pureFunction(m, fnName, t, arity);
  llvm::IRBuilder<> b(&f->getEntryBlock());
  std::vector<llvm::Value *> args;
  for (llvm::Argument &a : f->args()) args.push_back(&a);
  b.CreateRet(body(b, m, name, t, args));
  return f;
}

std::string functionName(const std::string &name, llvm::Type *t, const char *suffix) {
  return "shm.math." + name + (t->isFloatTy() ? ".f32" : ".f64") + suffix;
}

} // namespace

const unsigned kVariantLanes[] = {2, 4, 8, 16};

llvm::Function *pureFunction(llvm::Module &m, const std::string &name, llvm::Type *t, unsigned arity) {
  std::vector<llvm::Type *> params(arity, t);
  llvm::Function *f = llvm::Function::Create(llvm::FunctionType::get(t, params, false),
                                             llvm::Function::InternalLinkage, name, m);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  f->addFnAttr(llvm::Attribute::WillReturn);
  f->setDoesNotAccessMemory();
  llvm::BasicBlock::Create(m.getContext(), "entry", f);
  return f;
}

llvm::Attribute vectorVariants(llvm::LLVMContext &ctx, const std::string &name, unsigned arity) {
  // "_ZGV_LLVM_N4v_NAME(NAME.v4),...": at 4 lanes, call NAME.v4.
  std::string abi;
  for (unsigned lanes : kVariantLanes)
    abi += (abi.empty() ? "" : ",") + ("_ZGV_LLVM_N" + std::to_string(lanes) + std::string(arity, 'v') + "_" + name +
                                       "(" + name + ".v" + std::to_string(lanes) + ")");
  return llvm::Attribute::get(ctx, "vector-function-abi-variant", abi);
}

llvm::Value *call(llvm::IRBuilder<> &b, llvm::Module &m, const std::string &name,
                  llvm::ArrayRef<llvm::Value *> args, bool inlined) {
  llvm::Type *t = args[0]->getType();
  const unsigned arity = (unsigned)args.size();
  if (inlined) {
    // Always inlined: the loop vectorizer then widens the operations themselves (or -O0 runs
    // them as they are).
    const std::string fnName = functionName(name, t, "");
    llvm::Function *f = m.getFunction(fnName);
    if (!f) {
      f = newFunction(m, fnName, name, t, arity);
      f->addFnAttr(llvm::Attribute::AlwaysInline);
    }
    return b.CreateCall(f, args);
  }
  // Out of line, for loops with many calls, whose inlined copies would cost compile time: the
  // call carries the vector variants (the same operations on vectors) the vectorizer may call.
  const std::string fnName = functionName(name, t, ".call");
  llvm::Function *f = m.getFunction(fnName);
  if (!f) {
    for (unsigned lanes : kVariantLanes) {
      llvm::Function *v =
          newFunction(m, fnName + ".v" + std::to_string(lanes), name, llvm::FixedVectorType::get(t, lanes), arity);
      llvm::appendToCompilerUsed(m, {v});  // referenced only by the attribute until vectorized
    }
    f = newFunction(m, fnName, name, t, arity);
    f->addFnAttr(llvm::Attribute::NoInline);  // the vectorizer must see the call
  }
  llvm::CallInst *c = b.CreateCall(f, args);
  c->addFnAttr(vectorVariants(m.getContext(), fnName, arity));
  return c;
}

} // namespace shmapc::codegen::math
