// Device threads and the state they share during one shm_run_shmap call (private header).
#ifndef SHMAP_RUNTIME_DEVICE_H
#define SHMAP_RUNTIME_DEVICE_H
#include "shmap_limits.h"
#include "shmap_runtime.h"
#include "stats.h"
#include "trace.h"
#include "util.h"

#include <atomic>
#include <string>
#include <cstdint>
#include <vector>

namespace shm {

constexpr int kMaxMeshRank = SHM_MAX_MESH_AXES;

// A reusable barrier for the devices of one mesh. Sense is carried by a generation counter:
// the last thread to arrive resets the count and bumps the generation; the others wait for
// the generation to change. Waiting spins briefly (a barrier often completes within a few
// microseconds) and then sleeps on the futex behind std::atomic::wait, because the mesh usually
// has more devices than the machine has cores and spinning would steal their time.
// The acq_rel/release/acquire orderings make everything a device wrote before arriving visible
// to every device after it leaves, which is what the collectives rely on.
class Barrier {
public:
  explicit Barrier(int n) : n_(n) {}
  void arrive_and_wait();

private:
  const int n_;
  alignas(64) std::atomic<int> count_{0};
  alignas(64) std::atomic<uint32_t> gen_{0};
};

// Where a device publishes its buffers for the collective in progress.
struct alignas(64) Slot {
  const void *in = nullptr;
  void *out = nullptr;
  const void *reduced = nullptr;  // an all-reduce over several ranks: this member's reduced chunk
};

// State shared by the devices of one shm_run_shmap call that this process runs: all of them,
// or under MPI this rank's [first, first + nlocal) (ranks.h).
struct MeshCall {
  int32_t mesh_rank = 0;
  int64_t sizes[kMaxMeshRank] = {0};
  const char *const *axis_names = nullptr;
  int ndev = 0;
  int first = 0, nlocal = 0;  // the devices this process runs
  Barrier barrier;            // of the local devices
  std::vector<Slot> slots;    // one per device of the mesh (remote ones: see collective_protocol.h)
  std::vector<char> mirror;   // what this rank received of remote devices' data (collective_protocol.cpp)
  std::vector<int64_t> region;             // ... where each remote device's is in it (-1: none)
  std::vector<std::vector<int>> partners;  // the ranks of each device's group, but its own

  MeshCall(int n, int first_local, int n_local)
      : ndev(n), first(first_local), nlocal(n_local), barrier(n_local), slots((size_t)n) {}
};

} // namespace shm

// The opaque handle of the ABI: one per device and shm_run_shmap call. Cache-line aligned so
// the devices' private counters do not share lines.
struct alignas(64) shm_device {
  shm::MeshCall *call = nullptr;
  int id = 0;                                // row-major over the mesh axes
  int64_t coords[shm::kMaxMeshRank] = {0};   // this device's coordinate on each axis
  shm::Stats stats;                          // private counters, merged after the threads join
  shm::TraceTrack trace;                     // --trace: this device's events, likewise
  double collective_start = 0, collective_waited = 0;  // --trace: the collective in progress
  std::string collective_axes;                          // ... its axes ("x,y")
  std::string collective_operand;                       // ... and its operand ("f32[2,5]")
};

namespace shm {

// The group of a collective over `axes`: the devices sharing this device's coordinates on
// every other axis, indexed row-major over `axes` in the listed order.
struct Group {
  int n = 1;               // group size
  int me = 0;              // this device's index in the group
  std::vector<int> member; // device id of each group index
};
// Validates the axis list (indices in range, no repeats) and computes the group.
Group group_of(const shm_device *dev, const int32_t *axes, int32_t naxes, const char *what);
// The group over (valid) `axes` of the device at `coords`.
Group group_at(const MeshCall &c, const int64_t *coords, const int32_t *axes, int32_t naxes);
// A device's coordinates: the digits of its id, row-major over the mesh axes.
void coords_of(const MeshCall &c, int64_t id, int64_t *coords);
// shm_fatal("collective outside a shmap") when dev is NULL.
void require_device(const shm_device *dev, const char *what);

} // namespace shm
#endif
