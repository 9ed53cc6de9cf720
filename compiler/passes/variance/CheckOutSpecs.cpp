// checkOutSpecs: an out_spec that leaves mesh axis `a` unmapped promises that the result is
// the same on every device along `a` — so the result's variance set must not contain `a`.
// This replaces shard_map's replication check with the variance types (JAX's note on
// efficient transposition).
#include "passes/variance/Variance.h"

namespace shmapc::passes {

using namespace ir;

namespace {

std::string axisList(const Mesh &mesh, AxisSet s, const char *sep) {
  std::string out;
  for (size_t a = 0; a < mesh.axes.size(); ++a)
    if (s & (AxisSet(1) << a)) out += (out.empty() ? "\"" : std::string(sep) + "\"") + mesh.axes[a] + "\"";
  return out;
}

void checkBody(const Eqn &shmap, Diagnostics &diags) {
  const Func &body = *shmap.bodies[0];
  const Mesh &mesh = *body.mesh;
  const auto &specs = shmap.specsParam("out_specs");
  for (size_t k = 0; k < body.results.size(); ++k) {
    AxisSet bad = body.results[k]->type.vary & ~specs[k].axes();
    if (!bad) continue;
    std::string axes = axisList(mesh, bad, ", ");
    std::string tuple = __builtin_popcount(bad) > 1 ? "(" + axes + ")" : axes;
    diags.error(DiagId::VarianceOutSpec, body.returnLoc.valid() ? body.returnLoc : body.loc,
                "result " + std::to_string(k) + " of '" + body.name + "' has type " +
                    typeToString(body.results[k]->type, &mesh) + ": it may vary over " + axes +
                    ", but out_specs " + specToString(specs[k], mesh) +
                    " leaves " + axes + " unmapped, which says it is the same on every device there",
                "reduce it over " + tuple + " (psum or pmean), gather it with "
                "all_gather_invariant, or map " + axes + " in out_specs");
    if (k < body.outSpecLocs.size()) diags.note(body.outSpecLocs[k], "out_specs written here");
    throw CompileError();
  }
}

} // namespace

void checkOutSpecs(Module &m, Diagnostics &diags) {
  for (auto &f : m.funcs) {
    if (f->mesh) continue;
    for (const Eqn &e : f->eqns)
      if (e.prim == Prim::Shmap && e.bodies[0]->checkVma) checkBody(e, diags);
  }
}

} // namespace shmapc::passes
