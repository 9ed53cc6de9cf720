// The pieces of a pipeline message between two layouts (reshard.h).
#include "reshard.h"

#include "array_plan.h"

#include <algorithm>
#include <map>

namespace shm {
namespace {

// The slots rank j of an end holds, in the order of its buffer: where each block starts, the
// blocks' shape and each slot's elements.
struct EndSlots {
  int64_t bshape[kMaxRank] = {0};
  int64_t slot_elems = 1;
  std::vector<std::vector<int64_t>> start;
};

EndSlots slots_of(int32_t dtype, int32_t rank, const int64_t *shape, const MessageEnd &e, int j) {
  EndSlots out;
  if (e.mesh_rank == 0 || !e.spec) {  // whole: one slot, all of it
    for (int32_t d = 0; d < rank; ++d) out.bshape[d] = shape[d], out.slot_elems *= shape[d];
    out.start.push_back(std::vector<int64_t>((size_t)rank, 0));
    return out;
  }
  int64_t ndev = 1;
  for (int32_t a = 0; a < e.mesh_rank; ++a) ndev *= e.mesh_sizes[a];
  if (e.ranks < 1 || ndev % e.ranks != 0)
    fatalf("a pipeline message: %lld devices do not lie evenly on %d ranks", (long long)ndev, e.ranks);
  const int64_t per = ndev / e.ranks;
  MeshCall c((int)ndev, (int)(j * per), (int)per);
  c.mesh_rank = e.mesh_rank;
  for (int32_t a = 0; a < e.mesh_rank; ++a) c.sizes[a] = e.mesh_sizes[a];
  const ArrayPlan p = blocks_plan(c, dtype, rank, shape, e.spec, "a pipeline message of");
  for (int32_t d = 0; d < rank; ++d) out.bshape[d] = p.bshape[d];
  out.slot_elems = p.esize ? p.block_bytes / p.esize : 0;
  for_each_slot(p, c, [&](size_t, const int64_t *start) { out.start.emplace_back(start, start + rank); });
  return out;
}

void row_major(int32_t rank, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int32_t d = rank - 1; d >= 0; --d) strides[d] = s, s *= shape[d];
}

} // namespace

MessagePlan message_plan(int32_t dtype, int32_t rank, const int64_t *shape, const MessageEnd &from, int s,
                         const MessageEnd &to, int r) {
  MessagePlan p;
  p.rank = rank;
  p.esize = dtype_size(dtype);
  const EndSlots want = slots_of(dtype, rank, shape, to, r);
  std::vector<EndSlots> held;
  for (int j = 0; j < from.ranks; ++j) held.push_back(slots_of(dtype, rank, shape, from, j));
  row_major(rank, held[0].bshape, p.from_strides);
  row_major(rank, want.bshape, p.to_strides);
  // The sending group's distinct blocks, in the order first met, each with its holders (rank,
  // slot): a block whole-held by several ranks is sent by one of them.
  struct Block {
    const std::vector<int64_t> *start;
    std::vector<std::pair<int, size_t>> holders;
  };
  std::vector<Block> blocks;
  std::map<std::vector<int64_t>, size_t> index;
  for (int j = 0; j < from.ranks; ++j)
    for (size_t k = 0; k < held[(size_t)j].start.size(); ++k) {
      const std::vector<int64_t> &start = held[(size_t)j].start[k];
      auto [it, fresh] = index.try_emplace(start, blocks.size());
      if (fresh) blocks.push_back({&start, {}});
      blocks[it->second].holders.push_back({j, k});
    }
  const int64_t *fshape = held[0].bshape;
  for (size_t b = 0; b < want.start.size(); ++b) {
    const std::vector<int64_t> &to_start = want.start[b];
    for (const Block &blk : blocks) {
      const auto [holder, slot] = blk.holders[(size_t)r % blk.holders.size()];
      if (holder != s) continue;
      MessagePiece piece;
      int64_t elems = 1;
      for (int32_t d = 0; d < rank; ++d) {
        const int64_t lo = std::max((*blk.start)[d], to_start[d]);
        const int64_t hi = std::min((*blk.start)[d] + fshape[d], to_start[d] + want.bshape[d]);
        piece.shape[d] = std::max<int64_t>(0, hi - lo);
        elems *= piece.shape[d];
        piece.from += (lo - (*blk.start)[d]) * p.from_strides[d];
        piece.to += (lo - to_start[d]) * p.to_strides[d];
      }
      if (elems == 0) continue;
      piece.from += (int64_t)slot * held[(size_t)s].slot_elems;
      piece.to += (int64_t)b * want.slot_elems;
      p.pieces.push_back(piece);
      p.bytes += elems * p.esize;
    }
  }
  return p;
}

void pack_message(const MessagePlan &p, const void *src, void *message) {
  char *at = static_cast<char *>(message);
  for (const MessagePiece &piece : p.pieces) {
    int64_t strides[kMaxRank], elems = 1;
    row_major(p.rank, piece.shape, strides);
    for (int32_t d = 0; d < p.rank; ++d) elems *= piece.shape[d];
    copy_strided(p.esize, p.rank, piece.shape, static_cast<const char *>(src) + piece.from * p.esize, p.from_strides,
                 at, strides);
    at += elems * p.esize;
  }
}

void unpack_message(const MessagePlan &p, const void *message, void *dst) {
  const char *at = static_cast<const char *>(message);
  for (const MessagePiece &piece : p.pieces) {
    int64_t strides[kMaxRank], elems = 1;
    row_major(p.rank, piece.shape, strides);
    for (int32_t d = 0; d < p.rank; ++d) elems *= piece.shape[d];
    copy_strided(p.esize, p.rank, piece.shape, at, strides, static_cast<char *>(dst) + piece.to * p.esize,
                 p.to_strides);
    at += elems * p.esize;
  }
}

} // namespace shm
