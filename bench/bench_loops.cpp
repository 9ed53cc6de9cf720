// The kind of loop nest shmapc's own lowering would produce for a matmul: i-k-j order (the
// innermost loop streams a row of b and of c, so it vectorises), no tiling, no packing.
// Compiled with -O3 and the host CPU's features (as shmapc targets the host CPU).
#include "bench_kernels.h"

void bench_matmul_loops(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    float *ci = c + i * n;
    for (int64_t j = 0; j < n; ++j) ci[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      const float aip = a[i * k + p];
      const float *bp = b + p * n;
      for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}
