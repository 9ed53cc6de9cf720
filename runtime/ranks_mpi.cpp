// Several processes under MPI (ranks.h; `shmapc compile --mpi`): rank r runs devices
// [r * d, (r + 1) * d) of every mesh as threads, d = --devices-per-rank (default 1). With one
// device per rank only the main thread calls MPI (run_on_threads runs job 0 on the caller):
// MPI_THREAD_FUNNELED. With several, each group's first device on the rank calls MPI for its
// group, and groups progress independently, so several threads call MPI, one at a time under
// a lock (MPI_THREAD_SERIALIZED; exchange_in_messages). The ranks of a collective's group make the same calls in the same
// order, on the group's communicator, as every member of a group runs its collectives in
// order; other groups may be elsewhere (sync.h).
#include "ranks.h"

#include "device.h"
#include "stats.h"
#include "util.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <condition_variable>
#include <immintrin.h>
#include <mpi.h>
#include <mutex>
#include <sched.h>
#include <string>
#include <string_view>
#include <thread>

// The device counts of the meshes the program's shmaps use (emitted by shmapc; absent
// without any).
extern "C" __attribute__((weak)) const int64_t shm_user_mesh_devices[];
extern "C" __attribute__((weak)) const int32_t shm_user_mesh_count;

namespace shm {

namespace {
int g_rank = 0, g_ranks = 1, g_per_rank = 1;
// The ranks the mesh's devices are laid over: every rank (MPI_COMM_WORLD), or while a rank
// runs a pipeline device group's stage program, that group's ranks (enter_rank_group):
// g_rank and g_ranks are then the rank's place in the group and the group's size.
MPI_Comm g_world = MPI_COMM_WORLD;
int g_world_id = 0;  // 0: every rank; else which group communicator (group_comm's cache)
int g_world_rank = 0;
bool g_check = false;        // --check-collectives
bool g_local_first = false;  // --reduce-locally-first
int g_sharing = 1;           // ranks_sharing_cores()
int g_thread_level = 0;      // what MPI_Init_thread provided
char g_prefix[32] = "";

void check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fatalf("%s: %s", what, msg);
}
} // namespace

void ranks_init(int *argc, char ***argv) {
  // (the arguments are read after MPI_Init; a look ahead for --devices-per-rank=N, N > 1, picks
  // the thread level: several threads call MPI then, one at a time, under g_mpi)
  int wanted = MPI_THREAD_FUNNELED;
  const char *flag = "--devices-per-rank=";
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp((*argv)[i], flag, std::strlen(flag)) == 0 && std::strcmp((*argv)[i] + std::strlen(flag), "1") != 0)
      wanted = MPI_THREAD_SERIALIZED;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, wanted, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "shmap runtime error: MPI_Init_thread failed\n");
    std::exit(2);
  }
  g_thread_level = provided;
  // Errors come back as codes (check() names them), not as MPI's own abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  g_world_rank = g_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
  std::snprintf(g_prefix, sizeof g_prefix, "rank %d: ", g_rank);
  // The ranks on this machine (a shared-memory communicator) with this rank's affinity mask.
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    int n = 1;
    MPI_Comm_size(node, &n);
    cpu_set_t mine;
    CPU_ZERO(&mine);
    sched_getaffinity(0, sizeof mine, &mine);
    std::vector<cpu_set_t> all((size_t)n);
    if (MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all.data(), (int)sizeof mine, MPI_BYTE, node) == MPI_SUCCESS)
      g_sharing = (int)std::count_if(all.begin(), all.end(), [&](const cpu_set_t &s) { return CPU_EQUAL(&s, &mine); });
    MPI_Comm_free(&node);
  }
  const char *check = std::getenv("SHMAP_CHECK_COLLECTIVES");
  g_check = check && std::strcmp(check, "1") == 0;
  const char *local_first = std::getenv("SHMAP_REDUCE_LOCALLY_FIRST");
  g_local_first = local_first && std::strcmp(local_first, "1") == 0;
}

namespace {

// The executable's size and a hash of its bytes (read whole: a few milliseconds for a program
// of some megabytes), -1 if it cannot be read.
void hash_executable(int64_t &size, uint64_t &hash) {
  size = -1;
  hash = 0;
  std::FILE *f = std::fopen("/proc/self/exe", "rb");
  if (!f) return;
  std::vector<char> buf(1 << 20);
  size = 0;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    hash = hash * 1099511628211u ^ std::hash<std::string_view>()(std::string_view(buf.data(), n));
    size += (int64_t)n;
  }
  std::fclose(f);
}

// The program's arguments as one string, each quoted where it has a space.
std::string joined_args(int argc, char **argv) {
  std::string s;
  for (int i = 1; i < argc; ++i) {
    if (i > 1) s += ' ';
    const bool quote = std::strchr(argv[i], ' ') != nullptr;
    if (quote) s += '\'';
    s += argv[i];
    if (quote) s += '\'';
  }
  return s;
}

} // namespace

