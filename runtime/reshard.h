// A pipeline message between two device groups, each holding the value in its own layout
// (private header): the sending group's ranks hold it whole or as their devices' blocks (the
// blocks form, array_plan.h), the receiving group's ranks want it whole or as theirs. Each
// receiving rank gets exactly the elements its slots need, each element from one sending rank
// that holds it (of the ranks holding a block, the one at the receiver's place modulo their
// count, which spreads the sending over them), in one message per pair of ranks that have
// anything to trade: no gather inside the sending group, no element sent twice to a rank, and
// a reshard where the two layouts differ. Both ends compute the same pieces in the same order.
#ifndef SHMAP_RUNTIME_RESHARD_H
#define SHMAP_RUNTIME_RESHARD_H
#include "util.h"

#include <cstdint>
#include <vector>

namespace shm {

// One end of a message: a mesh and spec (mesh_rank 0: the value whole on every rank) over
// `ranks` ranks, rank j running the mesh's devices [j*n/ranks, (j+1)*n/ranks).
struct MessageEnd {
  int32_t mesh_rank = 0;
  const int64_t *mesh_sizes = nullptr;
  const int32_t *spec = nullptr;
  int ranks = 1;
};

// One piece of a message: a box of `shape` elements at element offset `from` of the sender's
// buffer and `to` of the receiver's (each buffer's strides in the plan).
struct MessagePiece {
  int64_t from = 0, to = 0;
  int64_t shape[kMaxRank] = {0};
};

struct MessagePlan {
  int32_t rank = 0;
  int64_t esize = 0;
  int64_t from_strides[kMaxRank] = {0}, to_strides[kMaxRank] = {0};
  std::vector<MessagePiece> pieces;
  int64_t bytes = 0;  // the message's
};

// What sending rank s (of from.ranks) sends receiving rank r (of to.ranks); pieces empty,
// bytes 0: nothing.
MessagePlan message_plan(int32_t dtype, int32_t rank, const int64_t *shape, const MessageEnd &from, int s,
                         const MessageEnd &to, int r);
// The message from the sender's buffer, and into the receiver's.
void pack_message(const MessagePlan &p, const void *src, void *message);
void unpack_message(const MessagePlan &p, const void *message, void *dst);

} // namespace shm
#endif
