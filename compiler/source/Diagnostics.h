// Source files, locations and the diagnostics engine. Every diagnostic has a registered
// name (Diagnostics.def); a report shows `file:line:col`, the source line, a caret, and a
// hint saying what would fix it.
#pragma once
#include "source/ReadFile.h"

#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace shmapc {

struct Loc {
  int file = -1;  // index into SourceManager; -1 = no location
  int line = 0;   // 1-based
  int col = 0;    // 1-based
  bool valid() const { return file >= 0; }
};

struct SourceFile {
  std::string path;
  std::string text;
  std::vector<size_t> lineStarts;  // offset of each line's first char
  std::string lineText(int line) const;
};

class SourceManager {
public:
  // Reads `path` (readSourceFile); returns the file index, or -1 with the reason in `failure`.
  int load(const std::string &path, ReadResult &failure);
  int addBuffer(const std::string &path, std::string text);
  const SourceFile &file(int id) const { return *files_[id]; }
  int count() const { return (int)files_.size(); }

private:
  std::vector<std::unique_ptr<SourceFile>> files_;
};

enum class DiagId {
#define DIAG(Id, Name) Id,
#include "source/Diagnostics.def"
#undef DIAG
};
const char *diagName(DiagId id);

// Thrown by the front end (never through LLVM code) after an error was reported; the driver
// catches it and exits with status 1.
struct CompileError : std::runtime_error {
  CompileError() : std::runtime_error("compile error") {}
};

// Thrown when the compiler finds it has built ill-formed IR (an equation its primitive's shape
// rule refuses, rules::shapeProblem): a compiler bug, reported by the driver as an internal
// error (exit status 2), never a crash.
struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

class Diagnostics {
public:
  Diagnostics(const SourceManager &sm, std::ostream &out) : sm_(sm), out_(out) {}
  // Reports an error. `hint` (may be empty) says what would fix it.
  void error(DiagId id, Loc loc, const std::string &message, const std::string &hint = "");
  // Adds a note pointing at another location (e.g. the out_spec an error refers to).
  void note(Loc loc, const std::string &message);
  // error() then throw CompileError.
  [[noreturn]] void fatal(DiagId id, Loc loc, const std::string &message,
                          const std::string &hint = "");
  int errorCount() const { return errors_; }
  const SourceManager &sources() const { return sm_; }

private:
  void show(Loc loc, const char *kind, const std::string &message, const char *name);
  const SourceManager &sm_;
  std::ostream &out_;
  int errors_ = 0;
};

} // namespace shmapc
