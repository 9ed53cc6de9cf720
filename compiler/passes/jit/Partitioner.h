// The partitioner of jit functions (passes/jit/PartitionJit.cpp, where the pass and its design are
// described): its state while one function becomes a shmap, and its steps, defined in
// PartitionJit.cpp (the function, moves, nested bodies, equations by their factors),
// PartitionChoice.cpp (which axes each factor is computed along: the bytes of each choice,
// forward and backward) and PartitionSlice.cpp (slices on the local blocks).
#pragma once
#include "passes/jit/PartitionLayout.h"
#include "rules/Rules.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace shmapc::passes::partition {

using namespace ir;
using namespace layout;

class Partitioner {
public:
  // differentiated: the function is under grad (vjp / jvp), so its choices count the bytes its
  // backward pass will move too.
  Partitioner(Module &m, JitFunc &j, bool differentiated)
      : m_(m), j_(j), f_(*j.func), split_(m, j), differentiated_(differentiated) {}

  void run();

private:
  struct Held {
    Value *local;
    std::vector<Refs> dims;
    Func *in;  // the body it is in
  };

  // The sharding propagation chose for v (unsharded if none).
  std::vector<Refs> target(const Value *v);

  PartitionSpec specOf(const std::vector<Refs> &dims) const;

  std::vector<int64_t> axesParam(const Refs &refs) const;

  Value *emit(Prim p, std::vector<Value *> ins, const Type &out, std::map<std::string, Attr> params, Loc loc,
              Func *into = nullptr);

  Value *constant(double value, DType dtype, std::vector<int64_t> shape, Func *into = nullptr);

  // x with dimension d padded with zeros at its end to `size`.
  Value *pad(Value *x, size_t d, int64_t size, Func *into = nullptr);

  // x's first `size` elements along dimension d.
  Value *unpad(Value *x, size_t d, int64_t size, Func *into = nullptr);

  // x (a local block of a value whose dimension d, of global size n, is split unevenly along
  // `axes`) with its padding set to `identity`: where the block's offset plus the index along
  // d is n or more.
  Value *maskPadding(Value *x, size_t d, const Refs &axes, int64_t n, double identity);

  // The blocks of v this body holds: the one it was made in, and each other sharding a move
  // made (another use's, or one on a move's way: gathered whole before a pscatter).
  std::vector<const Held *> blocks(const Value *v) const;

  // The bytes a device puts into collectives to have v in sharding `to` in this body: moved
  // from the block of it that costs fewest (moveBytes), or, where v only repeats its operand's
  // elements (a broadcast), its operand moved and the equation computed again on the block (a
  // splat made again in `to`: nothing).
  int64_t moveCost(const Value *v, const std::vector<Refs> &to) const;

  // Of a repeating equation's result in `to`: its operand's moveCost.
  int64_t repeatCost(const Eqn &e, const std::vector<Refs> &to) const;

  // v's local value in sharding `to` (planMove's steps; an uneven dimension padded before it
  // is split and sliced to its size after it is gathered), made the way moveCost counts: a
  // block already in `to` read again, else moved from the block that puts in fewest bytes (at
  // equal bytes the one v was made in), else its operand's block moved and repeated.
  Value *moved(const Value *v, const std::vector<Refs> &to);

  // v's block h moved to `to` in this body; each block on the way kept as a copy of v.
  Value *move(const Value *v, const Held &h, const std::vector<Refs> &to);

  void partition(const Eqn &e);

  // A loop or conditional: each tied group held in one sharding (its result's, else what its
  // bodies' parameters have), the operands moved to it, the bodies partitioned into new
  // bodies on the local blocks, their results moved to it; an operand, parameter or result in
  // no group (a predicate, a loop's index) unsharded.
  void partitionNested(const Eqn &e, const rules::FactorRule &rule, Eqn local);

  // A loop's constants are the same in every iteration: a block of one that a body moved with
  // communication (and reads other than to move it on) is moved once before the loop instead,
  // and passed in as one more constant, which the body reads in its place. A conditional's
  // branches keep their moves (one runs; moving before it would move for the other too).
  void hoistConstMoves(const Eqn &e, Eqn &local);

  // The axes of the part of `dims`' dimension r is (its whole dimension, or a reshape's part).
  static Refs partOf(const std::vector<Refs> &dims, const rules::DimRef &r, const rules::Factor &f);

