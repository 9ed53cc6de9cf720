// Output files nobody else can redirect (safe_write.h).
#include "safe_write.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace safe_write {

namespace {

std::string why(int err) { return std::strerror(err); }

// 12 characters from [A-Za-z0-9]: about 71 bits, from the kernel's random source (a clock and
// the pid only if that fails, which a locked-down sandbox may make it).
std::string randomSuffix() {
  static const char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[12];
  if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
    unsigned long long x = (unsigned long long)std::chrono::steady_clock::now().time_since_epoch().count() ^
                           ((unsigned long long)getpid() << 32);
    for (unsigned char &b : bytes) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      b = (unsigned char)(x >> 56);
    }
  }
  std::string s;
  for (unsigned char b : bytes) s += kChars[b % (sizeof kChars - 1)];
  return s;
}

bool startsWith(const std::string &s, const char *prefix) { return s.rfind(prefix, 0) == 0; }

std::string folderOf(const std::string &path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseOf(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

bool Output::open(const std::string &path, bool executable, std::string &error) {
  abandon();
  if (path.empty()) {
    error = "no file name";
    return false;
  }
  struct stat link, st;
  if (lstat(path.c_str(), &link) != 0) {
    if (errno != ENOENT) {
      error = why(errno);
      return false;
    }
    target_ = path;  // a new file
  } else {
    if (stat(path.c_str(), &st) != 0) {
      error = errno == ENOENT ? "it is a symbolic link to a missing file" : why(errno);
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      error = "it is a directory";
      return false;
    }
    if (S_ISSOCK(st.st_mode)) {
      error = "it is a socket";
      return false;
    }
    // Devices and FIFOs are written in place, and so are the process's own file descriptors
    // (/dev/stdout may name a pipe, a terminal or the file the shell redirected it to, which
    // the shell holds open: replacing it would write to a file nobody reads).
    const bool special = !S_ISREG(st.st_mode) || startsWith(path, "/proc/") || startsWith(path, "/dev/fd/") ||
                         path == "/dev/stdout" || path == "/dev/stderr";
    if (special) {
      const int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY | (S_ISREG(st.st_mode) ? O_TRUNC : 0);
      fd_ = ::open(path.c_str(), flags);
      if (fd_ < 0) {
        error = why(errno);
        return false;
      }
      inPlace_ = true;
      return true;
    }
    if (S_ISLNK(link.st_mode)) {  // through the link: its target is the file replaced
      char *real = realpath(path.c_str(), nullptr);
      if (!real) {
        error = why(errno);
        return false;
      }
      target_ = real;
      std::free(real);
    } else {
      target_ = path;
    }
  }
  const std::string stem = folderOf(target_) + "/." + baseOf(target_).substr(0, 200) + ".tmp-";
  const mode_t mode = executable ? 0777 : 0666;  // less the umask, as for any new file
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string tmp = stem + randomSuffix();
    fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
    if (fd_ >= 0) {
      tmp_ = tmp;
      return true;
    }
    if (errno != EEXIST) break;
  }
  error = why(errno);
  target_.clear();
  return false;
}

bool Output::write(const void *data, size_t bytes, std::string &error) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes < (size_t)INT_MAX ? bytes : (size_t)INT_MAX);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = why(errno);
      return false;
    }
    if (n == 0) {
      error = "nothing was written";
      return false;
    }
    p += n;
    bytes -= (size_t)n;
  }
  return true;
}

bool Output::commit(std::string &error) {
  if (fd_ < 0) {
    error = "not open";
    return false;
  }
  if (inPlace_) {
    const int rc = ::close(fd_);
    fd_ = -1;
    inPlace_ = false;
    if (rc != 0 && errno != EINTR) {
      error = why(errno);
      return false;
    }
    return true;
  }
  // The data reaches the disk before the name does: a crash leaves the old file or the new.
  if (fsync(fd_) != 0) {
    error = why(errno);
    abandon();
    return false;
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 || std::rename(tmp_.c_str(), target_.c_str()) != 0) {
    error = why(errno);
    abandon();
    return false;
  }
  tmp_.clear();
  // The rename itself, best effort (some file systems refuse fsync on a folder).
  const int dir = ::open(folderOf(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)fsync(dir);
    ::close(dir);
  }
  target_.clear();
  return true;
}

void Output::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  target_.clear();
  inPlace_ = false;
}

bool writeFile(const std::string &path, const void *data, size_t bytes, bool executable, std::string &error) {
  Output out;
  if (!out.open(path, executable, error)) return false;
  if (!out.write(data, bytes, error)) return false;
  return out.commit(error);
}

} // namespace safe_write
