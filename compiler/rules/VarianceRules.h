// The kinds of device-variance typing rule (the table of JAX's note on efficient transposition).
// Each primitive names its kind in its definition in compiler/prims/; passes/variance/InsertPbroadcasts.cpp
// applies them, and makeEqn (Rules.h) gives a built equation's result the variance they say.
#pragma once
#include "ir/IR.h"

namespace shmapc::rules {

enum class VarianceRule {
  Invariant,          // creates a value: invariant everywhere (constants, iota, random)
  Sharded,            // load: with a `spec` param (a sharded load) () -> varying over the axes
                      // the spec names, a constant otherwise
  SameAsOperands,     // non-collective: operands lifted to their union, result has it
  UserPsum,           // psum = psum2 after automatic pbroadcasts (n*x over invariant axes)
  VaryingToInvariant, // psum2, all_gather_invariant: operand varies over the axes; result does not
  MaxMin,             // pmax, pmin: like psum2; over axes the operand is invariant on, identity
  InvariantToVarying, // pbroadcast, pscatter: operand invariant over the axes; result varies
  InvariantCast,      // invariant_cast (internal): operand varies over the axes; result does
                      // not, with no communication (its values were already equal along them)
  FromRoot,           // broadcast (-> invariant), scatter_from (-> varying): the root's operand;
                      // of one invariant over the axes, the identity / a pscatter (no communication)
  VaryingToVarying,   // all_gather, psum_scatter, all_to_all, ppermute
  AxisIndex,          // () -> varying over the axes
  Loop,               // carries: a fixed point over the body
  While,              // a loop whose carries also vary over its predicate's variance
  Cond,               // union of both branches and the predicate
  Shmap,              // body params from in_specs; results checked against out_specs
  Call,               // inlined before variance inference
  Transform,          // jvp, vjp: the traced function typed like a call (differentiated after)
  Effect,             // print: host only
};

} // namespace shmapc::rules
