// compile(): source -> tokens -> AST -> IR -> IR passes -> LLVM IR -> object -> executable,
// stopping where --emit (and --stop-after) says.
#include "driver/Pipeline.h"

#include "codegen/Codegen.h"
#include "codegen/Plan.h"
#include "driver/Interrupt.h"
#include "driver/Link.h"
#include "driver/Modules.h"
#include "driver/Output.h"
#include "driver/PhaseTimes.h"
#include "comm/Comm.h"
#include "lexer/Lexer.h"
#include "parser/Parser.h"
#include "passes/Passes.h"
#include "passes/pipeline/Schedule.h"
#include "prims/Prims.h"
#include "rules/Rules.h"
#include "sema/Sema.h"
#include "safe_write.h"
#include "source/BigStack.h"
#include "source/Suggest.h"

#include <map>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassTimingInfo.h>
#include <llvm/Pass.h>
#include <llvm/Support/ErrorHandling.h>

#include <algorithm>
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

const std::vector<std::pair<std::string, Emit>> &emitNames() {
  static const std::vector<std::pair<std::string, Emit>> names = {
      {"tokens", Emit::Tokens}, {"ast", Emit::AST},   {"ir", Emit::IR},   {"comm", Emit::Comm},
      {"sharded", Emit::Sharded}, {"stages", Emit::Stages}, {"schedule", Emit::Schedule}, {"plan", Emit::Plan}, {"llvm", Emit::LLVM}, {"asm", Emit::Asm},
      {"obj", Emit::Obj},       {"exe", Emit::Exe}};
  return names;
}

std::vector<std::string> stageNames() {
  std::vector<std::string> names = {"sema"};
  for (const passes::Pass &p : passes::pipeline()) names.push_back(p.name);
  return names;
}

