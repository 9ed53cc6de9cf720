// How a partitioned jit function's values lie on the devices (used by
// PartitionJit.cpp): the mesh its shmap runs on (split at the sub-axes it uses), the local
// block of a sharded (maybe unevenly: padded) value, and how a value moves from one sharding
// to another, with the bytes that costs.
#pragma once

#include "ir/IR.h"

#include <memory>
#include <utility>
#include <vector>

namespace shmapc::passes::layout {

// A dimension's sharding: mesh axes or sub-axes, major to minor, adjacent sub-axes merged.
using Refs = std::vector<ir::AxisRef>;

// The mesh the shmap runs on: the jit function's, with each axis split at the sub-axes the
// function's shardings use ("x"=4 used as "x":(1)2 and "x":(2)2 becomes the axes "x:(1)2"=2
// and "x:(2)2"=2; devices keep their numbers, as the minor sub-axis is the minor axis), so
// every sharding is one of its partition specs and every collective names its axes.
class SplitMesh {
public:
  SplitMesh(ir::Module &m, const ir::JitFunc &j);

  int index() const { return index_; }  // in Module::meshes
  ir::Mesh &mesh() const { return *derived_; }
  // The split mesh's axes that make up `refs`, major to minor.
  std::vector<int> axes(const Refs &refs) const;

private:
  int index_;
  ir::Mesh *derived_ = nullptr;
  std::vector<std::vector<std::pair<ir::AxisRef, int>>> pieces_;  // per axis: its pieces, split-mesh index
};

// A dimension of size n split over c devices unevenly is padded at its end to the next
// multiple of c (Shardy: "the dimension needs padding"); each device holds n / c rounded
// up, and the last devices' blocks end in padding (or are all padding). Partitioning keeps
// the padding out of every result: the host pads the parameters and slices the results, a
// gathered dimension is sliced to its size, a reduction over a padded dimension (a sum, a
// maximum, a contraction) first sets the padding to its identity, and a reshape that splits
// or merges a padded dimension takes it unsharded.
int64_t blockSize(int64_t n, const Refs &axes);
bool even(int64_t n, const Refs &axes);
ir::Type localType(const ir::Type &global, const std::vector<Refs> &s);
// The global type the shmap sees: each unevenly sharded dimension padded.
ir::Type paddedType(const ir::Type &global, const std::vector<Refs> &s);
// The bytes of v's block on one device in sharding `dims`.
int64_t localBytes(const ir::Value *v, const std::vector<Refs> &dims);

// One step of moving a value from one sharding to another (planMove).
struct MoveStep {
  ir::Prim prim;     // AllToAll, AllGatherInvariant or Pscatter
  size_t dim = 0;    // the dimension split (all_to_all), gathered, or sliced
  size_t from = 0;   // all_to_all: the dimension its axes leave (gathered)
  Refs axes;         // the axes moved or gathered; pscatter: those the dimension is to have
  Refs before;       // pscatter: those it had (a prefix of `axes`)
};

// How v moves from sharding `now` to `to`: axes that go from one dimension to another (from an
// unsharded one to one that is to be unsharded) by all_to_all, which sends each device only
// the parts others keep; other dimensions sharded otherwise gathered, unless sharded along the
// first of the axes they are to be (evenly: refines); then each device slices its block.
std::vector<MoveStep> planMove(const SplitMesh &mesh, const ir::Value *v, std::vector<Refs> now,
                               const std::vector<Refs> &to);
bool refines(const SplitMesh &mesh, int64_t n, const Refs &from, const Refs &to);
// The bytes a device puts into collectives to move v from `now` to `to`: its block, for each
// all_to_all and gather.
int64_t moveBytes(const SplitMesh &mesh, const ir::Value *v, std::vector<Refs> now, const std::vector<Refs> &to);

// Whether e's result only repeats its operand's elements in more bytes: a broadcast_in_dim, a
// convert to a wider type, or a splat constant (its one value; no operand). Such a value is
// moved more cheaply as its operand, the equation then computed again on the moved block (data
// movement commutes with it), when the operand's block is smaller; a splat is made again.
bool repeatsOperand(const ir::Eqn &e);
// The sharding e's operand takes for e's result to come in sharding `to`: each dimension the
// one it becomes (a broadcast's expanded size-1 dimension unsharded).
std::vector<Refs> operandSharding(const ir::Eqn &e, const std::vector<Refs> &to);

} // namespace shmapc::passes::layout