void check_same_program(int argc, char **argv) {
  if (g_ranks == 1) return;
  const std::string args = joined_args(argc, argv);
  int64_t mine[3];
  uint64_t exe_hash;
  hash_executable(mine[1], exe_hash);
  mine[0] = (int64_t)exe_hash;
  mine[2] = (int64_t)std::hash<std::string>()(args);
  std::vector<int64_t> all((size_t)(3 * g_ranks));
  check(MPI_Allgather(mine, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, MPI_COMM_WORLD), "comparing the ranks' programs");
  bool same = true;
  for (int r = 1; r < g_ranks; ++r) same &= std::equal(&all[0], &all[3], &all[(size_t)(3 * r)]);
  if (same) return;
  // Every rank's arguments to rank 0, which names what differs.
  int len = (int)args.size();
  std::vector<int> lens((size_t)g_ranks), at((size_t)g_ranks, 0);
  check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "comparing the ranks' programs");
  for (int r = 1; r < g_ranks; ++r) at[(size_t)r] = at[(size_t)r - 1] + lens[(size_t)r - 1];
  std::string every((size_t)(g_rank == 0 ? at.back() + lens.back() : 0), '\0');
  check(MPI_Gatherv(args.data(), len, MPI_CHAR, every.data(), lens.data(), at.data(), MPI_CHAR, 0, MPI_COMM_WORLD),
        "comparing the ranks' programs");
  if (g_rank == 0) {
    std::string msg;
    for (int r = 1; r < g_ranks; ++r) {
      const int64_t *o = &all[(size_t)(3 * r)];
      std::string what;
      if (o[1] != all[1]) {
        what += "another executable (";
        what += std::to_string(o[1]);
        what += " bytes, rank 0's ";
        what += std::to_string(all[1]);
        what += ')';
      } else if (o[0] != all[0]) {
        what += "another executable (as large, other bytes)";
      }
      if (o[2] != all[2]) {
        if (!what.empty()) what += " and ";
        // (`--steps=5`, rank 0's `--steps=3`)
        auto quoted = [&](const std::string &text, size_t from, size_t n) {
          if (n == 0) return what += "none";
          what += '`';
          what.append(text, from, n);
          return what += '`';
        };
        what += "other arguments (";
        quoted(every, (size_t)at[(size_t)r], (size_t)lens[(size_t)r]);
        what += ", rank 0's ";
        quoted(args, 0, args.size());
        what += ')';
      }
      if (what.empty()) continue;
      msg += "\n  rank ";
      msg += std::to_string(r);
      msg += " runs ";
      msg += what;
    }
    std::fflush(stdout);
    std::fprintf(stderr,
                 "shmap runtime error: the ranks of this job do not all run the same program with the same arguments, "
                 "so their collectives would not match:%s\nStart every rank with the same executable and arguments "
                 "(mpirun -np N ./prog ARGS)\n",
                 msg.c_str());
    std::fflush(stderr);
  }
  MPI_Barrier(MPI_COMM_WORLD);  // (rank 0 has reported)
  MPI_Finalize();
  std::exit(2);
}

int ranks_take_arg(const char *prog, const char *arg) {
  if (std::strcmp(arg, "--check-collectives") == 0) {
    g_check = true;
    return 1;
  }
  if (std::strcmp(arg, "--reduce-locally-first") == 0) {
    g_local_first = true;
    return 1;
  }
  const char *flag = "--devices-per-rank=";
  if (std::strncmp(arg, flag, std::strlen(flag)) != 0) return 0;
  const char *v = arg + std::strlen(flag);
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || n < 1 || n > SHM_MAX_DEVICES) {
    std::fprintf(stderr, "%s: error: --devices-per-rank=%s is not a number of devices from 1 to %d\n", prog, v,
                 SHM_MAX_DEVICES);
    return -1;
  }
  g_per_rank = (int)n;
  return 1;
}

const char *ranks_usage() {
  return "  --devices-per-rank=N   mesh devices each MPI rank runs as threads (default 1); every mesh\n"
         "            must have (ranks x N) devices\n"
         "  --check-collectives   the ranks compare each collective before running it (a mismatch is\n"
         "            an error naming the ranks, not a hang)\n"
         "  --reduce-locally-first   with several devices per rank, an all-reduce adds up each rank's\n"
         "            devices before their data travels: less traffic, but float sums may round\n"
         "            differently from one process (the same for every run of one layout)\n";
}

namespace {
// A job of one rank runs every pipeline group's stage program itself, each on a thread of its
// own: there a stage shmap's devices all lie on this rank, however many it has (set_group_devices).
thread_local int64_t t_group_devices = 0;

std::string mesh_problem(int64_t ndev) {
  if (ndev == (int64_t)g_ranks * g_per_rank) return "";
  if (t_group_devices > 0 && ndev == t_group_devices) return "";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "the mesh has %lld devices, but the job runs %d ranks x %d devices per rank = %d: start it with "
                "mpirun -np R and --devices-per-rank=D where R x D = %lld",
                (long long)ndev, g_ranks, g_per_rank, g_ranks * g_per_rank, (long long)ndev);
  return buf;
}
} // namespace

