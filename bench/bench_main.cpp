// Runtime benchmarks: the cost of starting the device threads, collectives over a mesh of 8
// devices and a 1024^3 f32 matmul, each reported as a time or as a ratio to a baseline timed
// in the same run.
//
// Thread start-up: an empty shmap call, and (bench_threads.cpp, in child processes) 8 jobs per
// call on the runtime's pool, on std::threads spawned per call (SHMAP_THREADS=spawn) and in an
// OpenMP parallel region under OMP_WAIT_POLICY unset / passive / active; each with an empty job
// and with one barrier inside the job.
// Then 2000 calls on 2 threads of the pool, fresh and after one call on 1024 threads (whose
// workers stay in the pool and must not be woken by the small calls), with their ratio.
//
// Collectives are timed inside the shmap body, so thread start-up and the split / assemble of
// shm_run_shmap are excluded: every device allocates and touches its own buffers, runs the
// collective once to warm up, then the devices line up on a 1-element psum (a barrier);
// device 0 reads the clock, all run the collective K times, line up again, and device 0 reads
// the clock. time per call = elapsed / K (the second line-up costs one barrier, which is
// negligible next to the collective at these sizes).
//
// Baselines: for the collectives, a single-threaded memcpy of the same bytes the collective
// handles across the whole mesh on its larger side: 8 x N f32 (the sum over the 8 devices of
// their larger buffers; N defined below), best of 5. For the matmuls, single-threaded OpenBLAS
// sgemm called directly; shm_matmul, Eigen (if built) and a plain i-k-j loop nest are all
// single-threaded too.
//
// Sizes: N is the number of f32 elements per device of the larger side of the collective:
// psum in = out = N; all_gather out = N (in = N / 8); psum_scatter in = N (out = N / 8);
// all_to_all in = out = N.
#include "bench_kernels.h"
#include "shmap_runtime.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <vector>

extern char **environ;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kDevices = 8;

enum Kind { kPsum, kAllGather, kPsumScatter, kAllToAll, kBarrierOnly };
const char *kind_name(Kind k) {
  switch (k) {
  case kPsum: return "psum";
  case kAllGather: return "all_gather";
  case kPsumScatter: return "psum_scatter";
  case kAllToAll: return "all_to_all";
  case kBarrierOnly: return "psum (1 element)";
  }
  return "?";
}

// Parameters of the current measurement (written before shm_run_shmap starts the devices,
// read-only while they run) and its result (written by device 0 only).
struct Bench {
  Kind kind;
  int64_t n;
  int reps;
  double seconds_per_call;
} g_bench;

void line_up(shm_device *dev) {
  const int32_t axis = 0;
  float a = 0, b;
  shm_psum(dev, SHM_F32, &a, &b, 0, nullptr, &axis, 1);
}

void run_collective(shm_device *dev, Kind kind, const float *in, float *out, int64_t n) {
  const int32_t axis = 0;
  switch (kind) {
  case kPsum: shm_psum(dev, SHM_F32, in, out, 1, &n, &axis, 1); return;
  case kAllGather: {
    const int64_t shape[1] = {n / kDevices};
    shm_all_gather(dev, SHM_F32, in, out, 1, shape, 0, 1, &axis, 1);
    return;
  }
  case kPsumScatter: {
    const int64_t shape[1] = {n};
    shm_psum_scatter(dev, SHM_F32, in, out, 1, shape, 0, 1, &axis, 1);
    return;
  }
  case kAllToAll: {
    const int64_t shape[1] = {n};
    shm_all_to_all(dev, SHM_F32, in, out, 1, shape, 0, 0, 1, &axis, 1);
    return;
  }
  case kBarrierOnly: shm_psum(dev, SHM_F32, in, out, 0, nullptr, &axis, 1); return;
  }
}

