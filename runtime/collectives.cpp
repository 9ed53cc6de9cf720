// The collectives that move data among all members: all_gather, psum_scatter, all_to_all,
// ppermute; and axis_index. collective_protocol.h has the protocol every collective follows;
// all_reduce.cpp the all-reduces, rooted.cpp the rooted collectives.
#include "collective_protocol.h"

#include <cstring>

using namespace shm;

extern "C" {

// Untiled and tiled outputs have the same memory layout: viewed as [outer, n, inner] with
// outer = prod(in_shape[:axis]) and inner = prod(in_shape[axis:]), member j's input fills
// [:, j, :]. Each device pulls every member's input into its own output.
void shm_all_gather(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                    const int64_t *in_shape, int32_t axis, int32_t tiled, const int32_t *axes,
                    int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "all_gather";
  Group g = begin_collective(dev, what, dtype, rank, in_shape, axes, naxes);
  if (tiled ? (axis < 0 || axis >= rank) : (axis < 0 || axis > rank))
    fatalf("all_gather: axis %d out of range for rank %d (%s)", (int)axis, (int)rank,
           tiled ? "tiled" : "untiled");
  const int64_t es = dtype_size(dtype);
  const int64_t outer = prod(in_shape, 0, axis), inner = prod(in_shape, axis, rank) * es;
  publish(dev, g, in, out, outer * inner, kAllGather, axes, naxes);
  if (direct(dev) && outer == 1 && out) {  // gathered along the first axis: in place
    // (sent from the input, as MPI_Allgather's send buffer, unless the input lies within the
    // output, which MPI does not allow: then moved into place and gathered in place)
    const char *o = (const char *)out, *i = (const char *)in;
    const bool overlaps = i < o + g.n * inner && o < i + inner;
    if (overlaps && i != o + g.me * inner) std::memmove((char *)out + g.me * inner, in, (size_t)inner);
    group_allgatherv(g, comm_key(dev, axes, naxes), out, std::vector<int64_t>((size_t)g.n, inner),
                     overlaps ? nullptr : in);
    finish(dev, kAllGather, 0, (int64_t)(g.n - 1) * outer * inner);
    return;
  }
  if (direct(dev)) {  // every member's input (MPI_Allgatherv), then into place along the axis
    Scratch all(g.n * outer * inner);
    std::memcpy(all.data() + g.me * outer * inner, in, (size_t)(outer * inner));
    group_allgatherv(g, comm_key(dev, axes, naxes), all.data(), std::vector<int64_t>((size_t)g.n, outer * inner));
    for (int j = 0; j < g.n && out; ++j)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy((char *)out + (int64_t)j * inner + o * g.n * inner, all.data() + (j * outer + o) * inner,
                    (size_t)inner);
    finish(dev, kAllGather, 0, (int64_t)(g.n - 1) * outer * inner);
    return;
  }
  for (int j = 0; j < g.n && out; ++j) {  // no output (SHM_OUT_COLLECTIVE_ONLY): nothing to pull
    const char *src = (const char *)in_of(dev, g, j);
    char *dst = (char *)out + (int64_t)j * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * g.n * inner, src + o * inner, (size_t)inner);
  }
  finish(dev, kAllGather, 0, (int64_t)(g.n - 1) * outer * inner);
  SHM_GUARD_END("all_gather")
}

