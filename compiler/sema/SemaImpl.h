// Private to sema: the state of one buildModule() run and the lowering routines, split over
// several .cpp files by concern:
//   Sema.cpp         units, meshes, function lookup, instantiation (the "tracing" memo)
//   Scope.cpp        name binding, lookup and capture of outer values by nested bodies
//   Types.cpp        type helpers, weak-typed literals, broadcasting, element-wise ops
//   Args.cpp         reading static (compile-time) arguments: ints, axes, types, keywords
//   Expressions.cpp  expression dispatch: literals, names, operators, indexing, calls
//   Builtins.cpp     the builtins table: creation, element-wise, reductions
//   Structural.cpp   matmul, reshape, transpose, concatenate, dynamic slices
//   Collectives.cpp  psum & co., axis_index/axis_size
//   Shmap.cpp        partition specs and shmap calls
//   Statements.cpp   statements, returns, for loops and conditionals
#pragma once
#include "sema/Sema.h"
#include "shmap_limits.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace shmapc::sema {

// A tree node's path step to element i (`[i]` of a tuple, `.w` of a record: `keys` are a
// record's field names, empty for a tuple), and the node described for messages ("a tuple of 2
// value(s)", "a record {b, w}").
std::string treeStep(const std::vector<std::string> &keys, size_t i);
std::string treeText(const std::vector<std::string> &keys, size_t items);

// What an expression evaluates to at compile time. Most expressions produce an IR value;
// Python-scalar literals stay unmaterialized until an operand fixes their dtype (weak
// typing), and axis names are static arguments that never become IR values.
struct SVal {
  enum Kind { Array, Literal, Axes, Tuple } kind = Array;
  ir::Value *value = nullptr;      // Array
  double literal = 0;              // Literal
  bool literalIsFloat = false;     // Literal: written as a float (`2.0`) rather than an int
  // Literal: a static integer (docs/language.md) held exactly, as `literal` may not hold one
  // beyond 2^53; `computed` when it is the result of + - * // % of static integers, which are
  // exact and so may not fit the dtype they are used as.
  bool isStaticInt = false, computed = false;
  int64_t staticInt = 0;
  std::vector<std::string> axes;   // Axes
  std::vector<SVal> items;         // Tuple: its elements, arrays or tuples (a tree's nodes)
  std::vector<std::string> keys;   // Tuple: empty, or a record's field names (sorted, as items)
  Loc loc;

  bool isRecord() const { return kind == Tuple && !keys.empty(); }
  // The path step to element i: `[i]` of a tuple, `.w` of a record.
  std::string step(size_t i) const { return treeStep(keys, i); }

  static SVal array(ir::Value *v, Loc loc) {
    SVal s;
    s.value = v;
    s.loc = loc;
    return s;
  }
  static SVal lit(double v, bool isFloat, Loc loc) {
    SVal s;
    s.kind = Literal;
    s.literal = v;
    s.literalIsFloat = isFloat;
    s.loc = loc;
    return s;
  }
  static SVal staticInteger(int64_t v, bool computed, Loc loc) {
    SVal s = lit((double)v, false, loc);
    s.isStaticInt = true;
    s.computed = computed;
    s.staticInt = v;
    return s;
  }
  static SVal tuple(std::vector<SVal> items, Loc loc) {
    SVal s;
    s.kind = Tuple;
    s.items = std::move(items);
    s.loc = loc;
    return s;
  }
  static SVal axisNames(std::vector<std::string> axes, Loc loc) {
    SVal s;
    s.kind = Axes;
    s.axes = std::move(axes);
    s.loc = loc;
    return s;
  }
};

// numpy's rule for one side: `from` broadcasts to `to` (trailing dimensions equal or 1).
bool broadcastsTo(const std::vector<int64_t> &from, const std::vector<int64_t> &to);

struct Unit;

// JAX's promotion of two (non-bool) dtypes, and the float an integer becomes where a float
// literal, true division or mean needs one (Types.cpp).
ir::DType promoteDTypes(ir::DType a, ir::DType b);
ir::DType floatFor(ir::DType dt);

