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

// The first NAME.smp on the search path that exists; if it is not a regular file, loadSource
// says so rather than the search skipping it silently.
std::string findModule(const std::string &name, const std::string &importerDir,
                       const std::vector<std::string> &includeDirs) {
  std::vector<std::string> dirs = {importerDir};
  dirs.insert(dirs.end(), includeDirs.begin(), includeDirs.end());
  dirs.push_back(stdlibDir());
  for (const std::string &dir : dirs) {
    std::filesystem::path p = std::filesystem::path(dir.empty() ? "." : dir) / (name + ".smp");
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return "";
}

} // namespace

int loadSource(SourceManager &sm, Diagnostics &diags, const std::string &path, Loc at) {
  ReadResult why;
  int file = sm.load(path, why);
  if (file >= 0) return file;
  const std::string quoted = "'" + path + "'";
  const std::string limit = std::to_string(kMaxSourceBytes >> 20) + " MiB";
  switch (why.status) {
  case ReadStatus::NotRegular:
    diags.fatal(DiagId::NotAFile, at, quoted + " is " + why.detail + ", not a source file",
                "shmapc reads programs and modules only from regular files");
  case ReadStatus::TooLarge:
    diags.fatal(DiagId::FileTooLarge, at,
                quoted + " is larger than " + limit + ", the limit for a source file",
                "check that this is the file you meant: a source file may be at most " + limit);
  default:
    diags.fatal(DiagId::FileNotFound, at, "cannot read " + quoted + ": " + why.detail,
                "check the path and that the file is readable");
  }
}

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
        file = path.empty() ? -1 : loadSource(sm, diags, path, imp.loc);
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
