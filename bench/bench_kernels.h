// Matmul kernels and thread-launch measurements of the benchmark, each in its own file so it
// can get its own compile flags (bench/CMakeLists.txt). All matrices are row-major f32:
// c[m x n] = a[m x k] * b[k x n].
#ifndef SHMAP_BENCH_KERNELS_H
#define SHMAP_BENCH_KERNELS_H
#include <cstdint>

// bench_loops.cpp: the straightforward i-k-j loop nest (-O3, host CPU features).
void bench_matmul_loops(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n);

// bench_eigen.cpp, only built when Eigen 3.3+ is found (SHMAP_BENCH_HAVE_EIGEN): Eigen's
// product, single-threaded. bench_eigen_version returns e.g. "3.4.0".
void bench_matmul_eigen(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n);
const char *bench_eigen_version();
// bench_eigen_portable.cpp: the same, compiled without the host CPU's features (-O3 only).
void bench_matmul_eigen_portable(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n);

// bench_threads.cpp: runs 8 jobs per call with the given launcher ("pool" = the runtime's
// shm::run_on_threads, which is the pool unless SHMAP_THREADS=spawn; "omp" = an OpenMP
// parallel region, only with SHMAP_BENCH_HAVE_OPENMP) and prints the per-call times.
// "pool-after-big" instead times 2000 calls on 2 threads before and after one on 1024.
void bench_thread_launch(const char *launcher, const char *label);
#endif
