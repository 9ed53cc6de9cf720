// LLVM code generation from IR. Never throws (Debian's LLVM is built without exceptions):
// failures come back as `false` with a message in `error`.
#pragma once
#include "ir/IR.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace shmapc::codegen {

// Emits one LLVM function per IR Func (signature void(ptr dev, ptr outs, ptr ins), see
// runtime/shmap_runtime.h), with Module::main as `shm_user_main`.
std::unique_ptr<llvm::Module> emitLLVM(const ir::Module &m, llvm::LLVMContext &ctx,
                                       std::string &error);
// Runs the new pass manager's default pipeline at -O<level> (0..3).
bool optimize(llvm::Module &m, int level, std::string &error);
// Writes an object file (or assembly text when `assembly`) for the host target.
bool emitObjectFile(llvm::Module &m, int level, const std::string &path, bool assembly,
                    std::string &error);
// Returns the module's textual LLVM IR.
std::string printLLVM(const llvm::Module &m);

} // namespace shmapc::codegen
