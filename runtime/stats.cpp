// Collective statistics: process totals and the table printed by `--stats`.
#include "stats.h"

#include <mutex>

namespace shm {

static Stats g_stats;

const char *kind_name(int kind) {
  static const char *const names[kNumKinds] = {
#define SHM_COLLECTIVE(Id, Name) Name,
#include "shm_collectives.def"
#undef SHM_COLLECTIVE
  };
  return (kind >= 0 && kind < kNumKinds) ? names[kind] : "?";
}

const Stats &stats_get() { return g_stats; }
bool g_stats_wait = false;
bool g_stats_pipeline = false;

void stats_reset() { g_stats = Stats(); }
void stats_merge(const Stats &s) {
  static std::mutex m;  // (a pipeline's device groups run their shmaps at once)
  std::lock_guard<std::mutex> lk(m);
  g_stats.add(s);
}

void stats_print(std::FILE *f) { stats_print(f, g_stats); }

void stats_print(std::FILE *f, const Stats &s) {
  std::fprintf(f, "== shmap collective stats ==\n");
  std::fprintf(f, "%-15s %5s %12s %16s", "collective", "calls", "bytes_sent", "bytes_received");
  std::fprintf(f, g_stats_wait ? " %12s\n" : "\n", "wait_ms");
  bool any = false;
  for (int k = 0; k < kNumKinds; ++k) {
    const StatsRow &r = s.rows[k];
    if (r.calls == 0) continue;
    any = true;
    std::fprintf(f, "%-15s %5lld %12lld %16lld", kind_name(k), (long long)r.calls,
                 (long long)r.bytes_sent, (long long)r.bytes_received);
    if (g_stats_wait) std::fprintf(f, " %12.3f", (double)r.wait_ns / 1e6);
    std::fputs("\n", f);
  }
  if (!any) std::fprintf(f, "(no collectives)\n");
}

} // namespace shm
