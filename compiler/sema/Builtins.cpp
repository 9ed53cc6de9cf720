// The builtins table (name -> handler) and the creation, element-wise and reduction
// builtins. Structural builtins live in Structural.cpp, collectives in Collectives.cpp.
#include "sema/SemaImpl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <unordered_map>

namespace shmapc::sema {

const std::map<std::string, Sema::BuiltinFn> &Sema::builtins() {
  static const std::map<std::string, BuiltinFn> table = {
      // creation
      {"zeros", &Sema::bZeros},
      {"check_grads", &Sema::bCheckGrads},
      {"ones", &Sema::bOnes},
      {"zeros_like", &Sema::bZerosLike},
      {"ones_like", &Sema::bOnesLike},
      // trees (Trees.cpp)
      {"tree_map", &Sema::bTreeMap},
      {"tree_leaves", &Sema::bTreeLeaves},
      {"tree_reduce", &Sema::bTreeReduce},
      {"device_put", &Sema::bDevicePut},
      {"full", &Sema::bFull},
      {"iota", &Sema::bIota},
      {"random_normal", &Sema::bRandomNormal},
      {"random_uniform", &Sema::bRandomUniform},
      {"load", &Sema::bLoad},
      {"load_checkpoint", &Sema::bLoad},
      // element-wise
      {"cast", &Sema::bCast},
      {"exp", &Sema::bExp},
      {"log", &Sema::bLog},
      {"sin", &Sema::bSin},
      {"cos", &Sema::bCos},
      {"tanh", &Sema::bTanh},
      {"sqrt", &Sema::bSqrt},
      {"abs", &Sema::bAbs},
      {"floor", &Sema::bFloor},
      {"ceil", &Sema::bCeil},
      {"maximum", &Sema::bMaximum},
      {"minimum", &Sema::bMinimum},
      {"pow", &Sema::bPow},
      {"select", &Sema::bSelect},
      {"clip", &Sema::bClip},
      {"where", &Sema::bSelect},
      // reductions
      {"sum", &Sema::bSum},
      {"mean", &Sema::bMean},
      {"max", &Sema::bMax},
      {"min", &Sema::bMin},
      // along one axis (Indexing.cpp)
      {"take", &Sema::bTake},
      {"scatter_add", &Sema::bScatterAdd},
      {"argmax", &Sema::bArgmax},
      {"argmin", &Sema::bArgmin},
      {"cumsum", &Sema::bCumsum},
      {"roll", &Sema::bRoll},
      {"take_along_axis", &Sema::bTakeAlongAxis},
      {"argsort", &Sema::bArgsort},
      {"sort", &Sema::bSort},
      {"one_hot", &Sema::bOneHot},
      // structural (Structural.cpp)
      {"matmul", &Sema::bMatmul},
      {"reshape", &Sema::bReshape},
      {"transpose", &Sema::bTranspose},
      {"expand_dims", &Sema::bExpandDims},
      {"concatenate", &Sema::bConcatenate},
      {"dynamic_slice", &Sema::bDynamicSlice},
      {"dynamic_update_slice", &Sema::bDynamicUpdateSlice},
      // collectives (Collectives.cpp)
      {"psum", &Sema::bPsum},
      {"pmax", &Sema::bPmax},
      {"pmin", &Sema::bPmin},
      {"pprod", &Sema::bPprod},
      {"pand", &Sema::bPand},
      {"por", &Sema::bPor},
      {"pxor", &Sema::bPxor},
      {"broadcast", &Sema::bBroadcast},
      {"reduce", &Sema::bReduce},
      {"gather", &Sema::bGather},
      {"scatter", &Sema::bScatter},
      {"pmean", &Sema::bPmean},
      {"psum2", &Sema::bPsum2},
      {"pbroadcast", &Sema::bPbroadcast},
      {"pvary", &Sema::bPbroadcast},
      {"all_gather", &Sema::bAllGather},
      {"all_gather_invariant", &Sema::bAllGatherInvariant},
      {"psum_scatter", &Sema::bPsumScatter},
      {"pscatter", &Sema::bPscatter},
      {"all_to_all", &Sema::bAllToAll},
      {"ppermute", &Sema::bPpermute},
      {"axis_index", &Sema::bAxisIndex},
      {"axis_size", &Sema::bAxisSize},
      // jit functions (Jit.cpp)
      {"sharding_constraint", &Sema::bShardingConstraint},
  };
  return table;
}

const std::map<std::string, Sema::MultiBuiltinFn> &Sema::multiResultBuiltins() {
  static const std::map<std::string, MultiBuiltinFn> table = {
      {"save", &Sema::lowerSave},
      {"savez", &Sema::lowerSavez},
      {"save_checkpoint", &Sema::lowerSavez},
      {"stage_boundary", &Sema::lowerStageBoundary},
      {"top_k", &Sema::topK},
      {"scan", &Sema::scan},
  };
  return table;
}

// ---- creation

SVal Sema::bZeros(const ast::Expr &c) {
  auto a = bindArgs(c, {"type"}, 1);
  ir::Type t = typeArg(*a[0], "the argument of zeros");
  return SVal::array(constant(t.dtype, t.shape, {0}, c.loc), c.loc);
}

SVal Sema::bOnes(const ast::Expr &c) {
  auto a = bindArgs(c, {"type"}, 1);
  ir::Type t = typeArg(*a[0], "the argument of ones");
  return SVal::array(constant(t.dtype, t.shape, {1}, c.loc), c.loc);
}

// zeros_like(x) / ones_like(x): x's shape and dtype (a tree: each leaf's, as jnp's under
// tree_map)
SVal Sema::bZerosLike(const ast::Expr &c) {
  auto a = bindArgs(c, {"x"}, 1);
  const ir::Type &t = evalArray(*a[0])->type;
  return SVal::array(constant(t.dtype, t.shape, {0}, c.loc), c.loc);
}

SVal Sema::bOnesLike(const ast::Expr &c) {
  auto a = bindArgs(c, {"x"}, 1);
  const ir::Type &t = evalArray(*a[0])->type;
  return SVal::array(constant(t.dtype, t.shape, {1}, c.loc), c.loc);
}

SVal Sema::bFull(const ast::Expr &c) {
  auto a = bindArgs(c, {"type", "value"}, 2);
  ir::Type t = typeArg(*a[0], "the first argument of full");
  const ast::Expr &v = *a[1];
  if (v.kind == ast::Expr::BoolLit) {
    if (t.dtype != ir::DType::Bool)
      fail(DiagId::DTypeMismatch, v.loc, "cannot fill " + str(t) + " with a bool",
           "use a number, or a bool[...] type");
    return SVal::array(constant(t.dtype, t.shape, {v.boolValue ? 1.0 : 0.0}, c.loc), c.loc);
  }
  SVal lit = eval(v);
  if (lit.kind != SVal::Literal)
    fail(DiagId::BadArgument, v.loc, "the fill value of full must be a literal",
         "write a constant such as 0.5; for computed values use broadcasting, e.g. "
         "zeros(T) + x");
  return SVal::array(literalAs(lit, t.dtype, t.shape, c.loc), c.loc);
}

SVal Sema::bIota(const ast::Expr &c) {
  auto a = bindArgs(c, {"type", "dim"}, 1);
  ir::Type t = typeArg(*a[0], "the argument of iota");
  if (t.dtype == ir::DType::Bool)
    fail(DiagId::DTypeMismatch, a[0]->loc, "iota cannot make " + str(t),
         "use a numeric type such as i32[...] or f32[...]");
  if (t.rank() == 0)
    fail(DiagId::BadAxis, a[0]->loc, "iota needs an array type, got " + str(t),
         "give the type a shape, e.g. iota(i32[8])");
  int64_t dim = a[1] ? normAxis(staticInt(*a[1], "dim"), t.rank(), a[1]->loc, "dim") : 0;
  return SVal::array(emit(ir::Prim::Iota, {}, t, c.loc, {{"dimension", dim}}), c.loc);
}

SVal Sema::randomArray(const ast::Expr &c, ir::Prim p) {
  auto a = bindArgs(c, {"type", "seed"}, 1);
  ir::Type t = typeArg(*a[0], "the first argument of " + c.name);
  if (!ir::isFloat(t.dtype))
    fail(DiagId::DTypeMismatch, a[0]->loc, c.name + " makes floats, not " + str(t),
         "use a float type: f32[...], f64[...], f16[...] or bf16[...]");
  if (!a[1]) return SVal::array(emit(p, {}, t, c.loc, {{"seed", (int64_t)0}}), c.loc);
  if (auto seed = staticIntOpt(*a[1])) return SVal::array(emit(p, {}, t, c.loc, {{"seed", *seed}}), c.loc);
  // A seed known only at run time (a step counter, axis_index): an i32[] operand.
  SVal s = eval(*a[1]);
  ir::Value *seed = s.kind == SVal::Literal ? literalAs(s, ir::DType::I32, {}, a[1]->loc) : toArray(s);
  if (seed->type.dtype != ir::DType::I32 || seed->type.rank() != 0)
    fail(DiagId::BadArgument, a[1]->loc, "the seed of " + c.name + " must be an i32 scalar, got " + str(seed->type),
         "pass a static integer or an i32[] value");
  return SVal::array(emit(p, {seed}, t, c.loc), c.loc);
}
SVal Sema::bRandomNormal(const ast::Expr &c) { return randomArray(c, ir::Prim::RandomNormal); }
SVal Sema::bRandomUniform(const ast::Expr &c) { return randomArray(c, ir::Prim::RandomUniform); }

// ---- files (numpy .npy and .npz, runtime/npy.cpp): host only, except a sharded load; paths
// relative to the working directory

namespace {
bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}
} // namespace

