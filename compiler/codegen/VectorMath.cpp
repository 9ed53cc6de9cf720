// Transcendental functions in fused loops through glibc's libmvec (README, "Measured
// choices"; accuracy in docs/numerics.md). A scalar call of tanhf becomes a call of
// shm.vm.tanhf, an internal function that puts its argument in lane 0 of a vector, calls
// libmvec's vector tanhf (_ZGVeN16v_tanhf on AVX-512) and returns lane 0; the call carries
// the "vector-function-abi-variant" attribute that tells the loop vectorizer it may call
// _ZGVeN16v_tanhf on 16 elements at once instead. Every element is then computed by the same
// vector routine, whether it falls in the vector body, the scalar remainder or a loop that
// was not vectorized (-O0), and a lane's result does not depend on the other lanes, so the
// result of a program does not depend on the optimization level or the loop's length.
#include "codegen/CodegenContext.h"

#include <llvm/TargetParser/Host.h>

namespace shmapc::codegen {

namespace {

// The widest libmvec ISA this CPU has: its letter in the vector ABI's mangled names and its
// vector width in bytes.
struct VectorIsa {
  char letter;
  unsigned bytes;
};

VectorIsa hostIsa() {
  llvm::StringMap<bool> f = llvm::sys::getHostCPUFeatures();
  if (f.lookup("avx512f")) return {'e', 64};
  if (f.lookup("avx2")) return {'d', 32};
  return {'b', 16};  // SSE 4.1 variants; x86-64 has at least SSE2, which libmvec's 'b' needs
}

} // namespace

llvm::Value *ModuleEmitter::vectorMath(llvm::IRBuilder<> &b, const std::string &name,
                                       const std::vector<llvm::Value *> &args) {
  llvm::Type *t = args[0]->getType();
  const bool f32 = t->isFloatTy();
  const std::string scalar = f32 ? name + "f" : name;  // libm's name: tanhf, tanh
  const std::string wrapperName = "shm.vm." + scalar;
  static const VectorIsa isa = hostIsa();
  const unsigned lanes = isa.bytes / (f32 ? 4 : 8);
  const std::string params(args.size(), 'v');
  const std::string vectorName =
      std::string("_ZGV") + isa.letter + "N" + std::to_string(lanes) + params + "_" + scalar;

  llvm::Function *&wrapper = vectorMath_[wrapperName];
  if (!wrapper) {
    llvm::VectorType *vt = llvm::FixedVectorType::get(t, lanes);
    std::vector<llvm::Type *> vparams(args.size(), vt), sparams(args.size(), t);
    llvm::Function *vec = llvm::cast<llvm::Function>(
        mod.getOrInsertFunction(vectorName, llvm::FunctionType::get(vt, vparams, false)).getCallee());
    vec->setDoesNotAccessMemory();
    vec->setDoesNotThrow();
    vec->setWillReturn();
    // linkonce_odr, not internal: interprocedural passes would otherwise specialise it (drop
    // pow's constant exponent, change its calling convention) until it no longer matches the
    // vector variant's signature.
    wrapper = llvm::Function::Create(llvm::FunctionType::get(t, sparams, false), llvm::Function::LinkOnceODRLinkage,
                                     wrapperName, mod);
    wrapper->setVisibility(llvm::GlobalValue::HiddenVisibility);
    // Not inlined: the vectorizer must see the call (to replace it), not the vector code.
    wrapper->addFnAttr(llvm::Attribute::NoInline);
    wrapper->setDoesNotAccessMemory();
    wrapper->setDoesNotThrow();
    wrapper->setWillReturn();
    llvm::IRBuilder<> wb(llvm::BasicBlock::Create(ctx, "entry", wrapper));
    std::vector<llvm::Value *> splats;
    for (llvm::Argument &a : wrapper->args()) splats.push_back(wb.CreateVectorSplat(lanes, &a));
    wb.CreateRet(wb.CreateExtractElement(wb.CreateCall(vec, splats), uint64_t(0)));
  }
  ++vectorMathCalls;
  llvm::CallInst *call = b.CreateCall(wrapper, args);
  // _ZGV_LLVM_N16v_shm.vm.tanhf(_ZGVeN16v_tanhf): at VF 16, call the vector function.
  call->addFnAttr(llvm::Attribute::get(ctx, "vector-function-abi-variant",
                                       "_ZGV_LLVM_N" + std::to_string(lanes) + params + "_" + wrapperName + "(" +
                                           vectorName + ")"));
  return call;
}

} // namespace shmapc::codegen
