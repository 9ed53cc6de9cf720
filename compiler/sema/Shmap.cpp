// shmap calls: the caller passes global arrays; in_specs split them into per-device blocks
// (the body's parameter types), and out_specs put the body's result blocks back together.
#include "sema/SemaImpl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>

namespace shmapc::sema {

std::string Sema::specText(const ast::PartitionSpecExpr &spec) {
  if (spec.isTree) {  // (P(), P("x")) or {w: P(), b: P("x")}
    std::string s = spec.keys.empty() ? "(" : "{";
    for (size_t i = 0; i < spec.items.size(); ++i)
      s += (i ? ", " : "") + (spec.keys.empty() ? "" : spec.keys[i] + ": ") + specText(spec.items[i]);
    if (spec.keys.empty() && spec.items.size() == 1) s += ",";
    return s + (spec.keys.empty() ? ")" : "}");
  }
  std::string s = "P(";
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    if (d) s += ", ";
    const auto &axes = spec.dims[d];
    if (axes.empty()) s += "None";
    if (axes.size() > 1) s += "(";
    for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", \"" : "\"") + axes[i] + "\"";
    if (axes.size() > 1) s += ")";
  }
  return s + ")";
}

int Sema::meshIndex(const std::string &name, Loc loc) {
  std::vector<std::string> names;
  for (size_t i = 0; i < module_->meshes.size(); ++i) {
    if (module_->meshes[i]->name == name) return (int)i;
    names.push_back(module_->meshes[i]->name);
  }
  std::string near = closestName(name, names);
  fail(DiagId::UnknownMesh, loc, "unknown mesh " + name,
       !near.empty()   ? "did you mean " + near + "?"
       : names.empty() ? "declare it: mesh " + name + " = <[\"x\"=2]>;"
                       : "declare it with `mesh " + name + " = <[...]>;` or use an existing mesh");
}

int Sema::axisIndex(const ir::Mesh &mesh, const std::string &name, Loc loc) {
  int idx = mesh.axisIndex(name);
  if (idx >= 0) return idx;
  std::string near = closestName(name, mesh.axes), list;
  for (const std::string &a : mesh.axes) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  fail(DiagId::UnknownAxis, loc, "mesh " + mesh.name + " has no axis \"" + name + "\"",
       near.empty() ? "its axes are " + list : "did you mean \"" + near + "\"?");
}

ir::PartitionSpec Sema::convertSpec(const ast::PartitionSpecExpr &spec, const ir::Mesh &mesh) {
  ir::PartitionSpec out;
  std::vector<int> seen;
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    std::vector<int> axes;
    for (size_t j = 0; j < spec.dims[d].size(); ++j) {
      const std::string &name = spec.dims[d][j];
      Loc at = d < spec.dimLocs.size() && j < spec.dimLocs[d].size() ? spec.dimLocs[d][j] : spec.loc;
      int idx = axisIndex(mesh, name, at);
      if (std::find(seen.begin(), seen.end(), idx) != seen.end())
        fail(DiagId::AxisRepeated, at,
             "axis \"" + name + "\" is used twice in " + specText(spec),
             "a mesh axis may split at most one dimension, once");
      seen.push_back(idx);
      axes.push_back(idx);
    }
    out.dims.push_back(axes);
  }
  return out;
}

