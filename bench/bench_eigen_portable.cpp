// bench_eigen.cpp compiled without the host CPU's features (x86-64 baseline: SSE2), as the
// runtime library is compiled. Eigen's namespace is renamed so that its template instances here
// do not get merged at link time with the AVX-512 ones of bench_eigen.cpp (same mangled names).
#define Eigen EigenPortable
#define BENCH_EIGEN_MATMUL bench_matmul_eigen_portable
#define BENCH_EIGEN_NO_VERSION
#include "bench_eigen.cpp"
