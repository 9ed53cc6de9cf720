// The IR: a jaxpr-like SSA form. A Module holds meshes and functions; a Func is a flat list
// of equations (Eqn), each applying one primitive to typed input values and defining typed
// output values. Higher-order primitives (call, shmap, loop, cond) refer to other Funcs.
// Every value's Type has room for a variance set: the mesh axes it may vary over.
#pragma once
#include "source/Diagnostics.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace shmapc::ir {

enum class Prim {
#define PRIM(Id, Name, Kind, NumIn, NumOut) Id,
#include "ir/Primitives.def"
#undef PRIM
};
enum class PrimKind { Const, Unary, Binary, Compare, Other, Collective, HigherOrder, Effect };

struct PrimInfo {
  const char *name;
  PrimKind kind;
  int numIn, numOut;  // -1 = variadic
};
const PrimInfo &primInfo(Prim p);
const char *primName(Prim p);
bool primFromName(const std::string &name, Prim &out);
constexpr int kNumPrims = 0
#define PRIM(Id, Name, Kind, NumIn, NumOut) +1
#include "ir/Primitives.def"
#undef PRIM
    ;

// The order is the runtime's dtype codes (SHM_F32 = 0 ... SHM_BF16 = 6, runtime/abi/shmap_runtime.h).
enum class DType : uint8_t { F32, F64, I32, Bool, I64, F16, BF16 };
const char *dtypeName(DType t);
int64_t dtypeSize(DType t);  // bytes per element (bool = 1)
bool isFloat(DType t);       // f16, bf16, f32, f64: differentiable
bool isInt(DType t);         // i32, i64
// f16 and bf16: storage types. Element-wise operations compute in f32 and round the result to
// the storage type; sums and matmul accumulate in f32 and round once (docs/numerics.md).
bool isHalf(DType t);

// Bit i set = may vary over mesh axis i of the enclosing mesh.
using AxisSet = uint32_t;
std::vector<int64_t> axisList(AxisSet s);  // the axes in `s`, ascending

struct Type {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  AxisSet vary = 0;
  int64_t rank() const { return (int64_t)shape.size(); }
  int64_t numElements() const;
  int64_t byteSize() const;
  bool sameShape(const Type &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator==(const Type &o) const {
    return dtype == o.dtype && shape == o.shape && vary == o.vary;
  }
  bool operator!=(const Type &o) const { return !(*this == o); }
};

struct Mesh {
  std::string name;
  std::vector<std::string> axes;
  std::vector<int64_t> sizes;
  Loc loc;
  // -1 for a declared mesh. A mesh a pipeline's device group runs its stage shmaps on: the
  // index of the mesh it stands for there (a stage submesh: the pipeline mesh it slices; a
  // group placed on a declared mesh: that mesh), so the program's mesh table lists the
  // pipeline's devices, not the group's.
  int64_t sliceOf = -1;
  int64_t numDevices() const;
  int axisIndex(const std::string &axis) const;  // -1 if unknown
  int64_t groupSize(AxisSet axes) const;  // devices in a group along `axes`: their sizes' product
};

// A partition spec: for each array dimension, the mesh axis indices it is split over,
// major to minor. Dimensions beyond dims.size() are unsplit.
struct PartitionSpec {
  std::vector<std::vector<int>> dims;
  AxisSet axes() const;  // every axis mentioned
  bool operator==(const PartitionSpec &o) const { return dims == o.dims; }
};

// Printing: `{}` is never printed for an invariant value; `x:f32[3,4]{i}` for a varying one.
std::string typeToString(const Type &t, const Mesh *mesh);
std::string specToString(const PartitionSpec &s, const Mesh &mesh);

struct Value {
  int id = 0;          // unique within its Func
  Type type;
  std::string hint;    // the source name it was bound to, if any (for printing)
};

using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                          std::vector<PartitionSpec>>;

struct Func;

struct Eqn {
  Prim prim;
  std::vector<Value *> ins;
  std::vector<Value *> outs;
  std::map<std::string, Attr> params;
  std::vector<Func *> bodies;  // callee / shmap body / loop body / cond branches
  Loc loc;

