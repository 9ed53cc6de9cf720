// The rules layer: the questions every stage asks about a primitive, and the Rules each
// primitive answers them with. Everything the compiler knows about a primitive beyond its line
// in ir/Primitives.def is at its definition in compiler/prims/ (as JAX keeps a primitive's
// abstract evaluation, jvp, transpose and lowering next to it): its shape rule (the abstract
// evaluation: result dtypes and shapes from the operands' types and the params), its
// device-variance rule (variance typing), its jvp, its transpose, its lowering to LLVM (a
// kernel call, or one element of a fused loop), its sharding factors in a jit function, and its
// communication (the runtime collective it lowers to and the bytes it moves, for --emit=comm).
//
// This layer depends on the IR alone. The interpreters of the rules (sema, autodiff, the jit
// partitioner, codegen, the comm report) sit above it and dispatch through rulesOf(); the
// definitions sit above them (they receive the interpreters' contexts) and install the table
// rulesOf() reads (prims::installRules, prims/Prims.h). The table names every primitive of
// Primitives.def, so a primitive without a definition does not link, and the definitions are
// compiled with -Werror=missing-field-initializers, so one that leaves out a rule does not
// compile. Adding a primitive: docs/architecture.md's checklist.
//
// The shape rule is the one the IR is checked against: shapeProblem() below runs it on one
// equation, makeEqn() on every equation a stage builds, and verifyModule() on every equation of
// a module after each pass (--verify-each, debug builds, tests/golden.py). Sema keeps its own
// checks only to report user errors at their source location before any IR exists.
#pragma once
#include "ir/IR.h"
#include "rules/VarianceRules.h"

#include <array>

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace llvm {
class Value;
}
namespace shmapc::passes::ad {
struct JvpCtx;
struct TransposeCtx;
struct Builder;
}
namespace shmapc::codegen {
class FuncEmitter;
struct ScalarCtx;
}