// The per-device block of `global` under `spec`: each dimension divided by the product of
// the sizes of the axes splitting it.
ir::Type Sema::blockType(const ir::Type &global, const ir::PartitionSpec &spec,
                         const ast::PartitionSpecExpr &specExpr, const ir::Mesh &mesh,
                         Loc argLoc, const std::string &what, const std::string &specKind) {
  if ((int64_t)spec.dims.size() > global.rank())
    fail(DiagId::SpecTooLong, specExpr.loc,
         specKind + " " + specText(specExpr) + " has " + std::to_string(spec.dims.size()) +
             (spec.dims.size() == 1 ? " entry" : " entries") + " but " + what + " is " + str(global) + " (rank " +
             std::to_string(global.rank()) + ")",
         "a spec may not be longer than the rank; drop trailing entries");
  ir::Type block = global;
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    if (spec.dims[d].empty()) continue;
    int64_t n = 1;
    std::string split;
    for (int a : spec.dims[d]) {
      n *= mesh.sizes[a];
      split += (split.empty() ? "" : "*") + mesh.axes[a] + "(" + std::to_string(mesh.sizes[a]) + ")";
    }
    int64_t size = global.shape[d];
    if (size % n != 0) {
      diags_.error(DiagId::NotDivisible, argLoc,
                   "dimension " + std::to_string(d) + " of size " + std::to_string(size) +
                       " is split over " + split + (spec.dims[d].size() > 1 ? "=" + std::to_string(n) : "") +
                       " devices; " + std::to_string(size) + " is not divisible by " +
                       std::to_string(n),
                   specKind == "in_spec" ? "pad the array or change in_specs"
                                         : "pad the array or change the spec");
      diags_.note(specExpr.loc, what + " (" + str(global) + ") is split by " + specText(specExpr));
      throw CompileError();
    }
    block.shape[d] = size / n;
  }
  return block;
}

// The ArgDesc of `v`'s structure with `leafTypes` (in leaf order) for its leaves.
static ArgDesc descWithLeaves(const SVal &v, const std::vector<ir::Type> &leafTypes, size_t &next) {
  ArgDesc d;
  if (v.kind != SVal::Tuple) {
    d.type = leafTypes.at(next++);
    return d;
  }
  d.isTuple = true;
  d.keys = v.keys;
  for (const SVal &item : v.items) d.items.push_back(descWithLeaves(item, leafTypes, next));
  return d;
}

