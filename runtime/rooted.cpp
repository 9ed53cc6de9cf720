// The rooted collectives: one member sends to all (broadcast, scatter_from), or all
// to one (reduce_to, gather_to); collective_protocol.h has the protocol.
#include "collective_protocol.h"

#include <cstring>

using namespace shm;

namespace {

void check_root(int32_t root, const Group &g, const char *what) {
  if (root < 0 || root >= g.n) fatalf("%s: root %d out of range for a group of %d devices", what, (int)root, g.n);
}

// gather_to / scatter_from: the array viewed as [outer, n, blk] along `axis`, block k member
// k's (gather: out's, untiled: a new axis of size n; scatter: in's, untiled: in_shape[axis] == n).
void blocks(const char *what, int32_t rank, const int64_t *shape, int32_t axis, int32_t tiled, int n, bool split,
            int64_t es, int64_t &outer, int64_t &blk) {
  const bool in_range = split || tiled ? axis >= 0 && axis < rank : axis >= 0 && axis <= rank;
  if (!in_range) fatalf("%s: axis %d out of range for rank %d", what, (int)axis, (int)rank);
  if (split && (tiled ? shape[axis] % n != 0 : shape[axis] != n))
    fatalf("%s: dimension %d has size %lld, %s the group size %d", what, (int)axis, (long long)shape[axis],
           tiled ? "not a multiple of" : "not equal to", n);
  outer = prod(shape, 0, axis);
  blk = (split ? shape[axis] / n * prod(shape, axis + 1, rank) : prod(shape, axis, rank)) * es;
}

} // namespace

