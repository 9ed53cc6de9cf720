#include "driver/Output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace shmapc {

namespace {

[[noreturn]] void cannotWrite(Diagnostics &diags, const std::string &path, const std::string &why) {
  const std::string what = path.empty() ? "standard output" : "'" + path + "'";
  diags.fatal(DiagId::CannotWrite, Loc{}, "cannot write " + what + ": " + why);
}

std::string lastError() { return errno ? std::strerror(errno) : "write error"; }

} // namespace

std::string outputPath(const CompileOptions &opts) {
  if (opts.emit != Emit::Obj && opts.emit != Emit::Exe) return opts.output == "-" ? "" : opts.output;
  if (opts.checkOnly) return "";
  if (!opts.output.empty()) return opts.output;
  return opts.emit == Emit::Obj ? "a.o" : "a.out";
}

void requireWritableOutput(const std::string &path, const std::string &input, Diagnostics &diags) {
  if (path.empty()) return;
  struct stat out, in;
  if (stat(path.c_str(), &out) == 0) {
    if (S_ISDIR(out.st_mode)) cannotWrite(diags, path, "it is a directory");
    // Linking over the program's own source would destroy it.
    if (stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      cannotWrite(diags, path, "it is the input file");
    if (access(path.c_str(), W_OK) != 0) cannotWrite(diags, path, std::strerror(errno));
    return;
  }
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string dir = parent.empty() ? std::string(".") : parent;
  struct stat d;
  if (stat(dir.c_str(), &d) != 0) {
    if (errno == ENOENT) cannotWrite(diags, path, "there is no folder '" + dir + "'");
    cannotWrite(diags, path, "'" + dir + "': " + std::strerror(errno));
  }
  if (!S_ISDIR(d.st_mode)) cannotWrite(diags, path, "'" + dir + "' is not a folder");
  if (access(dir.c_str(), W_OK) != 0)
    cannotWrite(diags, path, "folder '" + dir + "': " + std::strerror(errno));
}

void writeTextOutput(const std::string &path, const std::string &text, Diagnostics &diags) {
  errno = 0;
  if (path.empty()) {
    // stdio reports the error of a buffered write at the flush (e.g. > /dev/full).
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      cannotWrite(diags, "", lastError());
    return;
  }
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f) cannotWrite(diags, path, lastError());
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) cannotWrite(diags, path, lastError());
}

} // namespace shmapc
