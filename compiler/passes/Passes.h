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
void removeUnreachableFuncs(ir::Module &m);

// The passes (each in its own file).
// Gives every value of each @jit function a sharding (Shardy's propagation).
void propagateShardings(ir::Module &m, Diagnostics &diags);
void inlineCalls(ir::Module &m, Diagnostics &diags);
// Inlines the calls in `f` alone (a jit function, before its shardings propagate).
void inlineCallsIn(ir::Module &m, ir::Func &f);
// Rewrites each @jit function whose shardings propagated into a shmap of the local
// computation, with the collectives its shardings need (PartitionJit.cpp); none with
// opts.jitWhole.
void partitionJit(ir::Module &m, const PassOptions &opts, Diagnostics &diags);
// Infers every value's variance set inside shmap bodies (the device-variance typing rules), inserting
// pbroadcasts where operands disagree (unless a body says auto_pbroadcast=false, where a
// mismatch is an error), and rewrites the user-level psum into psum2.
void insertPbroadcasts(ir::Module &m, Diagnostics &diags);
// Re-infers the variance of an already typed body (with automatic pbroadcasts) after its
// params came to vary over `paramVary`, a superset of what they varied over: autodiff widens
// a cond's branches to its predicate's axes this way. False (and `f` unusable) where a rule
// cannot hold then, e.g. a pscatter of a value that now varies.
bool retypeWithParams(ir::Func &f, const std::vector<ir::AxisSet> &paramVary,
                      const SourceManager &sources);
// Replaces each jvp/vjp equation by a call of a new function computing it (autodiff, with
// the variance-typed transpose rules for collectives and shmap, or the untyped ones with
// opts.naiveTranspose).
void differentiate(ir::Module &m, const PassOptions &opts, Diagnostics &diags);
// A forward shmap's psum2 (and the element-wise steps after it) whose result the enclosing
// function only returns runs in the backward shmap instead (DeferPrimalReductions.cpp).
void deferPrimalReductions(ir::Module &m, Diagnostics &diags);
// In the backward bodies autodiff made, a psum2 inside a loop whose result only accumulates
// linearly into a carry is taken once, of the carry, after the loop (HoistLoopReductions.cpp).
void hoistLoopReductions(ir::Module &m, Diagnostics &diags);
// In the backward bodies autodiff made, rewrites psum2 then pscatter of the sum (the transposes
// of a pbroadcast and an all_gather_invariant) into psum_scatter / pscatter of the operand and
// a psum2 of the block over the axes left (SinkReductions.cpp).
void sinkReductions(ir::Module &m, Diagnostics &diags);
// In backward shmap bodies, gradient psum2s that may run at one point made one psum2 of their
// operands laid end to end (passes/CombineReductions.cpp).
void combineReductions(ir::Module &m, Diagnostics &diags);
// Checks that every shmap result is invariant over the mesh axes its out_spec leaves unmapped.
void checkOutSpecs(ir::Module &m, Diagnostics &diags);
// Checks that every array stays within the runtime's limits of rank and element count.
void checkLimits(ir::Module &m, Diagnostics &diags);
// Reads a matmul operand made by a last-two-dimensions transpose through BLAS's transpose
// flag, dropping the transpose if nothing else reads it (FoldTransposes.cpp).
void foldTransposesIntoMatmul(ir::Module &m, Diagnostics &diags);

} // namespace shmapc::passes
