// Runtime benchmarks: collectives over a mesh of 8 devices and a 1024^3 f32 matmul, each
// reported as a ratio to a baseline timed in the same run.
//
// Collectives are timed inside the shmap body, so thread start-up and the split / assemble of
// shm_run_shmap are excluded: every device allocates and touches its own buffers, runs the
// collective once to warm up, then the devices line up on a 1-element psum (a barrier);
// device 0 reads the clock, all run the collective K times, line up again, and device 0 reads
// the clock. time per call = elapsed / K (the second line-up costs one barrier, which is
// negligible next to the collective at these sizes).
//
// Baselines: a single-threaded memcpy of one device's buffer (N f32) for the collectives, and
// single-threaded OpenBLAS sgemm called directly for shm_matmul.
//
// Sizes: N is the number of f32 elements per device of the larger side of the collective:
// psum in = out = N; all_gather out = N (in = N / 8); psum_scatter in = N (out = N / 8);
// all_to_all in = out = N.
#include "shmap_runtime.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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
  shm_psum(dev, SHM_F32, &a, &b, 1, &axis, 1);
}

void run_collective(shm_device *dev, Kind kind, const float *in, float *out, int64_t n) {
  const int32_t axis = 0;
  switch (kind) {
  case kPsum: shm_psum(dev, SHM_F32, in, out, n, &axis, 1); return;
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
  case kBarrierOnly: shm_psum(dev, SHM_F32, in, out, 1, &axis, 1); return;
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

} // namespace

int main() {
  openblas_set_num_threads(1); // as in the runtime's main: single-threaded BLAS
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
    std::printf("%-28s %10.1f us per call\n", "shmap call, empty body", t * 1e6);
    const double tb = time_collective(kBarrierOnly, 8, 2000);
    std::printf("%-28s %10.1f us per call\n", "psum of 1 f32 (latency)", tb * 1e6);
  }

  for (int64_t n : {(int64_t)1000000, (int64_t)10000000}) {
    const double base = time_memcpy(n * 4);
    std::printf("baseline memcpy %lld f32 (%.0f MB): %.3f ms\n", (long long)n, n * 4 / 1e6, base * 1e3);
    for (Kind k : {kPsum, kAllGather, kPsumScatter, kAllToAll}) {
      const double t = time_collective(k, n, n >= 10000000 ? 5 : 20);
      char label[64];
      std::snprintf(label, sizeof label, "%s %lld f32", kind_name(k), (long long)n);
      std::printf("%-28s %10.3f ms   %6.2f x memcpy\n", label, t * 1e3, t / base);
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
    const double t = best_of(3, [&] { shm_matmul(SHM_F32, a.data(), b.data(), c.data(), 1, m, m, m); });
    std::printf("baseline sgemm 1024^3 f32: %.3f ms (%.1f GFLOP/s)\n", base * 1e3, 2.0 * m * m * m / base / 1e9);
    std::printf("%-28s %10.3f ms   %6.2f x sgemm\n", "shm_matmul 1024^3 f32", t * 1e3, t / base);
  }
  return 0;
}
