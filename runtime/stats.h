// Collective statistics (private header; the unit tests include it to read the counters).
//
// Byte-counting model (see docs/runtime.md): a device "sends" the bytes it writes into other
// devices' buffers and "receives" the bytes it reads from other devices' buffers, in this
// runtime's shared-memory implementation. Copies within a device's own buffers are free.
#ifndef SHMAP_RUNTIME_STATS_H
#define SHMAP_RUNTIME_STATS_H
#include <cstdint>
#include <cstdio>

namespace shm {

// Fixed order: the stats table lists kinds in this order (abi/shm_collectives.def).
enum CollectiveKind {
#define SHM_COLLECTIVE(Id, Name) k##Id,
#include "shm_collectives.def"
#undef SHM_COLLECTIVE
  kNumKinds
};
const char *kind_name(int kind);

struct StatsRow {
  int64_t calls = 0;          // once per collective (counted by the device with id 0)
  int64_t bytes_sent = 0;     // summed over all devices
  int64_t bytes_received = 0; // summed over all devices
  int64_t wait_ns = 0;        // --stats=wait: time devices waited for the others, summed
};

// --stats=wait (or SHMAP_STATS=wait): the collectives time how long each device waits for the
// others to arrive, and the table gains a column of it. Off, nothing is timed (the plain table
// is exact, and golden tests compare it byte for byte).
extern bool g_stats_wait;

// --stats=pipeline (SHMAP_STATS=pipeline): each pipeline's runs timed, its device groups' time in
// their steps and waiting for messages, and the measured bubble beside the predicted one
// (pipeline.cpp prints the table).
extern bool g_stats_pipeline;
void pipeline_stats_gather();  // (under MPI: every rank calls it, each having run some groups)
void pipeline_stats_print(std::FILE *f);

struct Stats {
  StatsRow rows[kNumKinds];
  void add(const Stats &o) {
    for (int k = 0; k < kNumKinds; ++k) {
      rows[k].calls += o.rows[k].calls;
      rows[k].bytes_sent += o.rows[k].bytes_sent;
      rows[k].bytes_received += o.rows[k].bytes_received;
      rows[k].wait_ns += o.rows[k].wait_ns;
    }
  }
};

// Process-wide totals: shm_run_shmap merges each device's private counters after the device
// threads have finished, a pipeline's messages add theirs as they go (under a lock: a
// pipeline's device groups run at once).
const Stats &stats_get();
void stats_reset();
void stats_merge(const Stats &s);
// Prints the fixed-format table (docs/runtime.md).
void stats_print(std::FILE *f);
void stats_print(std::FILE *f, const Stats &s);

// The body of the runtime's main(), returning the exit code (separate so tests can drive it).
int runtime_main(int argc, char **argv);

} // namespace shm
#endif