// The input viewed as [outer, n, blk] (tiled: blk = in_shape[dim] / n * inner; untiled:
// in_shape[dim] == n and blk = inner); device k folds [:, k, :] of every member's input.
void shm_psum_scatter(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                      const int64_t *in_shape, int32_t dim, int32_t tiled, const int32_t *axes,
                      int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "psum_scatter";
  Group g = begin_collective(dev, what, dtype, rank, in_shape, axes, naxes);
  if (dim < 0 || dim >= rank)
    fatalf("psum_scatter: scatter dimension %d out of range for rank %d", (int)dim, (int)rank);
  if (tiled ? in_shape[dim] % g.n != 0 : in_shape[dim] != g.n)
    fatalf("psum_scatter: dimension %d has size %lld, %s the group size %d", (int)dim,
           (long long)in_shape[dim], tiled ? "not a multiple of" : "not equal to", g.n);
  const int64_t es = dtype_size(dtype);
  const int64_t outer = prod(in_shape, 0, dim);
  const int64_t blk = in_shape[dim] / g.n * prod(in_shape, dim + 1, rank);
  // (member k reads [:, k, :] of every input)
  const ReadOf read = [&](int, int k) {
    Read r;
    r.kind = Read::Box;
    r.esize = es;
    r.rank = 2;
    r.offset = k * blk;
    r.shape[0] = outer, r.shape[1] = blk;
    r.strides[0] = g.n * blk, r.strides[1] = 1;
    return r;
  };
  publish(dev, g, in, out, prod(in_shape, 0, rank) * es, kPsumScatter, axes, naxes, true, &read);
  if (direct(dev)) {
    // Member k gets [:, k, :] of every member's input (packed, point-to-point messages) and
    // folds them in member order, its own part read where it lies (uncopied). Scattered along
    // the first axis, outer is 1 and the parts lie packed in the input already: sent as they
    // are.
    const int64_t part = outer * blk * es;
    Scratch packed(outer == 1 ? 0 : g.n * part), parts(g.n * part);
    for (int k = 0; k < g.n && outer > 1; ++k)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(packed.data() + k * part + o * blk * es, (const char *)in + (o * g.n + k) * blk * es,
                    (size_t)(blk * es));
    const char *from = outer == 1 ? (const char *)in : packed.data();
    std::vector<const char *> send((size_t)g.n);
    std::vector<char *> recv((size_t)g.n);
    std::vector<int64_t> bytes((size_t)g.n, part);
    std::vector<const void *> srcs((size_t)g.n);
    for (int j = 0; j < g.n; ++j) {
      send[(size_t)j] = from + j * part;
      recv[(size_t)j] = parts.data() + j * part;
      srcs[(size_t)j] = recv[(size_t)j];
    }
    bytes[(size_t)g.me] = 0;
    srcs[(size_t)g.me] = send[(size_t)g.me];
    group_exchange(g, comm_key(dev, axes, naxes), send, bytes, recv, bytes);
    for (int64_t o = 0; o < outer; ++o)
      fold(dtype, SHM_REDUCE_SUM, g.n, srcs.data(), o * blk, (char *)out + o * blk * es, blk);
    finish(dev, kPsumScatter, 0, (int64_t)(g.n - 1) * outer * blk * es);
    return;
  }
  std::vector<const void *> srcs((size_t)g.n);
  for (int j = 0; j < g.n; ++j) srcs[(size_t)j] = in_of(dev, g, j);
  for (int64_t o = 0; o < outer; ++o)
    fold(dtype, SHM_REDUCE_SUM, g.n, srcs.data(), (o * g.n + g.me) * blk,
         (char *)out + o * blk * es, blk);
  finish(dev, kPsumScatter, 0, (int64_t)(g.n - 1) * outer * blk * es);
  SHM_GUARD_END("psum_scatter")
}

// Each device pulls, from every member j, the block of j's input that is addressed to it and
// writes it at position j along concat_axis of its own output (a strided block copy).
void shm_all_to_all(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                    const int64_t *in_shape, int32_t split_axis, int32_t concat_axis,
                    int32_t tiled, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "all_to_all";
  Group g = begin_collective(dev, what, dtype, rank, in_shape, axes, naxes);
  if (split_axis < 0 || split_axis >= rank || concat_axis < 0 || concat_axis >= rank)
    fatalf("all_to_all: split_axis %d / concat_axis %d out of range for rank %d",
           (int)split_axis, (int)concat_axis, (int)rank);
  if (tiled ? in_shape[split_axis] % g.n != 0 : in_shape[split_axis] != g.n)
    fatalf("all_to_all: split axis %d has size %lld, %s the group size %d", (int)split_axis,
           (long long)in_shape[split_axis], tiled ? "not a multiple of" : "not equal to", g.n);
  const int64_t es = dtype_size(dtype);
  int64_t in_str[kMaxRank], out_shape[kMaxRank], out_str[kMaxRank];
  row_major_strides(rank, in_shape, in_str);
  // The block each sender contributes, with its source strides / offset and the destination
  // strides / offset per sender.
  int32_t brank = 0;
  int64_t bshape[kMaxRank], bsrc[kMaxRank], bdst[kMaxRank];
  int64_t src_off = 0, dst_step = 0;
  if (tiled) {
    const int64_t b = in_shape[split_axis] / g.n;
    for (int32_t d = 0; d < rank; ++d) out_shape[d] = in_shape[d];
    out_shape[split_axis] = b;
    out_shape[concat_axis] *= g.n;
    row_major_strides(rank, out_shape, out_str);
    brank = rank;
    for (int32_t d = 0; d < rank; ++d) {
      bshape[d] = in_shape[d];
      bsrc[d] = in_str[d];
      bdst[d] = out_str[d];
    }
    bshape[split_axis] = b;
    src_off = g.me * b * in_str[split_axis];
    dst_step = bshape[concat_axis] * out_str[concat_axis];
  } else {
    // Output: in_shape without split_axis, then a new axis of size n inserted at concat_axis.
    int32_t k = 0;
    for (int32_t d = 0; d < rank; ++d)
      if (d != split_axis) {
        bshape[k] = in_shape[d];
        bsrc[k] = in_str[d];
        ++k;
      }
    brank = rank - 1;
    for (int32_t d = 0, s = 0; d < rank; ++d) out_shape[d] = d == concat_axis ? g.n : bshape[s++];
    row_major_strides(rank, out_shape, out_str);
    for (int32_t d = 0, s = 0; d < rank; ++d)
      if (d != concat_axis) bdst[s++] = out_str[d];
    src_off = g.me * in_str[split_axis];
    dst_step = out_str[concat_axis];
  }
  // (member k reads the block at k's offset of every input)
  const int64_t step = tiled ? bshape[split_axis] * in_str[split_axis] : in_str[split_axis];
  const ReadOf read = [&](int, int k) {
    Read r;
    r.kind = Read::Box;
    r.esize = es;
    r.rank = brank;
    r.offset = k * step;
    for (int32_t d = 0; d < brank; ++d) r.shape[d] = bshape[d], r.strides[d] = bsrc[d];
    return r;
  };
  publish(dev, g, in, out, prod(in_shape, 0, rank) * es, kAllToAll, axes, naxes, true, &read);
  const int64_t block_elems = num_elements(brank, bshape);
  if (direct(dev)) {
    // The block for member k (the one k would pull: at k's offset) packed for the all-to-all;
    // the block from member j unpacked at position j along concat_axis.
    const int64_t part = block_elems * es;
    int64_t packed[kMaxRank];
    row_major_strides(brank, bshape, packed);
    // (split and concatenated along the first axis, the blocks are already packed in place)
    const bool send_in_place = tiled && split_axis == 0, receive_in_place = tiled && concat_axis == 0;
    Scratch send(send_in_place ? 0 : g.n * part), parts(receive_in_place ? 0 : g.n * part);
    for (int k = 0; k < g.n && !send_in_place; ++k)
      copy_strided(es, brank, bshape, (const char *)in + (src_off - g.me * step + k * step) * es, bsrc,
                   send.data() + k * part, packed);
    group_alltoall(g, comm_key(dev, axes, naxes), send_in_place ? in : send.data(), part,
                   receive_in_place ? out : parts.data());
    for (int j = 0; j < g.n && !receive_in_place; ++j)
      copy_strided(es, brank, bshape, parts.data() + j * part, packed, (char *)out + j * dst_step * es, bdst);
    finish(dev, kAllToAll, 0, (int64_t)(g.n - 1) * block_elems * es);
    return;
  }
  for (int j = 0; j < g.n; ++j) {
    const char *src = (const char *)in_of(dev, g, j) + src_off * es;
    char *dst = (char *)out + j * dst_step * es;
    copy_strided(es, brank, bshape, src, bsrc, dst, bdst);
  }
  finish(dev, kAllToAll, 0, (int64_t)(g.n - 1) * block_elems * es);
  SHM_GUARD_END("all_to_all")
}