std::string layout_problem() {
  if (!&shm_user_mesh_count) return "";  // no shmap
  if (g_per_rank > 1 && g_thread_level < MPI_THREAD_SERIALIZED)
    return "--devices-per-rank=" + std::to_string(g_per_rank) +
           " needs an MPI library that lets several threads call it, one at a time (MPI_THREAD_SERIALIZED), which "
           "this one does not provide: run one device per rank";
  for (int32_t i = 0; i < shm_user_mesh_count; ++i)
    if (std::string p = mesh_problem(shm_user_mesh_devices[i]); !p.empty()) return p;
  return "";
}

void ranks_finish() { MPI_Finalize(); }
void (*ranks_abort_hook)(int code) = nullptr;  // (one process only: unused here)
void ranks_abort(int code) {
  // An error in host code happens on every rank at once: the others give rank 0 (which writes
  // the program's output, flushed before this) a moment to report first, as one process would.
  if (g_world_rank != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}
bool reduce_locally_first() { return g_local_first; }
int ranks_sharing_cores() { return g_sharing; }
int rank_id() { return g_rank; }
int rank_count() { return g_ranks; }
const char *rank_prefix() { return g_prefix; }

void local_devices(int64_t ndev, int *first, int *count) {
  if (std::string p = mesh_problem(ndev); !p.empty()) fatalf("%s", p.c_str());
  if (t_group_devices > 0 && g_ranks == 1) {
    *first = 0;
    *count = (int)ndev;
    return;
  }
  *first = g_rank * g_per_rank;
  *count = g_per_rank;
}

void set_group_devices(int64_t devices) { t_group_devices = devices; }

namespace {
MPI_Comm group_comm(const Group &g, const std::vector<int64_t> &key);
struct Peers;
void exchange_in_messages(const Peers &peers, const std::vector<const char *> &send,
                          const std::vector<int64_t> &send_bytes, const std::vector<char *> &recv,
                          const std::vector<int64_t> &recv_bytes, const char *what);
} // namespace

// --check-collectives: the collectives of ranks world[0..n) (`all`: kind, bytes, axes of each),
// each compared with the first rank's.
static void compare_collectives(const std::vector<int64_t> &all, const std::vector<int> &world) {
  const int n = (int)world.size();
  auto describe = [&](int r) {
    const int64_t *s = &all[(size_t)(3 * r)];
    std::string axes;
    for (int a = 0; a < 63; ++a)
      if (s[2] >> a & 1) axes += (axes.empty() ? "" : ", ") + std::to_string(a);
    return "rank " + std::to_string(world[(size_t)r]) + " runs " + kind_name((int)s[0]) + " over mesh axes (" + axes +
           ") of " + std::to_string(s[1]) + " bytes a device";
  };
  for (int r = 1; r < n; ++r)
    if (!std::equal(&all[0], &all[3], &all[(size_t)(3 * r)]))
      fatalf("--check-collectives: the ranks disagree on a collective: %s, %s", describe(0).c_str(),
             describe(r).c_str());
}

// --check-collectives: every rank's collective on `comm` (whose rank j is world rank
// world[j]), compared with its first rank's.
static void check_same_collective(const CollectiveSig &sig, MPI_Comm comm, const std::vector<int> &world) {
  std::vector<int64_t> all(3 * world.size());
  int64_t mine[3] = {sig.kind, sig.bytes, sig.axes};
  check(MPI_Allgather(mine, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, comm), "--check-collectives");
  compare_collectives(all, world);
}

bool checking_collectives() { return g_check; }

void check_collective(const CollectiveSig &sig, const Group &g, const std::vector<int64_t> &key) {
  if (g_check) check_same_collective(sig, group_comm(g, key), g.member);  // (device ids are ranks here)
}


namespace {

// The communicator of this rank's group for `key` (a mesh and axes; one device per rank, so a
// group's members are ranks g.member[0..n), in group order). Made at the first collective
// with this key by MPI_Comm_create_group, which only the group's members take part in: groups
// progress independently (sync.h), so other ranks may be at other collectives, or past the
// last one (MPI_Comm_split, collective over every rank, would pair unrelated calls).
MPI_Comm group_comm(const Group &g, const std::vector<int64_t> &key) {
  static std::map<std::pair<int, std::vector<int64_t>>, MPI_Comm> comms;
  auto it = comms.find({g_world_id, key});
  if (it != comms.end()) return it->second;
  MPI_Group world, members;
  MPI_Comm_group(g_world, &world);
  MPI_Group_incl(world, g.n, g.member.data(), &members);
  // (the tag tells apart the creations for different axes that one rank's groups may overlap in)
  int tag = 0;
  for (int64_t k : key) tag = (int)((tag * 131u + (uint64_t)k) % 32749u);
  MPI_Comm comm;
  check(MPI_Comm_create_group(g_world, members, tag, &comm), "making a communicator for a mesh axis group");
  MPI_Group_free(&members);
  MPI_Group_free(&world);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  comms[{g_world_id, key}] = comm;
  return comm;
}

// MPI's counts and displacements are ints: one call moves at most INT_MAX bytes of MPI_BYTE.
// Larger transfers go as several messages of at most max_message() bytes each, which
// SHMAP_MPI_MAX_MESSAGE lowers so the tests run that path on small arrays.
int64_t max_message() {
  static const int64_t cap = [] {
    const char *e = std::getenv("SHMAP_MPI_MAX_MESSAGE");
    const long long v = e ? std::atoll(e) : 0;
    return v > 0 && v < INT_MAX ? (int64_t)v : (int64_t)INT_MAX;
  }();
  return cap;
}

int64_t total_of(const std::vector<int64_t> &bytes) {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

// Where each member's bytes start when they lie one after another.
std::vector<int64_t> offsets_of(const std::vector<int64_t> &bytes) {
  std::vector<int64_t> at(bytes.size(), 0);
  for (size_t j = 1; j < bytes.size(); ++j) at[j] = at[j - 1] + bytes[j - 1];
  return at;
}

// Counts and displacements as MPI's ints (their total fits: every one does).
void ints(const std::vector<int64_t> &bytes, std::vector<int> &n, std::vector<int> &at) {
  n.assign(bytes.begin(), bytes.end());
  const std::vector<int64_t> at64 = offsets_of(bytes);
  at.assign(at64.begin(), at64.end());
}

constexpr int kMessageTag = 7;

// The other ends of an exchange: index j of its arrays is rank ranks[j] of `comm` (ranks null:
// rank j), its messages carry `tag`. With several devices per rank, groups exchange on
// MPI_COMM_WORLD, each with a tag of its own (RankSet): messages of two groups between the same
// ranks cannot be mistaken for each other, and no communicator has to be made (which would
// wait for other ranks while holding the rank's MPI lock, below).
struct Peers {
  MPI_Comm comm = g_world;
  int tag = kMessageTag;
  const std::vector<int> *ranks = nullptr;
  int rank(size_t j) const { return ranks ? (*ranks)[j] : (int)j; }
};

// With several devices per rank, several threads of the rank exchange at once (each group's
// lead, collective_protocol.h), and a thread waiting in MPI_Waitall spins: with more device
// threads than cores, k spinning leads starve the threads whose data they wait for (here or on
// another rank of the machine). So the rank's MPI calls are serialized (MPI_THREAD_SERIALIZED)
// under g_mpi, and waiting is shared: one waiting thread at a time (the driver) polls MPI for
// every waiting thread's requests, spinning briefly, then giving its core away between polls
// (sched_yield); the others sleep until theirs are done or the driver's role passes to them.
// (On the 2-core machine, 2 ranks x 2 devices: without the yield the Transformer's steps took
// 4x as long; with it, 2000 psums over a group spanning both ranks take 25% less than when a
// rank's first device moved every group's data, the Transformer's step about 35% more, as a
// rank's groups send a message each where there was one.)
std::mutex g_mpi;
std::condition_variable g_mpi_done;
struct Waiting {
  std::vector<MPI_Request> *requests;
  bool done;
};
std::vector<Waiting *> g_waiting;  // (under g_mpi)
bool g_driving = false;             // (under g_mpi) some thread polls for everyone

bool shared_progress() { return g_per_rank > 1; }

void wait_for(std::vector<MPI_Request> &requests, const char *what) {
  if (!shared_progress()) return check(MPI_Waitall((int)requests.size(), requests.data(), MPI_STATUSES_IGNORE), what);
  std::unique_lock<std::mutex> lk(g_mpi);
  Waiting me{&requests, false};
  g_waiting.push_back(&me);
  auto poll_all = [&] {  // (under g_mpi) tests every waiting thread's requests, wakes the finished
    bool woke = false;
    for (Waiting *w : g_waiting) {
      if (w->done) continue;
      int flag = 0;
      check(MPI_Testall((int)w->requests->size(), w->requests->data(), &flag, MPI_STATUSES_IGNORE), what);
      if (flag) w->done = woke = true;
    }
    if (woke) g_mpi_done.notify_all();
  };
  poll_all();
  while (!me.done) {
    if (g_driving) {
      g_mpi_done.wait(lk);
      continue;
    }
    g_driving = true;
    for (int polls = 0; !me.done; ++polls) {
      lk.unlock();  // (other threads post their messages meanwhile)
      if (polls < 200) for (int i = 0; i < 64; ++i) _mm_pause();
      else sched_yield();
      lk.lock();
      poll_all();
    }
    g_driving = false;
    g_mpi_done.notify_all();  // (a thread still waiting takes the role over)
  }
  g_waiting.erase(std::find(g_waiting.begin(), g_waiting.end(), &me));
}

// A collective as point-to-point messages of at most max_message() bytes (the all-to-alls
// always; the others when too large for one MPI call): send_bytes[j] bytes at send[j] to member
// j, recv_bytes[j] bytes from member j into recv[j] (this member's own: copied). Messages
// between two ranks with one communicator and tag arrive in the order sent, so the pieces of a
// transfer land in order.
void exchange_in_messages(const Peers &peers, const std::vector<const char *> &send,
                          const std::vector<int64_t> &send_bytes, const std::vector<char *> &recv,
                          const std::vector<int64_t> &recv_bytes, const char *what) {
  const int64_t cap = max_message();
  std::vector<MPI_Request> requests;
  size_t me = 0;
  {
    std::unique_lock<std::mutex> lk(g_mpi, std::defer_lock);
    if (shared_progress()) lk.lock();
    if (peers.ranks) {
      me = (size_t)(std::lower_bound(peers.ranks->begin(), peers.ranks->end(), g_rank) - peers.ranks->begin());
    } else {
      int r = 0;
      MPI_Comm_rank(peers.comm, &r);
      me = (size_t)r;
    }
    for (size_t j = 0; j < recv_bytes.size(); ++j)
      for (int64_t o = 0; j != me && o < recv_bytes[j]; o += cap) {
        requests.emplace_back();
        check(MPI_Irecv(recv[j] + o, (int)std::min(cap, recv_bytes[j] - o), MPI_BYTE, peers.rank(j), peers.tag,
                        peers.comm, &requests.back()),
              what);
      }
    for (size_t j = 0; j < send_bytes.size(); ++j)
      for (int64_t o = 0; j != me && o < send_bytes[j]; o += cap) {
        requests.emplace_back();
        check(MPI_Isend(send[j] + o, (int)std::min(cap, send_bytes[j] - o), MPI_BYTE, peers.rank(j), peers.tag,
                        peers.comm, &requests.back()),
              what);
      }
  }
  if (send_bytes[me] > 0) std::memcpy(recv[me], send[me], (size_t)send_bytes[me]);
  wait_for(requests, what);
}

// MPI_Alltoallv of byte blocks lying one after another in send and recv, as point-to-point
// messages (what Open MPI's MPI_Alltoallv does itself, its "basic linear" algorithm), so that
// no count or displacement needs to fit an int. (Choosing MPI_Alltoallv when this rank's
// counts fit would need every member to choose alike, and a member knows only its own.)
void alltoallv(const Peers &peers, const void *send, const std::vector<int64_t> &send_bytes, void *recv,
               const std::vector<int64_t> &recv_bytes, const char *what) {
  const std::vector<int64_t> sat = offsets_of(send_bytes), rat = offsets_of(recv_bytes);
  std::vector<const char *> s(send_bytes.size());
  std::vector<char *> r(recv_bytes.size());
  for (size_t j = 0; j < s.size(); ++j) s[j] = (const char *)send + sat[j];
  for (size_t j = 0; j < r.size(); ++j) r[j] = (char *)recv + rat[j];
  exchange_in_messages(peers, s, send_bytes, r, recv_bytes, what);
}

} // namespace

namespace {
// A group's message tag (RankSet::tag; `k` 0 for its data, 1 for --check-collectives): above
// kMessageTag's, wrapping at the library's bound (at least 32767 by the standard).
int group_tag(const RankSet &set, int k) {
  static const int tag_ub = [] {
    int *ub = nullptr, found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    return found && ub && *ub > 32767 ? *ub : 32767;
  }();
  return 16 + (int)((2 * (uint64_t)set.tag + (uint64_t)k) % (uint64_t)(tag_ub - 15));
}
} // namespace

// The group's ranks send each other their collective (each rank's to each other, as messages
// on the group's tag, as the group's data goes) and compare it with the first rank's.
void check_collective(const CollectiveSig &sig, const RankSet &among) {
  if (!g_check) return;
  const size_t n = among.ranks.size();
  std::vector<int64_t> all(3 * n);
  const int64_t mine[3] = {sig.kind, sig.bytes, sig.axes};
  std::vector<const char *> send(n, (const char *)mine);
  std::vector<char *> recv(n);
  for (size_t j = 0; j < n; ++j) recv[j] = (char *)&all[3 * j];
  exchange_in_messages(Peers{g_world, group_tag(among, 1), &among.ranks}, send,
                       std::vector<int64_t>(n, (int64_t)sizeof mine), recv, std::vector<int64_t>(n, (int64_t)sizeof mine),
                       "--check-collectives");
  compare_collectives(all, among.ranks);
}

void exchange_pieces(const std::vector<Piece> &pieces, const RankSet *among) {
  if (pieces.empty()) return;
  // Index i of the exchange is world rank ranks[i]: every rank, or the set's.
  const Peers peers = among ? Peers{g_world, group_tag(*among, 0), &among->ranks} : Peers{};
  const int n = among ? (int)among->ranks.size() : g_ranks;
  auto index_of = [&](int rank) {
    if (!among) return rank;
    auto it = std::lower_bound(among->ranks.begin(), among->ranks.end(), rank);
    if (it == among->ranks.end() || *it != rank) fatalf("exchange_pieces: rank %d is not one of the group's", rank);
    return (int)(it - among->ranks.begin());
  };
  std::vector<int64_t> out_bytes((size_t)n, 0), in_bytes((size_t)n, 0);
  for (const Piece &p : pieces) {
    if (p.from == g_rank) out_bytes[(size_t)index_of(p.to)] += p.bytes;
    if (p.to == g_rank) in_bytes[(size_t)index_of(p.from)] += p.bytes;
  }
  // Packed by destination rank, each rank's pieces in list order (which its receiver shares).
  const std::vector<int64_t> sat = offsets_of(out_bytes), rat = offsets_of(in_bytes);
  // (uninitialized: every byte is written before it is read)
  std::unique_ptr<char[]> sendbuf(new char[(size_t)total_of(out_bytes)]), recvbuf(new char[(size_t)total_of(in_bytes)]);
  std::vector<int64_t> at = sat;
  int64_t dense[kMaxRank];
  for (const Piece &p : pieces)
    if (p.from == g_rank && p.bytes > 0) {
      const size_t to_index = (size_t)index_of(p.to);
      char *to = sendbuf.get() + at[to_index];
      if (p.rank > 0) {
        row_major_strides(p.rank, p.shape, dense);
        copy_strided(p.esize, p.rank, p.shape, p.send, p.strides, to, dense);
      } else {
        std::memcpy(to, p.send, (size_t)p.bytes);
      }
      at[to_index] += p.bytes;
    }
  alltoallv(peers, sendbuf.get(), out_bytes, recvbuf.get(), in_bytes, "a collective between ranks (MPI_Isend / MPI_Irecv)");
  at = rat;
  for (const Piece &p : pieces)
    if (p.to == g_rank && p.bytes > 0) {
      const size_t from_index = (size_t)index_of(p.from);
      const char *from = recvbuf.get() + at[from_index];
      if (p.rank > 0) {
        row_major_strides(p.rank, p.shape, dense);
        copy_strided(p.esize, p.rank, p.shape, from, dense, p.recv, p.strides);
      } else {
        std::memcpy(p.recv, from, (size_t)p.bytes);
      }
      at[from_index] += p.bytes;
    }
}

void group_alltoallv(const Group &g, const std::vector<int64_t> &key, const void *send, const std::vector<int64_t> &bytes, void *recv,
                     const std::vector<int64_t> &recv_bytes) {
  alltoallv(Peers{group_comm(g, key)}, send, bytes, recv, recv_bytes, "a collective between ranks (MPI_Isend / MPI_Irecv)");
}

void group_exchange(const Group &g, const std::vector<int64_t> &key, const std::vector<const char *> &send,
                    const std::vector<int64_t> &send_bytes, const std::vector<char *> &recv,
                    const std::vector<int64_t> &recv_bytes) {
  exchange_in_messages(Peers{group_comm(g, key)}, send, send_bytes, recv, recv_bytes,
                       "a collective between ranks (MPI_Isend / MPI_Irecv)");
}

void group_alltoall(const Group &g, const std::vector<int64_t> &key, const void *send, int64_t block, void *recv) {
  // (every member passes the same block, so every member takes the same branch)
  if (g.n * block <= max_message()) {
    check(MPI_Alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, group_comm(g, key)),
          "a collective between ranks (MPI_Alltoall)");
    return;
  }
  const std::vector<int64_t> bytes((size_t)g.n, block);
  alltoallv(Peers{group_comm(g, key)}, send, bytes, recv, bytes, "a collective between ranks (MPI_Isend / MPI_Irecv)");
}

void group_allgatherv(const Group &g, const std::vector<int64_t> &key, void *buf, const std::vector<int64_t> &bytes,
                      const void *mine) {
  const char *what = "a collective between ranks (MPI_Allgatherv)";
  // Equal blocks (every member has the same `bytes`, so each takes the same branch): the
  // collective a hand-written program calls, MPI_Allgather, whose algorithms Open MPI tunes
  // apart from MPI_Allgatherv's, sending from `mine` as such a program does.
  const bool equal = std::all_of(bytes.begin(), bytes.end(), [&](int64_t b) { return b == bytes[0]; });
  if (equal && total_of(bytes) <= max_message()) {
    check(MPI_Allgather(mine ? mine : MPI_IN_PLACE, mine ? (int)bytes[0] : 0, mine ? MPI_BYTE : MPI_DATATYPE_NULL, buf,
                        (int)bytes[0], MPI_BYTE, group_comm(g, key)),
          "a collective between ranks (MPI_Allgather)");
    return;
  }
  if (mine) std::memcpy((char *)buf + offsets_of(bytes)[(size_t)g.me], mine, (size_t)bytes[(size_t)g.me]);
  if (total_of(bytes) <= max_message()) {
    std::vector<int> n, at;
    ints(bytes, n, at);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, n.data(), at.data(), MPI_BYTE, group_comm(g, key)),
          what);
    return;
  }
  // (this member's block to every other; every other's into its place)
  const std::vector<int64_t> at = offsets_of(bytes);
  std::vector<const char *> send((size_t)g.n, (const char *)buf + at[(size_t)g.me]);
  std::vector<int64_t> send_bytes((size_t)g.n, bytes[(size_t)g.me]);
  std::vector<char *> recv((size_t)g.n);
  for (int j = 0; j < g.n; ++j) recv[(size_t)j] = (char *)buf + at[(size_t)j];
  send_bytes[(size_t)g.me] = 0;  // (already in place)
  exchange_in_messages(Peers{group_comm(g, key)}, send, send_bytes, recv, bytes, what);
}

