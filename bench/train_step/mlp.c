/* The data-parallel MLP training step of bench/train_step/run.py, written by hand in C on
 * OpenBLAS, or on oneDNN's sgemm when built with -DUSE_DNNL (one thread): batch 256, 512 -> 1024 -> ReLU -> 512, MSE, SGD. Five sgemm calls
 * per step (two forward, three backward) with BLAS's transpose flags, element-wise loops the
 * compiler vectorizes. Prints the mean step time and the time of its five sgemm calls alone
 * (the compute bound), in ms:  STEP_MS SGEMM_MS */
#include <cblas.h>
#ifdef USE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
/* oneDNN's sgemm is row-major too; same arguments in the same order. */
#define GEMM(ta, tb, m, n, k, a, lda, b, ldb, c, ldc) \
  dnnl_sgemm((ta) == CblasTrans ? 'T' : 'N', (tb) == CblasTrans ? 'T' : 'N', m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
#else
#define GEMM(ta, tb, m, n, k, a, lda, b, ldb, c, ldc) \
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BATCH
#define BATCH 256 /* -DBATCH=128: one device's share of a mesh of 2 */
#endif
enum { B = BATCH, D = 512, H = 1024 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static float *fill(size_t n, unsigned seed, float scale) {
  float *p = aligned_alloc(64, n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = ((float)(seed >> 8) / (float)(1u << 24) - 0.5f) * scale;
  }
  return p;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 20;
  openblas_set_num_threads(1);
#ifdef USE_DNNL
  omp_set_num_threads(1);
#endif
  float *x = fill((size_t)B * D, 1, 2.0f), *y = fill((size_t)B * D, 2, 2.0f);
  float *w1 = fill((size_t)D * H, 3, 0.1f), *b1 = fill(H, 4, 0.0f);
  float *w2 = fill((size_t)H * D, 5, 0.1f), *b2 = fill(D, 6, 0.0f);
  float *h = fill((size_t)B * H, 7, 0), *out = fill((size_t)B * D, 8, 0), *dh = fill((size_t)B * H, 9, 0);
  float *gw1 = fill((size_t)D * H, 10, 0), *gw2 = fill((size_t)H * D, 11, 0);
  float gb1[H], gb2[D];
  const float lr = 0.01f;
  double total = 0, gemm = 0, loss = 0;
  for (int s = 0; s < steps; ++s) {
    double t0 = now(), g;
    g = now();
    GEMM(CblasNoTrans, CblasNoTrans, B, H, D, x, D, w1, H, h, H);
    gemm += now() - g;
    for (int i = 0; i < B; ++i)
      for (int j = 0; j < H; ++j) {
        float v = h[i * H + j] + b1[j];
        h[i * H + j] = v > 0 ? v : 0;
      }
    g = now();
    GEMM(CblasNoTrans, CblasNoTrans, B, D, H, h, H, w2, D, out, D);
    gemm += now() - g;
    loss = 0;
    memset(gb2, 0, sizeof gb2);
    for (int i = 0; i < B; ++i)
      for (int j = 0; j < D; ++j) {
        float d = out[i * D + j] + b2[j] - y[i * D + j];
        loss += d * d;
        out[i * D + j] = 2.0f * d / (B * D);  /* dout */
        gb2[j] += out[i * D + j];
      }
    g = now();
    GEMM(CblasTrans, CblasNoTrans, H, D, B, h, H, out, D, gw2, D);
    GEMM(CblasNoTrans, CblasTrans, B, H, D, out, D, w2, D, dh, H);
    gemm += now() - g;
    memset(gb1, 0, sizeof gb1);
    for (int i = 0; i < B; ++i)
      for (int j = 0; j < H; ++j) {
        float v = h[i * H + j] > 0 ? dh[i * H + j] : 0;
        dh[i * H + j] = v;
        gb1[j] += v;
      }
    g = now();
    GEMM(CblasTrans, CblasNoTrans, D, H, B, x, D, dh, H, gw1, H);
    gemm += now() - g;
    for (size_t i = 0; i < (size_t)D * H; ++i) w1[i] -= lr * gw1[i], w2[i] -= lr * gw2[i];
    for (int j = 0; j < H; ++j) b1[j] -= lr * gb1[j];
    for (int j = 0; j < D; ++j) b2[j] -= lr * gb2[j];
    total += now() - t0;
  }
  printf("%.4f %.4f %.6f\n", total / steps * 1e3, gemm / steps * 1e3, loss / (B * D));
  return 0;
}
