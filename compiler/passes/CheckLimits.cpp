// checkLimits: every array the program makes stays within the runtime's limits
// (runtime/abi/shmap_limits.h, docs/limits.md). Sema rejects written types beyond them where they
// are written; this catches the computed ones (a broadcast of two large operands, a
// gradient's per-iteration stack of a loop's values), at the equation that makes them.
#include "passes/Passes.h"
#include "shmap_limits.h"

namespace shmapc::passes {

using namespace ir;

namespace {

void checkValue(const Eqn &e, const Value *v, const Mesh *mesh, Diagnostics &diags) {
  const Type &t = v->type;
  std::string what = std::string("'") + primName(e.prim) + "' makes an array of type " +
                     typeToString(t, mesh) + ": ";
  if (t.rank() > SHM_MAX_RANK)
    diags.fatal(DiagId::ArrayTooLarge, e.loc,
                what + "rank " + std::to_string(t.rank()) + ", above the limit of " +
                    std::to_string(SHM_MAX_RANK),
                "merge dimensions with reshape (a loop's gradient keeps each iteration's values "
                "in one array, with an extra leading dimension)");
  int64_t n = t.numElements();  // saturates at INT64_MAX
  if (n > SHM_MAX_ELEMENTS)
    diags.fatal(DiagId::ArrayTooLarge, e.loc,
                what + (n == INT64_MAX ? "2^63 elements or more" : std::to_string(n) + " elements") +
                    ", above the limit of 2^40",
                "use smaller arrays; split the data over a mesh or over several arrays");
}

void checkFunc(const Func &f, Diagnostics &diags) {
  for (const Eqn &e : f.eqns) {
    for (const Value *o : e.outs) checkValue(e, o, f.mesh, diags);
    for (const Func *b : e.bodies) checkFunc(*b, diags);
  }
}

} // namespace

void checkLimits(Module &m, Diagnostics &diags) {
  if (m.main) checkFunc(*m.main, diags);
}

} // namespace shmapc::passes
