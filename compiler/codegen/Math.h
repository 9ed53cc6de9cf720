// The element-wise math functions of fused loops (exp, log, sin, cos, tanh, pow), defined by
// the compiler: each is a fixed sequence of IEEE-754 operations (add, multiply, divide,
// compare, select, integer operations on the bits), never a fused multiply-add and never a
// library call whose code depends on the machine. Every lane of a vector computes exactly what
// the scalar code computes, so a program prints the same bits on every x86-64 CPU, at every
// vector width the loop vectorizer picks, at every -O. Accuracy: docs/numerics.md.
//
// The functions are written once against Ops, which emits the same operations for a scalar or
// a vector type; the fused loop calls the scalar form (an always-inlined function) and the loop
// vectorizer widens the inlined operations. sin and cos of |x| >= 2^20 take a rare path
// (MathTrig.cpp) whose argument reduction is runtime/math_reduce.cpp.
#pragma once
#include <llvm/ADT/ArrayRef.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <string>

namespace shmapc::codegen::math {

// `name` of `args` (float or double scalars of one type), as a call of a function emitted once
// per module. `name` is one of exp, log, sin, cos, tanh, pow. `inlined`: the function is
// inlined where it is called (fast code); otherwise called, with vector variants of itself
// (fast compilation of loops with many calls). Both compute the same bits.
llvm::Value *call(llvm::IRBuilder<> &b, llvm::Module &m, const std::string &name,
                  llvm::ArrayRef<llvm::Value *> args, bool inlined = true);

// The operations the functions are written with, on `t`: float or double, or a vector of
// either. Constants are splats; integers are the same-width integers (i32 / i64) lane by lane.
class Ops {
public:
  Ops(llvm::IRBuilder<> &b, llvm::Type *t);
  llvm::IRBuilder<> &b;
  llvm::Type *t;       // float, double, or a vector of them
  llvm::Type *it;      // i32 / i64 with t's lanes
  bool single;         // float elements
  int mantissaBits;    // 23 / 52
  int exponentBias;    // 127 / 1023

