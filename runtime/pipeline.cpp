// Pipelines: each device group's stage program on its own thread, all at once, and the
// point-to-point messages between them (activations forward, their cotangents backward). A
// message is sent once per run on its own channel: the sender copies it into the channel and
// goes on; the receiver waits for it and copies it out.
#include "pool.h"
#include "ranks.h"
#include "reshard.h"
#include "stats.h"
#include "sync.h"
#include "trace.h"
#include "util.h"

#include "shmap_runtime.h"

#include <chrono>
#include <cstring>
#include <condition_variable>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

namespace shm {
namespace {

struct Channel {
  std::mutex m;
  std::condition_variable cv;
  std::vector<char> data;
  bool full = false;
};

// The run in progress (one at a time: a pipeline runs from host code, which is one thread).
// Under MPI, where each rank's devices lie in one slice of the stage axis, the rank runs that
// group's program alone and trades its messages with its peers: the ranks of the other groups
// at the same place in their group (`peer`).
struct PipelineRun {
  std::vector<std::unique_ptr<Channel>> channels;
  const int32_t *ends = nullptr;      // per channel: its sending and receiving group
  std::vector<std::vector<int>> peer;  // [group][place in group] -> rank; empty: one process
  int place = 0;                       // this rank's place in its group
  int64_t flow_base = 0;               // --trace: message c's arrow is flow_base + c
};
PipelineRun *g_run = nullptr;

// --stats=pipeline: per pipeline (by its label), its runs' wall time and each group's time in
// its steps, waiting for messages within them, and idle between them waiting for messages (a
// step begins once it has received what it reads). The first run warms up (the kernels' first
// calls, the buffers' first pages): where there are more, it is not counted.
struct PipelineTimes {
  std::string label;
  double predicted = 0;
  int64_t runs = 0, wall_ns = 0;
  std::vector<int64_t> step_ns, wait_ns, idle_ns;  // per group
  // per group: the time of its parameters' update (its "update" step, after its last), and from
  // each run's start to the end of its last forward or backward step: the schedule's span
  std::vector<int64_t> update_ns, steps_end_ns;
  std::vector<int64_t> allocations, peak_bytes;    // per group: its thread's shm_allocs, the most it held
  std::vector<int64_t> ran_by;            // per group: how many ranks ran its program
  // per group: the bytes of the pipeline's operands its ranks keep (under MPI, where a rank's
  // devices lie in one group, the rank keeps those alone), of operand_bytes in all
  std::vector<int64_t> kept_bytes;
  int64_t operand_bytes = 0;
  int64_t counted() const { return runs > 1 ? runs - 1 : runs; }  // (the runs the sums hold)
};
std::vector<PipelineTimes> g_times;
thread_local int64_t *t_step_ns = nullptr, *t_wait_ns = nullptr, *t_idle_ns = nullptr;  // this group's counters
thread_local int64_t *t_update_ns = nullptr, *t_steps_end_ns = nullptr;
thread_local std::chrono::steady_clock::time_point t_step_begin, t_run_start;
thread_local bool t_in_step = false;  // between a step's begin and end
constexpr int32_t kUpdateStep = 3;     // shm_pipe_step's kind of a group's update

int64_t since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t).count();
}

// --stats' point_to_point row: a call and its bytes per message sent, its bytes again where
// it is received.
void count_message(int64_t bytes, bool sent) {
  Stats s;
  StatsRow &row = s.rows[kPointToPoint];
  if (sent) row.calls = 1, row.bytes_sent = bytes;
  else row.bytes_received = bytes;
  stats_merge(s);
}

// --stats=pipeline: a receive's wait, in its step's waits or the group's idle time between steps.
struct WaitTimer {
  std::chrono::steady_clock::time_point start;
  ~WaitTimer() {
    if (t_wait_ns) *(t_in_step ? t_wait_ns : t_idle_ns) += since(start);
  }
};