// A function used as a value: a function's name, or a transform of a function value
// (`grad(f, argnums=(0, 1))`). Only ever applied to arguments (Transforms.cpp).
struct FnValue {
  // Builtin: a single-result builtin by name (`exp`, `zeros_like`), passed to tree_map and
  // tree_reduce only.
  enum Kind { Named, Builtin, Grad, ValueAndGrad, Vjp, Jvp, Transpose } kind = Named;
  const ast::FuncDecl *decl = nullptr;  // Named
  const Unit *unit = nullptr;           // Named
  std::shared_ptr<const FnValue> inner; // the transformed function
  std::vector<int64_t> argnums;
  bool hasArgnums = false;
  Loc argnumsLoc;
  Loc loc;
  std::string text;  // as written, for messages: "grad(loss)"
};

// One source file with its functions by name.
struct Unit {
  std::string name;  // "" = the main file
  const ast::Program *program = nullptr;
  std::map<std::string, const ast::FuncDecl *> funcs;
};

// How a function is called: per parameter, either an array type or static axis names.
// Together with the function and the mesh context this is the instantiation key.
struct ArgDesc {
  bool isAxes = false;
  ir::Type type;
  std::vector<std::string> axes;
  bool isTuple = false;
  std::vector<ArgDesc> items;       // isTuple: its elements' descriptions
  std::vector<std::string> keys;    // isTuple: a record's field names (empty for a tuple)
  std::string step(size_t i) const { return treeStep(keys, i); }
  bool operator<(const ArgDesc &o) const {
    if (isTuple != o.isTuple) return isTuple < o.isTuple;
    if (isTuple) return keys != o.keys ? keys < o.keys : items < o.items;
    if (isAxes != o.isAxes) return isAxes < o.isAxes;
    if (type.dtype != o.type.dtype) return type.dtype < o.type.dtype;
    if (type.shape != o.type.shape) return type.shape < o.type.shape;
    return axes < o.axes;
  }
};

// The IR parameters (leaves) an argument of this description takes: an array one, a tree its
// leaves, axis names none (Trees.cpp).
size_t leafCount(const ArgDesc &d);

struct InstKey {
  const ast::FuncDecl *decl;
  const ir::Mesh *mesh;
  std::vector<ArgDesc> args;
  bool operator<(const InstKey &o) const {
    if (decl != o.decl) return std::less<const void *>()(decl, o.decl);
    if (mesh != o.mesh) return std::less<const void *>()(mesh, o.mesh);
    return args < o.args;
  }
};

struct Instance {
  ir::Func *func = nullptr;
  std::vector<ir::Type> results;  // the IR function's results: the returned values' leaves
  // The returned values as the callee holds them: their structure (an array, or a tuple of
  // them) is how the caller rebuilds each over the call's results (withLeaves).
  std::vector<SVal> returned;
};

// The IR Func being built. Nested bodies (loop bodies, cond branches) have a parent: a name
// bound outside the body is read through a parameter the body adds on first use (a capture).
struct FuncCtx {
  ir::Func *func = nullptr;
  const ir::Mesh *mesh = nullptr;  // collective context (null = host code)
  const Unit *unit = nullptr;      // where unqualified function names are looked up
  FuncCtx *parent = nullptr;
  std::map<ir::Value *, ir::Value *> captures;  // value in parent -> param here
  std::vector<ir::Value *> captureOrder;         // values in parent, first use first
};

struct Scope {
  Scope *parent = nullptr;
  FuncCtx *owner = nullptr;
  std::map<std::string, SVal> names;
  bool loopCarries = false;  // the names here are a loop's carried values
};

using Params = std::map<std::string, ir::Attr>;

class Sema {
public:
  Sema(const std::vector<ModuleUnit> &units, Diagnostics &diags);
  std::unique_ptr<ir::Module> run();

