// Autodiff internals shared by the differentiate pass's files (JAX's ad.py, in IR form):
//   flatten      — a straight-line copy of a Func (calls inlined), so the rules below only
//                  see first-order equations, shmaps, loops and conds (whose bodies are
//                  flattened too);
//   linearize    — per primitive, the jvp rule: emits primal equations into the Func being
//                  built and the linear (tangent) equations into a tape;
//   transpose    — per linear primitive, the transpose rule: cotangents flow backwards through
//                  the tape; psum2 <-> pbroadcast, all_gather <-> psum_scatter,
//                  all_gather_invariant <-> pscatter, all_to_all <-> all_to_all, ppermute <->
//                  inverse ppermute: the table of JAX's note on efficient transposition), a
//                  shmap transposes to a shmap with in_specs and out_specs swapped, and a
//                  loop to a loop that runs the iterations backwards (ad/Loop.cpp), a cond to
//                  a cond of its branches' vjps (ad/Cond.cpp).
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

#include <map>
#include <set>
#include <vector>

namespace shmapc::passes {
// Replaces each jvp/vjp equation by a call of a new function computing it (autodiff, with
// the variance-typed transpose rules for collectives and shmap, or with `naiveTranspose`
// (--transpose=naive) the untyped ones).
void differentiate(ir::Module &m, bool naiveTranspose, Diagnostics &diags);
} // namespace shmapc::passes

namespace shmapc::passes::ad {

using namespace ir;

// Emits equations into a Func.
struct Builder {
  Module &m;
  Func &f;
  Loc loc;

  Value *emit(Prim p, std::vector<Value *> ins, const Type &out,
              std::map<std::string, Attr> params = {}, const std::string &hint = "");
  void emitEqn(Eqn e) { f.eqns.push_back(std::move(e)); }

  // Constants (invariant) and helpers that keep operand variance equal, as the IR requires.
  Value *scalar(double v, DType t);
  Value *full(double v, const Type &like);           // `like`'s shape, dtype and variance
  Value *zerosLike(const Type &t) { return full(0.0, t); }
  Value *liftTo(Value *v, AxisSet vary);              // pbroadcast if needed
  Value *binary(Prim p, Value *a, Value *b);          // equal shapes; result typed like a
  Value *unary(Prim p, Value *a);
  Value *compare(Prim p, Value *a, Value *b);
  Value *convert(Value *a, DType t);
  Value *select(Value *pred, Value *a, Value *b);
  Value *broadcastTo(Value *v, const Type &target, std::vector<int64_t> bdims);
  Value *reduceSum(Value *v, std::vector<int64_t> axes);
  Value *reshape(Value *v, std::vector<int64_t> shape);
  Value *transpose(Value *v, std::vector<int64_t> perm);
  Value *i32(int64_t v) { return scalar((double)v, DType::I32); }
};

// A linear equation of the tape: `e` with the positions of its linear operands. For a shmap,
// `e.ins` holds the primal operands and `tangentIns` their tangents (null = zero).
struct LinearEqn {
  Eqn e;
  std::vector<bool> linear;              // per operand of e
  std::vector<Value *> tangentIns;       // shmap only
  std::vector<Value *> tangentOuts;      // shmap only: tangents of e.outs
  std::vector<Value *> residuals;        // loop: each carry's per-iteration stack; shmap: the
                                         // forward shmap's residual results
  std::vector<PartitionSpec> residualSpecs; // shmap only: their out_specs
  Func *backward = nullptr;              // shmap only: the backward body (ad/Shmap.cpp)
  std::vector<Func *> branchBackward;    // cond whose branches communicate (savingCond): per
                                         // branch, its vjp reading the saved collective
                                         // results (residuals, one slot per branch's value)
};

// Options for one differentiation.
struct Mode {
  bool naiveTranspose = false;  // --transpose=naive: the rules before variance types
};

class Differentiator {
public:
  Differentiator(Module &m, Diagnostics &diags, Mode mode) : m_(m), diags_(diags), mode_(mode) {}

