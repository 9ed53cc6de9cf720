#include "driver/Modules.h"

#include "parser/Parser.h"

#include <cstdlib>
#include <filesystem>

namespace shmapc {

std::vector<sema::ModuleUnit> ModuleSet::units() const {
  std::vector<sema::ModuleUnit> out;
  for (size_t i = 0; i < programs.size(); ++i) out.push_back({names[i], programs[i].get()});
  return out;
}

std::string stdlibDir() {
  const char *env = std::getenv("SHMAPC_STDLIB");
  return env && *env ? env : SHMAPC_STDLIB_DIR;
}

namespace {

std::string findModule(const std::string &name, const std::string &importerDir,
                       const std::vector<std::string> &includeDirs) {
  std::vector<std::string> dirs = {importerDir};
  dirs.insert(dirs.end(), includeDirs.begin(), includeDirs.end());
  dirs.push_back(stdlibDir());
  for (const std::string &dir : dirs) {
    std::filesystem::path p = std::filesystem::path(dir.empty() ? "." : dir) / (name + ".smp");
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

} // namespace

ModuleSet loadModules(int mainFile, SourceManager &sm, Diagnostics &diags,
                      const std::vector<std::string> &includeDirs,
                      const std::function<int(const std::string &, SourceManager &)> &resolve) {
  ModuleSet set;
  set.names.push_back("");
  set.programs.push_back(std::make_unique<ast::Program>(parseProgram(mainFile, sm, diags)));
  std::vector<int> files = {mainFile};
  // Breadth-first over imports; a module already loaded is not loaded again, so import
  // cycles are harmless.
  for (size_t next = 0; next < set.programs.size(); ++next) {
    std::string importerDir =
        std::filesystem::path(sm.file(files[next]).path).parent_path().string();
    for (const ast::ImportDecl &imp : set.programs[next]->imports) {
      bool loaded = false;
      for (const std::string &n : set.names) loaded |= n == imp.module;
      if (loaded) continue;
      int file;
      if (resolve) {
        file = resolve(imp.module, sm);
      } else {
        std::string path = findModule(imp.module, importerDir, includeDirs);
        file = path.empty() ? -1 : sm.load(path);
      }
      if (file < 0)
        diags.fatal(DiagId::ModuleNotFound, imp.loc, "cannot find module '" + imp.module + "'",
                    "looked for " + imp.module + ".smp next to this file, in each -I folder "
                    "and in the standard library (stdlib/); add -I DIR for a module elsewhere");
      set.names.push_back(imp.module);
      set.programs.push_back(std::make_unique<ast::Program>(parseProgram(file, sm, diags)));
      files.push_back(file);
    }
  }
  return set;
}

} // namespace shmapc