  // ---- errors (Sema.cpp)
  [[noreturn]] void fail(DiagId id, Loc loc, const std::string &msg, const std::string &hint);
  [[noreturn]] void failWithNote(DiagId id, Loc loc, const std::string &msg,
                                 const std::string &hint, Loc noteLoc, const std::string &note);
  // For errors that depend on the caller's context (a collective or print in the wrong
  // place): adds a note for each call that led here.
  [[noreturn]] void failWithCallChain(DiagId id, Loc loc, const std::string &msg,
                                      const std::string &hint);

  // ---- functions and instantiation (Sema.cpp)
  void collectUnits(const std::vector<ModuleUnit> &units);
  void collectMeshes();
  const ast::FuncDecl *findFunction(const ast::Expr &call, const Unit *&unitOut);
  std::vector<SVal> callFunction(const ast::FuncDecl &decl, const Unit &unit,
                                 const ast::Expr &call);
  void checkArgCount(const ast::FuncDecl &decl, size_t given, Loc callLoc);
  std::vector<SVal> callFunctionWith(const ast::FuncDecl &decl, const Unit &unit,
                                     const std::vector<SVal> &args, Loc callLoc);
  const Instance &instantiate(const ast::FuncDecl &decl, const Unit &unit,
                              const std::vector<ArgDesc> &args, const ir::Mesh *mesh,
                              Loc callLoc);
  std::string uniqueFuncName(const std::string &base);
  ir::Func *newNestedFunc(const std::string &suffix, Loc loc);

  // ---- scopes (Scope.cpp)
  void bind(const std::string &name, SVal v);
  SVal lookup(const std::string &name, Loc loc);
  // `v` (bound in scope `s`, or part of what is) as the current body sees it: each array leaf
  // imported (captured by the bodies in between).
  SVal imported(SVal v, Scope *s, Loc loc);
  Scope *findScope(const std::string &name);
  ir::Value *importValue(FuncCtx *ctx, ir::Value *v, FuncCtx *owner);
  std::string closestName(const std::string &name, const std::vector<std::string> &cands);
  std::vector<std::string> visibleNames();

  // ---- types and element-wise ops (Types.cpp)
  static std::string str(const ir::Type &t);
  std::string describe(const SVal &v);
  ir::Type typeOf(const ast::TypeExpr &t);
  int64_t checkedStatic(const ast::Expr &e, int64_t a, int64_t b, char op);
  int64_t loopBound(const ast::Expr &e);
  const ir::Value *arrayNamed(const std::string &name);
  // Program arguments (`arg lr: f32 = 0.1;` in the main file): names visible in host code.
  void collectProgramArgs();
  std::optional<SVal> programArg(const std::string &name, Loc loc);
  int programArgIndex(const std::string &name) const;
  std::optional<int64_t> constantInt(const ir::Value *v);
  std::optional<int64_t> staticOperand(const ast::Expr &e, SVal &val, bool &evaluated);
  void checkMeshLimits(const ast::MeshDecl &m);
  ir::Value *emit(ir::Prim p, std::vector<ir::Value *> ins, const ir::Type &out, Loc loc,
                  Params params = {});
  // Where a builtin's arguments were written: a refusal of the primitive's shape rule that a
  // program can cause (rules::Refusal) is reported at its operand's or param's location, else
  // at the call.
  struct ArgLocs {
    Loc call;
    std::vector<Loc> operands{};
    std::map<std::string, Loc> params{};
  };
  // The equation typed by its primitive's rules alone (sema computes no result type): a
  // refusal is the user's error, located by `at`.
  ir::Value *emitByRules(ir::Prim p, std::vector<ir::Value *> ins, Params params, const ArgLocs &at);
  // Appends `e` to the current function; with `check`, its result types must be those its
  // primitive's shape rule computes (rules::shapeProblem), else an InternalError: sema's own
  // checks report user errors, so a mismatch is a bug in sema.
  ir::Eqn &pushEqn(ir::Eqn e, bool check = true);
  void checkShapeRule(const ir::Eqn &e);
  ir::Value *constant(ir::DType dt, std::vector<int64_t> shape, std::vector<double> vals,
                      Loc loc);
  ir::Value *literalAs(const SVal &lit, ir::DType dt, const std::vector<int64_t> &shape,
                       Loc loc);
  ir::Value *toArray(const SVal &v);  // literals take their default dtype (i32 / f32)
  ir::Value *broadcastTo(ir::Value *v, const std::vector<int64_t> &shape, Loc loc);
  ir::DType commonDType(const std::vector<SVal> &ops, const std::string &what, Loc loc);
  ir::Value *asOperand(const SVal &o, ir::DType dt, const std::vector<int64_t> &shape, Loc loc);
  std::vector<int64_t> broadcastShape(const std::vector<SVal> &ops, const std::string &what,
                                      Loc loc);
  std::vector<ir::Value *> unify(const std::vector<SVal> &ops, const std::string &what,
                                 Loc loc, bool inexact = false);
  SVal binaryOp(const std::string &op, const SVal &a, const SVal &b, Loc loc);
  SVal elementwise(ir::Prim p, const std::string &what, const SVal &a, const SVal &b, Loc loc);
  SVal unaryOp(const std::string &op, const SVal &a, Loc loc);
  ir::Value *convert(ir::Value *v, ir::DType dt, Loc loc);
  ir::Value *reshape(ir::Value *v, const std::vector<int64_t> &shape, Loc loc);

