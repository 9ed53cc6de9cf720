// What a primitive's definition in compiler/prims/ includes: the Rules it defines (the rules
// layer), the contexts the rules receive (autodiff's and codegen's: the definitions sit above
// the stages that interpret them), and helpers shared by several primitives.
#pragma once
#include "codegen/CodegenContext.h"
#include "passes/ad/AD.h"
#include "rules/Rules.h"
#include "rules/ShapeRules.h"

namespace shmapc::prims {

using namespace ir;
using namespace rules;
using codegen::FuncEmitter;
using codegen::ScalarCtx;
using passes::ad::Builder;
using passes::ad::JvpCtx;
using passes::ad::LinearEqn;
using passes::ad::TransposeCtx;

// Each primitive's definition: define<Prim::X>() in the file of its family.
template <Prim P>
const Rules &define();
#define PRIM(Id, Name, Kind, NumIn, NumOut) template <> const Rules &define<Prim::Id>();
#include "ir/Primitives.def"
#undef PRIM

// Rules several primitives share.
void noTangent(JvpCtx &c);      // constants, integer and boolean results
// Each device's share of a reduction's tangent over mesh `axes` (AllReduce.cpp), for pmax /
// pmin and pprod and their rooted forms (Rooted.cpp): where x equals the extremum, divided by
// how many devices do (ties share); the product of the other devices' operands, right with
// zeros. `invariant`: the reduction's type (x's, invariant over the axes).
Value *extremumShare(Builder &b, Value *x, Value *extremum, const Attr &axes);
Value *productShare(Builder &b, Value *x, const Type &invariant, const Attr &axes);
void linearJvp(JvpCtx &c);      // linear in its first operand: the same primitive
void notLinear(TransposeCtx &c);  // never taped as linear
bool lowerFused(FuncEmitter &fe, size_t index);  // a fused loop of one equation
llvm::Value *identityScalar(ScalarCtx &c);        // the element unchanged (pbroadcast, ...)

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


// A collective's mesh axes as runtime arguments: (pointer to an i32 array, count).
struct AxesArg {
  llvm::Value *ptr, *count;
};
AxesArg axesOf(FuncEmitter &fe, const Eqn &e);

} // namespace shmapc::prims
