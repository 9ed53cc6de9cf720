// The passes that move and merge the all-reduces autodiff leaves in backward shmap bodies, so
// that a backward pass moves no byte and makes no call more than it must.
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

namespace shmapc::passes {

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
// operands laid end to end (CombineReductions.cpp).
void combineReductions(ir::Module &m, Diagnostics &diags);

} // namespace shmapc::passes
