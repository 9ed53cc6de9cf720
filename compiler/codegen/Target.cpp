// The target: the CPU code is generated for (--target-cpu), optimization with the new pass
// manager, object/assembly emission, printing. Code is position independent because g++
// links the executables as PIE.
#include "codegen/Codegen.h"
#include "codegen/CodegenContext.h"
#include "cpu_features.h"
#include "source/Suggest.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/IR/PassTimingInfo.h>
#include <llvm/Pass.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/StandardInstrumentations.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/X86TargetParser.h>
#include <llvm/Transforms/IPO/MergeFunctions.h>

#include <algorithm>
#include <mutex>

namespace shmapc::codegen {

static llvm::CodeGenOptLevel codeGenLevel(int level) {
  if (level <= 0) return llvm::CodeGenOptLevel::None;
  if (level == 1) return llvm::CodeGenOptLevel::Less;
  if (level == 2) return llvm::CodeGenOptLevel::Default;
  return llvm::CodeGenOptLevel::Aggressive;
}

// The host's LLVM target (x86-64), its triple in `triple`; null with `error` set.
static const llvm::Target *hostTarget(std::string &triple, std::string &error) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // X86's domain reassignment (moving mask arithmetic from general registers to AVX-512's
    // k registers) takes time quadratic in a function's size: 63% of the code generation of a
    // 20,000-statement shmap body under grad on Zen 5, and the 20k / 1k compile time 35x
    // instead of 20x. The code it would improve is the odd mask move; it is off.
    // (set where this LLVM has the option, which is how the llc flag of that name sets it)
    llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
    auto it = options.find("disable-x86-domain-reassignment");
    if (it != options.end()) it->second->addOccurrence(0, it->first(), "true");
  });
  triple = llvm::sys::getDefaultTargetTriple();
  std::string lookupError;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!target) error = "no LLVM target for " + triple + ": " + lookupError;
  return target;
}

std::vector<std::string> targetCpuNames() {
  std::string triple, error;
  const llvm::Target *target = hostTarget(triple, error);
  if (!target) return {};
  // The names the backend accepts (its processor table) that are 64-bit CPUs (clang's -march
  // list for x86-64): "i686" or "pentium4" would be accepted and give 64-bit code for a CPU
  // that cannot run it.
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, "", ""));
  llvm::SmallVector<llvm::StringRef, 128> names64;
  llvm::X86::fillValidCPUArchList(names64, /*Only64Bit=*/true);
  std::vector<std::string> names;
  for (llvm::StringRef n : names64)
    if (sti && sti->isCPUStringValid(n)) names.push_back(n.str());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

bool Target::has(const std::string &name) const {
  return std::binary_search(enabled.begin(), enabled.end(), name);
}

// Fills the features LLVM turns on for `t.cpu` with `t.features` (what the TargetMachine's
// subtarget will have, implied features included).
static bool fillFeatures(const llvm::Target &target, const std::string &triple, Target &t, std::string &error) {
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target.createMCSubtargetInfo(triple, t.cpu, t.features));
  if (!sti) {
    error = "cannot describe the CPU " + t.cpu;
    return false;
  }
  const llvm::FeatureBitset &bits = sti->getFeatureBits();
  t.enabled.clear();
  for (const llvm::SubtargetFeatureKV &kv : sti->getAllProcessorFeatures())
    if (bits.test(kv.Value)) t.enabled.push_back(kv.Key);
  std::sort(t.enabled.begin(), t.enabled.end());
  t.checked.clear();
  for (const shm::CpuFeature &f : shm::kCpuFeatures)
    if (t.has(f.name)) t.checked.push_back(f.name);
  return true;
}

