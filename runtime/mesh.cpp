// shm_run_shmap: splits global inputs into per-device blocks, runs the body on one thread per
// device, assembles the global outputs. Also the barrier and the group computation the
// collectives use.
#include "array_plan.h"
#include "collective_protocol.h"
#include "device.h"
#include "pool.h"
#include "trace.h"
#include "ranks.h"
#include "sync.h"
#include "shmap_runtime.h"
#include "util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

namespace shm {

void require_device(const shm_device *dev, const char *what) {
  if (!dev) fatalf("%s: collective outside a shmap", what);
}

Group group_of(const shm_device *dev, const int32_t *axes, int32_t naxes, const char *what) {
  require_device(dev, what);
  if (g_tracing || g_stats_wait) {  // (every collective starts here: its span and its wait start now)
    shm_device *d = const_cast<shm_device *>(dev);
    d->collective_start = d->collective_waited = trace_now();
    d->collective_axes.clear();
    for (int32_t k = 0; k < naxes && axes; ++k)
      if (axes[k] >= 0 && axes[k] < dev->call->mesh_rank) {
        if (k) d->collective_axes += ',';
        d->collective_axes += dev->call->axis_names ? dev->call->axis_names[axes[k]] : "?";
      }
  }
  const MeshCall &c = *dev->call;
  if (naxes < 0 || naxes > c.mesh_rank || (naxes > 0 && !axes))
    fatalf("%s: invalid axis list (%d axes on a mesh of rank %d)", what, (int)naxes,
           (int)c.mesh_rank);
  bool used[kMaxMeshRank] = {false};
  for (int32_t k = 0; k < naxes; ++k) {
    int32_t a = axes[k];
    if (a < 0 || a >= c.mesh_rank) fatalf("%s: mesh axis index %d out of range", what, (int)a);
    if (used[a]) fatalf("%s: mesh axis '%s' listed twice", what, c.axis_names ? c.axis_names[a] : "?");
    used[a] = true;
  }
  return group_at(c, dev->coords, axes, naxes);
}

Group group_at(const MeshCall &c, const int64_t *at, const int32_t *axes, int32_t naxes) {
  Group g;
  g.n = 1;
  g.me = 0;
  for (int32_t k = 0; k < naxes; ++k) {
    g.me = g.me * (int)c.sizes[axes[k]] + (int)at[axes[k]];
    g.n *= (int)c.sizes[axes[k]];
  }
  g.member.resize((size_t)g.n);
  int64_t coords[kMaxMeshRank];
  for (int32_t a = 0; a < c.mesh_rank; ++a) coords[a] = at[a];
  for (int j = 0; j < g.n; ++j) {
    // Decode j row-major over the listed axes (last listed fastest).
    int rest = j;
    for (int32_t k = naxes - 1; k >= 0; --k) {
      coords[axes[k]] = rest % c.sizes[axes[k]];
      rest /= (int)c.sizes[axes[k]];
    }
    int64_t id = 0;
    for (int32_t a = 0; a < c.mesh_rank; ++a) id = id * c.sizes[a] + coords[a];
    g.member[(size_t)j] = (int)id;
  }
  return g;
}

bool log_ranks() {
  static const bool on = (rank_count() > 1 || rank_prefix()[0]) && std::getenv("SHMAP_LOG_RANKS") &&
                         std::strcmp(std::getenv("SHMAP_LOG_RANKS"), "1") == 0;
  return on;
}

void coords_of(const MeshCall &c, int64_t id, int64_t *coords) {
  for (int32_t a = c.mesh_rank - 1; a >= 0; --a) {
    coords[a] = id % c.sizes[a];
    id /= c.sizes[a];
  }
}

std::string device_name(const MeshCall &c, int id) {
  int64_t coords[kMaxMeshRank];
  coords_of(c, id, coords);
  std::string s = "device ";
  s += std::to_string(id);
  s += " (";
  for (int32_t a = 0; a < c.mesh_rank; ++a) {
    if (a) s += ',';
    s += c.axis_names ? c.axis_names[a] : "?";
    s += '=';
    s += std::to_string(coords[a]);
  }
  s += ')';
  return s;
}

// The layouts of shmap operands (array_plan.h).
ArrayPlan plan_array(const MeshCall &c, const shm_array_desc &d, const char *kind, int index) {
  ArrayPlan p;
  check_rank(d.rank, "shmap argument");
  p.rank = d.rank;
  p.dtype = d.dtype;
  p.esize = dtype_size(d.dtype);
  for (int a = 0; a < kMaxMeshRank; ++a) p.mentioned[a] = false;
  if (d.rank > 0 && (!d.shape || !d.spec)) fatalf("shmap %s %d: missing shape or spec", kind, index);
  int pos = 0;
  for (int32_t dim = 0; dim < d.rank; ++dim) {
    int32_t k = d.spec[pos++];
    if (k < 0 || k > c.mesh_rank)
      fatalf("shmap %s %d: bad partition spec (dimension %d names %d axes)", kind, index, (int)dim, (int)k);
    p.naxes[dim] = k;
    int64_t parts = 1;
    for (int32_t j = 0; j < k; ++j) {
      int32_t a = d.spec[pos++];
      if (a < 0 || a >= c.mesh_rank)
        fatalf("shmap %s %d: partition spec names mesh axis index %d, out of range", kind, index, (int)a);
      if (p.mentioned[a])
        fatalf("shmap %s %d: partition spec names mesh axis '%s' twice", kind, index, c.axis_names ? c.axis_names[a] : "?");
      p.mentioned[a] = true;
      p.axes[dim][j] = a;
      parts *= c.sizes[a];
    }
    int64_t g = d.shape[dim];
    if (g < 0) fatalf("shmap %s %d: negative dimension", kind, index);
    if (g % parts != 0)
      fatalf("shmap %s %d: dimension %d of size %lld is not divisible by %lld (the mesh axes it is split over)",
             kind, index, (int)dim, (long long)g, (long long)parts);
    p.gshape[dim] = g;
    p.bshape[dim] = g / parts;
    if (parts != 1) p.whole = false;
  }
  row_major_strides(p.rank, p.gshape, p.gstrides);
  row_major_strides(p.rank, p.bshape, p.bstrides);
  // A block is contiguous in the global array when, after its first dimension longer than 1,
  // it spans every dimension whole (P("x") on the rows of a matrix, say).
  bool seen_long = false;
  for (int32_t dim = 0; dim < p.rank; ++dim) {
    if (seen_long && p.bshape[dim] != p.gshape[dim]) p.contiguous = false;
    if (p.bshape[dim] > 1) seen_long = true;
  }
  p.block_bytes = num_elements(p.rank, p.bshape) * p.esize;
  p.collective_only = (d.flags & SHM_OUT_COLLECTIVE_ONLY) != 0;
  p.same_elsewhere = (d.flags & SHM_OUT_SAME_ELSEWHERE) != 0;
  p.stays_split = (d.flags & SHM_OUT_STAYS_SPLIT) != 0;
  p.blocks = (d.flags & SHM_BLOCKS) != 0;
  p.over_input = (d.flags & SHM_OUT_OVER_INPUT) != 0;
  if (p.blocks) plan_slots(p, c);
  return p;
}

void plan_slots(ArrayPlan &p, const MeshCall &c) {
  p.slot_offset.clear();
  p.slot_device.clear();
  p.slot_of.assign((size_t)c.nlocal, 0);
  int64_t coords[kMaxMeshRank];
  for (int64_t id = c.first; id < c.first + c.nlocal; ++id) {
    coords_of(c, id, coords);
    const int64_t off = block_offset(p, c, coords);
    size_t s = 0;
    while (s < p.slot_offset.size() && p.slot_offset[s] != off) ++s;
    if (s == p.slot_offset.size()) {
      p.slot_offset.push_back(off);
      p.slot_device.push_back((int)id);
    }
    p.slot_of[(size_t)(id - c.first)] = (int)s;
  }
}

// Where a device's block starts in each dimension of the global array.
void block_start(const ArrayPlan &p, const MeshCall &c, const int64_t *coords, int64_t *start) {
  for (int32_t dim = 0; dim < p.rank; ++dim) {
    int64_t b = 0;
    for (int j = 0; j < p.naxes[dim]; ++j) b = b * c.sizes[p.axes[dim][j]] + coords[p.axes[dim][j]];
    start[dim] = b * p.bshape[dim];
  }
}

// Element offset of a device's block inside the global array.
int64_t block_offset(const ArrayPlan &p, const MeshCall &c, const int64_t *coords) {
  int64_t start[kMaxRank], off = 0;
  block_start(p, c, coords, start);
  for (int32_t dim = 0; dim < p.rank; ++dim) off += start[dim] * p.gstrides[dim];
  return off;
}

// The device that provides an output's block: coordinate 0 on every axis the spec leaves out.
bool is_writer(const ArrayPlan &p, const MeshCall &c, const int64_t *coords) {
  for (int32_t a = 0; a < c.mesh_rank; ++a)
    if (!p.mentioned[a] && coords[a] != 0) return false;
  return true;
}

namespace {

// Under MPI, a block the same on every device along the unmentioned axes (SHM_OUT_SAME_ELSEWHERE)
// is written on each rank that has one of those devices, by the first of them: the rank then
// needs no copy of it from the writer's rank. Otherwise the writer above.
bool writes_block(const ArrayPlan &p, const MeshCall &c, const shm_device &dev) {
  if (!p.same_elsewhere || c.nlocal == c.ndev) return is_writer(p, c, dev.coords);
  const int64_t mine = block_offset(p, c, dev.coords);
  int64_t coords[kMaxMeshRank];
  for (int64_t id = c.first; id < dev.id; ++id) {
    coords_of(c, id, coords);
    if (block_offset(p, c, coords) == mine) return false;
  }
  return true;
}

// Whether this rank's devices hold every block of a SHM_OUT_SAME_ELSEWHERE output (a
// replicated one, say), so the ranks need not exchange it.
bool all_blocks_local(const ArrayPlan &p, const MeshCall &c) {
  if (!p.same_elsewhere) return false;
  int64_t blocks = 1;
  for (int32_t a = 0; a < c.mesh_rank; ++a)
    if (p.mentioned[a]) blocks *= c.sizes[a];
  std::vector<int64_t> offsets;
  int64_t coords[kMaxMeshRank];
  for (int64_t id = c.first; id < c.first + c.nlocal; ++id) {
    coords_of(c, id, coords);
    offsets.push_back(block_offset(p, c, coords));
  }
  std::sort(offsets.begin(), offsets.end());
  return (int64_t)(std::unique(offsets.begin(), offsets.end()) - offsets.begin()) == blocks;
}

// A device's buffers are not its caller's host memory (--stats=pipeline counts a stage
// program's): device 0 runs on the calling thread, the others on threads of their own.
struct DeviceMemory {
  HostMemory *host = t_host_memory;
  DeviceMemory() { t_host_memory = nullptr; }
  ~DeviceMemory() { t_host_memory = host; }
};

// Whether device `dev` provides output `p`'s block: the first local device holding its slot in
// the blocks form, else the writer (writes_block).
bool provides_block(const ArrayPlan &p, const MeshCall &c, const shm_device &dev) {
  if (p.blocks) return p.slot_device[(size_t)p.slot_of[(size_t)(dev.id - c.first)]] == dev.id;
  return writes_block(p, c, dev);
}

// Copies a device's output block, computed apart from the output's buffer, into its place
// there if the device provides it, and frees it.
void put_output_block(const MeshCall &c, const shm_device &dev, const ArrayPlan &p, void *out, void *block) {
  if (provides_block(p, c, dev)) {
    if (p.blocks) {
      std::memcpy((char *)out + (int64_t)p.slot_of[(size_t)(dev.id - c.first)] * p.block_bytes, block,
                  (size_t)p.block_bytes);
    } else {
      char *dst = (char *)out + block_offset(p, c, dev.coords) * p.esize;
      copy_strided(p.esize, p.rank, p.bshape, block, p.bstrides, dst, p.gstrides);
    }
  }
  shm_free(block);
}

// Runs one device's body. Its blocks of outputs written over an input (SHM_OUT_OVER_INPUT) are
// left in `held` (one entry per output, null for the others), for put_output_block once every
// local device has finished reading its inputs.
void run_device(MeshCall &c, shm_device &dev, shm_fn body, const std::vector<ArrayPlan> &inp,
                void **ins, const std::vector<ArrayPlan> &outp, void **outs, std::vector<void *> &held) {
  DeviceMemory apart;
  std::vector<void *> bin(inp.size() + 1), bout(outp.size() + 1);
  std::vector<bool> in_owned(inp.size()), out_direct(outp.size());
  const size_t local = (size_t)(dev.id - c.first);
  for (size_t i = 0; i < inp.size(); ++i) {
    const ArrayPlan &p = inp[i];
    if (p.blocks) {  // the device's slot, read in place
      bin[i] = (char *)ins[i] + (int64_t)p.slot_of[local] * p.block_bytes;
      in_owned[i] = false;
      continue;
    }
    if (p.whole) {
      // Replicated input: every device reads the caller's buffer (bodies never write inputs),
      // which saves a copy per device.
      bin[i] = ins[i];
      in_owned[i] = false;
      continue;
    }
    const char *src = (const char *)ins[i] + block_offset(p, c, dev.coords) * p.esize;
    if (p.contiguous) {  // read in place, as a replicated input is
      bin[i] = const_cast<char *>(src);
      in_owned[i] = false;
      continue;
    }
    bin[i] = shm_alloc(p.block_bytes);
    in_owned[i] = true;
    copy_strided(p.esize, p.rank, p.bshape, src, p.gstrides, bin[i], p.bstrides);
  }
  for (size_t i = 0; i < outp.size(); ++i) {
    const ArrayPlan &p = outp[i];
    const bool provider = provides_block(p, c, dev);
    // The first local device holding a slot of the blocks form writes it in place; so does the
    // writer of a block that is one run of the global array (all of it, for an unsplit
    // output): the blocks of different writers are disjoint. Not over an input, which another
    // device may still read.
    out_direct[i] = provider && !p.over_input && (p.blocks || p.contiguous);
    if (out_direct[i])
      bout[i] = (char *)outs[i] + (p.blocks ? (int64_t)p.slot_of[local] * p.block_bytes
                                            : block_offset(p, c, dev.coords) * p.esize);
    else if (p.collective_only && !provider)
      bout[i] = nullptr;  // the collective skips this device (SHM_OUT_COLLECTIVE_ONLY)
    else
      bout[i] = shm_alloc(p.block_bytes);
  }
  if (g_tracing) {
    // (the thread's own track afterwards: device 0 runs on the calling thread, which may be a
    // pipeline group's stage program recording on its group's track)
    TraceTrack *was = thread_track();
    set_current_track(&dev.trace);
    const double t0 = trace_now();
    body(&dev, bout.data(), bin.data());
    trace_span("shmap body", "shmap", t0);
    set_current_track(was);
  } else {
    body(&dev, bout.data(), bin.data());
  }
  note_body_finished(&dev);  // (for the watchdog)
  held.assign(outp.size(), nullptr);
  for (size_t i = 0; i < outp.size(); ++i) {
    const ArrayPlan &p = outp[i];
    if (out_direct[i] || !bout[i]) continue;
    if (p.over_input) held[i] = bout[i];
    else put_output_block(c, dev, p, outs[i], bout[i]);
  }
  for (size_t i = 0; i < inp.size(); ++i)
    if (in_owned[i]) shm_free(bin[i]);
}

// Under MPI (ranks.h) each rank's devices wrote only their blocks of an output into the rank's
// copy of the global array, for host code that reads it whole on every rank: each block goes
// from its writer's rank to each rank without it (exchange_pieces). A rank holds a block its
// writer is on, and, for an output the same along the axes its spec leaves out, any block of
// its devices (writes_block). Returns the bytes this rank received.
int64_t share_output(const MeshCall &c, const ArrayPlan &p, void *out) {
  if (p.block_bytes == 0) return 0;
  const int ranks = rank_count(), me = rank_id();
  std::map<int64_t, std::vector<bool>> held;  // by block offset: the ranks holding it
  std::vector<std::pair<int64_t, int64_t>> writers;  // (device, block offset), in device order
  int64_t coords[kMaxMeshRank];
  for (int64_t id = 0; id < c.ndev; ++id) {
    coords_of(c, id, coords);
    const int64_t off = block_offset(p, c, coords);
    std::vector<bool> &h = held[off];
    h.resize((size_t)ranks, false);
    const bool writer = is_writer(p, c, coords);
    if (writer) writers.push_back({id, off});
    if (writer || p.same_elsewhere) h[(size_t)(id / c.nlocal)] = true;  // (every rank runs nlocal devices)
  }
  std::vector<Piece> pieces;  // (each block where it is in the array, on both ends)
  for (const auto &[id, off] : writers) {
    const int from = (int)(id / c.nlocal);
    char *at = (char *)out + off * p.esize;
    for (int to = 0; to < ranks; ++to)
      if (!held[off][(size_t)to])
        pieces.push_back(Piece::box(from, to, from == me ? at : nullptr, to == me ? at : nullptr, p.esize, p.rank,
                                    p.bshape, p.gstrides));
  }
  exchange_pieces(pieces);
  int64_t received = 0;
  for (const Piece &piece : pieces)
    if (piece.to == me) received += piece.bytes;
  return received;
}

} // namespace

// The devices of a mesh this process runs (all of them, or under MPI the rank's share).
std::unique_ptr<MeshCall> local_call(int32_t mesh_rank, const int64_t *mesh_sizes, const char *what) {
  if (mesh_rank < 0 || mesh_rank > kMaxMeshRank)
    fatalf("%s: mesh rank %d is out of the supported range 0..%d", what, (int)mesh_rank, kMaxMeshRank);
  int64_t ndev = 1;
  for (int32_t a = 0; a < mesh_rank; ++a) {
    if (mesh_sizes[a] < 1) fatalf("%s: mesh axis %d has size %lld", what, (int)a, (long long)mesh_sizes[a]);
    ndev *= mesh_sizes[a];
    if (ndev > SHM_MAX_DEVICES) fatalf("%s: more than %d devices", what, SHM_MAX_DEVICES);
  }
  int first = 0, nlocal = 0;
  local_devices(ndev, &first, &nlocal);
  auto call = std::make_unique<MeshCall>((int)ndev, first, nlocal);
  call->mesh_rank = mesh_rank;
  for (int32_t a = 0; a < mesh_rank; ++a) call->sizes[a] = mesh_sizes[a];
  return call;
}

} // namespace shm

