// Module-wide pieces: LLVM types, runtime declarations, deduplicated constant globals.
#include "codegen/CodegenContext.h"
#include "codegen/Math.h"
#include "half.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/InlineAsm.h>

namespace shmapc::codegen {

ModuleEmitter::ModuleEmitter(const ir::Module &irm, llvm::LLVMContext &ctx, llvm::Module &mod,
                             const Target &target)
    : irm(irm), ctx(ctx), mod(mod), target(target) {
  voidTy = llvm::Type::getVoidTy(ctx);
  ptrTy = llvm::PointerType::get(ctx, 0);
  i8Ty = llvm::Type::getInt8Ty(ctx);
  i32Ty = llvm::Type::getInt32Ty(ctx);
  i64Ty = llvm::Type::getInt64Ty(ctx);
}

llvm::FunctionType *ModuleEmitter::funcType() const {
  return llvm::FunctionType::get(voidTy, {ptrTy, ptrTy, ptrTy}, false);
}

llvm::Type *ModuleEmitter::elemType(ir::DType t) const {
  switch (t) {
  case ir::DType::F32: return llvm::Type::getFloatTy(ctx);
  case ir::DType::F64: return llvm::Type::getDoubleTy(ctx);
  case ir::DType::I32: return i32Ty;
  case ir::DType::Bool: return i8Ty;
  case ir::DType::I64: return i64Ty;
  case ir::DType::F16:
  case ir::DType::BF16: return llvm::Type::getInt16Ty(ctx);
  }
  return i8Ty;
}

llvm::Type *ModuleEmitter::computeType(ir::DType t) const {
  return ir::isHalf(t) ? llvm::Type::getFloatTy(ctx) : elemType(t);
}

namespace {
// The runtime ABI's entry points with their signatures (abi/shm_entries.def: the return
// type's letter, then each parameter's: v void, p pointer, i int32, l int64, f float, d double).
struct RuntimeSig {
  const char *name;
  const char *sig;
};
const RuntimeSig kRuntime[] = {
#define SHM_ENTRY(Ret, Name, Sig, Params) {#Name, Sig},
#include "shm_entries.def"
#undef SHM_ENTRY
};
} // namespace

llvm::Value *ModuleEmitter::mathFunction(llvm::IRBuilder<> &b, const std::string &name,
                                         const std::vector<llvm::Value *> &args) {
  ++mathCalls;
  return math::call(b, mod, name, args, inlineMath);
}

llvm::FunctionCallee ModuleEmitter::runtime(const std::string &name) {
  const RuntimeSig *sig = nullptr;
  for (const RuntimeSig &r : kRuntime)
    if (name == r.name) sig = &r;
  if (!sig) {
    fail("internal error: unknown runtime function " + name);
    for (const RuntimeSig &r : kRuntime)  // something callable; the module is discarded on error anyway
      if (std::string(r.name) == "shm_fatal") sig = &r;
  }
  auto typeOf = [&](char c) -> llvm::Type * {
    switch (c) {
    case 'v': return voidTy;
    case 'p': return ptrTy;
    case 'i': return i32Ty;
    case 'l': return i64Ty;
    case 'f': return llvm::Type::getFloatTy(ctx);
    default: return llvm::Type::getDoubleTy(ctx);
    }
  };
  std::vector<llvm::Type *> params;
  for (const char *c = sig->sig + 1; *c; ++c) params.push_back(typeOf(*c));
  llvm::FunctionType *ft = llvm::FunctionType::get(typeOf(sig->sig[0]), params, false);
  llvm::FunctionCallee callee = mod.getOrInsertFunction(sig->name, ft);
  if (auto *fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    fn->setDoesNotThrow();
    std::string n = sig->name;
    if (n == "shm_alloc") {  // fresh 64-byte aligned memory, like aligned_alloc
      fn->setReturnDoesNotAlias();
      fn->addRetAttr(llvm::Attribute::getWithAlignment(ctx, llvm::Align(64)));
    }
    if (n == "shm_fatal") fn->setDoesNotReturn();
  }
  return callee;
}

static llvm::Constant *privateGlobal(llvm::Module &mod, llvm::Constant *init, const char *name) {
  auto *g = new llvm::GlobalVariable(mod, init->getType(), /*isConstant=*/true,
                                     llvm::GlobalValue::PrivateLinkage, init, name);
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  g->setAlignment(llvm::Align(16));
  return g;
}

// Empty lists (rank-0 shapes) still get a valid pointer: a one-element array never read.
llvm::Constant *ModuleEmitter::i64Array(const std::vector<int64_t> &v) {
  auto it = i64Arrays_.find(v);
  if (it != i64Arrays_.end()) return it->second;
  std::vector<uint64_t> data(v.begin(), v.end());
  if (data.empty()) data.push_back(0);
  llvm::Constant *g =
      privateGlobal(mod, llvm::ConstantDataArray::get(ctx, data), "shm.i64s");
  return i64Arrays_[v] = g;
}

llvm::Constant *ModuleEmitter::i32Array(const std::vector<int32_t> &v) {
  auto it = i32Arrays_.find(v);
  if (it != i32Arrays_.end()) return it->second;
  std::vector<uint32_t> data(v.begin(), v.end());
  if (data.empty()) data.push_back(0);
  llvm::Constant *g =
      privateGlobal(mod, llvm::ConstantDataArray::get(ctx, data), "shm.i32s");
  return i32Arrays_[v] = g;
}

llvm::Constant *ModuleEmitter::constPtrArray(const std::vector<llvm::Constant *> &ptrs) {
  std::vector<llvm::Constant *> items = ptrs;
  if (items.empty()) items.push_back(llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx, 0)));
  return privateGlobal(mod, llvm::ConstantArray::get(llvm::ArrayType::get(ptrTy, items.size()), items), "shm.ptrs");
}

