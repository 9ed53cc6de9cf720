// What the executable's main() does: argument handling, running the program, the stats table.
// Kept apart from main.cpp so the unit tests can call it (main.cpp holds only `main`, so a test
// executable with its own main never pulls that object out of the static library).
#include "shmap_runtime.h"
#include "stats.h"
#include "util.h"

#include <cblas.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shm {

static void usage(const char *prog) {
  std::fprintf(stderr,
               "usage: %s [--stats]\n"
               "  --stats   print the collective statistics table after the program's output\n"
               "            (same as the environment variable SHMAP_STATS=1)\n",
               prog);
}

int runtime_main(int argc, char **argv) {
  bool stats = false;
  const char *env = std::getenv("SHMAP_STATS");
  if (env && std::strcmp(env, "1") == 0) stats = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--stats") == 0) {
      stats = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(argc > 0 ? argv[0] : "program");
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument '%s'\n", argv[i]);
      usage(argc > 0 ? argv[0] : "program");
      return 1;
    }
  }
  // The device threads already use every core; OpenBLAS's own threads would oversubscribe
  // them (and make results depend on its thread count), so BLAS runs single-threaded.
  openblas_set_num_threads(1);
  stats_reset();
  shm_user_main(nullptr, nullptr, nullptr);
  std::fflush(stdout);
  if (stats) {
    stats_print(stdout);
    std::fflush(stdout);
  }
  return 0;
}

} // namespace shm
