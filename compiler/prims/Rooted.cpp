// The rooted collectives (the broadcast, reduce, gather and scatter rows of PyTorch's note on
// collectives' backward formulas), over mesh `axes`, `root` a group index:
//   broadcast      varying -> invariant  every device gets the root's operand; transposes to
//                                        the cotangent on the root, zeros elsewhere (typed: no
//                                        communication; untyped, as PyTorch's: reduce(sum))
//   reduce_to      varying -> varying    the root gets the reduction (sum, max, min, prod), the
//                                        others zeros; sum transposes to broadcast
//   gather_to      varying -> varying    the root gets all_gather's result, the others zeros;
//                                        transposes to scatter_from
//   scatter_from   -> varying            device k gets block k of the root's operand;
//                                        transposes to gather_to
// broadcast and scatter_from of an operand invariant over the axes are the identity and a
// pscatter (InsertPbroadcasts.cpp, VarianceRule::FromRoot): nothing to communicate.
#include "prims/Prim.h"
#include "shmap_runtime.h"  // (SHM_REDUCE_*)

namespace shmapc::prims {

namespace {

bool rootInRange(ShapeCtx &c) {
  int64_t n, root;
  return c.groupSize(n) && c.param("root", root) && c.inRange(root, n, "root");
}

AxisSet axesOfParam(const Eqn &e) { return e.axesParamSet(); }

// The root's device holds true, the others false: i32 axis_index == root, at `like`'s shape.
Value *onRoot(Builder &b, const Eqn &e, const Type &like) {
  Value *index = b.emit(Prim::AxisIndex, {}, Type{DType::I32, {}, axesOfParam(e)}, {{"axes", e.params.at("axes")}});
  Value *here = b.compare(Prim::Eq, index, b.scalar((double)e.intParam("root"), DType::I32));
  Type t{DType::Bool, like.shape, here->type.vary};
  return like.shape.empty() ? here : b.broadcastTo(here, t, {});
}

std::map<std::string, Attr> rootedParams(const Eqn &e, std::initializer_list<const char *> keys) {
  std::map<std::string, Attr> p;
  for (const char *k : keys) p[k] = e.params.at(k);
  return p;
}

// reduce_to's max / min / prod are not linear: the tangent is a reduce_to(sum) onto the root of
// each device's share, as for pmax / pmin (the cotangent to the devices holding the extremum,
// ties sharing it) and pprod (the product of the others' operands, right with zeros).
void reduceJvp(JvpCtx &c) {
  const int64_t op = c.e.intParam("op");
  std::map<std::string, Attr> sum = rootedParams(c.e, {"axes", "root"});
  sum["op"] = (int64_t)SHM_REDUCE_SUM;
  if (op == SHM_REDUCE_SUM) return c.set(c.linear(Prim::ReduceTo, {c.t[0]}, c.ty, sum));
  Builder &b = c.b;
  Type invariant = c.x->type;
  invariant.vary &= ~axesOfParam(c.e);
  const Attr &axes = c.e.params.at("axes");
  Value *share = op == SHM_REDUCE_PROD
                     ? productShare(b, c.x, invariant, axes)
                     : extremumShare(b, c.x, b.emit(op == SHM_REDUCE_MAX ? Prim::Pmax : Prim::Pmin, {c.x}, invariant,
                                                    {{"axes", axes}}),
                                     axes);
  c.set(c.linear(Prim::ReduceTo, {c.scaled(c.t[0], share)}, c.ty, sum));
}

template <const char *Fn>
bool lowerSameShape(FuncEmitter &fe, size_t i) {
  const Eqn &e = fe.f.eqns[i];
  const Type &t = e.ins[0]->type;
  AxesArg a = axesOf(fe, e);
  std::vector<llvm::Value *> args = {fe.dev};
  if (e.prim == Prim::ReduceTo) args.push_back(fe.i32(e.intParam("op")));
  args.insert(args.end(), {fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]), fe.i32(t.rank()),
                           fe.me.i64Array(t.shape), fe.i32(e.intParam("root")), a.ptr, a.count});
  fe.callRt(Fn, args);
  return true;
}

