// Trees as values: tuples `(a, b)` and records `{w: a, b: c}` of arrays (or of trees), bound
// by let, destructured (`let x, y = t;`, tuples), indexed by a static integer (`t[0]`) or a
// field (`p.w`), printed leaf by leaf, and passed to and returned from plain functions. A
// record's fields are kept sorted by name, as JAX orders a dict's keys, so leaves come in the
// same order as jax.tree_util.tree_leaves. The IR has no tuples: a function taking or returning one takes
// or returns its leaves in order (depth first), and sema rebuilds the tuple on the other side,
// as JAX flattens a pytree at a function boundary.
#include "sema/SemaImpl.h"

#include <algorithm>

namespace shmapc::sema {

SVal Sema::evalTuple(const ast::Expr &e) {
  std::vector<SVal> items;
  for (const ast::ExprPtr &item : e.items) {
    SVal v = eval(*item);
    if (v.kind == SVal::Axes)
      fail(DiagId::BadArgument, item->loc, "a tuple of values cannot hold the axis names " + describe(v),
           "axis names are arguments of collectives; keep them out of value tuples");
    // (a literal becomes a value of its default dtype, as `let` makes it)
    if (v.kind == SVal::Literal) v = SVal::array(toArray(v), v.loc);
    items.push_back(std::move(v));
  }
  return SVal::tuple(std::move(items), e.loc);
}

SVal Sema::evalRecord(const ast::Expr &e) {
  std::vector<const ast::Expr::KwArg *> fields;
  for (const ast::Expr::KwArg &kw : e.kwargs) {
    for (const ast::Expr::KwArg *f : fields)
      if (f->name == kw.name)
        fail(DiagId::DuplicateKey, kw.loc, "the record already has a field '" + kw.name + "'",
             "give each field its own name");
    fields.push_back(&kw);
  }
  std::stable_sort(fields.begin(), fields.end(),
                   [](const ast::Expr::KwArg *a, const ast::Expr::KwArg *b) { return a->name < b->name; });
  SVal r = SVal::tuple({}, e.loc);
  for (const ast::Expr::KwArg *f : fields) {
    SVal v = eval(*f->value);
    if (v.kind == SVal::Axes)
      fail(DiagId::BadArgument, f->value->loc, "a record of values cannot hold the axis names " + describe(v),
           "axis names are arguments of collectives; keep them out of records");
    if (v.kind == SVal::Literal) v = SVal::array(toArray(v), v.loc);
    r.items.push_back(std::move(v));
    r.keys.push_back(f->name);
  }
  return r;
}

SVal Sema::field(const SVal &r, const std::string &name, Loc loc) {
  if (r.kind == SVal::Array && (name == "ndim" || name == "size")) {  // p.w.ndim
    const ir::Type &t = r.value->type;
    return SVal::staticInteger(name == "ndim" ? t.rank() : t.numElements(), false, loc);
  }
  if (!r.isRecord())
    fail(DiagId::BadArgument, loc, describe(r) + " has no field '" + name + "'",
         r.kind == SVal::Tuple ? "a tuple's elements are read by index: t[0]" : "only records have fields");
  for (size_t i = 0; i < r.keys.size(); ++i)
    if (r.keys[i] == name) {
      SVal v = r.items[i];
      v.loc = loc;
      return v;
    }
  fail(DiagId::UnknownName, loc, describe(r) + " has no field '" + name + "'",
       "its fields are " + describe(r).substr(9));
}

SVal Sema::tupleElement(const SVal &t, const ast::Expr &e) {
  if (t.isRecord())
    fail(DiagId::BadArgument, e.loc, "a record's fields are read by name, not by index",
         "write r." + t.keys[0] + " for its field " + t.keys[0]);
  if (e.indices.size() != 1 || e.indices[0].kind != ast::IndexItem::Index)
    fail(DiagId::BadArgument, e.loc, "a tuple is indexed by one static integer",
         "write t[0] for its first element");
  const ast::IndexItem &it = e.indices[0];
  std::optional<int64_t> i = staticIntOpt(*it.index);
  if (!i)
    fail(DiagId::BadArgument, it.loc, "a tuple's index must be a static integer",
         "write t[0]; the elements of a tuple may differ in type, so which one is read is fixed at compile time");
  const int64_t n = (int64_t)t.items.size();
  const int64_t k = *i < 0 ? *i + n : *i;
  if (k < 0 || k >= n)
    fail(DiagId::IndexOutOfRange, it.loc,
         "index " + std::to_string(*i) + " is out of range for " + describe(t),
         "use an index from " + std::to_string(-n) + " to " + std::to_string(n - 1));
  SVal v = t.items[(size_t)k];
  v.loc = e.loc;
  return v;
}

std::vector<SVal> Sema::destructure(const SVal &v, size_t names, Loc loc) {
  if (v.isRecord())
    fail(DiagId::ResultCount, loc, "cannot bind " + std::to_string(names) + " names to " + describe(v),
         "read a record's fields by name: let " + v.keys[0] + " = r." + v.keys[0] + ";");
  if (v.kind != SVal::Tuple)
    fail(DiagId::ResultCount, loc, "cannot bind " + std::to_string(names) + " names to " + describe(v),
         "bind one name, or give as many values as names");
  if (v.items.size() != names)
    fail(DiagId::ResultCount, loc,
         "cannot bind " + std::to_string(names) + " names to " + describe(v),
         "bind one name per element of the tuple");
  return v.items;
}

void Sema::nameLeaves(const SVal &v, const std::string &path) {
  if (v.kind == SVal::Array && v.value->hint.empty()) v.value->hint = path;
  for (size_t i = 0; i < v.items.size(); ++i) nameLeaves(v.items[i], path + v.step(i));
}

ArgDesc Sema::tupleArg(const SVal &t, std::vector<ir::Value *> &leaves) {
  ArgDesc d;
  d.isTuple = true;
  d.keys = t.keys;
  for (const SVal &item : t.items) {
    if (item.kind == SVal::Tuple) {
      d.items.push_back(tupleArg(item, leaves));
      continue;
    }
    ArgDesc leaf;
    ir::Value *v = toArray(item);
    leaf.type = v->type;
    leaf.type.vary = 0;
    leaves.push_back(v);
    d.items.push_back(leaf);
  }
  return d;
}

SVal Sema::tupleParam(const ArgDesc &d, ir::Func &f, const std::string &path, Loc loc) {
  std::vector<SVal> items;
  for (size_t i = 0; i < d.items.size(); ++i) {
    const std::string at = path + d.step(i);
    if (d.items[i].isTuple) {
      items.push_back(tupleParam(d.items[i], f, at, loc));
      continue;
    }
    ir::Value *v = f.newValue(d.items[i].type, at);
    f.params.push_back(v);
    items.push_back(SVal::array(v, loc));
  }
  SVal t = SVal::tuple(std::move(items), loc);
  t.keys = d.keys;
  return t;
}

void Sema::leavesOf(const SVal &v, const std::string &path, std::vector<ir::Value *> &leaves,
                    std::vector<std::string> &paths) {
  if (v.kind != SVal::Tuple) {
    leaves.push_back(toArray(v));
    paths.push_back(path);
    return;
  }
  for (size_t i = 0; i < v.items.size(); ++i)
    leavesOf(v.items[i], path + v.step(i), leaves, paths);
}

SVal Sema::withLeaves(const SVal &shape, const std::vector<ir::Value *> &leaves, size_t &next, Loc loc) {
  if (shape.kind != SVal::Tuple) return SVal::array(leaves.at(next++), loc);
  std::vector<SVal> items;
  for (const SVal &item : shape.items) items.push_back(withLeaves(item, leaves, next, loc));
  SVal t = SVal::tuple(std::move(items), loc);
  t.keys = shape.keys;
  return t;
}

Sema::Carried Sema::carried(std::vector<std::string> names, Loc loc) {
  Carried c;
  c.names = std::move(names);
  for (const std::string &n : c.names) {
    c.before.push_back(lookup(n, loc));
    leavesOf(c.before.back(), n, c.leaves, c.paths);
  }
  return c;
}

void Sema::bindCarried(const Carried &c, const std::vector<ir::Value *> &leaves, Scope *scope, Loc loc) {
  size_t next = 0;
  for (size_t k = 0; k < c.names.size(); ++k)
    (scope ? scope : findScope(c.names[k]))->names[c.names[k]] = withLeaves(c.before[k], leaves, next, loc);
}

void Sema::carriedLeaves(const Carried &c, Scope &scope, std::vector<ir::Value *> &out) {
  std::vector<std::string> paths;
  for (const std::string &n : c.names) leavesOf(scope.names[n], n, out, paths);
}

SVal Sema::assignedTuple(const std::string &path, const SVal &old, const SVal &v, Loc loc, bool loopCarries) {
  const std::string help = loopCarries ? "the name is carried around the loop, so every iteration must leave it "
                                         "the same structure and types; bind a new name with let otherwise"
                                       : "a name keeps its structure and types when assigned; bind a new name "
                                         "with let otherwise";
  if (old.kind != SVal::Tuple || v.kind != SVal::Tuple || old.items.size() != v.items.size() || old.keys != v.keys) {
    if (old.kind != SVal::Tuple && v.kind != SVal::Tuple) {
      ir::Value *nv = v.kind == SVal::Literal ? literalAs(v, old.value->type.dtype, {}, v.loc) : toArray(v);
      if (!nv->type.sameShape(old.value->type))
        fail(DiagId::AssignType, loc,
             "cannot assign " + str(nv->type) + " to " + path + ", which holds " + str(old.value->type), help);
      return SVal::array(nv, loc);
    }
    fail(DiagId::AssignType, loc, "cannot assign " + describe(v) + " to " + path + ", which holds " + describe(old),
         help);
  }
  std::vector<SVal> items;
  for (size_t i = 0; i < old.items.size(); ++i)
    items.push_back(assignedTuple(path + old.step(i), old.items[i], v.items[i], loc, loopCarries));
  SVal t = SVal::tuple(std::move(items), loc);
  t.keys = old.keys;
  return t;
}

void Sema::printValue(const std::string &label, const SVal &v, Loc loc) {
  if (v.kind == SVal::Tuple) {  // leaf by leaf, each labelled with its path
    for (size_t i = 0; i < v.items.size(); ++i)
      printValue(label + v.step(i), v.items[i], loc);
    return;
  }
  ir::Eqn e;
  e.prim = ir::Prim::Print;
  e.ins = {toArray(v)};
  e.params["label"] = label;
  e.loc = loc;
  pushEqn(std::move(e));
}

// ---- device_put

// device_put(x, sharding<@m, [...]>) (jax.device_put): x (an array, or each leaf of a tree)
// split over the mesh as the sharding says, as a shmap output in that layout is: what reads it
// in that layout (shmaps, and host element-wise arithmetic, which then runs on the devices)
// reads its blocks, and under MPI a rank keeps only its own. An identity shmap.
SVal Sema::bDevicePut(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "sharding"}, 2);
  if (cur_->mesh)
    failWithCallChain(DiagId::BadArgument, c.loc, "device_put is for host code",
                      "inside a shmap body a value is already a device's block");
  if (a[1]->kind != ast::Expr::ShardingLit || a[1]->sharding->mesh.empty())
    fail(DiagId::BadSharding, a[1]->loc, "device_put takes a sharding that names its mesh",
         "write device_put(x, sharding<@m, [{\"data\"}, {}]>)");
  const ast::ShardingExpr &sh = *a[1]->sharding;
  const int mesh = meshIndex(sh.mesh, sh.meshLoc);
  const ir::Mesh &m = *module_->meshes[(size_t)mesh];
  SVal x = eval(*a[0]);
  std::vector<ir::Value *> leaves, placed;
  std::vector<std::string> paths;
  leavesOf(x, "", leaves, paths);
  for (size_t k = 0; k < leaves.size(); ++k) {
    const std::string what = paths[k].empty() ? "the value" : "the leaf " + paths[k];
    ir::Sharding s = convertSharding(sh, mesh, leaves[k]->type, what);
    ir::PartitionSpec spec;
    for (const ir::DimSharding &d : s.dims) {
      std::vector<int> axes;
      for (const ir::AxisRef &r : d.axes) {
        if (!r.isFull(m))
          fail(DiagId::BadSubAxis, sh.loc, "device_put splits by whole mesh axes, not the sub-axis " +
                                              ir::axisRefToString(r, m),
               "name whole axes, e.g. {\"" + m.axes[(size_t)r.axis] + "\"}");
        axes.push_back(r.axis);
      }
      spec.dims.push_back(axes);
    }
    ast::PartitionSpecExpr specExpr;  // (for blockType's messages)
    specExpr.loc = sh.loc;
    for (const auto &d : spec.dims) {
      specExpr.dims.emplace_back();
      specExpr.dimLocs.emplace_back();
      for (int ax : d) specExpr.dims.back().push_back(m.axes[(size_t)ax]);
    }
    ir::Type block = blockType(leaves[k]->type, spec, specExpr, m, a[0]->loc, what, "sharding");
    block.vary = 0;  // (typed by the variance pass)
    ir::Eqn e = ir::identityShmap(*module_, *cur_->func, uniqueFuncName("device_put"), (int64_t)mesh, spec,
                                  leaves[k], block, c.loc, "to_devices");
    placed.push_back(e.outs[0]);
    pushEqn(std::move(e));
  }
  size_t next = 0;
  return withLeaves(x, placed, next, c.loc);
}

