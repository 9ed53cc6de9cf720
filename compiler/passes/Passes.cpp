#include "passes/Passes.h"

namespace shmapc::passes {

// The passes, in order. Device-variance inference and pbroadcast insertion (issue 3) and
// autodiff (issue 4) are added here.
const std::vector<Pass> &pipeline() {
  static const std::vector<Pass> passes = {
      {"inline-calls", inlineCalls},
      {"insert-pbroadcasts", insertPbroadcasts},
      {"check-out-specs", checkOutSpecs},
  };
  return passes;
}

} // namespace shmapc::passes