  // ---- static arguments (Args.cpp)
  std::vector<const ast::Expr *> bindArgs(const ast::Expr &call,
                                          const std::vector<std::string> &names, size_t required);
  std::optional<int64_t> staticIntOpt(const ast::Expr &e);
  int64_t staticInt(const ast::Expr &e, const std::string &what);
  std::vector<int64_t> staticIntList(const ast::Expr &e, const std::string &what);
  bool staticBool(const ast::Expr &e, const std::string &what);
  ir::Type typeArg(const ast::Expr &e, const std::string &what);
  ir::DType dtypeArg(const ast::Expr &e, const std::string &what);
  int64_t normAxis(int64_t axis, int64_t rank, Loc loc, const std::string &what);
  std::vector<int64_t> normAxes(const std::vector<int64_t> &axes, int64_t rank, Loc loc,
                                const std::string &what);
  std::optional<std::vector<std::string>> staticAxesOpt(const ast::Expr &e);

  // ---- expressions (Expressions.cpp)
  SVal eval(const ast::Expr &e);
  std::vector<SVal> evalMulti(const ast::Expr &e);
  // ---- tuples (Trees.cpp)
  SVal evalTuple(const ast::Expr &e);
  SVal evalRecord(const ast::Expr &e);
  SVal tupleElement(const SVal &t, const ast::Expr &index);
  SVal field(const SVal &record, const std::string &name, Loc loc);
  SVal bTreeMap(const ast::Expr &c);
  SVal bDevicePut(const ast::Expr &c);
  SVal bTreeLeaves(const ast::Expr &c);
  SVal bTreeReduce(const ast::Expr &c);
  SVal mapTree(const FnValue &f, const std::vector<SVal> &nodes, const ast::Expr &c, const std::string &path);
  SVal bZerosLike(const ast::Expr &c);
  SVal bOnesLike(const ast::Expr &c);
  std::vector<SVal> destructure(const SVal &v, size_t names, Loc loc);
  void nameLeaves(const SVal &v, const std::string &path);
  ArgDesc tupleArg(const SVal &t, std::vector<ir::Value *> &leaves);
  SVal tupleParam(const ArgDesc &d, ir::Func &f, const std::string &path, Loc loc);
  void printValue(const std::string &label, const SVal &v, Loc loc);
  // A value's leaves (an array's: itself) with their paths from `path`, depth first; and a
  // value of `shape`'s structure over leaves (a loop's or conditional's carried names).
  void leavesOf(const SVal &v, const std::string &path, std::vector<ir::Value *> &leaves,
                std::vector<std::string> &paths);
  SVal withLeaves(const SVal &shape, const std::vector<ir::Value *> &leaves, size_t &next, Loc loc);
  // The names a loop or conditional assigns and so carries: their values before it, and
  // their leaves (a tuple's, depth first) named by path. A body binds each name over its own
  // params (bindCarried into its scope), gives back carriedLeaves, and after the loop or
  // conditional each name is bound over its results (bindCarried, no scope: where it lives).
  struct Carried {
    std::vector<std::string> names;
    std::vector<SVal> before;
    std::vector<ir::Value *> leaves;
    std::vector<std::string> paths;
  };
  Carried carried(std::vector<std::string> names, Loc loc);
  void bindCarried(const Carried &c, const std::vector<ir::Value *> &leaves, Scope *scope, Loc loc);
  void carriedLeaves(const Carried &c, Scope &scope, std::vector<ir::Value *> &out);
  // `v` assigned to `path`, which holds `old`: the same structure, each leaf the same type.
  SVal assignedTuple(const std::string &path, const SVal &old, const SVal &v, Loc loc, bool loopCarries);
  ir::Value *evalArray(const ast::Expr &e);
  SVal evalArrayLit(const ast::Expr &e);
  SVal evalIndex(const ast::Expr &e);
  std::vector<SVal> evalCall(const ast::Expr &e);