// ---- trees of specs and shardings

std::string Sema::describe(const ArgDesc &d) { return d.isTuple ? treeText(d.keys, d.items.size()) : str(d.type); }

std::string treeStep(const std::vector<std::string> &keys, size_t i) {
  return keys.empty() ? "[" + std::to_string(i) + "]" : "." + keys[i];
}

std::string treeText(const std::vector<std::string> &keys, size_t items) {
  if (keys.empty()) return "a tuple of " + std::to_string(items) + " value(s)";
  std::string s = "a record {";
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + keys[i];
  return s + "}";
}

size_t leafCount(const ArgDesc &d) {
  if (!d.isTuple) return d.isAxes ? 0 : 1;
  size_t n = 0;
  for (const ArgDesc &item : d.items) n += leafCount(item);
  return n;
}

// A P(...) (or sharding) applies to the whole subtree in its place; a tuple or record of them
// must match the value's structure there, a record's by field name (written in any order).
template <class Spec>
void Sema::leafSpecs(const Spec &spec, const ArgDesc &d, const std::string &path, const std::string &what,
                     const std::string &specKind, std::vector<const Spec *> &out) {
  if (!spec.isTree) {
    out.insert(out.end(), leafCount(d), &spec);
    return;
  }
  auto mismatch = [&](const std::string &detail) {
    std::string written = spec.keys.empty() ? "tuple of " + std::to_string(spec.items.size()) + " " + specKind + "s"
                                            : "record {";
    for (size_t i = 0; i < spec.keys.size(); ++i) written += (i ? ", " : "") + spec.keys[i];
    if (!spec.keys.empty()) written += "} of " + specKind + "s";
    fail(DiagId::SpecCount, spec.loc,
         "this " + written + " does not match " + what + (path.empty() ? "" : " at " + path) + ", which is " +
             describe(d) + detail,
         "give one per element, field by field (a single P(...) applies to a whole subtree)");
  };
  if (!d.isTuple || d.items.size() != spec.items.size() || d.keys.empty() != spec.keys.empty()) mismatch("");
  for (size_t i = 0; i < d.items.size(); ++i) {
    const Spec *item = &spec.items[i];
    if (!d.keys.empty()) {  // the spec's fields as written; the value's sorted
      item = nullptr;
      for (size_t j = 0; j < spec.keys.size(); ++j)
        if (spec.keys[j] == d.keys[i]) item = &spec.items[j];
      if (!item) mismatch(" (no " + specKind + " for field " + d.keys[i] + ")");
    }
    leafSpecs(*item, d.items[i], path + d.step(i), what,
              specKind, out);
  }
}

