// Pipelines: each device group's stage program on its own thread, all at once, and the
// point-to-point messages between them (activations forward, their cotangents backward). A
// message is sent once per run on its own channel: the sender copies it into the channel and
// goes on; the receiver waits for it and copies it out.
#include "sync.h"
#include "trace.h"
#include "util.h"

#include "shmap_runtime.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
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
struct PipelineRun {
  std::vector<std::unique_ptr<Channel>> channels;
};
PipelineRun *g_run = nullptr;

Channel &channel(int32_t c, const char *what) {
  if (!g_run) fatalf("%s: no pipeline is running", what);
  if (c < 0 || (size_t)c >= g_run->channels.size())
    fatalf("%s: channel %d of %zu", what, (int)c, g_run->channels.size());
  return *g_run->channels[(size_t)c];
}

} // namespace
} // namespace shm

extern "C" void shm_run_pipeline(int32_t groups, const shm_fn *bodies, int32_t nin, void **ins,
                                 const int32_t *nouts, void **outs, int32_t channels) {
  using namespace shm;
  SHM_GUARD_BEGIN
  if (groups < 1 || !bodies || nin < 0 || channels < 0) fatalf("shm_run_pipeline: bad arguments");
  if (g_run) fatalf("shm_run_pipeline: a pipeline is already running");
  PipelineRun run;
  for (int32_t c = 0; c < channels; ++c) run.channels.push_back(std::make_unique<Channel>());
  g_run = &run;
  std::vector<void **> outsOf((size_t)groups);
  for (int32_t g = 0, next = 0; g < groups; ++g) {
    outsOf[(size_t)g] = outs + next;
    next += nouts[g];
  }
  // (group 0 on this thread; the others on threads of their own, joined before returning; each
  // records its spans on a track of its own)
  auto program = [&](int32_t g) {
    TraceTrack track;
    TraceTrack *was = g_tracing ? current_track() : nullptr;
    if (g_tracing) set_current_track(&track);
    bodies[g](nullptr, outsOf[(size_t)g], ins);
    if (g_tracing) {
      set_current_track(was == current_track() ? nullptr : was);
      trace_merge_group(g, track);
    }
  };
  std::vector<std::thread> threads;
  for (int32_t g = 1; g < groups; ++g)
    threads.emplace_back([&, g] {
      SHM_GUARD_BEGIN
      program(g);
      SHM_GUARD_END("pipeline stage program")
    });
  program(0);
  for (std::thread &t : threads) t.join();
  g_run = nullptr;
  SHM_GUARD_END("shm_run_pipeline")
}

namespace {
thread_local double t_step_start = 0;
}

extern "C" void shm_pipe_step(int32_t kind, int32_t stage, int32_t mb, int32_t begin) {
  using namespace shm;
  SHM_GUARD_BEGIN
  if (!g_tracing) return;
  if (begin) {
    t_step_start = trace_now();
    return;
  }
  const char *k = kind == 0 ? "F" : kind == 1 ? "B" : "W";
  std::string name = std::string(k) + " s" + std::to_string(stage) + " mb" + std::to_string(mb);
  trace_span(trace_name(name), "compute", t_step_start,
             "\"stage\":" + std::to_string(stage) + ",\"microbatch\":" + std::to_string(mb));
  SHM_GUARD_END("shm_pipe_step")
}

extern "C" void shm_pipe_send(int32_t c, const void *src, int64_t bytes) {
  using namespace shm;
  SHM_GUARD_BEGIN
  Channel &ch = channel(c, "shm_pipe_send");
  std::lock_guard<std::mutex> lk(ch.m);
  if (ch.full) fatalf("shm_pipe_send: channel %d already holds a message", (int)c);
  ch.data.assign((const char *)src, (const char *)src + bytes);
  ch.full = true;
  ch.cv.notify_one();
  SHM_GUARD_END("shm_pipe_send")
}

extern "C" void shm_pipe_recv(int32_t c, void *dst, int64_t bytes) {
  using namespace shm;
  SHM_GUARD_BEGIN
  Channel &ch = channel(c, "shm_pipe_recv");
  TraceScope span("wait for a message", "wait");
  if (span.name) span.args = "\"channel\":" + std::to_string(c) + ",\"bytes\":" + std::to_string(bytes);
  std::unique_lock<std::mutex> lk(ch.m);
  const double timeout = collective_timeout();
  const auto start = std::chrono::steady_clock::now();
  while (!ch.cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return ch.full; })) {
    if (stopping()) {
      lk.unlock();
      stop_this_thread();
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout)
      fatalf("a pipeline stage waited more than %g s for message %d (SHMAP_COLLECTIVE_TIMEOUT)", timeout, (int)c);
  }
  if ((int64_t)ch.data.size() != bytes)
    fatalf("shm_pipe_recv: message %d has %zu bytes, the receiver expects %lld", (int)c, ch.data.size(),
           (long long)bytes);
  std::memcpy(dst, ch.data.data(), (size_t)bytes);
  ch.full = false;
  SHM_GUARD_END("shm_pipe_recv")
}
