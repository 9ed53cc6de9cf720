// Name resolution, shape/dtype checking and lowering of the AST to IR (one stage: the checks
// need the same information the lowering computes). Errors are fatal (CompileError).
#pragma once
#include "ast/AST.h"
#include "ir/IR.h"

#include <memory>
#include <string>
#include <vector>

namespace shmapc::sema {

struct ModuleUnit {
  std::string name;               // "" for the file being compiled, else the imported module name
  const ast::Program *program;
};

// Builds the IR module: every function instantiation that `main` reaches, with `main` as
// Module::main. units[0] is the main file.
std::unique_ptr<ir::Module> buildModule(const std::vector<ModuleUnit> &units, Diagnostics &diags);

} // namespace shmapc::sema
