// How devices wait for each other (the barrier, one per group), how a run stops after a
// device fails, and the watchdog of a collective that waits too long (sync.h).
#include "sync.h"

#include "collective_protocol.h"
#include "pool.h"
#include "ranks.h"
#include "stats.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <linux/futex.h>
#include <mutex>
#include <string>
#include <thread>
#include <sys/syscall.h>
#include <unistd.h>

namespace shm {

std::atomic<bool> g_stopping{false};

namespace {

long futex(std::atomic<uint32_t> *word, int op, uint32_t value, const timespec *timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex is a 32-bit word");
  return syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), op, value, timeout, nullptr, 0);
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The first failure of the run (its message), published before g_stopping is set.
std::atomic<std::string *> g_failure{nullptr};

} // namespace

void Barrier::arrive_and_wait(shm_device *dev) {
  if (stopping()) stop_this_thread();
  const uint32_t g = gen_.load(std::memory_order_acquire);
  if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
    // Last to arrive: nobody can start the next round before seeing the new generation, so
    // resetting the count here cannot race with a later arrival. (seq_cst with the sleepers'
    // count: a sleeper either sees the new generation or is seen, and woken.)
    count_.store(0, std::memory_order_relaxed);
    gen_.store(g + 1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) futex(&gen_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
    return;
  }
  for (int i = 0; i < 256; ++i) {
    if (gen_.load(std::memory_order_acquire) != g) return;
    _mm_pause();
  }
  sleep_until_changed(g, dev);
}

void Barrier::sleep_until_changed(uint32_t g, shm_device *dev) {
  const double start = seconds_now(), limit = collective_timeout();
  const timespec slice{0, 100 * 1000 * 1000};  // (then a look at stopping and the watchdog)
  for (;;) {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (gen_.load(std::memory_order_seq_cst) == g) futex(&gen_, FUTEX_WAIT_PRIVATE, g, &slice);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    if (gen_.load(std::memory_order_acquire) != g) return;
    if (stopping()) stop_this_thread();
    const double waited = seconds_now() - start;
    if (dev && waited > limit) watchdog_fire(dev, waited);
  }
}

AxesSync &axes_sync(MeshCall &c, const int32_t *axes, int32_t naxes) {
  unsigned bits = 0;
  for (int32_t k = 0; k < naxes; ++k) bits |= 1u << axes[k];
  std::atomic<AxesSync *> &slot = c.axes_sync[bits];
  if (AxesSync *s = slot.load(std::memory_order_acquire)) return *s;
  // A group's leader: its member with coordinate 0 on every axis of the set (a device's id
  // less its coordinates on those axes, row-major).
  int64_t stride[kMaxMeshRank], coords[kMaxMeshRank];
  for (int32_t a = c.mesh_rank - 1, s = 1; a >= 0; s *= (int)c.sizes[a], --a) stride[a] = s;
  auto leader_of = [&](int id) {
    coords_of(c, id, coords);
    int64_t l = id;
    for (int32_t a = 0; a < c.mesh_rank; ++a)
      if (bits >> a & 1) l -= coords[a] * stride[a];
    return (int)l;
  };
  auto made = std::make_unique<AxesSync>();
  std::vector<int> local_members((size_t)c.ndev, 0);
  for (int id = c.first; id < c.first + c.nlocal; ++id) ++local_members[(size_t)leader_of(id)];
  std::vector<Barrier *> of_leader((size_t)c.ndev, nullptr);
  made->of.resize((size_t)c.nlocal);
  for (int id = c.first; id < c.first + c.nlocal; ++id) {
    const int l = leader_of(id);
    if (!of_leader[(size_t)l]) {
      made->barriers.push_back(std::make_unique<Barrier>(local_members[(size_t)l]));
      of_leader[(size_t)l] = made->barriers.back().get();
    }
    made->of[(size_t)(id - c.first)] = of_leader[(size_t)l];
  }
  AxesSync *expected = nullptr;
  if (slot.compare_exchange_strong(expected, made.get(), std::memory_order_acq_rel, std::memory_order_acquire))
    return *made.release();
  return *expected;  // another device made them first
}

Barrier &collective_barrier(shm_device *dev, const int32_t *axes, int32_t naxes) {
  MeshCall &c = *dev->call;
  // (one device per rank: a barrier of one; several: of the group's members on the rank)
  return *axes_sync(c, axes, naxes).of[(size_t)(dev->id - c.first)];
}