// The path param of load/save/savez: {"path", literal} or {"path_arg", index of a str program
// argument}.
std::pair<std::string, ir::Attr> Sema::pathArg(const ast::Expr &call, const ast::Expr &arg, bool inShmap) {
  if (cur_->mesh && !inShmap)
    failWithCallChain(DiagId::FileInsideShmap, call.loc, call.name + " inside a shmap body",
                      call.name == "load" ? "load in main and pass the array to the shmap function, or read this "
                                            "device's block of the file with load(path, GLOBAL_TYPE, spec=P(...))"
                                          : "return the value from the shmap function and " + call.name + " it in main");
  if (arg.kind == ast::Expr::Name && arg.module.empty() && !findScope(arg.name)) {
    int index = programArgIndex(arg.name);
    if (index >= 0 && module_->args[index].type == "str") return {"path_arg", (int64_t)index};
  }
  if (arg.kind != ast::Expr::StringLit || arg.name.empty()) {
    bool npz = call.name == "savez";
    fail(DiagId::BadArgument, arg.loc,
         "the path of " + call.name + " must be a string literal or a str program argument",
         "write " + call.name + "(\"" + (npz ? "ckpt.npz" : "weights.npy") + "\", ...), or declare arg data: str = \"" +
             (npz ? "ckpt.npz" : "x.npy") + "\"; and pass data");
  }
  return {"path", arg.name};
}

