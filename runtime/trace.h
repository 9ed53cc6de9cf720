// A timeline of the run in the Trace Event Format (JSON) that Perfetto and chrome://tracing
// open: one track per device and one for the host, with a span for each shmap call,
// each collective (its axes and the bytes it sent and received; the time the device waited at
// it for the others as a "wait" span inside it) and each matmul. `--trace=FILE` or
// SHMAP_TRACE=FILE turns it on; under MPI each rank writes FILE with `.rankN` before its
// extension (tools/merge-traces joins them). Off, every hook is one test of a global flag.
#ifndef SHMAP_RUNTIME_TRACE_H
#define SHMAP_RUNTIME_TRACE_H
#include <cstdint>
#include <string>
#include <vector>

namespace shm {

#ifdef SHMAP_NO_TRACE
// (shmap_runtime_notrace, for bench/trace/run.py: no hook does anything, and --trace is refused)
constexpr bool g_tracing = false;
#else
extern bool g_tracing;
#endif

struct TraceEvent {
  const char *name;  // a literal
  const char *cat;   // "shmap", "collective", "wait", "compute"
  double ts, dur;    // microseconds since the trace started
  std::string args;  // a JSON object's members, or ""
  char ph = 'X';     // 'X' a span; 's' / 'f' the start / end of flow arrow `flow`
  int64_t flow = 0;
};

// The events of one track (a device during one shmap call, or the host).
struct TraceTrack {
  std::vector<TraceEvent> events;
};

// Where this thread's events go: the host's track, or the device's it runs the body of.
TraceTrack *current_track();
void set_current_track(TraceTrack *t);  // (null: the host's)
TraceTrack *thread_track();  // what set_current_track last set on this thread (null: the host's)

double trace_now();  // microseconds since the trace started (one monotonic clock)
// s as a JSON string, quoted and escaped (for an event's args).
std::string trace_json_string(const std::string &s);
void trace_begin(const char *path);
// (on the host's track under a lock: a host loop's helper threads may record there too)
void trace_span(const char *name, const char *cat, double t0, std::string args = {});
// A span from its construction to the end of the scope, if tracing is on (`args` may be set
// in between).
struct TraceScope {
  const char *name, *cat;
  double t0;
  std::string args;
  TraceScope(const char *n, const char *c) : name(g_tracing ? n : nullptr), cat(c), t0(name ? trace_now() : 0) {}
  ~TraceScope() {
    if (name) trace_span(name, cat, t0, std::move(args));
  }
};
// After a shmap call's threads joined: device `id`'s events, on the track named `label`.
void trace_merge_device(int id, const std::string &label, TraceTrack &t);
// After a pipeline's run: device group `group`'s stage program's events (its steps, the waits for
// messages), on a track of its own (thread id kGroupTrackBase + group).
constexpr int kGroupTrackBase = 1 << 20;
// The devices of pipeline group g's stage shmaps: device d's track is
// d + (g + 1) * kGroupDeviceTracks (a mesh has at most SHM_MAX_DEVICES).
constexpr int kGroupDeviceTracks = 1 << 14;
void trace_merge_group(int group, TraceTrack &t);
// An arrow from where a message is sent (start) to where it is received (!start), on the
// current track at this moment: both ends name the same `id`.
void trace_flow(const char *name, bool start, int64_t id);
// A span name made at run time ("F s1 mb5"), kept for the rest of the run.
const char *trace_name(const std::string &name);
// Writes the file (at the end of the program; a no-op if tracing is off).
void trace_write();

} // namespace shm
#endif