  llvm::Value *c(double v);           // a constant of t (exactly representable for floats)
  llvm::Value *ci(int64_t v);         // a constant of it
  llvm::Value *add(llvm::Value *x, llvm::Value *y) { return b.CreateFAdd(x, y); }
  llvm::Value *sub(llvm::Value *x, llvm::Value *y) { return b.CreateFSub(x, y); }
  llvm::Value *mul(llvm::Value *x, llvm::Value *y) { return b.CreateFMul(x, y); }
  llvm::Value *div(llvm::Value *x, llvm::Value *y) { return b.CreateFDiv(x, y); }
  llvm::Value *neg(llvm::Value *x) { return b.CreateFNeg(x); }
  llvm::Value *select(llvm::Value *cond, llvm::Value *x, llvm::Value *y) { return b.CreateSelect(cond, x, y); }
  llvm::Value *lt(llvm::Value *x, llvm::Value *y) { return b.CreateFCmpOLT(x, y); }  // ordered: false for NaN
  llvm::Value *gt(llvm::Value *x, llvm::Value *y) { return b.CreateFCmpOGT(x, y); }
  llvm::Value *ge(llvm::Value *x, llvm::Value *y) { return b.CreateFCmpOGE(x, y); }
  llvm::Value *eq(llvm::Value *x, llvm::Value *y) { return b.CreateFCmpOEQ(x, y); }
  llvm::Value *isNan(llvm::Value *x) { return b.CreateFCmpUNO(x, x); }
  llvm::Value *abs(llvm::Value *x);
  llvm::Value *copySign(llvm::Value *magnitude, llvm::Value *sign);
  llvm::Value *bits(llvm::Value *x) { return b.CreateBitCast(x, it); }
  llvm::Value *fromBits(llvm::Value *i) { return b.CreateBitCast(i, t); }
  // c[0] + z (c[1] + z (c[2] + ...)): Horner's rule, one rounding per operation.
  llvm::Value *horner(llvm::Value *z, llvm::ArrayRef<double> coeffs);
  // v rounded to the nearest integer (ties to even) by adding and subtracting 1.5 * 2^p (p the
  // mantissa bits): exact for |v| < 2^(p-1). `*k` gets the same integer as an it.
  llvm::Value *roundToInt(llvm::Value *v, llvm::Value **k);
  // p * 2^k for an integer k with |k| < 2^(exponent bits): two exact scalings, so one
  // rounding where the result is subnormal, and infinity or zero beyond the range.
  llvm::Value *scaleBy2(llvm::Value *p, llvm::Value *k);
  // p * 2^k for a k that keeps p * 2^k normal (and 2^k itself): one exact scaling, the same
  // bits as scaleBy2's two.
  llvm::Value *scaleBy2Normal(llvm::Value *p, llvm::Value *k);
  // Error-free transformations: s + e = x + y exactly (Knuth), h + l = x * y exactly
  // (Dekker; finite products below 2^996 in double).
  void twoSum(llvm::Value *x, llvm::Value *y, llvm::Value *&s, llvm::Value *&e);
  // The same s and e in three operations for |x| >= |y| (Dekker's Fast2Sum): where it applies,
  // its bits are twoSum's (both give the exact error, which is unique).
  void fastTwoSum(llvm::Value *x, llvm::Value *y, llvm::Value *&s, llvm::Value *&e);
  void twoProduct(llvm::Value *x, llvm::Value *y, llvm::Value *&h, llvm::Value *&l);
};

// The functions, on any t (MathExpLog.cpp, MathPow.cpp, MathTrig.cpp). For f32 pow, sin and
// cos, the f32 entry points compute in double and round once.
llvm::Value *exp(Ops &o, llvm::Value *x, llvm::Value *lo = nullptr);  // exp(x + lo), |lo| tiny
// x = 2^e m with m in [sqrt(1/2), sqrt(2)), for x > 0 finite, subnormals too (log's reduction,
// pow's too); e as a float of o.t.
void splitExponent(Ops &o, llvm::Value *x, llvm::Value *&e, llvm::Value *&m);
llvm::Value *log(Ops &o, llvm::Value *x);
llvm::Value *tanh(Ops &o, llvm::Value *x);
llvm::Value *powDouble(Ops &o, llvm::Value *x, llvm::Value *y);  // t has double elements
// sin or cos of double x (t has double elements); `shortPolynomials` when the result is
// rounded to f32. The rare path is a call of `hugeFn` (see MathTrig.cpp).
llvm::Value *sinCosDouble(Ops &o, llvm::Value *x, bool cosine, bool shortPolynomials, llvm::Function *hugeFn);
// The rare path's own function: sin or cos of double |x| >= kHugeArgument (0 otherwise), on
// `lanes` doubles; the scalar one (lanes 1) names vector variants the loop vectorizer calls.
llvm::Function *sinCosHugeFunction(llvm::Module &m, bool cosine, bool shortPolynomials, unsigned lanes);
// The vector widths of the variants: 2 to 16 lanes.
extern const unsigned kVariantLanes[4];
// An internal function t(t, ...) (`arity` parameters) with an empty entry block, that touches
// no memory the caller sees, throws nothing and returns: what the vectorizer needs to widen or
// replace a call of it.
llvm::Function *pureFunction(llvm::Module &m, const std::string &name, llvm::Type *t, unsigned arity);
// The "vector-function-abi-variant" attribute of a call of `name` (`arity` parameters): its
// variants are the functions `name`.vN for N in kVariantLanes.
llvm::Attribute vectorVariants(llvm::LLVMContext &ctx, const std::string &name, unsigned arity);
inline constexpr double kHugeArgument = 1048576.0;  // 2^20: the reduction's fast path below

} // namespace shmapc::codegen::math