// --trace: a send's or receive's span names its channel and bytes, and ends or starts the
// message's flow arrow.
void trace_message(TraceScope &span, int32_t c, int64_t bytes, bool sent) {
  if (!span.name) return;
  span.args = "\"channel\":" + std::to_string(c) + ",\"bytes\":" + std::to_string(bytes);
  trace_flow("message", sent, g_run->flow_base + c);
}

// Waits (holding lk, on ch.m) until channel c's message has come, stopping with the run.
void wait_for_message(Channel &ch, std::unique_lock<std::mutex> &lk, int32_t c,
                      std::chrono::steady_clock::time_point start, double timeout) {
  while (!ch.cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return ch.full; })) {
    if (stopping()) {
      lk.unlock();
      stop_this_thread();
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout)
      fatalf("a pipeline stage waited more than %g s for message %d (SHMAP_COLLECTIVE_TIMEOUT)", timeout, (int)c);
  }
}

// The pieces between two ranks of a message's ends, worked out once per program (a key of
// every number they depend on: the same message in every run, and its step's in each).
const MessagePlan &message_plan_of(int32_t dtype, int32_t rank, const int64_t *shape, const MessageEnd &from, int s,
                                   const MessageEnd &to, int r) {
  std::vector<int64_t> key{dtype, rank, s, r};
  key.insert(key.end(), shape, shape + rank);
  for (const MessageEnd *e : {&from, &to}) {
    key.push_back(e->ranks);
    key.push_back(e->spec ? e->mesh_rank : 0);
    if (!e->spec) continue;
    key.insert(key.end(), e->mesh_sizes, e->mesh_sizes + e->mesh_rank);
    for (int32_t d = 0, i = 0; d < rank; ++d) {  // (per dimension: its axes' count, then the axes)
      const int32_t n = e->spec[i];
      key.insert(key.end(), e->spec + i, e->spec + i + n + 1);
      i += n + 1;
    }
  }
  static std::mutex m;
  static std::map<std::vector<int64_t>, MessagePlan> plans;
  std::lock_guard<std::mutex> lk(m);
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, message_plan(dtype, rank, shape, from, s, to, r)).first;
  return it->second;
}

Channel &channel(int32_t c, const char *what) {
  if (!g_run) fatalf("%s: no pipeline is running", what);
  if (c < 0 || (size_t)c >= g_run->channels.size())
    fatalf("%s: channel %d of %zu", what, (int)c, g_run->channels.size());
  return *g_run->channels[(size_t)c];
}

} // namespace
} // namespace shm

namespace shm {
namespace {

// Under MPI: which ranks run each group, where every rank's devices lie in one group (`mine`: this
// rank's group, `place` its place among the group's ranks); empty where they do not.
std::vector<std::vector<int>> rank_groups(int32_t groups, int32_t devices, const int32_t *device_group, int &mine,
                                          int &place) {
  const int ranks = rank_count();
  if (ranks <= 1 || devices < 1 || !device_group || devices % ranks != 0) return {};
  const int64_t per = devices / ranks;
  std::vector<std::vector<int>> of((size_t)groups);
  for (int r = 0; r < ranks; ++r) {
    const int32_t g = device_group[r * per];
    if (g < 0 || g >= groups) return {};
    for (int64_t d = r * per; d < (r + 1) * per; ++d)
      if (device_group[d] != g) return {};
    if (r == rank_id()) {
      mine = (int)g;
      place = (int)of[(size_t)g].size();
    }
    of[(size_t)g].push_back(r);
  }
  for (const auto &ranksOf : of)
    if (ranksOf.empty()) return {};
  return of;
}

// Each group's device count.
std::vector<int64_t> group_sizes(int32_t groups, int32_t devices, const int32_t *device_group) {
  std::vector<int64_t> n((size_t)groups, 0);
  for (int32_t d = 0; d < devices; ++d)
    if (device_group[d] >= 0 && device_group[d] < groups) ++n[(size_t)device_group[d]];
  return n;
}

} // namespace
} // namespace shm