  // ---- builtins (Builtins.cpp, Structural.cpp, Collectives.cpp)
  using BuiltinFn = SVal (Sema::*)(const ast::Expr &call);
  static const std::map<std::string, BuiltinFn> &builtins();
  // Builtins with no result (save, savez) or several (top_k, scan).
  using MultiBuiltinFn = std::vector<SVal> (Sema::*)(const ast::Expr &call);
  static const std::map<std::string, MultiBuiltinFn> &multiResultBuiltins();
  SVal bZeros(const ast::Expr &c);
  SVal bOnes(const ast::Expr &c);
  SVal bFull(const ast::Expr &c);
  SVal bIota(const ast::Expr &c);
  SVal bRandomNormal(const ast::Expr &c);
  SVal bRandomUniform(const ast::Expr &c);
  SVal bLoad(const ast::Expr &c);
  // Indexing.cpp: take, scatter_add, argmax/argmin, cumsum, one_hot, clip
  SVal bTake(const ast::Expr &c);
  SVal bScatterAdd(const ast::Expr &c);
  SVal bArgmax(const ast::Expr &c);
  SVal bArgmin(const ast::Expr &c);
  SVal argExtremum(const ast::Expr &c, bool isMin);
  SVal bCumsum(const ast::Expr &c);
  SVal bRoll(const ast::Expr &c);
  SVal bOneHot(const ast::Expr &c);
  SVal bClip(const ast::Expr &c);
  ir::Value *indexArray(const ast::Expr &e, const std::string &what);
  std::pair<ir::Value *, int64_t> alongAxis(ir::Value *x, const ast::Expr *axisArg, Loc loc);
  ir::Value *gatherAlong(ir::Value *x, ir::Value *idx, int64_t axis, Loc loc);
  ir::Value *integerArrayIndex(const ast::Expr &e, ir::Value *base);
  ir::Value *takeAlongAxis(ir::Value *x, ir::Value *idx, int64_t axis, Loc loc);
  ir::Value *argsortAlong(ir::Value *x, int64_t axis, bool descending, Loc loc);
  SVal bTakeAlongAxis(const ast::Expr &c);
  SVal bArgsort(const ast::Expr &c);
  SVal bSort(const ast::Expr &c);
  std::vector<SVal> topK(const ast::Expr &c);  // values and indices
  std::vector<SVal> scan(const ast::Expr &c);  // Scan.cpp: carries and stacks
  std::vector<SVal> scanValues(const ast::Expr *e);
  std::vector<SVal> lowerSave(const ast::Expr &c);  // save(path, x): no result
  std::vector<SVal> lowerSavez(const ast::Expr &c); // savez(path, k1=x1, ...): likewise
  // The path param of load/save/savez; host only unless `inShmap` (a sharded load).
  std::pair<std::string, ir::Attr> pathArg(const ast::Expr &call, const ast::Expr &arg, bool inShmap = false);
  ast::PartitionSpecExpr specArg(const ast::Expr &e);  // spec=P(...) of a sharded load
  SVal randomArray(const ast::Expr &c, ir::Prim p);
  SVal bCast(const ast::Expr &c);
  SVal bExp(const ast::Expr &c);
  SVal bLog(const ast::Expr &c);
  SVal bSin(const ast::Expr &c);
  SVal bCos(const ast::Expr &c);
  SVal bTanh(const ast::Expr &c);
  SVal bSqrt(const ast::Expr &c);
  SVal bAbs(const ast::Expr &c);
  SVal bFloor(const ast::Expr &c);
  SVal bCeil(const ast::Expr &c);
  SVal floatUnary(const ast::Expr &c, ir::Prim p);
  SVal bMaximum(const ast::Expr &c);
  SVal bMinimum(const ast::Expr &c);
  SVal bPow(const ast::Expr &c);
  SVal bSelect(const ast::Expr &c);
  SVal bSum(const ast::Expr &c);
  SVal bMean(const ast::Expr &c);
  SVal bMax(const ast::Expr &c);
  SVal bMin(const ast::Expr &c);
  SVal reduction(const ast::Expr &c, ir::Prim p, bool mean);
  SVal bMatmul(const ast::Expr &c);
  SVal matmul(const SVal &a, const SVal &b, Loc loc);
  SVal bReshape(const ast::Expr &c);
  SVal bTranspose(const ast::Expr &c);
  SVal bExpandDims(const ast::Expr &c);
  SVal bConcatenate(const ast::Expr &c);
  SVal bDynamicSlice(const ast::Expr &c);
  SVal bDynamicUpdateSlice(const ast::Expr &c);
  std::vector<ir::Value *> startIndices(const ast::Expr &list, int64_t rank,
                                        const std::string &what);
  // collectives
  std::vector<int64_t> resolveAxes(const ast::Expr &e, const std::string &what, Loc callLoc,
                                   int64_t *groupSize);
  void requireMesh(const std::string &what, Loc loc);
  SVal simpleCollective(const ast::Expr &c, ir::Prim p);
  SVal bPsum(const ast::Expr &c);
  SVal bPmax(const ast::Expr &c);
  SVal bPmin(const ast::Expr &c);
  SVal bPprod(const ast::Expr &c);
  SVal bPand(const ast::Expr &c);
  SVal bPor(const ast::Expr &c);
  SVal bPxor(const ast::Expr &c);
  SVal bitwiseCollective(const ast::Expr &c, ir::Prim p);
  SVal bBroadcast(const ast::Expr &c);
  SVal bReduce(const ast::Expr &c);
  SVal bGather(const ast::Expr &c);
  SVal bScatter(const ast::Expr &c);
  int64_t staticRoot(const ast::Expr &e, int64_t n, const std::string &what);
  SVal bPsum2(const ast::Expr &c);
  SVal bPbroadcast(const ast::Expr &c);
  SVal bPmean(const ast::Expr &c);
  SVal bAllGather(const ast::Expr &c);
  SVal bAllGatherInvariant(const ast::Expr &c);
  SVal gather(const ast::Expr &c, ir::Prim p);  // (GatherTo: with a root argument)
  SVal bPsumScatter(const ast::Expr &c);
  SVal bPscatter(const ast::Expr &c);
  SVal scatter(const ast::Expr &c, ir::Prim p, const std::string &dimName);  // (ScatterFrom: with a root)
  SVal bAllToAll(const ast::Expr &c);
  SVal bPpermute(const ast::Expr &c);
  SVal bAxisIndex(const ast::Expr &c);
  SVal bAxisSize(const ast::Expr &c);

