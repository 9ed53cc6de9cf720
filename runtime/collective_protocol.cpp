// The protocol every collective follows (collective_protocol.h): publishing, the ranked
// mode's exchange of inputs between MPI ranks, and finishing (statistics, trace).
#include "collective_protocol.h"
#include "sync.h"
#include "trace.h"

#include <algorithm>
#include <cstdio>

namespace shm {
namespace {

int64_t axis_bits(const int32_t *axes, int32_t naxes) {
  int64_t bits = 0;
  for (int32_t k = 0; k < naxes; ++k) bits |= int64_t(1) << axes[k];
  return bits;
}

} // namespace

std::vector<int64_t> comm_key(const shm_device *dev, const int32_t *axes, int32_t naxes) {
  const MeshCall &c = *dev->call;
  std::vector<int64_t> key(c.sizes, c.sizes + c.mesh_rank);
  key.push_back(-1);
  key.insert(key.end(), axes, axes + naxes);
  return key;
}

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

void read_remote_from_mirror(MeshCall &c) {
  for (int id = 0; id < c.ndev; ++id)
    if (c.region[(size_t)id] >= 0) c.slots[(size_t)id].in = c.mirror.data() + c.region[(size_t)id];
}

namespace {

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

// --trace: the operand of the collective in progress, as its span shows it ("f32[2,5]").
void note_operand(shm_device *dev, int32_t dtype, int32_t rank, const int64_t *shape) {
  if (!g_tracing) return;
  std::string &s = dev->collective_operand;
  s = std::string(dtype_name(dtype)) + "[";
  for (int32_t d = 0; d < rank && shape; ++d) {
    if (d) s += ',';
    s += std::to_string(shape[d]);
  }
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

} // namespace

Group begin_collective(shm_device *dev, const char *what, int32_t dtype, int32_t rank, const int64_t *shape,
                       const int32_t *axes, int32_t naxes) {
  Group g = group_of(dev, axes, naxes, what);
  check_shape(rank, shape, what);
  note_operand(dev, dtype, rank, shape);
  note_collective(dev, what, dtype, rank, shape, axes, naxes);
  dev->sync = &collective_barrier(dev, axes, naxes);
  return g;
}

namespace {

std::string signature_text(const MeshCall &c, const int64_t *sig) {
  std::string s;
  if (sig[0] < 0) {
    s = "has returned from its shmap body (after ";
    s += std::to_string(sig[2]);
    s += sig[2] == 1 ? " collective)" : " collectives)";
    return s;
  }
  s = "runs ";
  s += kind_name((int)sig[0]);
  s += " over ";
  bool first = true;
  for (int32_t a = 0; a < c.mesh_rank; ++a)
    if (sig[1] >> a & 1) {
      s += first ? "\"" : ",\"";
      s += c.axis_names ? c.axis_names[a] : "?";
      s += '"';
      first = false;
    }
  s += " (its collective #";
  s += std::to_string(sig[2]);
  s += ')';
  return s;
}

} // namespace

void check_rank_in_step(shm_device *dev) {
  const MeshCall &c = *dev->call;
  const int64_t *mine = c.slots[(size_t)dev->id].sig;
  for (int id = c.first; id < c.first + c.nlocal; ++id) {
    const int64_t *other = c.slots[(size_t)id].sig;
    if (other[0] == mine[0] && other[1] == mine[1]) continue;
    const int lo = std::min(id, dev->id), hi = std::max(id, dev->id);
    fatalf("with several devices per rank, the devices of a rank run every collective together, but on this rank %s "
           "%s while %s %s: their groups run different collectives (a loop or branch that differs between the "
           "groups); run it with one device per rank (mpirun -np %d) or in one process",
           device_name(c, lo).c_str(), signature_text(c, c.slots[(size_t)lo].sig).c_str(), device_name(c, hi).c_str(),
           signature_text(c, c.slots[(size_t)hi].sig).c_str(), c.ndev);
  }
}

void end_of_body(shm_device *dev) {
  note_body_finished(dev);
  if (!ranked(dev)) return;
  // (the rank's devices meet once more: one whose body ended early is named, not waited for)
  int64_t *sig = dev->call->slots[(size_t)dev->id].sig;
  sig[0] = -1, sig[1] = 0, sig[2] = dev->where.started.load(std::memory_order_relaxed);
  dev->call->barrier.arrive_and_wait(dev);
  check_rank_in_step(dev);
}

void publish(shm_device *dev, const void *in, void *out, int64_t bytes, int kind, const int32_t *axes,
             int32_t naxes, bool exchange, const ReadOf *read) {
  MeshCall &c = *dev->call;
  Slot &slot = c.slots[(size_t)dev->id];
  slot.in = in;
  slot.out = out;
  if (c.nlocal < c.ndev && !direct(dev))
    slot.sig[0] = kind, slot.sig[1] = axis_bits(axes, naxes), slot.sig[2] = dev->where.started.load(std::memory_order_relaxed);
  dev->sync->arrive_and_wait(dev);
  if (g_tracing || g_stats_wait) dev->collective_waited = trace_now();  // (every member has arrived)
  if (c.nlocal < c.ndev) {
    CollectiveSig sig{kind, bytes, axis_bits(axes, naxes)};
    if (direct(dev)) {
      if (!checking_collectives()) return;
      const Group g = group_at(c, dev->coords, axes, naxes);
      const std::vector<int64_t> key = comm_key(dev, axes, naxes);
      return check_collective(sig, &g, &key);
    }
    check_rank_in_step(dev);
    // (a collective whose groups all lie within ranks moves nothing between them, and the
    // ranks need not be at the same one)
    if (dev->id == c.first && axes_sync(c, axes, naxes).spans_ranks) check_collective(sig);
    if (!exchange) return;
    if (dev->id == c.first) exchange_inputs(c, kind, bytes, axes, naxes, read);
    c.barrier.arrive_and_wait(dev);
  }
}

void finish(shm_device *dev, int kind, int64_t sent, int64_t received) {
  StatsRow &r = dev->stats.rows[kind];
  if (dev->id == 0) r.calls += 1; // once per collective, not per device
  r.bytes_sent += sent;
  r.bytes_received += received;
  if (g_stats_wait) r.wait_ns += (int64_t)((dev->collective_waited - dev->collective_start) * 1e3);
  dev->sync->arrive_and_wait(dev);
  note_collective_done(dev);
  if (g_tracing) trace_collective(dev, kind, sent, received);
}

// Product of shape[from..to).
int64_t prod(const int64_t *shape, int32_t from, int32_t to) {
  int64_t p = 1;
  for (int32_t d = from; d < to; ++d) p *= shape[d];
  return p;
}

} // namespace shm
