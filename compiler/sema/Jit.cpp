// @jit functions: written on global arrays, with Shardy shardings on their parameters and
// results. Sema checks every sharding against the invariants Shardy's sharding representation
// lists and records the function (ir::Module::jits, `--emit=sharded`); the body is an ordinary
// function, so a jit function computes what the same function would on one device.
#include "sema/SemaImpl.h"

#include <algorithm>

namespace shmapc::sema {

namespace {

// Mesh order, then a sub-axis's parts by pre-size: replicated={...} must be in this order.
bool refBefore(const ir::AxisRef &a, const ir::AxisRef &b) {
  return a.axis != b.axis ? a.axis < b.axis : a.preSize < b.preSize;
}

} // namespace

// One axis or sub-axis of a sharding: it must name an axis of the mesh, and a sub-axis
// "x":(m)k must have m >= 1 and k > 1 with m, k and m k dividing the axis's size.
ir::AxisRef Sema::convertAxisRef(const ast::AxisRefExpr &a, const ir::Mesh &mesh) {
  ir::AxisRef r;
  r.axis = axisIndex(mesh, a.name, a.loc);
  const int64_t n = mesh.sizes[(size_t)r.axis];
  if (a.size == 0) {
    r.size = n;
    return r;
  }
  const int64_t m = a.preSize, k = a.size;
  if (m < 1 || k < 2 || m > n || k > n || n % m != 0 || n % k != 0 || n % (m * k) != 0)  // (m, k <= n: no overflow)
    fail(DiagId::BadSubAxis, a.loc,
         "sub-axis " + ast::axisRefText(a) + " does not fit axis \"" + a.name + "\" of size " + std::to_string(n),
         "a sub-axis \"x\":(m)k needs m >= 1, k > 1, and m, k and m*k each dividing the axis's size (here " +
             std::to_string(n) + ")");
  r.preSize = m;
  r.size = k;
  return r;
}

ir::Sharding Sema::convertSharding(const ast::ShardingExpr &s, int jitMesh, const ir::Type &t,
                                   const std::string &what) {
  ir::Sharding out;
  out.mesh = s.mesh.empty() ? jitMesh : meshIndex(s.mesh, s.meshLoc);
  const ir::Mesh &mesh = *module_->meshes[(size_t)out.mesh];
  if (out.mesh != jitMesh)
    fail(DiagId::ShardingMesh, s.meshLoc,
         "the sharding of " + what + " is on mesh " + mesh.name + ", but the function's is " +
             module_->meshes[(size_t)jitMesh]->name,
         "write sharding<@" + module_->meshes[(size_t)jitMesh]->name + ", ...> (one mesh per jit function)");
  const bool shorthand = s.mesh.empty();
  if (s.dims.size() > (size_t)t.rank() || (!shorthand && s.dims.size() != (size_t)t.rank()))
    fail(DiagId::ShardingRank, s.loc,
         "the sharding of " + what + " has " + std::to_string(s.dims.size()) +
             (s.dims.size() == 1 ? " dimension sharding but " : " dimension shardings but ") + what +
             " is " + str(t) + " (rank " + std::to_string(t.rank()) + ")",
         shorthand ? "P(...) may not be longer than the rank" : "write one {...} per dimension ({} leaves it unsharded)");
  std::vector<std::pair<ir::AxisRef, Loc>> used;  // every axis and sub-axis, with where it is
  auto use = [&](const ir::AxisRef &r, const ast::AxisRefExpr &at) {
    for (const auto &[u, loc] : used)
      if (u.overlaps(r))
        failWithNote(DiagId::ShardingAxisReused, at.loc,
                     axisRefToString(r, mesh) + " is used twice in the sharding of " + what +
                         (u == r ? "" : " (it overlaps " + axisRefToString(u, mesh) + ")"),
                     "each axis or part of one shards one dimension, or is replicated, once", loc,
                     "first used here");
    used.push_back({r, at.loc});
  };
  // Adjacent parts of one axis must be written as one: "x":(1)2, "x":(2)4 is "x":(1)8.
  auto maximal = [&](const ir::AxisRef &a, const ir::AxisRef &b, const ast::AxisRefExpr &at) {
    if (a.axis != b.axis || a.preSize * a.size != b.preSize) return;
    ir::AxisRef joined{a.axis, a.preSize, a.size * b.size};
    fail(DiagId::SubAxesNotMaximal, at.loc,
         axisRefToString(a, mesh) + " and " + axisRefToString(b, mesh) + " are adjacent parts of axis \"" +
             mesh.axes[(size_t)a.axis] + "\"",
         "write them as one: " + axisRefToString(joined, mesh));
  };
  for (const ast::DimShardingExpr &d : s.dims) {
    ir::DimSharding dim;
    dim.open = d.open;
    dim.priority = d.priority;
    for (size_t i = 0; i < d.axes.size(); ++i) {
      ir::AxisRef r = convertAxisRef(d.axes[i], mesh);
      use(r, d.axes[i]);
      if (i > 0) maximal(dim.axes.back(), r, d.axes[i]);
      dim.axes.push_back(r);
    }
    if (d.priority >= 0 && dim.axes.empty() && !dim.open)
      fail(DiagId::PriorityOnEmptyDim, d.priorityLoc,
           "an empty closed dimension sharding {} has priority p" + std::to_string(d.priority),
           "drop the priority: {} is never sharded further, so it has no effect (or open it: {?}p" +
               std::to_string(d.priority) + ")");
    out.dims.push_back(dim);
  }
  out.dims.resize((size_t)t.rank());  // (P(...) may leave trailing dimensions out: closed, unsharded)
  for (const ast::AxisRefExpr &a : s.replicated) {
    ir::AxisRef r = convertAxisRef(a, mesh);
    use(r, a);
    out.replicated.push_back(r);
  }
  std::vector<ir::AxisRef> sorted = out.replicated;
  std::sort(sorted.begin(), sorted.end(), refBefore);
  if (!(sorted == out.replicated)) {
    std::string text;
    for (const ir::AxisRef &r : sorted) text += (text.empty() ? "" : ", ") + axisRefToString(r, mesh);
    fail(DiagId::ReplicatedOrder, s.replicatedLoc,
         "the explicitly replicated axes of the sharding of " + what + " are not in mesh order",
         "write replicated={" + text + "} (mesh " + mesh.name + "'s axis order, the parts of one axis by pre-size)");
  }
  for (size_t i = 1; i < sorted.size(); ++i) maximal(sorted[i - 1], sorted[i], s.replicated[i]);
  return out;
}

// sharding_constraint(x, S) in a jit function (JAX's with_sharding_constraint): x, held
// in S. S is sharding<@m, ...> or P(...) on the function's mesh.
SVal Sema::bShardingConstraint(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "sharding"}, 2);
  const ast::FuncDecl *jit = nullptr;
  for (auto it = active_.rbegin(); it != active_.rend() && !jit; ++it)
    if ((*it)->jit) jit = *it;
  if (!jit || cur_->mesh)
    fail(DiagId::ConstraintOutsideJit, c.loc, "sharding_constraint is only for the body of a @jit function",
         "in a shmap body a value's layout is its block; in host code nothing is sharded");
  ir::Value *x = evalArray(*a[0]);
  const ast::ShardingExpr sh =
      a[1]->kind == ast::Expr::ShardingLit ? *a[1]->sharding : ast::shardingOfSpec(specArg(*a[1]));
  const int mesh = meshIndex(jit->jit->mesh, jit->jit->meshLoc);
  ir::Sharding s = convertSharding(sh, mesh, x->type, "the constrained value");
  return SVal::array(emit(ir::Prim::ShardingConstraint, {x}, x->type, c.loc, {{"sharding", ir::encodeSharding(s)}}),
                     c.loc);
}

