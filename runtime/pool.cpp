// Device threads: a persistent pool (default) or one std::thread per device and call.
#include "pool.h"
#include "sync.h"
#include "trace.h"

#include "ranks.h"
#include "shmap_runtime.h"
#include "util.h"

#include <condition_variable>
#include <cstdlib>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <sched.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace shm {

static thread_local bool t_on_device = false;
bool on_device_thread() { return t_on_device; }

// The cores the current thread's own work may use (itself included): all usable cores on the
// host, its share of them on a device thread (a mesh with fewer devices than cores leaves
// some idle), one on a team worker. 0: not set yet (the host thread).
static thread_local int t_team = 0;
int team_size() { return t_team > 0 ? t_team : usable_cores(); }
void set_thread_team(int cores) { t_team = cores; }

// A worker of a pool (or a thread spawned for a device): stopping parks it (sync.h).
static thread_local bool t_worker = false;
bool is_pool_worker() { return t_worker; }

namespace {

// Workers handed a job that have neither finished it nor parked: a pool's run() counts the
// workers it wakes before waking them, so a worker about to start counts too, and the thread
// that reports a failure waits for this to reach 0 before the process exits under them.
std::atomic<int> g_busy_workers{0};

// Waits on `cv` for `done`, and stops this thread instead if the run is stopping (a device
// failed: the worker that would have signalled may have parked).
template <typename Pred> void wait_or_stop(std::condition_variable &cv, std::unique_lock<std::mutex> &lk, Pred done) {
  while (!cv.wait_for(lk, std::chrono::milliseconds(100), done))
    if (stopping()) {
      lk.unlock();
      stop_this_thread();
    }
}

// Runs one job index with the "on a device thread" flag set and the thread's team size, both
// restored afterwards (a device thread runs its team's job 0 itself).
void run_job(const std::function<void(int)> &job, int i, int team) {
  const bool was_on_device = t_on_device;
  const int was_team = t_team;
  t_on_device = true;
  t_team = team;
  job(i);
  t_on_device = was_on_device;
  t_team = was_team;
}

// The share of `cores` that job i of n gets: cores / n, the remainder to the first jobs, at
// least one.
int share(int cores, int n, int i) { return std::max(1, cores / n + (i < cores % n ? 1 : 0)); }

// Worker w runs job index w + 1 of every call that uses at least w + 2 threads. A call
// hands each worker it needs the call's number (`go`) and wakes that worker alone, through
// the worker's own condition variable: after a call on a big mesh grew the pool, a small call
// must not wake (and wait for the mutex with) every idle worker. run() returns when
// `remaining_` (the workers taking part) has dropped to zero, so a new call never starts
// while a worker is still busy with the previous one.
class Pool {
public:
  // `teams`: each job's team size (share of the usable cores), or 1 for all (a team's workers).
  explicit Pool(bool teams) : teams_(teams) {}

  void run(int n, const std::function<void(int)> &job) {
    {
      std::unique_lock<std::mutex> lk(m_);
      while ((int)workers_.size() < n - 1) {
        workers_.push_back(std::make_unique<Worker>());
        Worker *w = workers_.back().get();
        const int index = (int)workers_.size();
        threads_.emplace_back([this, w, index] { loop(*w, index); });
      }
      job_ = &job;
      n_ = n;
      remaining_ = n - 1;
      ++call_;
      for (int w = 0; w < n - 1; ++w) workers_[(size_t)w]->go = call_;
      g_busy_workers.fetch_add(n - 1, std::memory_order_relaxed);
    }
    for (int w = 0; w < n - 1; ++w) workers_[(size_t)w]->wake.notify_one();
    run_job(job, 0, teamOf(0, n));
    std::unique_lock<std::mutex> lk(m_);
    wait_or_stop(done_cv_, lk, [this] { return remaining_ == 0; });
    job_ = nullptr;
  }

private:
  struct Worker {
    std::condition_variable wake;
    uint64_t go = 0;  // the last call this worker was asked to join (guarded by m_)
  };

  void loop(Worker &me, int index) {
    t_worker = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      me.wake.wait(lk, [&] { return me.go != seen; });
      seen = me.go;
      const std::function<void(int)> *job = job_;
      const int n = n_;
      lk.unlock();
      run_job(*job, index, teamOf(index, n));
      g_busy_workers.fetch_sub(1, std::memory_order_release);
      lk.lock();
      if (--remaining_ == 0) done_cv_.notify_one();
    }
  }

  int teamOf(int i, int n) const { return teams_ ? share(cores_, n, i) : 1; }

public:
  int cores_ = 0;  // (set by run_on_threads before run(): the calling thread's cores)

private:

  const bool teams_;
  std::mutex m_;
  std::condition_variable done_cv_;
  // Only run() reads or grows these (it is serialised); a worker touches just its Worker.
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  uint64_t call_ = 0;
  int remaining_ = 0;
  int n_ = 0;
  const std::function<void(int)> *job_ = nullptr;
};

// Pools are deliberately leaked: at exit() the workers are still blocked on the condition
// variable, and destroying it (or joinable std::threads) under them would be undefined /
// terminate. A forked child has no workers, so it gets fresh pools (the unit tests fork for
// the death tests).
// The device threads of the host program, and of each pipeline device group (whose stage
// programs run at once, each on its own thread, and run their shmaps and kernels at once).
thread_local int t_pipeline_group = -1;