void collective_body(shm_device *dev, void **, void **) {
  const Bench b = g_bench;
  const int32_t axis = 0;
  const bool timer = shm_axis_index(dev, &axis, 1) == 0;
  float *in = (float *)shm_alloc(b.n * 4);
  float *out = (float *)shm_alloc(b.n * 4);
  for (int64_t i = 0; i < b.n; ++i) in[i] = (float)(i % 1000);
  std::memset(out, 0, (size_t)b.n * 4);
  run_collective(dev, b.kind, in, out, b.n);
  line_up(dev);
  const auto t0 = Clock::now();
  for (int r = 0; r < b.reps; ++r) run_collective(dev, b.kind, in, out, b.n);
  line_up(dev);
  const auto t1 = Clock::now();
  if (timer) g_bench.seconds_per_call = std::chrono::duration<double>(t1 - t0).count() / b.reps;
  shm_free(in);
  shm_free(out);
}

double time_collective(Kind kind, int64_t n, int reps) {
  g_bench = {kind, n, reps, 0};
  const int64_t mesh[1] = {kDevices};
  const char *names[1] = {"x"};
  shm_run_shmap(1, mesh, names, collective_body, 0, nullptr, nullptr, 0, nullptr, nullptr);
  return g_bench.seconds_per_call;
}

// Best of several runs of fn (seconds).
template <typename F> double best_of(int runs, F fn) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

double time_memcpy(int64_t bytes) {
  char *a = (char *)shm_alloc(bytes), *b = (char *)shm_alloc(bytes);
  std::memset(a, 1, (size_t)bytes);
  std::memset(b, 0, (size_t)bytes);
  const double t = best_of(5, [&] { std::memcpy(b, a, (size_t)bytes); });
  shm_free(a);
  shm_free(b);
  return t;
}

void empty_body(shm_device *, void **, void **) {}

// Runs this program again as `--threads LAUNCHER LABEL` with the environment variables in
// `set` set ("NAME=value") and those in `unset` removed, and waits for it.
void run_child(const char *launcher, const char *label, std::vector<std::string> set,
               std::vector<std::string> unset) {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    const std::string kv = *e, name = kv.substr(0, kv.find('='));
    bool drop = false;
    for (const std::string &s : set) drop |= s.substr(0, s.find('=')) == name;
    for (const std::string &u : unset) drop |= u == name;
    if (!drop) env.push_back(kv);
  }
  for (const std::string &s : set) env.push_back(s);
  std::vector<char *> envp;
  for (std::string &e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "shmap_bench", arg1[] = "--threads";
  std::string a2 = launcher, a3 = label;
  char *argv[] = {arg0, arg1, a2.data(), a3.data(), nullptr};
  std::fflush(stdout);
  pid_t pid;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) != 0) {
    std::printf("%s: could not start a child process\n", label);
    return;
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

// max |x - y| / max |y|
double rel_diff(const std::vector<float> &x, const std::vector<float> &y) {
  double d = 0, m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    d = std::max(d, (double)std::fabs(x[i] - y[i]));
    m = std::max(m, (double)std::fabs(y[i]));
  }
  return m > 0 ? d / m : d;
}

} // namespace

int main(int argc, char **argv) {
  openblas_set_num_threads(1); // as in the runtime's main: single-threaded BLAS
  if (argc == 4 && std::strcmp(argv[1], "--threads") == 0) {
    bench_thread_launch(argv[2], argv[3]);
    return 0;
  }
  const char *threads = std::getenv("SHMAP_THREADS");
  std::printf("shmap runtime benchmark: mesh of %d devices, thread mode %s\n", kDevices,
              threads && std::strcmp(threads, "spawn") == 0 ? "spawn" : "pool");

  {
    const int64_t mesh[1] = {kDevices};
    const int calls = 200;
    time_collective(kPsum, 8, 1); // starts the pool's threads
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i)
      shm_run_shmap(1, mesh, nullptr, empty_body, 0, nullptr, nullptr, 0, nullptr, nullptr);
    const double t = std::chrono::duration<double>(Clock::now() - t0).count() / calls;
    std::printf("%-32s %10.1f us per call\n", "shmap call, empty body", t * 1e6);
    const double tb = time_collective(kBarrierOnly, 8, 2000);
    std::printf("%-32s %10.1f us per call\n", "psum of 1 f32 (latency)", tb * 1e6);
  }

  std::printf("8 jobs per call (bench_threads.cpp; barrier = the devices' shm::Barrier):\n");
  run_child("pool", "pool", {}, {"SHMAP_THREADS"});
  run_child("pool", "spawn", {"SHMAP_THREADS=spawn"}, {});
  run_child("pool-after-big", "pool", {}, {"SHMAP_THREADS"});