bool group_allreduce_pair(const Group &g, const std::vector<int64_t> &key, int32_t dtype, int32_t op, const void *in,
                          void *out, int64_t n) {
  if (g.n != 2 || n * dtype_size(dtype) > max_message()) return false;
  const bool is_float = dtype == SHM_F32 || dtype == SHM_F64;
  MPI_Datatype type = dtype == SHM_F32 ? MPI_FLOAT : dtype == SHM_F64 ? MPI_DOUBLE
                    : dtype == SHM_I32 ? MPI_INT32_T : dtype == SHM_I64 ? MPI_INT64_T : MPI_DATATYPE_NULL;
  // (a float max or min is not MPI's: numpy's propagates a NaN)
  MPI_Op mpi_op = op == SHM_REDUCE_SUM ? MPI_SUM : op == SHM_REDUCE_PROD ? MPI_PROD
                : is_float ? MPI_OP_NULL : op == SHM_REDUCE_MAX ? MPI_MAX : op == SHM_REDUCE_MIN ? MPI_MIN : MPI_OP_NULL;
  if (type == MPI_DATATYPE_NULL || mpi_op == MPI_OP_NULL) return false;
  std::vector<char> scratch(out ? 0 : (size_t)(n * dtype_size(dtype)));
  void *result = out ? out : scratch.data();
  check(MPI_Allreduce(in == result ? MPI_IN_PLACE : in, result, (int)n, type, mpi_op, group_comm(g, key)),
        "a collective between ranks (MPI_Allreduce)");
  return true;
}

