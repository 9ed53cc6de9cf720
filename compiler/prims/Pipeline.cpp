// The pipeline stage marker. It only marks a place in a differentiated function: the
// split-micro-batches pass cuts the function there and removes it before variance typing,
// autodiff and lowering, so those rules are never asked (lowering one is a compiler bug).
#include "prims/Prim.h"

namespace shmapc::prims {

template <> const Rules &define<Prim::StageBoundary>() {
  static const Rules r{
      .shape = [](ShapeCtx &) { return true; },
      .variance = VarianceRule::Effect,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t) { return fe.fail("stage_boundary reached codegen"); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
