// Collectives in shared memory. Every collective follows the same protocol on every device of
// the mesh:
//   1. publish this device's `in` / `out` pointers in its slot;  barrier
//   2. do this device's share of the copying / reducing, reading other devices' published
//      buffers (and, for the all-reduces, writing into them);      barrier
// The first barrier makes every slot and input visible before anyone reads it; the second
// keeps a device from returning (and then overwriting its input, output or slot) while others
// still read or write them. Barriers are mesh-wide, which is correct because every device
// calls every collective in the same order (groups are disjoint and progress together).
//
// Statistics (docs/runtime.md): bytes a device writes into other devices' buffers count as
// sent, bytes it reads from other devices' buffers as received.
#include "device.h"
#include "ranks.h"
#include "shmap_runtime.h"
#include "trace.h"
#include "util.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <type_traits>
#include <cstdio>
#include <cstring>

namespace shm {
namespace {

// Under MPI with one device per rank the collectives run "direct": each is MPI calls among the
// ranks of its group (ranks.h), moving each byte once to the member that needs it, with the
// same arithmetic in the same order as in one process (so the same bits).
bool direct(const shm_device *dev) { return dev->call->nlocal == 1 && dev->call->ndev > 1; }

// A collective's communicator under MPI (ranks.h): the mesh's sizes, then its axes.
std::vector<int64_t> comm_key(const shm_device *dev, const int32_t *axes, int32_t naxes) {
  const MeshCall &c = *dev->call;
  std::vector<int64_t> key(c.sizes, c.sizes + c.mesh_rank);
  key.push_back(-1);
  key.insert(key.end(), axes, axes + naxes);
  return key;
}

int64_t axis_bits(const int32_t *axes, int32_t naxes) {
  int64_t bits = 0;
  for (int32_t k = 0; k < naxes; ++k) bits |= int64_t(1) << axes[k];
  return bits;
}

// Under MPI with several devices per rank, the "ranked" mode: a rank's devices share memory,
// and the ranks exchange only the pieces of data that a device of another rank reads
// (exchange_pieces, by the first local device, the thread that calls MPI), each once per rank.
bool ranked(const shm_device *dev) { return dev->call->nlocal < dev->call->ndev && !direct(dev); }

int rank_of(const MeshCall &c, int id) { return id / c.nlocal; }
bool is_local(const MeshCall &c, int id) { return id >= c.first && id < c.first + c.nlocal; }

// Ranked mode: each device's group over `axes`, and the ranks other than its own that hold
// members of it (ascending). Sets c.region: where in c.mirror this rank keeps the data of each
// remote device in a group with a local one (`bytes` each; -1 for the others).
std::vector<std::vector<int>> partner_ranks(MeshCall &c, const int32_t *axes, int32_t naxes, int64_t bytes,
                                            std::vector<Group> &groups) {
  std::vector<std::vector<int>> partners((size_t)c.ndev);
  groups.resize((size_t)c.ndev);
  c.region.assign((size_t)c.ndev, -1);
  int64_t used = 0;
  int64_t coords[kMaxMeshRank];
  for (int id = 0; id < c.ndev; ++id) {
    coords_of(c, id, coords);
    groups[(size_t)id] = group_at(c, coords, axes, naxes);
    std::vector<int> &p = partners[(size_t)id];
    for (int m : groups[(size_t)id].member)
      if (rank_of(c, m) != rank_of(c, id)) p.push_back(rank_of(c, m));
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    if (!is_local(c, id) && std::binary_search(p.begin(), p.end(), rank_id())) {
      c.region[(size_t)id] = used;
      used += bytes;
    }
  }
  if ((int64_t)c.mirror.size() < used) c.mirror.resize((size_t)used);
  return partners;
}

// exchange_pieces, and under SHMAP_LOG_RANKS=1 what this rank sent and received.
void move_pieces(int kind, const char *what, const std::vector<Piece> &pieces) {
  exchange_pieces(pieces);
  if (!log_ranks()) return;
  int64_t sent = 0, received = 0;
  for (const Piece &p : pieces) {
    if (p.from == rank_id()) sent += p.bytes;
    if (p.to == rank_id()) received += p.bytes;
  }
  std::fprintf(stderr, "shmap ranks: rank %d: %s %s: %lld bytes sent, %lld received\n", rank_id(), kind_name(kind), what,
               (long long)sent, (long long)received);
}

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

// Ranked mode: the remote devices whose data this rank received read through their slots from
// its copy (c.mirror at c.region).
void read_remote_from_mirror(MeshCall &c) {
  for (int id = 0; id < c.ndev; ++id)
    if (c.region[(size_t)id] >= 0) c.slots[(size_t)id].in = c.mirror.data() + c.region[(size_t)id];
}

// Ranked mode: what each device of another rank reads of a device's input goes to that rank,
// once: a whole input once per rank, a box once per member that reads it (exchange_pieces
// packs it). slots[id].in of such a remote device then points at this rank's copy, in which
// everything a local device reads is in its place. `read` null: every member reads all of
// every member's input (`bytes`).
void exchange_inputs(MeshCall &c, int kind, int64_t bytes, const int32_t *axes, int32_t naxes, const ReadOf *read) {
  std::vector<Group> groups;
  std::vector<std::vector<int>> partners = partner_ranks(c, axes, naxes, bytes, groups);
  std::vector<Piece> pieces;
  for (int id = 0; id < c.ndev; ++id) {
    const Group &g = groups[(size_t)id];
    const int from = rank_of(c, id);
    const char *in = is_local(c, id) ? (const char *)c.slots[(size_t)id].in : nullptr;
    char *copy = c.region[(size_t)id] >= 0 ? c.mirror.data() + c.region[(size_t)id] : nullptr;
    std::vector<bool> whole_to((size_t)rank_count(), false);
    for (int k = 0; k < g.n; ++k) {
      const int to = rank_of(c, g.member[(size_t)k]);
      if (to == from) continue;
      const Read r = read ? (*read)(g.me, k) : Read{};
      if (r.kind == Read::Nothing) continue;
      if (r.kind == Read::Whole) {
        if (!whole_to[(size_t)to]) pieces.push_back({from, to, in, to == rank_id() ? copy : nullptr, bytes});
        whole_to[(size_t)to] = true;
        continue;
      }
      pieces.push_back(Piece::box(from, to, in ? in + r.offset * r.esize : nullptr,
                                  to == rank_id() ? copy + r.offset * r.esize : nullptr, r.esize, r.rank, r.shape,
                                  r.strides));
    }
  }
  move_pieces(kind, "inputs", pieces);
  read_remote_from_mirror(c);
}

// `bytes`: the size of every device's input; `kind`, `axes`: what the collective is. Under MPI
// the ranks may first compare their collectives (--check-collectives). In ranked mode what
// other ranks read of the inputs (`read`: exchange_inputs) is then copied to them, unless the
// caller moves its own data (`exchange` false); nothing writes into a remote device's buffers.
void publish(shm_device *dev, const void *in, void *out, int64_t bytes, int kind, const int32_t *axes,
             int32_t naxes, bool exchange = true, const ReadOf *read = nullptr) {
  MeshCall &c = *dev->call;
  c.slots[(size_t)dev->id].in = in;
  c.slots[(size_t)dev->id].out = out;
  c.barrier.arrive_and_wait();
  if (g_tracing || g_stats_wait) dev->collective_waited = trace_now();  // (every member has arrived)
  if (c.nlocal < c.ndev) {
    CollectiveSig sig{kind, bytes, axis_bits(axes, naxes)};
    if (direct(dev)) return check_collective(sig);
    if (dev->id == c.first) check_collective(sig);
    if (!exchange) return;
    if (dev->id == c.first) exchange_inputs(c, kind, bytes, axes, naxes, read);
    c.barrier.arrive_and_wait();
  }
}

// --trace: the operand of the collective in progress, as its span shows it ("f32[2,5]").
void note_operand(shm_device *dev, int32_t dtype, int32_t rank, const int64_t *shape) {
  if (!g_tracing) return;
  std::string &s = dev->collective_operand;
  s = std::string(dtype_name(dtype)) + "[";
  for (int32_t d = 0; d < rank && shape; ++d) s += (d ? "," : "") + std::to_string(shape[d]);
  s += "]";
}

// --trace: the collective that just finished, from its start (group_of) to now, with the
// time the device waited for the others to arrive (publish's barrier) as a span inside it.
void trace_collective(shm_device *dev, int kind, int64_t sent, int64_t received) {
  const double t0 = dev->collective_start, waited = dev->collective_waited - t0;
  if (waited > 0) current_track()->events.push_back({"wait", "wait", t0, waited, {}});  // (a device's own track)
  trace_span(kind_name(kind), "collective", t0,
             "\"axes\":\"" + dev->collective_axes + "\",\"operand\":\"" + dev->collective_operand +
                 "\",\"bytes_sent\":" + std::to_string(sent) +
                 ",\"bytes_received\":" + std::to_string(received) +
                 ",\"wait_us\":" + std::to_string(waited > 0 ? waited : 0.0));
}

void finish(shm_device *dev, int kind, int64_t sent, int64_t received) {
  StatsRow &r = dev->stats.rows[kind];
  if (dev->id == 0) r.calls += 1; // once per collective, not per device
  r.bytes_sent += sent;
  r.bytes_received += received;
  if (g_stats_wait) r.wait_ns += (int64_t)((dev->collective_waited - dev->collective_start) * 1e3);
  dev->call->barrier.arrive_and_wait();
  if (g_tracing) trace_collective(dev, kind, sent, received);
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

const void *in_of(shm_device *dev, const Group &g, int j) {
  return dev->call->slots[(size_t)g.member[(size_t)j]].in;
}
void *out_of(shm_device *dev, const Group &g, int j) {
  return dev->call->slots[(size_t)g.member[(size_t)j]].out;
}

// ---- element-wise reduction of several sources in a fixed order (source 0 first) ----------

template <typename T, int Op> inline T combine(T a, T b);
// Floats: NaN propagates as in JAX's max/min.
#define SHM_FLOAT_COMBINE(T)                                                                   \
  template <> inline T combine<T, SHM_REDUCE_SUM>(T a, T b) { return a + b; }                \
  template <> inline T combine<T, SHM_REDUCE_PROD>(T a, T b) { return a * b; }               \
  template <> inline T combine<T, SHM_REDUCE_MAX>(T a, T b) { return (b > a || b != b) ? b : a; } \
  template <> inline T combine<T, SHM_REDUCE_MIN>(T a, T b) { return (b < a || b != b) ? b : a; }
SHM_FLOAT_COMBINE(float)
SHM_FLOAT_COMBINE(double)
#undef SHM_FLOAT_COMBINE
// i32 sums wrap (two's complement) instead of being undefined on overflow.
template <> inline int32_t combine<int32_t, SHM_REDUCE_SUM>(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}
template <> inline int64_t combine<int64_t, SHM_REDUCE_SUM>(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
template <> inline int64_t combine<int64_t, SHM_REDUCE_MAX>(int64_t a, int64_t b) { return b > a ? b : a; }
template <> inline int64_t combine<int64_t, SHM_REDUCE_MIN>(int64_t a, int64_t b) { return b < a ? b : a; }
template <> inline int32_t combine<int32_t, SHM_REDUCE_MAX>(int32_t a, int32_t b) { return b > a ? b : a; }
template <> inline int32_t combine<int32_t, SHM_REDUCE_MIN>(int32_t a, int32_t b) { return b < a ? b : a; }
// Integer products wrap (two's complement), as numpy's.
template <> inline int32_t combine<int32_t, SHM_REDUCE_PROD>(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a * (uint32_t)b);
}
template <> inline int64_t combine<int64_t, SHM_REDUCE_PROD>(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}
// Bitwise, of integers and bools (0 / 1: logical).
#define SHM_BITWISE_COMBINE(T)                                                                 \
  template <> inline T combine<T, SHM_REDUCE_AND>(T a, T b) { return (T)(a & b); }           \
  template <> inline T combine<T, SHM_REDUCE_OR>(T a, T b) { return (T)(a | b); }            \
  template <> inline T combine<T, SHM_REDUCE_XOR>(T a, T b) { return (T)(a ^ b); }
SHM_BITWISE_COMBINE(int32_t)
SHM_BITWISE_COMBINE(int64_t)
SHM_BITWISE_COMBINE(uint8_t)
#undef SHM_BITWISE_COMBINE
template <> inline uint8_t combine<uint8_t, SHM_REDUCE_PROD>(uint8_t a, uint8_t b) { return a & b; }
// bool: sum and max are logical or, min is logical and.
template <> inline uint8_t combine<uint8_t, SHM_REDUCE_SUM>(uint8_t a, uint8_t b) { return a | b; }
template <> inline uint8_t combine<uint8_t, SHM_REDUCE_MAX>(uint8_t a, uint8_t b) { return a | b; }
template <> inline uint8_t combine<uint8_t, SHM_REDUCE_MIN>(uint8_t a, uint8_t b) { return a & b; }

// dst[i] = src[0][i] op src[1][i] op ... (left to right), in tiles small enough that dst stays
// in L1 while the sources stream through.
template <typename T, int Op>
void fold_sources(int nsrc, const void *const *srcs, int64_t offset, void *dst_v, int64_t len) {
  T *dst = (T *)dst_v;
  constexpr int64_t kTile = 2048;
  for (int64_t t0 = 0; t0 < len; t0 += kTile) {
    const int64_t t1 = t0 + kTile < len ? t0 + kTile : len;
    const T *s0 = (const T *)srcs[0] + offset;
    for (int64_t i = t0; i < t1; ++i) dst[i] = s0[i];
    for (int j = 1; j < nsrc; ++j) {
      const T *s = (const T *)srcs[j] + offset;
      for (int64_t i = t0; i < t1; ++i) dst[i] = combine<T, Op>(dst[i], s[i]);
    }
  }
}

template <typename T>
void fold_op(int32_t op, int nsrc, const void *const *srcs, int64_t offset, void *dst, int64_t len) {
  switch (op) {
  case SHM_REDUCE_SUM: return fold_sources<T, SHM_REDUCE_SUM>(nsrc, srcs, offset, dst, len);
  case SHM_REDUCE_MAX: return fold_sources<T, SHM_REDUCE_MAX>(nsrc, srcs, offset, dst, len);
  case SHM_REDUCE_MIN: return fold_sources<T, SHM_REDUCE_MIN>(nsrc, srcs, offset, dst, len);
  case SHM_REDUCE_PROD: return fold_sources<T, SHM_REDUCE_PROD>(nsrc, srcs, offset, dst, len);
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
    case SHM_REDUCE_AND: return fold_sources<T, SHM_REDUCE_AND>(nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_OR: return fold_sources<T, SHM_REDUCE_OR>(nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_XOR: return fold_sources<T, SHM_REDUCE_XOR>(nsrc, srcs, offset, dst, len);
    }
  }
  fatalf("unknown reduction op %d for this dtype", (int)op);
}

// f16 / bf16: the sources widened to f32 tile by tile, folded in f32 in the same order, and
// each result rounded once to the storage type.
template <int Op>
void fold_half(int32_t dtype, int nsrc, const void *const *srcs, int64_t offset, void *dst, int64_t len) {
  constexpr int64_t kTile = 2048;
  float acc[kTile], x[kTile];
  for (int64_t t0 = 0; t0 < len; t0 += kTile) {
    const int64_t n = t0 + kTile < len ? kTile : len - t0;
    widen_half(dtype, (const uint16_t *)srcs[0] + offset + t0, acc, n);
    for (int j = 1; j < nsrc; ++j) {
      widen_half(dtype, (const uint16_t *)srcs[j] + offset + t0, x, n);
      for (int64_t i = 0; i < n; ++i) acc[i] = combine<float, Op>(acc[i], x[i]);
    }
    narrow_half(dtype, acc, (uint16_t *)dst + t0, n);
  }
}

// Folds elements [offset, offset + len) of every source into dst[0, len).
void fold(int32_t dtype, int32_t op, int nsrc, const void *const *srcs, int64_t offset, void *dst,
          int64_t len) {
  switch (dtype) {
  case SHM_F32: return fold_op<float>(op, nsrc, srcs, offset, dst, len);
  case SHM_F64: return fold_op<double>(op, nsrc, srcs, offset, dst, len);
  case SHM_I32: return fold_op<int32_t>(op, nsrc, srcs, offset, dst, len);
  case SHM_BOOL: return fold_op<uint8_t>(op, nsrc, srcs, offset, dst, len);
  case SHM_I64: return fold_op<int64_t>(op, nsrc, srcs, offset, dst, len);
  case SHM_F16:
  case SHM_BF16:
    switch (op) {
    case SHM_REDUCE_SUM: return fold_half<SHM_REDUCE_SUM>(dtype, nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_MAX: return fold_half<SHM_REDUCE_MAX>(dtype, nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_MIN: return fold_half<SHM_REDUCE_MIN>(dtype, nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_PROD: return fold_half<SHM_REDUCE_PROD>(dtype, nsrc, srcs, offset, dst, len);
    }
    fatalf("unknown reduction op %d", (int)op);
  }
  fatalf("unknown dtype code %d", (int)dtype);
}

// ---- all-reduce: reduce-scatter by chunks, then each device pushes its chunk to all --------

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
  publish(dev, in, out, n * es, kind, axes, naxes, false);
  std::vector<Group> groups;
  const bool local_first = reduce_locally_first();
  if (dev->id == c.first && local_first) {
    // Chunk r of the sum of each rank's members to member r's rank, at the place of the rank's
    // first member of the group.
    c.partners = partner_ranks(c, axes, naxes, n * es, groups);
    std::vector<Piece> pieces;
    std::vector<std::vector<char>> partials;
    partials.reserve((size_t)c.ndev);
    for (int id = 0; id < c.ndev; ++id) {
      const Group &gi = groups[(size_t)id];
      if (first_on_rank(c, gi, rank_of(c, id)) != id) continue;
      for (int r = 0; r < gi.n; ++r) {
        const int to = rank_of(c, gi.member[(size_t)r]);
        const int64_t rlo = chunk_lo(n, r, gi.n), len = chunk_lo(n, r + 1, gi.n) - rlo;
        if (to == rank_of(c, id) || len == 0) continue;
        const char *send = nullptr;
        if (is_local(c, id)) {
          std::vector<const void *> mine_here;
          for (int m : gi.member)
            if (is_local(c, m)) mine_here.push_back(c.slots[(size_t)m].in);
          partials.emplace_back((size_t)(len * es));
          fold(dtype, op, (int)mine_here.size(), mine_here.data(), rlo, partials.back().data(), len);
          send = partials.back().data();
        }
        pieces.push_back({rank_of(c, id), to, send,
                          to == rank_id() ? c.mirror.data() + c.region[(size_t)id] + rlo * es : nullptr, len * es});
      }
    }
    move_pieces(kind, "input chunks added up on their rank", pieces);
  }
  if (dev->id == c.first && !local_first) {  // chunk r of every member's input to member r's rank
    std::vector<std::vector<int>> partners = partner_ranks(c, axes, naxes, n * es, groups);
    std::vector<Piece> pieces;
    for (int id = 0; id < c.ndev; ++id) {
      const Group &gi = groups[(size_t)id];
      for (int r = 0; r < gi.n; ++r) {
        const int to = rank_of(c, gi.member[(size_t)r]);
        const int64_t rlo = chunk_lo(n, r, gi.n) * es, bytes = chunk_lo(n, r + 1, gi.n) * es - rlo;
        if (to == rank_of(c, id) || bytes == 0) continue;
        pieces.push_back({rank_of(c, id), to, is_local(c, id) ? (const char *)c.slots[(size_t)id].in + rlo : nullptr,
                          to == rank_id() ? c.mirror.data() + c.region[(size_t)id] + rlo : nullptr, bytes});
      }
    }
    move_pieces(kind, "input chunks", pieces);
    read_remote_from_mirror(c);
    // The reduced chunks, below, go to the same ranks: keep the partners.
    c.partners = std::move(partners);
  }
  c.barrier.arrive_and_wait();
  std::vector<const void *> srcs;
  if (local_first) {  // this rank's members in member order, then each other rank's sum
    for (int m : g.member)
      if (is_local(c, m)) srcs.push_back(c.slots[(size_t)m].in);
    for (int m : g.member)
      if (!is_local(c, m) && first_on_rank(c, g, rank_of(c, m)) == m)
        srcs.push_back(c.mirror.data() + c.region[(size_t)m]);
  } else {
    for (int j = 0; j < g.n; ++j) srcs.push_back(in_of(dev, g, j));
  }
  if (hi > lo) fold(dtype, op, (int)srcs.size(), srcs.data(), lo, mine, hi - lo);
  for (int j = 0; j < g.n; ++j)  // to the other members on this rank, as in one process
    if (j != g.me && is_local(c, g.member[(size_t)j]) && out_of(dev, g, j) && hi > lo)
      std::memcpy((char *)out_of(dev, g, j) + lo * es, mine, (size_t)((hi - lo) * es));
  c.barrier.arrive_and_wait();
  if (dev->id == c.first) {  // each reduced chunk once to every other rank of its group
    std::vector<Piece> pieces;
    for (int id = 0; id < c.ndev; ++id) {
      const Group &gi = groups[(size_t)id];
      const int64_t rlo = chunk_lo(n, gi.me, gi.n) * es, bytes = chunk_lo(n, gi.me + 1, gi.n) * es - rlo;
      for (int to : c.partners[(size_t)id])
        if (bytes > 0)
          pieces.push_back({rank_of(c, id), to, is_local(c, id) ? c.slots[(size_t)id].reduced : nullptr,
                            to == rank_id() ? c.mirror.data() + c.region[(size_t)id] + rlo : nullptr, bytes});
    }
    move_pieces(kind, "reduced chunks", pieces);
  }
  c.barrier.arrive_and_wait();
  for (int j = 0; j < g.n && out; ++j) {  // the chunks of members on other ranks
    const int m = g.member[(size_t)j];
    const int64_t jlo = chunk_lo(n, j, g.n), jhi = chunk_lo(n, j + 1, g.n);
    if (!is_local(c, m) && jhi > jlo)
      std::memcpy((char *)out + jlo * es, c.mirror.data() + c.region[(size_t)m] + jlo * es, (size_t)((jhi - jlo) * es));
  }
  finish(dev, kind, moved, moved);
  if (!out) shm_free(mine);
}

void all_reduce(shm_device *dev, int32_t dtype, int32_t op, int kind, const char *what,
                const void *in, void *out, int64_t n, const int32_t *axes, int32_t naxes) {
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, 1, &n);
  const int64_t es = dtype_size(dtype);
  if (n < 0) fatalf("%s: negative element count", what);
  if (!ranked(dev)) publish(dev, in, out, n * es, kind, axes, naxes);
  // Chunk r of the flattened array is reduced by group member r (balanced split). A member
  // with no output (SHM_OUT_COLLECTIVE_ONLY: its result is not used) still reduces its chunk,
  // into scratch, for the others, and receives nothing.
  const int64_t lo = n * g.me / g.n, hi = n * (g.me + 1) / g.n;
  const int64_t moved = (int64_t)(g.n - 1) * (hi - lo) * es;
  std::vector<const void *> srcs((size_t)g.n);
  if (direct(dev)) {
    // Member r reduces chunk r of every member's input (MPI_Alltoallv brings them), in member
    // order as below, and the reduced chunks go to every member (MPI_Allgatherv).
    const std::vector<int64_t> key = comm_key(dev, axes, naxes);
    std::vector<int64_t> chunk((size_t)g.n), mine((size_t)g.n, (hi - lo) * es);
    for (int r = 0; r < g.n; ++r) chunk[(size_t)r] = (n * (r + 1) / g.n - n * r / g.n) * es;
    Scratch parts(g.n * (hi - lo) * es);
    group_alltoallv(g, key, in, chunk, parts.data(), mine);
    char *result = out ? (char *)out : (char *)shm_alloc(n * es);
    for (int j = 0; j < g.n; ++j) srcs[(size_t)j] = parts.data() + j * (hi - lo) * es;
    if (hi > lo) fold(dtype, op, g.n, srcs.data(), 0, result + lo * es, hi - lo);
    group_allgatherv(g, key, result, chunk);
    if (!out) shm_free(result);
    finish(dev, kind, moved, moved);
    return;
  }
  if (ranked(dev)) return all_reduce_ranked(dev, g, dtype, op, kind, in, out, n, axes, naxes);
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

// Product of shape[from..to).
int64_t prod(const int64_t *shape, int32_t from, int32_t to) {
  int64_t p = 1;
  for (int32_t d = from; d < to; ++d) p *= shape[d];
  return p;
}

void check_shape(int32_t rank, const int64_t *shape, const char *what) {
  check_rank(rank, what);
  for (int32_t d = 0; d < rank; ++d)
    if (shape[d] < 0) fatalf("%s: negative dimension", what);
}

} // namespace
} // namespace shm

using namespace shm;

extern "C" {

void shm_psum(shm_device *dev, int32_t dtype, const void *in, void *out, int64_t n,
              const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  all_reduce(dev, dtype, SHM_REDUCE_SUM, kPsum, "psum", in, out, n, axes, naxes);
  SHM_GUARD_END("psum")
}

void shm_pmax(shm_device *dev, int32_t dtype, const void *in, void *out, int64_t n,
              const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  all_reduce(dev, dtype, SHM_REDUCE_MAX, kPmax, "pmax", in, out, n, axes, naxes);
  SHM_GUARD_END("pmax")
}

void shm_pmin(shm_device *dev, int32_t dtype, const void *in, void *out, int64_t n,
              const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  all_reduce(dev, dtype, SHM_REDUCE_MIN, kPmin, "pmin", in, out, n, axes, naxes);
  SHM_GUARD_END("pmin")
}

void shm_pprod(shm_device *dev, int32_t dtype, const void *in, void *out, int64_t n,
               const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  all_reduce(dev, dtype, SHM_REDUCE_PROD, kPprod, "pprod", in, out, n, axes, naxes);
  SHM_GUARD_END("pprod")
}

void shm_pbitwise(shm_device *dev, int32_t op, int32_t dtype, const void *in, void *out, int64_t n,
                  const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  if (dtype != SHM_I32 && dtype != SHM_I64 && dtype != SHM_BOOL) fatalf("bitwise all-reduce of a float");
  switch (op) {
  case SHM_REDUCE_AND: all_reduce(dev, dtype, op, kPand, "pand", in, out, n, axes, naxes); break;
  case SHM_REDUCE_OR: all_reduce(dev, dtype, op, kPor, "por", in, out, n, axes, naxes); break;
  case SHM_REDUCE_XOR: all_reduce(dev, dtype, op, kPxor, "pxor", in, out, n, axes, naxes); break;
  default: fatalf("unknown bitwise op %d", (int)op);
  }
  SHM_GUARD_END("pbitwise")
}

// Untiled and tiled outputs have the same memory layout: viewed as [outer, n, inner] with
// outer = prod(in_shape[:axis]) and inner = prod(in_shape[axis:]), member j's input fills
// [:, j, :]. Each device pulls every member's input into its own output.
void shm_all_gather(shm_device *dev, int32_t dtype, const void *in, void *out, int32_t rank,
                    const int64_t *in_shape, int32_t axis, int32_t tiled, const int32_t *axes,
                    int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "all_gather";
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, rank, in_shape);
  check_shape(rank, in_shape, what);
  if (tiled ? (axis < 0 || axis >= rank) : (axis < 0 || axis > rank))
    fatalf("all_gather: axis %d out of range for rank %d (%s)", (int)axis, (int)rank,
           tiled ? "tiled" : "untiled");
  const int64_t es = dtype_size(dtype);
  const int64_t outer = prod(in_shape, 0, axis), inner = prod(in_shape, axis, rank) * es;
  publish(dev, in, out, outer * inner, kAllGather, axes, naxes);
  if (direct(dev) && outer == 1 && out) {  // gathered along the first axis: in place
    std::memcpy((char *)out + g.me * inner, in, (size_t)inner);
    group_allgatherv(g, comm_key(dev, axes, naxes), out, std::vector<int64_t>((size_t)g.n, inner));
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
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, rank, in_shape);
  check_shape(rank, in_shape, what);
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
  publish(dev, in, out, prod(in_shape, 0, rank) * es, kPsumScatter, axes, naxes, true, &read);
  if (direct(dev)) {
    // Member k gets [:, k, :] of every member's input (packed, MPI_Alltoallv) and folds them
    // in member order.
    const int64_t part = outer * blk * es;
    Scratch send(g.n * part), parts(g.n * part);
    for (int k = 0; k < g.n; ++k)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(send.data() + k * part + o * blk * es, (const char *)in + (o * g.n + k) * blk * es,
                    (size_t)(blk * es));
    const std::vector<int64_t> parts_bytes((size_t)g.n, part);
    group_alltoallv(g, comm_key(dev, axes, naxes), send.data(), parts_bytes, parts.data(), parts_bytes);
    std::vector<const void *> srcs((size_t)g.n);
    for (int j = 0; j < g.n; ++j) srcs[(size_t)j] = parts.data() + j * part;
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
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, rank, in_shape);
  check_shape(rank, in_shape, what);
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
  publish(dev, in, out, prod(in_shape, 0, rank) * es, kAllToAll, axes, naxes, true, &read);
  const int64_t block_elems = num_elements(brank, bshape);
  if (direct(dev)) {
    // The block for member k (the one k would pull: at k's offset) packed for MPI_Alltoallv;
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
    const std::vector<int64_t> parts_bytes((size_t)g.n, part);
    group_alltoallv(g, comm_key(dev, axes, naxes), send_in_place ? in : send.data(), parts_bytes,
                    receive_in_place ? out : parts.data(), parts_bytes);
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

void shm_ppermute(shm_device *dev, int32_t dtype, const void *in, void *out, int64_t n,
                  const int64_t *pairs, int32_t npairs, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "ppermute";
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, 1, &n);
  if (n < 0) fatalf("ppermute: negative element count");
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
  const int64_t bytes = n * dtype_size(dtype);
  // (member k reads the input of the member that sends to it)
  const ReadOf read = [&](int j, int k) {
    Read r;
    r.kind = Read::Nothing;
    for (int32_t p = 0; p < npairs; ++p)
      if (pairs[2 * p] == j && pairs[2 * p + 1] == k) r.kind = Read::Whole;
    return r;
  };
  publish(dev, in, out, bytes, kPpermute, axes, naxes, true, &read);
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

} // extern "C"

// ---- rooted collectives (issue 14): one member sends to all, or all to one ----------------

namespace {

void check_root(int32_t root, const Group &g, const char *what) {
  if (root < 0 || root >= g.n) fatalf("%s: root %d out of range for a group of %d devices", what, (int)root, g.n);
}

// gather_to / scatter_from: the array viewed as [outer, n, blk] along `axis`, block k member
// k's (gather: out's, untiled: a new axis of size n; scatter: in's, untiled: in_shape[axis] == n).
void blocks(const char *what, int32_t rank, const int64_t *shape, int32_t axis, int32_t tiled, int n, bool split,
            int64_t es, int64_t &outer, int64_t &blk) {
  check_shape(rank, shape, what);
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

void shm_broadcast(shm_device *dev, int32_t dtype, const void *in, void *out, int64_t n, int32_t root,
                   const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "broadcast";
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, 1, &n);
  check_root(root, g, what);
  if (n < 0) fatalf("broadcast: negative element count");
  const int64_t bytes = n * dtype_size(dtype);
  const ReadOf read = [&](int j, int) { return Read{j == root ? Read::Whole : Read::Nothing}; };
  publish(dev, in, out, bytes, kBroadcast, axes, naxes, true, &read);
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

void shm_reduce_to(shm_device *dev, int32_t op, int32_t dtype, const void *in, void *out, int64_t n, int32_t root,
                   const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  const char *what = "reduce";
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, 1, &n);
  check_root(root, g, what);
  if (n < 0) fatalf("reduce: negative element count");
  const int64_t bytes = n * dtype_size(dtype);
  const ReadOf read = [&](int, int k) { return Read{k == root ? Read::Whole : Read::Nothing}; };
  publish(dev, in, out, bytes, kReduce, axes, naxes, true, &read);
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
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, rank, in_shape);
  check_root(root, g, what);
  int64_t outer, blk;
  blocks(what, rank, in_shape, axis, tiled, g.n, false, dtype_size(dtype), outer, blk);
  const int64_t bytes = outer * blk;
  const ReadOf read = [&](int, int k) { return Read{k == root ? Read::Whole : Read::Nothing}; };
  publish(dev, in, out, bytes, kGather, axes, naxes, true, &read);
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
  Group g = group_of(dev, axes, naxes, what);
  note_operand(dev, dtype, rank, in_shape);
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
  publish(dev, in, out, prod(in_shape, 0, rank) * es, kScatter, axes, naxes, true, &read);
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

extern "C" {

int32_t shm_axis_index(shm_device *dev, const int32_t *axes, int32_t naxes) {
  SHM_GUARD_BEGIN
  return group_of(dev, axes, naxes, "axis_index").me;
  SHM_GUARD_END("axis_index")
  return 0;
}

} // extern "C"
