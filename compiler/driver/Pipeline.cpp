// compile(): source -> tokens -> AST -> IR -> IR passes -> LLVM IR -> object -> executable,
// stopping where --emit says.
#include "driver/Pipeline.h"

#include "codegen/Codegen.h"
#include "driver/Interrupt.h"
#include "driver/Link.h"
#include "driver/Modules.h"
#include "driver/Output.h"
#include "driver/PhaseTimes.h"
#include "comm/Comm.h"
#include "lexer/Lexer.h"
#include "parser/Parser.h"
#include "passes/Passes.h"
#include "prims/Rules.h"
#include "sema/Sema.h"
#include "safe_write.h"
#include "source/BigStack.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassTimingInfo.h>
#include <llvm/Pass.h>
#include <llvm/Support/ErrorHandling.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <new>
#include <sys/stat.h>
#include <unistd.h>

namespace shmapc {

namespace {

// The structural checks and every equation's shape rule (prims::verifyModule).
bool verifyAfter(const ir::Module &m, const char *stage) {
  std::vector<std::string> problems = prims::verifyModule(m);
  if (problems.empty()) return true;
  std::cerr << "shmapc: internal error: the IR verifier failed after '" << stage << "':\n";
  for (const std::string &p : problems) std::cerr << "  " << p << "\n";
  return false;
}

// The command-line switches override each shmap's own check_vma / auto_pbroadcast.
// --transpose=naive transposes untyped bodies (as before seed 000), so it implies
// --no-check-vma.
void markUntyped(ir::Func &f) {
  f.checkVma = false;
  for (ir::Eqn &e : f.eqns)
    for (ir::Func *b : e.bodies)
      if (b->checkVma) markUntyped(*b);
}

void applyShmapFlags(const CompileOptions &opts, ir::Module &m) {
  m.naiveTranspose = opts.naiveTranspose;
  m.jitWhole = opts.jitWhole;
  for (auto &f : m.funcs) {
    if (!f->isShmapBody) continue;
    if (opts.explicitPbroadcast) f->autoPbroadcast = false;
    if (opts.noCheckVma || opts.naiveTranspose) f->checkVma = false;
    if (!f->checkVma) markUntyped(*f);  // its loop bodies and branches (codegen reads them)
  }
}

int emitMachineCode(const CompileOptions &opts, const codegen::Target &target, Diagnostics &diags,
                    ir::Module &m, PhaseTimes &times) {
  llvm::LLVMContext ctx;
  std::string error;
  std::unique_ptr<llvm::Module> lm = codegen::emitLLVM(m, ctx, error, target, &diags.sources());
  times.mark("codegen: LLVM IR emission");
  if (!lm || !codegen::optimize(*lm, opts.optLevel, error, target)) {
    std::cerr << "shmapc: internal error: code generation failed: " << error << "\n";
    return 2;
  }
  times.mark("LLVM optimisation pipeline (-O" + std::to_string(opts.optLevel) + ")");
  const std::string out = outputPath(opts);
  if (opts.emit == Emit::LLVM) {
    writeOutput(out, codegen::printLLVM(*lm), false, diags);
    return 0;
  }
  std::string code;
  const bool assembly = opts.emit == Emit::Asm;
  if (!codegen::emitObjectCode(*lm, opts.optLevel, assembly, code, error, target)) {
    std::cerr << "shmapc: internal error: code generation failed: " << error << "\n";
    return 2;
  }
  times.mark("LLVM code generation (instruction selection, register allocation, object)");
  if (opts.emit == Emit::Asm || opts.emit == Emit::Obj) {
    writeOutput(out, code, false, diags);
    return 0;
  }
  // An executable: the object and the linked program in a private temporary folder (in
  // $TMPDIR, not beside the output, which may be /dev/null or in a folder we may not litter),
  // then the program copied to the output through writeOutput, as any other output: the
  // linker never opens the output path itself.
  // A signal meanwhile removes the folder (Interrupt.h).
  std::string dir = interrupt::makeTemporaryFolder("shmapc", error);
  if (dir.empty()) diags.fatal(DiagId::CannotWrite, Loc{}, error);
  struct RemoveDir {
    std::string path;
    ~RemoveDir() { interrupt::removeTemporaryFolder(path); }
  } cleanup{dir};
  const std::string obj = dir + "/prog.o", exe = dir + "/prog";
  if (!safe_write::writeFile(obj, code.data(), code.size(), false, error))
    diags.fatal(DiagId::CannotWrite, Loc{}, "cannot write a temporary object file " + obj + ": " + error);
  if (!linkExecutable(obj, exe, opts.mpi, error)) diags.fatal(DiagId::LinkFailed, Loc{}, error);
  std::ifstream linked(exe, std::ios::binary);
  std::string program((std::istreambuf_iterator<char>(linked)), std::istreambuf_iterator<char>());
  if (!linked) diags.fatal(DiagId::CannotWrite, Loc{}, "cannot read the linked program " + exe);
  writeOutput(out, program, true, diags);
  times.mark("link");
  return 0;
}

int compileWith(const CompileOptions &opts, SourceManager &sm, Diagnostics &diags, PhaseTimes &times) {
  int file = opts.inputText ? sm.addBuffer(opts.input, *opts.inputText)
                            : loadSource(sm, diags, opts.input, Loc{});
  const std::string out = outputPath(opts);
  requireWritableOutput(out, opts.input, diags);
  // --target-cpu before anything is compiled, for `check` too (a mistyped name in a build
  // script should not wait for the first `compile` to show).
  codegen::Target target;
  std::string targetError, targetHint;
  if (!codegen::resolveTarget(opts.targetCpu, target, targetError, targetHint))
    diags.fatal(DiagId::UnknownTargetCpu, Loc{}, targetError, targetHint);
  auto emitText = [&](const std::string &text) {
    writeOutput(out, text, false, diags);  // throws CompileError if it fails
    return 0;
  };

  // The parser lexes the file itself; tokens are only materialised to be shown.
  if (opts.emit == Emit::Tokens) return emitText(printTokens(lex(file, sm, diags)));

  for (const std::string &dir : opts.includeDirs) {  // a mistyped -I would be ignored silently
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      diags.fatal(DiagId::IncludeDirNotFound, Loc{}, "-I '" + dir + "' is not a folder",
                  "check the path given to -I");
  }
  ModuleSet modules = loadModules(file, sm, diags, opts.includeDirs, opts.resolveModule);
  if (opts.emit == Emit::AST) return emitText(ast::printAST(*modules.programs[0]));
  times.mark("lex, parse, load modules");

  std::unique_ptr<ir::Module> m = sema::buildModule(modules.units(), diags);
  applyShmapFlags(opts, *m);
  times.mark("sema");
  if (opts.verifyEach && !verifyAfter(*m, "sema")) return 2;
  for (const passes::Pass &pass : passes::pipeline()) {
    pass.run(*m, diags);
    times.mark(std::string("pass ") + pass.name);
    if (opts.verifyEach && !verifyAfter(*m, pass.name)) return 2;
    if (opts.emit == Emit::Sharded && std::string(pass.name) == "propagate-shardings")
      return emitText(ir::printShardings(*m));
  }
  if (opts.emit == Emit::IR) return emitText(ir::printModule(*m));
  if (opts.emit == Emit::Comm) return emitText(comm::printCommReport(comm::analyzeCommunication(*m), &sm));
  if (opts.checkOnly) return 0;
  return emitMachineCode(opts, target, diags, *m, times);
}

// LLVM is built without exceptions: an allocation it cannot make calls this handler (never
// returning) rather than throwing; it reports out of memory as the compile does (exit 2).
void llvmOutOfMemory(void *, const char *, bool) {
  static const char msg[] = "shmapc: out of memory: the program is too large to compile in the memory "
                            "this process may use (see ulimit -v)\n";
  ssize_t written = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)written;
  std::_Exit(2);
}

} // namespace