  int64_t intParam(const std::string &k) const;
  const std::vector<int64_t> &intsParam(const std::string &k) const;
  const std::string &strParam(const std::string &k) const;
  const std::vector<double> &doublesParam(const std::string &k) const;
  const std::vector<PartitionSpec> &specsParam(const std::string &k) const;
  AxisSet axesParamSet() const;  // the collective's `axes` param as a set (none: empty)
  bool has(const std::string &k) const { return params.count(k) != 0; }
};

struct Func {
  std::string name;
  Loc loc;
  std::vector<Value *> params;
  std::vector<Eqn> eqns;
  std::vector<Value *> results;
  // The mesh whose axes collectives in this body refer to: set for shmap bodies, for loop/cond
  // bodies nested in them, and for plain functions called from inside a shmap.
  const Mesh *mesh = nullptr;
  bool isShmapBody = false;
  bool checkVma = true;         // variance checking on
  bool autoPbroadcast = true;   // automatic pbroadcast insertion on
  bool isNested = false;        // a loop body / cond branch (printed inside its owner)
  bool singleUse = false;       // a derived shmap body of one equation: its unread results
                                // may be dropped (autodiff's forward shmaps)
  bool isTrace = false;         // sema's application of a function to be differentiated:
                                // only jvp/vjp bodies; gone after the differentiate pass
  bool isBackward = false;      // a shmap's backward body made by autodiff (its collectives
                                // all transpose forward ones; passes/reductions/SinkReductions.cpp
                                // may rewrite them, never the user's forward code)
  const Func *forwardPart = nullptr;  // a backward body: the forward shmap body autodiff split
                                     // from the same vjp (passes/reductions/DeferPrimalReductions.cpp)
  Loc returnLoc;                // the return statement (variance errors on results point here)
  std::vector<Loc> outSpecLocs; // shmap bodies: where each out_spec is written

  Value *newValue(const Type &t, const std::string &hint = "");
  std::deque<Value> values;  // owns every Value of this Func (stable addresses)
  int nextId = 0;
};

// A program argument (`arg lr: f32 = 0.1;`): the runtime parses --lr=VALUE (runtime/cli.cpp).
struct ProgramArg {
  std::string name, type, defaultText;  // type: f32, f64, f16, bf16, i32, i64, bool or str
};

// ---- Shardy's sharding representation (functions in Sharding.cpp), bound to a
// named mesh: for each dimension of a global array, the mesh axes (or sub-axes) it is sharded
// along, major to minor, whether propagation may shard it further (open) or not (closed), and
// the priority of that choice; and the axes along which the array is explicitly replicated
// (never to be sharded). Every axis not named is implicitly replicated. `P("x", None)` is the
// shorthand for closed dimensions with no priorities and nothing explicitly replicated.

// A mesh axis or a sub-axis of it: `"x"` (preSize 1, size = the axis's) or `"x":(m)k`, the
// size-k part of "x" after the sub-axes of total size m to its left (Shardy: m and k divide
// the axis's size n, and so does m k).
struct AxisRef {
  int axis = -1;
  int64_t preSize = 1, size = 0;

