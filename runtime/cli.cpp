// What the executable's main() does: argument handling, running the program, the stats table.
// Kept apart from main.cpp so the unit tests can call it (main.cpp holds only `main`, so a test
// executable with its own main never pulls that object out of the static library).
#include "shmap_runtime.h"
#include "stats.h"
#include "util.h"

#include <cblas.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shm {

static void usage(const char *prog) {
  std::printf("usage: %s [--stats]\n"
              "  --stats   print the collective statistics table after the program's output\n"
              "            (same as the environment variable SHMAP_STATS=1)\n",
              prog);
}

int runtime_main(int argc, char **argv) {
  const char *prog = argc > 0 ? argv[0] : "program";
  bool stats = false;
  const char *env = std::getenv("SHMAP_STATS");
  if (env && std::strcmp(env, "1") == 0) stats = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--stats") == 0) {
      stats = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(prog);
      return 0;
    } else {
      std::fprintf(stderr, "%s: error: unknown argument '%s' (the program takes --stats and --help)\n",
                   prog, argv[i]);
      return 1;
    }
  }
  // The device threads already use every core; OpenBLAS's own threads would oversubscribe
  // them (and make results depend on its thread count), so BLAS runs single-threaded.
  openblas_set_num_threads(1);
  stats_reset();
  shm_user_main(nullptr, nullptr, nullptr);
  if (stats) stats_print(stdout);
  // A full disk or closed output must not pass for success (stdio keeps the error).
  const int err = std::fflush(stdout) != 0 ? errno : 0;
  if (err || std::ferror(stdout)) {
    std::fprintf(stderr, "shmap runtime error: cannot write the program's output: %s\n",
                 err ? std::strerror(err) : "write error");
    return 2;
  }
  return 0;
}

} // namespace shm
