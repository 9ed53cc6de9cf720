// Signals while shmapc works: SIGINT, SIGTERM and SIGHUP end a compile at once, at any stage
// (the front end, LLVM's optimisation, the link), and leave nothing behind: every temporary
// folder and temporary output file shmapc made is removed, the linker and what it started are
// ended, and the output (-o, a.out, an --emit file) is as it was, because an output is only
// ever replaced by renaming a complete temporary file over it. shmapc then exits with status
// 128 + the signal (a normal exit, as `shmapc run` reports a program a signal ended).
//
// How: the signals are blocked in every thread, and one thread of this file waits for them
// (sigwait), so the cleanup runs as ordinary code, not in a signal handler, and whatever the
// compile thread is doing. Making a temporary, renaming one into place and starting a child
// happen under a lock that the cleanup takes and never gives back: a temporary is either
// known to the cleanup or not made yet (and then never made), and an output is either renamed
// into place whole or not at all. While `shmapc run`'s program runs, a signal is passed on to
// it instead, and shmapc waits for it (main.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace shmapc::interrupt {

// Blocks the signals in the calling thread (and so in every thread made after it: the
// compile's) and starts the thread that waits for them; main() calls it before anything else.
// A signal that shmapc was started ignoring (nohup's SIGHUP) stays ignored. Without it (the
// fuzzer, which runs the pipeline in-process) the functions below work the same, untracked
// by any signal.
void install();

// A new private folder PREFIX-XXXXXX in $TMPDIR (else /tmp) that a signal removes; "" with
// the reason in `error` if it cannot be made.
std::string makeTemporaryFolder(const char *prefix, std::string &error);
// Removes the folder and everything in it, and forgets it.
void removeTemporaryFolder(const std::string &dir);

// safe_write::writeFile, with the temporary file known to the cleanup until it is renamed
// over `path`.
bool writeOutputFile(const std::string &path, const void *data, size_t bytes, bool executable, std::string &error);

enum class Child {
  Linker,   // found on PATH; runs in a process group of its own, which a signal ends
  Program,  // `shmapc run`'s program: a signal to shmapc is passed on to it
};

// Runs argv and waits for it: true with its wait status (waitpid's) in `status`, or false with
// the reason in `error`. The child starts with the signal mask shmapc was started with. With
// a `tmpdir`, the child's $TMPDIR is that folder: the linker's own temporaries (g++'s, collect2's)
// then lie in a folder of shmapc's, removed with it even when a signal ends the linker before
// it could remove them itself.
bool runChild(Child kind, const std::vector<std::string> &argv, int &status, std::string &error,
              const std::string &tmpdir = "");

// The signal passed on to `shmapc run`'s program, or 0.
int signalPassedOn();

} // namespace shmapc::interrupt
