// LLVM code generation from IR. Never throws (Debian's LLVM is built without exceptions):
// failures come back as `false` with a message in `error`.
#pragma once
#include "ir/IR.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace shmapc::codegen {

struct Plan;  // codegen/Plan.h

// The CPU code is generated for (`--target-cpu`, Target.cpp): the host's (native, the
// default) or one LLVM's X86 backend knows by name, e.g. the generic x86-64-v3 or znver4.
struct Target {
  std::string requested;  // as given: "native", "x86-64-v3", "znver4", ...
  std::string cpu;        // LLVM's CPU name (native: the host's, e.g. "sapphirerapids")
  std::string features;   // the TargetMachine's feature string: native: the host's features
                          // ("+avx2,-amx-tile,..."); a named CPU: "" (the features LLVM implies for it)
  std::vector<std::string> enabled;  // every LLVM feature on for it (ISA and tuning), sorted
  // The instruction-set extensions among `enabled` that a CPU may lack (runtime/abi/cpu_features.h,
  // in its order): what the program's start-up check requires.
  std::vector<std::string> checked;

  // Whether LLVM's feature `name` ("avx2", "avx512f", "fma", ...) is on for this target.
  bool has(const std::string &name) const;
  // native, resolved once per process.
  static const Target &native();
};

// Resolves a --target-cpu name: "native", or a CPU LLVM's X86 backend knows in 64-bit mode
// (targetCpuNames). False if it knows no such CPU: `error` says so and `hint` suggests the
// closest name and lists the valid ones. Never prints (no LLVM "not a recognized processor").
bool resolveTarget(const std::string &name, Target &out, std::string &error, std::string &hint);
// The names --target-cpu accepts besides native: x86-64, x86-64-v2..v4 and LLVM's x86-64
// CPUs (alderlake, haswell, sapphirerapids, skylake-avx512, znver4, ...), sorted.
std::vector<std::string> targetCpuNames();

// Emits one LLVM function per IR Func (signature void(ptr dev, ptr outs, ptr ins), see
// runtime/abi/shmap_runtime.h), with Module::main as `shm_user_main`, and, unless the target
// needs nothing beyond x86-64, the start-up check of the CPU (a constructor calling
// shm_check_cpu with `target.checked`). `sources` names the files of the equations'
// locations: each collective call is preceded by the store of its "file:line:col" for the
// watchdog's report (none without it). With `plan`, each function's code generation
// decisions are recorded there as well (--emit=plan); the code is the same.
std::unique_ptr<llvm::Module> emitLLVM(const ir::Module &m, llvm::LLVMContext &ctx,
                                       std::string &error, const Target &target = Target::native(),
                                       const SourceManager *sources = nullptr, Plan *plan = nullptr);
// Runs the new pass manager's default pipeline at -O<level> (0..3).
bool optimize(llvm::Module &m, int level, std::string &error, const Target &target = Target::native());
// The bytes of an object file (or assembly text when `assembly`) for the target, in `out`.
bool emitObjectCode(llvm::Module &m, int level, bool assembly, std::string &out, std::string &error,
                    const Target &target = Target::native());
// Returns the module's textual LLVM IR.
std::string printLLVM(const llvm::Module &m);

} // namespace shmapc::codegen
