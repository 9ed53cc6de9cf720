// The processes of a program (private header). A program compiled as usual is one process
// that runs every device of a mesh as a thread (ranks_local.cpp). Compiled with `shmapc
// compile --mpi`, it runs under mpirun as several MPI ranks, each running its share of every
// mesh's devices as threads (ranks_mpi.cpp; docs/runtime.md, "Several processes"): devices
// go to ranks in row-major mesh order, `--devices-per-rank` (default 1) to each. Host code
// runs on every rank (the multi-controller model); output is written by rank 0.
#ifndef SHMAP_RUNTIME_RANKS_H
#define SHMAP_RUNTIME_RANKS_H
#include "util.h"

#include <cstdint>
#include <vector>

namespace shm {

struct MeshCall;
struct Stats;
struct Group;

// Starts the transport (MPI_Init) before the program's arguments are read.
void ranks_init(int *argc, char ***argv);
// Under MPI, before anything else: every rank runs the same executable (its size and a hash of
// its bytes) with the same arguments, or the job stops with status 2, rank 0 naming the ranks
// that differ from it and how (once; the others say nothing). Ranks that ran different
// programs or arguments would run different collectives and wait for each other forever.
void check_same_program(int argc, char **argv);
// A runtime argument of the transport (--devices-per-rank=N): 1 taken, 0 not one, -1 a bad
// value (the message printed).
int ranks_take_arg(const char *prog, const char *arg);
// The usage lines of the transport's arguments ("" for one process).
const char *ranks_usage();
// Checks, before the program runs, that every mesh its shmaps use fits the job's layout
// (ranks x devices per rank): why the first that does not cannot run, or "" (always "" on one
// process). Every rank finds the same answer, so the caller reports it once, from rank 0.
std::string layout_problem();
// Ends the transport after the program's output (MPI_Finalize).
void ranks_finish();
// Ends the whole job after a fatal error on this rank (MPI_Abort), so no rank waits for it.
[[noreturn]] void ranks_abort(int code);
// Tests only (one process): called by ranks_abort before it exits, and may throw instead, so a
// fuzz target can go on after a file the loaders refuse (tests/fuzz/fuzz_load.cpp).
extern void (*ranks_abort_hook)(int code);

// How many processes of the job (this one included) run on this machine with the same CPU
// affinity mask: unbound ranks share the machine's cores (pool.cpp divides them). 1 for one
// process.
int ranks_sharing_cores();
int rank_id();     // this process's rank
int rank_count();  // the number of processes
// "rank R: " for messages of a job of several ranks.
const char *rank_prefix();
// SHMAP_LOG_RANKS=1 in a job under MPI (of one rank too, the measure of one process): each
// rank says on stderr what it reads of files, moves between ranks and keeps (docs/runtime.md, "Several processes").
bool log_ranks();
// --reduce-locally-first (or SHMAP_REDUCE_LOCALLY_FIRST=1): with several devices per rank, an
// all-reduce adds up a rank's members first (all_reduce.cpp, all_reduce_ranked).
bool reduce_locally_first();
// Whether this rank writes the program's output (print, savez, --stats): rank 0.
inline bool writes_output() { return rank_id() == 0; }

// The devices of a mesh of `ndev` that this rank runs: [first, first + count). A mesh whose
// device count is not ranks x devices per rank is a fatal error, named the same on every rank.
void local_devices(int64_t ndev, int *first, int *count);
// A job of one rank running a pipeline group's stage program on this thread (`devices`: the
// group's; 0 when it ends): the group's shmaps run all their devices here.
void set_group_devices(int64_t devices);

// What a collective is, for --check-collectives: its kind (stats.h), input bytes per device
// and the mesh axes it runs over (a bit per axis).
struct CollectiveSig {
  int64_t kind = 0, bytes = 0, axes = 0;
};

// A piece of a collective's data moving between ranks: `bytes` from rank `from` (read at
// `send` there) to rank `to` (written at `recv` there). A box of an array (rank > 0) rather
// than a run of bytes: `shape` elements of `esize` bytes, at `strides` (in elements) on both
// ends, which exchange_pieces packs and unpacks itself.
struct Piece {
  int from = 0, to = 0;
  const void *send = nullptr;
  void *recv = nullptr;
  int64_t bytes = 0;
  int32_t rank = 0;
  int64_t esize = 1, shape[kMaxRank] = {0}, strides[kMaxRank] = {0};

