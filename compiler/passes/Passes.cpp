#include "passes/Passes.h"
#include "passes/ad/AD.h"
#include "passes/inline/Inline.h"
#include "passes/jit/Jit.h"
#include "passes/pipeline/Pipeline.h"
#include "passes/placement/Placement.h"
#include "passes/reductions/Reductions.h"
#include "passes/variance/Variance.h"

namespace shmapc::passes {

// The passes, in order: the shardings of jit functions propagated and the functions partitioned
// into shmaps, calls inlined, variance inferred (pbroadcasts inserted), programs
// differentiated with the variance types in hand, the forward shmaps' sums that only give a
// returned value moved into the backward shmaps, the backward bodies' all-reduces that
// only accumulate into a loop's carry taken once after the loop, those whose
// results are only sliced reduced into the slice and those that may run together combined,
// host element-wise arithmetic on split arrays moved onto the devices holding the blocks,
// out_specs checked (on the transposed
// shmaps too), every array's size checked against the runtime's limits, and matmuls of
// transposed operands made to read them through BLAS's transpose flags.
// The names are the command line's (--print-after, --stop-after): keep them stable.
const std::vector<Pass> &pipeline() {
  // (most passes read no option)
#define SHMAPC_NO_OPTIONS(fn) [](ir::Module &m, const PassOptions &, Diagnostics &d) { fn(m, d); }
  static const std::vector<Pass> passes = {
      {"propagate-shardings", SHMAPC_NO_OPTIONS(propagateShardings)},
      {"partition-jit",
       [](ir::Module &m, const PassOptions &o, Diagnostics &d) {
         if (!o.jitWhole) partitionJit(m, d);
       }},
      {"split-micro-batches", SHMAPC_NO_OPTIONS(splitMicroBatches)},
      {"inline-calls", SHMAPC_NO_OPTIONS(inlineCalls)},
      {"insert-pbroadcasts", SHMAPC_NO_OPTIONS(insertPbroadcasts)},
      {"differentiate",
       [](ir::Module &m, const PassOptions &o, Diagnostics &d) { differentiate(m, o.naiveTranspose, d); }},
      {"keep-stage-residuals", SHMAPC_NO_OPTIONS(keepStageResiduals)},
      {"hoist-stage-reductions", SHMAPC_NO_OPTIONS(hoistStageReductions)},
      {"sink-updates-into-stages", SHMAPC_NO_OPTIONS(sinkUpdatesIntoStages)},
      {"defer-primal-reductions", SHMAPC_NO_OPTIONS(deferPrimalReductions)},
      {"hoist-loop-reductions", SHMAPC_NO_OPTIONS(hoistLoopReductions)},
      {"sink-reductions", SHMAPC_NO_OPTIONS(sinkReductions)},
      {"combine-reductions", SHMAPC_NO_OPTIONS(combineReductions)},
      {"place-on-devices", SHMAPC_NO_OPTIONS(placeOnDevices)},
      {"check-out-specs", SHMAPC_NO_OPTIONS(checkOutSpecs)},
      {"check-limits", SHMAPC_NO_OPTIONS(checkLimits)},
      {"fold-transposes", SHMAPC_NO_OPTIONS(foldTransposesIntoMatmul)},
  };
#undef SHMAPC_NO_OPTIONS
  return passes;
}

const Pass *findPass(const std::string &name) {
  for (const Pass &p : pipeline())
    if (name == p.name) return &p;
  return nullptr;
}

} // namespace shmapc::passes