// spec=P("x", None): the syntax of in_specs, as an expression (a call of P).
ast::PartitionSpecExpr Sema::specArg(const ast::Expr &e) {
  const char *hint = "write a partition spec over the shmap's mesh axes, e.g. spec=P(\"x\", None)";
  if (e.kind != ast::Expr::Call || e.callee || e.name != "P" || !e.module.empty() || !e.kwargs.empty())
    fail(DiagId::BadSpec, e.loc, "spec= takes a partition spec P(...)", hint);
  ast::PartitionSpecExpr spec;
  spec.loc = e.loc;
  for (const ast::ExprPtr &item : e.items) {
    std::vector<std::string> names;
    std::vector<Loc> locs;
    auto axis = [&](const ast::Expr &a) {
      if (a.kind != ast::Expr::StringLit)
        fail(DiagId::BadSpec, a.loc, "each dimension of a partition spec is None, an axis name \"x\", or a tuple "
                                     "(\"x\", \"y\")", hint);
      names.push_back(a.name);
      locs.push_back(a.loc);
    };
    if (item->kind == ast::Expr::TupleLit) {
      for (const ast::ExprPtr &a : item->items) axis(*a);
    } else if (item->kind != ast::Expr::NoneLit) {
      axis(*item);
    }
    spec.dims.push_back(std::move(names));
    spec.dimLocs.push_back(std::move(locs));
  }
  return spec;
}

