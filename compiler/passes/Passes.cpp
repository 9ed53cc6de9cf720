#include "passes/Passes.h"

namespace shmapc::passes {

// The passes, in order: calls inlined, variance inferred (pbroadcasts inserted), programs
// differentiated with the variance types in hand, out_specs checked (on the transposed
// shmaps too), and every array's size checked against the runtime's limits.
const std::vector<Pass> &pipeline() {
  static const std::vector<Pass> passes = {
      {"inline-calls", inlineCalls},
      {"insert-pbroadcasts", insertPbroadcasts},
      {"differentiate", differentiate},
      {"check-out-specs", checkOutSpecs},
      {"check-limits", checkLimits},
  };
  return passes;
}

} // namespace shmapc::passes