namespace shm {
namespace {

// Whether this rank keeps group `group`'s values (it runs the group's program, or every
// group's: one process), and the ranks of each group under MPI (`peer`; empty: one process).
bool keeps_group(int32_t groups, int32_t devices, const int32_t *device_groups, int32_t group,
                 std::vector<std::vector<int>> &peer, const char *what) {
  if (group < 0 || group >= groups) fatalf("%s: group %d of %d", what, (int)group, (int)groups);
  int mine = 0, place = 0;
  peer = rank_groups(groups, devices, device_groups, mine, place);
  return peer.empty() || mine == group;
}

} // namespace
} // namespace shm

extern "C" int64_t shm_pipe_group_bytes(int32_t groups, int32_t devices, const int32_t *device_groups, int32_t group,
                                        int64_t bytes) {
  using namespace shm;
  SHM_GUARD_BEGIN
  std::vector<std::vector<int>> peer;
  if (!keeps_group(groups, devices, device_groups, group, peer, "shm_pipe_group_bytes")) bytes = 0;
  SHM_GUARD_END("shm_pipe_group_bytes")
  return bytes;
}

extern "C" void shm_pipe_from_group(int32_t groups, int32_t devices, const int32_t *device_groups, int32_t group,
                                    const void *kept, void *whole, int64_t bytes) {
  using namespace shm;
  SHM_GUARD_BEGIN
  std::vector<std::vector<int>> peer;
  if (keeps_group(groups, devices, device_groups, group, peer, "shm_pipe_from_group")) std::memcpy(whole, kept, (size_t)bytes);
  if (!peer.empty()) pipe_bcast(peer[(size_t)group][0], whole, bytes);
  SHM_GUARD_END("shm_pipe_from_group")
}