template void Sema::leafSpecs(const ast::PartitionSpecExpr &, const ArgDesc &, const std::string &,
                              const std::string &, const std::string &, std::vector<const ast::PartitionSpecExpr *> &);
template void Sema::leafSpecs(const ast::ShardingExpr &, const ArgDesc &, const std::string &, const std::string &,
                              const std::string &, std::vector<const ast::ShardingExpr *> &);

// ---- tree_map, tree_leaves, tree_reduce

// tree_map(f, t, u, ...): f applied leaf by leaf to the leaves at the same path, giving a tree
// of the trees' structure. The arguments that are trees have one structure, except that any
// argument may hold an array (or a literal) in place of a subtree, which is passed to each leaf
// of that subtree: the language has no lambda to capture a learning rate in, so
// tree_map(sgd, params, grads, lr) passes lr along (JAX allows deeper trees after the first;
// here any argument may be the shallower one).
SVal Sema::bTreeMap(const ast::Expr &c) {
  if (c.items.size() < 2 || !c.kwargs.empty())
    fail(DiagId::ArgCount, c.kwargs.empty() ? c.loc : c.kwargs[0].loc,
         "tree_map takes a function and one or more trees",
         "write tree_map(f, params) or tree_map(f, params, grads)");
  FnValue f = evalFn(*c.items[0], "the first argument of tree_map", /*builtinsToo=*/true);
  std::vector<SVal> trees;
  for (size_t i = 1; i < c.items.size(); ++i) {
    trees.push_back(eval(*c.items[i]));
    if (trees.back().kind == SVal::Axes)
      fail(DiagId::BadArgument, c.items[i]->loc, "tree_map maps over values, not the axis names " + describe(trees.back()),
           "call a function taking axis names from the mapped function");
  }
  return mapTree(f, trees, c, "");
}

