// The host target: optimization with the new pass manager, object/assembly emission, printing.
// Code is generated for the host CPU (its vector width), position independent because g++
// links the executables as PIE.
#include "codegen/Codegen.h"
#include "codegen/CodegenContext.h"

#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>

#include <mutex>

namespace shmapc::codegen {

static llvm::CodeGenOptLevel codeGenLevel(int level) {
  if (level <= 0) return llvm::CodeGenOptLevel::None;
  if (level == 1) return llvm::CodeGenOptLevel::Less;
  if (level == 2) return llvm::CodeGenOptLevel::Default;
  return llvm::CodeGenOptLevel::Aggressive;
}

std::unique_ptr<llvm::TargetMachine> createHostTargetMachine(int optLevel, std::string &error) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string lookupError;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!target) {
    error = "no LLVM target for " + triple + ": " + lookupError;
    return nullptr;
  }
  llvm::SubtargetFeatures features;
  for (const auto &f : llvm::sys::getHostCPUFeatures()) features.AddFeature(f.first(), f.second);
  llvm::TargetOptions options;
  // No fused multiply-add contraction: printed results must not depend on -O or the CPU.
  options.AllowFPOpFusion = llvm::FPOpFusion::Strict;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features.getString(), options, llvm::Reloc::PIC_,
      std::nullopt, codeGenLevel(optLevel)));
  if (!tm) error = "cannot create a target machine for " + triple;
  return tm;
}

bool optimize(llvm::Module &m, int level, std::string &error) {
  std::unique_ptr<llvm::TargetMachine> tm = createHostTargetMachine(level, error);
  if (!tm) return false;
  m.setTargetTriple(tm->getTargetTriple().str());
  m.setDataLayout(tm->createDataLayout());

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // With the TargetMachine the vectorizer sees the real vector registers and costs.
  llvm::PassBuilder pb(tm.get());
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);

  llvm::ModulePassManager mpm;
  if (level <= 0) {
    mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
  } else {
    llvm::OptimizationLevel ol = level == 1   ? llvm::OptimizationLevel::O1
                                 : level == 2 ? llvm::OptimizationLevel::O2
                                              : llvm::OptimizationLevel::O3;
    mpm = pb.buildPerModuleDefaultPipeline(ol);
  }
  mpm.run(m, mam);
  return true;
}

bool emitObjectFile(llvm::Module &m, int level, const std::string &path, bool assembly,
                    std::string &error) {
  std::unique_ptr<llvm::TargetMachine> tm = createHostTargetMachine(level, error);
  if (!tm) return false;
  m.setTargetTriple(tm->getTargetTriple().str());
  m.setDataLayout(tm->createDataLayout());

  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, assembly ? llvm::sys::fs::OF_Text : llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path + "': " + ec.message();
    return false;
  }
  {
    // The pass manager owns the assembly printer's buffered stream, which flushes into `out`
    // when it is destroyed: only after that can `out` report a failed write.
    llvm::legacy::PassManager pm;
    auto kind = assembly ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile;
    if (tm->addPassesToEmitFile(pm, out, nullptr, kind)) {
      error = "the target cannot emit this file type";
      return false;
    }
    pm.run(m);
  }
  out.flush();
  if (out.has_error()) {
    error = (path == "-" ? "cannot write standard output: " : "cannot write '" + path + "': ") +
            out.error().message();
    out.clear_error();
    return false;
  }
  return true;
}

std::string printLLVM(const llvm::Module &m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  os.flush();
  return text;
}

} // namespace shmapc::codegen
