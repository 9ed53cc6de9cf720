// Device threads and the state they share during one shm_run_shmap call (private header).
#ifndef SHMAP_RUNTIME_DEVICE_H
#define SHMAP_RUNTIME_DEVICE_H
#include "shmap_limits.h"
#include "shmap_runtime.h"
#include "stats.h"
#include "trace.h"
#include "util.h"

#include <atomic>
#include <memory>
#include <string>
#include <cstdint>
#include <vector>

namespace shm {

constexpr int kMaxMeshRank = SHM_MAX_MESH_AXES;

// A reusable barrier for the devices of one group that this process runs.
// Sense is carried by a generation counter: the last thread to arrive resets the count and
// bumps the generation; the others wait for the generation to change. Waiting spins briefly
// (a barrier often completes within a few microseconds) and then sleeps on a futex, because
// the mesh usually has more devices than the machine has cores and spinning would steal their
// time. A sleeper wakes at least every 100 ms to see whether the run is being stopped (a
// device failed: sync.h) or whether it has waited past the collective timeout (the watchdog).
// The acq_rel/release/acquire orderings make everything a device wrote before arriving visible
// to every device after it leaves, which is what the collectives rely on.
class Barrier {
public:
  explicit Barrier(int n) : n_(n) {}
  // `dev`: the device arriving, named in the watchdog's report (null outside a collective).
  void arrive_and_wait(shm_device *dev = nullptr);

private:
  void sleep_until_changed(uint32_t g, shm_device *dev);

  const int n_;
  alignas(64) std::atomic<int> count_{0};
  alignas(64) std::atomic<uint32_t> gen_{0};
  std::atomic<int> sleepers_{0};  // in the futex: the last arriver wakes them only if any
};

// The barriers of one set of mesh axes: one per group over them that has a device here.
struct AxesSync {
  std::vector<std::unique_ptr<Barrier>> barriers;
  std::vector<Barrier *> of;  // by local device (id - first): the barrier of its group
};

// Where a device publishes its buffers for the collective in progress.
struct alignas(64) Slot {
  const void *in = nullptr;
  void *out = nullptr;
  const void *reduced = nullptr;  // an all-reduce over several ranks: this member's reduced chunk
  // The ranked MPI mode, when this device leads its group on its rank (Group::lead): what the
  // rank received of the group's remote members' data, and where member j's is in it (-1: a
  // local member). Kept in the leader's slot, not in the remote devices' own, because the
  // rank's devices of other groups may at the same time be in collectives with those remote
  // devices too (collective_protocol.h).
  std::vector<char> mirror;
  std::vector<int64_t> region;
};

// Where a device is, for the watchdog's report (sync.cpp) when a collective waits too long:
// written by the device itself (relaxed atomics, a few stores per collective), read by the
// device that reports. Collective number k (counted from 1 per shmap call) is noted in
// note[k % 2], so the one in progress and the last one completed are both at hand.
struct Whereabouts {
  enum Phase { kBody, kInCollective, kFinished };
  struct Note {
    std::atomic<const char *> what{nullptr};  // "psum"
    std::atomic<const char *> loc{nullptr};   // "prog.smp:12:9" (null: the caller gave none)
    std::atomic<uint64_t> axes{0};            // the axis indices, 4 bits each, in the listed order
    std::atomic<int32_t> naxes{0}, dtype{0}, rank{0};
    std::atomic<int64_t> shape[SHM_MAX_RANK] = {};
  };
  std::atomic<int> phase{kBody};
  std::atomic<int64_t> started{0};  // collectives begun in this shmap call
  Note note[2];
};

// State shared by the devices of one shm_run_shmap call that this process runs: all of them,
// or under MPI this rank's [first, first + nlocal) (ranks.h).
struct MeshCall {
  int32_t mesh_rank = 0;
  int64_t sizes[kMaxMeshRank] = {0};
  const char *const *axis_names = nullptr;
  int ndev = 0;
  int first = 0, nlocal = 0;  // the devices this process runs
  std::vector<Slot> slots;    // one per device of the mesh (remote ones' stay empty: collective_protocol.h)

  // By set of axes (a bit per mesh axis): the barriers of its groups, made at the first
  // collective over those axes by whichever device gets there first (sync.cpp).
  std::atomic<AxesSync *> axes_sync[1 << kMaxMeshRank] = {};

  MeshCall(int n, int first_local, int n_local)
      : ndev(n), first(first_local), nlocal(n_local), slots((size_t)n) {}
  ~MeshCall() {
    for (auto &a : axes_sync) delete a.load(std::memory_order_relaxed);
  }
  MeshCall(const MeshCall &) = delete;
  MeshCall &operator=(const MeshCall &) = delete;
};

} // namespace shm

// The opaque handle of the ABI: one per device and shm_run_shmap call. Cache-line aligned so
// the devices' private counters do not share lines.
struct alignas(64) shm_device {
  // The source location ("prog.smp:12:9", a constant of the program) of the collective the
  // device is about to call: emitted code stores it, before each collective call, into the
  // first word of the device (shmap_runtime.h), and note_collective moves it into the
  // watchdog's note (sync.h). First: the emitted code knows no other offset of this struct.
  const char *collective_loc = nullptr;
  shm::MeshCall *call = nullptr;
  int id = 0;                                // row-major over the mesh axes
  int64_t coords[shm::kMaxMeshRank] = {0};   // this device's coordinate on each axis
  shm::Stats stats;                          // private counters, merged after the threads join
  shm::TraceTrack trace;                     // --trace: this device's events, likewise
  double collective_start = 0, collective_waited = 0;  // --trace: the collective in progress
  std::string collective_axes;                          // ... its axes ("x,y")
  std::string collective_operand;                       // ... and its operand ("f32[2,5]")
  shm::Barrier *sync = nullptr;  // the barrier of the collective in progress (sync.h)
  shm::Whereabouts where;        // what the watchdog reports of this device (sync.h)
};

namespace shm {

// The group of a collective over `axes`: the devices sharing this device's coordinates on
// every other axis, indexed row-major over `axes` in the listed order.
struct Group {
  int n = 1;               // group size
  int me = 0;              // this device's index in the group
  std::vector<int> member; // device id of each group index
  // The ranked MPI mode, for a group with members on several ranks: its first member on this
  // rank, which moves the group's data between ranks for the rank's members (-1 otherwise).
  int lead = -1;
};
// Validates the axis list (indices in range, no repeats) and computes the group.
Group group_of(const shm_device *dev, const int32_t *axes, int32_t naxes, const char *what);
// The group over (valid) `axes` of the device at `coords`.
Group group_at(const MeshCall &c, const int64_t *coords, const int32_t *axes, int32_t naxes);
// A device's coordinates: the digits of its id, row-major over the mesh axes.
void coords_of(const MeshCall &c, int64_t id, int64_t *coords);
// "device 3 (x=1,y=1)", for messages.
std::string device_name(const MeshCall &c, int id);
// shm_fatal("collective outside a shmap") when dev is NULL.
void require_device(const shm_device *dev, const char *what);

} // namespace shm
#endif
