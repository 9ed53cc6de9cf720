// One process running every device (the default; ranks.h). The MPI build links ranks_mpi.cpp
// in its place.
#include "ranks.h"

#include "util.h"

#include <cstdlib>
#include <cstring>

namespace shm {

void ranks_init(int *, char ***) {}
int ranks_take_arg(const char *, const char *) { return 0; }
const char *ranks_usage() { return ""; }
void check_layout() {}
void ranks_finish() {}
void ranks_abort(int code) { std::exit(code); }
int rank_id() { return 0; }
int rank_count() { return 1; }
const char *rank_prefix() { return ""; }

void local_devices(int64_t ndev, int *first, int *count) {
  *first = 0;
  *count = (int)ndev;
}

void exchange_inputs(MeshCall &, const CollectiveSig &) {}

void allgather_bytes(const void *mine, const std::vector<int64_t> &counts, void *all) {
  if (counts[0] > 0) std::memcpy(all, mine, (size_t)counts[0]);
}

void sum_stats_over_ranks(Stats &) {}
void ranks_barrier() {}

} // namespace shm
