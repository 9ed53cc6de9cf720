// The SHMAP_* environment variables, checked when the program starts: a mistyped value
// (SHMAP_THREADS=spwan, SHMAP_STATS=yes) is refused before the program runs rather than
// silently taken as the default. Where each is read says what it does (docs/runtime.md).
#include "ranks.h"
#include "util.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace shm {

namespace {

// SHMAP_MPI_MAX_MESSAGE: bytes per MPI message, 1 to INT_MAX - 1 (MPI counts in int).
bool takesMessageBytes(const char *v) {
  char *end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  return *end == '\0' && errno != ERANGE && n >= 1 && n <= INT_MAX - 1;
}

// SHMAP_COLLECTIVE_TIMEOUT: seconds, any finite number above 0; its value, or -1 if it is not one.
double timeoutSeconds(const char *v) {
  char *end = nullptr;
  const double s = std::strtod(v, &end);
  return *end == '\0' && std::isfinite(s) && s > 0 ? s : -1;
}
bool takesSeconds(const char *v) { return timeoutSeconds(v) > 0; }

struct Variable {
  const char *name;
  const char *values[5];        // the accepted spellings, or none when `takes` decides
  bool (*takes)(const char *);  // for a number
  const char *meaning;          // for the message
};

// Every SHMAP_* variable the runtime reads, except SHMAP_TRACE (a file name: its file is
// opened at start-up, trace.cpp) and SHMAP_PRETEND_CPU_LACKS (checked by the CPU check, which
// runs before main). An empty value is the same as none: the default.
const Variable kVariables[] = {
    {"SHMAP_STATS", {"0", "1", "wait", "pipeline", nullptr}, nullptr,
     "0 (no table), 1 (the statistics table), wait (with wait times) or pipeline (the pipelines' bubbles)"},
    {"SHMAP_THREADS", {"pool", "spawn", nullptr}, nullptr,
     "pool (the default: a pool of device threads) or spawn (threads per call)"},
    {"SHMAP_BLAS", {"onednn", "openblas", nullptr}, nullptr, "onednn (the default) or openblas"},
    {"SHMAP_LOG_RANKS", {"0", "1", nullptr}, nullptr, "0 or 1"},
    {"SHMAP_CHECK_COLLECTIVES", {"0", "1", nullptr}, nullptr, "0 or 1"},
    {"SHMAP_REDUCE_LOCALLY_FIRST", {"0", "1", nullptr}, nullptr, "0 or 1"},
    {"SHMAP_MPI_MAX_MESSAGE", {nullptr}, takesMessageBytes,
     "a number of bytes from 1 to 2147483646"},
    {"SHMAP_MPI_MAX_TAG", {nullptr}, takesMessageBytes, "a number from 1 to 2147483646 (the largest tag a "
     "pipeline's messages use)"},
    {"SHMAP_COLLECTIVE_TIMEOUT", {nullptr}, takesSeconds,
     "a number of seconds above 0 (how long a device may wait at a collective for the rest of its "
     "group; default 300)"},
};

std::string problem(const Variable &var) {
  const char *v = std::getenv(var.name);
  if (!v || !*v) return "";
  bool ok = var.takes && var.takes(v);
  for (const char *const *a = var.values; *a; ++a) ok |= std::strcmp(v, *a) == 0;
  if (ok) return "";
  return std::string(var.name) + "='" + v + "' is not a value it takes: " + var.name + " is " + var.meaning;
}

} // namespace

std::string environment_error() {
  static_assert(INT_MAX - 1 == 2147483646, "SHMAP_MPI_MAX_MESSAGE's meaning names the bound");
  for (const Variable &var : kVariables)
    if (std::string bad = problem(var); !bad.empty()) return bad;
  return "";
}

std::string environment_error(const char *name) {
  for (const Variable &var : kVariables)
    if (std::strcmp(var.name, name) == 0) return problem(var);
  return "";
}

double collective_timeout_setting() {
  const char *v = std::getenv("SHMAP_COLLECTIVE_TIMEOUT");
  return v && *v ? timeoutSeconds(v) : 300.0;
}

} // namespace shm