struct DevicePool {
  Pool pool{/*teams=*/true};
  std::mutex serial;  // (one call at a time: the workers have one job slot)
};

DevicePool &lookup_pool();

// (every run_on_threads asks: a thread remembers its pool, found under the lock once per group)
DevicePool &pool() {
  static thread_local DevicePool *mine = nullptr;
  static thread_local int mine_group = -2;
  static thread_local pid_t mine_pid = 0;
  if (!mine || mine_group != t_pipeline_group || mine_pid != getpid()) {
    mine = &lookup_pool();
    mine_group = t_pipeline_group;
    mine_pid = getpid();
  }
  return *mine;
}

DevicePool &lookup_pool() {
  static std::mutex m;
  static std::vector<DevicePool *> pools;  // [0]: the host's; [1 + g]: group g's
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lk(m);
  if (owner != getpid()) {
    pools.clear();
    owner = getpid();
  }
  const size_t i = (size_t)(t_pipeline_group + 1);
  if (pools.size() <= i) pools.resize(i + 1, nullptr);
  if (!pools[i]) pools[i] = new DevicePool;
  return *pools[i];
}

Pool &team_pool() {  // the current device thread's own helpers
  static thread_local Pool *p = nullptr;
  static thread_local pid_t owner = 0;
  if (!p || owner != getpid()) {
    p = new Pool(/*teams=*/false);
    owner = getpid();
  }
  return *p;
}

bool spawn_mode() {
  static const bool spawn = [] {
    const char *e = std::getenv("SHMAP_THREADS");
    return e && std::strcmp(e, "spawn") == 0;
  }();
  return spawn;
}

} // namespace

void set_pipeline_group(int group) { t_pipeline_group = group; }
int pipeline_group() { return t_pipeline_group; }

void run_on_threads(int n, const std::function<void(int)> &job) {
  if (n <= 0) return;
  const int cores = team_size();  // (the host's: every usable core; a stage program's: its share)
  if (n == 1) {
    run_job(job, 0, cores);
    return;
  }
  if (spawn_mode()) {
    // (joined once every thread has finished; a run that stops leaves them parked, unjoined)
    std::mutex m;
    std::condition_variable cv;
    int finished = 0;
    std::vector<std::thread> ts;
    ts.reserve((size_t)n - 1);
    g_busy_workers.fetch_add(n - 1, std::memory_order_relaxed);
    for (int i = 1; i < n; ++i)
      ts.emplace_back([&, i] {
        t_worker = true;
        run_job(job, i, share(cores, n, i));
        g_busy_workers.fetch_sub(1, std::memory_order_release);
        std::lock_guard<std::mutex> lk(m);
        if (++finished == n - 1) cv.notify_one();
      });
    run_job(job, 0, share(cores, n, 0));
    {
      std::unique_lock<std::mutex> lk(m);
      wait_or_stop(cv, lk, [&] { return finished == n - 1; });
    }
    for (auto &t : ts) t.join();
    return;
  }
  // (serialised anyway: two calls from one group's thread never overlap, but the workers
  // have one job slot)
  DevicePool &p = pool();
  std::lock_guard<std::mutex> lk(p.serial);
  p.pool.cores_ = cores;
  p.pool.run(n, job);
}

void run_on_team(int parts, const std::function<void(int)> &job) {
  if (parts <= 1) {
    job(0);
    return;
  }
  if (!on_device_thread()) {  // the host: the device pool is idle between shmap calls
    run_on_threads(parts, job);
    return;
  }
  team_pool().run(parts, job);
}

void park_this_worker() {
  g_busy_workers.fetch_sub(1, std::memory_order_release);
  for (;;) pause();  // (the process ends under it)
}

bool wait_for_workers_to_stop(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (g_busy_workers.load(std::memory_order_acquire) > 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

int usable_cores() {
  // The CPUs this process may run on (taskset, cgroups' cpusets), not all the machine has,
  // shared with the other MPI ranks here that may run on the same ones (unbound ranks).
  static const int n = [] {
    cpu_set_t set;
    const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                                  : (int)std::thread::hardware_concurrency();
    return std::max(1, cores / ranks_sharing_cores());
  }();
  return n;
}

} // namespace shm

extern "C" void shm_parallel_for(void (*fn)(void *, int64_t, int64_t), void *args, int64_t n) {
  using namespace shm;
  // (--trace: the fused element-wise loops of 2^16 elements or more come through here)
  TraceScope span("fused loop", "compute");
  if (span.name) span.args = "\"elements\":" + std::to_string(n);
  // Each range gets at least kGrain elements (the hand-off costs tens of microseconds), and
  // ranges start at multiples of 64 elements so that each vector loop starts aligned as the
  // whole would.
  constexpr int64_t kGrain = 1 << 15;
  const int parts = (int)std::max<int64_t>(1, std::min<int64_t>(team_size(), n / kGrain));
  auto bound = [&](int i) { return i == parts ? n : (n * i / parts) / 64 * 64; };
  run_on_team(parts, [&](int i) { fn(args, bound(i), bound(i + 1)); });
}
