// What a primitive's file in compiler/prims/ includes: the Rules it defines, the contexts the
// rules receive, and lowering helpers shared by several primitives.
#pragma once
#include "codegen/CodegenContext.h"
#include "passes/AD.h"
#include "prims/Rules.h"
#include "prims/ShapeRules.h"

namespace shmapc::prims {

using namespace ir;
using codegen::FuncEmitter;
using codegen::ScalarCtx;
using passes::ad::Builder;
using passes::ad::JvpCtx;
using passes::ad::LinearEqn;
using passes::ad::TransposeCtx;

// An element-wise primitive (`shape`: one of ShapeRules.h's element-wise rules): operands and
// result vary alike (variance typing's rule for non-collectives), and it is computed inside
// fused loops.
constexpr Rules elementwise(bool (*shape)(ShapeCtx &), void (*jvp)(JvpCtx &), void (*transpose)(TransposeCtx &),
                            llvm::Value *(*scalar)(ScalarCtx &)) {
  return Rules{.shape = shape,
               .variance = VarianceRule::SameAsOperands,
               .jvp = jvp,
               .transpose = transpose,
               .lower = lowerFused,
               .scalar = scalar,
               .sharding = elementwiseFactors,
               .comm = communicatesNothing};
}

// The bytes of a collective call where every one of `devices` devices receives `bytes` and
// sends none by the runtime's byte model (it reads from the others' buffers).
CollectiveBytes everyDeviceReceives(int64_t bytes, int64_t devices);

// A collective's mesh axes as runtime arguments: (pointer to an i32 array, count).
struct AxesArg {
  llvm::Value *ptr, *count;
};
AxesArg axesOf(FuncEmitter &fe, const Eqn &e);

} // namespace shmapc::prims
