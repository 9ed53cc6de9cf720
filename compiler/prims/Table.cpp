// The table of every primitive's rules, in Primitives.def order, installed for rulesOf(). Each
// entry names the primitive's definition, so one without a definition in this folder fails to
// link. And the helpers Prim.h declares for the definitions.
#include "prims/Prim.h"
#include "prims/Prims.h"

namespace shmapc::prims {

void installRules() {
  static const RulesTable table = {
#define PRIM(Id, Name, Kind, NumIn, NumOut) &define<Prim::Id>(),
#include "ir/Primitives.def"
#undef PRIM
  };
  rules::installRules(table);
}

void noTangent(JvpCtx &) {}

void linearJvp(JvpCtx &c) { c.set(c.linear(c.e.prim, {c.t[0]}, c.ty, c.e.params)); }

void notLinear(TransposeCtx &) {}

bool lowerFused(FuncEmitter &fe, size_t index) { return fe.emitElementwiseGroup(index, index); }
llvm::Value *identityScalar(ScalarCtx &c) { return c.x[0]; }

AxesArg axesOf(FuncEmitter &fe, const Eqn &e) {
  const std::vector<int64_t> &axes = e.intsParam("axes");
  return {fe.i32List(axes), fe.i32((int64_t)axes.size())};
}

} // namespace shmapc::prims
