// The compiler pipeline as a straight list of stages, with a stop point (`--emit=`) after each.
// The IR stages are named (sema, then each pass of passes::pipeline()): the IR can be printed
// after any of them (--print-after) and the compile stopped there (--stop-after), each view
// (--emit=) valid there produced from the IR at that point.
#pragma once
#include "source/Diagnostics.h"

#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace shmapc {

// Comm: the static communication report (comm/Comm.h), printed after the IR passes.
// Sharded: the jit functions' shardings (after propagation). Plan: codegen's decisions for
// each function (fusion groups, buffers, in-place updates, kernel calls; codegen/Plan.h).
enum class Emit { Tokens, AST, IR, Comm, Sharded, Stages, Schedule, Plan, LLVM, Asm, Obj, Exe };

// The --emit= names, in the order --help lists them.
const std::vector<std::pair<std::string, Emit>> &emitNames();

// The names of the IR stages, in order: "sema" (the IR sema built, with the command line's
// shmap flags applied), then every pass. --print-after and --stop-after take these.
std::vector<std::string> stageNames();

struct CompileOptions {
  std::string input;
  std::string output;                  // file to write; "" = stdout for text emits
  Emit emit = Emit::Exe;
  int optLevel = 2;
  std::string targetCpu = "native";    // --target-cpu: native, x86-64[-v2|-v3|-v4], or a CPU LLVM knows
  std::vector<std::string> includeDirs;
  bool verifyEach = false;             // run the IR verifier after every pass
  bool checkOnly = false;              // `shmapc check`: stop after the IR passes
  bool explicitPbroadcast = false;     // every shmap as if auto_pbroadcast=false
  bool noCheckVma = false;             // every shmap as if check_vma=false
  bool naiveTranspose = false;         // --transpose=naive: transposition before variance types
  bool jitWhole = false;               // --jit-whole: run jit functions unpartitioned
  // --print-after: the stages after which the IR is printed to `diagOut` ("all": every one).
  std::vector<std::string> printAfter;
  // --stop-after: the stage after which the compile stops and produces its view ("": none,
  // i.e. after the last pass for the IR views, or where the view is taken: --emit=sharded
  // after propagate-shardings).
  std::string stopAfter;
  bool mpi = false;                    // --mpi: link the MPI runtime (runtime/ranks.h)
  bool timePasses = false;             // --time-passes: each stage's seconds to stderr (PhaseTimes.h)
  // Hooks for the fuzzer (tests/fuzz), which must not read files: the program text, named
  // `input` in diagnostics, instead of reading `input`; and how an import finds its module
  // (a SourceManager file id, -1 = not found) instead of searching the folders.
  const std::string *inputText = nullptr;
  std::function<int(const std::string &module, SourceManager &sm)> resolveModule;
};

// Runs the pipeline. Returns the process exit status: 0 ok, 1 user error (diagnostics were
// printed to `diagOut`), 2 internal error.
int compile(const CompileOptions &opts, std::ostream &diagOut = std::cerr);

} // namespace shmapc
