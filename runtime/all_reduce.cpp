// The all-reduces (psum, pmax, pmin, pprod, pand / por / pxor): reduce-scatter by chunks, then
// each device pushes its reduced chunk to all (collective_protocol.h has the protocol).
#include "collective_protocol.h"

#include <cstring>

namespace shm {
namespace {

// Chunk r of n elements for a group of `members`: [n r / members, n (r + 1) / members).
int64_t chunk_lo(int64_t n, int r, int members) { return n * r / members; }

// A group's first member (in member order) on rank `r`; -1 if none.
int first_on_rank(const MeshCall &c, const Group &g, int r) {
  for (int m : g.member)
    if (rank_of(c, m) == r) return m;
  return -1;
}

// Ranked mode (several devices per rank): member r reduces chunk r as in one process, with
// chunk r of each remote member's input brought to its rank first (one piece per member); the
// reduced chunk then goes once to each other rank of the group, whose devices copy it. With
// --reduce-locally-first each rank sends chunk r of the sum of its members instead, and member
// r adds its rank's members, then the other ranks' sums: k times fewer bytes for k members on
// a rank, the same result for every run of a layout, but float sums in another order than one
// process's (so possibly other roundings).
void all_reduce_ranked(shm_device *dev, const Group &g, int32_t dtype, int32_t op, int kind, const void *in,
                       void *out, int64_t n, const int32_t *axes, int32_t naxes) {
  MeshCall &c = *dev->call;
  const int64_t es = dtype_size(dtype);
  const int64_t lo = chunk_lo(n, g.me, g.n), hi = chunk_lo(n, g.me + 1, g.n);
  const int64_t moved = (int64_t)(g.n - 1) * (hi - lo) * es;
  char *mine = out ? (char *)out + lo * es : (char *)shm_alloc((hi - lo) * es);
  c.slots[(size_t)dev->id].reduced = mine;
  publish(dev, g, in, out, n * es, kind, axes, naxes, false);
  // The group's lead on this rank moves the group's chunks between ranks (collective_protocol.h).
  const bool lead = dev->id == g.lead;
  const bool local_first = reduce_locally_first();
  std::vector<std::vector<int>> partners;  // (the reduced chunks, below, go to the same ranks)
  RankSet among;
  if (lead) {
    partners = group_partners(c, g, n * es);
    among = rank_set(dev, g, axes, naxes);
  }
  if (lead && local_first) {
    // Chunk r of the sum of each rank's members to member r's rank, at the place of the rank's
    // first member of the group.
    std::vector<Piece> pieces;
    std::vector<std::vector<char>> partials;
    partials.reserve((size_t)g.n);  // (pieces point into them: no reallocation)
    for (int j = 0; j < g.n; ++j) {
      const int id = g.member[(size_t)j];
      if (first_on_rank(c, g, rank_of(c, id)) != id) continue;
      for (int r = 0; r < g.n; ++r) {
        const int to = rank_of(c, g.member[(size_t)r]);
        const int64_t rlo = chunk_lo(n, r, g.n), len = chunk_lo(n, r + 1, g.n) - rlo;
        if (to == rank_of(c, id) || len == 0) continue;
        const char *send = nullptr;
        if (is_local(c, id)) {
          std::vector<const void *> mine_here;
          for (int m : g.member)
            if (is_local(c, m)) mine_here.push_back(c.slots[(size_t)m].in);
          partials.emplace_back((size_t)(len * es));
          fold(dtype, op, (int)mine_here.size(), mine_here.data(), rlo, partials.back().data(), len);
          send = partials.back().data();
        }
        pieces.push_back({rank_of(c, id), to, send, to == rank_id() ? copy_of(c, g, j) + rlo * es : nullptr, len * es});
      }
    }
    move_pieces(kind, "input chunks added up on their rank", pieces, among, g);
  }
  if (lead && !local_first) {  // chunk r of every member's input to member r's rank
    std::vector<Piece> pieces;
    for (int j = 0; j < g.n; ++j) {
      const int id = g.member[(size_t)j];
      for (int r = 0; r < g.n; ++r) {
        const int to = rank_of(c, g.member[(size_t)r]);
        const int64_t rlo = chunk_lo(n, r, g.n) * es, bytes = chunk_lo(n, r + 1, g.n) * es - rlo;
        if (to == rank_of(c, id) || bytes == 0) continue;
        pieces.push_back({rank_of(c, id), to, is_local(c, id) ? (const char *)c.slots[(size_t)id].in + rlo : nullptr,
                          to == rank_id() ? copy_of(c, g, j) + rlo : nullptr, bytes});
      }
    }
    move_pieces(kind, "input chunks", pieces, among, g);
  }
  dev->sync->arrive_and_wait(dev);
  std::vector<const void *> srcs;
  if (local_first) {  // this rank's members in member order, then each other rank's sum
    for (int m : g.member)
      if (is_local(c, m)) srcs.push_back(c.slots[(size_t)m].in);
    for (int j = 0; j < g.n; ++j) {
      const int m = g.member[(size_t)j];
      if (!is_local(c, m) && first_on_rank(c, g, rank_of(c, m)) == m) srcs.push_back(copy_of(c, g, j));
    }
  } else {
    for (int j = 0; j < g.n; ++j) srcs.push_back(in_of(dev, g, j));
  }
  if (hi > lo) fold(dtype, op, (int)srcs.size(), srcs.data(), lo, mine, hi - lo);
  for (int j = 0; j < g.n; ++j)  // to the other members on this rank, as in one process
    if (j != g.me && is_local(c, g.member[(size_t)j]) && out_of(dev, g, j) && hi > lo)
      std::memcpy((char *)out_of(dev, g, j) + lo * es, mine, (size_t)((hi - lo) * es));
  dev->sync->arrive_and_wait(dev);
  if (lead) {  // each reduced chunk once to every other rank of the group
    std::vector<Piece> pieces;
    for (int j = 0; j < g.n; ++j) {
      const int id = g.member[(size_t)j];
      const int64_t rlo = chunk_lo(n, j, g.n) * es, bytes = chunk_lo(n, j + 1, g.n) * es - rlo;
      for (int to : partners[(size_t)j])
        if (bytes > 0)
          pieces.push_back({rank_of(c, id), to, is_local(c, id) ? c.slots[(size_t)id].reduced : nullptr,
                            to == rank_id() ? copy_of(c, g, j) + rlo : nullptr, bytes});
    }
    move_pieces(kind, "reduced chunks", pieces, among, g);
  }
  dev->sync->arrive_and_wait(dev);
  for (int j = 0; j < g.n && out; ++j) {  // the chunks of members on other ranks
    const int m = g.member[(size_t)j];
    const int64_t jlo = chunk_lo(n, j, g.n), jhi = chunk_lo(n, j + 1, g.n);
    if (!is_local(c, m) && jhi > jlo)
      std::memcpy((char *)out + jlo * es, copy_of(c, g, j) + jlo * es, (size_t)((jhi - jlo) * es));
  }
  finish(dev, kind, moved, moved);
  if (!out) shm_free(mine);
}

void all_reduce(shm_device *dev, int32_t dtype, int32_t op, int kind, const char *what, const void *in,
                void *out, int32_t rank, const int64_t *shape, const int32_t *axes, int32_t naxes) {
  Group g = begin_collective(dev, what, dtype, rank, shape, axes, naxes);
  const int64_t es = dtype_size(dtype), n = num_elements(rank, shape);
  if (g.lead < 0) publish(dev, g, in, out, n * es, kind, axes, naxes);
  // Chunk r of the flattened array is reduced by group member r (balanced split). A member
  // with no output (SHM_OUT_COLLECTIVE_ONLY: its result is not used) still reduces its chunk,
  // into scratch, for the others, and receives nothing.
  const int64_t lo = n * g.me / g.n, hi = n * (g.me + 1) / g.n;
  const int64_t moved = (int64_t)(g.n - 1) * (hi - lo) * es;
  std::vector<const void *> srcs((size_t)g.n);
  if (direct(dev)) {
    // A pair of members: MPI_Allreduce where its result is bitwise the fold's (ranks.h).
    // Otherwise member r reduces chunk r of every member's input (point-to-point messages
    // bring the others'; its own it reads where it lies, uncopied), in member order as below,
    // and the reduced chunks go to every member (MPI_Allgather, or MPI_Allgatherv where the
    // group's size does not divide n).
    const std::vector<int64_t> key = comm_key(dev, axes, naxes);
    if (group_allreduce_pair(g, key, dtype, op, in, out, n)) return finish(dev, kind, moved, moved);
    std::vector<int64_t> chunk((size_t)g.n), mine((size_t)g.n, (hi - lo) * es);
    std::vector<const char *> send((size_t)g.n);
    std::vector<char *> recv((size_t)g.n);
    Scratch parts(g.n * (hi - lo) * es);
    for (int r = 0; r < g.n; ++r) {
      chunk[(size_t)r] = (n * (r + 1) / g.n - n * r / g.n) * es;
      send[(size_t)r] = (const char *)in + n * r / g.n * es;
      recv[(size_t)r] = parts.data() + r * (hi - lo) * es;
      srcs[(size_t)r] = recv[(size_t)r];
    }
    std::vector<int64_t> send_bytes = chunk;
    send_bytes[(size_t)g.me] = mine[(size_t)g.me] = 0;
    srcs[(size_t)g.me] = send[(size_t)g.me];
    group_exchange(g, key, send, send_bytes, recv, mine);
    char *result = out ? (char *)out : (char *)shm_alloc(n * es);
    if (hi > lo) fold(dtype, op, g.n, srcs.data(), 0, result + lo * es, hi - lo);
    group_allgatherv(g, key, result, chunk);
    if (!out) shm_free(result);
    finish(dev, kind, moved, moved);
    return;
  }
  if (g.lead >= 0) return all_reduce_ranked(dev, g, dtype, op, kind, in, out, n, axes, naxes);
  for (int j = 0; j < g.n; ++j) srcs[(size_t)j] = in_of(dev, g, j);
  if (hi > lo) {
    // (the scratch from shm_alloc: a large one is reused from the block cache every step)
    char *mine = out ? (char *)out + lo * es : (char *)shm_alloc((hi - lo) * es);
    fold(dtype, op, g.n, srcs.data(), lo, mine, hi - lo);
    for (int j = 0; j < g.n; ++j)
      if (j != g.me && out_of(dev, g, j))
        std::memcpy((char *)out_of(dev, g, j) + lo * es, mine, (size_t)((hi - lo) * es));
    if (!out) shm_free(mine);
  }
  finish(dev, kind, moved, moved);
}

} // namespace
} // namespace shm