// load("x.npy", f32[256, 512]): the type is static; the runtime checks the file against it.
// key="w1" reads the array w1 of an .npz archive. spec=P(...) (only in a shmap body) reads
// this device's block of the global array the type describes, split as an in_spec would.
//
// load_checkpoint("ckpt", like, key="params"): the same from a sharded checkpoint's folder
// (save_checkpoint), each array read as the program keeps it: a rank reads only its blocks of
// one kept as blocks, whatever mesh or rank count wrote it (docs/runtime.md, "Checkpoints").
SVal Sema::bLoad(const ast::Expr &c) {
  const bool checkpoint = c.name == "load_checkpoint";
  auto a = checkpoint ? bindArgs(c, {"path", "type", "key"}, 3) : bindArgs(c, {"path", "type", "key", "spec"}, 2);
  if (checkpoint) a.push_back(nullptr);  // (no spec=)
  if (a[3] && !cur_->mesh)
    failWithCallChain(DiagId::ShardedLoadOnHost, a[3]->loc,
                      "load with spec= reads one device's block and is only for shmap bodies",
                      "in host code load the whole array without spec= and pass it to the shmap function "
                      "(its in_specs split it); or move this load into the shmap body");
  Params params;
  params.insert(pathArg(c, *a[0], a[3] != nullptr));
  if (checkpoint) params["checkpoint"] = (int64_t)1;
  if (a[2]) {
    if (a[2]->kind != ast::Expr::StringLit || a[2]->name.empty())
      fail(DiagId::BadArgument, a[2]->loc, "the key of load must be a non-empty string literal",
           "name the array of the .npz archive: load(\"ckpt.npz\", f32[4, 8], key=\"w1\")");
    params["key"] = a[2]->name;
  }
  if (a[0]->kind == ast::Expr::StringLit && !checkpoint) {  // a literal path says which kind of file it is
    const std::string &path = a[0]->name;
    if (endsWith(path, ".npz") && !a[2])
      fail(DiagId::NpzWithoutKey, a[0]->loc, path + " is an .npz archive: load needs the key of one of its arrays",
           "add key=\"NAME\" to load the array numpy saved as np.savez(..., NAME=array)");
    if (endsWith(path, ".npy") && a[2])
      fail(DiagId::KeyWithoutNpz, a[2]->loc, "key= names an array of an .npz archive, but " + path + " is a .npy file",
           "drop key= to load the .npy file, or load from an .npz archive");
  }
  if (a[1]->kind != ast::Expr::TypeArg && !a[3]) {  // load(path, like, key="params"): a tree like `like`
    SVal like = eval(*a[1]);
    if (like.kind == SVal::Tuple) {
      if (!a[2])
        fail(DiagId::NpzWithoutKey, c.loc, "loading a tree needs the name it was saved under",
             "add key=\"NAME\": savez(path, NAME=tree) saved its leaves as NAME.w, NAME.b, ...");
      std::vector<ir::Value *> leaves, loaded;
      std::vector<std::string> paths;
      leavesOf(like, a[2]->name, leaves, paths);
      for (size_t k = 0; k < leaves.size(); ++k) {
        Params leafParams = params;
        leafParams["key"] = paths[k];
        loaded.push_back(emit(ir::Prim::Load, {}, leaves[k]->type, c.loc, leafParams));
      }
      size_t next = 0;
      return withLeaves(like, loaded, next, c.loc);
    }
  }
  ir::Type t = typeArg(*a[1], "the second argument of load");
  if (t.dtype == ir::DType::BF16)
    fail(DiagId::NpyDType, a[1]->loc, "load cannot read " + str(t) + ": .npy has no bfloat16 dtype",
         "save the array as float32 in numpy and convert after loading: cast(load(path, f32[...]), bf16)");
  if (!a[3]) return SVal::array(emit(ir::Prim::Load, {}, t, c.loc, params), c.loc);
  ast::PartitionSpecExpr specExpr = specArg(*a[3]);
  ir::PartitionSpec spec = convertSpec(specExpr, *cur_->mesh);
  ir::Type block = blockType(t, spec, specExpr, *cur_->mesh, a[1]->loc, "the loaded array", "spec");
  params["spec"] = std::vector<ir::PartitionSpec>{spec};
  return SVal::array(emit(ir::Prim::Load, {}, block, c.loc, params), c.loc);
}

