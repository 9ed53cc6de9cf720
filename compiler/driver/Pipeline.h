// The compiler pipeline as a straight list of stages, with a stop point (`--emit=`) after each.
#pragma once
#include "source/Diagnostics.h"

#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace shmapc {

// Comm: the static communication report (comm/Comm.h), printed after the IR passes.
enum class Emit { Tokens, AST, IR, Comm, Sharded, LLVM, Asm, Obj, Exe };

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
