// The syntax tree the parser builds and sema reads. Every node keeps the location of the
// token that made it (for an operator: the operator token; for a call: the callee name).
#pragma once
#include "source/Diagnostics.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shmapc::ast {

enum class DTypeName { F32, F64, I32, Bool, I64, F16, BF16 };

// `f32[8,4]`
struct Expr;

struct TypeExpr {
  Loc loc;
  DTypeName dtype = DTypeName::F32;
  std::vector<int64_t> shape;
  // Per dimension: null for a literal size (in `shape`), else a static integer expression
  // (`f32[x.shape[0], n // 2]`) that sema evaluates (the size in `shape` is then 0).
  std::vector<std::shared_ptr<Expr>> dims;
};
using ExprPtr = std::unique_ptr<Expr>;

// One component of an index expression `x[...]`.
struct IndexItem {
  enum Kind { Index, Slice, NewAxis } kind = Index;
  Loc loc;
  ExprPtr index;                            // Index: the index (an integer literal, maybe negated)
  ExprPtr start, stop, step;                // Slice: each may be null
};

struct ShardingExpr;

struct Expr {
  enum Kind {
    IntLit,      // intValue
    FloatLit,    // floatValue
    BoolLit,     // boolValue
    StringLit,   // name holds the string (axis names, labels)
    NoneLit,     // `None` (in P(None, "y"))
    Name,        // name; `module.name` has module set
    ArrayLit,    // `[a, b, c]`: items
    TupleLit,    // `(a, b)` / `(a,)`: items
    TypeArg,     // a type used as an argument: `zeros(f32[4])`: type
    Unary,       // op ("-" or "!"), items[0]
    Binary,      // op ("+","-","*","/","//","%","@","==","!=","<","<=",">",">=","&&","||"), items[0], items[1]
    Call,        // callee name (+ module), items = positional args, kwargs = keyword args;
                 // with `callee` set, an application of a function-valued expression:
                 // `grad(f)(x)` is a Call whose callee is the Call `grad(f)`
    Index,       // items[0] = base, indices
    ShardingLit, // `sharding<@m, [...]>` as an argument (sharding_constraint): sharding
    RecordLit,   // `{w: a, b: c}`: kwargs (field name, its location, its value), as written
    Field,       // `e.name` of an expression other than a plain name: items[0] = base, name
  } kind;
  Loc loc;
  int64_t intValue = 0;
  double floatValue = 0;
  bool boolValue = false;
  std::string name;
  std::string module;   // for Name / Call: `nn.dense` -> module "nn", name "dense"
  std::string op;
  std::vector<ExprPtr> items;
  ExprPtr callee;       // Call: the function-valued expression applied (null: `name` is)
  struct KwArg {
    std::string name;
    Loc loc;
    ExprPtr value;
  };
  std::vector<KwArg> kwargs;
  std::vector<IndexItem> indices;
  std::optional<TypeExpr> type;
  std::shared_ptr<ShardingExpr> sharding;  // ShardingLit
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Block = std::vector<StmtPtr>;

struct Stmt {
  enum Kind {
    Let,      // `let a, b = value;` names (one or more), value
    Assign,   // `a = value;` names[0], value
    Print,    // `print(value)` / `print("label", value)`: label (may be empty), value
    Return,   // `return a, b;` values (maybe empty)
    ExprStmt, // a call evaluated for nothing: value
    For,      // `for i in range(lo, hi) { body }`: names[0] = i, values = {lo, hi} (static ints)
    While,    // `while cond { body }`: value = cond (re-evaluated before every iteration)
    If,       // `if cond { body } else { elseBody }`: value = cond
  } kind;
  Loc loc;
  std::vector<std::string> names;
  std::vector<Loc> nameLocs;
  ExprPtr value;
  std::vector<ExprPtr> values;
  std::string label;
  Block body, elseBody;
};

// A parameter's type is optional: a function is instantiated once per distinct list of
// argument types (and static axis-name arguments) it is called with, as JAX traces a Python
// function; a written type is checked against the argument. A parameter may also receive a
// static axis-name argument (`"x"` or `("x","y")`) for use in collectives.
struct Param {
  std::string name;
  Loc loc;
  std::optional<TypeExpr> type;
};

// `@shmap(mesh=M, in_specs=..., out_specs=..., check_vma=..., auto_pbroadcast=...)`
struct PartitionSpecExpr {
  Loc loc;
  // One entry per array dimension; each entry lists the axis names (empty for None),
  // major to minor, with their locations.
  std::vector<std::vector<std::string>> dims;
  std::vector<std::vector<Loc>> dimLocs;
  // A spec for a tree argument or result: `(P(), P("x"))` or `{w: P(None, "y"), b: P()}`,
  // matched against the value's structure; a plain P(...) stands for a whole subtree (JAX's
  // prefix rule).
  bool isTree = false;
  std::vector<PartitionSpecExpr> items;
  std::vector<std::string> keys;  // a record spec's field names, as written (empty for a tuple)
};

struct ShmapAttrs {
  Loc loc;
  std::string mesh;
  Loc meshLoc;
  std::vector<PartitionSpecExpr> inSpecs, outSpecs;
  Loc inSpecsLoc, outSpecsLoc;
  bool checkVma = true;
  bool autoPbroadcast = true;
};

// Shardy's sharding representation (ir::Sharding): `sharding<@m, [{"x"}, {"z", "y", ?}p1],
// replicated={"w"}>`, or the shorthand P(...) (closed dimensions, on the jit function's mesh).
struct AxisRefExpr {
  Loc loc;
  std::string name;
  int64_t preSize = 0, size = 0;  // `"x":(m)k`; 0, 0: the whole axis
};
struct DimShardingExpr {
  Loc loc;  // the '{'
  std::vector<AxisRefExpr> axes;
  bool open = false;
  int64_t priority = -1;  // `}p1`
  Loc priorityLoc;
};
struct ShardingExpr {
  Loc loc;
  std::string mesh;  // empty for P(...): the jit function's mesh
  Loc meshLoc;
  std::vector<DimShardingExpr> dims;
  std::vector<AxisRefExpr> replicated;
  Loc replicatedLoc;
  // The sharding of a tree parameter or result, as PartitionSpecExpr's (prefix rule)
  bool isTree = false;
  std::vector<ShardingExpr> items;
  std::vector<std::string> keys;
};

// `@jit(mesh=M, in_shardings=..., out_shardings=...)`: a function on global arrays whose
// shardings the compiler propagates (Shardy's propagation). Each sharding list may be left out.
struct JitAttrs {
  Loc loc;
  std::string mesh;
  Loc meshLoc;
  std::vector<ShardingExpr> inShardings, outShardings;
  bool hasIn = false, hasOut = false;
  Loc inLoc, outLoc;
};

// `@pipeline(mesh=M, axis="stage", microbatches=16, schedule="1f1b", batch=(x, y))`: a train
// step (one grad or value_and_grad call and the update) whose differentiated function is cut into
// stages at its stage_boundary() statements, run over micro-batches of the batch arguments.
struct PipelineAttrs {
  Loc loc;
  std::string mesh, axis, schedule = "gpipe";
  Loc meshLoc, axisLoc, scheduleLoc, microbatchesLoc, batchLoc;
  int64_t microbatches = 1;
  int64_t virtualStages = 1;  // interleaved 1F1B: stages per device group
  bool remat = false;         // a backward step recomputes its stage's forward
  Loc virtualStagesLoc;
  std::vector<std::string> batch;  // parameter names
  std::vector<Loc> batchLocs;
  // placement=(0, 1, 1, 0): the device group (slice of the stage axis) of each stage; or
  // placement=(a, b, b): the mesh of each stage (placementMeshes; a device group per mesh).
  std::vector<int64_t> placement;
  std::vector<std::string> placementMeshes;
  std::vector<Loc> placementLocs;
  Loc placementLoc;
  // order=("F0.0 F0.1 B0.0 B0.1", ...): each device group's steps in the order it runs them.
  std::vector<std::string> order;
  std::vector<Loc> orderLocs;
  Loc orderLoc;
};

struct FuncDecl {
  Loc loc;          // the function name
  std::string name;
  std::string module;  // the module that defined it ("" for the main file)
  std::vector<Param> params;
  std::vector<TypeExpr> results;  // checked against what the body returns, when written
  bool hasResultArrow = false;
  std::optional<ShmapAttrs> shmap;
  std::optional<JitAttrs> jit;
  std::optional<PipelineAttrs> pipeline;
  Block body;
};

struct MeshDecl {
  Loc loc;
  std::string name;
  std::vector<std::string> axes;
  std::vector<int64_t> sizes;
  std::vector<Loc> axisLocs;
};

struct ImportDecl {
  Loc loc;
  std::string module;
};

// `arg lr: f32 = 0.1;`: a program argument, given at run time as --lr=VALUE.
struct ArgDecl {
  Loc loc;
  std::string name;
  std::string type;         // "f32", "f64", "i32", "bool" or "str"
  std::string defaultText;  // as the program wrote it ("0.1", "-3", "true", "tokens.npy")
};

struct Program {
  int file = -1;  // the SourceManager index it was parsed from (for file-level diagnostics)
  std::vector<ArgDecl> args;
  std::vector<ImportDecl> imports;
  std::vector<MeshDecl> meshes;
  std::vector<std::unique_ptr<FuncDecl>> funcs;
};

// Prints the tree as an indented S-expression (`--emit=ast`).
std::string printAST(const Program &program);

// `"x"` or `"x":(m)k`, as written.
std::string axisRefText(const AxisRefExpr &a);
// The sharding P(...) stands for: its dimensions closed (the mesh left to the jit function's).
ShardingExpr shardingOfSpec(const PartitionSpecExpr &spec);

} // namespace shmapc::ast
