/* The hand-written peer of bench/mpi/run.py: each collective written directly with MPI on N
 * f32 per rank, `steps` times, each step's result scaled by 0.5 and fed to the next (as the
 * shmapc programs do). Prints the sum of the final values (so nothing is optimised away) on rank 0.
 * Usage: mpirun -np R collectives_mpi psum|all_gather|psum_scatter|all_to_all|ppermute N steps */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc != 4) return 1;
  const char *kind = argv[1];
  long n = atol(argv[2]), steps = atol(argv[3]);
  float *x = malloc(n * sizeof(float)), *y = malloc(n * ranks * sizeof(float));
  for (long i = 0; i < n; ++i) x[i] = (float)((rank * n + i) % 97) * 0.01f;
  long len = n;  /* the length of the value carried to the next step */
  for (long s = 0; s < steps; ++s) {
    if (!strcmp(kind, "psum")) {
      MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (!strcmp(kind, "all_gather")) {
      MPI_Allgather(x, (int)(n / ranks), MPI_FLOAT, y, (int)(n / ranks), MPI_FLOAT, MPI_COMM_WORLD);
    } else if (!strcmp(kind, "psum_scatter")) {
      MPI_Reduce_scatter_block(x, y, (int)(n / ranks), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (!strcmp(kind, "all_to_all")) {
      MPI_Alltoall(x, (int)(n / ranks), MPI_FLOAT, y, (int)(n / ranks), MPI_FLOAT, MPI_COMM_WORLD);
    } else {
      MPI_Sendrecv(x, (int)n, MPI_FLOAT, (rank + 1) % ranks, 0, y, (int)n, MPI_FLOAT, (rank + ranks - 1) % ranks, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    /* the next step's input: all_gather and psum_scatter change the length; keep n by
       gathering a slice / scattering the whole, as the shmapc programs do */
    len = !strcmp(kind, "psum_scatter") ? n / ranks : n;
    for (long k = 0; k < n; k += len)
      for (long i = 0; i < len; ++i) x[k + i] = y[i] * 0.5f;
  }
  double total = 0;
  for (long i = 0; i < n; ++i) total += x[i];
  if (rank == 0) printf("%g\n", total);
  free(x);
  free(y);
  MPI_Finalize();
  return 0;
}