SVal Sema::mapTree(const FnValue &f, const std::vector<SVal> &nodes, const ast::Expr &c, const std::string &path) {
  const SVal *first = nullptr;  // the first argument holding a tree here: its structure is mapped
  size_t firstArg = 0;
  for (size_t k = 0; k < nodes.size() && !first; ++k)
    if (nodes[k].kind == SVal::Tuple) first = &nodes[k], firstArg = k;
  if (!first) {
    std::vector<SVal> r = applyFn(f, nodes, c.loc);
    if (r.size() != 1)
      fail(DiagId::ResultCount, c.items[0]->loc,
           f.text + " returns " + std::to_string(r.size()) + " values; tree_map needs one per leaf",
           "return one value (an array or a tree) from the mapped function");
    return r[0];
  }
  for (size_t k = firstArg + 1; k < nodes.size(); ++k) {
    const SVal &n = nodes[k];
    if (n.kind == SVal::Tuple && (n.keys != first->keys || n.items.size() != first->items.size()))
      fail(DiagId::BadArgument, c.items[k + 1]->loc,
           "this tree holds " + describe(n) + (path.empty() ? "" : " at " + path) +
               ", but an earlier argument of tree_map holds " + describe(*first) + " there",
           "pass trees of one structure (an array in place of a subtree is passed to each of its leaves)");
  }
  SVal t = SVal::tuple({}, c.loc);
  t.keys = first->keys;
  for (size_t i = 0; i < first->items.size(); ++i) {
    std::vector<SVal> sub;
    for (const SVal &n : nodes) sub.push_back(n.kind == SVal::Tuple ? n.items[i] : n);
    t.items.push_back(mapTree(f, sub, c, path + first->step(i)));
  }
  return t;
}