template <const char *Fn>
bool lowerAlongAxis(FuncEmitter &fe, size_t i) {
  const Eqn &e = fe.f.eqns[i];
  const Type &t = e.ins[0]->type;
  AxesArg a = axesOf(fe, e);
  fe.callRt(Fn, {fe.dev, fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]), fe.i32(t.rank()),
                 fe.me.i64Array(t.shape), fe.i32(e.intParam("axis")), fe.i32(e.intParam("tiled") != 0),
                 fe.i32(e.intParam("root")), a.ptr, a.count});
  return true;
}

constexpr char kBroadcast[] = "shm_broadcast", kReduceTo[] = "shm_reduce_to", kGatherTo[] = "shm_gather_to",
               kScatterFrom[] = "shm_scatter_from";

// The root's operand to each of the n-1 others (broadcast), a block of it to each (scatter), or
// each other's operand to the root (reduce, gather): only some devices receive
// (runtime/rooted.cpp).
template <CollectiveKind Kind>
CollectiveBytes rootedBytes(const Eqn &e, int64_t n, int64_t groups) {
  const Type &t = e.ins[0]->type;
  const int64_t elems = t.numElements();
  const int64_t part = (Kind == CollectiveKind::Scatter ? elems / n : elems) * dtypeSize(t.dtype);
  const bool toRoot = Kind == CollectiveKind::Reduce || Kind == CollectiveKind::Gather;
  CollectiveBytes c;
  c.receivedMax = n > 1 ? (toRoot ? (n - 1) * part : part) : 0;
  c.receivedMin = 0;  // (the root receives nothing, or the others do)
  c.received = groups * (n - 1) * part;
  return c;
}
template <CollectiveKind Kind>
constexpr Communication rooted{Communication::Collective, Kind, rootedBytes<Kind>, false};

} // namespace

template <> const Rules &define<Prim::Broadcast>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) { return rootInRange(c) && collectiveSameShape(c, anyDType, "any"); },
      .variance = VarianceRule::FromRoot,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        if (!c.b.f.checkVma)  // (untyped: each device's cotangent of its copy, summed onto the root)
          return c.accumulate(0, c.apply(Prim::ReduceTo, c.c, {{"axes", c.e.params.at("axes")}, {"root", c.e.params.at("root")},
                                                               {"op", (int64_t)SHM_REDUCE_SUM}}, c.xt));
        Value *ct = c.b.liftTo(c.c, c.xt.vary);
        c.accumulate(0, c.b.select(onRoot(c.b, c.e, c.xt), ct, c.b.zerosLike(c.xt)));
      },
      .lower = lowerSameShape<kBroadcast>,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = rooted<CollectiveKind::Broadcast>,
  };
  return r;
}

template <> const Rules &define<Prim::ReduceTo>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        int64_t op;
        if (!rootInRange(c) || !c.param("op", op)) return false;
        if (op < SHM_REDUCE_SUM || op > SHM_REDUCE_PROD) return c.fail("op must be sum, max, min or prod");
        return collectiveSameShape(c, isNumeric, "numeric");
      },
      .variance = VarianceRule::VaryingToVarying,
      .jvp = reduceJvp,
      .transpose = [](TransposeCtx &c) {  // (only sum is linear)
        Type invariant = c.c->type;
        invariant.vary &= ~axesOfParam(c.e);
        Value *all = c.apply(Prim::Broadcast, c.c, rootedParams(c.e, {"axes", "root"}), invariant);
        c.accumulate(0, c.b.liftTo(all, c.xt.vary));
      },
      .lower = lowerSameShape<kReduceTo>,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = rooted<CollectiveKind::Reduce>,
  };
  return r;
}

template <> const Rules &define<Prim::GatherTo>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) { return rootInRange(c) && gatherShape(c); },
      .variance = VarianceRule::VaryingToVarying,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        c.accumulate(0, c.apply(Prim::ScatterFrom, c.c, rootedParams(c.e, {"axes", "root", "axis", "tiled"}), c.xt));
      },
      .lower = lowerAlongAxis<kGatherTo>,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = rooted<CollectiveKind::Gather>,
  };
  return r;
}

template <> const Rules &define<Prim::ScatterFrom>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) { return rootInRange(c) && scatterShape(c, "axis"); },
      .variance = VarianceRule::FromRoot,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        c.accumulate(0, c.apply(Prim::GatherTo, c.c, rootedParams(c.e, {"axes", "root", "axis", "tiled"}), c.xt));
      },
      .lower = lowerAlongAxis<kScatterFrom>,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = rooted<CollectiveKind::Scatter>,
  };
  return r;
}

} // namespace shmapc::prims
