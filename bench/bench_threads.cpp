// Per-call cost of running one job on each of 8 threads and waiting for all of them: with the
// runtime's launcher (shm::run_on_threads: the persistent pool, or std::threads spawned per
// call under SHMAP_THREADS=spawn) and with an OpenMP parallel region (libgomp). Each is timed
// with an empty job and with a job that waits once in the devices' barrier (shm::Barrier, as
// every collective does twice); OpenMP also with `#pragma omp barrier` instead. Also: small
// calls on a pool that one big call has grown (bench_small_calls_after_big).
//
// bench_main runs this in child processes (one per launcher / environment), because libgomp
// reads OMP_WAIT_POLICY when it is loaded, and its idle threads (spinning under the active
// policy) must not disturb the other measurements.
#include "bench_kernels.h"
#include "device.h"
#include "pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#ifdef SHMAP_BENCH_HAVE_OPENMP
#include <omp.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kThreads = 8;

// Seconds per call: a few warm-up calls, then the best of 3 batches of at least 0.2 s.
template <typename F> double per_call(F call) {
  for (int i = 0; i < 5; ++i) call();
  double best = 1e30;
  for (int batch = 0; batch < 3; ++batch) {
    const auto t0 = Clock::now();
    int calls = 0;
    double elapsed = 0;
    do {
      call();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < 0.2 && calls < 20000);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

void print_row(const char *label, const char *what, double seconds) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s, %s", label, what);
  std::printf("%-32s %10.1f us per call\n", buf, seconds * 1e6);
  std::fflush(stdout);
}

} // namespace

// 2000 empty calls on 2 threads in a fresh pool, then the same after one call on 1024
// threads: the pool keeps its 1023 workers, and small calls must not wake the idle ones
// (they once did, which made the second batch 100 times slower).
void bench_small_calls_after_big(const char *label) {
  const int calls = 2000;
  const std::function<void(int)> empty = [](int) {};
  auto batch = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) shm::run_on_threads(2, empty);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  shm::run_on_threads(2, empty);  // creates the first worker
  const double fresh = batch();
  shm::run_on_threads(1024, empty);
  const double after = batch();
  print_row(label, "2 threads, fresh", fresh / calls);
  print_row(label, "2 threads, after 1024", after / calls);
  std::printf("%-32s %10.2f x   (%d calls: %.3f s after, %.3f s fresh)\n", "  after / fresh",
              after / fresh, calls, after, fresh);
}

void bench_thread_launch(const char *launcher, const char *label) {
  if (std::strcmp(launcher, "pool-after-big") == 0) {
    bench_small_calls_after_big(label);
    return;
  }
  shm::Barrier barrier(kThreads);
  if (std::strcmp(launcher, "pool") == 0) {
    const std::function<void(int)> empty = [](int) {};
    const std::function<void(int)> wait = [&](int) { barrier.arrive_and_wait(); };
    print_row(label, "empty job", per_call([&] { shm::run_on_threads(kThreads, empty); }));
    print_row(label, "1 barrier", per_call([&] { shm::run_on_threads(kThreads, wait); }));
    return;
  }
#ifdef SHMAP_BENCH_HAVE_OPENMP
  if (std::strcmp(launcher, "omp") == 0) {
    omp_set_dynamic(0);
    volatile int sink = 0;
    print_row(label, "empty job", per_call([&] {
#pragma omp parallel num_threads(kThreads)
      { sink = omp_get_thread_num(); }
    }));
    print_row(label, "1 barrier", per_call([&] {
#pragma omp parallel num_threads(kThreads)
      { barrier.arrive_and_wait(); }
    }));
    print_row(label, "1 omp barrier", per_call([&] {
#pragma omp parallel num_threads(kThreads)
      {
#pragma omp barrier
      }
    }));
    return;
  }
#endif
  std::printf("%s: not built\n", label);
}