  // ---- program transformations (Transforms.cpp)
  struct Trace {
    ir::Func *func;
    std::vector<ir::Type> results;  // its results' leaves, in order
    std::vector<SVal> trees;        // its results as returned (arrays or trees): their structure
  };
  std::optional<FnValue> evalFnOpt(const ast::Expr &e, bool builtinsToo = false);
  FnValue evalFn(const ast::Expr &e, const std::string &what, bool builtinsToo = false);
  std::vector<SVal> applyBuiltin(const FnValue &f, const std::vector<SVal> &args, Loc loc);
  std::vector<std::unique_ptr<ast::Expr>> syntheticCalls_;  // applyBuiltin's calls, kept alive
  std::vector<SVal> evalApply(const ast::Expr &call);
  void rejectUnappliedTransform(const ast::Expr &call);
  Trace traceFn(const FnValue &f, const std::vector<ArgDesc> &args, Loc loc);
  size_t fnArity(const FnValue &f, const std::vector<ArgDesc> &args, Loc loc);
  ArgDesc describeArg(const SVal &v);
  std::vector<ir::Value *> argLeaves(const std::vector<SVal> &args, std::vector<size_t> *starts = nullptr);  // an array's type, or a tree's structure and leaf types
  std::vector<ir::Type> fnParamTypes(const FnValue &f, Loc loc);
  std::vector<int64_t> wrtParams(const FnValue &f, size_t n);
  std::vector<SVal> applyFn(const FnValue &f, const std::vector<SVal> &args, Loc loc);
  void checkTransformArgCount(const FnValue &f, size_t want, size_t given, Loc loc,
                              const std::string &shape);
  void requireFloat(const FnValue &f, const ir::Type &t, size_t argnum, Loc loc,
                    const std::string &path = "");
  void requireFloatLeaves(const FnValue &f, const ArgDesc &d, size_t argnum, Loc loc,
                          const std::string &path = "");
  void checkTreeLike(const FnValue &f, const std::string &what, const SVal &given, const SVal &like,
                     const std::string &path, Loc loc);
  ir::Eqn &emitTransform(ir::Prim p, ir::Func *body, std::vector<ir::Value *> ins,
                         const std::vector<ir::Type> &outs, Loc loc);
  std::vector<ir::Value *> emitVjp(ir::Func *body, const std::vector<ir::Value *> &ins,
                                   const std::vector<ir::Type> &outs,
                                   const std::vector<int64_t> &wrt, bool withValue, bool linear,
                                   Loc loc);
  void checkCotangent(const FnValue &f, size_t k, const ir::Type &given, const ir::Type &result,
                      Loc loc);
  std::vector<SVal> applyGrad(const FnValue &f, const std::vector<SVal> &args, size_t n,
                              Loc loc);
  std::vector<SVal> applyVjp(const FnValue &f, const std::vector<SVal> &args, Loc loc);
  std::vector<SVal> applyJvp(const FnValue &f, const std::vector<SVal> &args, size_t n,
                             Loc loc);
  std::vector<SVal> applyTranspose(const FnValue &f, const std::vector<ir::Value *> &xs,
                                   Loc loc);
  ir::Value *innerProduct(ir::Value *a, ir::Value *b, Loc loc);
  SVal bCheckGrads(const ast::Expr &c);