extern "C" void shm_run_pipeline(int32_t groups, const shm_fn *bodies, int32_t nin, void **ins,
                                 const int64_t *in_bytes, const int32_t *in_groups, const int32_t *nouts, void **outs, const int64_t *out_bytes, int32_t channels,
                                 const int32_t *channel_ends, int32_t devices, const int32_t *device_groups,
                                 const char *label, double predicted_bubble) {
  using namespace shm;
  SHM_GUARD_BEGIN
  if (groups < 1 || !bodies || nin < 0 || channels < 0) fatalf("shm_run_pipeline: bad arguments");
  if (g_run) fatalf("shm_run_pipeline: a pipeline is already running");
  PipelineRun run;
  for (int32_t c = 0; c < channels; ++c) run.channels.push_back(std::make_unique<Channel>());
  run.ends = channel_ends;
  static int64_t flows = 0;  // (every run's arrows numbered apart; every rank numbers them alike)
  run.flow_base = flows;
  flows += channels;
  int mine = 0;
  run.peer = rank_groups(groups, devices, device_groups, mine, run.place);
  const std::vector<int64_t> sizes = group_sizes(groups, devices, device_groups);
  const bool equal = std::all_of(sizes.begin(), sizes.end(), [&](int64_t n) { return n == sizes[0]; });
  if (run.peer.empty() && rank_count() > 1 && !equal)
    fatalf("pipeline %s: its device groups differ in size, so each rank's devices must lie in one group, which %d "
           "devices over %d ranks do not: run a rank per device, or --devices-per-rank=D dividing every group's devices",
           label ? label : "", (int)devices, rank_count());
  g_run = &run;
  std::vector<void **> outsOf((size_t)groups);
  for (int32_t g = 0, next = 0; g < groups; ++g) {
    outsOf[(size_t)g] = outs + next;
    next += nouts[g];
  }
  PipelineTimes *times = nullptr;
  if (g_stats_pipeline) {
    const std::string name = label ? label : "pipeline";
    for (PipelineTimes &t : g_times)
      if (t.label == name) times = &t;
    if (!times) {
      const std::vector<int64_t> zeros((size_t)groups);
      g_times.push_back({name, predicted_bubble, 0, 0, zeros, zeros, zeros, zeros, zeros, zeros, zeros, {}, zeros, 0});
      times = &g_times.back();
      for (int32_t k = 0; k < nin; ++k) {
        times->operand_bytes += in_bytes[k];
        for (int32_t g = 0; g < groups; ++g)
          if (in_groups[k] < 0 || in_groups[k] == g) times->kept_bytes[(size_t)g] += in_bytes[k];
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> run_step_ns((size_t)groups), run_wait_ns((size_t)groups), run_idle_ns((size_t)groups);
  std::vector<int64_t> run_update_ns((size_t)groups), run_steps_end_ns((size_t)groups);
  std::vector<double> program_end((size_t)groups, 0);  // --trace: when each group's program ended
  std::vector<HostMemory> memory((size_t)groups);      // --stats=pipeline: each group's host memory
  // (group 0 on this thread; the others on threads of their own, joined before returning; each
  // records its spans on a track of its own, and its kernels use its share of the cores)
  const int cores = usable_cores(), sharing = run.peer.empty() ? groups : 1;  // (groups running here at once)
  auto program = [&](int32_t g) {
    const int place = run.peer.empty() ? g : 0;
    set_thread_team(std::max(1, cores / sharing + (place < cores % sharing ? 1 : 0)));
    if (times) {
      t_step_ns = &run_step_ns[(size_t)g];
      t_wait_ns = &run_wait_ns[(size_t)g];
      t_idle_ns = &run_idle_ns[(size_t)g];
      t_update_ns = &run_update_ns[(size_t)g];
      t_steps_end_ns = &run_steps_end_ns[(size_t)g];
      t_run_start = start;
    }
    set_pipeline_group(g);  // (its shmaps and kernels on the group's own device threads)
    if (run.peer.empty() && rank_count() == 1)  // (under MPI, a job of one rank: every group here)
      set_group_devices(sizes[(size_t)g]);
    TraceTrack track;  // (a stage program runs from host code: afterwards the thread records on the host's again)
    if (g_tracing) set_current_track(&track);
    if (times) t_host_memory = &memory[(size_t)g];
    bodies[g](nullptr, outsOf[(size_t)g], ins);
    t_host_memory = nullptr;
    if (g_tracing) {
      program_end[(size_t)g] = trace_now();
      set_current_track(nullptr);
      trace_merge_group(g, track);
    }
    t_step_ns = t_wait_ns = t_idle_ns = t_update_ns = t_steps_end_ns = nullptr;
    set_thread_team(0);
    set_pipeline_group(-1);
    set_group_devices(0);
  };
  if (!run.peer.empty()) {
    // This rank's group alone, with every core, its stage shmaps on the group's ranks; then
    // every group's results from its first rank.
    pipe_prepare(channels);
    enter_rank_group(run.peer[(size_t)mine]);
    program(mine);
    leave_rank_group();
    pipe_sends_done();
    for (int32_t g = 0, next = 0; g < groups; ++g)
      for (int32_t j = 0; j < nouts[g]; ++j, ++next)  // (out_bytes 0: kept by the group's ranks)
        if (out_bytes[next] > 0) pipe_bcast(run.peer[(size_t)g][0], outs[next], out_bytes[next]);
  } else {
    std::vector<std::thread> threads;
    for (int32_t g = 1; g < groups; ++g)
      threads.emplace_back([&, g] {
        SHM_GUARD_BEGIN
        program(g);
        SHM_GUARD_END("pipeline stage program")
      });
    program(0);
    for (std::thread &t : threads) t.join();
  }
  g_run = nullptr;
  if (g_tracing)  // each group idle from the end of its program until the pipeline's end (it drains)
    for (int32_t g = 0; g < groups; ++g) {
      if (program_end[(size_t)g] == 0) continue;  // (under MPI: another rank's group)
      TraceTrack drain;
      set_current_track(&drain);
      trace_span("idle (the pipeline drains)", "idle", program_end[(size_t)g]);
      set_current_track(nullptr);
      trace_merge_group(g, drain);
    }
  if (times) {
    times->ran_by.assign((size_t)groups, rank_count());
    for (size_t g = 0; g < run.peer.size(); ++g) times->ran_by[g] = (int64_t)run.peer[g].size();
    if (++times->runs == 2) {  // (the first run is forgotten once a second one is counted)
      times->wall_ns = 0;
      std::fill(times->step_ns.begin(), times->step_ns.end(), 0);
      std::fill(times->wait_ns.begin(), times->wait_ns.end(), 0);
      std::fill(times->idle_ns.begin(), times->idle_ns.end(), 0);
      std::fill(times->update_ns.begin(), times->update_ns.end(), 0);
      std::fill(times->steps_end_ns.begin(), times->steps_end_ns.end(), 0);
      std::fill(times->allocations.begin(), times->allocations.end(), 0);
    }
    times->wall_ns += since(start);
    for (int32_t g = 0; g < groups; ++g) {
      times->step_ns[(size_t)g] += run_step_ns[(size_t)g];
      times->wait_ns[(size_t)g] += run_wait_ns[(size_t)g];
      times->idle_ns[(size_t)g] += run_idle_ns[(size_t)g];
      times->update_ns[(size_t)g] += run_update_ns[(size_t)g];
      times->steps_end_ns[(size_t)g] += run_steps_end_ns[(size_t)g];
      times->allocations[(size_t)g] += memory[(size_t)g].allocations;
      times->peak_bytes[(size_t)g] = std::max(times->peak_bytes[(size_t)g], memory[(size_t)g].peak);
    }
  }
  SHM_GUARD_END("shm_run_pipeline")
}

namespace {
thread_local double t_step_start = 0;
}

extern "C" void shm_pipe_step(int32_t kind, int32_t stage, int32_t mb, int32_t begin) {
  using namespace shm;
  SHM_GUARD_BEGIN
  t_in_step = begin != 0;
  if (t_step_ns) {
    if (begin) {
      t_step_begin = std::chrono::steady_clock::now();
    } else if (kind == kUpdateStep) {
      *t_update_ns += since(t_step_begin);
    } else {
      *t_step_ns += since(t_step_begin);
      *t_steps_end_ns = since(t_run_start);
    }
  }
  if (!g_tracing) return;
  if (begin) {
    t_step_start = trace_now();
    return;
  }
  if (kind == kUpdateStep) {
    trace_span("update", "compute", t_step_start, "\"group\":" + std::to_string(stage));
    return;
  }
  const char *k = kind == 0 ? "F" : kind == 1 ? "B" : "W";
  std::string name = std::string(k) + " s" + std::to_string(stage) + " mb" + std::to_string(mb);
  trace_span(trace_name(name), "compute", t_step_start,
             "\"stage\":" + std::to_string(stage) + ",\"microbatch\":" + std::to_string(mb));
  SHM_GUARD_END("shm_pipe_step")
}

// A message between two layouts (reshard.h), each end whole or as blocks: under MPI one per
// pair of the two groups' ranks that trade anything, each rank sending only what it holds and
// receiving only what its devices read (both ends whole: the receiver at place q from the
// sender at place q modulo the sending group's ranks); in one process one, of every piece.
extern "C" void shm_pipe_send_blocks(int32_t c, const void *src, int32_t dtype, int32_t rank, const int64_t *shape,
                                     int32_t from_mesh_rank, const int64_t *from_mesh_sizes, const int32_t *from_spec,
                                     int32_t to_mesh_rank, const int64_t *to_mesh_sizes, const int32_t *to_spec) {
  using namespace shm;
  SHM_GUARD_BEGIN
  Channel &ch = channel(c, "shm_pipe_send");
  MessageEnd from{from_mesh_rank, from_mesh_sizes, from_spec, 1}, to{to_mesh_rank, to_mesh_sizes, to_spec, 1};
  TraceScope span("send a message", "message");
  int64_t sent = 0;
  if (!g_run->peer.empty()) {
    const std::vector<int> &receivers = g_run->peer[(size_t)g_run->ends[2 * c + 1]];
    from.ranks = (int)g_run->peer[(size_t)g_run->ends[2 * c]].size();
    to.ranks = (int)receivers.size();
    std::vector<char> message;
    for (int r = 0; r < to.ranks; ++r) {
      const MessagePlan &p = message_plan_of(dtype, rank, shape, from, g_run->place, to, r);
      if (p.pieces.empty()) continue;
      message.resize((size_t)p.bytes);
      pack_message(p, src, message.data());
      count_message(p.bytes, true);
      pipe_send_to(receivers[(size_t)r], c, message.data(), p.bytes);
      sent += p.bytes;
    }
  } else {
    if (rank_count() > 1 && ((from.mesh_rank && from.spec) || (to.mesh_rank && to.spec)))
      fatalf("shm_pipe_send_blocks: a value kept as blocks where every rank runs every group");
    const MessagePlan &p = message_plan_of(dtype, rank, shape, from, 0, to, 0);
    std::lock_guard<std::mutex> lk(ch.m);
    if (ch.full) fatalf("shm_pipe_send: channel %d already holds a message", (int)c);
    ch.data.resize((size_t)p.bytes);
    pack_message(p, src, ch.data.data());
    ch.full = true;
    ch.cv.notify_one();
    count_message(p.bytes, true);
    sent = p.bytes;
  }
  trace_message(span, c, sent, true);
  SHM_GUARD_END("shm_pipe_send")
}

extern "C" void shm_pipe_recv_blocks(int32_t c, void *dst, int32_t dtype, int32_t rank, const int64_t *shape,
                                     int32_t from_mesh_rank, const int64_t *from_mesh_sizes, const int32_t *from_spec,
                                     int32_t to_mesh_rank, const int64_t *to_mesh_sizes, const int32_t *to_spec) {
  using namespace shm;
  SHM_GUARD_BEGIN
  Channel &ch = channel(c, "shm_pipe_recv");
  MessageEnd from{from_mesh_rank, from_mesh_sizes, from_spec, 1}, to{to_mesh_rank, to_mesh_sizes, to_spec, 1};
  // (before a step begins the group is idle: nothing of the step runs until its inputs come)
  TraceScope span(t_in_step ? "wait for a message" : "idle (wait for a message)", t_in_step ? "wait" : "idle");
  const double timeout = collective_timeout();
  const auto start = std::chrono::steady_clock::now();
  const WaitTimer waited{start};
  int64_t received = 0;
  if (!g_run->peer.empty()) {
    const std::vector<int> &senders = g_run->peer[(size_t)g_run->ends[2 * c]];
    from.ranks = (int)senders.size();
    to.ranks = (int)g_run->peer[(size_t)g_run->ends[2 * c + 1]].size();
    std::vector<char> message;
    for (int s = 0; s < from.ranks; ++s) {
      const MessagePlan &p = message_plan_of(dtype, rank, shape, from, s, to, g_run->place);
      if (p.pieces.empty()) continue;
      message.resize((size_t)p.bytes);
      pipe_recv_from(senders[(size_t)s], c, message.data(), p.bytes, timeout);
      count_message(p.bytes, false);
      unpack_message(p, message.data(), dst);
      received += p.bytes;
    }
  } else {
    const MessagePlan &p = message_plan_of(dtype, rank, shape, from, 0, to, 0);
    std::unique_lock<std::mutex> lk(ch.m);
    wait_for_message(ch, lk, c, start, timeout);
    if ((int64_t)ch.data.size() != p.bytes)
      fatalf("shm_pipe_recv: message %d has %zu bytes, the receiver expects %lld", (int)c, ch.data.size(),
             (long long)p.bytes);
    unpack_message(p, ch.data.data(), dst);
    ch.full = false;
    count_message(p.bytes, false);
    received = p.bytes;
  }
  trace_message(span, c, received, false);
  SHM_GUARD_END("shm_pipe_recv")
}

// A message both of whose ends are whole: its bytes, as an array of one-byte elements (bool's).
extern "C" void shm_pipe_send(int32_t c, const void *src, int64_t bytes) {
  const int64_t shape[1] = {bytes};
  shm_pipe_send_blocks(c, src, SHM_BOOL, 1, shape, 0, nullptr, nullptr, 0, nullptr, nullptr);
}

extern "C" void shm_pipe_recv(int32_t c, void *dst, int64_t bytes) {
  const int64_t shape[1] = {bytes};
  shm_pipe_recv_blocks(c, dst, SHM_BOOL, 1, shape, 0, nullptr, nullptr, 0, nullptr, nullptr);
}

namespace shm {

void pipeline_stats_gather() {
  for (PipelineTimes &t : g_times) {  // (every rank ran the same pipelines in the same order)
    pipe_sum_over_ranks(t.step_ns.data(), (int)t.step_ns.size());
    pipe_sum_over_ranks(t.wait_ns.data(), (int)t.wait_ns.size());
    pipe_sum_over_ranks(t.idle_ns.data(), (int)t.idle_ns.size());
    pipe_sum_over_ranks(t.update_ns.data(), (int)t.update_ns.size());
    pipe_sum_over_ranks(t.steps_end_ns.data(), (int)t.steps_end_ns.size());
    pipe_sum_over_ranks(t.allocations.data(), (int)t.allocations.size());
    pipe_sum_over_ranks(t.peak_bytes.data(), (int)t.peak_bytes.size());
    for (size_t g = 0; g < t.step_ns.size(); ++g)  // (their average)
      t.step_ns[g] /= t.ran_by[g], t.wait_ns[g] /= t.ran_by[g], t.idle_ns[g] /= t.ran_by[g],
      t.allocations[g] /= t.ran_by[g], t.peak_bytes[g] /= t.ran_by[g], t.update_ns[g] /= t.ran_by[g],
      t.steps_end_ns[g] /= t.ran_by[g];
  }
}

void pipeline_stats_print(std::FILE *f) {
  std::fprintf(f, "== pipeline stats ==\n");
  for (const PipelineTimes &t : g_times) {
    const size_t groups = t.step_ns.size();
    int64_t busy = 0;
    // The schedule's span: until the last forward or backward step ends (a group's update after
    // it is not the schedule's, and runs in the drain of the others).
    int64_t span = 0;
    for (size_t g = 0; g < groups; ++g) busy += t.step_ns[g] - t.wait_ns[g], span = std::max(span, t.steps_end_ns[g]);
    if (span == 0) span = t.wall_ns;
    const double measured = span ? 1.0 - (double)busy / ((double)groups * (double)span) : 0.0;
    std::fprintf(f, "%s: %lld runs, %.3f ms; measured bubble %.1f%% (predicted %.1f%%)\n", t.label.c_str(),
                 (long long)t.runs, (double)t.wall_ns * 1e-6, 100 * measured, 100 * t.predicted);
    for (size_t g = 0; g < groups; ++g)
      std::fprintf(f, "  group %zu: %.3f ms in steps (%.3f ms of them waiting for messages), %.3f ms idle waiting for "
                   "messages between them; %.3f ms updating its parameters; host memory at most %lld bytes, "
                   "%.1f allocations a run; its ranks keep %lld of the operands' %lld bytes\n",
                   g, (double)t.step_ns[g] * 1e-6, (double)t.wait_ns[g] * 1e-6, (double)t.idle_ns[g] * 1e-6,
                   (double)t.update_ns[g] * 1e-6, (long long)t.peak_bytes[g],
                   t.counted() ? (double)t.allocations[g] / (double)t.counted() : 0.0, (long long)t.kept_bytes[g],
                   (long long)t.operand_bytes);
  }
}

} // namespace shm