std::vector<SVal> Sema::callShmap(const ast::FuncDecl &decl, const Unit &unit,
                                  const std::vector<SVal> &args, Loc callLoc) {
  const ast::ShmapAttrs &attrs = *decl.shmap;
  if (cur_->mesh)
    failWithNote(DiagId::ShmapInsideShmap, callLoc,
                 "cannot call shmap function " + decl.name + " inside a shmap body",
                 "call it from main (or host code), or drop its @shmap and use the current "
                 "mesh's collectives directly",
                 decl.loc, decl.name + " is defined here");
  int mi = meshIndex(attrs.mesh, attrs.meshLoc.valid() ? attrs.meshLoc : attrs.loc);
  const ir::Mesh &mesh = *module_->meshes[mi];
  if (attrs.inSpecs.size() != decl.params.size())
    fail(DiagId::SpecCount, attrs.inSpecsLoc.valid() ? attrs.inSpecsLoc : attrs.loc,
         decl.name + " has " + std::to_string(decl.params.size()) + " parameter(s) but in_specs gives " +
             std::to_string(attrs.inSpecs.size()) + " spec(s)",
         "give one P(...) per parameter");

  // A tree argument is split leaf by leaf: the shmap equation takes its leaves, each with its
  // own spec, and the body takes the tree of their blocks.
  std::vector<ir::PartitionSpec> inSpecs;
  std::vector<ir::Value *> ins;
  std::vector<ArgDesc> descs;
  for (size_t i = 0; i < decl.params.size(); ++i) {
    const ast::Param &p = decl.params[i];
    const SVal &a = args[i];
    if (a.kind == SVal::Axes)
      fail(DiagId::BadArgument, a.loc, "a shmap function takes arrays, not axis names " + describe(a),
           "pass axis names to plain functions called from the shmap body");
    std::string what = "argument " + std::to_string(i) + " of " + decl.name;
    if (a.kind == SVal::Tuple && p.type)
      failWithNote(DiagId::ArgType, a.loc,
                   what + " is " + describe(a) + " but parameter " + p.name + " is declared " + str(typeOf(*p.type)),
                   "pass an array, or remove the parameter's type to take a tree", p.loc,
                   "parameter " + p.name + " is declared here");
    std::vector<ir::Value *> leaves;
    std::vector<std::string> paths;
    leavesOf(a, "", leaves, paths);
    std::vector<const ast::PartitionSpecExpr *> specs;
    leafSpecs(attrs.inSpecs[i], describeArg(a), "", what, "in_spec", specs);
    std::vector<ir::Type> blocks;
    for (size_t k = 0; k < leaves.size(); ++k) {
      const std::string leafWhat = paths[k].empty() ? what : what + " at " + paths[k];
      inSpecs.push_back(convertSpec(*specs[k], mesh));
      ir::Type block = blockType(leaves[k]->type, inSpecs.back(), *specs[k], mesh, a.loc, leafWhat);
      if (p.type && !block.sameShape(typeOf(*p.type)))
        failWithNote(DiagId::ArgType, a.loc,
                     what + ": the global " + str(leaves[k]->type) + " split by " + specText(*specs[k]) +
                         " gives per-device blocks " + str(block) + ", but parameter " + p.name + " is declared " +
                         str(typeOf(*p.type)),
                     "parameter types of a shmap function are per-device block types: declare " + str(block) +
                         ", or change the argument or in_specs",
                     p.loc, "parameter " + p.name + " is declared here");
      block.vary = 0;
      blocks.push_back(block);
      ins.push_back(leaves[k]);
    }
    size_t next = 0;
    descs.push_back(descWithLeaves(a, blocks, next));
  }

  callChain_.push_back({callLoc, decl.name});
  const Instance &inst = instantiate(decl, unit, descs, &mesh, callLoc);
  callChain_.pop_back();

  if (attrs.outSpecs.size() != inst.returned.size())
    fail(DiagId::SpecCount, attrs.outSpecsLoc.valid() ? attrs.outSpecsLoc : attrs.loc,
         decl.name + " returns " + std::to_string(inst.returned.size()) +
             " value(s) but out_specs gives " + std::to_string(attrs.outSpecs.size()) + " spec(s)",
         "give one P(...) per result");
  std::vector<const ast::PartitionSpecExpr *> outLeafSpecs;
  for (size_t i = 0; i < inst.returned.size(); ++i)
    leafSpecs(attrs.outSpecs[i], describeArg(inst.returned[i]), "", "result " + std::to_string(i) + " of " + decl.name,
              "out_spec", outLeafSpecs);
  inst.func->outSpecLocs.clear();
  std::vector<ir::PartitionSpec> outSpecs;
  std::vector<ir::Type> globals;
  for (size_t i = 0; i < inst.results.size(); ++i) {
    const ast::PartitionSpecExpr &se = *outLeafSpecs[i];
    inst.func->outSpecLocs.push_back(se.loc);
    outSpecs.push_back(convertSpec(se, mesh));
    const ir::Type &block = inst.results[i];
    if ((int64_t)se.dims.size() > block.rank())
      fail(DiagId::SpecTooLong, se.loc,
           "out_spec " + specText(se) + " has " + std::to_string(se.dims.size()) +
               (se.dims.size() == 1 ? " entry" : " entries") + " but result " + std::to_string(i) + " of " + decl.name + " is " +
               str(block) + " (rank " + std::to_string(block.rank()) + ")",
           block.rank() == 0
               ? "a scalar cannot be split; give it a singleton axis (return x[None], declared " +
                     std::string(ir::dtypeName(block.dtype)) + "[1]) to get one value per device, or use P()"
               : "a spec may not be longer than the rank; drop trailing entries");
    ir::Type global = block;
    global.vary = 0;
    for (size_t d = 0; d < outSpecs.back().dims.size(); ++d)
      for (int a : outSpecs.back().dims[d]) global.shape[d] *= mesh.sizes[a];
    globals.push_back(global);
  }

  ir::Eqn e;
  e.prim = ir::Prim::Shmap;
  e.ins = ins;
  e.bodies = {inst.func};
  e.loc = callLoc;
  e.params["mesh"] = (int64_t)mi;
  e.params["in_specs"] = inSpecs;
  e.params["out_specs"] = outSpecs;
  std::vector<ir::Value *> outs;
  for (const ir::Type &t : globals) outs.push_back(cur_->func->newValue(t));
  e.outs = outs;
  pushEqn(std::move(e));
  std::vector<SVal> out;
  size_t next = 0;
  for (const SVal &r : inst.returned) out.push_back(withLeaves(r, outs, next, callLoc));
  return out;
}

} // namespace shmapc::sema
