// The run's timeline (trace.h).
#include "trace.h"

#include "ranks.h"
#include "safe_write.h"
#include "util.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace shm {

#ifndef SHMAP_NO_TRACE
bool g_tracing = false;
#endif

namespace {

std::string g_path;
// The trace file, opened when the run starts (an unwritable path is refused before the program
// runs, not after it) and committed at its end; its destructor, run by exit() when the program
// fails, removes the temporary file.
safe_write::Output g_out;
std::chrono::steady_clock::time_point g_start;
TraceTrack g_host;
std::map<int, std::pair<std::string, std::vector<TraceEvent>>> g_devices;  // id -> (label, events)
std::map<int, std::vector<TraceEvent>> g_groups;  // a pipeline's device group -> its stage program's events
std::mutex g_merge_lock;  // (g_devices and g_groups: pipeline stages merge from their own threads)
thread_local TraceTrack *t_track = nullptr;

// The JSON string of s (quotes and backslashes escaped; control characters as \u00XX).
std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += (char)c;
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += (char)c;
  }
  return out + "\"";
}

void write_events(std::FILE *f, int pid, int tid, std::vector<TraceEvent> events, bool &first) {
  // In time order, a span before those inside it (a span is recorded when it ends).
  std::stable_sort(events.begin(), events.end(), [](const TraceEvent &a, const TraceEvent &b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
  });
  for (const TraceEvent &e : events) {
    if (e.ph != 'X') {  // a flow arrow's end ("bp":"e": bound to the span it lies in)
      std::fprintf(f, "%s\n{\"name\":%s,\"cat\":\"%s\",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d,\"id\":%lld%s}",
                   first ? "" : ",", quoted(e.name).c_str(), e.cat, e.ph, e.ts, pid, tid, (long long)e.flow,
                   e.ph == 'f' ? ",\"bp\":\"e\"" : "");
      first = false;
      continue;
    }
    std::fprintf(f, "%s\n{\"name\":%s,\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d", first ? "" : ",",
                 quoted(e.name).c_str(), e.cat, e.ts, e.dur < 0 ? 0.0 : e.dur, pid, tid);
    if (!e.args.empty()) std::fprintf(f, ",\"args\":{%s}", e.args.c_str());
    std::fputs("}", f);
    first = false;
  }
}

void write_name(std::FILE *f, const char *what, int pid, int tid, const std::string &name, bool &first) {
  std::fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":%s}}", first ? "" : ",", what,
               pid, tid, quoted(name).c_str());
  first = false;
}

} // namespace

static std::mutex g_host_lock;  // (the host track's)

TraceTrack *current_track() { return t_track ? t_track : &g_host; }

void trace_span(const char *name, const char *cat, double t0, std::string args) {
  TraceEvent e{name, cat, t0, trace_now() - t0, std::move(args), 'X', 0};
  if (t_track) return t_track->events.push_back(std::move(e));
  std::lock_guard<std::mutex> hold(g_host_lock);
  g_host.events.push_back(std::move(e));
}
void trace_flow(const char *name, bool start, int64_t id) {
  TraceEvent e{name, "message", trace_now(), 0, "", start ? 's' : 'f', id};
  if (t_track) return t_track->events.push_back(std::move(e));
  std::lock_guard<std::mutex> hold(g_host_lock);
  g_host.events.push_back(std::move(e));
}

void set_current_track(TraceTrack *t) { t_track = t; }
TraceTrack *thread_track() { return t_track; }

double trace_now() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - g_start).count();
}

std::string trace_json_string(const std::string &s) { return quoted(s); }

void trace_begin(const char *path) {
#ifdef SHMAP_NO_TRACE
  fatalf("--trace=%s: this program was linked with a runtime built without tracing", path);
#else
  g_path = path;
  if (rank_count() > 1) {  // run.json -> run.rank3.json
    const size_t dot = g_path.rfind('.'), slash = g_path.rfind('/');
    const std::string tag = ".rank" + std::to_string(rank_id());
    if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) g_path.insert(dot, tag);
    else g_path += tag;
  }
  std::string error;
  if (!g_out.open(g_path, false, error)) fatalf("--trace: cannot write %s: %s", g_path.c_str(), error.c_str());
  g_start = std::chrono::steady_clock::now();
  g_tracing = true;
#endif
}

void trace_merge_device(int id, const std::string &label, TraceTrack &t) {
  std::lock_guard<std::mutex> hold(g_merge_lock);
  auto &slot = g_devices[id];
  if (slot.first.empty()) slot.first = label;
  slot.second.insert(slot.second.end(), t.events.begin(), t.events.end());
  t.events.clear();
}

void trace_merge_group(int group, TraceTrack &t) {
  std::lock_guard<std::mutex> hold(g_merge_lock);
  auto &slot = g_groups[group];
  slot.insert(slot.end(), t.events.begin(), t.events.end());
  t.events.clear();
}

const char *trace_name(const std::string &name) {
  static std::mutex m;
  static std::set<std::string> names;  // (nodes never move: the pointers stay valid)
  std::lock_guard<std::mutex> hold(m);
  return names.insert(name).first->c_str();
}

void trace_write() {
  if (!g_tracing) return;
  const std::string &path = g_path;
  // The JSON is built in memory: the trace of a long run is a few megabytes.
  char *text = nullptr;
  size_t bytes = 0;
  std::FILE *f = open_memstream(&text, &bytes);
  if (!f) fatalf("--trace: cannot write %s: %s", path.c_str(), std::strerror(errno));
  const int pid = rank_id();
  bool first = true;
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
  write_name(f, "process_name", pid, 0, rank_count() > 1 ? "rank " + std::to_string(pid) : "shmap program", first);
  write_name(f, "thread_name", pid, 0, "host", first);
  for (const auto &[id, track] : g_devices) write_name(f, "thread_name", pid, id + 1, track.first, first);
  for (const auto &[g, events] : g_groups)
    write_name(f, "thread_name", pid, kGroupTrackBase + g, "pipeline group " + std::to_string(g), first);
  write_events(f, pid, 0, g_host.events, first);
  for (const auto &[id, track] : g_devices) write_events(f, pid, id + 1, track.second, first);
  for (const auto &[g, events] : g_groups) write_events(f, pid, kGroupTrackBase + g, events, first);
  std::fputs("\n]}\n", f);
  std::string error;
  const bool closed = std::fclose(f) == 0;
  const bool ok = closed && g_out.write(text, bytes, error) && g_out.commit(error);
  std::free(text);
  if (!ok) fatalf("--trace: cannot write %s: %s", path.c_str(), closed ? error.c_str() : "out of memory");
}

} // namespace shm
