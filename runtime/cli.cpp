// What the executable's main() does: argument handling, running the program, the stats table.
// Kept apart from main.cpp so the unit tests can call it (main.cpp holds only `main`, so a test
// executable with its own main never pulls that object out of the static library).
#include "array_plan.h"
#include "ranks.h"
#include "shmap_runtime.h"
#include "stats.h"
#include "sync.h"
#include "trace.h"
#include "util.h"

#include <cblas.h>
#include <cerrno>
#include <climits>
#include <malloc.h>
#include <cmath>
#include <string>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// jemalloc's options (programs link it, README "Measured choices"): freed pages are kept for
// reuse, never returned to the system after a delay, so a long training step does not fault
// them in again (as glibc's trimming is turned off in runtime_main). Unused without jemalloc.
extern "C" {
extern const char *malloc_conf;
const char *malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}

// The program's arguments (`arg lr: f32 = 0.1;`), emitted by shmapc as name/type/default
// string triples; absent (null) in programs without any and in the unit tests.
extern "C" __attribute__((weak)) const char *const shm_user_args_table[];
extern "C" __attribute__((weak)) const int32_t shm_user_args_count;

namespace shm {

namespace {

struct ArgValue {
  const char *name, *type, *text;  // text: the value given, or the default
  double number = 0;
  int64_t integer = 0;
};
std::vector<ArgValue> g_args;

int32_t declaredArgs() { return &shm_user_args_count ? shm_user_args_count : 0; }

// Parses `text` as the argument's type into `a`; false if it is not one.
bool parseArg(ArgValue &a, const char *text) {
  a.text = text;
  std::string type = a.type;
  char *end = nullptr;
  errno = 0;
  if (type == "str") return true;
  if (type == "bool") {
    std::string t = text;
    if (t == "true" || t == "1") return a.integer = 1, true;
    if (t == "false" || t == "0") return a.integer = 0, true;
    return false;
  }
  if (type == "i32" || type == "i64") {
    long long v = std::strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno == ERANGE) return false;
    if (type == "i32" && (v < INT32_MIN || v > INT32_MAX)) return false;
    a.integer = v;
    return true;
  }
  double v = std::strtod(text, &end);
  if (*text == '\0' || *end != '\0') return false;
  // Beyond double's range strtod says ERANGE and gives inf: not a value of any float type
  // (an underflow to 0 or a subnormal is a value, as numpy reads 1e-400; "inf" is one too).
  if (errno == ERANGE && std::isinf(v)) return false;
  // A finite value beyond the type's largest finite one is not of the type.
  const double largest = type == "f32"    ? 3.4028234663852886e38
                         : type == "bf16" ? 3.3895313892515355e38
                         : type == "f16"  ? 65504.0
                                          : INFINITY;
  if (std::isfinite(v) && std::fabs(v) > largest) return false;
  a.number = v;
  return true;
}

void usage(const char *prog) {
  std::printf("usage: %s [--stats] [--trace=FILE]", prog);
  for (const ArgValue &a : g_args) std::printf(" [--%s=%s]", a.name, a.type);
  std::printf("\n  --stats   print the collective statistics table after the program's output\n"
              "            (same as the environment variable SHMAP_STATS=1); --stats=wait (SHMAP_STATS=wait)\n"
              "            adds the time the devices waited at each kind of collective for the others;\n"
              "            --stats=pipeline (SHMAP_STATS=pipeline) times each pipeline's steps and prints\n"
              "            its measured bubble beside the predicted one\n"
              "  --trace=FILE  write a timeline of the run (Trace Event Format: Perfetto, chrome://tracing)\n"
              "            to FILE (same as SHMAP_TRACE=FILE); under MPI each rank writes FILE.rankN\n%s",
              ranks_usage());
  for (const ArgValue &a : g_args)
    std::printf("  --%s=%s   (default %s)\n", a.name, a.type, a.text);
}

// --NAME=VALUE for a declared argument: 1 if taken, 0 if not one, -1 on a bad value.
int takeArg(const char *prog, const char *arg) {
  if (std::strncmp(arg, "--", 2) != 0) return 0;
  const char *eq = std::strchr(arg, '=');
  for (ArgValue &a : g_args) {
    size_t n = std::strlen(a.name);
    if (std::strncmp(arg + 2, a.name, n) != 0) continue;
    if (arg[2 + n] == '\0') {
      std::fprintf(stderr, "%s: error: --%s needs a value: --%s=%s\n", prog, a.name, a.name, a.type);
      return -1;
    }
    if (eq != arg + 2 + n) continue;
    if (!parseArg(a, eq + 1)) {
      std::fprintf(stderr, "%s: error: --%s=%s is not a%s %s value\n", prog, a.name, eq + 1,
                   a.type[0] == 'f' || a.type[0] == 'i' ? "n" : "", a.type);
      return -1;
    }
    return 1;
  }
  return 0;
}

} // namespace