#ifdef SHMAP_BENCH_HAVE_OPENMP
  run_child("omp", "OpenMP default", {}, {"OMP_WAIT_POLICY"});
  run_child("omp", "OpenMP passive", {"OMP_WAIT_POLICY=passive"}, {});
  run_child("omp", "OpenMP active", {"OMP_WAIT_POLICY=active"}, {});
#else
  std::printf("OpenMP: not found at configure time, not measured\n");
#endif

  for (int64_t n : {(int64_t)1000000, (int64_t)10000000}) {
    // The same bytes the collective handles over the mesh on its larger side: 8 x N f32.
    const double base = time_memcpy(kDevices * n * 4);
    std::printf("baseline memcpy 8 x %lld f32 (%.0f MB, 1 thread): %.3f ms\n", (long long)n,
                kDevices * n * 4 / 1e6, base * 1e3);
    for (Kind k : {kPsum, kAllGather, kPsumScatter, kAllToAll}) {
      const double t = time_collective(k, n, n >= 10000000 ? 5 : 20);
      char label[64];
      std::snprintf(label, sizeof label, "%s %lld f32", kind_name(k), (long long)n);
      std::printf("%-32s %10.3f ms   %6.2f x memcpy\n", label, t * 1e3, t / base);
    }
  }

  {
    const int64_t m = 1024;
    std::vector<float> a((size_t)(m * m)), b((size_t)(m * m)), c((size_t)(m * m));
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = (float)(i % 17) / 17.0f;
      b[i] = (float)(i % 13) / 13.0f;
    }
    const double base = best_of(3, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)m, (int)m, 1.0f,
                  a.data(), (int)m, b.data(), (int)m, 0.0f, c.data(), (int)m);
    });
    const std::vector<float> ref = c;
    std::printf("baseline sgemm 1024^3 f32 (OpenBLAS %s kernels, 1 thread): %.3f ms (%.1f GFLOP/s)\n",
                openblas_get_corename(), base * 1e3, 2.0 * m * m * m / base / 1e9);
    auto row = [&](const char *label, double t) {
      std::printf("%-32s %10.3f ms   %6.2f x sgemm time = %4.2f x its speed  (max rel diff %.0e)\n",
                  label, t * 1e3, t / base, base / t, rel_diff(c, ref));
      std::fill(c.begin(), c.end(), 0.0f);
    };
    row("shm_matmul 1024^3 f32",
        best_of(3, [&] { shm_matmul(SHM_F32, a.data(), b.data(), c.data(), 1, m, m, m, 0, 0); }));
#ifdef SHMAP_BENCH_HAVE_EIGEN
    {
      char label[64];
      std::snprintf(label, sizeof label, "Eigen %s 1024^3 f32", bench_eigen_version());
      row(label, best_of(3, [&] { bench_matmul_eigen(a.data(), b.data(), c.data(), m, m, m); }));
      std::snprintf(label, sizeof label, "Eigen, no -march=native");
      row(label, best_of(3, [&] { bench_matmul_eigen_portable(a.data(), b.data(), c.data(), m, m, m); }));
    }
#else
    std::printf("Eigen: not found at configure time, not measured\n");
#endif
    row("i-k-j loops 1024^3 f32",
        best_of(3, [&] { bench_matmul_loops(a.data(), b.data(), c.data(), m, m, m); }));
  }
  return 0;
}
