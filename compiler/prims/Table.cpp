// The table of every primitive's rules, in Primitives.def order. Each entry names the
// primitive's definition, so one without a definition in this folder fails to link.
#include "prims/Prim.h"

namespace shmapc::prims {

const Rules &rulesOf(Prim p) {
  static const Rules *const table[] = {
#define PRIM(Id, Name, Kind, NumIn, NumOut) &define<Prim::Id>(),
#include "ir/Primitives.def"
#undef PRIM
  };
  return *table[(size_t)p];
}

void noTangent(JvpCtx &) {}

void linearJvp(JvpCtx &c) { c.set(c.linear(c.e.prim, {c.t[0]}, c.ty, c.e.params)); }

void notLinear(TransposeCtx &) {}

bool lowerFused(FuncEmitter &fe, size_t index) { return fe.emitElementwiseGroup(index, index); }

AxesArg axesOf(FuncEmitter &fe, const Eqn &e) {
  const std::vector<int64_t> &axes = e.intsParam("axes");
  return {fe.i32List(axes), fe.i32((int64_t)axes.size())};
}

} // namespace shmapc::prims
