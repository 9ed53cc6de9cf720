// emitLLVM: declares one LLVM function per IR Func, lowers each, verifies the module.
// FuncEmitter::emitEqn is the one table from primitive to lowering.
#include "codegen/Codegen.h"
#include "codegen/CodegenContext.h"

#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

namespace shmapc::codegen {

bool FuncEmitter::emitEqn(size_t index) {
  const ir::Eqn &e = f.eqns[index];
  using P = ir::Prim;
  switch (e.prim) {
  // Fusible eqns normally arrive through a group (FuncEmitter::emit); a lone one is a
  // group of one.
  case P::Constant:
    return isFusible(e) ? emitElementwiseGroup(index, index) : emitConstant(e);
  case P::BroadcastInDim:
    return isFusible(e) ? emitElementwiseGroup(index, index) : emitBroadcastInDim(e);
  case P::Neg:
  case P::Exp:
  case P::Log:
  case P::Sin:
  case P::Cos:
  case P::Tanh:
  case P::Sqrt:
  case P::Abs:
  case P::Floor:
  case P::Not:
  case P::Convert:
  case P::Add:
  case P::Sub:
  case P::Mul:
  case P::Div:
  case P::FloorDiv:
  case P::Rem:
  case P::Max:
  case P::Min:
  case P::Pow:
  case P::And:
  case P::Or:
  case P::Eq:
  case P::Ne:
  case P::Lt:
  case P::Le:
  case P::Gt:
  case P::Ge:
  case P::Select: return emitElementwiseGroup(index, index);

  case P::Iota: return emitIota(e);
  case P::RandomNormal: return emitRandom(e, 0);   // SHM_RANDOM_NORMAL
  case P::RandomUniform: return emitRandom(e, 1);  // SHM_RANDOM_UNIFORM
  case P::Reshape: return emitCopy(e);
  case P::Transpose: return emitTranspose(e);
  case P::ReduceSum: return emitReduce(e, 0);  // SHM_REDUCE_SUM
  case P::ReduceMax: return emitReduce(e, 1);  // SHM_REDUCE_MAX
  case P::ReduceMin: return emitReduce(e, 2);  // SHM_REDUCE_MIN
  case P::Matmul: return emitMatmul(e);
  case P::Slice: return emitSlice(e);
  case P::DynamicSlice: return emitDynamicSlice(e);
  case P::DynamicUpdateSlice: return emitDynamicUpdateSlice(e);
  case P::Concatenate: return emitConcatenate(e);

  // psum2 is psum with a different variance typing; all_gather_invariant likewise.
  case P::Psum:
  case P::Psum2: return emitAllReduce(e, "shm_psum");
  case P::Pmax: return emitAllReduce(e, "shm_pmax");
  case P::Pmin: return emitAllReduce(e, "shm_pmin");
  case P::Pbroadcast:  // invariant -> varying: no communication; an alias or a copy
    return isFusible(e) ? emitElementwiseGroup(index, index) : emitCopy(e);
  case P::AllGather:
  case P::AllGatherInvariant: return emitAllGather(e);
  case P::Pscatter: return emitPscatter(e);
  case P::PsumScatter: return emitPsumScatter(e);
  case P::AllToAll: return emitAllToAll(e);
  case P::Ppermute: return emitPpermute(e);
  case P::AxisIndex: return emitAxisIndex(e);

  case P::Call: return emitCall(e);
  case P::Shmap: return emitShmap(e);
  case P::Loop: return emitLoop(e);
  case P::Cond: return emitCond(e);

  case P::Print: return emitPrint(e);

  // The differentiate pass replaces program transformations by calls before codegen.
  case P::Jvp:
  case P::Vjp: return fail("internal error: jvp/vjp reached codegen");
  }
  return fail("internal error: unknown primitive");
}

std::unique_ptr<llvm::Module> emitLLVM(const ir::Module &m, llvm::LLVMContext &ctx,
                                       std::string &error) {
  auto mod = std::make_unique<llvm::Module>("shmapc", ctx);
  // The data layout must be the target's before optimizing (vector widths, alignment).
  if (std::unique_ptr<llvm::TargetMachine> tm = createHostTargetMachine(2, error)) {
    mod->setTargetTriple(tm->getTargetTriple().str());
    mod->setDataLayout(tm->createDataLayout());
  } else {
    return nullptr;
  }

  ModuleEmitter me(m, ctx, *mod);
  // Declare first: calls, loops, conds and shmaps refer to functions emitted later.
  for (const auto &f : m.funcs) {
    bool isMain = f.get() == m.main;
    llvm::Function *fn = llvm::Function::Create(
        me.funcType(),
        isMain ? llvm::GlobalValue::ExternalLinkage : llvm::GlobalValue::InternalLinkage,
        isMain ? "shm_user_main" : "shm." + f->name, *mod);
    fn->setDoesNotThrow();
    me.funcs[f.get()] = fn;
  }
  for (const auto &f : m.funcs) {
    FuncEmitter fe(me, *f);
    if (!fe.emit()) {
      error = me.error.empty() ? "code generation failed in " + f->name : me.error;
      return nullptr;
    }
  }

  std::string msg;
  llvm::raw_string_ostream os(msg);
  if (llvm::verifyModule(*mod, &os)) {
    error = "LLVM module verification failed: " + os.str();
    return nullptr;
  }
  return mod;
}

} // namespace shmapc::codegen