int compile(const CompileOptions &opts, std::ostream &diagOut) {
  static const bool handlerInstalled = [] {  // (LLVM allows one handler per process)
    llvm::install_bad_alloc_error_handler(llvmOutOfMemory);
    return true;
  }();
  (void)handlerInstalled;
  return runWithBigStack([&] {
    SourceManager sm;
    Diagnostics diags(sm, diagOut);
    PhaseTimes times(opts.timePasses);
    // Printed however the compile ends (an error stops it at some stage: the stages before).
    struct PrintTimes {
      PhaseTimes &times;
      std::ostream &os;
      ~PrintTimes() { times.print(os); }
    } printTimes{times, diagOut};
    llvm::TimePassesIsEnabled = opts.timePasses;
    try {
      return compileWith(opts, sm, diags, times);
    } catch (const CompileError &) {
      return 1;
    } catch (const InternalError &e) {  // an equation its primitive's shape rule refuses
      diagOut << "shmapc: internal error: " << e.what() << "\n";
      return 2;
    } catch (const std::bad_alloc &) {
      // Unwinding here has freed what the compile held, so the message can be written.
      diagOut << "shmapc: out of memory: the program is too large to compile in the memory "
                 "this process may use (see ulimit -v)\n";
      return 2;
    } catch (const std::exception &e) {  // any other exception is a bug, not a crash
      diagOut << "shmapc: internal error: " << e.what() << "\n";
      return 2;
    } catch (...) {
      diagOut << "shmapc: internal error: an unknown exception\n";
      return 2;
    }
  });
}

} // namespace shmapc