  // What computing an equation with each factor along given axes asks: the operands'
  // shardings, the local result's, and whether a reduced factor is finished by psum_scatter
  // (a result dimension is to be sharded along its axes and is computed whole: the reduce-
  // scatter matmul, Tmp[B_X, F_Y] *F W[F_Y, D] -> Out[B_X, D_Y]).
  struct Assignment {
    std::vector<Refs> axes;                         // each factor's
    std::vector<std::vector<Refs>> want, result;
    int scatterFactor = -1, scatterDim = -1;
  };

  Assignment assign(const Eqn &e, const rules::FactorRule &rule, std::vector<Refs> axes,
                    const std::vector<std::vector<Refs>> &outs) const;

  // The bytes a device puts into collectives for an assignment: moving the operands, finishing
  // the reduced factors (psum_scatter, then one psum / pmax / pmin each), moving the result to
  // its sharding.
  int64_t cost(const Eqn &e, const rules::FactorRule &rule, const Assignment &a,
               const std::vector<std::vector<Refs>> &outs) const;

  // The bytes the backward pass of an assignment puts into collectives, by the transposes of
  // what it does: an operand's cotangent is summed (psum2) over the axes the local product
  // varies along (every factor's) but the operand's block does not (it was invariant there:
  // gathered, or replicated), then moved back to the operand's sharding (a gather's transpose
  // is a slice, a slice's a gather); a psum_scatter's transpose is an all_gather, a psum's a
  // pbroadcast (nothing); the result's move is reversed. Only arrays of floats have
  // cotangents.
  int64_t backwardCost(const Eqn &e, const Assignment &a, const std::vector<std::vector<Refs>> &outs) const;

  // The axes each factor is computed along: of each factor's candidates (its result
  // dimension's sharding, each operand's, none), the assignment that puts the fewest bytes
  // into collectives, no axis used by two factors; at equal bytes the earliest (a factor with
  // a result dimension in the result's sharding, a reduced one in its first operand's). So of
  // a * b with a held {"z", "y"}, b {"z"} and the result to be whole, the product is computed
  // split and gathered once; of lhs[B_X, D_Y] @ rhs[D, F_Y] -> [B_X, F_Y] lhs is gathered
  // over Y (the collective matmul's baseline) rather than rhs moved and the result
  // reduce-scattered. A reshape's parts keep the result's (its dimensions split or merged).
  std::vector<Refs> chooseAxes(const Eqn &e, const rules::FactorRule &rule,
                               const std::vector<std::vector<Refs>> &outs) const;

  // Each factor computed along the axes chooseAxes picks; the operands moved to them.
  void partitionFactors(const Eqn &e, const rules::FactorRule &rule, Eqn local);

  // The equations of moves (and blocks made again from their operands) whose results nothing
  // reads, dropped: a broadcast every use of which broadcasts its moved operand instead, a
  // move out of a loop's body that the loop now gets from outside.
  // (Only in bodies done: a block moved earlier in a body being partitioned may be read by a
  // later use.)
  void dropUnread(const std::vector<Func *> &bodies);

  // How a slice computes one dimension on the local blocks.
  struct SliceDim {
    enum Mode {
      Whole,  // not cut: the operand's and the result's dimension along `axes`
      Cut,    // cut, computed unsharded (the operand's dimension gathered first)
      Shift,  // cut with stride 1, the operand and the result along `axes`: each device's
              // result block from its own operand block and a halo from its neighbours
      Mask,   // cut with stride 1, the operand along `axes` and the result unsharded: each
              // device puts its block's part of the result into zeros, a psum adds them
      Thin,   // cut with a stride that divides the operand's blocks along `axes`: each device
              // takes every stride-th element of its block (the same offset in every block),
              // the pieces are gathered, and the result cut from them
    } mode;
    Refs axes;
  };

  // The halo a Shift dimension needs: the operand's dimension of size n (start s, result
  // size o) split along `axes` into blocks of bi, the result's into blocks of bo. Device k's
  // result block starts at s + k * bo, which is off_k = s + k * (bo - bi) into its own
  // block: it needs `left` elements from the block before and `right` from the one after
  // (none from farther: `fits`).
  struct Halo {
    int64_t left = 0, right = 0, inBlock = 0, outBlock = 0;
    bool fits = true;
  };
  static Halo haloOf(int64_t n, int64_t s, int64_t o, const Refs &axes);