// tree_leaves(t): t's leaves as a tuple, depth first (records in field order), as
// jax.tree_util.tree_leaves lists them.
SVal Sema::bTreeLeaves(const ast::Expr &c) {
  auto a = bindArgs(c, {"tree"}, 1);
  SVal t = eval(*a[0]);
  std::vector<ir::Value *> leaves;
  std::vector<std::string> paths;
  leavesOf(t, "", leaves, paths);
  std::vector<SVal> items;
  for (ir::Value *v : leaves) items.push_back(SVal::array(v, c.loc));
  return SVal::tuple(std::move(items), c.loc);
}

// tree_reduce(f, t, init): f(...f(f(init, leaf0), leaf1)..., leafN), as
// jax.tree_util.tree_reduce(f, t, init).
SVal Sema::bTreeReduce(const ast::Expr &c) {
  if (c.items.size() != 3 || !c.kwargs.empty())
    fail(DiagId::ArgCount, c.loc, "tree_reduce takes a function, a tree and an initial value",
         "write tree_reduce(add, tree_map(sum_of_squares, grads), 0.0)");
  FnValue f = evalFn(*c.items[0], "the first argument of tree_reduce", /*builtinsToo=*/true);
  SVal t = eval(*c.items[1]);
  SVal acc = eval(*c.items[2]);
  std::vector<ir::Value *> leaves;
  std::vector<std::string> paths;
  leavesOf(t, "", leaves, paths);
  for (ir::Value *leaf : leaves) {
    std::vector<SVal> r = applyFn(f, {acc, SVal::array(leaf, c.loc)}, c.loc);
    if (r.size() != 1)
      fail(DiagId::ResultCount, c.items[0]->loc,
           f.text + " returns " + std::to_string(r.size()) + " values; tree_reduce needs one",
           "return the combined value");
    acc = r[0];
  }
  return acc;
}

} // namespace shmapc::sema
