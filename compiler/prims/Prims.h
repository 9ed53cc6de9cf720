// The primitives' definitions, as the rest of the compiler sees them: one call that installs
// every primitive's rules for rules::rulesOf(). Whatever runs the compiler's stages (the driver,
// the unit tests, the fuzzer) calls it first.
#pragma once

namespace shmapc::prims {

void installRules();

} // namespace shmapc::prims