std::vector<SVal> Sema::lowerSave(const ast::Expr &c) {
  auto a = bindArgs(c, {"path", "x"}, 2);
  auto path = pathArg(c, *a[0]);
  ir::Eqn e;
  e.prim = ir::Prim::Save;
  e.ins = {evalArray(*a[1])};
  if (e.ins[0]->type.dtype == ir::DType::BF16)
    fail(DiagId::NpyDType, a[1]->loc,
         "save cannot write " + str(e.ins[0]->type) + ": .npy has no bfloat16 dtype",
         "convert it to f32 first: save(path, cast(x, f32)) (exact: every bf16 value is an f32)");
  e.params[path.first] = path.second;
  e.loc = c.loc;
  pushEqn(std::move(e));
  return {};
}

// savez("ckpt.npz", w1=w1, b1=b1): numpy's np.savez; each keyword names its array's member
// (w1.npy). Positional arrays after the path are named arr_0, arr_1, ... as numpy names them.
//
// save_checkpoint("ckpt", params=p, opt=s): the same as a sharded checkpoint, a folder (each
// array under its name and path; docs/runtime.md, "Checkpoints"): each rank writes the blocks
// of the arrays it keeps as blocks, so a sharded model is saved without gathering it.
std::vector<SVal> Sema::lowerSavez(const ast::Expr &c) {
  const bool checkpoint = c.name == "save_checkpoint";
  if (c.items.empty())
    fail(DiagId::ArgCount, c.loc, c.name + " is missing its argument path",
         checkpoint ? "call it as save_checkpoint(\"ckpt\", params=p, opt=s)" : "call it as savez(\"ckpt.npz\", w1=w1, b1=b1)");
  auto path = pathArg(c, *c.items[0]);
  std::vector<std::pair<std::string, const ast::Expr *>> arrays;
  std::vector<Loc> locs;
  for (size_t i = 1; i < c.items.size(); ++i) {
    arrays.push_back({"arr_" + std::to_string(i - 1), c.items[i].get()});
    locs.push_back(c.items[i]->loc);
  }
  for (const ast::Expr::KwArg &kw : c.kwargs) {
    arrays.push_back({kw.name, kw.value.get()});
    locs.push_back(kw.loc);
  }
  // A tree is saved leaf by leaf, each under its name and path: savez(f, params=p) writes
  // params.emb, params.attn.wq, ... (np.load(f)["params.emb"] reads one back).
  std::vector<std::string> names;
  std::vector<ir::Value *> values;
  std::vector<size_t> owner;  // the argument each saved array comes from
  for (size_t i = 0; i < arrays.size(); ++i) {
    SVal v = eval(*arrays[i].second);
    if (v.kind == SVal::Tuple && arrays[i].first.rfind("arr_", 0) == 0 && i < c.items.size() - 1)
      fail(DiagId::BadArgument, locs[i], c.name + " needs a name for the tree " + describe(v),
           "pass it as a keyword argument: " + c.name + "(path, params=p) saves params.w, params.b, ...");
    std::vector<std::string> paths;
    leavesOf(v, arrays[i].first, values, paths);
    for (const std::string &p : paths) {
      names.push_back(p);
      owner.push_back(i);
    }
  }
  std::string keys;
  std::unordered_map<std::string, size_t> firstWith;  // (a pairwise check was quadratic)
  for (size_t k = 0; k < names.size(); ++k) {
    auto [it, fresh] = firstWith.try_emplace(names[k], k);
    if (!fresh) {
      const size_t i = owner[k], j = owner[it->second];
      failWithNote(DiagId::DuplicateKey, locs[i], c.name + " is given the key " + names[k] + " twice",
                   "each array of an archive needs its own name",
                   locs[j], names[k] + (j < c.items.size() - 1 ? " is the name of this positional array"
                                                               : " is first given here"));
    }
    keys += (k ? "," : "") + names[k];
  }
  ir::Eqn e;
  e.prim = ir::Prim::SaveNpz;
  for (size_t k = 0; k < names.size(); ++k) {
    e.ins.push_back(values[k]);
    if (values[k]->type.dtype == ir::DType::BF16)
      fail(DiagId::NpyDType, arrays[owner[k]].second->loc,
           c.name + " cannot write " + names[k] + " of type " + str(values[k]->type) +
               ": .npy (an .npz member) has no bfloat16 dtype",
           "convert it to f32 first: " + names[k] + "=cast(x, f32) (exact: every bf16 value is an f32)");
  }
  e.params[path.first] = path.second;
  e.params["keys"] = keys;
  if (checkpoint) e.params["checkpoint"] = (int64_t)1;
  e.loc = c.loc;
  pushEqn(std::move(e));
  return {};
}

