#include "driver/Output.h"

#include "driver/Interrupt.h"

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
  if (opts.emit == Emit::Obj && opts.output == "-") return "";  // an object to standard output
  if (!opts.output.empty()) return opts.output;
  return opts.emit == Emit::Obj ? "a.o" : "a.out";
}

void requireWritableOutput(const std::string &path, const std::string &input, Diagnostics &diags) {
  if (path.empty()) return;
  struct stat out, in;
  if (stat(path.c_str(), &out) != 0 && lstat(path.c_str(), &out) == 0)
    cannotWrite(diags, path, "it is a symbolic link to a missing file");
  if (stat(path.c_str(), &out) == 0) {
    if (S_ISDIR(out.st_mode)) cannotWrite(diags, path, "it is a directory");
    if (S_ISSOCK(out.st_mode)) cannotWrite(diags, path, "it is a socket");
    // Linking over the program's own source would destroy it.
    if (stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      cannotWrite(diags, path, "it is the input file");
    if (access(path.c_str(), W_OK) != 0) cannotWrite(diags, path, std::strerror(errno));
    // A regular file is replaced by a new one made in its folder (through a symbolic link,
    // the target's folder), which must be writable too.
    if (S_ISREG(out.st_mode)) {
      std::error_code ec;
      const std::filesystem::path real = std::filesystem::canonical(path, ec);
      const std::string dir = ec ? std::string() : real.parent_path().string();
      if (!dir.empty() && access(dir.c_str(), W_OK) != 0)
        cannotWrite(diags, path, "folder '" + dir + "': " + std::strerror(errno));
    }
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

void writeOutput(const std::string &path, const std::string &bytes, bool executable, Diagnostics &diags) {
  errno = 0;
  if (path.empty()) {
    // stdio reports the error of a buffered write at the flush (e.g. > /dev/full).
    if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
      cannotWrite(diags, "", lastError());
    return;
  }
  std::string error;
  if (!interrupt::writeOutputFile(path, bytes.data(), bytes.size(), executable, error))
    cannotWrite(diags, path, error);
}

} // namespace shmapc
