// Threads that run the devices of a mesh (private header).
#ifndef SHMAP_RUNTIME_POOL_H
#define SHMAP_RUNTIME_POOL_H
#include <functional>

namespace shm {

// Runs job(i) for every i in [0, n) concurrently, each on its own thread, and returns when all
// have finished. The calling thread runs job(0). The threads must all be live at once because
// the devices wait for each other in barriers.
//
// By default a persistent pool is used (threads are created on first need and reused by every
// later shmap); SHMAP_THREADS=spawn in the environment spawns fresh std::threads per call
// instead (kept for the measurement in docs/runtime.md).
void run_on_threads(int n, const std::function<void(int)> &job);

// The number of cores this process may use (its CPU affinity mask).
int usable_cores();

// The cores the current thread's work may use, itself included: every usable core on the
// host; on a device thread its share of them (usable cores / devices of the call, at least
// one), so a mesh with fewer devices than cores puts the idle ones to work; 1 on a helper.
int team_size();

// Runs job(i) for i in [0, parts) on the current thread's team (parts <= team_size()), the
// calling thread running job(0): on the host the device pool, on a device thread helpers of
// its own (a persistent pool per device thread). Every index runs on a distinct thread, so
// results must not depend on how many there are: callers split work the same way for any
// `parts` where results could differ (kernels.cpp's sgemm) or compute each element alone.
void run_on_team(int parts, const std::function<void(int)> &job);

// Sets the cores the current thread's own work may use (a pipeline's stage program: its share
// of the usable cores, so that the groups running at once do not oversubscribe them); 0 resets
// it to every usable core.
void set_thread_team(int cores);

// Marks the current thread as running pipeline device group `group`'s stage program (-1:
// the host's again): its shmaps and kernels then run on the group's own device threads, at
// once with the other groups'.
void set_pipeline_group(int group);
int pipeline_group();  // the current thread's, or -1

// True while the current thread is executing a device job (used to reject nested shmaps).
bool on_device_thread();

// Stopping a run after a failure (sync.h). A worker of a pool (a device thread other than the
// first, or a team helper) parks: it never runs again, and the process ends under it. The
// thread that started the devices waits until no worker runs a job any more (or `seconds`
// have passed: false) before it reports.
bool is_pool_worker();
[[noreturn]] void park_this_worker();
bool wait_for_workers_to_stop(double seconds);

} // namespace shm
#endif