llvm::Function *ModuleEmitter::opaquePointer() {
  if (opaquePointer_) return opaquePointer_;
  llvm::FunctionType *ft = llvm::FunctionType::get(ptrTy, {ptrTy}, false);
  opaquePointer_ = llvm::Function::Create(ft, llvm::GlobalValue::InternalLinkage, "shm.opaque_pointer", mod);
  opaquePointer_->addFnAttr(llvm::Attribute::NoInline);
  opaquePointer_->setDoesNotThrow();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", opaquePointer_));
  // "=r,0": the result is the operand's register, unchanged.
  b.CreateRet(b.CreateCall(llvm::InlineAsm::get(ft, "", "=r,0", /*hasSideEffects=*/false), {opaquePointer_->getArg(0)}));
  return opaquePointer_;
}

llvm::Constant *ModuleEmitter::cString(const std::string &s) {
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  llvm::Constant *g =
      privateGlobal(mod, llvm::ConstantDataArray::getString(ctx, s, true), "shm.str");
  return strings_[s] = g;
}

llvm::Constant *ModuleEmitter::locationString(Loc loc) {
  if (!sources || !loc.valid() || loc.file >= sources->count()) return nullptr;
  return cString(sources->file(loc.file).path + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col));
}

int64_t saturateToI64(double x) {  // as llvm.fptosi.sat (a C cast would be UB out of range)
  if (x != x) return 0;
  if (x <= -9223372036854775808.0) return INT64_MIN;
  if (x >= 9223372036854775808.0) return INT64_MAX;
  return (int64_t)x;
}

uint16_t halfConstant(ir::DType t, double x) {
  return t == ir::DType::F16 ? shm::f64_to_f16(x) : shm::f32_to_bf16((float)x);
}

// Element conversions follow Convert's rules (to bool: != 0; to int: truncation toward 0).
llvm::Constant *ModuleEmitter::dataArray(ir::DType t, const std::vector<double> &values) {
  llvm::Constant *init = nullptr;
  switch (t) {
  case ir::DType::F32: {
    std::vector<float> d(values.begin(), values.end());
    init = llvm::ConstantDataArray::get(ctx, d);
    break;
  }
  case ir::DType::F64: init = llvm::ConstantDataArray::get(ctx, values); break;
  case ir::DType::I32: {
    std::vector<uint32_t> d;
    for (double x : values) {  // saturating, like llvm.fptosi.sat (a C cast would be UB)
      double c = x != x ? 0.0 : x < -2147483648.0 ? -2147483648.0 : x > 2147483647.0 ? 2147483647.0 : x;
      d.push_back((uint32_t)(int32_t)c);
    }
    init = llvm::ConstantDataArray::get(ctx, d);
    break;
  }
  case ir::DType::Bool: {
    std::vector<uint8_t> d;
    for (double x : values) d.push_back(x != 0 ? 1 : 0);
    init = llvm::ConstantDataArray::get(ctx, d);
    break;
  }
  case ir::DType::I64: {
    std::vector<uint64_t> d;
    for (double x : values) d.push_back((uint64_t)saturateToI64(x));
    init = llvm::ConstantDataArray::get(ctx, d);
    break;
  }
  case ir::DType::F16:
  case ir::DType::BF16: {
    std::vector<uint16_t> d;
    for (double x : values) d.push_back(halfConstant(t, x));
    init = llvm::ConstantDataArray::get(ctx, d);
    break;
  }
  }
  auto *g = llvm::cast<llvm::GlobalVariable>(privateGlobal(mod, init, "shm.data"));
  g->setAlignment(llvm::Align(64));
  return g;
}

} // namespace shmapc::codegen
