/* The hand-written peer of bench/memory/run.py: N f32 values made on the host, then on 8
 * threads (one per device) either their psum over the 8 blocks of N/8 (each thread sums its
 * share of the result, reading every block in place) or their all_gather (each thread copies
 * its block into the one gathered array), the result once. Prints the sum of the result so
 * that nothing is optimised away. Usage: collectives psum|all_gather N */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEVICES = 8 };
static float *x, *out;
static long n, block;
static int gather;

static void *device(void *arg) {
  long d = (long)arg;
  if (gather) {
    memcpy(out + d * block, x + d * block, block * sizeof(float));
  } else {
    long lo = block * d / DEVICES, hi = block * (d + 1) / DEVICES;
    for (long j = lo; j < hi; ++j) {
      float s = 0;
      for (int k = 0; k < DEVICES; ++k) s += x[k * block + j];
      out[j] = s;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) return 1;
  gather = strcmp(argv[1], "all_gather") == 0;
  n = atol(argv[2]);
  block = n / DEVICES;
  x = malloc(n * sizeof(float));
  out = malloc((gather ? n : block) * sizeof(float));
  unsigned s = 1;
  for (long i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)(s >> 8) / (float)(1u << 24) - 0.5f;
  }
  pthread_t t[DEVICES];
  for (long d = 0; d < DEVICES; ++d) pthread_create(&t[d], NULL, device, (void *)d);
  for (int d = 0; d < DEVICES; ++d) pthread_join(t[d], NULL);
  double total = 0;
  for (long i = 0; i < (gather ? n : block); ++i) total += out[i];
  printf("%g\n", total);
  return 0;
}