namespace {

std::string emitName(Emit e) {
  for (const auto &[name, view] : emitNames())
    if (view == e) return name;
  return "?";
}

std::string joined(const std::vector<std::string> &items) {
  std::string s;
  for (const std::string &i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// The pass that finds the pipelines' stages (--emit=stages and --emit=schedule from there on).
const char *const kPipelinePass = "split-micro-batches";

// The stage after which the IR passes stop: --stop-after's, else the one a view is taken
// after: the jit functions' shardings right after propagation (partition-jit turns the
// functions into shmaps), every other view after the last pass.
std::string stopStage(const CompileOptions &opts) {
  if (!opts.stopAfter.empty()) return opts.stopAfter;
  if (opts.emit == Emit::Sharded) return "propagate-shardings";
  if (opts.emit == Emit::Schedule) return kPipelinePass;  // (--emit=stages: every pass, for the memory plan)
  return passes::pipeline().back().name;
}

// Whether `view` can be made from the IR after `stage`: ir and comm from any; sharded from
// sema (the shardings written) and propagate-shardings (propagated), while the jit functions
// are still functions; plan and machine code only from the IR every pass has run on (codegen
// relies on their work: no jvp left, variance inferred, ...). Tokens and ast come before the
// IR exists. `check` without a view emits nothing, so stops anywhere.
bool viewValidAfter(Emit view, const std::string &stage, bool checkOnly) {
  switch (view) {
  case Emit::Tokens:
  case Emit::AST: return false;
  case Emit::IR:
  case Emit::Comm: return true;
  case Emit::Sharded: return stage == "sema" || stage == "propagate-shardings";
  case Emit::Stages:
  case Emit::Schedule: {
    const std::vector<std::string> names = stageNames();
    return std::find(names.begin(), names.end(), stage) >= std::find(names.begin(), names.end(), kPipelinePass);
  }
  case Emit::Exe:
    if (checkOnly) return true;
    [[fallthrough]];
  default: return stage == passes::pipeline().back().name;
  }
}

// An unknown stage name in --print-after / --stop-after: the error names the nearest one and
// lists them all.
void checkStageName(const std::string &name, const std::string &option, Diagnostics &diags) {
  const std::vector<std::string> names = stageNames();
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  const std::string near = closestName(name, names);
  diags.fatal(DiagId::UnknownPass, Loc{}, "unknown pass '" + name + "' in " + option,
              (near.empty() ? "" : "did you mean '" + near + "'? ") + "the passes are " + joined(names) +
                  (option == "--print-after" ? " (or all)" : "") + "; see 'shmapc --list-passes'");
}

// --stop-after and --print-after checked before anything is compiled: their names, and
// that the view asked for can be made where the compile stops.
void checkStages(const CompileOptions &opts, Diagnostics &diags) {
  for (const std::string &name : opts.printAfter)
    if (name != "all") checkStageName(name, "--print-after", diags);
  if (opts.stopAfter.empty()) return;
  checkStageName(opts.stopAfter, "--stop-after", diags);
  if (viewValidAfter(opts.emit, opts.stopAfter, opts.checkOnly)) return;
  std::vector<std::string> there;
  for (const auto &[name, view] : emitNames())
    if (viewValidAfter(view, opts.stopAfter, false)) there.push_back(name);
  const std::string last = passes::pipeline().back().name, view = emitName(opts.emit);
  std::string why;
  if (opts.emit == Emit::Tokens || opts.emit == Emit::AST)
    why = view + " is made before the IR exists (it takes no --stop-after)";
  else if (opts.emit == Emit::Sharded)
    why = "sharded shows the jit functions before partition-jit turns them into shmaps";
  else if (opts.emit == Emit::Stages || opts.emit == Emit::Schedule)
    why = view + " shows the pipelines " + kPipelinePass + " finds";
  else
    why = view + " needs code generation, which runs on the IR after every pass (the last is '" + last + "')";
  diags.fatal(DiagId::ViewNotAtStage, Loc{}, "--emit=" + view + " cannot be produced after '" + opts.stopAfter + "'",
              "the views there are " + joined(there) + "; " + why);
}

bool printsAfter(const CompileOptions &opts, const std::string &stage) {
  for (const std::string &name : opts.printAfter)
    if (name == "all" || name == stage) return true;
  return false;
}

// The structural checks and every equation's shape rule (rules::verifyModule).
bool verifyAfter(const ir::Module &m, const char *stage) {
  std::vector<std::string> problems = rules::verifyModule(m);
  if (problems.empty()) return true;
  std::cerr << "shmapc: internal error: the IR verifier failed after '" << stage << "':\n";
  for (const std::string &p : problems) std::cerr << "  " << p << "\n";
  return false;
}

// The command-line switches override each shmap's own check_vma / auto_pbroadcast.
// --transpose=naive transposes untyped bodies (the rules of shard_map without variance
// types), so it implies --no-check-vma.
void markUntyped(ir::Func &f) {
  f.checkVma = false;
  for (ir::Eqn &e : f.eqns)
    for (ir::Func *b : e.bodies)
      if (b->checkVma) markUntyped(*b);
}

void applyShmapFlags(const CompileOptions &opts, ir::Module &m) {
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
  codegen::Plan plan;  // (recorded only for --emit=plan)
  std::unique_ptr<llvm::Module> lm =
      codegen::emitLLVM(m, ctx, error, target, &diags.sources(), opts.emit == Emit::Plan ? &plan : nullptr);
  times.mark("codegen: LLVM IR emission");
  const std::string out = outputPath(opts);
  if (lm && opts.emit == Emit::Plan) {
    writeOutput(out, codegen::printPlan(m, plan), false, diags);
    return 0;
  }
  if (!lm || !codegen::optimize(*lm, opts.optLevel, error, target)) {
    std::cerr << "shmapc: internal error: code generation failed: " << error << "\n";
    return 2;
  }
  times.mark("LLVM optimisation pipeline (-O" + std::to_string(opts.optLevel) + ")");
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
  // linker never opens the output path itself. The linker's own temporaries (collect2's
  // ccXXXXXX.cdtor.c) go into the folder too: a signal that ends the linker before it removes
  // them removes them with the folder (Interrupt.h).
  std::string dir = interrupt::makeTemporaryFolder("shmapc", error);
  if (dir.empty()) diags.fatal(DiagId::CannotWrite, Loc{}, error);
  struct RemoveDir {
    std::string path;
    ~RemoveDir() { interrupt::removeTemporaryFolder(path); }
  } cleanup{dir};
  const std::string obj = dir + "/prog.o", exe = dir + "/prog";
  if (!safe_write::writeFile(obj, code.data(), code.size(), false, error))
    diags.fatal(DiagId::CannotWrite, Loc{}, "cannot write a temporary object file " + obj + ": " + error);
  if (!linkExecutable(obj, exe, opts.mpi, dir, error)) diags.fatal(DiagId::LinkFailed, Loc{}, error);
  std::ifstream linked(exe, std::ios::binary);
  std::string program((std::istreambuf_iterator<char>(linked)), std::istreambuf_iterator<char>());
  if (!linked) diags.fatal(DiagId::CannotWrite, Loc{}, "cannot read the linked program " + exe);
  writeOutput(out, program, true, diags);
  times.mark("link");
  return 0;
}

int compileWith(const CompileOptions &opts, SourceManager &sm, Diagnostics &diags, PhaseTimes &times,
                std::ostream &diagOut) {
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
  checkStages(opts, diags);
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
  // After each stage: its IR printed (--print-after) and verified (--verify-each); the
  // passes stop after stopStage, and the view asked for is made from the IR there.
  const std::string stop = stopStage(opts);
  bool stopped = false;
  auto after = [&](const std::string &stage) {
    if (printsAfter(opts, stage)) diagOut << "*** IR Dump After " << stage << " ***\n" << ir::printModule(*m);
    stopped = stage == stop;
    return !opts.verifyEach || verifyAfter(*m, stage.c_str());
  };
  if (!after("sema")) return 2;
  const passes::PassOptions passOptions{opts.naiveTranspose, opts.jitWhole};
  for (const passes::Pass &pass : passes::pipeline()) {
    if (stopped) break;
    pass.run(*m, passOptions, diags);
    times.mark(std::string("pass ") + pass.name);
    if (!after(pass.name)) return 2;
  }
  if (opts.emit == Emit::Sharded) return emitText(ir::printShardings(*m));
  if (opts.emit == Emit::Stages) {
    // Each stage program's host memory as codegen plans it (its arenas: an allocation a run each).
    std::map<const ir::Func *, passes::PlannedMemory> planned;
    if (!m->pipelines.empty() && stop == passes::pipeline().back().name) {
      llvm::LLVMContext ctx;
      std::string error;
      codegen::Plan plan;
      if (!codegen::emitLLVM(*m, ctx, error, target, &diags.sources(), &plan)) {
        std::cerr << "shmapc: internal error: code generation failed: " << error << "\n";
        return 2;
      }
      for (const codegen::FuncPlan &f : plan.funcs)
        planned[f.func] = {f.arenaBytes, f.blocksBytesOneProcess, f.blocksSlots > 0};
    }
    return emitText(passes::printStages(*m, &planned));
  }
  if (opts.emit == Emit::Schedule) return emitText(passes::printSchedules(*m));
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
  prims::installRules();  // every stage below asks the primitives' rules
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
      return compileWith(opts, sm, diags, times, diagOut);
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