void shm_ppermute(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                  const int64_t *shape, const int64_t *pairs, int32_t npairs, const int32_t *axes,
                  int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "ppermute";
  Group g = begin_collective(dev, what, dtype, rank, shape, axes, naxes);
  if (npairs < 0 || (npairs > 0 && !pairs)) fatalf("ppermute: invalid permutation");
  std::vector<char> is_src((size_t)g.n, 0), is_dst((size_t)g.n, 0);
  int64_t from = -1; // who sends to this device
  for (int32_t p = 0; p < npairs; ++p) {
    const int64_t s = pairs[2 * p], d = pairs[2 * p + 1];
    if (s < 0 || s >= g.n || d < 0 || d >= g.n)
      fatalf("ppermute: pair (%lld, %lld) out of range for a group of %d devices", (long long)s,
             (long long)d, g.n);
    if (is_src[(size_t)s]) fatalf("ppermute: device %lld sends twice", (long long)s);
    if (is_dst[(size_t)d]) fatalf("ppermute: device %lld receives twice", (long long)d);
    is_src[(size_t)s] = is_dst[(size_t)d] = 1;
    if (d == g.me) from = s;
  }
  const int64_t bytes = num_elements(rank, shape) * dtype_size(dtype);
  // (member k reads the input of the member that sends to it)
  const ReadOf read = [&](int j, int k) {
    Read r;
    r.kind = Read::Nothing;
    for (int32_t p = 0; p < npairs; ++p)
      if (pairs[2 * p] == j && pairs[2 * p + 1] == k) r.kind = Read::Whole;
    return r;
  };
  publish(dev, g, in, out, bytes, kPpermute, axes, naxes, true, &read);
  int64_t received = 0;
  if (direct(dev)) {
    int to = -1;
    for (int32_t p = 0; p < npairs; ++p)
      if (pairs[2 * p] == g.me) to = (int)pairs[2 * p + 1];
    if (to == g.me || from == g.me) {  // to itself: a copy
      if (from == g.me) std::memcpy(out, in, (size_t)bytes);
      if (to == g.me) to = -1;
    }
    group_sendrecv(g, comm_key(dev, axes, naxes), in, to, out, from == g.me ? -1 : (int)from, bytes);
    if (from < 0) std::memset(out, 0, (size_t)bytes);
    if (from >= 0 && from != g.me) received = bytes;
    finish(dev, kPpermute, 0, received);
    return;
  }
  if (from < 0) {
    std::memset(out, 0, (size_t)bytes); // all-zero bits are 0 / 0.0 / false in every dtype
  } else {
    std::memcpy(out, in_of(dev, g, (int)from), (size_t)bytes);
    if (from != g.me) received = bytes;
  }
  finish(dev, kPpermute, 0, received);
  SHM_GUARD_END("ppermute")
}

int32_t shm_axis_index(shm_device *dev, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  return group_of(dev, axes, naxes, "axis_index").me;
  SHM_GUARD_END("axis_index")
  return 0;
}

} // extern "C"