namespace shmapc::rules {

struct ShapeCtx;  // ShapeRules.h

// How a primitive's operands and results may be sharded alike (Shardy's factor-based
// rules; passes/jit/PropagateShardings.cpp): each factor is a set of dimensions, of operands and of
// results, that are one dimension of the computation and so take one sharding; a factor with
// no result dimension is reduced (matmul's contracting dimension, a reduction's axes): each
// device computes a partial result from its shards and `combine` (psum, pmax, pmin) finishes it.
//
// A factor is usually a whole dimension; a reshape's factor may be a part of one (8 -> 2 x 4:
// the operand's dimension is the factors of sizes 2 and 4, major to minor): `size` is then the
// factor's size and each DimRef's `pre` the product of the factors before it in its dimension.
// Such a dimension's sharding is its factors' in order (sub-axes where an axis spans two),
// and a factor is sharded only when those before it in the dimension are wholly.
struct DimRef {
  int value = 0, dim = 0;  // (operand or result index, dimension)
  int64_t pre = 1;
};
struct Factor {
  std::vector<DimRef> ins, outs;
  ir::Prim combine = ir::Prim::Psum;  // a reduced factor's collective
  int64_t size = 0;                   // a part's size; 0: whole dimensions
  // A slice's cut dimension (stride 1): the result's index i is the operand's start + i, so
  // sharded alike each device's result block lies in its own operand block or reaches into
  // its neighbours' (a halo); the partitioner computes it so (PartitionSlice.cpp).
  bool shifted = false;
};
// A value a loop or conditional passes on (kind Nested below): its operand, its result, or a
// parameter or result of one of its bodies.
struct Tied {
  enum Of { In, Out, Param, Result } of;
  int index = 0;
  int body = 0;  // (Param, Result)
};
ir::Value *tiedValue(const ir::Eqn &e, const Tied &t);

struct FactorRule {
  enum Kind {
    Factors,      // the factors below; a dimension in none of them is unsharded
    Free,         // every result dimension may take any sharding, with no communication (a splat)
    Replicated,   // computed whole on every device: operands and results unsharded
    Nested,       // a loop or conditional: its bodies are propagated and partitioned with the
                  // function, and each group in `ties` is one array (an operand, what the bodies
                  // see of it and give back, the result): one sharding, each dimension one factor
    Unsupported,  // not in a jit function (yet): collectives, effects, calls that remain
  } kind = Factors;
  std::vector<Factor> factors;
  std::vector<std::vector<Tied>> ties;
  // For a primitive whose params name sizes of its operands or result (slice's limits,
  // dynamic_slice's sizes): rewrites them in `local`, the equation on the local blocks (its
  // operands and results already local), from `global`.
  void (*localize)(const ir::Eqn &global, ir::Eqn &local) = nullptr;
};

// ---- communication ------------------------------------------------------------------------

// The runtime's collective kinds, in the order of its --stats table (the runtime ABI's
// shm_collectives.def, which the runtime's statistics expand too).
enum class CollectiveKind {
#define SHM_COLLECTIVE(Id, Name) Id,
#include "shm_collectives.def"
#undef SHM_COLLECTIVE
};
constexpr int kNumCollectiveKinds = 0
#define SHM_COLLECTIVE(Id, Name) +1
#include "shm_collectives.def"
#undef SHM_COLLECTIVE
    ;
const char *collectiveKindName(CollectiveKind k);  // "psum", ..., as the --stats table names them

// What one call of a collective moves by the runtime's byte model (docs/runtime.md,
// "Statistics": a device sends the bytes it writes into other devices' buffers and receives the
// bytes it reads from theirs), in a mesh of `numGroups` groups of `groupSize` members: per
// device (ranges: an all-reduce's chunks may differ by one element; only some devices receive
// a ppermute or a rooted collective) and, for the call, summed over every device.
struct CollectiveBytes {
  int64_t sentMin = 0, sentMax = 0, receivedMin = 0, receivedMax = 0;
  int64_t chunkMin = 0, chunkMax = 0;  // all-reduces: elements of a member's chunk
  int64_t receivers = 0;               // ppermute: members per group that receive
  int64_t sent = 0, received = 0;      // the call, summed over all devices
};

struct Communication {
  enum What {
    Local,       // moves nothing between devices and waits for none: every primitive that is not
                 // a collective, and pbroadcast, invariant_cast and axis_index (variance-typing
                 // steps and a device's own coordinate)
    Free,        // a collective of the program that moves nothing (pscatter: each device takes
                 // its block of an invariant value): --emit=comm lists it, at no cost
    Collective,  // the runtime collective `kind`, moving what `bytes` says
  } what = Local;
  CollectiveKind kind = CollectiveKind::Psum;
  CollectiveBytes (*bytes)(const ir::Eqn &e, int64_t groupSize, int64_t numGroups) = nullptr;
  // Whether a shmap output this collective's result is, and that nothing else reads, may be
  // written by the collective alone into a buffer that devices whose block is not used leave
  // null (SHM_OUT_COLLECTIVE_ONLY in the runtime ABI): the all-reduces and all_gather accept one.
  bool collectiveOnlyOutput = false;
};
constexpr Communication communicatesNothing{};

struct Rules {
  // The abstract evaluation: from the operands' types (c.in(i)) and the params, each result's
  // dtype and shape into c.outs (variance is left 0: it is the variance rule's business);
  // false after c.fail(why) if the operands or params are ill-formed (a count, a dtype, a rank,
  // a param out of range). Primitives whose IR convention takes something from the result's
  // own type (convert, reshape, broadcast_in_dim, constant, iota, random, load, arg: see
  // Primitives.def) check it is consistent and copy it (c.declared()). The operand and result
  // counts of fixed-arity primitives are checked before the rule runs. Collectives read their
  // group sizes from c.f.mesh, the mesh of the function the equation is in.
  bool (*shape)(ShapeCtx &c);
  // How the result's variance follows the operands' (InsertPbroadcasts.cpp applies it).
  VarianceRule variance;
  // Given the equation emitted as primal, emits its tangent (passes/ad/AD.h, JvpCtx).
  void (*jvp)(passes::ad::JvpCtx &c);
  // Given the cotangent of a linear equation's result, accumulates its operands' cotangents.
  // Only called for equations the jvp rules taped as linear.
  void (*transpose)(passes::ad::TransposeCtx &c);
  // Emits the equation at `index` of the function being lowered; false after fe.fail().
  bool (*lower)(codegen::FuncEmitter &fe, size_t index);
  // One element of the result from the operands' elements, inside a fused element-wise loop;
  // null for a primitive that is never fused (codegen::FuncEmitter::isFusible).
  llvm::Value *(*scalar)(codegen::ScalarCtx &c);
  // Its dimensions' factors in a jit function (FactorRule above).
  FactorRule (*sharding)(const ir::Eqn &e);
  // What it moves between devices (Communication above): the runtime collective it lowers to,
  // and its bytes per device and call for --emit=comm (which must equal the runtime's --stats).
  Communication comm;
};

// The rules of `p`, from the table the definitions installed.
const Rules &rulesOf(ir::Prim p);
// Every primitive's rules, in Primitives.def order (prims::installRules makes it).
using RulesTable = std::array<const Rules *, (size_t)ir::kNumPrims>;
void installRules(const RulesTable &table);

// ---- building equations ------------------------------------------------------------------

// The result variance of `e` by its primitive's variance rule, from its operands' variance and
// its params, in a body that is typed (after variance typing: operands already lifted where
// they disagree) or not yet (every value invariant): false where the rule's answer is not a
// function of those alone (loops, conditionals, shmaps, calls, transforms, sharded loads,
// rooted broadcast and scatter, effects) or the operands disagree.
bool resultVariance(const ir::Eqn &e, ir::AxisSet &vary, std::string &why);

// One equation of `f` applying `p` to `ins` with `params`, its result typed as JAX's bind types
// one: dtype and shape by the shape rule, variance by the variance rule (resultVariance). For
// primitives whose IR takes the result's type from the equation (convert, reshape,
// broadcast_in_dim, constant, iota, random, load, arg: Primitives.def) `declared` gives it;
// where the variance rule cannot say, `declared`'s variance is the result's; otherwise a
// declared type is checked against what the rules give. The result is a
// new value of `f` named `hint`, or `into` (an existing value, which must have that type). An
// equation the rules refuse is a compiler bug: InternalError naming the rule's reason. The
// caller places the equation (appends it to `f`, or to a list it splices in).
struct MakeEqn {
  const ir::Type *declared = nullptr;
  ir::Value *into = nullptr;
  std::string hint{};
  // A body before variance typing (sema's, the jit partitioner's): the variance pass gives
  // every value its variance later, so the result's is `declared`'s (or none), unchecked.
  bool untyped = false;
};
ir::Eqn makeEqn(ir::Func &f, ir::Prim p, std::vector<ir::Value *> ins, std::map<std::string, ir::Attr> params,
                Loc loc, const MakeEqn &how = {});
// Why the rules refused an equation: the reason, and where a user's program can cause it (the
// rule said so with ShapeCtx::failOperand / failParam), the operand or param at fault, the
// registered diagnostic and a hint, for sema to report at that argument's location.
struct Refusal {
  std::string why;
  std::optional<DiagId> diag;  // none: no user program causes it (a compiler bug)
  int operand = -1;
  const char *param = nullptr;
  std::string hint;
};
// makeEqn that returns the refusal instead of throwing: false with `refused` filled.
bool tryMakeEqn(ir::Func &f, ir::Prim p, std::vector<ir::Value *> ins, std::map<std::string, ir::Attr> params,
                Loc loc, const MakeEqn &how, ir::Eqn &made, Refusal &refused);

// Whether running `e` (with its bodies) or `f` performs a collective that moves data over one
// of `axes` (a collective without an `axes` param counts for every axis): the Collective
// communication of a rule (not pbroadcast, invariant_cast, axis_index or pscatter).
bool communicatesOver(const ir::Eqn &e, ir::AxisSet axes = ~ir::AxisSet(0));
bool communicatesOver(const ir::Func &f, ir::AxisSet axes = ~ir::AxisSet(0));
// Whether codegen runs both branches of `cond` (an equation of `owner`) on every device: its
// predicate may differ between devices (device-varying, or untyped in a check_vma=false body)
// and a branch communicates, so devices taking different branches would not meet in the
// collective. Otherwise each device runs only the branch its predicate selects. The static
// communication report counts collectives by the same test.
bool condRunsBothBranches(const ir::Func &owner, const ir::Eqn &cond);

// What is wrong with `e` (an equation of `f`) by its primitive's shape rule: the rule's reason
// for refusing the operands or params, or which result's dtype or shape differs from the one
// the rule computes. Empty if nothing is (variance is not compared).
std::string shapeProblem(const ir::Eqn &e, const ir::Func &f);

// ir::verifyModule's structural checks plus shapeProblem() on every equation of every Func.
std::vector<std::string> verifyModule(const ir::Module &m);

// Shared rules.
FactorRule elementwiseFactors(const ir::Eqn &e);  // every dimension one factor for all
FactorRule replicatedFactors(const ir::Eqn &e);
FactorRule unsupportedInJit(const ir::Eqn &e);
// The bytes of a collective call where every one of `devices` devices receives `bytes` and
// sends none by the runtime's byte model (it reads from the others' buffers).
CollectiveBytes everyDeviceReceives(int64_t bytes, int64_t devices);

} // namespace shmapc::rules
