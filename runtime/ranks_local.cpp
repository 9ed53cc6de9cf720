// One process running every device (the default; ranks.h). The MPI build links ranks_mpi.cpp
// in its place.
#include "ranks.h"

#include "util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shm {

void ranks_init(int *, char ***) {}
void check_same_program(int, char **) {}
// The arguments of the MPI build are refused by name, with what to do.
int ranks_take_arg(const char *prog, const char *arg) {
  for (const char *flag : {"--devices-per-rank", "--check-collectives", "--reduce-locally-first"}) {
    const size_t n = std::strlen(flag);
    if (std::strncmp(arg, flag, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
      std::fprintf(stderr,
                   "%s: error: %s is an argument of programs compiled for several processes: compile with "
                   "`shmapc compile --mpi` and start with mpirun\n",
                   prog, flag);
      return -1;
    }
  }
  return 0;
}
const char *ranks_usage() { return ""; }
std::string layout_problem() { return ""; }
void ranks_finish() {}
void (*ranks_abort_hook)(int code) = nullptr;
void ranks_abort(int code) {
  if (ranks_abort_hook) ranks_abort_hook(code);
  std::exit(code);
}
bool reduce_locally_first() { return false; }
int ranks_sharing_cores() { return 1; }
int rank_id() { return 0; }
int rank_count() { return 1; }
const char *rank_prefix() { return ""; }

void local_devices(int64_t ndev, int *first, int *count) {
  *first = 0;
  *count = (int)ndev;
}

void set_group_devices(int64_t) {}

void exchange_pieces(const std::vector<Piece> &pieces, const RankSet *) {
  if (!pieces.empty()) fatalf("exchange_pieces: no other ranks");
}

// (one process never has one device per rank on a mesh of several)
void group_alltoallv(const Group &, const std::vector<int64_t> &, const void *, const std::vector<int64_t> &, void *,
                     const std::vector<int64_t> &) {
  fatalf("group_alltoallv: no other ranks");
}
void group_exchange(const Group &, const std::vector<int64_t> &, const std::vector<const char *> &,
                    const std::vector<int64_t> &, const std::vector<char *> &, const std::vector<int64_t> &) {
  fatalf("group_exchange: no other ranks");
}
void group_alltoall(const Group &, const std::vector<int64_t> &, const void *, int64_t, void *) {
  fatalf("group_alltoall: no other ranks");
}
void group_allgatherv(const Group &, const std::vector<int64_t> &, void *, const std::vector<int64_t> &, const void *) {
  fatalf("group_allgatherv: no other ranks");
}
bool group_allreduce_pair(const Group &, const std::vector<int64_t> &, int32_t, int32_t, const void *, void *, int64_t) {
  fatalf("group_allreduce_pair: no other ranks");
}
void group_sendrecv(const Group &, const std::vector<int64_t> &, const void *, int, void *, int, int64_t) {
  fatalf("group_sendrecv: no other ranks");
}
void group_bcast(const Group &, const std::vector<int64_t> &, void *, int64_t, int) {
  fatalf("group_bcast: no other ranks");
}
void group_gather(const Group &, const std::vector<int64_t> &, const void *, void *, int64_t, int) {
  fatalf("group_gather: no other ranks");
}
void group_scatter(const Group &, const std::vector<int64_t> &, const void *, void *, int64_t, int) {
  fatalf("group_scatter: no other ranks");
}
void check_collective(const CollectiveSig &, const Group &, const std::vector<int64_t> &) {}
void check_collective(const CollectiveSig &, const RankSet &) {}
bool checking_collectives() { return false; }

void sum_stats_over_ranks(Stats &) {}
void ranks_barrier() {}

} // namespace shm

namespace shm {
void pipe_prepare(int) {}
void enter_rank_group(const std::vector<int> &) {}
void leave_rank_group() {}
void pipe_send_to(int, int, const void *, int64_t) { fatalf("pipe_send_to: one process"); }
void pipe_recv_from(int, int, void *, int64_t, double) { fatalf("pipe_recv_from: one process"); }
void pipe_sends_done() {}
void pipe_bcast(int, void *, int64_t) {}
void pipe_sum_over_ranks(int64_t *, int) {}
} // namespace shm
