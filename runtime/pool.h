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

// True while the current thread is executing a device job (used to reject nested shmaps).
bool on_device_thread();

} // namespace shm
#endif