  // f(primals) -> (outs...) becomes g(primals..., tangents...) -> (outs..., tangent outs...),
  // or -> (tangent outs...) with `tangentsOnly` (a shmap body's jvp).
  Func *jvpFunc(Func &f, bool tangentsOnly);
  // f(primals) -> (outs...) becomes g(primals..., cts...) -> ([outs...,] cts of wrt params...).
  // With `linear`, f must be linear in the wrt params (transpose(f)).
  Func *vjpFunc(Func &f, const std::vector<int64_t> &wrt, bool withValue, bool linear, Loc loc);

  // vjpFunc for the body of `shmap` (naive mode needs its specs); not cached.
  Func *vjpFuncFor(Func &f, const std::vector<int64_t> &wrt, bool withValue, bool linear, Loc loc,
                   const Eqn *shmap);

private:
  void checkLinear(const Func &g, const std::vector<Value *> &primals,
                   const std::vector<int64_t> &wrt, Loc loc);
  friend struct Linearizer;
  Module &m_;
  Diagnostics &diags_;
  Mode mode_;
  std::map<std::tuple<Func *, std::vector<int64_t>, bool, bool>, Func *> vjpCache_;
  std::map<std::pair<Func *, bool>, Func *> jvpCache_;

public:
  // Copies `src` into `dst` straight-line (calls inlined; loops and conds stay loops and conds,
  // with flattened copies of their bodies, but for empty loops).
  // `map` gives dst values for src params on entry; returns dst values for src results.
  std::vector<Value *> flattenInto(const Func &src, Func &dst, std::map<const Value *, Value *> &map);

  Module &module() { return m_; }
  Diagnostics &diags() { return diags_; }
  const Mode &mode() const { return mode_; }
};

// Forward sweep over a flattened Func: emits primal equations into `out` and tangent equations
// either into `out` as well (jvp) or onto `tape` (vjp).
struct Linearizer {
  Differentiator &d;
  Builder b;
  bool emitTangents;                       // true: jvp; false: record on the tape
  std::vector<LinearEqn> tape;
  std::map<const Value *, Value *> tangent; // primal value -> its tangent (absent = zero)
  std::set<const Value *> tangentValues;    // values that are tangents (linear)

  Value *tangentOf(Value *v) const {
    auto it = tangent.find(v);
    return it == tangent.end() ? nullptr : it->second;
  }
  Value *newTangent(const Type &t);
  // A linear equation: emitted (jvp) or taped (vjp). Operands in `tangentValues` are linear.
  Value *linear(Prim p, std::vector<Value *> ins, const Type &out, std::map<std::string, Attr> params = {});
  // Applies the jvp rule of `e` (already emitted as primal into b.f).
  void rule(const Eqn &e);
  Value *addTangents(Value *a, Value *b);

  // The higher-order primitives' jvp rules (ad/Shmap.cpp, ad/Loop.cpp, ad/Cond.cpp).
  void shmapRule(const Eqn &e);
  void loopRule(const Eqn &e);
  void whileRule(const Eqn &e);
  void condRule(const Eqn &e);

private:
  void splitShmap(const Eqn &e, const std::vector<Value *> &t);
  void blockedLoop(const Eqn &e);
  void savingLoop(const Eqn &e, const std::vector<Value *> &t);
  void tapeStackingLoop(const Eqn &e, const std::vector<Value *> &t, Func *f,
                        const std::vector<Type> &stackTypes, Func *backward);
  bool savingCond(const Eqn &e, const std::vector<Value *> &t);
  // The jvp of loop or while `e`, as one equation of the same primitive (ad/Loop.cpp).
  Eqn jvpLoop(const Eqn &e, size_t leading, const std::vector<Value *> &t);
  // Drops the primal `e` the linearizer just emitted (a jvp loop/cond computes it too).
  void popPrimal(const Eqn &e);
  // Emits `j` (the jvp of `e`) with a new tangent result per float result of `e`.
  void emitWithTangentOuts(Eqn j, const Eqn &e);
};

// What a primitive's jvp rule sees (compiler/prims/): the equation `e`, already emitted as
// primal, and the tangents `t` of its operands (null: zero, or not differentiable).
struct JvpCtx {
  Linearizer &L;
  Builder &b;
  const Eqn &e;
  std::vector<Value *> t;
  Value *x, *y;    // the first operand and the first result (null if there is none)
  const Type &ty;  // y's type (x's if there is no result)

