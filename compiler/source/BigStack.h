// Running the compiler on a thread with a big stack.
#pragma once

#include <functional>

namespace shmapc {

// The front end recurses once per nested expression, block and call; each is bounded
// (docs/limits.md), but their product needs more stack than a main thread gets by default.
// Runs `fn` on a new thread whose stack is kBigStackBytes of reserved address space (only the
// pages touched cost memory) and returns its result; runs it directly if no thread can be made.
int runWithBigStack(const std::function<int()> &fn);

} // namespace shmapc
