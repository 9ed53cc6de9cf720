// Eigen's matrix product on the caller's row-major buffers (no copies), single-threaded.
// Compiled with -O3 and the host CPU's features (Eigen picks its kernels at compile time);
// bench_eigen_portable.cpp compiles the same code without them, as the runtime is built.
#include "bench_kernels.h"

#ifndef BENCH_EIGEN_MATMUL
#define BENCH_EIGEN_MATMUL bench_matmul_eigen
#endif

#include <Eigen/Core>

void BENCH_EIGEN_MATMUL(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n) {
  // The bench is compiled with -fopenmp, which would make Eigen's GEMM multi-threaded.
  Eigen::setNbThreads(1);
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Mat> A(a, m, k), B(b, k, n);
  Eigen::Map<Mat> C(c, m, n);
  C.noalias() = A * B;
}

#ifndef BENCH_EIGEN_NO_VERSION
const char *bench_eigen_version() {
#define SHM_STR2(x) #x
#define SHM_STR(x) SHM_STR2(x)
  return SHM_STR(EIGEN_WORLD_VERSION) "." SHM_STR(EIGEN_MAJOR_VERSION) "." SHM_STR(EIGEN_MINOR_VERSION);
}
#endif