using namespace shm;

extern "C" void shm_load_npy_split(const char *path, const char *key, int32_t dtype, int32_t rank,
                                   const int64_t *shape, int32_t mesh_rank, const int64_t *mesh_sizes,
                                   const int32_t *spec, void *out) {
  SHM_GUARD_BEGIN
  const std::unique_ptr<MeshCall> local = local_call(mesh_rank, mesh_sizes, "load");
  const MeshCall &call = *local;
  const shm_array_desc d{rank, shape, dtype, spec, 0};
  const ArrayPlan p = plan_array(call, d, "load of", 0);
  if (call.nlocal == call.ndev || p.whole) {
    if (key) shm_load_npz(path, key, dtype, rank, shape, out);
    else shm_load_npy(path, dtype, rank, shape, out);
    return;
  }
  // The distinct blocks of the rank's devices, each read into its place.
  std::vector<int64_t> read;
  int64_t coords[kMaxMeshRank], start[kMaxRank];
  for (int64_t id = call.first; id < call.first + call.nlocal; ++id) {
    coords_of(call, id, coords);
    const int64_t off = block_offset(p, call, coords);
    if (std::find(read.begin(), read.end(), off) != read.end()) continue;
    read.push_back(off);
    block_start(p, call, coords, start);
    char *dst = (char *)out + off * p.esize;
    if (p.contiguous) {
      shm_load_npy_block(path, key, dtype, rank, shape, start, p.bshape, dst);
      continue;
    }
    void *block = shm_alloc(p.block_bytes);
    shm_load_npy_block(path, key, dtype, rank, shape, start, p.bshape, block);
    copy_strided(p.esize, p.rank, p.bshape, block, p.bstrides, dst, p.gstrides);
    shm_free(block);
  }
  if (log_ranks())
    std::fprintf(stderr, "shmap ranks: rank %d: load %s%s%s: %lld of %lld bytes (%zu blocks)\n", rank_id(), path,
                 key ? " key " : "", key ? key : "", (long long)(p.block_bytes * (int64_t)read.size()),
                 (long long)(num_elements(p.rank, p.gshape) * p.esize), read.size());
  SHM_GUARD_END("load")
}