// ---- element-wise

SVal Sema::bCast(const ast::Expr &c) {
  auto a = bindArgs(c, {"x", "dtype"}, 2);
  ir::DType dt = dtypeArg(*a[1], "the second argument of cast");
  SVal x = eval(*a[0]);
  if (x.kind == SVal::Literal && (ir::isFloat(dt) || !x.literalIsFloat))
    return SVal::array(literalAs(x, dt, {}, c.loc), c.loc);
  return SVal::array(convert(toArray(x), dt, c.loc), c.loc);
}

// exp, log, ...: float operands only (an int literal becomes f32, as in JAX).
SVal Sema::floatUnary(const ast::Expr &c, ir::Prim p) {
  auto a = bindArgs(c, {"x"}, 1);
  SVal x = eval(*a[0]);
  ir::Value *v = x.kind == SVal::Literal ? literalAs(x, ir::DType::F32, {}, x.loc) : toArray(x);
  if (!ir::isFloat(v->type.dtype))
    fail(DiagId::DTypeMismatch, c.loc, c.name + " needs a float array, got " + str(v->type),
         "convert it first: cast(x, f32)");
  return SVal::array(emit(p, {v}, v->type, c.loc), c.loc);
}
SVal Sema::bExp(const ast::Expr &c) { return floatUnary(c, ir::Prim::Exp); }
SVal Sema::bLog(const ast::Expr &c) { return floatUnary(c, ir::Prim::Log); }
SVal Sema::bSin(const ast::Expr &c) { return floatUnary(c, ir::Prim::Sin); }
SVal Sema::bCos(const ast::Expr &c) { return floatUnary(c, ir::Prim::Cos); }
SVal Sema::bTanh(const ast::Expr &c) { return floatUnary(c, ir::Prim::Tanh); }
SVal Sema::bSqrt(const ast::Expr &c) { return floatUnary(c, ir::Prim::Sqrt); }
SVal Sema::bAbs(const ast::Expr &c) { return floatUnary(c, ir::Prim::Abs); }
SVal Sema::bFloor(const ast::Expr &c) { return floatUnary(c, ir::Prim::Floor); }
SVal Sema::bCeil(const ast::Expr &c) { return floatUnary(c, ir::Prim::Ceil); }