int runtime_main(int argc, char **argv) {
  ranks_init(&argc, &argv);
  check_same_program(argc, argv);
  const char *prog = argc > 0 && argv[0][0] ? argv[0] : "program";
  if (const char *slash = std::strrchr(prog, '/')) prog = slash[1] ? slash + 1 : prog;  // messages name the program, not its path
  g_args.clear();
  for (int32_t i = 0; i < declaredArgs(); ++i) {
    ArgValue a{shm_user_args_table[3 * i], shm_user_args_table[3 * i + 1], shm_user_args_table[3 * i + 2]};
    if (!parseArg(a, a.text)) fatalf("the default of --%s (%s) is not a %s", a.name, a.text, a.type);
    g_args.push_back(a);
  }
  // A bad SHMAP_* value stops the program before it runs (status 2, as a runtime error; once,
  // from rank 0, and every rank ends MPI in order so mpirun adds no abort report).
  if (std::string bad = environment_error(); !bad.empty()) {
    if (writes_output()) std::fprintf(stderr, "%s: error: %s\n", prog, bad.c_str());
    ranks_finish();
    return 2;
  }
  bool stats = false;
  const char *env = std::getenv("SHMAP_STATS");
  if (env && std::strcmp(env, "1") == 0) stats = true;
  if (env && std::strcmp(env, "wait") == 0) stats = g_stats_wait = true;
  if (env && std::strcmp(env, "pipeline") == 0) g_stats_pipeline = true;
  const char *trace = std::getenv("SHMAP_TRACE");
  if (trace && !*trace) trace = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--stats") == 0) {
      stats = true;
    } else if (std::strcmp(argv[i], "--stats=wait") == 0) {
      stats = g_stats_wait = true;
    } else if (std::strcmp(argv[i], "--stats=pipeline") == 0) {
      g_stats_pipeline = true;
    } else if (std::strncmp(argv[i], "--trace=", 8) == 0) {
      trace = argv[i] + 8;
      if (!*trace) {
        std::fprintf(stderr, "%s: error: --trace= needs a file name, e.g. --trace=run.json\n", prog);
        return 1;
      }
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(prog);
      ranks_finish();
      return 0;
    } else if (int taken = takeArg(prog, argv[i])) {
      if (taken < 0) return 1;
    } else if (int taken = ranks_take_arg(prog, argv[i])) {
      if (taken < 0) return 1;
    } else {
      std::fprintf(stderr, "%s: error: unknown argument '%s' (see %s --help)\n", prog, argv[i], prog);
      return 1;
    }
  }
  // The device threads already use every core; OpenBLAS's own threads would oversubscribe
  // them (and make results depend on its thread count), so BLAS runs single-threaded.
  openblas_set_num_threads(1);
  // glibc maps blocks above its (adaptive) mmap threshold afresh on every allocation and trims
  // its heaps on free, so a loop would fault its pages in again each step until the threshold
  // had adapted to every size the libraries use (oneDNN's packing buffers among them): fixed
  // at the largest value, and no trimming, the pages of one step serve the next.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // A layout that fits no mesh of the program: said once (every rank finds the same), and every
  // rank ends MPI in order, so the job stops with status 2 and no abort report from mpirun.
  if (std::string bad = layout_problem(); !bad.empty()) {
    if (writes_output()) std::fprintf(stderr, "shmap runtime error: %s\n", bad.c_str());
    ranks_finish();
    return 2;
  }
  stats_reset();
  if (trace) trace_begin(trace);
  shm_user_main(nullptr, nullptr, nullptr);
  blocks_report();
  trace_write();
  if (stats) {
    Stats all = stats_get();
    sum_stats_over_ranks(all);  // (every rank counted its own devices)
    if (writes_output()) stats_print(stdout, all);
  }
  if (g_stats_pipeline) {
    pipeline_stats_gather();
    if (writes_output()) pipeline_stats_print(stdout);
  }
  // A full disk or closed output must not pass for success (stdio keeps the error).
  const int err = std::fflush(stdout) != 0 ? errno : 0;
  if (err || std::ferror(stdout)) {
    std::fprintf(stderr, "shmap runtime error: cannot write the program's output: %s\n",
                 err ? std::strerror(err) : "write error");
    if (rank_count() > 1) ranks_abort(2);
    return 2;
  }
  ranks_finish();
  return 0;
}

} // namespace shm

using namespace shm;

static const ArgValue &argAt(int32_t i, const char *what) {
  if (i < 0 || (size_t)i >= g_args.size()) fatalf("%s: no program argument %d", what, (int)i);
  return g_args[(size_t)i];
}

extern "C" double shm_arg_f64(int32_t i) { return argAt(i, "shm_arg_f64").number; }
extern "C" int64_t shm_arg_i64(int32_t i) { return argAt(i, "shm_arg_i64").integer; }
extern "C" const char *shm_arg_str(int32_t i) { return argAt(i, "shm_arg_str").text; }
