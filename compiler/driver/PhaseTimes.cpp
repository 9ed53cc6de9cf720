#include "driver/PhaseTimes.h"

#include <cstdio>

namespace shmapc {

void PhaseTimes::print(std::ostream &os) const {
  if (!on_) return;
  double total = std::chrono::duration<double>(last_ - start_).count();
  double totalCpu = lastCpu_ - startCpu_;
  os << "shmapc: time per stage (seconds; cpu: this process's CPU time, which a loaded machine "
        "does not inflate)\n";
  os << "       wall        cpu   cpu%  stage\n";
  char line[200];
  for (const Phase &p : phases_) {
    std::snprintf(line, sizeof line, "  %9.4f  %9.4f  %5.1f%%  %s\n", p.seconds, p.cpuSeconds,
                  totalCpu > 0 ? 100.0 * p.cpuSeconds / totalCpu : 0.0, p.name.c_str());
    os << line;
  }
  std::snprintf(line, sizeof line, "  %9.4f  %9.4f  100.0%%  total\n", total, totalCpu);
  os << line;
  os << "shmapc: planning steps: " << work::steps() - startSteps_ << "\n";
}

} // namespace shmapc
