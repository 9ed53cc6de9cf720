// A count of the elementary steps of the compiler's planning loops (--time-passes prints it):
// unlike seconds, the same on a loaded machine as on an idle one, so a test can check that it
// grows linearly with the program (tests/compile_scaling.py) where a timed test would be
// flaky. A stage adds its steps once per function, not per step (the count is shared by the
// threads of the fuzzer, which compile in parallel).
#pragma once
#include <atomic>
#include <cstdint>

namespace shmapc::work {

inline std::atomic<uint64_t> &counter() {
  static std::atomic<uint64_t> steps{0};
  return steps;
}
inline void add(uint64_t steps) { counter().fetch_add(steps, std::memory_order_relaxed); }
inline uint64_t steps() { return counter().load(std::memory_order_relaxed); }

} // namespace shmapc::work
