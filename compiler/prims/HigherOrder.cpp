// The higher-order primitives (bodies in Eqn::bodies). Their rules are whole
// algorithms, each in its own file: variance in passes/InsertPbroadcasts.cpp; jvp and
// transpose of shmap in passes/ADShmap.cpp, of loop in passes/ADLoop.cpp, of cond in
// passes/ADCond.cpp; lowering in codegen/ControlFlow.cpp. Call is inlined and jvp/vjp are
// differentiated away before autodiff and codegen see them.
#include "prims/Prim.h"

namespace shmapc::prims {

template <> const Rules &define<Prim::Call>() {
  static const Rules r{
      .variance = VarianceRule::Call,
      .jvp = noTangent,  // inlined before autodiff (flattenInto)
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitCall(fe.f.eqns[i]); },
      .scalar = nullptr,
  };
  return r;
}

// A shmap transposes to a shmap with in_specs and out_specs swapped; its vjp is a forward
// shmap returning residuals and a backward one reading them.
template <> const Rules &define<Prim::Shmap>() {
  static const Rules r{
      .variance = VarianceRule::Shmap,
      .jvp = [](JvpCtx &c) { c.L.shmapRule(c.e); },
      .transpose = [](TransposeCtx &c) { c.T.shmapRule(c.le); },
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitShmap(fe.f.eqns[i]); },
      .scalar = nullptr,
  };
  return r;
}

template <> const Rules &define<Prim::Loop>() {
  static const Rules r{
      .variance = VarianceRule::Loop,
      .jvp = [](JvpCtx &c) { c.L.loopRule(c.e); },
      .transpose = [](TransposeCtx &c) { c.T.loopRule(c.le); },
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitLoop(fe.f.eqns[i]); },
      .scalar = nullptr,
  };
  return r;
}

// A while loop's trip count depends on data: its jvp is a while over primals and tangents,
// and it has no transpose (reverse mode would need every iteration's carries, and how many
// there are is known only at run time: ADLoop.cpp says so with a located error).
template <> const Rules &define<Prim::While>() {
  static const Rules r{
      .variance = VarianceRule::While,
      .jvp = [](JvpCtx &c) { c.L.whileRule(c.e); },
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitWhile(fe.f.eqns[i]); },
      .scalar = nullptr,
  };
  return r;
}

template <> const Rules &define<Prim::Cond>() {
  static const Rules r{
      .variance = VarianceRule::Cond,
      .jvp = [](JvpCtx &c) { c.L.condRule(c.e); },
      .transpose = [](TransposeCtx &c) { c.T.condRule(c.le); },
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitCond(fe.f.eqns[i]); },
      .scalar = nullptr,
  };
  return r;
}

static bool transformReachedCodegen(FuncEmitter &fe, size_t) {
  return fe.fail("internal error: jvp/vjp reached codegen");
}

template <> const Rules &define<Prim::Jvp>() {
  static const Rules r{
      .variance = VarianceRule::Transform,
      .jvp = noTangent,  // replaced by the differentiate pass
      .transpose = notLinear,
      .lower = transformReachedCodegen,
      .scalar = nullptr,
  };
  return r;
}

template <> const Rules &define<Prim::Vjp>() {
  static const Rules r{
      .variance = VarianceRule::Transform,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = transformReachedCodegen,
      .scalar = nullptr,
  };
  return r;
}

} // namespace shmapc::prims