void note_collective(shm_device *dev, const char *what, int32_t dtype, int32_t rank, const int64_t *shape,
                     const int32_t *axes, int32_t naxes) {
  Whereabouts &w = dev->where;
  const int64_t k = w.started.load(std::memory_order_relaxed) + 1;
  Whereabouts::Note &n = w.note[k & 1];
  n.what.store(what, std::memory_order_relaxed);
  // (taken and cleared: a collective called without a location must not show its predecessor's)
  n.loc.store(dev->collective_loc, std::memory_order_relaxed);
  dev->collective_loc = nullptr;
  uint64_t packed = 0;
  for (int32_t j = 0; j < naxes && j < 16; ++j) packed |= (uint64_t)(axes[j] & 15) << (4 * j);
  n.axes.store(packed, std::memory_order_relaxed);
  n.naxes.store(naxes, std::memory_order_relaxed);
  n.dtype.store(dtype, std::memory_order_relaxed);
  n.rank.store(rank, std::memory_order_relaxed);
  for (int32_t d = 0; d < rank && d < kMaxRank && shape; ++d) n.shape[d].store(shape[d], std::memory_order_relaxed);
  w.started.store(k, std::memory_order_release);
  w.phase.store(Whereabouts::kInCollective, std::memory_order_release);
}

void note_collective_done(shm_device *dev) { dev->where.phase.store(Whereabouts::kBody, std::memory_order_release); }
void note_body_finished(shm_device *dev) { dev->where.phase.store(Whereabouts::kFinished, std::memory_order_release); }

double collective_timeout() {
  // runtime_main refuses a bad value with the other SHMAP_* variables (env.cpp) before the
  // program runs; a caller that does not start there (the runtime's unit tests) meets the same
  // refusal here, on the host.
  static const double seconds = [] {
    if (std::string bad = environment_error("SHMAP_COLLECTIVE_TIMEOUT"); !bad.empty()) fatalf("%s", bad.c_str());
    return collective_timeout_setting();
  }();
  return seconds;
}

namespace {

// (appended piece by piece: GCC 12 warns, wrongly, about `"text" + std::string` at -O3)
template <typename... Parts> void append(std::string &s, const Parts &...parts) { (s += ... += parts); }

// `psum over "x","y" of f32[2,5]`
std::string describe(const MeshCall &c, const Whereabouts::Note &n) {
  const char *what = n.what.load(std::memory_order_relaxed);
  std::string s = what ? what : "?";
  const int32_t naxes = n.naxes.load(std::memory_order_relaxed);
  const uint64_t axes = n.axes.load(std::memory_order_relaxed);
  s += " over ";
  for (int32_t j = 0; j < naxes && j < 16; ++j) {
    const int a = (int)(axes >> (4 * j) & 15);
    if (j) s += ',';
    s += '"';
    s += c.axis_names && a < c.mesh_rank ? c.axis_names[a] : "?";
    s += '"';
  }
  const int32_t dtype = n.dtype.load(std::memory_order_relaxed), rank = n.rank.load(std::memory_order_relaxed);
  s += " of ";
  s += dtype >= 0 && dtype <= SHM_BF16 ? dtype_name(dtype) : "?";
  s += '[';
  for (int32_t d = 0; d < rank && d < kMaxRank; ++d) {
    if (d) s += ',';
    s += std::to_string(n.shape[d].load(std::memory_order_relaxed));
  }
  s += ']';
  return s;
}

// `psum over "x","y" of f32[2,5] at prog.smp:12:9 (its collective #2)`: collective number k of
// a device, noted in `n` (no " at" where the caller gave no location).
std::string collective_text(const MeshCall &c, const Whereabouts::Note &n, int64_t k) {
  std::string s = describe(c, n);
  if (const char *loc = n.loc.load(std::memory_order_relaxed)) append(s, " at ", loc);
  append(s, " (its collective #", std::to_string(k), ")");
  return s;
}

// Where device `m` is, as seen from a device waiting in collective `what` over `axes`.
std::string whereabouts(const MeshCall &c, const shm_device &m, const Whereabouts::Note &mine) {
  const Whereabouts &w = m.where;
  const int phase = w.phase.load(std::memory_order_acquire);
  const int64_t k = w.started.load(std::memory_order_acquire);
  const Whereabouts::Note &n = w.note[k & 1];
  const bool same = n.what.load(std::memory_order_relaxed) == mine.what.load(std::memory_order_relaxed) &&
                    n.axes.load(std::memory_order_relaxed) == mine.axes.load(std::memory_order_relaxed) &&
                    n.naxes.load(std::memory_order_relaxed) == mine.naxes.load(std::memory_order_relaxed);
  std::string s;
  if (phase == Whereabouts::kInCollective) {
    append(s, same ? "waits in " : "has not arrived: it waits in ", collective_text(c, n, k));
    return s;
  }
  append(s, phase == Whereabouts::kFinished ? "has not arrived: its shmap body has returned; "
                                            : "has not arrived: it runs its shmap body; ");
  if (k > 0) append(s, "the last collective it completed is ", collective_text(c, n, k));
  else append(s, "it has completed no collective");
  return s;
}

} // namespace

