// The SHMAP_* environment variables, checked when the program starts: a mistyped value
// (SHMAP_THREADS=spwan, SHMAP_STATS=yes) is refused before the program runs rather than
// silently taken as the default. Where each is read says what it does (docs/runtime.md).
#include "ranks.h"
#include "util.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace shm {

namespace {

struct Choice {
  const char *name;
  const char *values[4];  // the accepted spellings ("" is also accepted: unset)
  const char *meaning;    // for the message
};

// Every SHMAP_* variable the runtime reads, except SHMAP_TRACE (a file name: its file is
// opened at start-up, trace.cpp), SHMAP_PRETEND_CPU_LACKS (checked by the CPU check, which
// runs before main) and SHMAP_MPI_MAX_MESSAGE (a number, below).
const Choice kChoices[] = {
    {"SHMAP_STATS", {"0", "1", "wait", nullptr}, "0 (no table), 1 (the statistics table) or wait (with wait times)"},
    {"SHMAP_THREADS", {"pool", "spawn", nullptr}, "pool (the default: a pool of device threads) or spawn (threads per call)"},
    {"SHMAP_BLAS", {"onednn", "openblas", nullptr}, "onednn (the default) or openblas"},
    {"SHMAP_LOG_RANKS", {"0", "1", nullptr}, "0 or 1"},
    {"SHMAP_CHECK_COLLECTIVES", {"0", "1", nullptr}, "0 or 1"},
    {"SHMAP_REDUCE_LOCALLY_FIRST", {"0", "1", nullptr}, "0 or 1"},
};

} // namespace

std::string environment_error() {
  for (const Choice &c : kChoices) {
    const char *v = std::getenv(c.name);
    if (!v || !*v) continue;
    bool ok = false;
    for (const char *const *a = c.values; *a; ++a) ok |= std::strcmp(v, *a) == 0;
    if (!ok) return std::string(c.name) + "='" + v + "' is not a value it takes: " + c.name + " is " + c.meaning;
  }
  if (const char *v = std::getenv("SHMAP_MPI_MAX_MESSAGE"); v && *v) {
    char *end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v, &end, 10);
    if (*end != '\0' || errno == ERANGE || n < 1 || n > INT_MAX - 1)
      return std::string("SHMAP_MPI_MAX_MESSAGE='") + v +
             "' is not a value it takes: SHMAP_MPI_MAX_MESSAGE is a number of bytes from 1 to " +
             std::to_string(INT_MAX - 1);
  }
  return "";
}

} // namespace shm
