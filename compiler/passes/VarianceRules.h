// The device-variance typing rule of every primitive (seed 000's table), as one switch over
// ir::Prim with no default: a primitive added to Primitives.def does not build until it has
// a rule here.
#pragma once
#include "ir/IR.h"

namespace shmapc::passes {

enum class VarianceRule {
  Invariant,          // creates a value: invariant everywhere (constants, iota, random)
  SameAsOperands,     // non-collective: operands lifted to their union, result has it
  UserPsum,           // psum = psum2 after automatic pbroadcasts (n*x over invariant axes)
  VaryingToInvariant, // psum2, all_gather_invariant: operand varies over the axes; result does not
  MaxMin,             // pmax, pmin: like psum2; over axes the operand is invariant on, identity
  InvariantToVarying, // pbroadcast, pscatter: operand invariant over the axes; result varies
  VaryingToVarying,   // all_gather, psum_scatter, all_to_all, ppermute
  AxisIndex,          // () -> varying over the axes
  Loop,               // carries: a fixed point over the body
  Cond,               // union of both branches and the predicate
  Shmap,              // body params from in_specs; results checked against out_specs
  Call,               // inlined before variance inference
  Transform,          // jvp, vjp: the traced function typed like a call (differentiated after)
  Effect,             // print: host only
};

inline VarianceRule varianceRule(ir::Prim p) {
  using ir::Prim;
  switch (p) {
  case Prim::Constant:
  case Prim::Iota:
  case Prim::RandomNormal:
  case Prim::RandomUniform: return VarianceRule::Invariant;
  case Prim::Neg: case Prim::Exp: case Prim::Log: case Prim::Sin: case Prim::Cos:
  case Prim::Tanh: case Prim::Sqrt: case Prim::Abs: case Prim::Not: case Prim::Convert:
  case Prim::Add: case Prim::Sub: case Prim::Mul: case Prim::Div: case Prim::Rem:
  case Prim::Floor: case Prim::FloorDiv:
  case Prim::Max: case Prim::Min: case Prim::Pow: case Prim::And: case Prim::Or:
  case Prim::Eq: case Prim::Ne: case Prim::Lt: case Prim::Le: case Prim::Gt: case Prim::Ge:
  case Prim::Select: case Prim::BroadcastInDim: case Prim::Reshape: case Prim::Transpose:
  case Prim::ReduceSum: case Prim::ReduceMax: case Prim::ReduceMin: case Prim::Matmul:
  case Prim::Slice: case Prim::DynamicSlice: case Prim::DynamicUpdateSlice:
  case Prim::Concatenate: return VarianceRule::SameAsOperands;
  case Prim::Psum: return VarianceRule::UserPsum;
  case Prim::Psum2:
  case Prim::AllGatherInvariant: return VarianceRule::VaryingToInvariant;
  case Prim::Pmax:
  case Prim::Pmin: return VarianceRule::MaxMin;
  case Prim::Pbroadcast:
  case Prim::Pscatter: return VarianceRule::InvariantToVarying;
  case Prim::AllGather:
  case Prim::PsumScatter:
  case Prim::AllToAll:
  case Prim::Ppermute: return VarianceRule::VaryingToVarying;
  case Prim::AxisIndex: return VarianceRule::AxisIndex;
  case Prim::Loop: return VarianceRule::Loop;
  case Prim::Cond: return VarianceRule::Cond;
  case Prim::Shmap: return VarianceRule::Shmap;
  case Prim::Call: return VarianceRule::Call;
  case Prim::Jvp:
  case Prim::Vjp: return VarianceRule::Transform;
  case Prim::Print: return VarianceRule::Effect;
  }
  return VarianceRule::Effect;  // unreachable: the switch covers every primitive
}

} // namespace shmapc::passes
