// How the devices of a mesh wait for each other, and how a run stops (private header).
//
// Groups: a collective over `axes` synchronises only the devices of its group (the devices
// that share every coordinate not in `axes`), on a barrier of that group. Groups of different
// collectives progress independently: in a loop whose trip count differs along "x", the
// groups over "y" run different numbers of ppermutes over "y", and a mesh-wide barrier would
// make the first group to leave the loop wait forever for the others. A device's slot is only
// read by the members of the group of the collective it is in, between that group's two
// barriers, so one barrier per group keeps every slot safe (collective_protocol.h).
//
// The same holds in the ranked MPI mode (several devices per rank): a group's barrier there
// is of its members on the rank, and its first member on the rank moves the group's data
// between ranks, on a communicator of the group's ranks (collective_protocol.h).
//
// Stopping: when a device thread fails (shm_fatal), the failure is recorded, every other device
// stops at its next barrier (or when its body ends) and parks, and the thread that started the
// devices reports the failure and exits once none of them still runs: no device reads memory
// that exit() frees, and the output printed so far is flushed. The watchdog: a device that has
// waited at a collective's barrier longer than SHMAP_COLLECTIVE_TIMEOUT seconds (default 300)
// fails with a report of its group: which member waits in which collective, which have not
// arrived, and where they last were (docs/runtime.md, "Stuck collectives").
#ifndef SHMAP_RUNTIME_SYNC_H
#define SHMAP_RUNTIME_SYNC_H
#include "device.h"

#include <atomic>
#include <cstdint>

namespace shm {

// Set once a device thread has failed: every device stops at its next barrier.
extern std::atomic<bool> g_stopping;
inline bool stopping() { return g_stopping.load(std::memory_order_relaxed); }
// Stops the current thread of a stopping run: a pool's worker parks; the thread that started
// the devices waits for the workers, reports the failure and exits with status 2.
[[noreturn]] void stop_this_thread();

// The barrier a collective over `axes` waits on: its group's members' in this process (made at
// the first use of the axes).
Barrier &collective_barrier(shm_device *dev, const int32_t *axes, int32_t naxes);

// The groups over `axes` (a bit per axis in `bits`): their barriers, made on first use.
AxesSync &axes_sync(MeshCall &c, const int32_t *axes, int32_t naxes);

// The watchdog's notes (sync.cpp): a collective begins (its name, operand and axes); every
// collective of the device has ended (its body has returned).
void note_collective(shm_device *dev, const char *what, int32_t dtype, int32_t rank, const int64_t *shape,
                     const int32_t *axes, int32_t naxes);
void note_collective_done(shm_device *dev);
void note_body_finished(shm_device *dev);

// SHMAP_COLLECTIVE_TIMEOUT in seconds (default 300); a value that is not a number of seconds
// above 0 is a fatal error naming it. runtime_main checks it at start-up.
double collective_timeout();

// Called by a device that has waited at `b` for `waited` seconds, past the timeout: fails with
// the report of its group.
[[noreturn]] void watchdog_fire(shm_device *dev, double waited);

// Under MPI: the devices of the shmap call now running on this rank (null when it has ended),
// which a thread of the rank watches: a device inside one collective for longer than the
// timeout (waiting in an MPI call, with one device per rank) ends the job with the report.
void watch_devices(const shm_device *devs, int n);

// shm_fatal on a device thread of a process that runs the devices itself (one process): records
// `msg` as the run's failure (the first one wins) and stops this thread (stop_this_thread).
// Returns false where shm_fatal must end the process at once itself (host code with no device
// running; under MPI, where MPI_Abort ends every rank).
bool fail_on_device_thread(const char *msg);

} // namespace shm
#endif
