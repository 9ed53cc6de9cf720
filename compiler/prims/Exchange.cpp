// Point-to-point exchanges within a mesh axis group, and the device's index in it:
// all_to_all (transposes to all_to_all with split and concat axes swapped), ppermute (to the
// inverse permutation), axis_index.
#include "prims/Prim.h"

#include <set>

namespace shmapc::prims {

namespace {

// Every device receives block k of each of the n-1 others' operands (runtime/collectives.cpp).
CollectiveBytes allToAllBytes(const Eqn &e, int64_t n, int64_t groups) {
  const Type &t = e.ins[0]->type;
  return everyDeviceReceives((n - 1) * (t.numElements() / n) * dtypeSize(t.dtype), n * groups);
}

// Per group, every destination of a pair whose source is another member receives the operand;
// the others receive nothing (zeros, made locally).
CollectiveBytes ppermuteBytes(const Eqn &e, int64_t n, int64_t groups) {
  const Type &t = e.ins[0]->type;
  const int64_t bytes = t.numElements() * dtypeSize(t.dtype);
  const std::vector<int64_t> &perm = e.intsParam("perm");
  std::set<int64_t> receivers;
  for (size_t p = 0; p + 1 < perm.size(); p += 2)
    if (perm[p] != perm[p + 1]) receivers.insert(perm[p + 1]);
  CollectiveBytes c;
  c.receivers = (int64_t)receivers.size();
  c.receivedMax = c.receivers > 0 ? bytes : 0;
  c.receivedMin = c.receivers == n ? bytes : 0;
  c.received = groups * c.receivers * bytes;
  return c;
}

} // namespace

template <> const Rules &define<Prim::AllToAll>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        // Tiled: split_axis divided by the group size n, concat_axis multiplied by it. Untiled:
        // split_axis (of size n) removed, a dimension of n inserted at concat_axis.
        int64_t n, split, concat;
        bool tiled;
        if (!c.groupSize(n) || !c.param("split_axis", split) || !c.param("concat_axis", concat) || !c.flag("tiled", tiled))
          return false;
        std::vector<int64_t> shape = c.in(0).shape;
        int64_t rank = (int64_t)shape.size();
        if (!c.inRange(split, rank, "split_axis") || !c.inRange(concat, rank, "concat_axis")) return false;
        // (a user's error: sema reports it at the split_axis argument)
        const std::string of = typeText(c.in(0)), group = std::to_string(n);
        if (tiled && shape[split] % n != 0)
          return c.failParam("split_axis", DiagId::NotDivisible,
                             "all_to_all splits dimension " + std::to_string(split) + " of " + of + " into " + group +
                                 " blocks; " + std::to_string(shape[split]) + " is not divisible by " + group,
                             "pad the array or split a different dimension");
        if (!tiled && shape[split] != n)
          return c.failParam("split_axis", DiagId::ShapeMismatch,
                             "all_to_all without tiling needs split_axis " + std::to_string(split) + " of size " +
                                 group + " (the group size), but " + of + " has " + std::to_string(shape[split]),
                             "pass tiled=true to split the dimension into n blocks");
        if (tiled) {
          shape[split] /= n;
          if (!scaleDim(shape[concat], n)) return c.fail("the result's size overflows");
        } else {
          shape.erase(shape.begin() + split);
          shape.insert(shape.begin() + concat, n);
        }
        return c.out(c.in(0).dtype, shape);
      },
      .variance = VarianceRule::VaryingToVarying,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        const Eqn &e = c.e;
        c.accumulate(0, c.apply(Prim::AllToAll, c.c,
                                {{"axes", e.params.at("axes")},
                                 {"split_axis", e.params.at("concat_axis")},
                                 {"concat_axis", e.params.at("split_axis")},
                                 {"tiled", e.params.at("tiled")}},
                                c.xt));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &t = e.ins[0]->type;
        AxesArg a = axesOf(fe, e);
        fe.callRt("shm_all_to_all",
                  {fe.dev, fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]), fe.i32(t.rank()),
                   fe.me.i64Array(t.shape), fe.i32(e.intParam("split_axis")), fe.i32(e.intParam("concat_axis")),
                   fe.i32(e.intParam("tiled") != 0), a.ptr, a.count});
        return true;
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = {Communication::Collective, CollectiveKind::AllToAll, allToAllBytes, false},
  };
  return r;
}

// perm: flattened (source, destination) pairs; devices no pair sends to receive zeros.
template <> const Rules &define<Prim::Ppermute>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // perm: (source, destination) group indices, each at most once
        int64_t n;
        std::vector<int64_t> perm;
        if (!c.groupSize(n) || !c.param("perm", perm)) return false;
        if (perm.size() % 2) return c.fail("perm has an odd number of entries");
        std::vector<bool> src(n), dst(n);
        for (size_t i = 0; i < perm.size(); i += 2) {
          if (!c.inRange(perm[i], n, "perm source") || !c.inRange(perm[i + 1], n, "perm destination")) return false;
          if (src[perm[i]] || dst[perm[i + 1]]) return c.fail("perm repeats a source or a destination");
          src[perm[i]] = dst[perm[i + 1]] = true;
        }
        return c.out(c.in(0));
      },
      .variance = VarianceRule::VaryingToVarying,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        std::vector<int64_t> inv = c.e.intsParam("perm");
        for (size_t i = 0; i + 1 < inv.size(); i += 2) std::swap(inv[i], inv[i + 1]);
        c.accumulate(0, c.apply(Prim::Ppermute, c.c, {{"axes", c.e.params.at("axes")}, {"perm", inv}}, c.xt));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &t = e.ins[0]->type;
        const std::vector<int64_t> &perm = e.intsParam("perm");
        if (perm.size() % 2) return fe.fail("ppermute: perm must hold (src, dst) pairs");
        AxesArg a = axesOf(fe, e);
        fe.callRt("shm_ppermute", {fe.dev, fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]),
                                   fe.i32(t.rank()), fe.me.i64Array(t.shape), fe.me.i64Array(perm),
                                   fe.i32((int64_t)perm.size() / 2), a.ptr, a.count});
        return true;
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = {Communication::Collective, CollectiveKind::Ppermute, ppermuteBytes, false},
  };
  return r;
}

// () -> i32[], varying over its axes: the row-major index of the device in the group.
template <> const Rules &define<Prim::AxisIndex>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        int64_t n;
        return c.groupSize(n) && c.out(DType::I32, {});
      },
      .variance = VarianceRule::AxisIndex,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        AxesArg a = axesOf(fe, e);
        fe.b.CreateStore(fe.callRt("shm_axis_index", {fe.dev, a.ptr, a.count}), fe.buffer(e.outs[0]));
        return true;
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