bool resolveTarget(const std::string &name, Target &out, std::string &error, std::string &hint) {
  std::string triple;
  const llvm::Target *target = hostTarget(triple, error);
  if (!target) return false;
  Target t;
  t.requested = name;
  if (name == "native") {
    t.cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures features;
    for (const auto &f : llvm::sys::getHostCPUFeatures()) features.AddFeature(f.first(), f.second);
    t.features = features.getString();
  } else {
    // Checked here, before LLVM sees the name: it would print "'NAME' is not a recognized
    // processor for this target (ignoring processor)" and generate code for a generic CPU.
    std::vector<std::string> names = targetCpuNames();
    if (!std::binary_search(names.begin(), names.end(), name)) {
      error = "unknown --target-cpu '" + name + "'";
      std::string close = closestName(name, names);
      // Else one that differs only in case ("SapphireRapids"), AMD's marketing name ("zen4"
      // for znver4), or one that the name begins ("skylake-avx", "sapphire").
      const std::string amd =
          llvm::StringRef(name).starts_with_insensitive("zen") ? "znver" + name.substr(3) : std::string();
      for (const std::string &n : names)
        if (close.empty() && (llvm::StringRef(n).equals_insensitive(name) || llvm::StringRef(n).equals_insensitive(amd)))
          close = n;
      for (const std::string &n : names)
        if (close.empty() && name.size() >= 4 && llvm::StringRef(n).starts_with_insensitive(name)) close = n;
      hint = close.empty() ? "" : "did you mean '" + close + "'? ";
      hint += "--target-cpu takes native (this machine's CPU, the default), the generic levels x86-64, "
              "x86-64-v2, x86-64-v3 (AVX2) and x86-64-v4 (AVX-512), or a CPU LLVM knows:";
      for (const std::string &n : names)
        if (n.rfind("x86-64", 0) != 0) hint += " " + n;
      return false;
    }
    t.cpu = name;
  }
  if (!fillFeatures(*target, triple, t, error)) return false;
  out = std::move(t);
  return true;
}

const Target &Target::native() {
  static const Target t = [] {
    Target n;
    std::string error, hint;
    if (!resolveTarget("native", n, error, hint)) n.requested = n.cpu = "native";  // createTargetMachine reports it
    return n;
  }();
  return t;
}

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const Target &t, int optLevel, std::string &error) {
  std::string triple;
  const llvm::Target *target = hostTarget(triple, error);
  if (!target) return nullptr;
  llvm::TargetOptions options;
  // No fused multiply-add contraction: printed results must not depend on -O or the CPU.
  options.AllowFPOpFusion = llvm::FPOpFusion::Strict;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, t.cpu, t.features, options, llvm::Reloc::PIC_, std::nullopt, codeGenLevel(optLevel)));
  if (!tm) error = "cannot create a target machine for " + triple + " (" + t.cpu + ")";
  return tm;
}

bool optimize(llvm::Module &m, int level, std::string &error, const Target &target) {
  std::unique_ptr<llvm::TargetMachine> tm = createTargetMachine(target, level, error);
  if (!tm) return false;
  m.setTargetTriple(tm->getTargetTriple().str());
  m.setDataLayout(tm->createDataLayout());

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // With --time-passes (llvm::TimePassesIsEnabled) the instrumentation times each LLVM pass
  // and prints LLVM's report when it is destroyed, at the end of this function.
  llvm::PassInstrumentationCallbacks pic;
  llvm::StandardInstrumentations si(m.getContext(), false);
  si.registerCallbacks(pic, &mam);
  // With the TargetMachine the vectorizer sees the real vector registers and costs.
  llvm::PassBuilder pb(tm.get(), llvm::PipelineTuningOptions(), std::nullopt, &pic);
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
    // Fused loops that do the same thing to other buffers are the same function (a model's
    // layers: each parameter's update, each layer's tanh and its derivative): merged before
    // the pipeline, each is optimized and compiled once.
    mpm.addPass(llvm::MergeFunctionsPass());
    mpm.addPass(pb.buildPerModuleDefaultPipeline(ol));
  }
  mpm.run(m, mam);
  return true;
}

bool emitObjectCode(llvm::Module &m, int level, bool assembly, std::string &out, std::string &error,
                    const Target &target) {
  std::unique_ptr<llvm::TargetMachine> tm = createTargetMachine(target, level, error);
  if (!tm) return false;
  m.setTargetTriple(tm->getTargetTriple().str());
  m.setDataLayout(tm->createDataLayout());

  // Into memory: the driver writes the file (safe_write.h), so no file is opened here.
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  {
    // The pass manager owns the assembly printer's buffered stream, which flushes into
    // `stream` when it is destroyed.
    llvm::legacy::PassManager pm;
    auto kind = assembly ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile;
    if (tm->addPassesToEmitFile(pm, stream, nullptr, kind)) {
      error = "the target cannot emit this file type";
      return false;
    }
    pm.run(m);
  }
  if (llvm::TimePassesIsEnabled) llvm::reportAndResetTimings(&llvm::errs());  // the code generator's passes
  out.assign(buffer.begin(), buffer.end());
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
