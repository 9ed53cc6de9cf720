// compile(): source -> tokens -> AST -> IR -> IR passes -> LLVM IR -> object -> executable,
// stopping where --emit says.
#include "driver/Pipeline.h"

#include "codegen/Codegen.h"
#include "driver/Link.h"
#include "driver/Modules.h"
#include "ir/Comm.h"
#include "lexer/Lexer.h"
#include "parser/Parser.h"
#include "passes/Passes.h"
#include "sema/Sema.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace shmapc {

namespace {

// Writes a text emit to `-o` or stdout.
bool writeText(const CompileOptions &opts, const std::string &text) {
  if (opts.output.empty() || opts.output == "-") {
    std::cout << text;
    std::cout.flush();
    return true;
  }
  std::ofstream out(opts.output, std::ios::binary);
  out << text;
  if (!out) {
    std::cerr << "shmapc: error: cannot write '" << opts.output << "'\n";
    return false;
  }
  return true;
}

bool verifyAfter(const ir::Module &m, const char *stage) {
  std::vector<std::string> problems = ir::verifyModule(m);
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
  for (auto &f : m.funcs) {
    if (!f->isShmapBody) continue;
    if (opts.explicitPbroadcast) f->autoPbroadcast = false;
    if (opts.noCheckVma || opts.naiveTranspose) f->checkVma = false;
    if (!f->checkVma) markUntyped(*f);  // its loop bodies and branches (codegen reads them)
  }
}

int emitMachineCode(const CompileOptions &opts, ir::Module &m) {
  llvm::LLVMContext ctx;
  std::string error;
  std::unique_ptr<llvm::Module> lm = codegen::emitLLVM(m, ctx, error);
  if (!lm || !codegen::optimize(*lm, opts.optLevel, error)) {
    std::cerr << "shmapc: internal error: code generation failed: " << error << "\n";
    return 2;
  }
  if (opts.emit == Emit::LLVM) return writeText(opts, codegen::printLLVM(*lm)) ? 0 : 1;
  if (opts.emit == Emit::Asm) {
    std::string path = opts.output.empty() ? "/dev/stdout" : opts.output;
    if (!codegen::emitObjectFile(*lm, opts.optLevel, path, true, error)) {
      std::cerr << "shmapc: error: " << error << "\n";
      return 1;
    }
    return 0;
  }
  if (opts.emit == Emit::Obj) {
    std::string path = opts.output.empty() ? "a.o" : opts.output;
    if (!codegen::emitObjectFile(*lm, opts.optLevel, path, false, error)) {
      std::cerr << "shmapc: error: " << error << "\n";
      return 1;
    }
    return 0;
  }
  // An executable: object into a temporary, then link.
  std::string exe = opts.output.empty() ? "a.out" : opts.output;
  std::string obj = exe + ".shmapc-" + std::to_string(getpid()) + ".o";
  bool ok = codegen::emitObjectFile(*lm, opts.optLevel, obj, false, error) &&
            linkExecutable(obj, exe, error);
  std::remove(obj.c_str());
  if (!ok) {
    std::cerr << "shmapc: error: " << error << " [link-failed]\n";
    return 1;
  }
  return 0;
}

int compileWith(const CompileOptions &opts, SourceManager &sm, Diagnostics &diags) {
  int file = opts.inputText ? sm.addBuffer(opts.input, *opts.inputText) : sm.load(opts.input);
  if (file < 0)
    diags.fatal(DiagId::FileNotFound, Loc{}, "cannot read '" + opts.input + "'",
                "check the path and that the file is readable");

  // The parser lexes the file itself; tokens are only materialised to be shown.
  if (opts.emit == Emit::Tokens) return writeText(opts, printTokens(lex(file, sm, diags))) ? 0 : 1;

  ModuleSet modules = loadModules(file, sm, diags, opts.includeDirs, opts.resolveModule);
  if (opts.emit == Emit::AST) return writeText(opts, ast::printAST(*modules.programs[0])) ? 0 : 1;

  std::unique_ptr<ir::Module> m = sema::buildModule(modules.units(), diags);
  applyShmapFlags(opts, *m);
  if (opts.verifyEach && !verifyAfter(*m, "sema")) return 2;
  for (const passes::Pass &pass : passes::pipeline()) {
    pass.run(*m, diags);
    if (opts.verifyEach && !verifyAfter(*m, pass.name)) return 2;
  }
  if (opts.emit == Emit::IR) return writeText(opts, ir::printModule(*m)) ? 0 : 1;
  if (opts.emit == Emit::Comm)
    return writeText(opts, ir::printCommReport(ir::analyzeCommunication(*m), &sm)) ? 0 : 1;
  if (opts.checkOnly) return 0;
  return emitMachineCode(opts, *m);
}

} // namespace

int compile(const CompileOptions &opts, std::ostream &diagOut) {
  SourceManager sm;
  Diagnostics diags(sm, diagOut);
  try {
    return compileWith(opts, sm, diags);
  } catch (const CompileError &) {
    return 1;
  }
}

} // namespace shmapc
