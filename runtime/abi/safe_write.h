// Writing an output file so that nobody else can redirect the write, shared by the runtime
// (save, savez, --trace) and the compiler (-o, --emit).
//
// A regular file (or a missing one) is written to a fresh temporary file in its folder, made
// with O_EXCL|O_NOFOLLOW under an unpredictable name, synced, and renamed over the file: a
// crash never leaves a half-written file under the final name, and a symbolic link planted in
// the folder cannot make the write land elsewhere. What is not a regular file is never
// replaced: a character or block device or a FIFO (/dev/null, a pipe a reader waits on) is
// written in place, as are the process's own descriptors (/dev/stdout, /dev/stderr,
// /dev/fd/N, /proc/...: whatever they are); a directory, a socket and a symbolic link to a missing
// file are refused. A symbolic link to a regular file is written through: the link stays and
// its target is replaced, like a shell's `>` or numpy's np.save.
//
// The temporary file has the mode of any new file (0666, or 0777 for an executable, less the
// umask): a file it replaces does not pass its mode on. Dependency-free: the compiler's driver
// builds this same file.
#pragma once

#include <cstddef>
#include <string>

namespace safe_write {

class Output {
public:
  Output() = default;
  Output(const Output &) = delete;
  Output &operator=(const Output &) = delete;
  ~Output() { abandon(); }

  // Prepares the write of `path`; false with the reason in `error` ("it is a directory",
  // strerror's text) if it cannot be written.
  bool open(const std::string &path, bool executable, std::string &error);
  // Appends bytes (retrying short writes and EINTR).
  bool write(const void *data, size_t bytes, std::string &error);
  // Syncs the data and renames the temporary file over the destination (or, written in
  // place, closes it); false with the reason if any of that fails (the destination is then
  // left as it was, when it was replaced rather than written in place).
  bool commit(std::string &error);
  // Closes and removes the temporary file, if any; the destination is untouched.
  void abandon();

  // The temporary file ("" when written in place or not open): for tests.
  const std::string &temporaryPath() const { return tmp_; }
  bool inPlace() const { return inPlace_; }

private:
  int fd_ = -1;
  bool inPlace_ = false;
  std::string target_, tmp_;
};

// open + write + commit.
bool writeFile(const std::string &path, const void *data, size_t bytes, bool executable, std::string &error);

} // namespace safe_write
