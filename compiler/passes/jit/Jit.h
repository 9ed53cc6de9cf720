// The jit partitioner's passes: Shardy's propagation of shardings through @jit functions, then
// each function rewritten as a shmap of its local computation.
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

namespace shmapc::passes {

// Gives every value of each @jit function a sharding (Shardy's propagation).
void propagateShardings(ir::Module &m, Diagnostics &diags);
// Rewrites each @jit function whose shardings propagated into a shmap of the local
// computation, with the collectives its shardings need (PartitionJit.cpp).
void partitionJit(ir::Module &m, Diagnostics &diags);

} // namespace shmapc::passes
