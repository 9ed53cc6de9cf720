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
llvm::Value *identityScalar(ScalarCtx &c) { return c.x[0]; }

AxesArg axesOf(FuncEmitter &fe, const Eqn &e) {
  const std::vector<int64_t> &axes = e.intsParam("axes");
  return {fe.i32List(axes), fe.i32((int64_t)axes.size())};
}

// Every dimension of the operands and the result is one factor (operands of one shape).
FactorRule elementwiseFactors(const Eqn &e) {
  FactorRule r;
  const int64_t rank = e.outs[0]->type.rank();
  for (int64_t d = 0; d < rank; ++d) {
    Factor f;
    for (size_t i = 0; i < e.ins.size(); ++i)
      if (e.ins[i]->type.rank() == rank) f.ins.push_back({(int)i, (int)d});
    f.outs.push_back({0, (int)d});
    r.factors.push_back(f);
  }
  return r;
}

Value *tiedValue(const Eqn &e, const Tied &t) {
  switch (t.of) {
  case Tied::In: return e.ins[(size_t)t.index];
  case Tied::Out: return e.outs[(size_t)t.index];
  case Tied::Param: return e.bodies[(size_t)t.body]->params[(size_t)t.index];
  case Tied::Result: return e.bodies[(size_t)t.body]->results[(size_t)t.index];
  }
  return nullptr;
}

FactorRule replicatedFactors(const Eqn &) { return FactorRule{FactorRule::Replicated, {}, {}, nullptr}; }
FactorRule unsupportedInJit(const Eqn &) { return FactorRule{FactorRule::Unsupported, {}, {}, nullptr}; }

} // namespace shmapc::prims