void group_sendrecv(const Group &g, const std::vector<int64_t> &key, const void *send, int to, void *recv, int from, int64_t bytes) {
  // (in pieces of at most max_message() bytes: sender and receiver count them alike)
  for (int64_t o = 0; o < bytes; o += max_message()) {
    const int n = (int)std::min(max_message(), bytes - o);
    check(MPI_Sendrecv((const char *)send + o, to < 0 ? 0 : n, MPI_BYTE, to < 0 ? MPI_PROC_NULL : to, 0,
                       (char *)recv + o, from < 0 ? 0 : n, MPI_BYTE, from < 0 ? MPI_PROC_NULL : from, 0,
                       group_comm(g, key), MPI_STATUS_IGNORE),
          "ppermute between ranks (MPI_Sendrecv)");
  }
}

void group_bcast(const Group &g, const std::vector<int64_t> &key, void *buf, int64_t bytes, int root) {
  for (int64_t o = 0; o < bytes; o += max_message())
    check(MPI_Bcast((char *)buf + o, (int)std::min(max_message(), bytes - o), MPI_BYTE, root, group_comm(g, key)),
          "a broadcast between ranks (MPI_Bcast)");
}

void group_gather(const Group &g, const std::vector<int64_t> &key, const void *send, void *recv, int64_t bytes, int root) {
  const char *what = "a gather between ranks (MPI_Gather)";
  if (g.n * bytes <= max_message()) {
    check(MPI_Gather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, root, group_comm(g, key)), what);
    return;
  }
  std::vector<const char *> s((size_t)g.n, (const char *)send);
  std::vector<int64_t> send_bytes((size_t)g.n, 0), recv_bytes((size_t)g.n, 0);
  std::vector<char *> r((size_t)g.n, nullptr);
  send_bytes[(size_t)root] = bytes;
  for (int j = 0; j < g.n && g.me == root; ++j) {
    r[(size_t)j] = (char *)recv + j * bytes;
    recv_bytes[(size_t)j] = bytes;
  }
  exchange_in_messages(Peers{group_comm(g, key)}, s, send_bytes, r, recv_bytes, what);
}

