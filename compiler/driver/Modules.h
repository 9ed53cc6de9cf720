// Loading the main file and the modules it imports (transitively). A module `nn` is the file
// nn.smp in the importing file's folder, then each -I folder, then the stdlib folder.
#pragma once
#include "ast/AST.h"
#include "sema/Sema.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shmapc {

struct ModuleSet {
  std::vector<std::string> names;                      // names[0] = "" (the main file)
  std::vector<std::unique_ptr<ast::Program>> programs;
  std::vector<sema::ModuleUnit> units() const;
};

// Reads a program or module file; on failure reports why (at `at`: the import, or no location
// for the main file) and throws CompileError.
int loadSource(SourceManager &sm, Diagnostics &diags, const std::string &path, Loc at);

// `resolve`, if set, replaces the search (the fuzzer's in-memory modules).
ModuleSet loadModules(int mainFile, SourceManager &sm, Diagnostics &diags,
                      const std::vector<std::string> &includeDirs,
                      const std::function<int(const std::string &, SourceManager &)> &resolve = {});

// The stdlib folder: $SHMAPC_STDLIB if set, else the source tree's stdlib/.
std::string stdlibDir();

} // namespace shmapc
