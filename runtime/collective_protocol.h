// Private to the collectives (collective_protocol.cpp, fold.cpp, all_reduce.cpp,
// collectives.cpp, rooted.cpp): the protocol every collective follows and the helpers they
// share. Every collective, on every device of its group:
//   1. publishes this device's `in` / `out` pointers in its slot (publish);  barrier
//   2. does this device's share of the copying / reducing, reading other devices' published
//      buffers (and, for the all-reduces, writing into them);  finish: barrier
// The first barrier makes every slot and input visible before anyone reads it; the second
// keeps a device from returning (and then overwriting its input, output or slot) while others
// still read or write them. The barriers are the group's (sync.h): a device's slot is read
// only by the members of the group of the collective it is in, so groups need not wait for
// each other, and groups of a loop that runs longer on some of them progress independently.
//
// Statistics (docs/runtime.md): bytes a device writes into other devices' buffers count as
// sent, bytes it reads from other devices' buffers as received.
#ifndef SHMAP_RUNTIME_COLLECTIVE_PROTOCOL_H
#define SHMAP_RUNTIME_COLLECTIVE_PROTOCOL_H
#include "device.h"
#include "ranks.h"
#include "util.h"

#include <functional>
#include <vector>

namespace shm {

// Under MPI with one device per rank the collectives run "direct": each is MPI calls among the
// ranks of its group (ranks.h), moving each byte once to the member that needs it, with the
// same arithmetic in the same order as in one process (so the same bits).
inline bool direct(const shm_device *dev) { return dev->call->nlocal == 1 && dev->call->ndev > 1; }

// Under MPI with several devices per rank, the "ranked" mode: a rank's devices share memory,
// and for a collective whose group has members on several ranks, the group's first member on
// each of its ranks (Group::lead, set by begin_collective) moves between the ranks only the
// pieces of data that a member on another rank reads, each once per rank, on a communicator of
// the group's ranks, while the group's other members on the rank wait at the group's barrier.
// Each group does this for itself, so the rank's groups progress independently, as in one
// process (sync.h). A group within one rank runs as in one process.
inline bool ranked(const shm_device *dev) { return dev->call->nlocal < dev->call->ndev && !direct(dev); }

inline int rank_of(const MeshCall &c, int id) { return id / c.nlocal; }
inline bool is_local(const MeshCall &c, int id) { return id >= c.first && id < c.first + c.nlocal; }

// A collective's communicator under MPI (ranks.h): the mesh's sizes, then its axes.
std::vector<int64_t> comm_key(const shm_device *dev, const int32_t *axes, int32_t naxes);

// Ranked mode: the ranks of group `g` (of a collective over `axes`), for its exchanges.
RankSet rank_set(const shm_device *dev, const Group &g, const int32_t *axes, int32_t naxes);

// Ranked mode, by the group's lead: for each member j, the ranks other than its own that hold
// members of the group (ascending). Makes room in the lead's slot (Slot::mirror) for `bytes`
// of each remote member's data, this rank's copy of it (copy_of).
std::vector<std::vector<int>> group_partners(MeshCall &c, const Group &g, int64_t bytes);

// Ranked mode: this rank's copy of remote member j's data (group_partners made room for it).
inline char *copy_of(MeshCall &c, const Group &g, int j) {
  Slot &lead = c.slots[(size_t)g.lead];
  return lead.mirror.data() + lead.region[(size_t)j];
}

// exchange_pieces among the group's ranks, and under SHMAP_LOG_RANKS=1 what this rank sent
// and received for group `g` ("psum, devices 0,2: input chunks: 16 bytes sent, 16 received").
void move_pieces(int kind, const char *what, const std::vector<Piece> &pieces, const RankSet &among, const Group &g);

// What group member k reads of member j's input in a collective: nothing, all of it, or a box
// (offsets, shape and strides in elements of `esize` bytes).
struct Read {
  enum Kind { Nothing, Whole, Box } kind = Whole;
  int64_t offset = 0;
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {0}, strides[kMaxRank] = {0};
  int64_t esize = 1;
  int64_t bytes() const { return num_elements(rank, shape) * esize; }
};
using ReadOf = std::function<Read(int j, int k)>;

// Step 1. `bytes`: the size of every device's input; `kind`, `axes`: what the collective is,
// `g` its group. Under MPI the ranks may first compare their collectives (--check-collectives).
// In ranked mode what other ranks read of the inputs (`read`; null: all of every input) is then
// copied to them, unless the caller moves its own data (`exchange` false); nothing writes into
// a remote device's buffers.
void publish(shm_device *dev, const Group &g, const void *in, void *out, int64_t bytes, int kind, const int32_t *axes,
             int32_t naxes, bool exchange = true, const ReadOf *read = nullptr);

// The start of every collective: its group over `axes` (group_of, which also starts its trace
// span), and its operand (per-device block) checked and noted for --trace ("f32[2,5]").
Group begin_collective(shm_device *dev, const char *what, int32_t dtype, int32_t rank, const int64_t *shape,
                       const int32_t *axes, int32_t naxes);

// Step 2's end: counts the bytes in --stats, waits for the group, and traces the collective.
void finish(shm_device *dev, int kind, int64_t sent, int64_t received);

// The published input / output of group member j (in ranked mode, of a remote member: this
// rank's copy of what its members read of it; nothing writes a remote member's output).
inline const void *in_of(shm_device *dev, const Group &g, int j) {
  const int m = g.member[(size_t)j];
  if (g.lead >= 0 && !is_local(*dev->call, m)) return copy_of(*dev->call, g, j);
  return dev->call->slots[(size_t)m].in;
}
inline void *out_of(shm_device *dev, const Group &g, int j) {
  return dev->call->slots[(size_t)g.member[(size_t)j]].out;
}

// A buffer for a collective's data between ranks, from the runtime's block cache (reused
// every step, and not zeroed as a std::vector would be).
struct Scratch {
  char *p;
  explicit Scratch(int64_t bytes) : p((char *)shm_alloc(bytes)) {}
  ~Scratch() { shm_free(p); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  char *data() const { return p; }
};

// fold.cpp: elements [offset, offset + len) of every source folded with `op` (SHM_REDUCE_*)
// into dst[0, len), left to right in source order (so every layout gives the same bits).
void fold(int32_t dtype, int32_t op, int nsrc, const void *const *srcs, int64_t offset, void *dst, int64_t len);

// Product of shape[from..to).
int64_t prod(const int64_t *shape, int32_t from, int32_t to);

} // namespace shm

#endif
