// emitLLVM: declares one LLVM function per IR Func, lowers each, verifies the module.
// FuncEmitter::emitEqn lowers an equation by its primitive's `lower` rule (compiler/prims/).
#include "codegen/Codegen.h"
#include "codegen/CodegenContext.h"
#include "rules/Rules.h"

#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <set>

namespace shmapc::codegen {

bool FuncEmitter::emitEqn(size_t index) {
  eqnLoc_ = f.eqns[index].loc;  // (the location callRt gives the collectives it lowers to)
  return rules::rulesOf(f.eqns[index].prim).lower(*this, index);
}

bool FuncEmitter::emitCopy(const ir::Eqn &e) {
  if (storage(e.outs[0]).kind == StorageKind::Alias) return true;
  copyBytes(buffer(e.outs[0]), buffer(e.ins[0]), e.outs[0]->type.byteSize());
  return true;
}

// The program arguments for the runtime's command line (runtime/cli.cpp): name, type and
// default of each, as the strings shm_user_args_table[3 * i + 0..2], and their count.
static void emitProgramArgTable(ModuleEmitter &me, const ir::Module &m) {
  if (m.args.empty()) return;
  std::vector<llvm::Constant *> strings;
  for (const ir::ProgramArg &a : m.args)
    for (const std::string *s : {&a.name, &a.type, &a.defaultText}) strings.push_back(me.cString(*s));
  auto *table = llvm::ArrayType::get(me.ptrTy, strings.size());
  new llvm::GlobalVariable(me.mod, table, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(table, strings), "shm_user_args_table");
  new llvm::GlobalVariable(me.mod, me.i32Ty, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(me.i32Ty, m.args.size()), "shm_user_args_count");
}

// The device counts of the meshes the program's shmaps and pipelines run on, as
// shm_user_mesh_devices[i] and their count, so an MPI job whose layout fits none of them stops
// before it starts (runtime/ranks_mpi.cpp). A stage submesh is its pipeline mesh's slice: the
// pipeline's device groups run it, each on its own ranks.
static void emitMeshTable(ModuleEmitter &me, const ir::Module &m) {
  std::vector<bool> used(m.meshes.size(), false);
  std::set<int64_t> sizes;  // the pipelines' device counts, then the meshes' used
  for (const auto &f : m.funcs)
    for (const ir::Eqn &e : f->eqns)
      if (e.prim == ir::Prim::Shmap) {
        int64_t i = e.intParam("mesh");
        if (i >= 0 && i < (int64_t)used.size()) used[(size_t)i] = true;
      } else if (e.prim == ir::Prim::Pipeline) {
        sizes.insert((int64_t)e.intsParam("device_groups").size());
      }
  for (size_t i = 0; i < m.meshes.size(); ++i)
    if (m.meshes[i]->sliceOf >= 0) used[i] = false;
  for (size_t i = 0; i < m.meshes.size(); ++i)
    if (used[i]) sizes.insert(m.meshes[i]->numDevices());
  std::vector<llvm::Constant *> counts;
  for (int64_t n : sizes) counts.push_back(llvm::ConstantInt::get(me.i64Ty, n));
  if (counts.empty()) return;
  auto *table = llvm::ArrayType::get(me.i64Ty, counts.size());
  new llvm::GlobalVariable(me.mod, table, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(table, counts), "shm_user_mesh_devices");
  new llvm::GlobalVariable(me.mod, me.i32Ty, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(me.i32Ty, counts.size()), "shm_user_mesh_count");
}

// The start-up check of the CPU (runtime/cpu_check.cpp, docs/runtime.md "Target CPU"): a
// constructor, run before the executable's other constructors and main, that calls
// shm_check_cpu(--target-cpu, CPU, "avx,avx2,...") so that a CPU lacking an extension the code
// may use stops the program with a message instead of SIGILL. It is itself compiled for
// baseline x86-64, whatever the target, so that it can run on any CPU.
static void emitCpuCheck(ModuleEmitter &me) {
  const std::vector<std::string> &needs = me.target.checked;
  if (needs.empty()) return;  // x86-64: every x86-64 CPU runs it
  std::string list;
  for (const std::string &f : needs) list += (list.empty() ? "" : ",") + f;
  llvm::Function *fn = llvm::Function::Create(llvm::FunctionType::get(me.voidTy, false),
                                              llvm::GlobalValue::InternalLinkage, "shm.check_cpu", me.mod);
  // Without its own "target-features" a function gets the TargetMachine's (native: the host's).
  fn->addFnAttr("target-cpu", "x86-64");
  fn->addFnAttr("target-features", "+cx8,+fxsr,+mmx,+sse,+sse2,+x87");
  fn->addFnAttr(llvm::Attribute::NoInline);
  fn->setDoesNotThrow();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(me.ctx, "entry", fn));
  b.CreateCall(me.runtime("shm_check_cpu"),
               {me.cString(me.target.requested), me.cString(me.target.cpu), me.cString(list)});
  b.CreateRetVoid();
  // 101: the first priority a program may use (0-100 are reserved to the implementation);
  // constructors with a priority run before those without, the runtime's among them.
  llvm::appendToGlobalCtors(me.mod, fn, 101);
}

std::unique_ptr<llvm::Module> emitLLVM(const ir::Module &m, llvm::LLVMContext &ctx,
                                       std::string &error, const Target &target, const SourceManager *sources,
                                       Plan *plan) {
  auto mod = std::make_unique<llvm::Module>("shmapc", ctx);
  // The data layout must be the target's before optimizing (vector widths, alignment).
  if (std::unique_ptr<llvm::TargetMachine> tm = createTargetMachine(target, 2, error)) {
    mod->setTargetTriple(tm->getTargetTriple().str());
    mod->setDataLayout(tm->createDataLayout());
  } else {
    return nullptr;
  }

  ModuleEmitter me(m, ctx, *mod, target);
  me.sources = sources;
  me.plan = plan;
  emitProgramArgTable(me, m);
  emitMeshTable(me, m);
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
  // Carries updated in place, decided before any body or caller is emitted (both follow it).
  std::unordered_map<const ir::Func *, int> uses;
  for (const auto &f : m.funcs)
    for (const ir::Eqn &e : f->eqns)
      for (const ir::Func *body : e.bodies) ++uses[body];
  for (const auto &f : m.funcs)
    for (const ir::Eqn &e : f->eqns)
      if (e.prim == ir::Prim::While && e.bodies.size() == 2 && uses[e.bodies[1]] == 1)
        me.carriesInPlace[e.bodies[1]] = FuncEmitter::carriesInPlace(*e.bodies[1], me.factsOf(*e.bodies[1]));
      else if (e.prim == ir::Prim::Loop && e.bodies.size() == 1 && uses[e.bodies[0]] == 1)
        me.carriesInPlace[e.bodies[0]] = FuncEmitter::carriesInPlace(*e.bodies[0], me.factsOf(*e.bodies[0]));
  me.findSplitLayouts();
  me.findDonatedCarries(uses);
  for (const auto &f : m.funcs) {
    FuncEmitter fe(me, *f);
    if (!fe.emit()) {
      error = me.error.empty() ? "code generation failed in " + f->name : me.error;
      return nullptr;
    }
  }

  emitCpuCheck(me);

  std::string msg;
  llvm::raw_string_ostream os(msg);
  if (llvm::verifyModule(*mod, &os)) {
    error = "LLVM module verification failed: " + os.str();
    return nullptr;
  }
  return mod;
}

} // namespace shmapc::codegen