using namespace shm;

extern "C" {

void shm_psum(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
              const int64_t *shape, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  all_reduce(dev, dtype, SHM_REDUCE_SUM, kPsum, "psum", in, out, rank, shape, axes, naxes);
  SHM_GUARD_END("psum")
}

void shm_pmax(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
              const int64_t *shape, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  all_reduce(dev, dtype, SHM_REDUCE_MAX, kPmax, "pmax", in, out, rank, shape, axes, naxes);
  SHM_GUARD_END("pmax")
}

void shm_pmin(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
              const int64_t *shape, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  all_reduce(dev, dtype, SHM_REDUCE_MIN, kPmin, "pmin", in, out, rank, shape, axes, naxes);
  SHM_GUARD_END("pmin")
}

void shm_pprod(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
               const int64_t *shape, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  all_reduce(dev, dtype, SHM_REDUCE_PROD, kPprod, "pprod", in, out, rank, shape, axes, naxes);
  SHM_GUARD_END("pprod")
}

void shm_pbitwise(shm_device *dev, int32_t op, int32_t dtype, const void *in, void *out, int32_t rank,
                  const int64_t *shape, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  if (dtype != SHM_I32 && dtype != SHM_I64 && dtype != SHM_BOOL) fatalf("bitwise all-reduce of a float");
  switch (op) {
  case SHM_REDUCE_AND: all_reduce(dev, dtype, op, kPand, "pand", in, out, rank, shape, axes, naxes); break;
  case SHM_REDUCE_OR: all_reduce(dev, dtype, op, kPor, "por", in, out, rank, shape, axes, naxes); break;
  case SHM_REDUCE_XOR: all_reduce(dev, dtype, op, kPxor, "pxor", in, out, rank, shape, axes, naxes); break;
  default: fatalf("unknown bitwise op %d", (int)op);
  }
  SHM_GUARD_END("pbitwise")
}

} // extern "C"