  bool isFull(const Mesh &mesh) const { return preSize == 1 && size == mesh.sizes[(size_t)axis]; }
  // Whether the two share a part of one axis ("x":(1)4 and "x":(2)4 do). An axis of size 1
  // has no part but itself, whose range [1, 1) is empty: it overlaps only itself.
  bool overlaps(const AxisRef &o) const {
    return axis == o.axis &&
           ((preSize < o.preSize * o.size && o.preSize < preSize * size) || (preSize == o.preSize && size == o.size));
  }
  bool operator==(const AxisRef &o) const { return axis == o.axis && preSize == o.preSize && size == o.size; }
};

struct DimSharding {
  std::vector<AxisRef> axes;  // major to minor
  bool open = false;          // `{"x", ?}`: propagation may shard it further
  int64_t priority = -1;      // `{"x"}p1`; -1: none written (priority 0)
};

struct Sharding {
  int mesh = -1;  // index into Module::meshes
  std::vector<DimSharding> dims;
  std::vector<AxisRef> replicated;  // explicit, in mesh order (a sub-axis's parts by preSize)
};

// The number of devices a dimension is split over: the product of its axes' sizes.
int64_t shardCount(const DimSharding &d);
int64_t shardCount(const std::vector<AxisRef> &axes);
// The axes of a dimension that shard its part [pre, pre * size) in the product of their sizes
// (the part of a dimension a reshape splits off: of 8 = 2 x 4 sharded {"x"}, x=4, the part of
// size 2 is sharded {"x":(1)2} and the part of size 4 {"x":(2)2}), splitting an axis at the
// part's ends; stops where an axis cannot be split there. A part that starts past the
// dimension's axes (pre >= their count) is unsharded.
std::vector<AxisRef> projectAxes(const std::vector<AxisRef> &axes, int64_t pre, int64_t size);
// Shardy's maximality: adjacent sub-axes of one axis ("x":(1)2, "x":(2)2) become one
// ("x":(1)4, the full axis when that is its size).
std::vector<AxisRef> mergeSubAxes(const std::vector<AxisRef> &axes);
// The shape on one device: each dimension's size divided by its shard count, rounded up (an
// uneven dimension is padded to a multiple of it; the padding is never visible to programs).
std::vector<int64_t> localShape(const Sharding &s, const std::vector<int64_t> &global);
// Shardy's notation: `sharding<@m, [{"x"}, {"z", "y", ?}p1], replicated={"w"}>`.
std::string shardingToString(const Sharding &s, const Mesh &mesh);
std::string axisRefToString(const AxisRef &a, const Mesh &mesh);
// A sharding as an equation's integer-list param (sharding_constraint), and back.
std::vector<int64_t> encodeSharding(const Sharding &s);
Sharding decodeSharding(const std::vector<int64_t> &v);

// JIT functions (`@jit`): the mesh and the shardings of the parameters and results as
// written (before propagation).
struct JitFunc {
  std::string name;
  Loc loc;
  int mesh = -1;
  std::vector<std::string> paramNames;
  std::vector<Type> paramTypes, resultTypes;
  std::vector<Sharding> inShardings, outShardings;  // empty: none written
  Func *func = nullptr;  // the instance (null once inlined into its callers)
  // Why it is not partitioned (runs whole, on the host), if it is not: what partitioning
  // does not do yet (sub-axes, uneven dimensions, a primitive it cannot place).
  std::string notPartitioned;
  // Every value's sharding after propagation (passes/jit/PropagateShardings.cpp).
  std::map<const Value *, Sharding> propagated;
};

// Pipeline functions (`@pipeline`): a train step whose differentiated function is cut into
// stages at its stage_boundary() markers and run over micro-batches of its batch arguments.
enum class Schedule { GPipe, OneFOneB, Interleaved, ZeroBubbleH1, Inference };
const char *scheduleName(Schedule s);  // as written: "gpipe", "1f1b", "interleaved", "zb-h1", "inference"
bool scheduleFromName(const std::string &name, Schedule &out);

// One stage of a pipeline's differentiated function, as the split-micro-batches pass found it
// (--emit=stages): per micro-batch.
struct PipelineStage {
  Loc begin;                        // its first equation (the function, for stage 0)
  int64_t eqns = 0, flops = 0;      // forward equations and floating-point operations
  std::vector<std::string> params;  // the differentiated parameters it reads
  int64_t paramBytes = 0;
  int64_t sendBytes = 0;            // activations it sends to later stages
};

struct PipelineFunc {
  std::string name;
  Loc loc;
  Func *func = nullptr;  // the instance (null once inlined into its callers)
  int mesh = -1;
  int stageAxis = -1;   // the mesh axis whose slices are the stages' submeshes
  int64_t microbatches = 1, virtualStages = 1;
  Schedule schedule = Schedule::GPipe;
  bool remat = false;  // a backward step recomputes its stage's forward instead of keeping its residuals
  Loc microbatchesLoc, scheduleLoc;
  std::vector<int> batchLeaves;  // func->params indices split into micro-batches (dimension 0)
  std::vector<Loc> batchLocs;    // where each leaf's parameter is named in batch=
  int64_t numStages() const;     // placement's length, or the stage axis's size times virtualStages
  int64_t stageAxisSize = 1;
  // placement=: each stage's device group (slice of the stage axis, or groupMeshes's); empty:
  // stage k on group k mod the stage axis's size.
  std::vector<int> placement;
  // placement=(a, b, ...) with meshes: each device group's declared mesh, its devices after the
  // previous groups' (mesh and stageAxis are then -1, stageAxisSize the number of groups).
  std::vector<int> groupMeshes;
  Loc placementLoc;
  // order=: each device group's steps as written ("F0.0 B0.0 ..."), empty for the schedule's own.
  std::vector<std::string> order;
  std::vector<Loc> orderLocs;
  Loc orderLoc;
  std::vector<PipelineStage> stages;  // filled by the split-micro-batches pass
  int64_t submesh = -1;  // the stage submesh its stages' shmaps run on (a module mesh), if any
};

struct Module {
  std::vector<std::unique_ptr<Mesh>> meshes;
  std::vector<ProgramArg> args;
  std::vector<std::unique_ptr<Func>> funcs;  // every Func, nested bodies included
  Func *main = nullptr;
  std::vector<JitFunc> jits;    // the @jit functions, as declared
  std::vector<PipelineFunc> pipelines;  // the @pipeline functions' instances
  Func *newFunc(const std::string &name);
};

// An identity shmap that moves host value `x` between the host and the devices without
// changing it: `to_devices` (device_put: each device reads its block of it) or `to_host` (a
// value kept split on the devices gathered for host code). Its body, `name`, returns its one
// parameter, of type `block`; the result is x's global type. The eqn's `moves` param says
// which (--emit=comm lists the move).
Eqn identityShmap(Module &m, Func &f, const std::string &name, int64_t mesh, const PartitionSpec &spec, Value *x,
                  const Type &block, Loc loc, const std::string &moves);

// --emit=sharded: every jit function's values with their shardings and local shapes.
std::string printShardings(const Module &m);

// broadcast_in_dim, reshape, convert, transpose: equations that change only the shape or dtype
// of their one operand (a pbroadcast commutes with them).
bool changesOnlyShape(Prim p);

// Whether `e` has an effect (print, save, ...), itself or in its bodies: it is never dead code,
// though it has no result anyone reads.
bool hasEffects(const Eqn &e);
// --emit=ir: prints every non-nested function; nested bodies print inline, indented.
std::string printModule(const Module &m);
std::string printFunc(const Func &f);
// Every value's name as printModule prints it: each top-level Func names its values and its
// nested bodies' (name, name_1, ...; %N for values without a source name).
std::map<const Value *, std::string> printedNames(const Module &m);

// Checks structural invariants: every operand defined before use in its Func (params, earlier
// outs), arities match PrimInfo, results defined once, collectives only in Funcs with a mesh.
// Returns the problems found (empty = ok). With `shapeCheck` (rules::shapeProblem, which the
// driver passes through rules::verifyModule: ir is below the rules), it is also run on every
// equation that passed those checks, and what it returns ("" = ok) is reported: each
// primitive's shape rule, from operand types and params to result types, including the
// signatures of higher-order bodies.
using EqnCheck = std::string (*)(const Eqn &e, const Func &f);
std::vector<std::string> verifyModule(const Module &m, EqnCheck shapeCheck = nullptr);

} // namespace shmapc::ir
