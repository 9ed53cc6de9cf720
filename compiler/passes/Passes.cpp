#include "passes/Passes.h"

namespace shmapc::passes {

// The passes, in order: the shardings of jit functions propagated and the functions partitioned
// into shmaps, calls inlined, variance inferred (pbroadcasts inserted), programs
// differentiated with the variance types in hand, the forward shmaps' sums that only give a
// returned value moved into the backward shmaps, the backward bodies' all-reduces that
// only accumulate into a loop's carry taken once after the loop, those whose
// results are only sliced reduced into the slice and those that may run together combined,
// out_specs checked (on the transposed
// shmaps too), every array's size checked against the runtime's limits, and matmuls of
// transposed operands made to read them through BLAS's transpose flags.
const std::vector<Pass> &pipeline() {
  static const std::vector<Pass> passes = {
      {"propagate-shardings", propagateShardings},
      {"partition-jit", partitionJit},
      {"inline-calls", inlineCalls},
      {"insert-pbroadcasts", insertPbroadcasts},
      {"differentiate", differentiate},
      {"defer-primal-reductions", deferPrimalReductions},
      {"hoist-loop-reductions", hoistLoopReductions},
      {"sink-reductions", sinkReductions},
      {"combine-reductions", combineReductions},
      {"check-out-specs", checkOutSpecs},
      {"check-limits", checkLimits},
      {"fold-transposes", foldTransposesIntoMatmul},
  };
  return passes;
}

} // namespace shmapc::passes