namespace {

// The watchdog's report: `dev` has waited `waited` seconds in its collective.
std::string stuck_report(const shm_device *dev, double waited) {
  const MeshCall &c = *dev->call;
  const Whereabouts &w = dev->where;
  const int64_t k = w.started.load(std::memory_order_relaxed);
  const Whereabouts::Note &mine = w.note[k & 1];
  int32_t axes[kMaxMeshRank];
  const int32_t naxes = mine.naxes.load(std::memory_order_relaxed);
  const uint64_t packed = mine.axes.load(std::memory_order_relaxed);
  for (int32_t j = 0; j < naxes && j < kMaxMeshRank; ++j) axes[j] = (int32_t)(packed >> (4 * j) & 15);
  const Group g = group_at(c, dev->coords, axes, naxes);
  char head[256];
  std::snprintf(head, sizeof head, "a collective has waited %.1f s for its group, more than SHMAP_COLLECTIVE_TIMEOUT=%g s: ",
                waited, collective_timeout());
  std::string msg;
  append(msg, head, device_name(c, dev->id));
  append(msg, " waits in ", collective_text(c, mine, k), ", for the group of ", std::to_string(g.n), " devices:");
  // (the devices of the call are one array, in id order from c.first)
  const shm_device *devs = dev - (dev->id - c.first);
  for (int m : g.member) {
    append(msg, "\n  ", device_name(c, m), ": ");
    if (is_local(c, m)) append(msg, whereabouts(c, devs[m - c.first], mine));
    else append(msg, "on rank ", std::to_string(rank_of(c, m)), " (its whereabouts are known there)");
  }
  msg += "\nA member that skips the collective, or runs collectives of its group in another order, leaves the others "
         "waiting (docs/runtime.md, \"Stuck collectives\")";
  return msg;
}

// Under MPI: the devices of this rank's running shmap call, which a thread of the rank watches
// (watch_devices).
std::mutex g_watch_m;
const shm_device *g_watched = nullptr;
int g_watched_n = 0;
uint64_t g_watch_generation = 0;

// Every quarter of the timeout (at most a second) the watcher looks at each device: one in the
// same collective as at an earlier look for longer than the timeout is stuck there (inside an
// MPI call, where no barrier times its wait).
void watch_loop() {
  const double limit = collective_timeout();
  const auto period = std::chrono::duration<double>(std::min(1.0, std::max(0.01, limit / 4)));
  struct Seen {
    int64_t started = -1;
    double since = 0;
  };
  std::vector<Seen> seen;
  uint64_t generation = 0;
  for (;;) {
    std::this_thread::sleep_for(period);
    std::lock_guard<std::mutex> lk(g_watch_m);
    if (generation != g_watch_generation) seen.clear();  // (another shmap call)
    generation = g_watch_generation;
    seen.resize((size_t)g_watched_n);
    const double now = seconds_now();
    for (int i = 0; i < g_watched_n; ++i) {
      const Whereabouts &w = g_watched[i].where;
      const int64_t started = w.started.load(std::memory_order_acquire);
      if (w.phase.load(std::memory_order_acquire) != Whereabouts::kInCollective) {
        seen[(size_t)i].started = -1;
      } else if (seen[(size_t)i].started != started) {
        seen[(size_t)i] = {started, now};
      } else if (now - seen[(size_t)i].since > limit) {
        shm_fatal(stuck_report(&g_watched[i], now - seen[(size_t)i].since).c_str());  // (MPI_Abort: every rank ends)
      }
    }
  }
}

} // namespace

void watch_devices(const shm_device *devs, int n) {
  if (rank_count() == 1) return;  // (one process: every wait is at a barrier, which times itself)
  static std::once_flag started;
  std::call_once(started, [] { std::thread(watch_loop).detach(); });
  std::lock_guard<std::mutex> lk(g_watch_m);
  g_watched = devs;
  g_watched_n = devs ? n : 0;
  ++g_watch_generation;
}

void watchdog_fire(shm_device *dev, double waited) {
  shm_fatal(stuck_report(dev, waited).c_str());
  std::abort();  // (not reached)
}

bool fail_on_device_thread(const char *msg) {
  if (!on_device_thread() || rank_count() > 1) return false;
  std::string *mine = new std::string(msg ? msg : "(null)");
  std::string *none = nullptr;
  if (g_failure.compare_exchange_strong(none, mine, std::memory_order_acq_rel)) g_stopping.store(true, std::memory_order_release);
  else delete mine;  // (a later failure, while the run stops: the first is reported)
  stop_this_thread();
}

void stop_this_thread() {
  if (is_pool_worker()) park_this_worker();
  // The thread that started the devices: it reports once no worker runs (they park at their
  // next barrier, or finish their body), so nothing still reads what exit() frees.
  const bool stopped = wait_for_workers_to_stop(5.0);
  while (!g_stopping.load(std::memory_order_acquire)) _mm_pause();
  const std::string *failure = g_failure.load(std::memory_order_acquire);
  std::fflush(stdout);
  std::fprintf(stderr, "shmap runtime error: %s%s\n", rank_prefix(), failure ? failure->c_str() : "(unknown)");
  std::fflush(stderr);
  if (!stopped) std::_Exit(2);  // a device computes on and on: exit() would free what it reads
  ranks_abort(2);
}

} // namespace shm
