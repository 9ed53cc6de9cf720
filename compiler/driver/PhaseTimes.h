// --time-passes: the seconds each stage of a compile takes (parsing, sema, each IR pass,
// LLVM IR emission, LLVM's optimisation pipeline, instruction selection and object emission,
// linking), printed to stderr when the compile ends, so that a stage whose time grows faster
// than the program (a quadratic scan) shows by itself. With it, LLVM's own per-pass report
// follows (LLVM's -time-passes), and the count of the planning loops' steps (WorkCount.h).
#pragma once
#include "source/WorkCount.h"

#include <chrono>
#include <ctime>
#include <ostream>
#include <string>
#include <vector>

namespace shmapc {

class PhaseTimes {
public:
  explicit PhaseTimes(bool on) : on_(on), start_(Clock::now()), last_(start_), startCpu_(cpu()), lastCpu_(startCpu_),
        startSteps_(work::steps()) {}
  bool enabled() const { return on_; }
  // Ends the current stage, named `name` (the time since the previous mark).
  void mark(const std::string &name) {
    if (!on_) return;
    Clock::time_point now = Clock::now();
    double nowCpu = cpu();
    phases_.push_back({name, std::chrono::duration<double>(now - last_).count(), nowCpu - lastCpu_});
    last_ = now;
    lastCpu_ = nowCpu;
  }
  void print(std::ostream &os) const;

private:
  using Clock = std::chrono::steady_clock;
  struct Phase {
    std::string name;
    double seconds, cpuSeconds;
  };
  // The process's CPU time: on a loaded machine it grows with the work done, where wall time
  // also counts the waits for a core.
  static double cpu() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  bool on_;
  Clock::time_point start_, last_;
  double startCpu_, lastCpu_;
  uint64_t startSteps_;
  std::vector<Phase> phases_;
};

} // namespace shmapc