// Records a jit function's instance with its shardings, checked against its parameters'
// and results' types. A tree parameter or result is its leaves (named by path), each with the
// sharding the tree of shardings gives it.
void Sema::recordJit(const ast::FuncDecl &decl, ir::Func &f, const std::vector<ArgDesc> &args,
                     const Instance &inst) {
  const ast::JitAttrs &jit = *decl.jit;
  ir::JitFunc j;
  j.name = f.name;
  j.loc = decl.loc;
  j.func = &f;
  j.mesh = meshIndex(jit.mesh, jit.meshLoc);
  for (ir::Value *p : f.params) {
    j.paramNames.push_back(p->hint);
    j.paramTypes.push_back(p->type);
  }
  j.resultTypes = inst.results;
  std::vector<ArgDesc> results;
  for (const SVal &r : inst.returned) results.push_back(describeArg(r));
  auto convert = [&](const std::vector<ast::ShardingExpr> &written, bool has, Loc loc, const std::vector<ArgDesc> &descs,
                     const char *kind, bool params) {
    std::vector<ir::Sharding> out;
    if (!has) return out;
    if (written.size() != descs.size())
      fail(DiagId::ShardingCount, loc,
           std::string(kind) + " has " + std::to_string(written.size()) + " sharding(s) but " + decl.name + " has " +
               std::to_string(descs.size()) + (params ? " parameter(s)" : " result(s)"),
           params ? "give one sharding per parameter" : "give one sharding per result");
    std::vector<const ast::ShardingExpr *> leaves;
    for (size_t i = 0; i < written.size(); ++i)
      leafSpecs(written[i], descs[i], "", params ? "parameter " + decl.params[i].name : "result " + std::to_string(i),
                params ? "in_sharding" : "out_sharding", leaves);
    const std::vector<ir::Type> &types = params ? j.paramTypes : j.resultTypes;
    for (size_t k = 0; k < leaves.size(); ++k)
      out.push_back(convertSharding(*leaves[k], j.mesh, types[k],
                                    params ? "parameter " + j.paramNames[k] : "result " + std::to_string(k)));
    return out;
  };
  j.inShardings = convert(jit.inShardings, jit.hasIn, jit.inLoc, args, "in_shardings", true);
  j.outShardings = convert(jit.outShardings, jit.hasOut, jit.outLoc, results, "out_shardings", false);
  module_->jits.push_back(std::move(j));
}

} // namespace shmapc::sema
