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

RankSet rank_set(const shm_device *dev, const Group &g, const int32_t *axes, int32_t naxes) {
  const MeshCall &c = *dev->call;
  RankSet set;
  for (int m : g.member) set.ranks.push_back(rank_of(c, m));
  std::sort(set.ranks.begin(), set.ranks.end());
  set.ranks.erase(std::unique(set.ranks.begin(), set.ranks.end()), set.ranks.end());
  // (unique among the groups of the mesh: its axes and its first member)
  set.tag = (int)(axis_bits(axes, naxes) * c.ndev + g.member[0]);
  return set;
}

std::vector<std::vector<int>> group_partners(MeshCall &c, const Group &g, int64_t bytes) {
  std::vector<std::vector<int>> partners((size_t)g.n);
  Slot &lead = c.slots[(size_t)g.lead];
  lead.region.assign((size_t)g.n, -1);
  int64_t used = 0;
  for (int j = 0; j < g.n; ++j) {
    const int id = g.member[(size_t)j];
    std::vector<int> &p = partners[(size_t)j];
    for (int m : g.member)
      if (rank_of(c, m) != rank_of(c, id)) p.push_back(rank_of(c, m));
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    if (!is_local(c, id)) {
      lead.region[(size_t)j] = used;
      used += bytes;
    }
  }
  if ((int64_t)lead.mirror.size() < used) lead.mirror.resize((size_t)used);
  return partners;
}

void move_pieces(int kind, const char *what, const std::vector<Piece> &pieces, const RankSet &among, const Group &g) {
  exchange_pieces(pieces, &among);
  if (!log_ranks()) return;
  int64_t sent = 0, received = 0;
  for (const Piece &p : pieces) {
    if (p.from == rank_id()) sent += p.bytes;
    if (p.to == rank_id()) received += p.bytes;
  }
  std::string members;
  for (int m : g.member) {
    if (!members.empty()) members += ',';
    members += std::to_string(m);
  }
  // (one line, one call: the rank's groups may log at the same time)
  std::fprintf(stderr, "shmap ranks: rank %d: %s, devices %s: %s: %lld bytes sent, %lld received\n", rank_id(),
               kind_name(kind), members.c_str(), what, (long long)sent, (long long)received);
}

namespace {

// Ranked mode, by the group's lead: what each member on another rank reads of a member's
// input goes to that rank, once: a whole input once per rank, a box once per member that reads
// it (exchange_pieces packs it), into the rank's copy of the input (copy_of), in which
// everything a local member reads is in its place. `read` null: every member reads all of
// every member's input (`bytes`).
void exchange_inputs(shm_device *dev, const Group &g, int kind, int64_t bytes, const RankSet &among,
                     const ReadOf *read) {
  MeshCall &c = *dev->call;
  group_partners(c, g, bytes);
  std::vector<Piece> pieces;
  for (int j = 0; j < g.n; ++j) {
    const int id = g.member[(size_t)j];
    const int from = rank_of(c, id);
    const char *in = is_local(c, id) ? (const char *)c.slots[(size_t)id].in : nullptr;
    char *copy = is_local(c, id) ? nullptr : copy_of(c, g, j);
    std::vector<bool> whole_to((size_t)rank_count(), false);
    for (int k = 0; k < g.n; ++k) {
      const int to = rank_of(c, g.member[(size_t)k]);
      if (to == from) continue;
      const Read r = read ? (*read)(j, k) : Read{};
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
  move_pieces(kind, "inputs", pieces, among, g);
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
// time the device waited for the others to arrive (publish's barrier) as a span inside it, and
// its source location where the caller gave one (the watchdog's note).
void trace_collective(shm_device *dev, int kind, int64_t sent, int64_t received) {
  const double t0 = dev->collective_start, waited = dev->collective_waited - t0;
  if (waited > 0) current_track()->events.push_back({"wait", "wait", t0, waited, {}});  // (a device's own track)
  const Whereabouts &w = dev->where;
  const char *loc = w.note[w.started.load(std::memory_order_relaxed) & 1].loc.load(std::memory_order_relaxed);
  std::string args = "\"axes\":\"" + dev->collective_axes + "\",\"operand\":\"" + dev->collective_operand +
                     "\",\"bytes_sent\":" + std::to_string(sent) +
                     ",\"bytes_received\":" + std::to_string(received) +
                     ",\"wait_us\":" + std::to_string(waited > 0 ? waited : 0.0);
  if (loc) {
    args += ",\"loc\":";
    args += trace_json_string(loc);
  }
  trace_span(kind_name(kind), "collective", t0, std::move(args));
}

} // namespace

Group begin_collective(shm_device *dev, const char *what, int32_t dtype, int32_t rank, const int64_t *shape,
                       const int32_t *axes, int32_t naxes) {
  Group g = group_of(dev, axes, naxes, what);
  if (ranked(dev)) {
    const MeshCall &c = *dev->call;
    int lead = -1;
    bool remote = false;
    for (int m : g.member) {
      if (!is_local(c, m)) remote = true;
      else if (lead < 0) lead = m;
    }
    if (remote) g.lead = lead;
  }
  check_shape(rank, shape, what);
  note_operand(dev, dtype, rank, shape);
  note_collective(dev, what, dtype, rank, shape, axes, naxes);
  dev->sync = &collective_barrier(dev, axes, naxes);
  return g;
}

void publish(shm_device *dev, const Group &g, const void *in, void *out, int64_t bytes, int kind,
             const int32_t *axes, int32_t naxes, bool exchange, const ReadOf *read) {
  MeshCall &c = *dev->call;
  Slot &slot = c.slots[(size_t)dev->id];
  slot.in = in;
  slot.out = out;
  dev->sync->arrive_and_wait(dev);
  if (g_tracing || g_stats_wait) dev->collective_waited = trace_now();  // (every member here has arrived)
  if (direct(dev)) {
    if (checking_collectives())
      check_collective(CollectiveSig{kind, bytes, axis_bits(axes, naxes)}, g, comm_key(dev, axes, naxes));
    return;
  }
  if (g.lead != dev->id) {  // (a member that is not its group's lead on this rank waits for it)
    if (g.lead >= 0 && exchange) dev->sync->arrive_and_wait(dev);
    return;
  }
  // (the group's lead, in ranked mode: the group's ranks compare, then the inputs move)
  const RankSet among = rank_set(dev, g, axes, naxes);
  if (checking_collectives()) check_collective(CollectiveSig{kind, bytes, axis_bits(axes, naxes)}, among);
  if (!exchange) return;
  exchange_inputs(dev, g, kind, bytes, among, read);
  dev->sync->arrive_and_wait(dev);
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
