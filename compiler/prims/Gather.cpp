// Gathering and scattering along one array dimension over mesh `axes` (tiled: blocks are
// concatenated; untiled: stacked along a new dimension):
//   all_gather            varying -> varying    transposes to psum_scatter
//   psum_scatter          varying -> varying    transposes to all_gather
//   all_gather_invariant  varying -> invariant  transposes to pscatter
//   pscatter              invariant -> varying  (a local slice, no communication), to
//                                               all_gather_invariant
#include "prims/Prim.h"

namespace shmapc::prims {

namespace {

// Params of the gather side (axis) from the scatter side (scatter_dimension) and back.
std::map<std::string, Attr> scatterParams(const Eqn &e) {
  return {{"axes", e.params.at("axes")}, {"scatter_dimension", e.params.at("axis")}, {"tiled", e.params.at("tiled")}};
}

bool lowerAllGather(FuncEmitter &fe, size_t i) {
  const Eqn &e = fe.f.eqns[i];
  const Type &t = e.ins[0]->type;
  AxesArg a = axesOf(fe, e);
  fe.callRt("shm_all_gather", {fe.dev, fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]),
                               fe.i32(t.rank()), fe.me.i64Array(t.shape), fe.i32(e.intParam("axis")),
                               fe.i32(e.intParam("tiled") != 0), a.ptr, a.count});
  return true;
}

// Every device receives each of the n-1 other members' operands (runtime/collectives.cpp).
// The runtime's all_gather writes a result nothing else reads into a buffer left null where the
// block is not used (SHM_OUT_COLLECTIVE_ONLY).
CollectiveBytes allGatherBytes(const Eqn &e, int64_t n, int64_t groups) {
  return everyDeviceReceives((n - 1) * e.ins[0]->type.numElements() * dtypeSize(e.ins[0]->type.dtype), n * groups);
}
constexpr Communication allGatherComm{Communication::Collective, CollectiveKind::AllGather, allGatherBytes, true};

// The operand viewed as [outer, n, blk] along scatter_dimension: each device folds [:, r, :]
// of the n-1 others' operands into its own.
CollectiveBytes psumScatterBytes(const Eqn &e, int64_t n, int64_t groups) {
  const Type &t = e.ins[0]->type;
  const size_t dim = (size_t)std::max<int64_t>(0, e.intParam("scatter_dimension"));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (d < dim) outer *= t.shape[d];
    else if (d > dim) inner *= t.shape[d];
  const int64_t along = dim < t.shape.size() ? t.shape[dim] : 1;
  return everyDeviceReceives((n - 1) * outer * (along / n * inner) * dtypeSize(t.dtype), n * groups);
}

} // namespace

template <> const Rules &define<Prim::AllGather>() {
  static const Rules r{
      .shape = gatherShape,
      .variance = VarianceRule::VaryingToVarying,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        c.accumulate(0, c.apply(Prim::PsumScatter, c.c, scatterParams(c.e), c.xt));
      },
      .lower = lowerAllGather,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = allGatherComm,
  };
  return r;
}

template <> const Rules &define<Prim::PsumScatter>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) { return scatterShape(c, "scatter_dimension"); },
      .variance = VarianceRule::VaryingToVarying,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        const Eqn &e = c.e;
        c.accumulate(0, c.apply(Prim::AllGather, c.c,
                                {{"axes", e.params.at("axes")},
                                 {"axis", e.params.at("scatter_dimension")},
                                 {"tiled", e.params.at("tiled")}},
                                c.xt));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &t = e.ins[0]->type;
        AxesArg a = axesOf(fe, e);
        fe.callRt("shm_psum_scatter",
                  {fe.dev, fe.dtypeCode(t.dtype), fe.buffer(e.ins[0]), fe.buffer(e.outs[0]), fe.i32(t.rank()),
                   fe.me.i64Array(t.shape), fe.i32(e.intParam("scatter_dimension")),
                   fe.i32(e.intParam("tiled") != 0), a.ptr, a.count});
        return true;
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = {Communication::Collective, CollectiveKind::PsumScatter, psumScatterBytes, false},
  };
  return r;
}

// In an untyped body (naive mode) it transposes as all_gather did before variance types: to a
// psum_scatter.
template <> const Rules &define<Prim::AllGatherInvariant>() {
  static const Rules r{
      .shape = gatherShape,
      .variance = VarianceRule::VaryingToInvariant,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        if (!c.b.f.checkVma) return c.accumulate(0, c.apply(Prim::PsumScatter, c.c, scatterParams(c.e), c.xt));
        c.accumulate(0, c.apply(Prim::Pscatter, c.c, c.e.params, c.xt));
      },
      .lower = lowerAllGather,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = allGatherComm,
  };
  return r;
}

// The block of dimension `axis` at this device's group index. Tiled: a block of
// out.shape[axis] rows; untiled: one row, whose dimension the output drops (same bytes).
template <> const Rules &define<Prim::Pscatter>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) { return scatterShape(c, "axis"); },
      .variance = VarianceRule::InvariantToVarying,
      .jvp = linearJvp,
      .transpose = [](TransposeCtx &c) {
        c.accumulate(0, c.apply(Prim::AllGatherInvariant, c.c, c.e.params, c.xt));
      },
      .lower = [](FuncEmitter &fe, size_t i) {
        const Eqn &e = fe.f.eqns[i];
        const Type &in = e.ins[0]->type, &out = e.outs[0]->type;
        int64_t axis = e.intParam("axis");
        bool tiled = e.intParam("tiled") != 0;
        if (axis < 0 || axis >= in.rank()) return fe.fail("pscatter: axis out of range");
        if (tiled && out.rank() != in.rank()) return fe.fail("pscatter: tiled output rank differs");
        int64_t block = tiled ? out.shape[axis] : 1;
        AxesArg a = axesOf(fe, e);
        llvm::IRBuilder<> &b = fe.b;
        llvm::Value *index = fe.callRt("shm_axis_index", {fe.dev, a.ptr, a.count});
        llvm::Value *starts = fe.entryAlloca(fe.me.i64Ty, std::max<int64_t>(1, in.rank()), "starts");
        for (int64_t d = 0; d < in.rank(); ++d) {
          llvm::Value *s = d == axis ? b.CreateMul(b.CreateSExt(index, fe.me.i64Ty), fe.i64(block)) : fe.i64(0);
          b.CreateStore(s, b.CreateConstGEP1_64(fe.me.i64Ty, starts, d));
        }
        std::vector<int64_t> sizes = in.shape;
        sizes[axis] = block;
        fe.callRt("shm_dynamic_slice", {fe.dtypeCode(in.dtype), fe.buffer(e.ins[0]), fe.i32(in.rank()),
                                        fe.me.i64Array(in.shape), starts, fe.me.i64Array(sizes),
                                        fe.buffer(e.outs[0])});
        return true;
      },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = {Communication::Free, CollectiveKind::Psum, nullptr, false},
  };
  return r;
}

} // namespace shmapc::prims