void group_scatter(const Group &g, const std::vector<int64_t> &key, const void *send, void *recv, int64_t bytes, int root) {
  const char *what = "a scatter between ranks (MPI_Scatter)";
  if (g.n * bytes <= max_message()) {
    check(MPI_Scatter(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, root, group_comm(g, key)), what);
    return;
  }
  std::vector<const char *> s((size_t)g.n, nullptr);
  std::vector<int64_t> send_bytes((size_t)g.n, 0), recv_bytes((size_t)g.n, 0);
  std::vector<char *> r((size_t)g.n, (char *)recv);
  recv_bytes[(size_t)root] = bytes;
  for (int j = 0; j < g.n && g.me == root; ++j) {
    s[(size_t)j] = (const char *)send + j * bytes;
    send_bytes[(size_t)j] = bytes;
  }
  exchange_in_messages(Peers{group_comm(g, key)}, s, send_bytes, r, recv_bytes, what);
}

void sum_stats_over_ranks(Stats &s) {
  int64_t v[4 * kNumKinds];
  for (int k = 0; k < kNumKinds; ++k) {
    v[4 * k] = s.rows[k].calls;
    v[4 * k + 1] = s.rows[k].bytes_sent;
    v[4 * k + 2] = s.rows[k].bytes_received;
    v[4 * k + 3] = s.rows[k].wait_ns;
  }
  check(MPI_Allreduce(MPI_IN_PLACE, v, 4 * kNumKinds, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "summing --stats");
  for (int k = 0; k < kNumKinds; ++k) {
    s.rows[k].calls = v[4 * k];
    s.rows[k].bytes_sent = v[4 * k + 1];
    s.rows[k].bytes_received = v[4 * k + 2];
    s.rows[k].wait_ns = v[4 * k + 3];
  }
}

void enter_rank_group(const std::vector<int> &ranks) {
  static std::map<std::vector<int>, std::pair<int, MPI_Comm>> comms;  // (made once per group, by its ranks)
  auto it = comms.find(ranks);
  if (it == comms.end()) {
    MPI_Group world, members;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, (int)ranks.size(), ranks.data(), &members);
    MPI_Comm comm;
    check(MPI_Comm_create_group(MPI_COMM_WORLD, members, 32750, &comm), "making a pipeline device group's communicator");
    MPI_Group_free(&members);
    MPI_Group_free(&world);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    it = comms.emplace(ranks, std::make_pair((int)comms.size() + 1, comm)).first;
  }
  g_world_id = it->second.first;
  g_world = it->second.second;
  MPI_Comm_rank(g_world, &g_rank);
  MPI_Comm_size(g_world, &g_ranks);
}

