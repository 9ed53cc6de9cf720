// A PMPI interposer for tests/mpi/calls.py (loaded with LD_PRELOAD into each rank): counts the
// calls of the MPI functions the MPI backend's collectives may use and, at MPI_Finalize, prints
// the counts on stderr, one line per rank:
//   mpi calls: rank R: Allgather A Allgatherv B Alltoall C Alltoallv D Allreduce E Isend F Sendrecv G
#include <mpi.h>

#include <cstdio>

namespace {
long allgather, allgatherv, alltoall, alltoallv, allreduce, isend, sendrecv;
}

extern "C" {

int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm c) {
  ++allgather;
  return PMPI_Allgather(s, sc, st, r, rc, rt, c);
}
int MPI_Allgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rc, const int *d, MPI_Datatype rt,
                   MPI_Comm c) {
  ++allgatherv;
  return PMPI_Allgatherv(s, sc, st, r, rc, d, rt, c);
}
int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm c) {
  ++alltoall;
  return PMPI_Alltoall(s, sc, st, r, rc, rt, c);
}
int MPI_Alltoallv(const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, const int *rc,
                  const int *rd, MPI_Datatype rt, MPI_Comm c) {
  ++alltoallv;
  return PMPI_Alltoallv(s, sc, sd, st, r, rc, rd, rt, c);
}
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  ++allreduce;
  return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Isend(const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request *q) {
  ++isend;
  return PMPI_Isend(b, n, t, to, tag, c, q);
}
int MPI_Sendrecv(const void *sb, int sn, MPI_Datatype st, int to, int stag, void *rb, int rn, MPI_Datatype rt,
                 int from, int rtag, MPI_Comm c, MPI_Status *status) {
  ++sendrecv;
  return PMPI_Sendrecv(sb, sn, st, to, stag, rb, rn, rt, from, rtag, c, status);
}
int MPI_Finalize() {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr,
               "mpi calls: rank %d: Allgather %ld Allgatherv %ld Alltoall %ld Alltoallv %ld Allreduce %ld Isend %ld "
               "Sendrecv %ld\n",
               rank, allgather, allgatherv, alltoall, alltoallv, allreduce, isend, sendrecv);
  return PMPI_Finalize();
}

} // extern "C"
