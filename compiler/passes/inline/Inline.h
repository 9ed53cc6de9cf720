// Inlining calls: a pass of its own, and what the jit partitioner and autodiff use of it.
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

namespace shmapc::passes {

void inlineCalls(ir::Module &m, Diagnostics &diags);
// Inlines the calls in `f` alone (a jit function, before its shardings propagate).
void inlineCallsIn(ir::Module &m, ir::Func &f);
// A copy of `src` (its nested and traced bodies copied too) in a new Func of `m`.
ir::Func *cloneFunc(ir::Module &m, const ir::Func &src, const ir::Mesh *mesh);
// Drops the functions no longer reachable from the module's entry points.
void removeUnreachableFuncs(ir::Module &m);

} // namespace shmapc::passes