  // ---- shmap (Shmap.cpp)
  std::vector<SVal> callShmap(const ast::FuncDecl &decl, const Unit &unit,
                              const std::vector<SVal> &args, Loc callLoc);
  int meshIndex(const std::string &name, Loc loc);
  // The index of mesh axis `name` (an [unknown-axis] error at `loc` naming the axes if none).
  int axisIndex(const ir::Mesh &mesh, const std::string &name, Loc loc);
  ir::PartitionSpec convertSpec(const ast::PartitionSpecExpr &spec, const ir::Mesh &mesh);
  // `specKind` names the spec in messages: "in_spec" for a shmap argument, "spec" for a
  // sharded load.
  ir::Type blockType(const ir::Type &global, const ir::PartitionSpec &spec,
                     const ast::PartitionSpecExpr &specExpr, const ir::Mesh &mesh, Loc argLoc,
                     const std::string &what, const std::string &specKind = "in_spec");
  std::string specText(const ast::PartitionSpecExpr &spec);
  // The spec (or sharding) of each leaf of a value of structure `d` under `spec`: JAX's prefix
  // rule (Trees.cpp; Spec is ast::PartitionSpecExpr or ast::ShardingExpr).
  template <class Spec>
  void leafSpecs(const Spec &spec, const ArgDesc &d, const std::string &path, const std::string &what,
                 const std::string &specKind, std::vector<const Spec *> &out);
  std::string describe(const ArgDesc &d);

