#include "source/ReadFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shmapc {

namespace {

const char *fileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

ReadResult unreadable(int err) { return {ReadStatus::Unreadable, std::strerror(err)}; }

// Reads at most kMaxSourceBytes + 1 bytes: the file may have grown since it was stat'ed.
ReadResult readBounded(int fd, std::string &text) {
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return unreadable(errno);
    if (n == 0) return {};
    text.append(buf, (size_t)n);
    if (text.size() > kMaxSourceBytes) return {ReadStatus::TooLarge, ""};
  }
}

} // namespace

ReadResult readSourceFile(const std::string &path, std::string &text) {
  // stat before open: opening a FIFO waits for a writer, and opening a device can act on it.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return unreadable(errno);
  if (!S_ISREG(st.st_mode)) return {ReadStatus::NotRegular, fileKind(st.st_mode)};
  if ((uint64_t)st.st_size > kMaxSourceBytes) return {ReadStatus::TooLarge, ""};
  // O_NONBLOCK: should the path have become a FIFO since the stat, open still returns.
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return unreadable(errno);
  ReadResult r;
  if (fstat(fd, &st) != 0) r = unreadable(errno);
  else if (!S_ISREG(st.st_mode)) r = {ReadStatus::NotRegular, fileKind(st.st_mode)};
  else {
    text.reserve((size_t)st.st_size);
    r = readBounded(fd, text);
  }
  close(fd);
  if (r.status != ReadStatus::Ok) text.clear();
  return r;
}

} // namespace shmapc