  void set(Value *tv) {  // the tangent of y (null: zero)
    if (tv) L.tangent[y] = tv;
  }
  Value *linear(Prim p, std::vector<Value *> ins, const Type &out,
                std::map<std::string, Attr> params = {}) {
    return L.linear(p, std::move(ins), out, std::move(params));
  }
  Value *scaled(Value *tv, Value *coef) {  // tv * coef, linear in tv; null stays null
    return tv ? linear(Prim::Mul, {tv, b.liftTo(coef, tv->type.vary)}, tv->type) : nullptr;
  }
  Value *zerosIfNull(Value *tv, const Value *primal) { return tv ? tv : b.zerosLike(primal->type); }
  Value *add(Value *p, Value *q) { return L.addTangents(p, q); }
};

// Backward sweep: consumes the tape in reverse, accumulating cotangents.
struct Transposer {
  Differentiator &d;
  Builder b;
  std::map<const Value *, Value *> ct;  // tangent value -> its accumulated cotangent

  void accumulate(Value *tangentValue, Value *c);
  Value *ctOf(const Value *v) const {
    auto it = ct.find(v);
    return it == ct.end() ? nullptr : it->second;
  }
  void rule(const LinearEqn &le);

  // The higher-order primitives' transpose rules (ad/Shmap.cpp, ad/Loop.cpp, ad/Cond.cpp).
  void shmapRule(const LinearEqn &le);
  void loopRule(const LinearEqn &le);
  void condRule(const LinearEqn &le);
};

// What a primitive's transpose rule sees (compiler/prims/): the taped linear equation and the
// cotangent `c` of its result (never null for a first-order primitive: a zero cotangent
// contributes nothing, so the rule is not called).
struct TransposeCtx {
  Transposer &T;
  Builder &b;
  const LinearEqn &le;
  const Eqn &e;
  Value *c;
  const Type &xt;  // the first operand's type

  bool isLinear(size_t i) const { return le.linear[i]; }
  // Adds `ct` to the cotangent of operand i, if that operand is linear (a tangent).
  void accumulate(size_t i, Value *ct) {
    if (le.linear[i]) T.accumulate(e.ins[i], ct);
  }
  // `p` applied to `v` with `params`, typed `t`.
  Value *apply(Prim p, Value *v, std::map<std::string, Attr> params, const Type &t) {
    return b.emit(p, {v}, t, std::move(params));
  }
};

// A new Func with `f`'s mesh and variance flags, named `name` (made unique).
Func *newFuncLike(Module &m, const Func &f, const std::string &name);
// A nested body (loop body or branch) for derived code, named after `body` + `suffix`.
Func *nestedLike(Module &m, const Func &body, const std::string &suffix);
// `v` through a value map (itself where the map has no entry).
Value *lookup(const std::map<const Value *, Value *> &map, const Value *v);
// Appends a copy of `e` to `dst`, operands through `map`, with fresh results (added to `map`).
void copyEqn(const Eqn &e, Func &dst, std::map<const Value *, Value *> &map);
// Per equation of a vjp `v` whose params from `firstCt` on are cotangents: whether it reads
// one, directly or through earlier equations (its backward part).
std::vector<bool> readsCotangent(const Func &v, size_t firstCt);
// Appends a parameter of type `t` to `f`.
Value *param(Func &f, const Type &t, const std::string &hint);

// Removes equations whose results are unused (no side effects remain after differentiation).
void removeDeadEqns(Func &f);
// removeDeadEqns, and also drops the carries of loops whose results are unused and that no
// live carry reads, and the consts their bodies do not read (recursively). For derived
// functions only: their loop bodies are flat (no prints) and each belongs to one loop.
void pruneDeadCode(Func &f);
// Narrows cond `e` to its results in `liveAfter` and the operands its branches still read.
void pruneCond(Eqn &e, const std::set<const Value *> &liveAfter);
// Narrows a shmap whose body is Func::singleUse to its results in `liveAfter`.
void pruneShmap(Eqn &e, const std::set<const Value *> &liveAfter);
// Drops params of `g` among the first `count` that nothing reads; returns which remain.
std::vector<bool> pruneParams(Func &g, size_t count);

} // namespace shmapc::passes::ad