  // The operand's and the result's shardings of a slice computed so.
  static std::pair<std::vector<Refs>, std::vector<Refs>> sliceShardings(const std::vector<SliceDim> &dims);

  // The bytes a device puts into collectives to compute slice e so: moving the operand, the
  // halos, the psum of masked dimensions, moving the result to its sharding.
  int64_t sliceCost(const Eqn &e, const std::vector<SliceDim> &dims, const std::vector<Refs> &to) const;

  // A slice: each dimension computed whole, cut unsharded, shifted or masked (SliceDim),
  // whichever puts the fewest bytes into collectives (at equal bytes the earlier candidate:
  // the result's sharding, then the operand's), no axis used by two dimensions. So a[1:7]
  // of an f32[8] split in two moves nothing (each device's [3] block lies in its [4] one),
  // and a column of a matrix whose columns are split is summed from the devices that hold
  // it rather than gathered with the others.
  void partitionSlice(const Eqn &e, const rules::FactorRule &rule);

  // A concatenation whose joined dimension is to be sharded, on the local blocks
  // (PartitionJoin.cpp); false where it is not (the factor rule then computes it whole).
  bool partitionConcat(const Eqn &e);
  static Halo windowHalo(int64_t n, int64_t offset, int64_t bo, const Refs &axes);

  // The elements [from, from + size) of x along dimension d.
  Value *sliceAlong(Value *x, size_t d, int64_t from, int64_t size, Loc loc);

  // x's block of `size` along dimension d starting at `first` + this device's index along
  // `axes` times `step` (clamped into x, as dynamic_slice is).
  Value *blockAt(Value *x, size_t d, int64_t first, int64_t step, int64_t size, const Refs &axes, Loc loc);

  // This device's index along `axes` times `step` plus `first` (an i32 scalar).
  Value *deviceOffset(const Refs &axes, int64_t step, int64_t first, Loc loc);

  // An i32 array of `shape` holding, at each element, its index along dimension d plus
  // deviceOffset(axes, step, first): where the element of a local block lies globally.
  Value *indexAlong(const std::vector<int64_t> &shape, size_t d, const Refs &axes, int64_t step, int64_t first, Loc loc);

  // x (a block along `axes` of inBlock elements on dimension d) between the last h.left
  // elements of the block before and the first h.right of the block after (ppermute).
  Value *withHalo(Value *x, size_t d, const Halo &h, const Refs &axes, Loc loc);

  // x with `count` zeros before and after it along dimension d.
  Value *betweenZeros(Value *x, size_t d, int64_t count, Loc loc);

  // A Shift dimension: the halos from the neighbours along `axes` (ppermute), then each
  // device's result block from its own block between them.
  Value *shifted(Value *x, size_t d, const Halo &h, int64_t start, const Refs &axes, Loc loc);

  // A Mask dimension: this device's block (of size bi, at k * bi along `axes`) put where it
  // lies in the result [start, start + o), zeros elsewhere: the block between o zeros on each
  // side, cut at o + start - k * bi (clamped: a block the result does not reach gives zeros).
  Value *masked(Value *x, size_t d, int64_t start, int64_t o, const Refs &axes, Loc loc);

  // What a padded element must be for the reduction `combine` finishes not to see it.
  static double identity(Prim combine, DType dtype);

  // A dimension made of several factors (a reshape's) is sharded by its factors' axes in
  // order only while each before is sharded wholly: a factor after one that is not keeps no
  // axes (the value is moved to its sharding after).
  static void keepWholeParts(const rules::FactorRule &rule, std::vector<Refs> &axes);

  Module &m_;
  JitFunc &j_;
  Func &f_;
  SplitMesh split_;
  bool differentiated_;
  Func *body_ = nullptr;
  std::map<const Value *, Held> held_;
  std::map<const Value *, std::vector<Held>> copies_;  // each value's blocks in other shardings (blocks)
  std::map<const Value *, const Eqn *> repeats_;       // values that only repeat their operand's elements
  std::set<const Value *> droppable_;                  // what moves made, and blocks made again elsewhere
  std::set<const Value *> remade_;                     // repeating equations computed again on a moved operand
  std::vector<Func *> made_;                           // the bodies partitioning made
  // The operation being partitioned (a result's move: the return): where the collectives that
  // move its operands are in the program, which the watchdog's report names (their first use,
  // where a move is shared).
  Loc at_;
};

} // namespace shmapc::passes::partition
