// The ordered list of IR-to-IR passes run between sema and codegen. Each pass has a stable
// name (`shmapc --list-passes`) so the driver can verify the IR after it (--verify-each),
// print it (--print-after=NAME) and stop there (--stop-after=NAME).
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

#include <string>
#include <vector>

namespace shmapc::passes {

// The command-line choices the passes read: how to compile the program, which the IR (the
// program itself) does not carry. Each shmap's own check_vma / auto_pbroadcast are program
// facts and stay on its ir::Func (the driver applies --no-check-vma and --explicit-pbroadcast
// to them before the passes run).
struct PassOptions {
  // --transpose=naive: shmaps transpose by the rules of untyped bodies (cotangents of
  // unmapped outputs divided, of inputs psummed defensively), for comparison.
  bool naiveTranspose = false;
  // --jit-whole: no jit function is partitioned; each runs whole on the host.
  bool jitWhole = false;
};

struct Pass {
  const char *name;
  // Rewrites the module in place. User errors go through `diags` (fatal: CompileError).
  void (*run)(ir::Module &m, const PassOptions &opts, Diagnostics &diags);
};

const std::vector<Pass> &pipeline();
// The pass of that name, or null.
const Pass *findPass(const std::string &name);

// The passes of this folder; the others are declared by their folders' headers (ad/AD.h,
// jit/Jit.h, inline/Inline.h, variance/Variance.h, reductions/Reductions.h).
// Checks that every array stays within the runtime's limits of rank and element count.
void checkLimits(ir::Module &m, Diagnostics &diags);
// Reads a matmul operand made by a last-two-dimensions transpose through BLAS's transpose
// flag, dropping the transpose if nothing else reads it (FoldTransposes.cpp).
void foldTransposesIntoMatmul(ir::Module &m, Diagnostics &diags);

} // namespace shmapc::passes