  static Piece box(int from, int to, const void *send, void *recv, int64_t esize, int32_t rank, const int64_t *shape,
                   const int64_t *strides) {
    Piece p{from, to, send, recv, esize * num_elements(rank, shape), rank, esize};
    for (int32_t d = 0; d < rank; ++d) p.shape[d] = shape[d], p.strides[d] = strides[d];
    return p;
  }
};
// Some of the ranks (`ranks` ascending): a group of devices that spans ranks, in the ranked
// mode. Its messages carry a tag of its own (`tag`, unique among the mesh's groups, the same
// on each of its ranks), so that the rank's groups may exchange at the same time.
struct RankSet {
  std::vector<int> ranks;
  int tag = 0;
};
// Moves the pieces with this rank at one end, packed into one message per pair of ranks (split
// into several when larger than one MPI call takes), among every rank or (`among`) some. Every
// rank involved passes the same list (its pointers set where it is an end), so each knows what
// to send and expect; an empty list calls nothing. With several devices per rank, a group's
// first device on each of its ranks calls it for the group (collective_protocol.h), on the
// group's ranks: the rank's groups move their data independently, each at its own pace.
void exchange_pieces(const std::vector<Piece> &pieces, const RankSet *among = nullptr);

// With one device per rank, a collective runs among the ranks of its group (its devices' ranks)
// on a communicator per mesh and set of axes (`key`: the mesh's sizes and the axes, the same on
// every rank), made at its first use: the data moves once, between the members that need it
// (collective_protocol.h, "direct").
// Member j receives bytes[j] from send + (the sum of bytes before j); this rank receives
// from each member j recv_bytes[j] bytes, stored in member order.
void group_alltoallv(const Group &g, const std::vector<int64_t> &key, const void *send, const std::vector<int64_t> &bytes, void *recv,
                     const std::vector<int64_t> &recv_bytes);
// The same, each member's data at its own pointer: send_bytes[j] bytes at send[j] to member
// j, recv_bytes[j] bytes from member j into recv[j], as point-to-point messages (this member's
// own: copied where its counts are not 0; a caller that reads its own part where it lies
// passes 0 and saves the copy, which Open MPI's MPI_Alltoall makes after the exchange).
void group_exchange(const Group &g, const std::vector<int64_t> &key, const std::vector<const char *> &send,
                    const std::vector<int64_t> &send_bytes, const std::vector<char *> &recv,
                    const std::vector<int64_t> &recv_bytes);
// The same with `block` bytes to and from every member (send + j * block to member j, member
// j's into recv + j * block), `block` the same on every member: one MPI_Alltoall, as a
// hand-written program would call it, where its total fits MPI's int counts.
void group_alltoall(const Group &g, const std::vector<int64_t> &key, const void *send, int64_t block, void *recv);
// Member j's bytes[j] bytes at buf + (the sum of bytes before j), this rank's already there,
// or, where `mine` is given, at `mine` (copied into place, or sent from there).
// (`bytes` is the same on every member; all equal, it is one MPI_Allgather.)
void group_allgatherv(const Group &g, const std::vector<int64_t> &key, void *buf, const std::vector<int64_t> &bytes,
                      const void *mine = nullptr);
// An all-reduce of a group of two members as MPI_Allreduce (Open MPI's tuned algorithms: one
// exchange fewer to wait on than a reduce-scatter and an all-gather of our own), where its
// result is bitwise the one the member-order fold gives: two operands of an operation that
// commutes exactly (a sum or product of floats or integers, an integer max or min). Returns
// false, calling nothing, where that does not hold (both members decide alike: same n, dtype, op).
// A null `out` (a collective-only output this member does not keep) gets a scratch result.
bool group_allreduce_pair(const Group &g, const std::vector<int64_t> &key, int32_t dtype, int32_t op, const void *in,
                          void *out, int64_t n);
// Rooted (one member, `root`, sends or receives; member indices are the communicator's ranks):
// the root's bytes at buf to every member's buf; every member's send to the root's recv, in
// member order; member j's part of the root's send (at j bytes) to its recv.
void group_bcast(const Group &g, const std::vector<int64_t> &key, void *buf, int64_t bytes, int root);
void group_gather(const Group &g, const std::vector<int64_t> &key, const void *send, void *recv, int64_t bytes, int root);
void group_scatter(const Group &g, const std::vector<int64_t> &key, const void *send, void *recv, int64_t bytes, int root);
// Sends `bytes` to member `to` and receives as many from member `from` (-1: none).
void group_sendrecv(const Group &g, const std::vector<int64_t> &key, const void *send, int to, void *recv, int from, int64_t bytes);
// With --check-collectives the ranks first compare their collectives (a device-varying branch
// that skipped one would make them disagree): a mismatch is a fatal error naming the ranks.
// The ranks of the collective's group compare (groups progress independently): with one device
// per rank `g` (its members are ranks), on its communicator for `key`.
void check_collective(const CollectiveSig &sig, const Group &g, const std::vector<int64_t> &key);
// With several devices per rank, the group's ranks, by the group's first device on each.
void check_collective(const CollectiveSig &sig, const RankSet &among);
// Whether --check-collectives (SHMAP_CHECK_COLLECTIVES=1) is on.
bool checking_collectives();

// Sums every rank's statistics into rank 0's (for --stats).
void sum_stats_over_ranks(Stats &s);

// Waits for every rank (after rank 0 wrote a file the others may read).
void ranks_barrier();

// While this rank runs a pipeline device group's stage program: the mesh devices (its stage
// submesh's) are laid over the group's ranks (world ranks `ranks`, ascending) alone, and
// rank_id() / rank_count() are the rank's place in them and their number; leave_rank_group()
// returns to every rank. Each of the group's ranks calls it at the same point.
void enter_rank_group(const std::vector<int> &ranks);
void leave_rank_group();

// A pipeline's messages between ranks (pipeline.cpp), on a communicator of their own, the
// channel's number as the tag (wrapping at MPI's bound): a send is nonblocking (the data kept
// until pipe_sends_done, which waits for every one); a receive waits for its message (polling,
// so that a stopping run or a message later than `timeout` seconds ends it). pipe_bcast: `bytes`
// at `buf` from rank `root` to every rank. Never called on one process.
// Before a pipeline's run, on every rank at once: the communicators its `channels` messages go on.
void pipe_prepare(int channels);
void pipe_send_to(int rank, int tag, const void *data, int64_t bytes);
void pipe_recv_from(int rank, int tag, void *dst, int64_t bytes, double timeout);
void pipe_sends_done();
void pipe_bcast(int root, void *buf, int64_t bytes);
// Sums `n` counters over every rank (in place); nothing on one process.
void pipe_sum_over_ranks(int64_t *v, int n);

} // namespace shm
#endif