extern "C" void shm_run_shmap(int32_t mesh_rank, const int64_t *mesh_sizes,
                              const char *const *axis_names, shm_fn body, int32_t nin, void **ins,
                              const shm_array_desc *in_descs, int32_t nout, void **outs,
                              const shm_array_desc *out_descs) {
  SHM_GUARD_BEGIN
  if (on_device_thread()) fatalf("shm_run_shmap: a shmap may not run inside a shmap body");
  if (!body) fatalf("shm_run_shmap: no body");
  if (nin < 0 || nout < 0) fatalf("shm_run_shmap: negative argument count");
  // (a bad SHMAP_COLLECTIVE_TIMEOUT that runtime_main did not see is refused here, on the host,
  // not by a waiting device)
  collective_timeout();
  const std::unique_ptr<MeshCall> local = local_call(mesh_rank, mesh_sizes, "shm_run_shmap");
  MeshCall &call = *local;
  call.axis_names = axis_names;
  const int first = call.first, nlocal = call.nlocal;
  const int64_t ndev = call.ndev;

  const double t0 = g_tracing ? trace_now() : 0;
  std::vector<ArrayPlan> inp, outp;
  for (int32_t i = 0; i < nin; ++i) inp.push_back(plan_array(call, in_descs[i], "input", i));
  for (int32_t i = 0; i < nout; ++i) outp.push_back(plan_array(call, out_descs[i], "output", i));

  std::vector<shm_device> devs((size_t)nlocal);
  for (int64_t id = first; id < first + nlocal; ++id) {
    shm_device &d = devs[(size_t)(id - first)];
    d.call = &call;
    d.id = (int)id;
    coords_of(call, id, d.coords);
  }
  watch_devices(devs.data(), nlocal);
  std::vector<std::vector<void *>> held((size_t)nlocal);
  run_on_threads(nlocal, [&](int i) {
    SHM_GUARD_BEGIN
    run_device(call, devs[(size_t)i], body, inp, ins, outp, outs, held[(size_t)i]);
    SHM_GUARD_END("shmap device thread")
  });
  watch_devices(nullptr, 0);
  // Every local device has finished its body: the outputs written over inputs go in now.
  if (std::any_of(outp.begin(), outp.end(), [](const ArrayPlan &p) { return p.over_input; }))
    run_on_threads(nlocal, [&](int i) {
      SHM_GUARD_BEGIN
      DeviceMemory apart;
      for (size_t k = 0; k < outp.size(); ++k)
        if (held[(size_t)i][k]) put_output_block(call, devs[(size_t)i], outp[k], outs[k], held[(size_t)i][k]);
      SHM_GUARD_END("shmap device thread")
    });
  // The threads have finished (run_on_threads synchronises with them): merge their counters.
  for (const shm_device &d : devs) stats_merge(d.stats);
  if (g_tracing) {
    // (appended piece by piece: GCC 12 warns, wrongly, about `"text" + std::string` at -O3)
    auto axis_is = [&](std::string &s, int32_t a, int64_t v) {
      if (a) s += ',';
      s += axis_names ? axis_names[a] : "?";
      s += '=';
      s += std::to_string(v);
    };
    std::string mesh;  // "x=2,y=4"
    for (int32_t a = 0; a < mesh_rank; ++a) axis_is(mesh, a, mesh_sizes[a]);
    // (a pipeline group's devices, on its stage submesh, have tracks of their own:
    // "group 1 device 2 (data=1,model=0)")
    const int group = pipeline_group();
    for (shm_device &d : devs) {
      std::string label = (group >= 0 ? "group " + std::to_string(group) + " " : std::string()) + "device " +
                          std::to_string(d.id) + " (";  // "device 5 (x=1,y=1)"
      for (int32_t a = 0; a < mesh_rank; ++a) axis_is(label, a, d.coords[a]);
      trace_merge_device(d.id + (group + 1) * kGroupDeviceTracks, label + ")", d.trace);
    }
    trace_span("shmap", "shmap", t0, "\"mesh\":\"" + mesh + "\",\"devices\":" + std::to_string(ndev));
  }
  if (nlocal < ndev) {
    int64_t split = 0, shared = 0, received = 0;
    for (size_t i = 0; i < outp.size(); ++i) {
      if (outp[i].blocks) {
        ++split;
        continue;
      }
      if (all_blocks_local(outp[i], call)) continue;
      if (outp[i].stays_split) {
        ++split;
        continue;
      }
      ++shared;
      received += share_output(call, outp[i], outs[i]);
    }
    if (log_ranks())
      std::fprintf(stderr,
                   "shmap ranks: rank %d: a shmap's %zu outputs: %lld whole here, %lld stay split, %lld shared "
                   "(%lld bytes received)\n",
                   rank_id(), outp.size(), (long long)((int64_t)outp.size() - split - shared), (long long)split,
                   (long long)shared, (long long)received);
  }
  SHM_GUARD_END("shm_run_shmap")
}