SVal Sema::bMaximum(const ast::Expr &c) {
  auto a = bindArgs(c, {"a", "b"}, 2);
  SVal x = eval(*a[0]);
  return elementwise(ir::Prim::Max, "maximum", x, eval(*a[1]), c.loc);
}
SVal Sema::bMinimum(const ast::Expr &c) {
  auto a = bindArgs(c, {"a", "b"}, 2);
  SVal x = eval(*a[0]);
  return elementwise(ir::Prim::Min, "minimum", x, eval(*a[1]), c.loc);
}
SVal Sema::bPow(const ast::Expr &c) {
  auto a = bindArgs(c, {"a", "b"}, 2);
  SVal x = eval(*a[0]);
  return elementwise(ir::Prim::Pow, "pow", x, eval(*a[1]), c.loc);
}

// select(c, a, b): the predicate broadcasts with the two choices, which are promoted to one
// dtype (as jnp.where).
SVal Sema::bSelect(const ast::Expr &c) {
  auto a = bindArgs(c, {"pred", "on_true", "on_false"}, 3);
  ir::Value *pred = evalArray(*a[0]);
  if (pred->type.dtype != ir::DType::Bool)
    fail(DiagId::DTypeMismatch, a[0]->loc,
         c.name + " needs a bool predicate, got " + str(pred->type),
         "compare first, e.g. " + c.name + "(x > 0, a, b)");
  SVal t = eval(*a[1]);
  SVal f = eval(*a[2]);
  std::string what = "apply " + c.name + " to";
  ir::DType dt = commonDType({t, f}, what, c.loc);
  std::vector<int64_t> shape = broadcastShape({SVal::array(pred, a[0]->loc), t, f}, what, c.loc);
  std::vector<ir::Value *> ins = {broadcastTo(pred, shape, c.loc)};
  for (const SVal &v : {t, f}) ins.push_back(asOperand(v, dt, shape, c.loc));
  return SVal::array(emit(ir::Prim::Select, ins, ins[1]->type, c.loc), c.loc);
}

// ---- reductions: sum / mean / max / min over all axes or `axis=`

SVal Sema::reduction(const ast::Expr &c, ir::Prim p, bool mean) {
  auto a = bindArgs(c, {"x", "axis"}, 1);
  ir::Value *x = evalArray(*a[0]);
  if (x->type.dtype == ir::DType::Bool)
    fail(DiagId::DTypeMismatch, c.loc, c.name + " needs numbers, got " + str(x->type),
         "cast(x, i32) to count true values");
  std::vector<int64_t> axes;
  if (a[1]) {
    axes = normAxes(staticIntList(*a[1], "axis"), x->type.rank(), a[1]->loc, "axis");
  } else {
    for (int64_t i = 0; i < x->type.rank(); ++i) axes.push_back(i);
  }
  // mean: integers become floats (i32 -> f32, i64 -> f64, as JAX's mean); f16 and bf16 are
  // summed and divided in f32 and rounded once (as jnp.mean, which upcasts them).
  if (mean && !ir::isFloat(x->type.dtype)) x = convert(x, floatFor(x->type.dtype), c.loc);
  ir::DType resultType = x->type.dtype;
  if (mean && ir::isHalf(resultType)) x = convert(x, ir::DType::F32, c.loc);
  if (axes.empty()) return SVal::array(convert(x, resultType, c.loc), c.loc);
  ir::Value *r = emitByRules(p, {x}, {{"axes", axes}}, {c.loc});
  if (mean) {  // (the sum divided by how many elements it summed)
    const ir::Type &t = r->type;
    int64_t count = 1;
    for (int64_t axis : axes) count *= x->type.shape[axis];
    r = emit(ir::Prim::Div, {r, constant(t.dtype, t.shape, {(double)count}, c.loc)}, t, c.loc);
  }
  return SVal::array(convert(r, resultType, c.loc), c.loc);
}
SVal Sema::bSum(const ast::Expr &c) { return reduction(c, ir::Prim::ReduceSum, false); }
SVal Sema::bMean(const ast::Expr &c) { return reduction(c, ir::Prim::ReduceSum, true); }
SVal Sema::bMax(const ast::Expr &c) { return reduction(c, ir::Prim::ReduceMax, false); }
SVal Sema::bMin(const ast::Expr &c) { return reduction(c, ir::Prim::ReduceMin, false); }

} // namespace shmapc::sema
