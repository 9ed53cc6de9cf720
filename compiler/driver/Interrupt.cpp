// Signals while shmapc works (Interrupt.h).
#include "driver/Interrupt.h"

#include "safe_write.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace shmapc::interrupt {

namespace {

struct State {
  // Held while a temporary or a child is made or let go, and by the cleanup for good.
  std::mutex lock;
  std::vector<std::string> folders, files;
  pid_t linker = 0, program = 0;
  sigset_t watched;                  // the signals the waiting thread takes
  sigset_t original;                 // the mask before install(): the children's
  bool installed = false;
  std::atomic<int> passedOn{0};
};

// Never destroyed: the waiting thread may still use it while exit() runs static destructors.
State &state() {
  static State *s = new State;
  return *s;
}

void forget(std::vector<std::string> &list, const std::string &item) {
  list.erase(std::remove(list.begin(), list.end(), item), list.end());
}

// Whether the child has ended (or been reaped by the thread that waits for it) within
// about `seconds`; it is left for that thread to reap.
bool endedWithin(pid_t pid, double seconds) {
  for (int waited = 0; waited < seconds * 200; ++waited) {
    siginfo_t info{};
    if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno != EINTR) return true;
    if (info.si_pid == pid) return true;
    usleep(5000);
  }
  return false;
}

// A folder the linker may still be writing into as it dies: removed again until it is gone.
void removeFolderNow(const std::string &dir) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!ec) return;
    usleep(5000);
  }
}

// The signal came while shmapc compiles (or between its steps): end the linker and what it
// started (g++, collect2, ld: each removes its own temporary files on these signals), remove
// every temporary and exit. The lock is never given back, so the compile thread cannot make
// another temporary or rename one over the output.
[[noreturn]] void abandon(State &s, int sig) {
  if (s.linker > 0) {
    killpg(s.linker, sig);
    if (!endedWithin(s.linker, 1.0)) {
      killpg(s.linker, SIGKILL);
      endedWithin(s.linker, 1.0);
    }
  }
  for (const std::string &f : s.files) unlink(f.c_str());
  for (const std::string &d : s.folders) removeFolderNow(d);
  _exit(128 + sig);
}

void *watch(void *) {
  State &s = state();
  for (;;) {
    int sig = 0;
    if (sigwait(&s.watched, &sig) != 0) continue;
    std::unique_lock<std::mutex> held(s.lock);
    if (s.program > 0) {  // `shmapc run`'s program: it decides, and shmapc waits for it
      s.passedOn = sig;
      kill(s.program, sig);
      continue;
    }
    held.release();
    abandon(s, sig);
  }
}

sigset_t childMask() {
  State &s = state();
  if (s.installed) return s.original;
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  return now;
}

} // namespace

void install() {
  State &s = state();
  if (s.installed) return;
  sigemptyset(&s.watched);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;  // (a blocked ignored signal would be queued)
    sigaddset(&s.watched, sig);
  }
  if (sigisemptyset(&s.watched)) return;  // all three ignored: nothing to wait for
  if (pthread_sigmask(SIG_BLOCK, &s.watched, &s.original) != 0) return;
  pthread_t thread;
  if (pthread_create(&thread, nullptr, watch, nullptr) != 0) {
    pthread_sigmask(SIG_SETMASK, &s.original, nullptr);  // no thread: the signals' defaults
    return;
  }
  pthread_detach(thread);
  s.installed = true;
}

std::string makeTemporaryFolder(const char *prefix, std::string &error) {
  const char *tmpdir = std::getenv("TMPDIR");
  const std::string parent = tmpdir && *tmpdir ? tmpdir : "/tmp";
  std::string dir = parent + "/" + prefix + "-XXXXXX";
  State &s = state();
  std::lock_guard<std::mutex> held(s.lock);
  if (!mkdtemp(&dir[0])) {
    error = "cannot create a temporary folder in " + parent + ": " + std::strerror(errno);
    return "";
  }
  s.folders.push_back(dir);
  return dir;
}

void removeTemporaryFolder(const std::string &dir) {
  State &s = state();
  std::lock_guard<std::mutex> held(s.lock);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  forget(s.folders, dir);
}

bool writeOutputFile(const std::string &path, const void *data, size_t bytes, bool executable, std::string &error) {
  State &s = state();
  safe_write::Output out;
  std::string tmp;
  {
    std::lock_guard<std::mutex> held(s.lock);
    if (!out.open(path, executable, error)) return false;
    tmp = out.temporaryPath();  // ("" for a device or FIFO written in place)
    if (!tmp.empty()) s.files.push_back(tmp);
  }
  bool ok = out.write(data, bytes, error);
  std::lock_guard<std::mutex> held(s.lock);
  ok = ok && out.commit(error);
  out.abandon();  // (nothing left after a commit)
  if (!tmp.empty()) forget(s.files, tmp);
  return ok;
}

bool runChild(Child kind, const std::vector<std::string> &argv, int &status, std::string &error,
              const std::string &tmpdir) {
  std::vector<char *> args;
  for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  // The environment as it is, with TMPDIR replaced when asked.
  const std::string tmpdirEntry = "TMPDIR=" + tmpdir;
  std::vector<char *> env;
  for (char **e = environ; *e; ++e)
    if (tmpdir.empty() || std::strncmp(*e, "TMPDIR=", 7) != 0) env.push_back(*e);
  if (!tmpdir.empty()) env.push_back(const_cast<char *>(tmpdirEntry.c_str()));
  env.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  const sigset_t mask = childMask();
  posix_spawnattr_setsigmask(&attr, &mask);
  short flags = POSIX_SPAWN_SETSIGMASK;
  if (kind == Child::Linker) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
  State &s = state();
  pid_t pid = 0;
  int rc = 0;
  {
    std::lock_guard<std::mutex> held(s.lock);
    rc = kind == Child::Linker ? posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), env.data())
                               : posix_spawn(&pid, args[0], nullptr, &attr, args.data(), env.data());
    if (rc == 0) (kind == Child::Linker ? s.linker : s.program) = pid;
  }
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    error = "cannot run '" + argv[0] + "': " + std::strerror(rc);
    return false;
  }
  int waited;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  const int err = errno;
  {
    std::lock_guard<std::mutex> held(s.lock);
    (kind == Child::Linker ? s.linker : s.program) = 0;
  }
  if (waited < 0) {
    error = std::string("waitpid failed: ") + std::strerror(err);
    return false;
  }
  return true;
}

int signalPassedOn() { return state().passedOn; }

} // namespace shmapc::interrupt