  // ---- @jit functions (Jit.cpp)
  ir::AxisRef convertAxisRef(const ast::AxisRefExpr &a, const ir::Mesh &mesh);
  // `what` names the value in messages ("parameter x", "result 0").
  ir::Sharding convertSharding(const ast::ShardingExpr &s, int jitMesh, const ir::Type &t, const std::string &what);
  void recordJit(const ast::FuncDecl &decl, ir::Func &f, const std::vector<ArgDesc> &args, const Instance &inst);
  SVal bShardingConstraint(const ast::Expr &c);

  // ---- @pipeline functions (Pipeline.cpp)
  void recordPipeline(const ast::FuncDecl &decl, ir::Func &f, const std::vector<ArgDesc> &args);
  void recordPlacement(const ast::PipelineAttrs &a, ir::PipelineFunc &p);
  void recordGroupMeshes(const ast::PipelineAttrs &a, ir::PipelineFunc &p);
  std::vector<SVal> lowerStageBoundary(const ast::Expr &c);

  // ---- statements (Statements.cpp)
  void lowerFunctionBody(const ast::FuncDecl &decl, Instance &inst);
  void lowerBlock(const ast::Block &block);
  void lowerStmt(const ast::Stmt &s);
  void lowerLet(const ast::Stmt &s);
  void lowerAssign(const ast::Stmt &s);
  void assignName(const std::string &name, Loc loc, SVal v);
  void lowerPrint(const ast::Stmt &s);
  void lowerReturn(const ast::Stmt &s, const ast::FuncDecl &decl, Instance &inst);
  void lowerFor(const ast::Stmt &s);
  void lowerWhile(const ast::Stmt &s);
  void enterNested(FuncCtx &ctx, ir::Func *f);
  ir::Func *lowerWhilePart(const ast::Stmt &s, const Carried &carries, bool isPredicate, FuncCtx &ctx);
  void lowerIf(const ast::Stmt &s);
  ir::Func *lowerBranch(const ast::Block &body, const Carried &outs, const std::string &suffix, Loc loc,
                        FuncCtx &ctx);
  std::vector<std::string> outerAssignedNames(const ast::Block &a, const ast::Block *b,
                                              const std::string &local);

  // ---- state
  Diagnostics &diags_;
  std::vector<Unit> units_;
  std::unique_ptr<ir::Module> module_;
  std::map<InstKey, Instance> instances_;
  std::vector<const ast::FuncDecl *> active_;  // instantiations in progress (recursion check)
  // Calls nest at most this deep (docs/limits.md): the front end recurses once per call.
  static constexpr size_t kMaxCallDepth = 256;
  // Calls that led to the function being lowered: (call site, callee name).
  std::vector<std::pair<Loc, std::string>> callChain_;
  std::set<std::string> usedFuncNames_;
  FuncCtx *cur_ = nullptr;
  Scope *scope_ = nullptr;
  // Where each i32[] constant was made (function, equation index): constantInt looks a value
  // up here, not by a scan of the functions, since every operand of + - * // % asks.
  std::unordered_map<const ir::Value *, std::pair<const ir::Func *, size_t>> intConstants_;
};

} // namespace shmapc::sema
