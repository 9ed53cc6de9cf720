// hoist-loop-reductions' analysis (HoistLoopPlan.cpp): which of a loop's carries accumulate
// psum2s linearly, through which equations, and how many bytes those sums move. The rewrite
// is in HoistLoopReductions.cpp, whose header comment states the rules.
#pragma once
#include "ir/IR.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace shmapc::passes::hoist {

// How a linear equation reads its operands: `linear`, those it is linear in (the others are
// indices, or `scale`: a factor free of the sums, which must vary as the result does).
struct Operands {
  std::vector<size_t> linear, scale;
};

// The operands of `e` through which it is linear, or false when it is not one of the linear
// equations this pass follows. `fromSums(v)`: v is computed from the carry or a sum (the
// operand of a mul or div that is, the factor the one that is not).
bool linearOperands(const ir::Eqn &e, Operands &o, const std::function<bool(const ir::Value *)> &fromSums);

// Where a body's values are defined and read.
struct Uses {
  std::map<const ir::Value *, size_t> def;                 // value -> defining equation
  std::map<const ir::Value *, std::vector<size_t>> reads;  // value -> reading equations
  std::map<const ir::Value *, int> resultReads;            // value -> times it is a result
  explicit Uses(const ir::Func &f);
};

// Whether `v` (defined in `f`, or a param) is a zero: a zero constant, possibly lifted,
// broadcast or reshaped.
bool isZero(const Uses &u, const ir::Func &f, const ir::Value *v);

// What moving one carry's sums after the loop takes.
struct Plan {
  size_t carry = 0;
  std::map<size_t, Operands> chain;  // the linear equations between the sums and the carry's result
  std::set<size_t> roots;            // the psum2s
  std::vector<int64_t> axes;
  std::map<std::string, ir::Attr> params;  // the first psum2's
  Loc loc;
  ir::AxisSet over = 0;  // axes as a set
  int64_t replaces = 0;  // the bytes the psum2s summed per run of the loop (all iterations)
};

// The bytes a psum2 (by its result) sums per run of the function it stands in: its operand's,
// or, for one this pass put after an inner loop, what the sums it replaced did.
using Replaced = std::map<const ir::Value *, int64_t>;

enum class Verdict { No, MoreBytes, Yes };

// The plan for carry k of `loop` (its body `b`, whose uses are `u`): Yes, MoreBytes where it
// would sum more bytes than the psum2s it replaces, No where the rewrite does not apply.
// `zeroInit`: the carry starts at zero in the loop's function.
Verdict planCarry(const ir::Eqn &loop, const ir::Func &b, const Uses &u, size_t k, bool zeroInit,
                  const Replaced &replaced, Plan &plan);

// The plan for summing, at `end` (a value of f, whose uses are `u`), the psum2s it is a linear
// function of: the sums become one psum2 of `end`'s operands' linear function, whose result
// is `end`. Yes, MoreBytes or No as planCarry.
Verdict planEnd(const ir::Func &f, const Uses &u, ir::Value *end, const Replaced &replaced, Plan &plan);

} // namespace shmapc::passes::hoist
