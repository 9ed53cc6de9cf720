// The ordered list of IR-to-IR passes run between sema and codegen. Each pass is named so
// the driver can verify the IR after it (--verify-each) and stop there (--stop-after=NAME).
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

#include <string>
#include <vector>

namespace shmapc::passes {

struct Pass {
  const char *name;
  // Rewrites the module in place. User errors go through `diags` (fatal: CompileError).
  void (*run)(ir::Module &m, Diagnostics &diags);
};

const std::vector<Pass> &pipeline();

} // namespace shmapc::passes
