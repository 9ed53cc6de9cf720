// Linked into the unit tests of stages that ask the primitives' rules (rules::rulesOf): the
// definitions install them before any test runs, as the driver does before compiling.
#include "prims/Prims.h"

namespace {
const bool installed = (shmapc::prims::installRules(), true);
}