void leave_rank_group() {
  g_world = MPI_COMM_WORLD;
  g_world_id = 0;
  g_rank = g_world_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
}

void ranks_barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "waiting for the other ranks"); }

} // namespace shm

namespace shm {

namespace {
// A channel's tag is its number modulo the tags MPI allows (MPI_TAG_UB + 1, at least 32768;
// SHMAP_MPI_MAX_TAG lowers the bound so the tests run this path): channels beyond them go on
// further communicators of the pipelines' own, so no two channels between two ranks share a
// (communicator, tag) and a message can only match its own receive.
int pipe_tags() {
  static const int n = [] {
    int *ub = nullptr, found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    long long tags = found && ub && *ub >= 32767 ? (long long)*ub + 1 : 32768;
    if (const char *e = std::getenv("SHMAP_MPI_MAX_TAG"); e && *e) tags = std::min(tags, std::atoll(e) + 1);
    return (int)std::max(1LL, std::min(tags, (long long)INT_MAX));
  }();
  return n;
}
std::vector<MPI_Comm> g_pipe_comms;
MPI_Comm pipe_comm(int channel = 0) {
  if (g_pipe_comms.empty()) pipe_prepare(1);
  return g_pipe_comms.at((size_t)(channel / pipe_tags()));
}
int pipe_tag(int channel) { return channel % pipe_tags(); }
struct PendingSend {
  std::vector<char> data;
  MPI_Request request;
};
std::vector<std::unique_ptr<PendingSend>> g_pipe_sends;
} // namespace

void pipe_prepare(int channels) {
  const size_t need = (size_t)std::max(1, (channels + pipe_tags() - 1) / pipe_tags());
  while (g_pipe_comms.size() < need) {
    MPI_Comm c;
    check(MPI_Comm_dup(MPI_COMM_WORLD, &c), "making the pipelines' communicator");
    g_pipe_comms.push_back(c);
  }
}

void pipe_send_to(int rank, int tag, const void *data, int64_t bytes) {
  if (bytes > (int64_t)INT32_MAX) fatalf("a pipeline message of %lld bytes (more than MPI's int count)", (long long)bytes);
  auto p = std::make_unique<PendingSend>();
  p->data.assign((const char *)data, (const char *)data + bytes);
  check(MPI_Isend(p->data.data(), (int)bytes, MPI_BYTE, rank, pipe_tag(tag), pipe_comm(tag), &p->request),
        "a pipeline message (MPI_Isend)");
  g_pipe_sends.push_back(std::move(p));
}

void pipe_recv_from(int rank, int tag, void *dst, int64_t bytes, double timeout) {
  if (bytes > (int64_t)INT32_MAX) fatalf("a pipeline message of %lld bytes (more than MPI's int count)", (long long)bytes);
  MPI_Request request;
  check(MPI_Irecv(dst, (int)bytes, MPI_BYTE, rank, pipe_tag(tag), pipe_comm(tag), &request),
        "a pipeline message (MPI_Irecv)");
  const auto start = std::chrono::steady_clock::now();
  for (int flag = 0;;) {
    MPI_Status status;
    check(MPI_Test(&request, &flag, &status), "a pipeline message (MPI_Test)");
    if (flag) {
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      if (got != bytes)
        fatalf("pipeline message %d from rank %d has %d bytes, the receiver expects %lld", tag, rank, got,
               (long long)bytes);
      return;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout)
      fatalf("a pipeline stage waited more than %g s for message %d from rank %d (SHMAP_COLLECTIVE_TIMEOUT)", timeout,
             tag, rank);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void pipe_sends_done() {
  for (auto &p : g_pipe_sends) check(MPI_Wait(&p->request, MPI_STATUS_IGNORE), "a pipeline message (MPI_Wait)");
  g_pipe_sends.clear();
}

void pipe_bcast(int root, void *buf, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += INT32_MAX) {
    int n = (int)std::min<int64_t>(INT32_MAX, bytes - o);
    check(MPI_Bcast((char *)buf + o, n, MPI_BYTE, root, pipe_comm()), "a pipeline's results (MPI_Bcast)");
  }
}

void pipe_sum_over_ranks(int64_t *v, int n) {
  if (n > 0) check(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, pipe_comm()), "the pipelines' times (MPI_Allreduce)");
}

} // namespace shm