extern "C" {

void shm_broadcast(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank, const int64_t *shape,
                   int32_t root, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "broadcast";
  Group g = begin_collective(dev, what, dtype, rank, shape, axes, naxes);
  check_root(root, g, what);
  const int64_t bytes = num_elements(rank, shape) * dtype_size(dtype);
  const ReadOf read = [&](int j, int) { return Read{j == root ? Read::Whole : Read::Nothing}; };
  publish(dev, g, in, out, bytes, kBroadcast, axes, naxes, true, &read);
  const int64_t received = g.me == root ? 0 : bytes;
  if (direct(dev)) {
    Scratch scratch(out ? 0 : bytes);
    char *buf = out ? (char *)out : scratch.data();
    if (g.me == root) std::memcpy(buf, in, (size_t)bytes);
    group_bcast(g, comm_key(dev, axes, naxes), buf, bytes, root);
    finish(dev, kBroadcast, 0, received);
    return;
  }
  if (out) std::memcpy(out, in_of(dev, g, root), (size_t)bytes);
  finish(dev, kBroadcast, 0, received);
  SHM_GUARD_END("broadcast")
}

void shm_reduce_to(shm_device *dev, int32_t op, int32_t dtype, const void *in, void *out, int32_t rank,
                   const int64_t *shape, int32_t root, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "reduce";
  Group g = begin_collective(dev, what, dtype, rank, shape, axes, naxes);
  check_root(root, g, what);
  const int64_t n = num_elements(rank, shape), bytes = n * dtype_size(dtype);
  const ReadOf read = [&](int, int k) { return Read{k == root ? Read::Whole : Read::Nothing}; };
  publish(dev, g, in, out, bytes, kReduce, axes, naxes, true, &read);
  const int64_t received = g.me == root ? (int64_t)(g.n - 1) * bytes : 0;
  // (one device per rank: every input gathered onto the root first, MPI_Gather)
  Scratch all(direct(dev) && g.me == root ? g.n * bytes : 0);
  if (direct(dev)) group_gather(g, comm_key(dev, axes, naxes), in, all.data(), bytes, root);
  std::vector<const void *> srcs((size_t)g.n);
  for (int j = 0; j < g.n; ++j) srcs[(size_t)j] = direct(dev) ? all.data() + j * bytes : in_of(dev, g, j);
  if (g.me == root && out) fold(dtype, op, g.n, srcs.data(), 0, out, n);
  else if (out) std::memset(out, 0, (size_t)bytes);  // (all-zero bits: 0, 0.0, false)
  finish(dev, kReduce, 0, received);
  SHM_GUARD_END("reduce")
}

void shm_gather_to(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank, const int64_t *in_shape,
                   int32_t axis, int32_t tiled, int32_t root, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "gather";
  Group g = begin_collective(dev, what, dtype, rank, in_shape, axes, naxes);
  check_root(root, g, what);
  int64_t outer, blk;
  blocks(what, rank, in_shape, axis, tiled, g.n, false, dtype_size(dtype), outer, blk);
  const int64_t bytes = outer * blk;
  const ReadOf read = [&](int, int k) { return Read{k == root ? Read::Whole : Read::Nothing}; };
  publish(dev, g, in, out, bytes, kGather, axes, naxes, true, &read);
  const int64_t received = g.me == root ? (int64_t)(g.n - 1) * bytes : 0;
  // Member j's input into [:, j, :] of the root's output.
  auto place = [&](int j, const char *src) {
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy((char *)out + (o * g.n + j) * blk, src + o * blk, (size_t)blk);
  };
  // (one device per rank: every input gathered onto the root first, MPI_Gather)
  Scratch all(direct(dev) && g.me == root ? g.n * bytes : 0);
  if (direct(dev)) group_gather(g, comm_key(dev, axes, naxes), in, all.data(), bytes, root);
  for (int j = 0; j < g.n && g.me == root && out; ++j)
    place(j, direct(dev) ? all.data() + j * bytes : (const char *)in_of(dev, g, j));
  if (g.me != root && out) std::memset(out, 0, (size_t)(g.n * bytes));
  finish(dev, kGather, 0, received);
  SHM_GUARD_END("gather")
}

void shm_scatter_from(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank, const int64_t *in_shape,
                      int32_t dim, int32_t tiled, int32_t root, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "scatter";
  Group g = begin_collective(dev, what, dtype, rank, in_shape, axes, naxes);
  check_root(root, g, what);
  const int64_t es = dtype_size(dtype);
  int64_t outer, blk;
  blocks(what, rank, in_shape, dim, tiled, g.n, true, es, outer, blk);
  // (member k reads [:, k, :] of the root's input)
  const ReadOf read = [&](int j, int k) {
    Read r;
    r.kind = j == root ? Read::Box : Read::Nothing;
    r.esize = es;
    r.rank = 2;
    r.offset = k * (blk / es);
    r.shape[0] = outer, r.shape[1] = blk / es;
    r.strides[0] = g.n * (blk / es), r.strides[1] = 1;
    return r;
  };
  publish(dev, g, in, out, prod(in_shape, 0, rank) * es, kScatter, axes, naxes, true, &read);
  const int64_t received = g.me == root ? 0 : outer * blk;
  if (direct(dev)) {
    // The root packs block k of every row for member k (MPI_Scatter sends each its part).
    Scratch send(g.me == root ? g.n * outer * blk : 0), mine(out ? 0 : outer * blk);
    for (int k = 0; k < g.n && g.me == root; ++k)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(send.data() + (k * outer + o) * blk, (const char *)in + (o * g.n + k) * blk, (size_t)blk);
    group_scatter(g, comm_key(dev, axes, naxes), send.data(), out ? out : mine.data(), outer * blk, root);
    finish(dev, kScatter, 0, received);
    return;
  }
  const char *src = (const char *)in_of(dev, g, root);
  for (int64_t o = 0; o < outer && out; ++o)
    std::memcpy((char *)out + o * blk, src + (o * g.n + g.me) * blk, (size_t)blk);
  finish(dev, kScatter, 0, received);
  SHM_GUARD_END("scatter")
}

} // extern "C"
